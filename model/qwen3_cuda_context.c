// Qwen3's attention across a context-parallel split on the GPU (model/qwen3_cuda_layer.h
// zt_qwen3_cuda_cx): model/qwen3_context.c's method on device buffers. K|V after RoPE are
// all-gathered in bf16 over the context group (the engine's collective, stream-ordered) and placed
// at their block rows; the tiled attention (the dispatcher on held rows: kernels/cuda/attention/
// dispatch.h) runs this rank's held queries in place against the whole block's keys, each at its
// block row g with its position p
// (it sees keys g - p .. g wherever they are held; a padding row sees none): queries, outputs, dO,
// dQ and lse stay [B, S_local] rows. The GEMM path takes equal-length Q and K, so for it the held
// rows go to a zeroed whole-block query buffer (a row held elsewhere has position 0 and a zero
// query and dO: it contributes nothing) and come back: [B * S_block, H * D] bf16 Q, O, dO, dQ
// buffers, for it only. The backward re-gathers K|V, except right after --recompute's re-run of the
// same layer's forward (the block's K|V are still in place: no more memory held), and hands each
// rank the group's sum of dK|dV for its keys by one fp32 reduce-scatter.
// defines: zt_qwen3_cuda_cx_bytes, zt_qwen3_cuda_cx_check, zt_qwen3_cuda_cx_create, zt_qwen3_cuda_cx_free,
//          zt_qwen3_cuda_cx_attention_fwd, zt_qwen3_cuda_cx_attention_bwd
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "kernels/cuda/attention/dispatch.h"
#include "kernels/cuda/attention/policy.h"
#include "kernels/cuda/zt_cuda_check.h"
#include "model/qwen3_cuda_layer.h"

int64_t zt_qwen3_cuda_cx_bytes(const zt_qwen3_cuda_dims *dm, int C, int64_t Sb) {
    const int64_t B = dm->B, Sl = dm->S, qs = dm->H * dm->D, kvs = dm->Hkv * dm->D, n = B * Sl * kvs;
    const int64_t maps = (Sb + Sl + C * Sl) * 4;                         // kv_in, q_out, index
    const int64_t kv = (2 * n + C * 2 * n) * 2 + 2 * B * Sb * kvs * 2;  // kv_mine, kv_all; k_blk, v_blk
    const int64_t red = (C * 2 * n + 2 * n) * 4;                         // kv_all32, kv_mine32
    int64_t gemm = 0;  // q_in, pos_blk; the whole-block q, o, do, dq; lse_blk
    if (dm->attention == ZT_ATTN_GEMM) gemm = Sb * 4 + B * Sb * 4 + 4 * B * Sb * qs * 2 + B * dm->H * Sb * 4;
    return maps + kv + red + gemm;
}

static void *dalloc(int64_t bytes) { return zt_cuda_malloc((size_t)(bytes > 0 ? bytes : 16)); }

int zt_qwen3_cuda_cx_check(const zt_family_cuda_context *x, zt_attn_kind attention) {
    return zt_attn_split_check(attention, x->C);  // the attention policy's rule (cuDNN takes no split)
}

