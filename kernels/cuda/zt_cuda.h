// The CUDA op layer, callable from C: bf16 storage, fp32 accumulation, the same
// math as the CPU reference table in kernels/ops.h (kernels/cpu/*.c is the spec).
// Every pointer is a device pointer; `stream` is a cudaStream_t passed as void*
// (NULL = the legacy default stream). Failures are fatal: the message names the
// CUDA/cuBLASLt call, the file and line, and a hint (see docs/cuda.md).
// defines: zt_cuda_ctx, zt_cuda_dtype, zt_bf16, zt_cuda_* ops
#ifndef ZT_CUDA_H
#define ZT_CUDA_H
#include <stddef.h>
#include <stdint.h>
#include "kernels/rope_freqs.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef uint16_t zt_bf16;  // bit pattern of a bfloat16 (the upper half of an fp32)
typedef enum { ZT_F32 = 0, ZT_BF16 = 1 } zt_cuda_dtype;

// ---- device and context -------------------------------------------------------
// Number of usable CUDA devices (0 when there is no driver or no device).
int zt_cuda_device_count(void);
// "NVIDIA H200, sm_90, 132 SMs, 139.8 GiB" for the current device, into buf.
void zt_cuda_device_describe(char *buf, size_t n);

// A context owns the cuBLASLt handle, its workspace (allocated once), the cache of
// matmul plans (descriptors, layouts and the heuristic's algorithm per shape key)
// and a scratch arena that grows stream-ordered (cudaMallocAsync) when an op needs
// more. Not thread-safe; every op given one context must run on one stream (or
// streams the caller orders), because they share the workspace and scratch.
typedef struct zt_cuda_ctx zt_cuda_ctx;
zt_cuda_ctx *zt_cuda_ctx_create(void);  // on the current device
void zt_cuda_ctx_destroy(zt_cuda_ctx *c);
// Pre-size the scratch arena (bytes); ops grow it themselves when needed.
void zt_cuda_ctx_reserve(zt_cuda_ctx *c, size_t bytes, void *stream);
// Rows of logits per lm_head/cross-entropy chunk (0 = automatic: 2^26 logits).
void zt_cuda_ctx_set_xent_chunk_rows(zt_cuda_ctx *c, int64_t rows);
// The context's device bytes now: its cuBLASLt workspace and its scratch arena (the run.json
// memory parts `workspace` and `scratch`).
void zt_cuda_ctx_device_bytes(const zt_cuda_ctx *c, size_t *workspace, size_t *scratch);
// Without a context (`plan --device cuda`): the workspace a context allocates, and the arena a first
// request (zt_cuda_ctx_reserve) of `bytes` makes: the request plus its headroom, rounded.
size_t zt_cuda_ctx_workspace_size(void);
size_t zt_cuda_ctx_scratch_size(size_t bytes);
// Matmul plan cache statistics (for tests: a repeated shape must hit).
void zt_cuda_ctx_plan_stats(const zt_cuda_ctx *c, int64_t *plans, int64_t *hits, int64_t *misses);
// Bytes of scratch the attention ops need for this shape (one KV-head group at a time).
size_t zt_cuda_attention_scratch_bytes(int64_t S, int64_t H, int64_t Hkv, int64_t D);

// A fatal CUDA error (a failed call, a kernel fault reported at a sync, a failed
// precondition) prints what failed and exits with this code, so that scripts can tell it
// from a test's own failures (exit 1) and rerun with ZT_CUDA_SYNC=1 to localise it.
#define ZT_EXIT_CUDA 4
void zt_cuda_die(const char *what, const char *detail, const char *file, int line) __attribute__((noreturn));

// Synchronize `stream` and die with a message naming `what` if an earlier
// asynchronous error is pending. Setting ZT_CUDA_SYNC=1 in the environment makes
// every op do this, so a failing kernel is named at its own call.
void zt_cuda_sync(void *stream, const char *what);

