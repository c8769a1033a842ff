// A CUDA module from "another build" (tests/cuda_module.cmake): the right entry point with a
// wrong interface version, so the loader's check refuses it with a clear error (cuda_module_missing).
#include "engine/cuda_module.h"

static const zt_cuda_module fake = {.api_version = ZT_CUDA_MODULE_API + 1000, .version = "0.0.0-other"};

const zt_cuda_module *zt_cuda_module_entry(void) { return &fake; }
