// Qwen3.5's GPU passes (model/family_cuda.h): the unit passes of model/qwen3_5.c (the spec,
// op for op) on the zt_cuda ops, bf16 parameters and activations, fp32 statistics, gates and
// recurrent state, fp32 gradients (+=). Two layer kinds, chosen by the config's layer_linear:
// Gated DeltaNet (kernels/cuda/conv1d.cu, norms_gated.cu, delta.cu, gates.cu) and gated full
// attention (q_proj's per-head D query rows then D gate rows, QK-norm, partial RoPE, the attention
// the dispatcher runs: tiled, GEMM or cuDNN's fused call, a sigmoid output gate). Every RMSNorm but
// the gated one multiplies by (1 + w), formed in bf16 by zt_cuda_one_plus before each use. The
// full-attention layer and every layer's MLP are the blocks of model/blocks_cuda.c with those
// options set (output gate, rotary slice, 1 + w); the head is Qwen3's GPU head
// (model/qwen3_cuda_layer.c) given 1 + w. With recompute, one set of saved tensors per layer kind
// serves every layer: a layer's forward runs again from its kept input before its backward.
//
// Saved per layer, for its backward (bytes; N = B S tokens, bf16 = 2, fp32 = 4):
//   every layer   2 N (3 d + 3 F) + 4 N 2              ln1, x_mid, ln2, gate, up, h; rstd1, rstd2
//   full attn.    2 N (5 H D + 3 Hkv D) + 4 N (H + Hkv) + 4 B H S
//                                                      q_pre, gate, q, att, gated; k_pre, k, v; the
//                                                      QK-norm rstds; lse
//   Gated DeltaNet 2 N (2 C + 4 Kd + 4 Vd) + 4 N (2 Hk + 4 Hv) + 4 B Hv ceil(S / 64) Dk Dv
//                                                      qkv, conv_pre; lq, lk, lq_n, lk_n; lv, z, core,
//                                                      normed; their inverse norms; a, beta, g, gated
//                                                      norm rstd; the delta rule's checkpoints
// (C = 2 Kd + Vd, Kd = Hk Dk, Vd = Hv Dv), asserted by tests/gpu/test_qwen3_5_cuda.c. Beside them:
// the residual stream (L + 1) N d bf16, the head's N (2 d bf16 + 1 fp32), the RoPE tables, and
// workspaces shared by all layers (the backward's gradients of one layer, the forward's q_proj
// output, conv output and in_proj_b output).
// Under context parallelism (opts.cx) a row is this rank's S_local tokens of a block: the Gated
// DeltaNet's conv, gates and delta rule run over the whole block for this rank's value heads
// (model/qwen3_5_cuda_context.c, head sharding), the full-attention layers use Qwen3's K/V exchange
// (model/qwen3_cuda_context.c), RoPE reads the block's table.
// defines: zt_qwen3_5_cuda_family, zt_qwen3_5_cuda_act_bytes, zt_qwen3_5_cuda_layer_bytes
#include "model/qwen3_5_cuda.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "kernels/cuda/attention/dispatch.h"
#include "kernels/cuda/zt_cuda.h"
#include "model/family.h"
#include "model/layout.h"
#include "model/blocks_cuda.h"
#include "model/qwen3_5.h"
#include "model/qwen3_5_cuda_context.h"
#include "model/qwen3_cuda_layer.h"

// Tensor order inside a layer unit (model/qwen3_5.c's layout; checked by name in create).
enum { LIN_IN_NORM, LIN_QKV, LIN_Z, LIN_B, LIN_A, LIN_CONV, LIN_DT, LIN_ALOG, LIN_NORM, LIN_OUT, LIN_POST_NORM,
       LIN_GATE, LIN_UP, LIN_DOWN, LIN_N };
enum { FA_IN_NORM, FA_Q, FA_K, FA_V, FA_O, FA_QNORM, FA_KNORM, FA_POST_NORM, FA_GATE, FA_UP, FA_DOWN, FA_N };
static const char *const lin_names[LIN_N] = {
    "input_layernorm.weight", "linear_attn.in_proj_qkv.weight", "linear_attn.in_proj_z.weight",
    "linear_attn.in_proj_b.weight", "linear_attn.in_proj_a.weight", "linear_attn.conv1d.weight",
    "linear_attn.dt_bias", "linear_attn.A_log", "linear_attn.norm.weight", "linear_attn.out_proj.weight",
    "post_attention_layernorm.weight", "mlp.gate_proj.weight", "mlp.up_proj.weight", "mlp.down_proj.weight"};
static const char *const fa_names[FA_N] = {
    "input_layernorm.weight", "self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight",
    "self_attn.o_proj.weight", "self_attn.q_norm.weight", "self_attn.k_norm.weight",
    "post_attention_layernorm.weight", "mlp.gate_proj.weight", "mlp.up_proj.weight", "mlp.down_proj.weight"};

typedef struct {
    int64_t B, S, N, d, F, H, Hkv, D, rd, Hk, Hv, Dk, Dv, Kd, Vd, C, K, V;
    float eps;
    zt_attn_kind attention;
} dims;

typedef struct {  // one layer's saved tensors (the kind's members only)
    zt_bf16 *ln1, *x_mid, *ln2, *mgate, *up, *h;
    float *rstd1, *rstd2;
    zt_bf16 *q_pre, *gate, *k_pre, *q, *k, *v, *att, *gated;
    float *qn_rstd, *kn_rstd, *lse;
    zt_bf16 *qkv, *conv_pre, *lq, *lk, *lv, *lq_n, *lk_n, *z, *core, *normed;
    float *lq_r, *lk_r, *a, *beta, *g, *saved, *gn_rstd;
    int64_t bytes;
} acts;

typedef struct {  // shared by all layers
    zt_bf16 *w1;                                // 1 + w of the norm in use
    zt_bf16 *qg, *conv_y;                       // forward: q_proj's output, the conv output
    float *bproj;                               // forward: in_proj_b's output
    zt_bf16 *dh, *dg, *du, *dln, *dmid;         // backward, every layer
    zt_bf16 *dgated, *datt, *dgate, *dq, *dk, *dv, *dqp, *dkp, *dqg;                 // full attention
    zt_bf16 *dnormed, *dcore, *dz, *dlv, *dlq, *dlk, *dlqn, *dlkn, *da, *db, *dconv, *dqkv;  // DeltaNet
    float *dgd, *dbeta;
} work;