// ---- memory helpers (fatal on failure) -----------------------------------------
void *zt_cuda_malloc(size_t bytes);
// Bytes asked of zt_cuda_malloc by this process so far (never decreases: the engine reads it before
// and after allocating a part, so a part's bytes are the sizes asked, not an allocator's rounding).
int64_t zt_cuda_malloc_bytes(void);
void zt_cuda_free(void *p);
void zt_cuda_memcpy_h2d(void *dst, const void *src, size_t bytes);
void zt_cuda_memcpy_d2h(void *dst, const void *src, size_t bytes);
// Fill n elements with quiet NaN (tests poison outputs with it).
void zt_cuda_fill_nan(void *x, zt_cuda_dtype t, int64_t n, void *stream);
void zt_cuda_fill(float *x, float value, int64_t n, void *stream);
// Uniform in [lo, hi) from a counter-based hash of (seed, index): reproducible,
// independent of the launch shape (benchmarks must not time zeros).
void zt_cuda_fill_uniform(void *x, zt_cuda_dtype t, int64_t n, float lo, float hi, uint64_t seed, void *stream);

// ---- casts (round to nearest even) -------------------------------------------
void zt_cuda_f32_to_bf16(zt_bf16 *y, const float *x, int64_t n, void *stream);
void zt_cuda_bf16_to_f32(float *y, const zt_bf16 *x, int64_t n, void *stream);

// ---- matrix products (cuBLASLt: bf16 A/B, fp32 compute, bf16 or fp32 C) ---------
// Row-major general product, batched with element strides:
//   C_b[M,N] = alpha * op(A_b) op(B_b) + beta * C_b,  b < batch
// A is stored [M,K] (transA = 0) or [K,M] (transA = 1) with leading dimension lda,
// B is stored [K,N] (transB = 0) or [N,K] (transB = 1) with ldb, C [M,N] with ldc.
// A stride of 0 broadcasts one matrix to every batch entry.
void zt_cuda_gemm(zt_cuda_ctx *c, void *stream, void *C, zt_cuda_dtype ctype, int64_t ldc, int64_t strideC,
                  const zt_bf16 *A, int transA, int64_t lda, int64_t strideA, const zt_bf16 *B, int transB,
                  int64_t ldb, int64_t strideB, int64_t M, int64_t N, int64_t K, int64_t batch, float alpha,
                  float beta);
// y[M,N] = x[M,K] W[N,K]^T (ytype bf16 or fp32).
void zt_cuda_matmul_fwd(zt_cuda_ctx *c, void *stream, void *y, zt_cuda_dtype ytype, const zt_bf16 *x, const zt_bf16 *w,
                        int64_t M, int64_t K, int64_t N);
// dx[M,K] = dy W (accumulate_dx: +=), dW[N,K] += dy^T x (dwtype fp32 or bf16).
// Either output may be NULL.
void zt_cuda_matmul_bwd(zt_cuda_ctx *c, void *stream, zt_bf16 *dx, void *dw, zt_cuda_dtype dwtype, const zt_bf16 *dy,
                        const zt_bf16 *x, const zt_bf16 *w, int64_t M, int64_t K, int64_t N, int accumulate_dx);

// ---- normalisation, position, activation ------------------------------------------
// y = w * x * rstd per row of length d, rstd = rsqrt(mean(x^2) + eps) saved [rows].
// Per-head q/k norm: rows = tokens * heads, d = head_dim.
void zt_cuda_rmsnorm_fwd(void *stream, zt_bf16 *y, float *rstd, const zt_bf16 *x, const zt_bf16 *w, int64_t rows,
                         int64_t d, float eps);
// dx assigned (may be NULL); dw[d] += sum over rows (fp32, deterministic two-pass
// reduction through the context's scratch; may be NULL).
void zt_cuda_rmsnorm_bwd(zt_cuda_ctx *c, void *stream, zt_bf16 *dx, float *dw, const zt_bf16 *dy, const zt_bf16 *x,
                         const zt_bf16 *w, const float *rstd, int64_t rows, int64_t d);
// fp32 cos/sin tables [S, D/2] computed on the device with the CPU's formula
// (inv_freq rounded to fp32 as torch does; cos/sin in double, rounded: no fast math).
void zt_cuda_rope_table(void *stream, float *cos_t, float *sin_t, int64_t S, int64_t D, double theta);
// The same for any frequencies (kernels/rope_freqs.h: plain or YaRN; f is copied).
void zt_cuda_rope_table_freqs(void *stream, float *cos_t, float *sin_t, int64_t S, int64_t D, const zt_rope_freqs *f);
// Half-split RoPE in place on x[B*S, nheads, D]; backward applies the transpose.
// pos: device int32 [B*S], token t's position (0 <= pos[t] < S; outside traps the
// kernel), e.g. inside its packed document; NULL: t % S (kernels/ops.h).
void zt_cuda_rope_fwd(void *stream, zt_bf16 *x, const float *cos_t, const float *sin_t, const int32_t *pos,
                      int64_t B, int64_t S, int64_t nheads, int64_t D);
