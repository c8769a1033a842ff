// The op table: every numerical kernel the model and optimizer need, as function
// pointers; zt_cpu_ops (kernels/cpu/) is the one table, the fp32 reference. There is
// no CUDA table: the CUDA ops are plain bf16 functions in kernels/cuda/zt_cuda.h
// (one .cu per op, as here), which the families' GPU passes (model/*_cuda*.c) call
// directly. All tensors are row-major fp32 here; weights
// are [out, in] as in Hugging Face (y = x W^T).
// Gradient rule (as in llm.c): parameter gradients accumulate (+=), activation
// gradients assign (=) unless the argument says otherwise.
// defines: zt_ops, zt_cpu_ops, zt_rope_table_freqs, zt_rope_table, zt_cpu_gemm_kernel, zt_delta_saved_floats
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
    // The same for a subset of each block's queries against all S keys of the block (context
    // parallelism: a rank's held tokens): q, o, dout, dq [B*Sq, H*D], stats [B, H, Sq, 2], pos[B*Sq]
    // (each query row's document position, always given); query row r is the token at block position
    // qmap[r] (the same map for every batch row; -1: padding, seeing key 0 only); k, v, dk, dv [B*S, Hkv*D].
    // A query at block position g with position p sees keys g - p .. g.
    void (*attention_fwd_rows)(float *o, float *stats, const float *q, const float *k, const float *v,
                               const int32_t *pos, const int32_t *qmap, int64_t B, int64_t Sq, int64_t S, int64_t H,
                               int64_t Hkv, int64_t D);
    void (*attention_bwd_rows)(float *dq, float *dk, float *dv, const float *dout, const float *o, const float *stats,
                               const float *q, const float *k, const float *v, const int32_t *pos, const int32_t *qmap,
                               int64_t B, int64_t Sq, int64_t S, int64_t H, int64_t Hkv, int64_t D);

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

    // ---- Gated DeltaNet (Qwen3.5's linear attention; kernels/cpu/delta_chunk.c, delta.c) ----
    // Documents: pos[B*S] as for attention (token t of a row belongs to the document that starts
    // at t - pos[t]); NULL: one document per row. Nothing crosses a document start: each packed
    // document computes exactly what it would alone.
    // Causal depthwise conv1d + SiLU, token-major x[B*S, C], w[C, K] (HF's conv1d.weight [C, 1, K]):
    //   pre[t, c] = sum_{j<K} w[c, j] * x[t - (K - 1) + j, c]  (taps before t's document start read 0),
    //   y = silu(pre). pre[B*S, C] is saved for backward.
    void (*conv1d_silu_fwd)(float *y, float *pre, const float *x, const float *w, const int32_t *pos, int64_t B,
                            int64_t S, int64_t C, int64_t K);
    // dx assigned, dw +=.
    void (*conv1d_silu_bwd)(float *dx, float *dw, const float *dy, const float *pre, const float *x, const float *w,
                            const int32_t *pos, int64_t B, int64_t S, int64_t C, int64_t K);
    // Rows of d: y = x * rsqrt(sum(x^2) + eps) (transformers' l2norm, eps 1e-6); rinv[rows] saved.
    void (*l2norm_fwd)(float *y, float *rinv, const float *x, int64_t rows, int64_t d, float eps);
    void (*l2norm_bwd)(float *dx, const float *dy, const float *x, const float *rinv, int64_t rows, int64_t d);
    // Gated RMSNorm (Qwen3_5RMSNormGated): y = w * (x * rsqrt(mean(x^2) + eps)) * silu(z), rows of d;
    // rstd[rows] saved. dx, dz assigned; dw +=.
    void (*rmsnorm_gated_fwd)(float *y, float *rstd, const float *x, const float *z, const float *w, int64_t rows,
                              int64_t d, float eps);
    void (*rmsnorm_gated_bwd)(float *dx, float *dz, float *dw, const float *dy, const float *x, const float *z,
                              const float *w, const float *rstd, int64_t rows, int64_t d);
    // The gated delta rule (transformers' torch_chunk_gated_delta_rule with use_qk_l2norm_in_kernel
    // done by the caller): q, k [B*S, Hk, Dk] (already l2-normalised; q NOT yet scaled), v [B*S, Hv, Dv],
    // g, beta [B*S, Hv]; value head h reads key head h / (Hv / Hk). Per row, value head, from a zero
    // state St [Dk, Dv] at each document start, token by token:
    //   St = exp(g_t) St;  St += k_t (beta_t (v_t - St^T k_t))^T;  o_t = St^T (q_t / sqrt(Dk)).
    // o [B*S, Hv, Dv]. saved: zt_delta_saved_floats(B, S, Hv, Dk, Dv) floats the backward reads (the
    // state before every 64th token of a row). The CPU runs the chunked form (kernels/cpu/delta_chunk.c,
    // chunks cut at document starts): a packed document equals itself alone bit for bit when it starts
    // at a multiple of 64 tokens, to rounding otherwise.
    void (*delta_fwd)(float *o, float *saved, const float *q, const float *k, const float *v, const float *g,
                      const float *beta, const int32_t *pos, int64_t B, int64_t S, int64_t Hk, int64_t Hv, int64_t Dk,
                      int64_t Dv);
    // All assigned: dq, dk [B*S, Hk, Dk] (summed over the value heads sharing a key head), dv, dg, dbeta.
    void (*delta_bwd)(float *dq, float *dk, float *dv, float *dg, float *dbeta, const float *dout, const float *saved,
                      const float *q, const float *k, const float *v, const float *g, const float *beta,
                      const int32_t *pos, int64_t B, int64_t S, int64_t Hk, int64_t Hv, int64_t Dk, int64_t Dv);

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
// Floats the CPU delta_fwd saves for delta_bwd (kernels/cpu/delta.c; both CPU forms).
int64_t zt_delta_saved_floats(int64_t B, int64_t S, int64_t Hv, int64_t Dk, int64_t Dv);

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