typedef struct {
    zt_cuda_ctx *ctx;
    void *cs;
    dims z;
    int L, recompute, tied;
    const unsigned char *linear;  // [L] (the config's layer_linear, copied)
    int64_t (*off)[LIN_N];        // [L]: each layer's tensor offsets in its unit
    int64_t norm_off, lm_off;
    acts *a;                      // [L], or [2] with recompute (0: DeltaNet, 1: full attention)
    work w;
    zt_qwen3_cuda_head_acts hacts;
    zt_bf16 **X, *dx;
    float *rope_cos, *rope_sin;
    int64_t bytes;                // every device allocation of create
    unsigned char lin[4096];
    zt_q35_gcx *gcx;              // context parallelism (model/qwen3_5_cuda_context.c); NULL: whole rows
    int64_t S_block, cx_bytes;    // the block's tokens (S without a split); what the split's buffers took
    size_t cx_scratch;            // the split's largest op scratch (0: none)
    // cuDNN with packed documents (set_positions): the micro-batch's table (model/blocks_cuda.h),
    // staged: set for the micro-batch being enqueued; zeroed: not cuDNN
    zt_cuda_docs_stage docs;
    int staged;
} q35_gpu;

static void *dalloc(q35_gpu *m, int64_t *layer, int64_t bytes) {
    m->bytes += bytes;
    if (layer) *layer += bytes;
    return zt_cuda_malloc((size_t)(bytes > 0 ? bytes : 1));
}

static int check(const zt_model_config *c, int64_t S) {
    const char *what = "GPU FSDP engine, Qwen3.5";
    if (c->head_dim % 2 || c->rotary_dim <= 0 || c->rotary_dim % 2 || c->rotary_dim > c->head_dim || S < 2)
        return zt_err("%s: head_dim (%d) and rotary_dim (%d) must be even, 0 < rotary_dim <= head_dim, and seq_len "
                      "(%lld) >= 2",
                      what, c->head_dim, c->rotary_dim, (long long)S);
    if (!zt_q35(c)->attn_output_gate)
        return zt_err("%s: only the gated attention (attn_output_gate true) is implemented", what);
    int any_lin = 0;
    for (int l = 0; l < c->num_layers; l++) any_lin |= zt_q35(c)->layer_linear[l] != 0;
    if (any_lin) {
        if (zt_q35(c)->lin_key_heads <= 0 || zt_q35(c)->lin_value_heads % zt_q35(c)->lin_key_heads)
            return zt_err("%s: linear_num_value_heads (%d) must be a multiple of linear_num_key_heads (%d)", what,
                          zt_q35(c)->lin_value_heads, zt_q35(c)->lin_key_heads);
        if (!zt_cuda_delta_supported(zt_q35(c)->lin_key_dim, zt_q35(c)->lin_value_dim))
            return zt_err("%s: the GPU delta rule (kernels/cuda/delta.cu) takes linear key and value head dims up "
                          "to 128; this config has %d and %d",
                          what, zt_q35(c)->lin_key_dim, zt_q35(c)->lin_value_dim);
        if (zt_q35(c)->lin_conv_kernel <= 0 || zt_q35(c)->lin_conv_kernel > 8)
            return zt_err("%s: linear_conv_kernel_dim %d: the GPU conv1d takes 1..8", what, zt_q35(c)->lin_conv_kernel);
    }
    return 0;
}

static void acts_alloc(q35_gpu *m, acts *a, int linear) {
    const dims z = m->z;
    const int64_t N = z.N;
    int64_t *n = &a->bytes;
    a->ln1 = dalloc(m, n, 2 * N * z.d), a->x_mid = dalloc(m, n, 2 * N * z.d), a->ln2 = dalloc(m, n, 2 * N * z.d);
    a->mgate = dalloc(m, n, 2 * N * z.F), a->up = dalloc(m, n, 2 * N * z.F), a->h = dalloc(m, n, 2 * N * z.F);
    a->rstd1 = dalloc(m, n, 4 * N), a->rstd2 = dalloc(m, n, 4 * N);
    if (linear) {
        a->qkv = dalloc(m, n, 2 * N * z.C), a->conv_pre = dalloc(m, n, 2 * N * z.C);
        a->lq = dalloc(m, n, 2 * N * z.Kd), a->lk = dalloc(m, n, 2 * N * z.Kd);
        a->lq_n = dalloc(m, n, 2 * N * z.Kd), a->lk_n = dalloc(m, n, 2 * N * z.Kd);
        a->lv = dalloc(m, n, 2 * N * z.Vd), a->z = dalloc(m, n, 2 * N * z.Vd);
        a->core = dalloc(m, n, 2 * N * z.Vd), a->normed = dalloc(m, n, 2 * N * z.Vd);
        a->lq_r = dalloc(m, n, 4 * N * z.Hk), a->lk_r = dalloc(m, n, 4 * N * z.Hk);
        a->a = dalloc(m, n, 4 * N * z.Hv), a->beta = dalloc(m, n, 4 * N * z.Hv), a->g = dalloc(m, n, 4 * N * z.Hv);
        a->gn_rstd = dalloc(m, n, 4 * N * z.Hv);
        a->saved = dalloc(m, n, 4 * zt_cuda_delta_saved_floats(z.B, z.S, z.Hv, z.Dk, z.Dv));
    } else {
        const int64_t HD = z.H * z.D, KVD = z.Hkv * z.D;
        a->q_pre = dalloc(m, n, 2 * N * HD), a->gate = dalloc(m, n, 2 * N * HD), a->q = dalloc(m, n, 2 * N * HD);
        a->att = dalloc(m, n, 2 * N * HD), a->gated = dalloc(m, n, 2 * N * HD);
        a->k_pre = dalloc(m, n, 2 * N * KVD), a->k = dalloc(m, n, 2 * N * KVD), a->v = dalloc(m, n, 2 * N * KVD);
        a->qn_rstd = dalloc(m, n, 4 * N * z.H), a->kn_rstd = dalloc(m, n, 4 * N * z.Hkv);
        a->lse = dalloc(m, n, 4 * z.B * z.H * z.S);
    }
}