void zt_cuda_rope_bwd(void *stream, zt_bf16 *dx, const float *cos_t, const float *sin_t, const int32_t *pos,
                      int64_t B, int64_t S, int64_t nheads, int64_t D);
// The same for rows of S tokens whose positions range over a table of T >= S rows (context
// parallelism: a row holds S of a block's T tokens); pos required (0 <= pos[t] < T).
void zt_cuda_rope_table_fwd(void *stream, zt_bf16 *x, const float *cos_t, const float *sin_t, int64_t T,
                            const int32_t *pos, int64_t B, int64_t S, int64_t nheads, int64_t D);
void zt_cuda_rope_table_bwd(void *stream, zt_bf16 *dx, const float *cos_t, const float *sin_t, int64_t T,
                            const int32_t *pos, int64_t B, int64_t S, int64_t nheads, int64_t D);
// h = silu(g) * u;  backward: dg, du assigned.
void zt_cuda_swiglu_fwd(void *stream, zt_bf16 *h, const zt_bf16 *g, const zt_bf16 *u, int64_t n);
void zt_cuda_swiglu_bwd(void *stream, zt_bf16 *dg, zt_bf16 *du, const zt_bf16 *dh, const zt_bf16 *g,
                        const zt_bf16 *u, int64_t n);

// Partial RoPE (Qwen3.5): the first rd (even, <= D) elements of each head of D in x[B*S, nheads, D]
// rotated half-split as above, with tables [S, rd/2]; the other D - rd elements untouched.
void zt_cuda_rope_partial_fwd(void *stream, zt_bf16 *x, const float *cos_t, const float *sin_t, const int32_t *pos,
                              int64_t B, int64_t S, int64_t nheads, int64_t D, int64_t rd);
void zt_cuda_rope_partial_bwd(void *stream, zt_bf16 *dx, const float *cos_t, const float *sin_t, const int32_t *pos,
                              int64_t B, int64_t S, int64_t nheads, int64_t D, int64_t rd);
// The same over a table of T >= S rows (context parallelism, as zt_cuda_rope_table_fwd); pos required.
void zt_cuda_rope_partial_table_fwd(void *stream, zt_bf16 *x, const float *cos_t, const float *sin_t, int64_t T,
                                    const int32_t *pos, int64_t B, int64_t S, int64_t nheads, int64_t D, int64_t rd);
void zt_cuda_rope_partial_table_bwd(void *stream, zt_bf16 *dx, const float *cos_t, const float *sin_t, int64_t T,
                                    const int32_t *pos, int64_t B, int64_t S, int64_t nheads, int64_t D, int64_t rd);

// ---- Qwen3.5: Gated DeltaNet and the gated attention (kernels/ops.h has the semantics) -------------
// Causal depthwise conv1d + SiLU, x, y, pre [B*S, C] bf16 (pre saved for backward), w [C, K] bf16,
// K <= 8; pos as RoPE's (NULL: plain rows): a tap before its token's document start reads zero.
void zt_cuda_conv1d_silu_fwd(void *stream, zt_bf16 *y, zt_bf16 *pre, const zt_bf16 *x, const zt_bf16 *w,
                             const int32_t *pos, int64_t B, int64_t S, int64_t C, int64_t K);
// dx assigned (may be NULL), dw [C, K] fp32 += (may be NULL; deterministic through the scratch).
void zt_cuda_conv1d_silu_bwd(zt_cuda_ctx *c, void *stream, zt_bf16 *dx, float *dw, const zt_bf16 *dy,
                             const zt_bf16 *pre, const zt_bf16 *x, const zt_bf16 *w, const int32_t *pos, int64_t B,
                             int64_t S, int64_t C, int64_t K);
// Rows of d: y = x * rsqrt(sum x^2 + eps), rinv [rows] fp32 saved; dx assigned.
void zt_cuda_l2norm_fwd(void *stream, zt_bf16 *y, float *rinv, const zt_bf16 *x, int64_t rows, int64_t d, float eps);
void zt_cuda_l2norm_bwd(void *stream, zt_bf16 *dx, const zt_bf16 *dy, const zt_bf16 *x, const float *rinv,
                        int64_t rows, int64_t d);
