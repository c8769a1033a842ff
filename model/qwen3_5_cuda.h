// Qwen3.5's GPU passes (model/qwen3_5_cuda_family.c: zt_qwen3_5_cuda_family, registered in
// model/family_cuda.c as "qwen3_5"): what the tests read of a bound model beside the table.
// defines: zt_qwen3_5_cuda_family, zt_qwen3_5_cuda_act_bytes, zt_qwen3_5_cuda_layer_bytes
#ifndef ZT_QWEN3_5_CUDA_H
#define ZT_QWEN3_5_CUDA_H
#include <stdint.h>

#include "model/family_cuda.h"

extern const zt_family_cuda zt_qwen3_5_cuda_family;
// Device bytes the bound model (from the table's create) allocated, counted at each allocation.
int64_t zt_qwen3_5_cuda_act_bytes(const void *m);
// The bytes layer l keeps for its backward (the formula in model/qwen3_5_cuda_family.c; 0 with
// recompute, where one set per layer kind serves every layer: counted in act_bytes only).
int64_t zt_qwen3_5_cuda_layer_bytes(const void *m, int l);
#endif