static void acts_free(acts *a) {
    void *p[] = {a->ln1, a->x_mid, a->ln2, a->mgate, a->up, a->h, a->rstd1, a->rstd2, a->q_pre, a->gate, a->k_pre,
                 a->q, a->k, a->v, a->att, a->gated, a->qn_rstd, a->kn_rstd, a->lse, a->qkv, a->conv_pre, a->lq,
                 a->lk, a->lv, a->lq_n, a->lk_n, a->z, a->core, a->normed, a->lq_r, a->lk_r, a->a, a->beta, a->g,
                 a->saved, a->gn_rstd};
    for (size_t i = 0; i < sizeof p / sizeof p[0]; i++)
        if (p[i]) zt_cuda_free(p[i]);
}

static void work_alloc(q35_gpu *m, int any_lin, int any_full) {
    const dims z = m->z;
    const int64_t N = z.N;
    work *w = &m->w;
    w->w1 = dalloc(m, NULL, 2 * (z.d > z.D ? z.d : z.D));
    w->dh = dalloc(m, NULL, 2 * N * z.F), w->dg = dalloc(m, NULL, 2 * N * z.F), w->du = dalloc(m, NULL, 2 * N * z.F);
    w->dln = dalloc(m, NULL, 2 * N * z.d), w->dmid = dalloc(m, NULL, 2 * N * z.d);
    if (any_full) {
        const int64_t HD = N * z.H * z.D, KVD = N * z.Hkv * z.D;
        w->qg = dalloc(m, NULL, 2 * 2 * HD), w->dqg = dalloc(m, NULL, 2 * 2 * HD);
        w->dgated = dalloc(m, NULL, 2 * HD), w->datt = dalloc(m, NULL, 2 * HD), w->dgate = dalloc(m, NULL, 2 * HD);
        w->dq = dalloc(m, NULL, 2 * HD), w->dqp = dalloc(m, NULL, 2 * HD);
        w->dk = dalloc(m, NULL, 2 * KVD), w->dv = dalloc(m, NULL, 2 * KVD), w->dkp = dalloc(m, NULL, 2 * KVD);
    }
    if (any_lin) {
        w->conv_y = dalloc(m, NULL, 2 * N * z.C), w->bproj = dalloc(m, NULL, 4 * N * z.Hv);
        w->dnormed = dalloc(m, NULL, 2 * N * z.Vd), w->dcore = dalloc(m, NULL, 2 * N * z.Vd);
        w->dz = dalloc(m, NULL, 2 * N * z.Vd), w->dlv = dalloc(m, NULL, 2 * N * z.Vd);
        w->dlq = dalloc(m, NULL, 2 * N * z.Kd), w->dlk = dalloc(m, NULL, 2 * N * z.Kd);
        w->dlqn = dalloc(m, NULL, 2 * N * z.Kd), w->dlkn = dalloc(m, NULL, 2 * N * z.Kd);
        w->da = dalloc(m, NULL, 2 * N * z.Hv), w->db = dalloc(m, NULL, 2 * N * z.Hv);
        w->dgd = dalloc(m, NULL, 4 * N * z.Hv), w->dbeta = dalloc(m, NULL, 4 * N * z.Hv);
        w->dconv = dalloc(m, NULL, 2 * N * z.C), w->dqkv = dalloc(m, NULL, 2 * N * z.C);
    }
}

static void work_free(work *w) {
    void *p[] = {w->w1, w->qg, w->conv_y, w->bproj, w->dh, w->dg, w->du, w->dln, w->dmid, w->dgated, w->datt,
                 w->dgate, w->dq, w->dk, w->dv, w->dqp, w->dkp, w->dqg, w->dnormed, w->dcore, w->dz, w->dlv,
                 w->dlq, w->dlk, w->dlqn, w->dlkn, w->da, w->db, w->dconv, w->dqkv, w->dgd, w->dbeta};
    for (size_t i = 0; i < sizeof p / sizeof p[0]; i++)
        if (p[i]) zt_cuda_free(p[i]);
}

static int ends_with(const char *s, const char *suffix) {
    const size_t n = strlen(s), k = strlen(suffix);
    return n >= k && !strcmp(s + n - k, suffix);
}

static void destroy(void *mv);