// Gated RMSNorm: y = w * (x * rsqrt(mean(x^2) + eps)) * silu(z), rows of d, rstd [rows] fp32 saved;
// dx, dz assigned, dw fp32 += (may be NULL; deterministic through the scratch).
void zt_cuda_rmsnorm_gated_fwd(void *stream, zt_bf16 *y, float *rstd, const zt_bf16 *x, const zt_bf16 *z,
                               const zt_bf16 *w, int64_t rows, int64_t d, float eps);
void zt_cuda_rmsnorm_gated_bwd(zt_cuda_ctx *c, void *stream, zt_bf16 *dx, zt_bf16 *dz, float *dw, const zt_bf16 *dy,
                               const zt_bf16 *x, const zt_bf16 *z, const zt_bf16 *w, const float *rstd, int64_t rows,
                               int64_t d);
// The gated delta rule (kernels/ops.h: delta_fwd): q, k [B*S, Hk, Dk] bf16 (l2-normalised, not
// scaled), v, o [B*S, Hv, Dv] bf16, g, beta [B*S, Hv] fp32; saved: zt_cuda_delta_saved_floats fp32
// (the state before every 64 tokens). Only Dk <= 128 and Dv <= 128 (zt_cuda_delta_supported).
int zt_cuda_delta_supported(int64_t Dk, int64_t Dv);
int64_t zt_cuda_delta_saved_floats(int64_t B, int64_t S, int64_t Hv, int64_t Dk, int64_t Dv);
void zt_cuda_delta_fwd(void *stream, zt_bf16 *o, float *saved, const zt_bf16 *q, const zt_bf16 *k, const zt_bf16 *v,
                       const float *g, const float *beta, const int32_t *pos, int64_t B, int64_t S, int64_t Hk,
                       int64_t Hv, int64_t Dk, int64_t Dv);
// The chunked (UT-transform) kernels (delta_chunk.cu) unless ZT_CUDA_DELTA_RECUR=1 (the token
// recurrence, delta.cu); both keep the same saved layout.
// All assigned: dq, dk (summed over a key head's value heads), dv bf16; dg, dbeta fp32. Uses
// zt_cuda_delta_scratch_bytes of the context's scratch (enough for either form). Deterministic.
void zt_cuda_delta_bwd(zt_cuda_ctx *c, void *stream, zt_bf16 *dq, zt_bf16 *dk, zt_bf16 *dv, float *dg, float *dbeta,
                       const zt_bf16 *dout, const float *saved, const zt_bf16 *q, const zt_bf16 *k, const zt_bf16 *v,
                       const float *g, const float *beta, const int32_t *pos, int64_t B, int64_t S, int64_t Hk,
                       int64_t Hv, int64_t Dk, int64_t Dv);
size_t zt_cuda_delta_scratch_bytes(int64_t B, int64_t S, int64_t Hv, int64_t Dk, int64_t Dv);
// The two forms by name (the tests hold them together). Backward scratch: the recurrence's
// 4 B Hv (64 Dk Dv + 128 Dv + 2 S Dk) bytes (a span's recomputed states, per-value-head dq, dk);
// the chunked form's 4 ceil(Dv / 32) B Hv S (2 Dk + 2) bytes (each 32-column block's parts of dq,
// dk, dg, dbeta). Shared memory per block of the chunked kernels: zt_cuda_delta_chunk_smem_bytes
// (Dk = 128: 152,064 B forward, 212,736 B backward).
void zt_cuda_delta_recur_fwd(void *stream, zt_bf16 *o, float *saved, const zt_bf16 *q, const zt_bf16 *k,
                             const zt_bf16 *v, const float *g, const float *beta, const int32_t *pos, int64_t B,
                             int64_t S, int64_t Hk, int64_t Hv, int64_t Dk, int64_t Dv);
void zt_cuda_delta_recur_bwd(zt_cuda_ctx *c, void *stream, zt_bf16 *dq, zt_bf16 *dk, zt_bf16 *dv, float *dg,
                             float *dbeta, const zt_bf16 *dout, const float *saved, const zt_bf16 *q, const zt_bf16 *k,
                             const zt_bf16 *v, const float *g, const float *beta, const int32_t *pos, int64_t B,
                             int64_t S, int64_t Hk, int64_t Hv, int64_t Dk, int64_t Dv);
