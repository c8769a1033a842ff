// run.json's "libraries" (train/device_info.c zt_library_versions): what the process has loaded,
// read from the libraries themselves. MPI and HDF5 always (linked), with HDF5's version as its
// headers give it; cuBLASLt, cuDNN and NCCL only once loaded: absent before, and after dlopen of
// the files the build found (argv: their paths; none on a host without the CUDA toolkit) present
// with a M.m.p version and the file they were loaded from.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/support/test_util.h"
#include "train/device_info.h"

static const char *str(const cJSON *o, const char *a, const char *b) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, a);
    if (b) v = cJSON_GetObjectItemCaseSensitive(v, b);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

int main(int argc, char **argv) {
    const char *keys[] = {"cublaslt", "cudnn", "nccl"};
    cJSON *before = zt_library_versions();
    char h5[32];
    snprintf(h5, sizeof h5, "%d.%d.%d", H5_VERS_MAJOR, H5_VERS_MINOR, H5_VERS_RELEASE);
    CHECK(str(before, "mpi", NULL) && strlen(str(before, "mpi", NULL)) > 3, "mpi version");
    CHECK(str(before, "hdf5", NULL) && !strcmp(str(before, "hdf5", NULL), h5), "hdf5 %s, headers %s",
          str(before, "hdf5", NULL), h5);
    for (int k = 0; k < 3; k++) CHECK(!cJSON_GetObjectItemCaseSensitive(before, keys[k]), "%s before loading", keys[k]);
    cJSON_Delete(before);
    int loaded = 0;
    for (int i = 1; i < argc; i++) {
        if (!dlopen(argv[i], RTLD_NOW | RTLD_GLOBAL)) {
            printf("not loaded (%s): %s\n", dlerror(), argv[i]);
            continue;
        }
        loaded++;
    }
    cJSON *after = zt_library_versions();
    int found = 0;
    for (int k = 0; k < 3; k++) {
        const char *v = str(after, keys[k], "version"), *f = str(after, keys[k], "file");
        if (!v) continue;
        found++;
        int a, b, c;
        CHECK(sscanf(v, "%d.%d.%d", &a, &b, &c) == 3 && a >= 1 && a < 100, "%s version '%s'", keys[k], v);
        CHECK(f && strstr(f, keys[k][2] == 'b' ? "libcublasLt.so" : keys[k][2] == 'd' ? "libcudnn.so" : "libnccl.so"),
              "%s file %s", keys[k], f ? f : "(none)");
        // the major version decoded from the library's own number is the soname's (libnccl.so.2)
        char real[4096];
        const char *so = f && realpath(f, real) ? strstr(real, ".so.") : NULL;
        CHECK(so && atoi(so + 4) == a, "%s: version %s, but the file is %s", keys[k], v, so ? real : "(unresolved)");
        printf("%s %s from %s (%s)\n", keys[k], v, f, so ? real : "?");
    }
    CHECK(found == loaded, "%d libraries loaded, %d reported", loaded, found);
    char *text = cJSON_PrintUnformatted(after);
    printf("%s\n", text);
    free(text);
    cJSON_Delete(after);
    printf("%d checks, %d failures\n", zt_test_checks, zt_test_failures);
    return zt_test_failures ? 1 : 0;
}