static void *create(const zt_model_config *c, zt_cuda_ctx *ctx, void *stream, int64_t B, int64_t S,
                    const zt_family_cuda_opts *o) {
    const int64_t S_block = o->cx ? o->cx->S : S;
    if (check(c, S_block) != 0) return NULL;
    if (B <= 0 || c->num_layers > (int)sizeof ((q35_gpu *)0)->lin) {
        zt_err("GPU FSDP engine, Qwen3.5: micro-batch %lld, %d layers", (long long)B, c->num_layers);
        return NULL;
    }
    if (o->cx && (zt_qwen3_cuda_cx_check(o->cx, o->attention) != 0 || !c->family || !c->family->context_rule_gpu ||
                  c->family->context_rule_gpu(c, o->cx->C) != 0))
        return NULL;
    if (o->attention == ZT_ATTN_CUDNN && zt_attn_cudnn_head_dim_here(c->head_dim) != 0) {
        char why[ZT_ERR_MAX];  // zt_err writes the buffer zt_errmsg() reads
        snprintf(why, sizeof why, "%s", zt_errmsg());
        zt_err("GPU FSDP engine, Qwen3.5: %s", why);
        return NULL;
    }
    if (o->attention == ZT_ATTN_TILED && (c->head_dim % 8 || c->head_dim > 256)) {
        zt_err("GPU FSDP engine, Qwen3.5: head_dim %d: the tiled attention takes head_dim <= 256, a "
               "multiple of 8; use --attention gemm",
               c->head_dim);
        return NULL;
    }
    q35_gpu *m = zt_xcalloc(1, sizeof *m);
    const int L = c->num_layers;
    m->ctx = ctx, m->cs = stream, m->L = L, m->recompute = o->recompute != 0, m->tied = c->tie_word_embeddings;
    const zt_qwen3_5_fields *q = zt_q35(c);
    dims z = {.B = B, .S = S, .N = B * S, .d = c->hidden_size, .F = c->intermediate_size, .H = c->num_heads,
              .Hkv = c->num_kv_heads, .D = c->head_dim, .rd = c->rotary_dim, .Hk = q->lin_key_heads,
              .Hv = q->lin_value_heads, .Dk = q->lin_key_dim, .Dv = q->lin_value_dim, .K = q->lin_conv_kernel,
              .V = c->vocab_size, .eps = (float)c->rms_norm_eps, .attention = o->attention};
    z.Kd = z.Hk * z.Dk, z.Vd = z.Hv * z.Dv, z.C = 2 * z.Kd + z.Vd;
    m->z = z;
    memcpy(m->lin, zt_q35(c)->layer_linear, (size_t)L);
    m->linear = m->lin;
    // the offsets of every layer's tensors, from the family's own layout, checked by name
    zt_model_layout lay;
    if (!c->family || c->family->layout_init(&lay, c) != 0) {
        zt_err("GPU FSDP engine, Qwen3.5: no layout for this config");
        free(m);
        return NULL;
    }
    m->off = zt_xcalloc((size_t)(L > 0 ? L : 1), sizeof *m->off);
    int any_lin = 0, any_full = 0, bad = 0;
    for (int l = 0; l < L && !bad; l++) {
        const zt_unit_layout *u = &lay.units[1 + l];
        const int nt = m->lin[l] ? LIN_N : FA_N;
        const char *const *names = m->lin[l] ? lin_names : fa_names;
        any_lin |= m->lin[l] != 0, any_full |= !m->lin[l];
        bad = u->ntensors != nt;
        for (int i = 0; i < nt && !bad; i++) {
            bad = !ends_with(u->t[i].name, names[i]);
            m->off[l][i] = u->t[i].offset;
        }
    }
    m->norm_off = lay.units[L + 1].t[0].offset;
    m->lm_off = lay.units[L + 1].ntensors > 1 ? lay.units[L + 1].t[1].offset : -1;
    zt_model_layout_free(&lay);
    if (bad) {
        zt_err("GPU FSDP engine, Qwen3.5: the layer layout is not the one model/qwen3_5_cuda_family.c was written for");
        free(m->off), free(m);
        return NULL;
    }
    const int64_t N = z.N;
    const int nacts = m->recompute ? 2 : L;
    m->a = zt_xcalloc((size_t)(nacts > 0 ? nacts : 1), sizeof *m->a);
    if (m->recompute) {
        if (any_lin) acts_alloc(m, &m->a[0], 1);
        if (any_full) acts_alloc(m, &m->a[1], 0);
    } else {
        for (int l = 0; l < L; l++) acts_alloc(m, &m->a[l], m->lin[l]);
    }
    work_alloc(m, any_lin, any_full);
    m->X = zt_xcalloc((size_t)L + 1, sizeof(zt_bf16 *));
    for (int l = 0; l <= L; l++) m->X[l] = dalloc(m, NULL, 2 * N * z.d);
    m->dx = dalloc(m, NULL, 2 * N * z.d);
    m->hacts.xf = dalloc(m, NULL, 2 * N * z.d), m->hacts.dln = dalloc(m, NULL, 2 * N * z.d);
    m->hacts.rstd = dalloc(m, NULL, 4 * N);
    m->S_block = S_block;  // under a split RoPE's table covers the block
    m->rope_cos = dalloc(m, NULL, 4 * S_block * (z.rd / 2)), m->rope_sin = dalloc(m, NULL, 4 * S_block * (z.rd / 2));
    zt_cuda_rope_table(stream, m->rope_cos, m->rope_sin, S_block, z.rd, c->rope_theta);  // as model/qwen3_5.c's
    if (o->cx) {  // the Gated DeltaNet's head sharding and the full-attention layers' K/V exchange
        const int64_t before = zt_cuda_malloc_bytes();
        m->gcx = zt_q35_gcx_create(c, o->cx, B, m->recompute, o->attention, stream);
        m->cx_scratch = any_lin ? zt_q35_gcx_scratch_bytes(c, o->cx->C, B, S_block) : 0;
        m->cx_bytes = zt_cuda_malloc_bytes() - before;
        m->bytes += m->cx_bytes;
        if (!m->gcx) {
            destroy(m);
            return NULL;
        }
    }
    if (o->attention == ZT_ATTN_CUDNN) {  // packed documents: set_positions' table
        zt_cuda_docs_stage_init(&m->docs, N);
        m->bytes += zt_cuda_docs_stage_bytes(N);
    }
    return m;
}

static void destroy(void *mv) {
    q35_gpu *m = mv;
    if (!m) return;
    zt_q35_gcx_free(m->gcx);
    for (int l = 0; l < (m->recompute ? 2 : m->L); l++) acts_free(&m->a[l]);
    work_free(&m->w);
    for (int l = 0; l <= m->L; l++) zt_cuda_free(m->X[l]);
    void *dv[] = {m->dx, m->hacts.xf, m->hacts.dln, m->hacts.rstd, m->rope_cos, m->rope_sin};
    for (size_t i = 0; i < sizeof dv / sizeof dv[0]; i++) zt_cuda_free(dv[i]);
    zt_cuda_docs_stage_free(&m->docs);
    free(m->a), free(m->X), free(m->off), free(m);
}

int64_t zt_qwen3_5_cuda_act_bytes(const void *m) { return ((const q35_gpu *)m)->bytes; }
int64_t zt_qwen3_5_cuda_layer_bytes(const void *mv, int l) {
    const q35_gpu *m = mv;
    return m->recompute || l < 0 || l >= m->L ? 0 : m->a[l].bytes;
}

