// Prototypes of the CPU reference ops, gathered into zt_cpu_ops by cpu_ops.c.
#ifndef ZT_CPU_INTERNAL_H
#define ZT_CPU_INTERNAL_H
#include <stdint.h>
// C[M,N] = alpha op(A) op(B) + beta C, row-major; op(A)[i][k] = tA ? A[k*lda+i] : A[i*lda+k],
// op(B)[k][j] = tB ? B[j*ldb+k] : B[k*ldb+j]. One rounding order everywhere (kernels/cpu/gemm.c).
void cpu_sgemm(int tA, int tB, int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda,
               const float *B, int64_t ldb, float beta, float *C, int64_t ldc);
// The kernel in use ("AVX-512", "AVX2", "portable C"); set_isa("generic"|"avx2"|"avx512")
// switches it (tests), -1 if this CPU cannot run it.
const char *cpu_sgemm_isa(void);
int cpu_sgemm_set_isa(const char *name);
// Products on operands packed once and used many times, on the calling thread: pack_a packs
// op(A)'s M rows (K long), pack_b op(B)'s N columns, into cpu_sgemm_packed_floats('A' or 'B',
// M or N, K) floats; cpu_sgemm_packed(M, N, K, ...) then gives cpu_sgemm's bits. Columns j0.. of
// a packed B start at pb + j0 * K when j0 is a multiple of cpu_sgemm_nr() (8, 16 or 32).
int64_t cpu_sgemm_packed_floats(int which, int64_t rows, int64_t K);
int cpu_sgemm_nr(void);
void cpu_sgemm_pack_a(float *pa, int tA, const float *A, int64_t lda, int64_t M, int64_t K);
void cpu_sgemm_pack_b(float *pb, int tB, const float *B, int64_t ldb, int64_t K, int64_t N);
void cpu_sgemm_packed(int64_t M, int64_t N, int64_t K, float alpha, const float *pa, const float *pb, float beta, float *C,
                      int64_t ldc);
// The same with op(A) = A^T read in place (tA = 1: op(A)[i][k] = A[k * lda + i]), no packing; reads up
// to MR - 1 floats past column M of each row, so A needs that much room after its last row.
void cpu_sgemm_packed_at(int64_t M, int64_t N, int64_t K, float alpha, const float *A, int64_t lda, const float *pb,
                         float beta, float *C, int64_t ldc);
enum { CPU_ISA_GENERIC, CPU_ISA_AVX2, CPU_ISA_AVX512 };
int cpu_sgemm_isa_id(void);  // the kernel in use as one of the above
// Attention's elementwise passes (kernels/cpu/attention_rows.c), in the sgemm's instruction set
// and with the same bits in each. col_step: forward's softmax step over a key block of
// transposed scores st[n keys][ld] for queries (columns) 0..m-1, with each query's running max
// mx and sum, giving alpha (the factor on what was summed before); st becomes the block's
// exp(s - max). grad: backward's p[j] = exp(p[j] - m) * inv (p holds the scores) and
// ds[j] = p[j] * (ds[j] - di) * scale (ds holds dP) along one query's keys.
typedef struct {
    void (*col_step)(float *st, int64_t n, int64_t m, int64_t ld, float *mx, float *sum, float *alpha);
    void (*grad)(float *p, float *ds, int64_t n, float m, float inv, float di, float scale);
    void (*sigmoid)(float *s, const float *x, int64_t n);  // s = 1 / (1 + exp(0 - x)), exp as below
} cpu_att_row_ops;
const cpu_att_row_ops *cpu_att_rows(void);
float cpu_att_exp(float x);  // the exp of every row operation, for one value
// s[i] = 1 / (1 + cpu_att_exp(0 - x[i])), vectorised in the sgemm's instruction set, the same bits in
// each (s may be x): the sigmoid of the Gated DeltaNet's conv1d SiLU and gated RMSNorm.
void cpu_sigmoid(float *s, const float *x, int64_t n);
void cpu_matmul_fwd(float *y, const float *x, const float *w, int64_t M, int64_t K, int64_t N);
void cpu_matmul_bwd(float *dx, float *dw, const float *dy, const float *x, const float *w, int64_t M, int64_t K,
                    int64_t N, int accumulate_dx);
void cpu_embedding_fwd(float *x, const float *w, const uint32_t *tokens, int64_t N, int64_t d);
void cpu_embedding_bwd(float *dw, const float *dx, const uint32_t *tokens, int64_t N, int64_t d);
void cpu_rmsnorm_fwd(float *y, float *rstd, const float *x, const float *w, int64_t rows, int64_t d, float eps);
void cpu_rmsnorm_bwd(float *dx, float *dw, const float *dy, const float *x, const float *w, const float *rstd,
                     int64_t rows, int64_t d);