void zt_cuda_delta_chunk_fwd(void *stream, zt_bf16 *o, float *saved, const zt_bf16 *q, const zt_bf16 *k,
                             const zt_bf16 *v, const float *g, const float *beta, const int32_t *pos, int64_t B,
                             int64_t S, int64_t Hk, int64_t Hv, int64_t Dk, int64_t Dv);
void zt_cuda_delta_chunk_bwd(zt_cuda_ctx *c, void *stream, zt_bf16 *dq, zt_bf16 *dk, zt_bf16 *dv, float *dg,
                             float *dbeta, const zt_bf16 *dout, const float *saved, const zt_bf16 *q, const zt_bf16 *k,
                             const zt_bf16 *v, const float *g, const float *beta, const int32_t *pos, int64_t B,
                             int64_t S, int64_t Hk, int64_t Hv, int64_t Dk, int64_t Dv);
size_t zt_cuda_delta_recur_scratch_bytes(int64_t B, int64_t S, int64_t Hv, int64_t Dk, int64_t Dv);
size_t zt_cuda_delta_chunk_scratch_bytes(int64_t B, int64_t S, int64_t Hv, int64_t Dk, int64_t Dv);
size_t zt_cuda_delta_chunk_smem_bytes(int64_t Dk, int bwd);
// The chunked form with its products on tensor cores (delta_chunk_tc.cu; ZT_CUDA_DELTA_TC=1 makes
// zt_cuda_delta_fwd / _bwd take it where zt_cuda_delta_tc_supported): the same interface, saved
// layout and backward scratch as the chunked kernels (zt_cuda_delta_chunk_scratch_bytes).
int zt_cuda_delta_tc_supported(int64_t Dk, int64_t Dv);
// The 32-column blocks' partials of dq, dk [ncb, B, Hv, S, Dk], dg, dbeta [ncb, B, Hv, S] summed in a
// fixed order into dq, dk (bf16, over a key head's value heads too), dg, dbeta (both backward forms).
void zt_cuda_delta_chunk_sum(void *stream, zt_bf16 *dq, zt_bf16 *dk, float *dg, float *dbeta, const float *dqp,
                             const float *dkp, const float *dgp, const float *dbp, int64_t B, int64_t S, int64_t Hk,
                             int64_t Hv, int64_t Dk, int64_t Dv);
size_t zt_cuda_delta_tc_smem_bytes(int64_t Dk, int bwd);
void zt_cuda_delta_tc_fwd(void *stream, zt_bf16 *o, float *saved, const zt_bf16 *q, const zt_bf16 *k,
                          const zt_bf16 *v, const float *g, const float *beta, const int32_t *pos, int64_t B, int64_t S,
                          int64_t Hk, int64_t Hv, int64_t Dk, int64_t Dv);
void zt_cuda_delta_tc_bwd(zt_cuda_ctx *c, void *stream, zt_bf16 *dq, zt_bf16 *dk, zt_bf16 *dv, float *dg,
                          float *dbeta, const zt_bf16 *dout, const float *saved, const zt_bf16 *q, const zt_bf16 *k,
                          const zt_bf16 *v, const float *g, const float *beta, const int32_t *pos, int64_t B,
                          int64_t S, int64_t Hk, int64_t Hv, int64_t Dk, int64_t Dv);
// y = att * sigmoid(gate) (the full-attention layers' output gate); backward: datt, dgate assigned.
void zt_cuda_sigmoid_gate_fwd(void *stream, zt_bf16 *y, const zt_bf16 *att, const zt_bf16 *gate, int64_t n);
void zt_cuda_sigmoid_gate_bwd(void *stream, zt_bf16 *datt, zt_bf16 *dgate, const zt_bf16 *dy, const zt_bf16 *att,
                              const zt_bf16 *gate, int64_t n);
// beta = sigmoid(b), g = -exp(A_log) softplus(a + dt_bias) (threshold 20): b, a, beta, g [N, Hv]
// fp32, A_log, dt_bias [Hv] bf16. Backward: db, da [N, Hv] bf16 assigned; dA_log, ddt_bias fp32 +=
// (summed over tokens in a fixed order).
void zt_cuda_delta_gates_fwd(void *stream, float *beta, float *g, const float *b, const float *a,
                             const zt_bf16 *A_log, const zt_bf16 *dt_bias, int64_t N, int64_t Hv);