// The largest scratch one op of the passes takes (the engine reserves it before the first step):
// the attention's, the delta rule's backward (the chunked form's column-block parts of dq, dk, dg,
// dbeta, or the recurrence's recomputed states: zt_cuda_delta_scratch_bytes is the larger), the
// conv's dw partials, the head's lm_head chunk, the norms' dw partials.
static size_t scratch_of(const dims z, int any_lin, size_t cx_scratch, int64_t S_block) {
    size_t s = zt_attn_scratch_bytes(z.attention, z.S, S_block, z.H, z.Hkv, z.D);  // split: held queries, block keys
    const size_t more[] = {zt_cuda_lmhead_xent_scratch_bytes(z.N, z.V), zt_cuda_rmsnorm_bwd_scratch_bytes(z.N, z.d),
                           zt_cuda_rmsnorm_bwd_scratch_bytes(z.N * z.H, z.D),
                           zt_cuda_rmsnorm_bwd_scratch_bytes(z.N * z.Hkv, z.D),
                           any_lin ? zt_cuda_rmsnorm_gated_bwd_scratch_bytes(z.N * z.Hv, z.Dv) : 0};
    for (size_t i = 0; i < sizeof more / sizeof more[0]; i++) s = more[i] > s ? more[i] : s;
    if (any_lin) {
        const size_t d = zt_cuda_delta_scratch_bytes(z.B, z.S, z.Hv, z.Dk, z.Dv);
        const size_t cv = (size_t)(256 * z.C * z.K) * 4;
        if (d > s) s = d;
        if (cv > s) s = cv;
        if (cx_scratch > s) s = cx_scratch;  // the split's delta rule and conv over the block's rows
    }
    return s;
}

static size_t scratch_bytes(const void *mv) {
    const q35_gpu *m = mv;
    int any_lin = 0;
    for (int l = 0; l < m->L; l++) any_lin |= m->lin[l] != 0;
    return scratch_of(m->z, any_lin, m->cx_scratch, m->S_block);
}

static dims dims_of(const zt_model_config *c, int64_t B, int64_t S, zt_attn_kind attention) {
    const zt_qwen3_5_fields *q = zt_q35(c);
    dims z = {.B = B, .S = S, .N = B * S, .d = c->hidden_size, .F = c->intermediate_size, .H = c->num_heads,
              .Hkv = c->num_kv_heads, .D = c->head_dim, .rd = c->rotary_dim, .Hk = q->lin_key_heads,
              .Hv = q->lin_value_heads, .Dk = q->lin_key_dim, .Dv = q->lin_value_dim, .K = q->lin_conv_kernel,
              .V = c->vocab_size, .eps = (float)c->rms_norm_eps, .attention = attention};
    z.Kd = z.Hk * z.Dk, z.Vd = z.Hv * z.Dv, z.C = 2 * z.Kd + z.Vd;
    return z;
}

static size_t scratch_bytes_for(const zt_model_config *c, int64_t B, int64_t S, const zt_family_cuda_opts *o) {
    int any_lin = 0;
    for (int l = 0; l < c->num_layers; l++) any_lin |= zt_q35(c)->layer_linear[l] != 0;
    const size_t cx = o->cx && any_lin ? zt_q35_gcx_scratch_bytes(c, o->cx->C, B, o->cx->S) : 0;
    return scratch_of(dims_of(c, B, S, o->attention), any_lin, cx, o->cx ? o->cx->S : S);
}

// What create allocates, listed again from the shapes (the engine measures create's own calls:
// plan_cuda_memory holds the two equal): the saved tensors of the file comment per kept layer (all
// L, or one of each kind present with recompute), the shared workspaces (1 + w; every layer's dh,
// dg, du, dln, dmid; full attention's q_proj output and its gradient, dgated, datt, dgate, dq, dqp,
// dk, dv, dkp; DeltaNet's conv output, in_proj_b output, dnormed, dcore, dz, dlv, dlq, dlk, dlqn,
// dlkn, da, db, dconv, dqkv and the fp32 dg, dbeta), the residual stream X[0..L], dx, the head's
// xf, dln and rstd, the RoPE tables of the rotary slice (over the block under a split), and the
// split's buffers (model/qwen3_5_cuda_context.c: zt_q35_gcx_bytes, Qwen3's K/V exchange included).
static int64_t act_bytes_for(const zt_model_config *c, int64_t B, int64_t S, const zt_family_cuda_opts *o,
                             int64_t *context) {
    const dims z = dims_of(c, B, S, o->attention);
    const int64_t N = z.N, HD = z.H * z.D, KVD = z.Hkv * z.D;
    const int64_t every = 2 * N * (3 * z.d + 3 * z.F) + 4 * N * 2;
    const int64_t lin = every + 2 * N * (2 * z.C + 4 * z.Kd + 4 * z.Vd) + 4 * N * (2 * z.Hk + 4 * z.Hv) +
                        4 * zt_cuda_delta_saved_floats(z.B, z.S, z.Hv, z.Dk, z.Dv);
    const int64_t full = every + 2 * N * (5 * HD + 3 * KVD) + 4 * N * (z.H + z.Hkv) + 4 * z.B * z.H * z.S;
    int any_lin = 0, any_full = 0;
    int64_t kept = 0;
    for (int l = 0; l < c->num_layers; l++) {
        any_lin |= zt_q35(c)->layer_linear[l] != 0, any_full |= !zt_q35(c)->layer_linear[l];
        kept += zt_q35(c)->layer_linear[l] ? lin : full;
    }
    if (o->recompute) kept = (any_lin ? lin : 0) + (any_full ? full : 0);
    int64_t work = 2 * (z.d > z.D ? z.d : z.D) + 2 * N * (3 * z.F + 2 * z.d);
    if (any_full) work += 2 * N * (9 * HD + 3 * KVD);
    if (any_lin) work += 2 * N * (3 * z.C + 4 * z.Vd + 4 * z.Kd + 2 * z.Hv) + 4 * N * 3 * z.Hv;
    const int64_t S_block = o->cx ? o->cx->S : S;  // RoPE's table covers the block
    const int64_t rest = 2 * N * z.d * (c->num_layers + 1) + 3 * 2 * N * z.d + 4 * N + 2 * 4 * S_block * (z.rd / 2);
    const int64_t docs = o->attention == ZT_ATTN_CUDNN ? zt_cuda_docs_stage_bytes(N) : 0;  // set_positions' table
    *context = o->cx ? zt_q35_gcx_bytes(c, o->cx->C, B, o->cx->S, S, o->recompute, o->attention) : 0;
    return kept + work + rest + docs + *context;
}

static int64_t context_bytes(const void *m) { return ((const q35_gpu *)m)->cx_bytes; }

