// Loading the CUDA module (runtime/cuda_module.h).
#include "runtime/cuda_module.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "runtime/common.h"

#ifndef ZT_CUDA_MODULE_BUILD_DIR
#define ZT_CUDA_MODULE_BUILD_DIR ""
#endif

static const zt_cuda_module *g_linked;  // registered by CUDA code linked into this program
static const zt_cuda_module *g_mod;
static int g_tried;
static char g_why[4096];

static const zt_cuda_module *check(const zt_cuda_module *m, const char *where) {
    if (m->abi != ZT_CUDA_MODULE_ABI || m->fsdp_size != sizeof(zt_fsdp) || strcmp(m->version, ZT_VERSION)) {
        snprintf(g_why + strlen(g_why), sizeof g_why - strlen(g_why),
                 "\n  %s: built for another zerotrain (module %s, ABI %d, zt_fsdp %zu bytes; this executable %s, "
                 "ABI %d, %zu bytes): rebuild both",
                 where, m->version, m->abi, m->fsdp_size, ZT_VERSION, ZT_CUDA_MODULE_ABI, sizeof(zt_fsdp));
        return NULL;
    }
    return m;
}

static int g_found;  // a candidate file exists (else: not built or not installed)

static const zt_cuda_module *try_open(const char *path) {
    size_t n = strlen(g_why);
    if (access(path, F_OK) != 0) {
        snprintf(g_why + n, sizeof g_why - n, "\n  %.1024s: no such file", path);
        return NULL;
    }
    g_found = 1;
    const zt_cuda_module *linked = g_linked;
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    g_linked = linked;  // its constructor's registration: the table comes from its entry point below
    if (!h) {
        snprintf(g_why + n, sizeof g_why - n, "\n  %.1024s: %.1024s", path, dlerror());
        return NULL;
    }
    const zt_cuda_module *(*entry)(void) = (const zt_cuda_module *(*)(void))dlsym(h, "zt_cuda_module_entry");
    if (!entry) {
        snprintf(g_why + n, sizeof g_why - n, "\n  %.1024s: no zt_cuda_module_entry (not a zerotrain CUDA module)", path);
        dlclose(h);
        return NULL;
    }
    const zt_cuda_module *m = check(entry(), path);
    if (!m) dlclose(h);
    return m;
}

// Where the module is looked for, in order: $ZT_CUDA_MODULE alone when set; else beside the
// executable, ../lib/zerotrain/ beside it, the build directory.
static int candidates(char paths[4][PATH_MAX + 64]) {
    const char *env = getenv("ZT_CUDA_MODULE");
    if (env && *env) {
        snprintf(paths[0], sizeof paths[0], "%s", env);
        return 1;
    }
    int n = 0;
    char exe[PATH_MAX];
    ssize_t k = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (k > 0) {
        exe[k] = 0;
        char *slash = strrchr(exe, '/');
        if (slash) *slash = 0;
        snprintf(paths[n++], sizeof paths[0], "%s/%s", exe, ZT_CUDA_MODULE_FILE);
        snprintf(paths[n++], sizeof paths[0], "%s/../lib/zerotrain/%s", exe, ZT_CUDA_MODULE_FILE);
    }
    if (*ZT_CUDA_MODULE_BUILD_DIR)
        snprintf(paths[n++], sizeof paths[0], "%s/%s", ZT_CUDA_MODULE_BUILD_DIR, ZT_CUDA_MODULE_FILE);
    return n;
}

const char *zt_cuda_module_find(char *buf, size_t len) {
    if (g_linked) return snprintf(buf, len, "linked in"), buf;
    char paths[4][PATH_MAX + 64];
    const int n = candidates(paths);
    for (int i = 0; i < n; i++)
        if (access(paths[i], F_OK) == 0) return snprintf(buf, len, "%s", paths[i]), buf;
    return NULL;
}

const zt_cuda_module *zt_cuda_module_load(void) {
    if (g_mod) return g_mod;
    if (g_tried) {
        zt_err("the CUDA backend is not available (%s):%s", ZT_CUDA_MODULE_FILE, g_why);
        return NULL;
    }
    g_tried = 1;
    if (g_linked) return g_mod = check(g_linked, "linked in");
    char paths[4][PATH_MAX + 64];
    const int n = candidates(paths);
    for (int i = 0; i < n && !g_mod; i++) g_mod = try_open(paths[i]);
    if (!g_mod && !g_found) {
        zt_err("the CUDA backend is not available: this zerotrain was built without the GPU engine, or its module "
               "%s is not installed (it needs the CUDA toolkit and NCCL at configure time: docs/cuda.md; "
               "ZT_CUDA_MODULE names its file); looked for:%s",
               ZT_CUDA_MODULE_FILE, g_why);
        return NULL;
    }
    if (!g_mod) {
        zt_err("the CUDA backend is not available: %s was found but did not load (a CUDA library it needs is "
               "missing or broken?):%s", ZT_CUDA_MODULE_FILE, g_why);
        return NULL;
    }
    return g_mod;
}

int zt_cuda_module_loaded(void) { return g_mod != NULL; }

void zt_cuda_module_register(const zt_cuda_module *m) {
    if (!g_linked) g_linked = m;
}

int zt_cuda_driver_present(void) {
    return access("/proc/driver/nvidia/version", F_OK) == 0 || access("/dev/nvidiactl", F_OK) == 0;
}

int zt_cuda_comm_init(zt_comm **out, void *mpi_comm, int device, const zt_comm_opts *o) {
    const zt_cuda_module *m = zt_cuda_module_load();
    return m ? m->comm_init(out, mpi_comm, device, o) : -1;
}