zt_qwen3_cuda_cx *zt_qwen3_cuda_cx_create(const zt_family_cuda_context *x, const zt_qwen3_cuda_dims *dm, void *stream) {
    if (zt_qwen3_cuda_cx_check(x, dm->attention) != 0) return NULL;
    if (dm->S != x->S_local || x->C < 2 || (dm->H * dm->D) % 2 || (dm->Hkv * dm->D) % 2) {
        zt_err("GPU context parallelism: rows of %lld tokens for S_local %lld, C %d (head_dim must be even)",
               (long long)dm->S, (long long)x->S_local, x->C);
        return NULL;
    }
    zt_qwen3_cuda_cx *cx = zt_xcalloc(1, sizeof *cx);
    const int C = x->C, r0 = x->rank;
    const int64_t B = dm->B, Sb = x->S, Sl = x->S_local, qs = dm->H * dm->D, kvs = dm->Hkv * dm->D;
    const int64_t n = B * Sl * kvs;
    cx->x = *x;
    cx->index_h = zt_xmalloc((size_t)(C * Sl) * sizeof(int32_t));
    memcpy(cx->index_h, x->index, (size_t)(C * Sl) * sizeof(int32_t));
    cx->x.index = cx->index_h;
    cx->B = B, cx->Sb = Sb, cx->Sl = Sl;
    cx->pass = "forward";
    cx->kv_layer = -1;
    // the maps (rows.cu's zt_cuda_rows_gather): q_in[g] = this rank's token at block row g (-1: held
    // elsewhere), q_out[t] = the block row of its token t (-1: padding; also the tiled attention's
    // query rows), kv_in[g] = the row of the gathered K (rank-major [C][K|V][B][S_local]) that is
    // block row g, less the row's b * S_local
    int32_t *h = zt_xmalloc((size_t)(2 * Sb + Sl) * sizeof(int32_t));
    int32_t *q_in = h, *kv_in = h + Sb, *q_out = h + 2 * Sb;
    for (int64_t g = 0; g < Sb; g++) q_in[g] = kv_in[g] = -1;
    for (int r = 0; r < C; r++)
        for (int64_t t = 0; t < Sl; t++) {
            const int32_t g = x->index[r * Sl + t];
            if (g < 0) continue;
            if (g >= Sb || kv_in[g] >= 0) zt_fatal("GPU context parallelism: block position %d held twice or past %lld",
                                                   g, (long long)Sb);
            kv_in[g] = (int32_t)(r * 2 * B * Sl + t);
            if (r == r0) q_in[g] = (int32_t)t;
        }
    for (int64_t g = 0; g < Sb; g++)
        if (kv_in[g] < 0) zt_fatal("GPU context parallelism: block position %lld held by no rank", (long long)g);
    for (int64_t t = 0; t < Sl; t++) q_out[t] = x->index[r0 * Sl + t];
    const int gemm = dm->attention == ZT_ATTN_GEMM;  // the whole-block query side: the GEMM path only
    cx->kv_in = dalloc(Sb * 4);
    cx->q_out = dalloc(Sl * 4);
    cx->index = dalloc(C * Sl * 4);
    cudaStream_t st = (cudaStream_t)stream;
    if (gemm) {
        cx->q_in = dalloc(Sb * 4);
        ZT_CUDA_CHECK(cudaMemcpyAsync(cx->q_in, q_in, (size_t)Sb * 4, cudaMemcpyHostToDevice, st));
    }
    ZT_CUDA_CHECK(cudaMemcpyAsync(cx->kv_in, kv_in, (size_t)Sb * 4, cudaMemcpyHostToDevice, st));
    ZT_CUDA_CHECK(cudaMemcpyAsync(cx->q_out, q_out, (size_t)Sl * 4, cudaMemcpyHostToDevice, st));
    ZT_CUDA_CHECK(cudaMemcpyAsync(cx->index, cx->index_h, (size_t)(C * Sl) * 4, cudaMemcpyHostToDevice, st));
    free(h);  // pageable: staged before cudaMemcpyAsync returned; every kernel reading a map follows on `st`
    cx->kv_mine = dalloc(2 * n * 2);
    cx->kv_all = dalloc(C * 2 * n * 2);
    cx->k_blk = dalloc(B * Sb * kvs * 2);
    cx->v_blk = dalloc(B * Sb * kvs * 2);
    if (gemm) {
        cx->pos_blk = dalloc(B * Sb * 4);
        cx->q_blk = dalloc(B * Sb * qs * 2);
        cx->o_blk = dalloc(B * Sb * qs * 2);
        cx->do_blk = dalloc(B * Sb * qs * 2);
        cx->dq_blk = dalloc(B * Sb * qs * 2);
        cx->lse_blk = dalloc(B * dm->H * Sb * 4);
    }
    cx->kv_all32 = dalloc(C * 2 * n * 4);
    cx->kv_mine32 = dalloc(2 * n * 4);
    return cx;
}

void zt_qwen3_cuda_cx_free(zt_qwen3_cuda_cx *cx) {
    if (!cx) return;
    void *p[] = {cx->q_in, cx->kv_in, cx->q_out, cx->index, cx->pos_blk, cx->kv_mine, cx->kv_all, cx->k_blk,
                 cx->v_blk, cx->q_blk, cx->o_blk, cx->do_blk, cx->dq_blk, cx->lse_blk, cx->kv_all32, cx->kv_mine32};
    for (size_t i = 0; i < sizeof p / sizeof p[0]; i++)
        if (p[i]) zt_cuda_free(p[i]);
    free(cx->index_h);
    free(cx);
}