void zt_cuda_delta_gates_bwd(void *stream, zt_bf16 *db, zt_bf16 *da, float *dA_log, float *ddt_bias, const float *dg,
                             const float *dbeta, const float *a, const float *beta, const float *g,
                             const zt_bf16 *A_log, const zt_bf16 *dt_bias, int64_t N, int64_t Hv);
// y = 1 + w rounded to bf16 (Qwen3.5's RMSNorm weights, for zt_cuda_rmsnorm_*).
void zt_cuda_one_plus(void *stream, zt_bf16 *y, const zt_bf16 *w, int64_t n);
// Rows by a map (kernels/cuda/rows.cu; context parallelism's placement of a rank's rows in the
// whole block and back): for n < nb, i < rows: dst row n*rows + i = src row n*src_rows + map[i],
// or zeros where map[i] < 0. A row is `words` 4-byte words (bf16 rows of an even length, fp32,
// int32). map: device int32 [rows].
void zt_cuda_rows_gather(void *stream, void *dst, const void *src, const int32_t *map, int64_t nb, int64_t rows,
                         int64_t src_rows, int64_t words);
// The same from bf16 rows of `cols` elements to fp32 rows (the context reduce-scatter's input).
void zt_cuda_rows_gather_to_f32(void *stream, float *dst, const zt_bf16 *src, const int32_t *map, int64_t nb,
                                int64_t rows, int64_t src_rows, int64_t cols);
// dst[r * ldd + c] = src[r * lds + c] for r < rows, c < cols (bf16).
void zt_cuda_copy_cols(void *stream, zt_bf16 *dst, int64_t ldd, const zt_bf16 *src, int64_t lds, int64_t rows,
                       int64_t cols);

// ---- embedding ------------------------------------------------------------------------
// x[N,d] = W[tokens[i], :]. Token ids must be < V (checked on the device: an
// out-of-range id traps the kernel).
void zt_cuda_embedding_fwd(void *stream, zt_bf16 *x, const zt_bf16 *w, const uint32_t *tokens, int64_t N, int64_t d,
                           int64_t V);
// dw[tokens[i], :] += dx[i, :] in fp32, deterministic without atomics: each block
// owns a range of vocabulary rows and adds the matching tokens' rows in token order.
void zt_cuda_embedding_bwd(void *stream, float *dw, const zt_bf16 *dx, const uint32_t *tokens, int64_t N, int64_t d,
                           int64_t V);

// ---- attention (causal GQA, no copies of KV heads) ----------------------------------------
// One file per implementation, each entry point below checked on its own by tests/gpu/test_cuda_ops.c;
// the model families call none of them directly: the kinds, the --attention auto policy and the
// choice between them are kernels/cuda/attention/ (policy.h, dispatch.h).
// q[B*S, H*D], k/v[B*S, Hkv*D], o[B*S, H*D] (bf16); lse[B, H, S] (fp32) saved for
// backward instead of the probabilities. cuBLASLt strided-batched products per
// (batch, KV head): the group's H/Hkv query heads read the same K/V (stride 0);
// a fused kernel does scale, causal mask and softmax in fp32.
// pos: NULL = query i sees keys 0..i of its block; else device int32 [B*S] document
// positions (as for RoPE; 0 <= pos[b*S+i] <= i, outside traps the kernel): query i sees
// keys i - pos[b*S+i] .. i only, so packed documents stay apart (kernels/ops.h).
void zt_cuda_attention_fwd(zt_cuda_ctx *c, void *stream, zt_bf16 *o, float *lse, const zt_bf16 *q, const zt_bf16 *k,
                           const zt_bf16 *v, const int32_t *pos, int64_t B, int64_t S, int64_t H, int64_t Hkv,
                           int64_t D);
// dq, dk, dv assigned. Recomputes the probabilities from q, k and lse (same pos as forward).
void zt_cuda_attention_bwd(zt_cuda_ctx *c, void *stream, zt_bf16 *dq, zt_bf16 *dk, zt_bf16 *dv, const zt_bf16 *dout,
                           const zt_bf16 *o, const float *lse, const zt_bf16 *q, const zt_bf16 *k, const zt_bf16 *v,
                           const int32_t *pos, int64_t B, int64_t S, int64_t H, int64_t Hkv, int64_t D);