// Packed documents with cuDNN: its variable-length batch (cuDNN >= 9.6.0; compiled only), the rule
// Qwen3's passes have (model/blocks_cuda.h).
static int check_data(const void *mv, int isolated) {
    return zt_cuda_docs_check(((const q35_gpu *)mv)->z.attention, isolated);
}

// The micro-batch's document table for the cuDNN attention, as Qwen3's (model/blocks_cuda.h).
static int set_positions(void *mv, const int32_t *pos) {
    q35_gpu *m = mv;
    if (m->z.attention != ZT_ATTN_CUDNN || !pos) return 0;
    m->staged = 0;
    const zt_cuda_block_dims dm = {.B = m->z.B, .S = m->z.S, .H = m->z.H, .Hkv = m->z.Hkv, .D = m->z.D};
    if (zt_cuda_docs_stage_put(&m->docs, m->cs, pos, &dm) != 0) return -1;
    m->staged = 1;
    return 0;
}

// --attention auto's question (model/family_cuda.h): the full-attention layers' head_dim (256 in the
// released models) against cuDNN's rule for this device and cuDNN (kernels/cuda/attention/policy.h).
static int cudnn_serves(const zt_model_config *c) { return zt_attn_cudnn_head_dim_here(c->head_dim) == 0; }

#define W(i) (p + m->off[l][(i)])
#define DW(i) (dp + m->off[l][(i)])

// The blocks' view of the family (model/blocks_cuda.h): Qwen3's attention and MLP blocks with the
// output gate, the rotary slice and the (1 + w) norm weights (formed in the shared w1); under a
// context split the attention runs Qwen3's K/V exchange (model/qwen3_cuda_context.c) and RoPE reads
// the block's table.
static zt_cuda_block_dims block_dims(const q35_gpu *m) {
    const dims z = m->z;
    return (zt_cuda_block_dims){.B = z.B, .S = z.S, .N = z.N, .d = z.d, .F = z.F, .H = z.H, .Hkv = z.Hkv, .D = z.D,
                                .eps = z.eps, .attention = z.attention, .rd = z.rd, .out_gate = 1, .w1 = m->w.w1,
                                .docs = m->staged ? &m->docs.table : NULL, .docs_table = m->staged ? m->docs.d : NULL,
                                .cx = m->gcx ? zt_q35_gcx_attention(m->gcx) : NULL};
}

static zt_cuda_block_acts block_acts(const acts *a) {
    return (zt_cuda_block_acts){.ln1 = a->ln1, .q_pre = a->q_pre, .k_pre = a->k_pre, .q = a->q, .k = a->k,
                                .v = a->v, .att = a->att, .x_mid = a->x_mid, .ln2 = a->ln2, .gate = a->mgate,
                                .up = a->up, .h = a->h, .rstd1 = a->rstd1, .rstd2 = a->rstd2, .qn_rstd = a->qn_rstd,
                                .kn_rstd = a->kn_rstd, .lse = a->lse, .ogate = a->gate, .gated = a->gated};
}

static zt_cuda_block_work block_work(const work *w) {
    return (zt_cuda_block_work){.dh = w->dh, .dg = w->dg, .du = w->du, .dln = w->dln, .dmid = w->dmid,
                                .datt = w->datt, .dq = w->dq, .dk = w->dk, .dv = w->dv, .dqp = w->dqp,
                                .dkp = w->dkp, .qg = w->qg, .dqg = w->dqg, .dgated = w->dgated, .dgate = w->dgate};
}

// Qwen3_5RMSNorm: rmsnorm with the weight 1 + w (bf16), formed in the shared w1 (the blocks' rule).
static const zt_bf16 *one_plus(q35_gpu *m, const zt_bf16 *w, int64_t n) {
    const zt_cuda_block_dims dm = block_dims(m);
    return zt_cuda_norm_weight(&dm, m->cs, w, n);
}

static zt_cuda_mlp_off mlp_off(const q35_gpu *m, int l, int post, int gate, int up, int down) {
    return (zt_cuda_mlp_off){.norm = m->off[l][post], .gate = m->off[l][gate], .up = m->off[l][up],
                             .down = m->off[l][down]};
}

static void mlp_fwd(q35_gpu *m, int l, acts *a, const zt_bf16 *p, int post, int gate, int up, int down, zt_bf16 *y) {
    const zt_cuda_block_dims dm = block_dims(m);
    zt_cuda_block_acts ba = block_acts(a);
    const zt_cuda_mlp_off o = mlp_off(m, l, post, gate, up, down);
    zt_cuda_mlp_block_fwd(m->ctx, m->cs, &dm, p, &o, &ba, y, NULL);
}

// dx in: d(loss)/dy. w.dmid out: d(loss)/d(x_mid), the residual included.
static void mlp_bwd(q35_gpu *m, int l, acts *a, const zt_bf16 *p, float *dp, int post, int gate, int up, int down,
                    const zt_bf16 *dx) {
    const zt_cuda_block_dims dm = block_dims(m);
    const zt_cuda_block_acts ba = block_acts(a);
    zt_cuda_block_work bw = block_work(&m->w);
    const zt_cuda_mlp_off o = mlp_off(m, l, post, gate, up, down);
    zt_cuda_mlp_block_bwd(m->ctx, m->cs, &dm, p, dp, &o, &ba, &bw, dx, NULL);
}

// The full-attention layers: the attention block (the kind create accepted: tiled, GEMM, or cuDNN
// with the output gate and the partial RoPE outside its fused call; whole rows), then the MLP block.
static zt_cuda_attn_off attn_off(const q35_gpu *m, int l) {
    const int64_t *o = m->off[l];
    return (zt_cuda_attn_off){.in_norm = o[FA_IN_NORM], .q = o[FA_Q], .k = o[FA_K], .v = o[FA_V], .o = o[FA_O],
                              .q_norm = o[FA_QNORM], .k_norm = o[FA_KNORM]};
}

