// The CUDA backend's attention kinds and the --attention auto policy: which implementation a
// GPU layer runs, decided once, here. Pure C (no CUDA): compiled into zt_kernels so that the
// trainer and the planner choose without the CUDA module; the module's dispatcher
// (kernels/cuda/attention/dispatch.h) runs the kind chosen.
// defines: zt_attn_kind, zt_attn_auto_in, zt_attn_choose, zt_attn_gemm_auto_scratch, zt_attn_kind_name,
//          zt_attn_split_check, zt_attn_cudnn_head_dim, ZT_CUDNN_D256_SM100_VERSION
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
// head_dim enters through the scratch and, with the GPU and the cuDNN version, through cudnn_serves:
// a family whose head_dim is over 128 (Qwen3.5's 256) asks zt_attn_cudnn_head_dim below for the
// device and cuDNN it runs on (model/family_cuda.h cudnn_serves).
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

// The cuDNN attention's head_dim rule for training (forward and backward graphs; the backward's is
// the narrower), as the vendored cuDNN frontend (third_party/cudnn_frontend 1.32,
// node/scaled_dot_product_flash_attention.h: the backward's validate; sdpa_support_surface.h: the
// forward's) and cuDNN's support matrix (backend 9.18.1: Ampere/Ada backward d <= 128, Hopper d <= 256)
// give it:
//   D a multiple of 8 up to 128: every GPU cuDNN's SDPA runs on (sm_80 and newer);
//   D a multiple of 8 in (128, 256]: Hopper (sm_90: compute capability 9.x), any cuDNN 9 the frontend
//     takes (the 9.11-9.12 restriction it names is for d_qk 192 with d_v 128 only);
//   D = 256 exactly (d_qk = d_v = 256) on Blackwell (compute capability 10.x: B200, B300) from cuDNN
//     9.23.0 (ZT_CUDNN_D256_SM100_VERSION: its d256 backward); below that, and for other D over 128
//     there, the frontend refuses the backward;
//   else (Ampere/Ada, sm_12x, D > 256, D not a multiple of 8): not.
// sm: compute capability major * 10 + minor (90: H100/H200; 100: B200; 103: B300); version:
// cudnnGetVersion() (91900 = 9.19.0; 0: no cuDNN). 0, or -1 + zt_err naming the rule. COMPILED ONLY:
// no GPU has run the cuDNN attention at head_dim 256. Inline for the same reason as the split check.
#define ZT_CUDNN_D256_SM100_VERSION 92300
static inline int zt_attn_cudnn_head_dim(int64_t D, int sm, int64_t version) {
    if (D > 0 && D % 8 == 0 && D <= 128) return 0;
    if (D > 0 && D % 8 == 0 && D <= 256 && sm / 10 == 9) return 0;
    if (D == 256 && sm / 10 == 10 && version >= ZT_CUDNN_D256_SM100_VERSION) return 0;
    return zt_err("--attention cudnn at head_dim %lld on sm_%d with cuDNN %lld.%lld.%lld: cuDNN's attention backward "
                  "takes head_dim (a multiple of 8) up to 128 on every GPU, up to 256 on Hopper (sm_90), and "
                  "exactly 256 on Blackwell (sm_100/sm_103) from cuDNN 9.23.0; use --attention tiled or gemm",
                  (long long)D, sm, (long long)(version / 10000), (long long)(version / 100 % 100),
                  (long long)(version % 100));
}

#endif
