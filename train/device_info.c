// What a run ran on (train/device_info.h): the device, the peak its MFU is measured against,
// and the libraries the process loaded, read from the libraries themselves.
#define _GNU_SOURCE
#include "train/device_info.h"

#include <dlfcn.h>
#include <hdf5.h>
#include <link.h>
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "engine/device_peak.h"
#include "kernels/ops.h"


double zt_cpu_gemm_probe(int n, double budget_s) {
    const size_t nn = (size_t)n * (size_t)n;
    float *a = zt_xmalloc(nn * sizeof(float)), *b = zt_xmalloc(nn * sizeof(float)), *c = zt_xmalloc(nn * sizeof(float));
    for (size_t i = 0; i < nn; i++) a[i] = (float)((i * 7) % 13) * 0.01f, b[i] = (float)((i * 5) % 11) * 0.01f;
    double best = 0;
    const double t_end = zt_now() + budget_s;
    for (int rep = 0; rep < 3 || zt_now() < t_end; rep++) {
        const double t0 = zt_now();
        zt_cpu_ops.matmul_fwd(c, a, b, n, n, n);
        const double dt = zt_now() - t0;
        if (dt > 0 && 2.0 * n * n * (double)n / dt > best) best = 2.0 * n * n * (double)n / dt;
        if (rep > 1000) break;
    }
    free(a), free(b), free(c);
    return best;
}

static void cpu_model_name(char *buf, size_t n) {
    snprintf(buf, n, "CPU");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return;
    char line[512];
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, "model name", 10) && strchr(line, ':')) {
            const char *v = strchr(line, ':') + 1;
            while (*v == ' ' || *v == '\t') v++;
            snprintf(buf, n, "%s", v);
            buf[strcspn(buf, "\n")] = 0;
            break;
        }
    fclose(f);
}

// The GPU's name in the cuda backend's description, "cuda backend: NAME, sm_90, ... (device 0), ...",
// which the CUDA runtime's cudaGetDeviceProperties gave (engine/fsdp_cuda.c describe).
static void cuda_device_name(const char *backend, char *buf, size_t n) {
    const char *p = strstr(backend, "cuda backend: ");
    p = p ? p + 14 : backend;
    size_t len = strlen(p);
    // the name ends at ", sm_NN," (zt_cuda_device_describe's next field), the first one whose
    // digits a comma follows (a name may hold "sm_90" itself), else at " (device"
    for (const char *sm = strstr(p, ", sm_"); sm; sm = strstr(sm + 1, ", sm_")) {
        const char *d = sm + 5;
        while (*d >= '0' && *d <= '9') d++;
        if (d > sm + 5 && *d == ',') {
            len = (size_t)(sm - p);
            break;
        }
    }
    const char *dev = strstr(p, " (device");
    if (dev && (size_t)(dev - p) < len) len = (size_t)(dev - p);
    snprintf(buf, n, "%.*s", (int)len, p);
}

void zt_run_device(const zt_train_opts *o, flops_acct *fa, int cuda, int rank, int threads, const char *backend) {
    char nthreads[48];
    snprintf(nthreads, sizeof nthreads, "%d thread%s", threads, threads == 1 ? "" : "s");
    fa->peak_flops = NAN;
    fa->peak_kind = ZT_PEAK_UNKNOWN;
    if (cuda) {
        cuda_device_name(backend, fa->device_name, sizeof fa->device_name);
    } else {
        cpu_model_name(fa->device_name, sizeof fa->device_name);
    }
    const char *preset = NULL;
    double peak = 0;
    if (o->peak_tflops > 0) {
        fa->peak_flops = o->peak_tflops * 1e12;
        fa->peak_kind = ZT_PEAK_GIVEN;
        snprintf(fa->peak_source, sizeof fa->peak_source, "--peak-tflops %g (given)", o->peak_tflops);
    } else if (cuda) {
        if (zt_device_peak(fa->device_name, &preset, &peak)) {
            fa->peak_flops = peak;
            fa->peak_kind = ZT_PEAK_PRESET;
            snprintf(fa->peak_source, sizeof fa->peak_source, "dense bf16 peak of the %s preset (`zerotrain plan`), matched "
                     "by the device name", preset);
        } else {
            snprintf(fa->peak_source, sizeof fa->peak_source, "unknown: the device name matches no preset (B300, B200, "
                     "H200, H100); give --peak-tflops");
        }
    } else {
        // every rank at once (they all leave the previous agreed phase together): the rate one
        // rank gets while the others compute too
        const int n = 512;
        fa->peak_flops = zt_cpu_gemm_probe(n, 0.05);
        fa->peak_kind = ZT_PEAK_CPU_PROBE;
        snprintf(fa->peak_source, sizeof fa->peak_source, "measured: fp32 GEMM probe on this CPU at start (%d x %d x %d "
                 "through the CPU op table, its %s sgemm kernel, %s per rank, every rank at once), not a GPU peak", n, n, n,
                 zt_cpu_gemm_kernel(), nthreads);
    }
    if (rank == 0 && fa->peak_kind == ZT_PEAK_UNKNOWN)
        fprintf(stderr, "zerotrain: warning: MFU: %s ('%s'); TFLOP/s are logged, MFU is null\n", fa->peak_source,
                fa->device_name);
}

