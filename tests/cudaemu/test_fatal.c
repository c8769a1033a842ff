// Fatal CUDA errors of the op layer on the CPU execution of the CUDA model: each mode must
// die with ZT_EXIT_CUDA (4) and a message that names what the user has to fix. Run by
// tests/cudaemu.cmake, which checks the exit code and the message.
//   --oom         an allocation larger than the device: cudaMalloc's error and the size
//   --unaligned   a product whose A operand is not 2-byte aligned: cuBLASLt's heuristic
//                 refuses it, and the message must name the problem (m, n, k, ld,
//                 alignment), not just "cuBLAS status 15"
//   --oob         a kernel reading past an allocation (a row of embeddings past the table)
#include <stdio.h>
#include <string.h>

#include "kernels/cuda/zt_cuda.h"

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
    } else {
        fprintf(stderr, "usage: test_fatal --oom | --unaligned | --oob\n");
        return 2;
    }
    printf("no fatal error\n");
    return 0;
}