static void full_fwd(q35_gpu *m, int l, acts *a, const zt_bf16 *p, const int32_t *pos, const zt_bf16 *x, zt_bf16 *y) {
    const zt_cuda_block_dims dm = block_dims(m);
    zt_cuda_block_acts ba = block_acts(a);
    zt_cuda_block_work bw = block_work(&m->w);
    const zt_cuda_attn_off o = attn_off(m, l);
    zt_cuda_attn_block_fwd(m->ctx, m->cs, &dm, p, &o, m->rope_cos, m->rope_sin, pos, x, &ba, &bw, NULL);
    mlp_fwd(m, l, a, p, FA_POST_NORM, FA_GATE, FA_UP, FA_DOWN, y);
}

static void full_bwd(q35_gpu *m, int l, acts *a, const zt_bf16 *p, float *dp, const int32_t *pos, const zt_bf16 *x,
                     zt_bf16 *dx) {
    mlp_bwd(m, l, a, p, dp, FA_POST_NORM, FA_GATE, FA_UP, FA_DOWN, dx);
    const zt_cuda_block_dims dm = block_dims(m);
    const zt_cuda_block_acts ba = block_acts(a);
    zt_cuda_block_work bw = block_work(&m->w);
    const zt_cuda_attn_off o = attn_off(m, l);
    zt_cuda_attn_block_bwd(m->ctx, m->cs, &dm, p, dp, &o, m->rope_cos, m->rope_sin, pos, x, &ba, &bw, dx, NULL);
}

static void lin_fwd(q35_gpu *m, int l, acts *a, const zt_bf16 *p, const int32_t *pos, const zt_bf16 *x, zt_bf16 *y) {
    const dims z = m->z;
    work *w = &m->w;
    void *st = m->cs;
    const int64_t N = z.N;
    zt_cuda_rmsnorm_fwd(st, a->ln1, a->rstd1, x, one_plus(m, W(LIN_IN_NORM), z.d), N, z.d, z.eps);
    zt_cuda_matmul_fwd(m->ctx, st, a->qkv, ZT_BF16, a->ln1, W(LIN_QKV), N, z.d, z.C);
    zt_cuda_matmul_fwd(m->ctx, st, a->z, ZT_BF16, a->ln1, W(LIN_Z), N, z.d, z.Vd);
    zt_cuda_matmul_fwd(m->ctx, st, w->bproj, ZT_F32, a->ln1, W(LIN_B), N, z.d, z.Hv);  // the gates' inputs in fp32
    zt_cuda_matmul_fwd(m->ctx, st, a->a, ZT_F32, a->ln1, W(LIN_A), N, z.d, z.Hv);
    if (m->gcx) {  // the block's conv, gates and delta rule for this rank's heads (model/qwen3_5_cuda_context.c)
        zt_q35_gcx_mix_fwd(m->gcx, st, pos, a->qkv, w->bproj, a->a, W(LIN_CONV), W(LIN_ALOG), W(LIN_DT), a->core);
    } else {
        zt_cuda_conv1d_silu_fwd(st, w->conv_y, a->conv_pre, a->qkv, W(LIN_CONV), pos, z.B, z.S, z.C, z.K);
        zt_cuda_copy_cols(st, a->lq, z.Kd, w->conv_y, z.C, N, z.Kd);  // the channels: q | k | v
        zt_cuda_copy_cols(st, a->lk, z.Kd, w->conv_y + z.Kd, z.C, N, z.Kd);
        zt_cuda_copy_cols(st, a->lv, z.Vd, w->conv_y + 2 * z.Kd, z.C, N, z.Vd);
        zt_cuda_l2norm_fwd(st, a->lq_n, a->lq_r, a->lq, N * z.Hk, z.Dk, 1e-6f);
        zt_cuda_l2norm_fwd(st, a->lk_n, a->lk_r, a->lk, N * z.Hk, z.Dk, 1e-6f);
        zt_cuda_delta_gates_fwd(st, a->beta, a->g, w->bproj, a->a, W(LIN_ALOG), W(LIN_DT), N, z.Hv);
        zt_cuda_delta_fwd(st, a->core, a->saved, a->lq_n, a->lk_n, a->lv, a->g, a->beta, pos, z.B, z.S, z.Hk, z.Hv,
                          z.Dk, z.Dv);
    }
    zt_cuda_rmsnorm_gated_fwd(st, a->normed, a->gn_rstd, a->core, a->z, W(LIN_NORM), N * z.Hv, z.Dv, z.eps);
    zt_cuda_matmul_fwd(m->ctx, st, a->x_mid, ZT_BF16, a->normed, W(LIN_OUT), N, z.Vd, z.d);
    zt_cuda_add(st, a->x_mid, a->x_mid, x, ZT_BF16, N * z.d);
    mlp_fwd(m, l, a, p, LIN_POST_NORM, LIN_GATE, LIN_UP, LIN_DOWN, y);
}

