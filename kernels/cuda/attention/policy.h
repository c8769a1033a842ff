// The CUDA backend's attention kinds and the --attention auto policy: which implementation a
// GPU layer runs, decided once, here. Pure C (no CUDA): compiled into zt_kernels so that the
// trainer and the planner choose without the CUDA module; the module's dispatcher
// (kernels/cuda/attention/dispatch.h) runs the kind chosen.
// defines: zt_attn_kind, zt_attn_auto_in, zt_attn_choose, zt_attn_gemm_auto_scratch, zt_attn_kind_name,
//          zt_attn_split_check
#ifndef ZT_ATTN_POLICY_H
#define ZT_ATTN_POLICY_H
#include <stdint.h>

#include "base/common.h"  // zt_err

// The one enum of attention kinds (--attention, zt_fsdp_opts.attention, the families' dims).
// AUTO is a request, never a kind a layer runs: zt_attn_choose resolves it.
// TILED: 64 x 64 tiles, online softmax, O(S x D) scratch: the tensor-core kernels
// (attention_tc.cu) where head_dim is a multiple of 16 up to 128, the scalar tiled kernels
// (attention_tiled.cu) otherwise (head_dim up to 256, a multiple of 8). CUDNN: cuDNN's fused
// flash attention (attention_cudnn.cu; refused where it is not built). GEMM: cuBLASLt products
// and a fused causal softmax over S x S scratch (attention.cu).
typedef enum { ZT_ATTN_AUTO = -1, ZT_ATTN_TILED = 0, ZT_ATTN_CUDNN = 1, ZT_ATTN_GEMM = 2 } zt_attn_kind;

// --attention auto picks GEMM only while its scratch (zt_attn_gemm_auto_scratch) stays under this:
// bytes, S <= ~9,400 tokens at g = 8.
#define ZT_AUTO_GEMM_SCRATCH (8.0 * 1024 * 1024 * 1024)

// What the policy looks at.
typedef struct {
    int cuda;          // the GPU engine runs (the CPU engine has one attention; the choice is then unused)
    int isolated;      // packed documents kept apart (document-causal attention)
    int context;       // C: ranks sharing each block (<= 1: no context split)
    // 1 when the CUDA module has cuDNN's attention and the family's GPU passes run it (the trainer
    // passes zt_fsdp_cuda_cudnn_serves, which loads the module): asked only when the choice
    // reaches step 1's last condition, as before the policy moved here
    int (*cudnn_serves)(const void *arg);
    const void *cudnn_arg;
    int64_t S, H, Hkv, D;  // block tokens, query heads, KV heads, head_dim
} zt_attn_auto_in;

// asked != ZT_ATTN_AUTO: asked. AUTO:
//   1. CUDNN when cuda, not isolated, no context split (C <= 1) and cudnn_serves(): a Qwen3-32B layer
//      on an H200 ran 1.18x / 1.65x faster with it than with GEMM at 2,048 / 8,192 tokens and it
//      needs no S x S scratch (docs/gpu-runs/2026-12-04-h200/full). Isolated documents go to cuDNN
//      only as its variable-length batch (cuDNN >= 9.6), which has never run on a GPU: auto leaves
//      them to the next steps; a context split gives no positions cuDNN could take.
//   2. else GEMM while zt_attn_gemm_auto_scratch <= ZT_AUTO_GEMM_SCRATCH: 2.8x / 4.6x faster than
//      the tiled kernels on the same H200 (before their tensor-core version; 2026-12-04-h200/tiled).
//   3. else TILED (O(S x D) scratch; GEMM's is ~103 GB for a 32B layer at 32,768 tokens).
// head_dim enters through the scratch; the cuDNN version only through cudnn_serves' family rule.
zt_attn_kind zt_attn_choose(int asked, const zt_attn_auto_in *in);
// The GEMM path's scratch as auto counts it: 12 g S^2 + 8 g S D + 4 g S bytes, g = H / Hkv.
double zt_attn_gemm_auto_scratch(const zt_attn_auto_in *in);
// "tiled", "cudnn", "gemm", "auto" (the --attention spelling); "?" otherwise.
const char *zt_attn_kind_name(int kind);
// Whether a kind takes a context split of C ranks: 0, or -1 + zt_err naming the rule (the cuDNN
// attention takes no positions, which the split needs). The one copy of the rule: the trainer's
// start (engine/job_shape.c zt_context_check) and the GPU family's split (qwen3_cuda_context.c).
// Inline: the GPU family's objects link into test programs without zt_kernels.
static inline int zt_attn_split_check(int kind, int C) {
    if (C > 1 && kind == ZT_ATTN_CUDNN)
        return zt_err("--context-parallel %d with --attention cudnn: the cuDNN attention takes no positions, and "
                      "the split needs them (a query sees the keys of its block rows g - p .. g, a row held "
                      "elsewhere only its own key); use --attention tiled (the default) or gemm", C);
    return 0;
}

#endif