// The same two ops in 64 x 64 tiles (kernels/cuda/attention_tiled.cu; flash-attention
// style): the same layouts, pos, lse and results to the GPU tolerances, without any S x S
// buffer: the online softmax keeps o and lse, backward recomputes P per tile. Tiles above
// the diagonal and (with pos) before a query tile's first document are skipped. Needs
// D % 8 == 0, D <= 256 and 16-byte aligned q, k, v, o, dout, dq, dk, dv. Deterministic.
void zt_cuda_attention_tiled_fwd(zt_cuda_ctx *c, void *stream, zt_bf16 *o, float *lse, const zt_bf16 *q,
                                 const zt_bf16 *k, const zt_bf16 *v, const int32_t *pos, int64_t B, int64_t S,
                                 int64_t H, int64_t Hkv, int64_t D);
void zt_cuda_attention_tiled_bwd(zt_cuda_ctx *c, void *stream, zt_bf16 *dq, zt_bf16 *dk, zt_bf16 *dv,
                                 const zt_bf16 *dout, const zt_bf16 *o, const float *lse, const zt_bf16 *q,
                                 const zt_bf16 *k, const zt_bf16 *v, const int32_t *pos, int64_t B, int64_t S,
                                 int64_t H, int64_t Hkv, int64_t D);
// The same over a subset of the block's rows as queries (context parallelism: a rank's held rows
// against the whole block's K/V): q, o, dout, dq [B, Sq, H*D], lse [B, H, Sq], pos [B, Sq] (each
// query's document position); k, v, dk, dv [B, S, Hkv*D]. qrow (device int32 [Sq], the same for
// every batch row): query row i's block row (< S; -1: a padding row, which sees no key and gets
// o = 0, lse = 0, dq = 0). A query at block row a with position p sees keys a - p .. a. dk, dv are
// of these queries only (the sum over ranks is the block's). qrow NULL and Sq == S: the ops above,
// bit for bit.
void zt_cuda_attention_tiled_rows_fwd(zt_cuda_ctx *c, void *stream, zt_bf16 *o, float *lse, const zt_bf16 *q,
                                      const zt_bf16 *k, const zt_bf16 *v, const int32_t *pos, const int32_t *qrow,
                                      int64_t B, int64_t Sq, int64_t S, int64_t H, int64_t Hkv, int64_t D);
void zt_cuda_attention_tiled_rows_bwd(zt_cuda_ctx *c, void *stream, zt_bf16 *dq, zt_bf16 *dk, zt_bf16 *dv,
                                      const zt_bf16 *dout, const zt_bf16 *o, const float *lse, const zt_bf16 *q,
                                      const zt_bf16 *k, const zt_bf16 *v, const int32_t *pos, const int32_t *qrow,
                                      int64_t B, int64_t Sq, int64_t S, int64_t H, int64_t Hkv, int64_t D);
// Its scratch for Sq query rows: H*Sq fp32 row dots and the query tiles' key spans, O(H*Sq),
// independent of B and of the keys.
size_t zt_cuda_attention_tiled_scratch_bytes(int64_t Sq, int64_t H, int64_t Hkv, int64_t D);
// The same two ops on tensor cores (kernels/cuda/attention_tc.cu: WMMA 16x16x16, bf16 inputs,
// fp32 accumulation; P and dS rounded to bf16 before their products): the same tiles, skips,
// layouts, pos, lse, scratch and results to the GPU tolerances. Needs D % 16 == 0, D <= 128
// (zt_cuda_attention_tc_supported) and 16-byte aligned operands. Deterministic.
int zt_cuda_attention_tc_supported(int64_t D);
void zt_cuda_attention_tc_fwd(zt_cuda_ctx *c, void *stream, zt_bf16 *o, float *lse, const zt_bf16 *q, const zt_bf16 *k,
                              const zt_bf16 *v, const int32_t *pos, int64_t B, int64_t S, int64_t H, int64_t Hkv,
                              int64_t D);