static void lin_bwd(q35_gpu *m, int l, acts *a, const zt_bf16 *p, float *dp, const int32_t *pos, const zt_bf16 *x,
                    zt_bf16 *dx) {
    const dims z = m->z;
    work *w = &m->w;
    void *st = m->cs;
    const int64_t N = z.N;
    mlp_bwd(m, l, a, p, dp, LIN_POST_NORM, LIN_GATE, LIN_UP, LIN_DOWN, dx);
    zt_cuda_matmul_bwd(m->ctx, st, w->dnormed, DW(LIN_OUT), ZT_F32, w->dmid, a->normed, W(LIN_OUT), N, z.Vd, z.d, 0);
    zt_cuda_rmsnorm_gated_bwd(m->ctx, st, w->dcore, w->dz, DW(LIN_NORM), w->dnormed, a->core, a->z, W(LIN_NORM),
                              a->gn_rstd, N * z.Hv, z.Dv);
    if (m->gcx) {  // across the split (model/qwen3_5_cuda_context.c): dqkv, db, da of the held tokens
        zt_q35_gcx_mix_bwd(m->gcx, m->ctx, st, w->dcore, W(LIN_CONV), DW(LIN_CONV), W(LIN_ALOG), DW(LIN_ALOG),
                           W(LIN_DT), DW(LIN_DT), w->dqkv, w->db, w->da);
    } else {
        zt_cuda_delta_bwd(m->ctx, st, w->dlqn, w->dlkn, w->dlv, w->dgd, w->dbeta, w->dcore, a->saved, a->lq_n,
                          a->lk_n, a->lv, a->g, a->beta, pos, z.B, z.S, z.Hk, z.Hv, z.Dk, z.Dv);
        zt_cuda_delta_gates_bwd(st, w->db, w->da, DW(LIN_ALOG), DW(LIN_DT), w->dgd, w->dbeta, a->a, a->beta, a->g,
                                W(LIN_ALOG), W(LIN_DT), N, z.Hv);
        zt_cuda_l2norm_bwd(st, w->dlq, w->dlqn, a->lq, a->lq_r, N * z.Hk, z.Dk);
        zt_cuda_l2norm_bwd(st, w->dlk, w->dlkn, a->lk, a->lk_r, N * z.Hk, z.Dk);
        zt_cuda_copy_cols(st, w->dconv, z.C, w->dlq, z.Kd, N, z.Kd);
        zt_cuda_copy_cols(st, w->dconv + z.Kd, z.C, w->dlk, z.Kd, N, z.Kd);
        zt_cuda_copy_cols(st, w->dconv + 2 * z.Kd, z.C, w->dlv, z.Vd, N, z.Vd);
        zt_cuda_conv1d_silu_bwd(m->ctx, st, w->dqkv, DW(LIN_CONV), w->dconv, a->conv_pre, a->qkv, W(LIN_CONV), pos,
                                z.B, z.S, z.C, z.K);
    }
    zt_cuda_matmul_bwd(m->ctx, st, w->dln, DW(LIN_QKV), ZT_F32, w->dqkv, a->ln1, W(LIN_QKV), N, z.d, z.C, 0);
    zt_cuda_matmul_bwd(m->ctx, st, w->dln, DW(LIN_Z), ZT_F32, w->dz, a->ln1, W(LIN_Z), N, z.d, z.Vd, 1);
    zt_cuda_matmul_bwd(m->ctx, st, w->dln, DW(LIN_B), ZT_F32, w->db, a->ln1, W(LIN_B), N, z.d, z.Hv, 1);
    zt_cuda_matmul_bwd(m->ctx, st, w->dln, DW(LIN_A), ZT_F32, w->da, a->ln1, W(LIN_A), N, z.d, z.Hv, 1);
    zt_cuda_rmsnorm_bwd(m->ctx, st, dx, DW(LIN_IN_NORM), w->dln, x, one_plus(m, W(LIN_IN_NORM), z.d), a->rstd1, N,
                        z.d);
    zt_cuda_add(st, dx, dx, w->dmid, ZT_BF16, N * z.d);
}
#undef W
#undef DW

static acts *layer_acts(q35_gpu *m, int l) { return m->recompute ? &m->a[m->lin[l] ? 0 : 1] : &m->a[l]; }

static void embed_fwd(void *mv, const zt_bf16 *p, const uint32_t *ids) {
    q35_gpu *m = mv;
    zt_cuda_embedding_fwd(m->cs, m->X[0], p, ids, m->z.N, m->z.d, m->z.V);
}

static void layer_pass(void *mv, int l, const zt_bf16 *p, const int32_t *pos) {
    q35_gpu *m = mv;
    if (m->lin[l])
        lin_fwd(m, l, layer_acts(m, l), p, pos, m->X[l], m->X[l + 1]);
    else
        full_fwd(m, l, layer_acts(m, l), p, pos, m->X[l], m->X[l + 1]);
}

// The layer and pass the context split's collectives name (and that a forward pass starts a micro-batch).
static void cx_at(q35_gpu *m, int l, const char *pass) {
    if (m->gcx) zt_q35_gcx_at(m->gcx, l, pass);
}

static void layer_fwd(void *mv, int l, const zt_bf16 *p, const int32_t *pos) {
    cx_at(mv, l, "forward");
    layer_pass(mv, l, p, pos);
}

static void layer_bwd(void *mv, int l, const zt_bf16 *p, float *dp, const int32_t *pos) {
    q35_gpu *m = mv;
    cx_at(m, l, "recompute");
    if (m->recompute) layer_pass(m, l, p, pos);  // X[l+1] rewritten with the same values (deterministic ops)
    cx_at(m, l, "backward");
    if (m->lin[l])
        lin_bwd(m, l, layer_acts(m, l), p, dp, pos, m->X[l], m->dx);
    else
        full_bwd(m, l, layer_acts(m, l), p, dp, pos, m->X[l], m->dx);
}

// Final (1 + w) norm + lm_head + cross-entropy (Qwen3's GPU head given 1 + w).
static void head(void *mv, const zt_bf16 *p, const zt_bf16 *emb, const int32_t *targets, float scale, double *loss,
                 float *dhead, float *demb) {
    q35_gpu *m = mv;
    const zt_bf16 *lm_w = emb ? emb : p + m->lm_off;
    float *dlm = dhead ? (demb ? demb : dhead + m->lm_off) : NULL;
    const zt_qwen3_cuda_dims dm = {.B = m->z.B, .S = m->z.S, .N = m->z.N, .d = m->z.d, .eps = m->z.eps};
    zt_qwen3_cuda_head_fwd_bwd(m->ctx, m->cs, &dm, m->z.V, one_plus(m, p + m->norm_off, m->z.d), lm_w, m->X[m->L],
                               targets, scale, loss, &m->hacts, dhead ? dhead + m->norm_off : NULL, dlm, m->dx);
}

static void embed_bwd(void *mv, float *dp, const uint32_t *ids) {
    q35_gpu *m = mv;
    zt_cuda_embedding_bwd(m->cs, dp, m->dx, ids, m->z.N, m->z.d, m->z.V);
}

const zt_family_cuda zt_qwen3_5_cuda_family = {
    .name = "qwen3_5",
    .check = check,
    .create = create,
    .destroy = destroy,
    .scratch_bytes = scratch_bytes,
    .act_bytes_for = act_bytes_for,
    .scratch_bytes_for = scratch_bytes_for,
    .context_bytes = context_bytes,
    .check_data = check_data,
    .embed_fwd = embed_fwd,
    .layer_fwd = layer_fwd,
    .head = head,
    .layer_bwd = layer_bwd,
    .embed_bwd = embed_bwd,
    .set_positions = set_positions,
    .cudnn_serves = cudnn_serves,
};