// ---- library versions ----

typedef struct {
    const char *prefix;  // file name prefix of the shared object
    char path[1024];
} lib_find;

static int find_lib(struct dl_phdr_info *info, size_t size, void *arg) {
    (void)size;
    lib_find *l = arg;
    const char *base = info->dlpi_name ? strrchr(info->dlpi_name, '/') : NULL;
    base = base ? base + 1 : info->dlpi_name;
    if (base && !strncmp(base, l->prefix, strlen(l->prefix))) {
        snprintf(l->path, sizeof l->path, "%s", info->dlpi_name);
        return 1;
    }
    return 0;
}

// A loaded library's version from its own function: {"version": "M.m.p", "file": path}; NULL
// when the process has not loaded it.
static cJSON *loaded_version(const char *prefix, const char *fn, int nccl_style) {
    lib_find l = {prefix, ""};
    dl_iterate_phdr(find_lib, &l);
    if (!l.path[0]) return NULL;
    void *h = dlopen(l.path, RTLD_NOW | RTLD_NOLOAD);
    if (!h) return NULL;
    void *sym = dlsym(h, fn);
    long v = -1;
    if (sym && nccl_style) {
        int iv = -1;
        if (((int (*)(int *))sym)(&iv) == 0) v = iv;
    } else if (sym) {
        v = (long)((size_t(*)(void))sym)();
    }
    dlclose(h);
    cJSON *o = cJSON_CreateObject();
    char ver[48] = "unknown";
    if (v >= 10000) snprintf(ver, sizeof ver, "%ld.%ld.%ld", v / 10000, v / 100 % 100, v % 100);
    else if (v >= 1000) snprintf(ver, sizeof ver, "%ld.%ld.%ld", v / 1000, v / 100 % 10, v % 100);  // old style
    cJSON_AddStringToObject(o, "version", ver);
    cJSON_AddStringToObject(o, "file", l.path);
    return o;
}

cJSON *zt_library_versions(void) {
    cJSON *o = cJSON_CreateObject();
    char mpi[MPI_MAX_LIBRARY_VERSION_STRING] = "";
    int len = 0;
    if (MPI_Get_library_version(mpi, &len) == MPI_SUCCESS) {
        mpi[strcspn(mpi, "\n")] = 0;
        cJSON_AddStringToObject(o, "mpi", mpi);
    }
    unsigned maj = 0, min = 0, rel = 0;
    if (H5get_libversion(&maj, &min, &rel) >= 0) {
        char h5[32];
        snprintf(h5, sizeof h5, "%u.%u.%u", maj, min, rel);
        cJSON_AddStringToObject(o, "hdf5", h5);
    }
    cJSON_AddStringToObject(o, "cpu_gemm", zt_cpu_gemm_kernel());  // kernels/cpu/gemm.c, no BLAS library
    const struct { const char *key, *prefix, *fn; int nccl; } gpu[] = {
        {"cublaslt", "libcublasLt.so", "cublasLtGetVersion", 0},
        {"cudnn", "libcudnn.so", "cudnnGetVersion", 0},
        {"nccl", "libnccl.so", "ncclGetVersion", 1},
    };
    for (size_t i = 0; i < sizeof gpu / sizeof gpu[0]; i++) {
        cJSON *v = loaded_version(gpu[i].prefix, gpu[i].fn, gpu[i].nccl);
        if (v) cJSON_AddItemToObject(o, gpu[i].key, v);
    }
    return o;
}