// The whole block's K and V (after RoPE) into k_blk, v_blk: one all-gather of every rank's K|V.
static void gather_kv(zt_qwen3_cuda_cx *cx, void *stream, const zt_qwen3_cuda_dims *dm, const zt_bf16 *k,
                      const zt_bf16 *v) {
    cudaStream_t st = (cudaStream_t)stream;
    const int64_t B = cx->B, Sb = cx->Sb, Sl = cx->Sl, kvs = dm->Hkv * dm->D, n = B * Sl * kvs;
    ZT_CUDA_CHECK(cudaMemcpyAsync(cx->kv_mine, k, (size_t)n * 2, cudaMemcpyDeviceToDevice, st));
    ZT_CUDA_CHECK(cudaMemcpyAsync(cx->kv_mine + n, v, (size_t)n * 2, cudaMemcpyDeviceToDevice, st));
    char what[64];
    snprintf(what, sizeof what, "layer %d K/V context all-gather (%s)", cx->layer, cx->pass);
    cx->x.gather(cx->x.ctx, cx->kv_mine, cx->kv_all, 2 * n, what);
    zt_cuda_rows_gather(stream, cx->k_blk, cx->kv_all, cx->kv_in, B, Sb, Sl, kvs / 2);
    zt_cuda_rows_gather(stream, cx->v_blk, cx->kv_all + n, cx->kv_in, B, Sb, Sl, kvs / 2);
}

// This rank's rows of a [B * S_local, w] bf16 matrix to their block rows (the others zero), and
// back: the GEMM path's whole-block query side.
static void to_block(const zt_qwen3_cuda_cx *cx, void *stream, zt_bf16 *dst, const zt_bf16 *src, int64_t w) {
    zt_cuda_rows_gather(stream, dst, src, cx->q_in, cx->B, cx->Sb, cx->Sl, w / 2);
}
static void from_block(const zt_qwen3_cuda_cx *cx, void *stream, zt_bf16 *dst, const zt_bf16 *src, int64_t w) {
    zt_cuda_rows_gather(stream, dst, src, cx->q_out, cx->B, cx->Sl, cx->Sb, w / 2);
}

void zt_qwen3_cuda_cx_attention_fwd(zt_cuda_ctx *c, void *stream, const zt_qwen3_cuda_dims *dm, const int32_t *pos,
                                    zt_qwen3_cuda_acts *a) {
    zt_qwen3_cuda_cx *cx = dm->cx;
    const int64_t B = cx->B, Sb = cx->Sb, Sl = cx->Sl, H = dm->H, Hkv = dm->Hkv, D = dm->D;
    if (!pos) zt_fatal("GPU context parallelism: the layer needs the held tokens' positions");
    gather_kv(cx, stream, dm, a->k, a->v);
    // --recompute's re-run: its backward follows at once and may use these K|V in place
    cx->kv_layer = !strcmp(cx->pass, "recompute") ? cx->layer : -1;
    cx->kv_k = a->k, cx->kv_v = a->v;
    if (zt_attn_takes_rows(dm->attention)) {  // the held queries in place (q_out: their block rows)
        const zt_attn_call call = {.kind = dm->attention, .B = B, .S = Sb, .H = H, .Hkv = Hkv, .D = D, .pos = pos,
                                   .qrow = cx->q_out, .Sq = Sl};
        zt_attn_fwd(c, stream, &call, a->att, a->lse, a->q, cx->k_blk, cx->v_blk);
        return;
    }
    // the GEMM path takes equal-length Q and K: the whole block's queries, this rank's rows placed
    const zt_attn_call call = {.kind = dm->attention, .B = B, .S = Sb, .H = H, .Hkv = Hkv, .D = D,
                               .pos = cx->pos_blk};
    to_block(cx, stream, cx->q_blk, a->q, H * D);
    zt_cuda_rows_gather(stream, cx->pos_blk, pos, cx->q_in, B, Sb, Sl, 1);
    zt_attn_fwd(c, stream, &call, cx->o_blk, cx->lse_blk, cx->q_blk, cx->k_blk, cx->v_blk);
    from_block(cx, stream, a->att, cx->o_blk, H * D);
    zt_cuda_rows_gather(stream, a->lse, cx->lse_blk, cx->q_out, B * H, Sl, Sb, 1);  // [B, H, S] rows of one
}

