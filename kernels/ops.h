// The op table: every numerical kernel the model and optimizer need, as function
// pointers; zt_cpu_ops (kernels/cpu/) is the one table, the fp32 reference. There is
// no CUDA table: the CUDA ops are plain bf16 functions in kernels/cuda/zt_cuda.h
// (one .cu per op, as here), which the families' GPU passes (model/*_cuda*.c) call
// directly. All tensors are row-major fp32 here; weights
// are [out, in] as in Hugging Face (y = x W^T).
// Gradient rule (as in llm.c): parameter gradients accumulate (+=), activation
// gradients assign (=) unless the argument says otherwise.
// defines: zt_ops, zt_cpu_ops, zt_rope_table_freqs, zt_rope_table, zt_cpu_gemm_kernel
#ifndef ZT_OPS_H
#define ZT_OPS_H
#include <stdint.h>

#include "kernels/rope_freqs.h"

typedef struct zt_ops {
    const char *name;

    // y[M,N] = x[M,K] W[N,K]^T
    void (*matmul_fwd)(float *y, const float *x, const float *w, int64_t M, int64_t K, int64_t N);
    // dx[M,K] = dy W (accumulate_dx: +=), dw[N,K] += dy^T x. Either output may be NULL.
    void (*matmul_bwd)(float *dx, float *dw, const float *dy, const float *x, const float *w, int64_t M, int64_t K,
                       int64_t N, int accumulate_dx);

    // x[N,d] = W[tokens[i], :]
    void (*embedding_fwd)(float *x, const float *w, const uint32_t *tokens, int64_t N, int64_t d);
    // dw[tokens[i], :] += dx[i, :]  (deterministic: rows in order)
    void (*embedding_bwd)(float *dw, const float *dx, const uint32_t *tokens, int64_t N, int64_t d);

    // y = w * x * rsqrt(mean(x^2) + eps) per row of length d; rstd[rows] saved.
    void (*rmsnorm_fwd)(float *y, float *rstd, const float *x, const float *w, int64_t rows, int64_t d, float eps);
    // dx = (assign), dw += ; may be called in place only if dx != dy.
    void (*rmsnorm_bwd)(float *dx, float *dw, const float *dy, const float *x, const float *w, const float *rstd,
                        int64_t rows, int64_t d);

    // Half-split RoPE in place on x[B*S, nheads, D]; cos/sin tables are [S, D/2].
    // pos[B*S]: token t's position (0 <= pos[t] < S); NULL: positions restart at 0 each
    // block (pos[t] = t % S). Packed documents pass their positions inside the document.
    void (*rope_fwd)(float *x, const float *cos_t, const float *sin_t, const int32_t *pos, int64_t B, int64_t S,
                     int64_t nheads, int64_t D);
    void (*rope_bwd)(float *dx, const float *cos_t, const float *sin_t, const int32_t *pos, int64_t B, int64_t S,
                     int64_t nheads, int64_t D);

    // Causal GQA attention. q[B*S, H*D], k/v[B*S, Hkv*D], o[B*S, H*D].
    // pos NULL: query i of a block sees keys 0..i. pos[B*S] (document positions, as for
    // RoPE): query i sees keys i - pos[i] .. i of its block, i.e. only the earlier tokens of
    // its own document (packed documents stay apart).
    // stats[B, H, S, 2] is saved for backward: each query row's softmax max and 1/sum (the
    // CPU reference recomputes the probabilities from them; nothing of size S x S is kept).
    void (*attention_fwd)(float *o, float *stats, const float *q, const float *k, const float *v, const int32_t *pos,
                          int64_t B, int64_t S, int64_t H, int64_t Hkv, int64_t D);
    // dq, dk, dv assigned; o is the forward's output.
    void (*attention_bwd)(float *dq, float *dk, float *dv, const float *dout, const float *o, const float *stats,
                          const float *q, const float *k, const float *v, const int32_t *pos, int64_t B, int64_t S,
                          int64_t H, int64_t Hkv, int64_t D);

    // h = silu(g) * u
    void (*swiglu_fwd)(float *h, const float *g, const float *u, int64_t n);
    // dg, du assigned
    void (*swiglu_bwd)(float *dg, float *du, const float *dh, const float *g, const float *u, int64_t n);

    // Fused lm_head + cross-entropy: logits = x[N,d] W[V,d]^T computed a chunk of
    // rows at a time (never N x V at once). targets[i] < 0 means "no target".
    // Returns the sum of -log p(target) over rows with a target. When dx/dw are
    // non-NULL, also dx = scale * dlogits W (assign) and dw += scale * dlogits^T x,
    // where dlogits = softmax - onehot.
    double (*lmhead_xent)(float *dx, float *dw, const float *x, const float *w, const int32_t *targets, int64_t N,
                          int64_t d, int64_t V, float scale);

    // Decoupled-weight-decay Adam (torch.optim.AdamW semantics), step t >= 1.
    void (*adamw)(float *p, const float *g, float *m, float *v, int64_t n, float lr, float beta1, float beta2,
                  float eps, float weight_decay, int64_t t);
    // sum of squares in double
    double (*sumsq)(const float *x, int64_t n);
    // x *= s
    void (*scale)(float *x, float s, int64_t n);
    // y = a + b (y may alias a or b): residual connections
    void (*add)(float *y, const float *a, const float *b, int64_t n);
} zt_ops;

extern const zt_ops zt_cpu_ops;

// RoPE cos/sin table [S, D/2] with torch's fp32 arithmetic: inv_freq_i from
// kernels/rope_freqs.h (plain: 1 / theta^(2i/D); or YaRN), angle = pos * inv_freq_i (fp32),
// cos and sin of it times f->attention (fp32; YaRN's attention factor, 1 when plain).
void zt_rope_table_freqs(float *cos_t, float *sin_t, int64_t S, int64_t D, const zt_rope_freqs *f);
// Plain RoPE of base theta.
void zt_rope_table(float *cos_t, float *sin_t, int64_t S, int64_t D, double theta);

// The matrix-product kernel in use ("AVX-512", "AVX2", "portable C"; kernels/cpu/gemm.c);
// NULL with the error set when ZT_CPU_GEMM names none this CPU runs.
const char *zt_cpu_gemm_kernel(void);
#endif
