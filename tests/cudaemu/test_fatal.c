// Fatal CUDA errors of the op layer on the CPU execution of the CUDA model: each mode must
// die with ZT_EXIT_CUDA (4) and a message that names what the user has to fix. Run by
// tests/cudaemu.cmake, which checks the exit code and the message.
//   --oom         an allocation larger than the device: cudaMalloc's error and the size
//   --unaligned   a product whose A operand is not 2-byte aligned: cuBLASLt's heuristic
//                 refuses it, and the message must name the problem (m, n, k, ld,
//                 alignment), not just "cuBLAS status 15"
//   --oob         a kernel reading past an allocation (a row of embeddings past the table)
//   --doc-pos     attention given a document position that is not one (pos[i] > i): the
//                 softmax kernel traps instead of unmasking keys of another block
//   --doc-pos-tiled the same through the tiled attention (its first-key kernel traps)
//   --cudnn-docs  a decoder layer on the cuDNN attention given document positions: cuDNN's
//                 causal graph would attend across packed documents, so it is refused
#include <stdio.h>
#include <string.h>

#include "kernels/cuda/zt_cuda.h"
#include "model/qwen3_cuda_layer.h"

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "";
    if (!strcmp(mode, "--oom")) {
        zt_cuda_malloc((size_t)1 << 50);
    } else if (!strcmp(mode, "--unaligned")) {
        zt_cuda_ctx *c = zt_cuda_ctx_create();
        char *a = zt_cuda_malloc(4096), *b = zt_cuda_malloc(4096);
        float *y = zt_cuda_malloc(4096);
        zt_cuda_fill_nan(a, ZT_BF16, 2048, NULL);
        zt_cuda_fill_nan(b, ZT_BF16, 2048, NULL);
        zt_cuda_gemm(c, NULL, y, ZT_F32, 16, 0, (const zt_bf16 *)(a + 1), 0, 16, 0, (const zt_bf16 *)b, 0, 16, 0, 16,
                     16, 16, 1, 1.0f, 0.0f);
        zt_cuda_sync(NULL, "product");
    } else if (!strcmp(mode, "--oob")) {
        zt_bf16 *x = zt_cuda_malloc(8 * 64 * 2), *w = zt_cuda_malloc(10 * 64 * 2);
        uint32_t *tok = zt_cuda_malloc(8 * 4);
        uint32_t h[8] = {0, 1, 2, 3, 4, 5, 6, 7};
        zt_cuda_memcpy_h2d(tok, h, sizeof h);
        zt_cuda_fill_nan(w, ZT_BF16, 10 * 64, NULL);
        // V = 12 claims a longer table than the 10 rows allocated: token 7 is fine, but the
        // check passes ids up to 11 and a row past the end would be read; here rows 0..7.
        zt_cuda_embedding_fwd(NULL, x, w, tok, 8, 64, 12);
        zt_cuda_sync(NULL, "embedding");
        h[3] = 11;  // inside the claimed vocabulary, past the allocation
        zt_cuda_memcpy_h2d(tok, h, sizeof h);
        zt_cuda_embedding_fwd(NULL, x, w, tok, 8, 64, 12);
        zt_cuda_sync(NULL, "embedding past the table");
    } else if (!strcmp(mode, "--doc-pos") || !strcmp(mode, "--doc-pos-tiled") || !strcmp(mode, "--doc-pos-tc")) {
        enum { S = 8, H = 2, D = 16 };
        zt_cuda_ctx *c = zt_cuda_ctx_create();
        zt_bf16 *q = zt_cuda_malloc(S * H * D * 2), *o = zt_cuda_malloc(S * H * D * 2);
        float *lse = zt_cuda_malloc(H * S * 4);
        int32_t *pos = zt_cuda_malloc(S * 4);
        const int32_t h[S] = {0, 1, 2, 0, 6, 2, 0, 1};  // query 4 claims 6 earlier tokens of its block: 4
        zt_cuda_memcpy_h2d(pos, h, sizeof h);
        zt_cuda_fill_uniform(q, ZT_BF16, S * H * D, -1.0f, 1.0f, 1, NULL);
        if (!strcmp(mode, "--doc-pos"))
            zt_cuda_attention_fwd(c, NULL, o, lse, q, q, q, pos, 1, S, H, H, D);
        else if (!strcmp(mode, "--doc-pos-tiled"))  // the tiled kernels' first-key kernel traps the same way
            zt_cuda_attention_tiled_fwd(c, NULL, o, lse, q, q, q, pos, 1, S, H, H, D);
        else  // and the tensor-core kernels' (attention_tc.cu)
            zt_cuda_attention_tc_fwd(c, NULL, o, lse, q, q, q, pos, 1, S, H, H, D);
        zt_cuda_sync(NULL, "attention with document positions");
    } else if (!strcmp(mode, "--cudnn-docs")) {
        const zt_qwen3_cuda_dims dm = {.B = 1, .S = 8, .N = 8, .d = 16, .F = 32, .H = 2, .Hkv = 1, .D = 8, .eps = 1e-6f,
                                   .attention = ZT_ATTN_CUDNN};  // as --attention cudnn in a build with cuDNN
        int64_t off[ZT_L_NTENSORS + 1];
        zt_qwen3_cuda_layer_offsets(&dm, off);
        zt_cuda_ctx *c = zt_cuda_ctx_create();
        zt_bf16 *params = zt_cuda_malloc((size_t)off[ZT_L_NTENSORS] * 2), *x = zt_cuda_malloc(8 * 16 * 2);
        zt_bf16 *y = zt_cuda_malloc(8 * 16 * 2);
        float *rc = zt_cuda_malloc(8 * 4 * 4), *rs = zt_cuda_malloc(8 * 4 * 4);
        int32_t *pos = zt_cuda_malloc(8 * 4);
        const int32_t h[8] = {0, 1, 2, 0, 1, 2, 3, 0};
        zt_cuda_memcpy_h2d(pos, h, sizeof h);
        zt_cuda_fill_uniform(params, ZT_BF16, off[ZT_L_NTENSORS], -0.1f, 0.1f, 1, NULL);
        zt_cuda_fill_uniform(x, ZT_BF16, 8 * 16, -1.0f, 1.0f, 2, NULL);
        zt_cuda_rope_table(NULL, rc, rs, 8, 8, 1e4);
        zt_qwen3_cuda_acts a;
        zt_qwen3_cuda_acts_alloc(&a, &dm);
        zt_qwen3_cuda_layer_fwd(c, NULL, &dm, params, rc, rs, pos, x, y, &a, NULL);
        zt_cuda_sync(NULL, "layer");
    } else {
        fprintf(stderr, "usage: test_fatal --oom | --unaligned | --oob | --doc-pos | --doc-pos-tiled | --cudnn-docs\n");
        return 2;
    }
    printf("no fatal error\n");
    return 0;
}
