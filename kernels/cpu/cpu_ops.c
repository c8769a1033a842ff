// The CPU reference op table: fp32, matrix products by cpu_sgemm (gemm.c: one rounding
// order on every CPU), OpenMP for the rest. It is the readable spec that the CUDA ops
// (kernels/cuda/) are tested against.
#include "kernels/ops.h"
#include "kernels/cpu/cpu_internal.h"

const zt_ops zt_cpu_ops = {
    .name = "cpu",
    .matmul_fwd = cpu_matmul_fwd,
    .matmul_bwd = cpu_matmul_bwd,
    .embedding_fwd = cpu_embedding_fwd,
    .embedding_bwd = cpu_embedding_bwd,
    .rmsnorm_fwd = cpu_rmsnorm_fwd,
    .rmsnorm_bwd = cpu_rmsnorm_bwd,
    .rope_fwd = cpu_rope_fwd,
    .rope_bwd = cpu_rope_bwd,
    .attention_fwd = cpu_attention_fwd,
    .attention_bwd = cpu_attention_bwd,
    .attention_fwd_rows = cpu_attention_fwd_rows,
    .attention_bwd_rows = cpu_attention_bwd_rows,
    .swiglu_fwd = cpu_swiglu_fwd,
    .swiglu_bwd = cpu_swiglu_bwd,
    .lmhead_xent = cpu_lmhead_xent,
    .conv1d_silu_fwd = cpu_conv1d_silu_fwd,
    .conv1d_silu_bwd = cpu_conv1d_silu_bwd,
    .l2norm_fwd = cpu_l2norm_fwd,
    .l2norm_bwd = cpu_l2norm_bwd,
    .rmsnorm_gated_fwd = cpu_rmsnorm_gated_fwd,
    .rmsnorm_gated_bwd = cpu_rmsnorm_gated_bwd,
    .delta_fwd = cpu_delta_chunk_fwd,
    .delta_bwd = cpu_delta_chunk_bwd,
    .adamw = cpu_adamw,
    .sumsq = cpu_sumsq,
    .scale = cpu_scale,
    .add = cpu_add,
};