void zt_cuda_attention_tc_bwd(zt_cuda_ctx *c, void *stream, zt_bf16 *dq, zt_bf16 *dk, zt_bf16 *dv,
                              const zt_bf16 *dout, const zt_bf16 *o, const float *lse, const zt_bf16 *q,
                              const zt_bf16 *k, const zt_bf16 *v, const int32_t *pos, int64_t B, int64_t S, int64_t H,
                              int64_t Hkv, int64_t D);
void zt_cuda_attention_tc_rows_fwd(zt_cuda_ctx *c, void *stream, zt_bf16 *o, float *lse, const zt_bf16 *q,
                                   const zt_bf16 *k, const zt_bf16 *v, const int32_t *pos, const int32_t *qrow,
                                   int64_t B, int64_t Sq, int64_t S, int64_t H, int64_t Hkv, int64_t D);
void zt_cuda_attention_tc_rows_bwd(zt_cuda_ctx *c, void *stream, zt_bf16 *dq, zt_bf16 *dk, zt_bf16 *dv,
                                   const zt_bf16 *dout, const zt_bf16 *o, const float *lse, const zt_bf16 *q,
                                   const zt_bf16 *k, const zt_bf16 *v, const int32_t *pos, const int32_t *qrow,
                                   int64_t B, int64_t Sq, int64_t S, int64_t H, int64_t Hkv, int64_t D);
size_t zt_cuda_attention_tc_scratch_bytes(int64_t S, int64_t H, int64_t Hkv, int64_t D);
// The tiled kind's scratch (ZT_ATTN_TILED: the tensor-core kernels where
// zt_cuda_attention_tc_supported(D), the scalar tiled ones otherwise): the larger of the two.
size_t zt_cuda_attention_flash_scratch_bytes(int64_t S, int64_t H, int64_t Hkv, int64_t D);

// ---- fused lm_head + cross-entropy ---------------------------------------------------
// Per chunk of rows: logits = x W^T into fp32 scratch (never N x V at once), a
// kernel computes logsumexp and the scaled dlogits (bf16), then dx = dlogits W
// (assign) and dW += dlogits^T x. targets[i] < 0: no target. *loss_sum (device
// double) is assigned the sum of -log p(target), reduced in a fixed order.
// dx and dw may be NULL (loss only).
void zt_cuda_lmhead_xent(zt_cuda_ctx *c, void *stream, double *loss_sum, zt_bf16 *dx, void *dw, zt_cuda_dtype dwtype,
                         const zt_bf16 *x, const zt_bf16 *w, const int32_t *targets, int64_t N, int64_t d, int64_t V,
                         float scale);

// ---- optimizer and reductions -------------------------------------------------------------
// torch.optim.AdamW on fp32 master p, moments m and v; also writes the bf16 copy
// p_bf16 (may be NULL). The bias-correction scalars are computed on the host in
// double, as the CPU reference does.
void zt_cuda_adamw(void *stream, float *p, zt_bf16 *p_bf16, const float *g, float *m, float *v, int64_t n, float lr,
                   float beta1, float beta2, float eps, float weight_decay, int64_t t);
// *out (device double) = sum of x^2: fixed grid, per-block partials, then one
// block sums them in order, so the result depends only on n and the data.
void zt_cuda_sumsq(zt_cuda_ctx *c, void *stream, double *out, const float *x, int64_t n);
// The context scratch these ops take (the engine reserves the largest at start, so none grows in a
// step): zt_cuda_sumsq of n floats; zt_cuda_lmhead_xent with gradients on N rows at the automatic
// chunk; the dw partial sums of zt_cuda_rmsnorm_bwd and zt_cuda_rmsnorm_gated_bwd.
size_t zt_cuda_sumsq_scratch_bytes(int64_t n);
size_t zt_cuda_lmhead_xent_scratch_bytes(int64_t N, int64_t V);
size_t zt_cuda_rmsnorm_bwd_scratch_bytes(int64_t rows, int64_t d);
size_t zt_cuda_rmsnorm_gated_bwd_scratch_bytes(int64_t rows, int64_t d);
// x *= s
void zt_cuda_scale(void *stream, void *x, zt_cuda_dtype t, float s, int64_t n);
// y = a + b (y may alias a or b), computed in fp32
void zt_cuda_add(void *stream, void *y, const void *a, const void *b, zt_cuda_dtype t, int64_t n);

#ifdef __cplusplus
}
#endif
#endif
