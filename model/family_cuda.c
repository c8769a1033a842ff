// The families whose GPU passes this CUDA module holds (model/family_cuda.h). Adding a
// family: one line below, beside its table in model/ (e.g. model/qwen3_cuda_family.c).
// defines: zt_family_cuda_find
#include "model/family_cuda.h"

#include <string.h>

extern const zt_family_cuda zt_qwen3_cuda_family;    // model/qwen3_cuda_family.c
extern const zt_family_cuda zt_qwen3_5_cuda_family;  // model/qwen3_5_cuda_family.c

static const zt_family_cuda *const families[] = {&zt_qwen3_cuda_family, &zt_qwen3_5_cuda_family, NULL};

const zt_family_cuda *zt_family_cuda_find(const char *name) {
    for (int i = 0; name && families[i]; i++)
        if (!strcmp(families[i]->name, name)) return families[i];
    return NULL;
}