void cpu_rope_fwd(float *x, const float *cos_t, const float *sin_t, const int32_t *pos, int64_t B, int64_t S, int64_t nh,
                  int64_t D);
void cpu_rope_bwd(float *dx, const float *cos_t, const float *sin_t, const int32_t *pos, int64_t B, int64_t S,
                  int64_t nh, int64_t D);
void cpu_attention_fwd(float *o, float *stats, const float *q, const float *k, const float *v, const int32_t *pos,
                       int64_t B, int64_t S, int64_t H, int64_t Hkv, int64_t D);
void cpu_attention_bwd(float *dq, float *dk, float *dv, const float *dout, const float *o, const float *stats, const float *q,
                       const float *k, const float *v, const int32_t *pos, int64_t B, int64_t S, int64_t H,
                       int64_t Hkv, int64_t D);
void cpu_attention_fwd_rows(float *o, float *stats, const float *q, const float *k, const float *v, const int32_t *pos,
                            const int32_t *qmap, int64_t B, int64_t Sq, int64_t S, int64_t H, int64_t Hkv, int64_t D);
void cpu_attention_bwd_rows(float *dq, float *dk, float *dv, const float *dout, const float *o, const float *stats,
                            const float *q, const float *k, const float *v, const int32_t *pos, const int32_t *qmap,
                            int64_t B, int64_t Sq, int64_t S, int64_t H, int64_t Hkv, int64_t D);
void cpu_swiglu_fwd(float *h, const float *g, const float *u, int64_t n);
void cpu_swiglu_bwd(float *dg, float *du, const float *dh, const float *g, const float *u, int64_t n);
double cpu_lmhead_xent(float *dx, float *dw, const float *x, const float *w, const int32_t *targets, int64_t N,
                       int64_t d, int64_t V, float scale);
void cpu_conv1d_silu_fwd(float *y, float *pre, const float *x, const float *w, const int32_t *pos, int64_t B,
                         int64_t S, int64_t C, int64_t K);
void cpu_conv1d_silu_bwd(float *dx, float *dw, const float *dy, const float *pre, const float *x, const float *w,
                         const int32_t *pos, int64_t B, int64_t S, int64_t C, int64_t K);
void cpu_l2norm_fwd(float *y, float *rinv, const float *x, int64_t rows, int64_t d, float eps);
void cpu_l2norm_bwd(float *dx, const float *dy, const float *x, const float *rinv, int64_t rows, int64_t d);
void cpu_rmsnorm_gated_fwd(float *y, float *rstd, const float *x, const float *z, const float *w, int64_t rows,
                           int64_t d, float eps);
void cpu_rmsnorm_gated_bwd(float *dx, float *dz, float *dw, const float *dy, const float *x, const float *z,
                           const float *w, const float *rstd, int64_t rows, int64_t d);
// The gated delta rule twice (zt_ops.delta_fwd / delta_bwd): the exact token recurrence
// (kernels/cpu/delta.c) and the chunked UT-transform form (kernels/cpu/delta_chunk.c), the one
// zt_cpu_ops uses. Each backward reads only its own forward's saved states (same count, and the
// same layout unless a document starts off a multiple of 64 tokens).
void cpu_delta_recur_fwd(float *o, float *saved, const float *q, const float *k, const float *v, const float *g,
                         const float *beta, const int32_t *pos, int64_t B, int64_t S, int64_t Hk, int64_t Hv,
                         int64_t Dk, int64_t Dv);
void cpu_delta_recur_bwd(float *dq, float *dk, float *dv, float *dg, float *dbeta, const float *dout, const float *saved,
                         const float *q, const float *k, const float *v, const float *g, const float *beta,
                         const int32_t *pos, int64_t B, int64_t S, int64_t Hk, int64_t Hv, int64_t Dk, int64_t Dv);
void cpu_delta_chunk_fwd(float *o, float *saved, const float *q, const float *k, const float *v, const float *g,
                         const float *beta, const int32_t *pos, int64_t B, int64_t S, int64_t Hk, int64_t Hv,
                         int64_t Dk, int64_t Dv);
void cpu_delta_chunk_bwd(float *dq, float *dk, float *dv, float *dg, float *dbeta, const float *dout, const float *saved,
                         const float *q, const float *k, const float *v, const float *g, const float *beta,
                         const int32_t *pos, int64_t B, int64_t S, int64_t Hk, int64_t Hv, int64_t Dk, int64_t Dv);
void cpu_adamw(float *p, const float *g, float *m, float *v, int64_t n, float lr, float beta1, float beta2, float eps,
               float weight_decay, int64_t t);
double cpu_sumsq(const float *x, int64_t n);
void cpu_scale(float *x, float s, int64_t n);
void cpu_add(float *y, const float *a, const float *b, int64_t n);
#endif
