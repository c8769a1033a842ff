// The --attention auto policy (kernels/cuda/attention/policy.h): the only place that decides
// which attention the GPU layers run.
#include "kernels/cuda/attention/policy.h"

double zt_attn_gemm_auto_scratch(const zt_attn_auto_in *in) {
    const double g = (double)in->H / (double)in->Hkv, S = (double)in->S;
    return 12 * g * S * S + 8 * g * S * (double)in->D + 4 * g * S;
}

zt_attn_kind zt_attn_choose(int asked, const zt_attn_auto_in *in) {
    if (asked != ZT_ATTN_AUTO) return (zt_attn_kind)asked;
    if (in->cuda && !in->isolated && in->context <= 1 && in->cudnn_serves && in->cudnn_serves(in->cudnn_arg))
        return ZT_ATTN_CUDNN;
    if (zt_attn_gemm_auto_scratch(in) <= ZT_AUTO_GEMM_SCRATCH) return ZT_ATTN_GEMM;
    return ZT_ATTN_TILED;
}

const char *zt_attn_kind_name(int kind) {
    switch (kind) {
    case ZT_ATTN_AUTO: return "auto";
    case ZT_ATTN_TILED: return "tiled";
    case ZT_ATTN_CUDNN: return "cudnn";
    case ZT_ATTN_GEMM: return "gemm";
    default: return "?";
    }
}
