// A stand-in libnvidia-ml.so.1 for machines without an NVIDIA driver: the nine NVML calls
// train/nvml.c makes, answering for ZT_FAKE_NVML_GPUS devices (default 1) with the board
// power read from the file ZT_FAKE_NVML_WATTS_FILE at each call (a test rewrites it to
// move the "GPU" between compute and a deadlock signature), else ZT_FAKE_NVML_WATTS, else
// 950 W; utilisation 97% above 385 W, 0% below. Put its directory first in
// LD_LIBRARY_PATH. Test infrastructure only: never linked into the product.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct { unsigned long long total, free, used; } nvml_memory;
typedef struct { unsigned int gpu, memory; } nvml_util;

static unsigned gpus(void) {
    const char *e = getenv("ZT_FAKE_NVML_GPUS");
    return e ? (unsigned)atoi(e) : 1;
}

static double watts(void) {
    const char *path = getenv("ZT_FAKE_NVML_WATTS_FILE");
    double w = 0;
    FILE *f = path ? fopen(path, "r") : NULL;
    if (f) {
        if (fscanf(f, "%lf", &w) != 1) w = 0;
        fclose(f);
        if (w > 0) return w;
    }
    const char *e = getenv("ZT_FAKE_NVML_WATTS");
    return e ? atof(e) : 950.0;
}

int nvmlInit_v2(void) { return 0; }
int nvmlDeviceGetCount_v2(unsigned int *n) {
    *n = gpus();
    return 0;
}
int nvmlDeviceGetHandleByIndex_v2(unsigned int i, void **d) {
    if (i >= gpus()) return 2;  // NVML_ERROR_INVALID_ARGUMENT
    *d = (void *)(size_t)(i + 1);
    return 0;
}
int nvmlDeviceGetName(void *d, char *name, unsigned int n) {
    snprintf(name, n, "Fake NVML GPU %zu (tests/fakenvml)", (size_t)d - 1);
    return 0;
}
int nvmlDeviceGetMemoryInfo(void *d, nvml_memory *m) {
    (void)d;
    m->total = 80ull << 30;
    m->used = 1ull << 30;
    m->free = m->total - m->used;
    return 0;
}
int nvmlSystemGetDriverVersion(char *v, unsigned int n) {
    snprintf(v, n, "fake-0.1");
    return 0;
}
int nvmlDeviceGetComputeRunningProcesses(void *d, unsigned int *n, void *infos) {
    (void)d, (void)infos;
    *n = 0;
    return 0;
}
int nvmlDeviceGetPowerUsage(void *d, unsigned int *mw) {
    (void)d;
    *mw = (unsigned int)(watts() * 1000.0);
    return 0;
}
int nvmlDeviceGetUtilizationRates(void *d, nvml_util *u) {
    (void)d;
    u->gpu = watts() > 385 ? 97 : 0;
    u->memory = u->gpu / 2;
    return 0;
}
