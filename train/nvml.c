// Minimal NVML binding through dlopen. Only layout-independent calls are used: the
// process query asks for the count alone (infos = NULL), so the varying
// nvmlProcessInfo_t versions never matter.
#define _GNU_SOURCE
#include "train/nvml.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "base/common.h"

typedef void *nvml_dev;
typedef struct { unsigned long long total, free, used; } nvml_memory;
typedef struct { unsigned int gpu, memory; } nvml_util;

static struct {
    int state;  // 0 untried, 1 ready, -1 failed
    int (*init)(void);
    int (*count)(unsigned int *);
    int (*handle)(unsigned int, nvml_dev *);
    int (*name)(nvml_dev, char *, unsigned int);
    int (*mem)(nvml_dev, nvml_memory *);
    int (*driver)(char *, unsigned int);
    int (*procs)(nvml_dev, unsigned int *, void *);
    int (*power)(nvml_dev, unsigned int *);
    int (*util)(nvml_dev, nvml_util *);
    char why[256];
} N;

#define NVML_SUCCESS 0
#define NVML_ERROR_INSUFFICIENT_SIZE 7

int zt_nvml_open(void) {
    if (N.state == 1) return 0;
    if (N.state == -1) return zt_err("%s", N.why);
    void *h = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        snprintf(N.why, sizeof N.why, "NVML not available (libnvidia-ml.so.1: %s); no NVIDIA driver here", dlerror());
        N.state = -1;
        return zt_err("%s", N.why);
    }
#define SYM(field, name)                                                                     \
    do {                                                                                     \
        *(void **)&N.field = dlsym(h, name);                                                 \
        if (!N.field) {                                                                      \
            snprintf(N.why, sizeof N.why, "NVML: symbol %s missing in libnvidia-ml", name);  \
            N.state = -1;                                                                    \
            return zt_err("%s", N.why);                                                      \
        }                                                                                    \
    } while (0)
    SYM(init, "nvmlInit_v2");
    SYM(count, "nvmlDeviceGetCount_v2");
    SYM(handle, "nvmlDeviceGetHandleByIndex_v2");
    SYM(name, "nvmlDeviceGetName");
    SYM(mem, "nvmlDeviceGetMemoryInfo");
    SYM(driver, "nvmlSystemGetDriverVersion");
    SYM(procs, "nvmlDeviceGetComputeRunningProcesses");
    SYM(power, "nvmlDeviceGetPowerUsage");
    SYM(util, "nvmlDeviceGetUtilizationRates");
#undef SYM
    int rc = N.init();
    if (rc != NVML_SUCCESS) {
        snprintf(N.why, sizeof N.why, "nvmlInit failed (code %d)", rc);
        N.state = -1;
        return zt_err("%s", N.why);
    }
    N.state = 1;
    return 0;
}

int zt_nvml_device_count(void) {
    unsigned int n = 0;
    if (zt_nvml_open() != 0 || N.count(&n) != NVML_SUCCESS) return 0;
    return (int)n;
}

int zt_nvml_device_info(int index, zt_nvml_info *out) {
    memset(out, 0, sizeof *out);
    if (zt_nvml_open() != 0) return -1;
    nvml_dev d;
    if (N.handle((unsigned)index, &d) != NVML_SUCCESS) return zt_err("NVML: no GPU with index %d", index);
    N.name(d, out->name, sizeof out->name);
    N.driver(out->driver, sizeof out->driver);
    nvml_memory m;
    if (N.mem(d, &m) == NVML_SUCCESS) {
        out->mem_total = m.total;
        out->mem_used = m.used;
    }
    unsigned int n = 0;
    int rc = N.procs(d, &n, NULL);
    out->other_processes = (rc == NVML_SUCCESS || rc == NVML_ERROR_INSUFFICIENT_SIZE) ? (int)n : -1;
    return 0;
}

int zt_nvml_sample(int index, double *power_w, double *util_pct, double *mem_used_mib) {
    if (zt_nvml_open() != 0) return -1;
    nvml_dev d;
    if (N.handle((unsigned)index, &d) != NVML_SUCCESS) return zt_err("NVML: no GPU with index %d", index);
    unsigned int mw = 0;
    nvml_util u = {0, 0};
    nvml_memory m = {0, 0, 0};
    if (N.power(d, &mw) != NVML_SUCCESS || N.util(d, &u) != NVML_SUCCESS || N.mem(d, &m) != NVML_SUCCESS)
        return zt_err("NVML: sampling GPU %d failed", index);
    *power_w = mw / 1000.0;
    *util_pct = u.gpu;
    *mem_used_mib = (double)m.used / (1024.0 * 1024.0);
    return 0;
}