void zt_qwen3_cuda_cx_attention_bwd(zt_cuda_ctx *c, void *stream, const zt_qwen3_cuda_dims *dm, const int32_t *pos,
                                    const zt_qwen3_cuda_acts *a, zt_qwen3_cuda_work *w) {
    zt_qwen3_cuda_cx *cx = dm->cx;
    const int C = cx->x.C;
    const int64_t B = cx->B, Sb = cx->Sb, Sl = cx->Sl, H = dm->H, Hkv = dm->Hkv, D = dm->D, kvs = Hkv * D;
    const int64_t n = B * Sl * kvs;
    if (!pos) zt_fatal("GPU context parallelism: the layer needs the held tokens' positions");
    // k_blk, v_blk hold this layer's K|V when --recompute's re-run of it was the last gather (the
    // same a->k, a->v: nothing rewrote them since); otherwise gather again
    if (!(cx->kv_layer == cx->layer && cx->kv_k == a->k && cx->kv_v == a->v)) {
        const char *pass = cx->pass;
        cx->pass = "backward";
        gather_kv(cx, stream, dm, a->k, a->v);
        cx->pass = pass;
    }
    cx->kv_layer = -1;
    // dK, dV of the whole block into the front of kv_all (free once K/V are placed: C S_local >= S_block)
    zt_bf16 *dk = cx->kv_all, *dv = cx->kv_all + B * Sb * kvs;
    if (zt_attn_takes_rows(dm->attention)) {  // this rank's queries' share of dK|dV, for every key
        const zt_attn_call call = {.kind = dm->attention, .B = B, .S = Sb, .H = H, .Hkv = Hkv, .D = D, .pos = pos,
                                   .qrow = cx->q_out, .Sq = Sl};
        zt_attn_bwd(c, stream, &call, w->dq, dk, dv, w->datt, a->att, a->lse, a->q, cx->k_blk, cx->v_blk);
    } else {
        to_block(cx, stream, cx->q_blk, a->q, H * D);
        to_block(cx, stream, cx->o_blk, a->att, H * D);
        to_block(cx, stream, cx->do_blk, w->datt, H * D);  // rows held elsewhere: dO = 0, no gradient from them
        zt_cuda_rows_gather(stream, cx->pos_blk, pos, cx->q_in, B, Sb, Sl, 1);
        zt_cuda_rows_gather(stream, cx->lse_blk, a->lse, cx->q_in, B * H, Sb, Sl, 1);  // elsewhere: 0 (finite)
        const zt_attn_call call = {.kind = dm->attention, .B = B, .S = Sb, .H = H, .Hkv = Hkv, .D = D,
                                   .pos = cx->pos_blk};
        zt_attn_bwd(c, stream, &call, cx->dq_blk, dk, dv, cx->do_blk, cx->o_blk, cx->lse_blk, cx->q_blk, cx->k_blk,
                    cx->v_blk);
        from_block(cx, stream, w->dq, cx->dq_blk, H * D);
    }
    // every rank's rows of dK|dV, rank-major in fp32, then summed over the group into this rank's own
    for (int r = 0; r < C; r++) {
        zt_cuda_rows_gather_to_f32(stream, cx->kv_all32 + r * 2 * n, dk, cx->index + r * Sl, B, Sl, Sb, kvs);
        zt_cuda_rows_gather_to_f32(stream, cx->kv_all32 + r * 2 * n + n, dv, cx->index + r * Sl, B, Sl, Sb, kvs);
    }
    char what[64];
    snprintf(what, sizeof what, "layer %d dK/dV context reduce-scatter", cx->layer);
    cx->x.scatter(cx->x.ctx, cx->kv_all32, cx->kv_mine32, 2 * n, what);
    zt_cuda_f32_to_bf16(w->dk, cx->kv_mine32, n, stream);
    zt_cuda_f32_to_bf16(w->dv, cx->kv_mine32 + n, n, stream);
}
