#!/usr/bin/env python3
"""Mutation check of the GPU code's ordering points on the CPU execution of the CUDA model.

For every cross-stream ordering point of engine/fsdp_cuda.c and engine/comm_nccl.c
(each cudaStreamWaitEvent, each cudaEventRecord an ordering depends on, each host
synchronisation, the evaluation's included) and for the three deliberate bugs of the issue (a
wrong cuBLASLt leading dimension, a kernel reading one element past a row, a __syncthreads
moved into a divergent branch), the packed-document masking and positions, and the
regressions of the four defects fixed with it: copy the tree, apply the one
change, rebuild the emulated programs, run the tests that should catch it and record
whether one failed ("caught", with the first diagnostic line) or all passed ("SURVIVED").

    python3 tests/cudaemu/mutate.py [--only ID[,ID...]] [--work DIR] [--jobs N]

Prints a Markdown table (docs/cudaemu.md keeps the last one). About 15 minutes on 2 cores.
Needs what the test suite needs (scripts/install-deps.sh) and python3. Test tool only.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FSDP = "engine/fsdp_cuda.c"
NCCL = "engine/comm_nccl.c"
TILED = "kernels/cuda/attention_tiled.cu"
TC = "kernels/cuda/attention_tc.cu"
TILES = "kernels/cuda/attention_tiles.cuh"
CXG = "model/qwen3_cuda_context.c"
DCHUNK = "kernels/cuda/delta_chunk.cu"
# Tests, fastest-catching first (ctest stops at the first failure).
T_ENGINE = ["emu_fsdp_cuda", "emu_fsdp_cuda_mpi_w2", "emu_cli_resume_exact", "emu_bench_fsdp_smoke"]
T_COMM = ["emu_comm_nccl_w1", "emu_comm_nccl_mpi_w2", "emu_fsdp_cuda", "emu_comm_nccl_deadline",
          "emu_comm_nccl_finalize_busy"]
T_OPS = ["emu_cuda_ops", "emu_train_tiny"]
T_TILED = ["emu_attention_tiled"]  # every shape of the tiled attention (emu_cuda_ops runs none of them)
T_TC = ["emu_attention_tc"]  # every shape of the tensor-core attention (emu_cuda_ops runs none of them)
T_SFT = ["emu_fsdp_cuda_sft_w1"]
T_HSDP = ["emu_fsdp_cuda_hsdp_w4"]
T_CP = ["emu_fsdp_cuda_cp_w2_c2", "emu_fsdp_cuda_cp_w4_c2"]
T_DCHUNK = ["emu_delta_chunk"]  # the chunked delta rule vs the CPU (emu_cuda_ops_qwen3_5 runs it too)
DTC = "kernels/cuda/delta_chunk_tc.cu"
DSPAN = "kernels/cuda/delta_span.cuh"  # the span's load, Gam and e: both chunked forms (rows DM1, DM3, TM1, TM3)
T_DTC = ["emu_delta_tc"]  # the tensor-core chunked delta rule vs the CPU

OLD_REGISTER = """    c->host_pinned = !bench;
    for (int i = 0; i < U && c->host_pinned; i++) {
        const size_t b = (size_t)f->units[i].shard * sizeof(float);
        if (cudaHostRegister(f->units[i].master, b, cudaHostRegisterDefault) != cudaSuccess ||
            cudaHostRegister(f->units[i].m, b, cudaHostRegisterDefault) != cudaSuccess ||
            cudaHostRegister(f->units[i].v, b, cudaHostRegisterDefault) != cudaSuccess) {
            (void)cudaGetLastError();
            c->host_pinned = 0;
        }
    }
    if (0) {
"""

# id, file, old text (must occur exactly once), new text, tests, what it removes
MUTATIONS = [
    # ---- engine/fsdp_cuda.c: every cudaStreamWaitEvent ----
    ("F1", FSDP, "    CK(cudaStreamWaitEvent(c->cs, ev, 0));\n", "",
     T_ENGINE, "compute_wait: the compute stream's wait (all its uses at once)"),
    ("F2", FSDP, "    compute_wait(c, c->p_ready[s]);\n", "",
     T_ENGINE, "gather_use: compute waits for the slot's all-gather (p_ready)"),
    ("F3", FSDP, "    compute_wait(c, c->g_free[s]);  // its last reduce-scatter and add are done\n", "",
     T_ENGINE, "grad_take: compute waits until the slot's reduce-scatter and add are done (g_free)"),
    ("F4", FSDP, "    compute_wait(c, c->ev_grads);\n", "",
     T_ENGINE, "step end: compute waits for the last gradient accumulation (ev_grads)"),
    ("F5", FSDP, "    CK(cudaStreamWaitEvent(c->ds, c->p_free[s], 0));  // compute has finished reading the slot\n", "",
     T_ENGINE, "gather_issue: DATA waits until compute no longer reads the slot (p_free)"),
    ("F6", FSDP, "    CK(cudaStreamWaitEvent(c->ds, c->g_ready[s], 0));\n", "",
     T_ENGINE, "reduce_scatter: DATA waits for the unit's backward (g_ready)"),
    ("F7", FSDP, "    CK(cudaStreamWaitEvent(c->ds, c->ev_optim, 0));\n", "",
     T_ENGINE, "step start: DATA waits for the previous optimizer update (ev_optim)"),
    ("F8", FSDP, "    CK(cudaStreamWaitEvent(c->ks, c->ev_red, 0));\n", "",
     T_ENGINE, "step end: CTRL waits for the losses and sums of squares (ev_red)"),
    # ---- the events those waits use ----
    ("F9", FSDP, "    CK(cudaEventRecord(c->p_ready[s], c->ds));\n", "",
     T_ENGINE, "gather_issue: record p_ready after the all-gather"),
    ("F10", FSDP, "static void param_done(zt_fsdp *f, int s) { ZT_CUDA_CHECK(cudaEventRecord(st(f)->p_free[s], st(f)->cs)); }",
     "static void param_done(zt_fsdp *f, int s) { (void)f, (void)s; }",
     T_ENGINE, "param_done: record p_free after the last kernel reading the slot"),
    ("F11", FSDP, "    CK(cudaEventRecord(c->g_ready[s], c->cs));\n", "",
     T_ENGINE, "reduce_scatter: record g_ready after the unit's backward"),
    ("F12", FSDP, "    CK(cudaEventRecord(c->g_free[s], c->ds));\n", "",
     T_ENGINE, "reduce_scatter: record g_free after the accumulation into the shard"),
    ("F13", FSDP, "    CK(cudaEventRecord(c->ev_grads, c->ds));\n", "",
     T_ENGINE, "step end: record ev_grads on DATA"),
    ("F14", FSDP, "    CK(cudaEventRecord(c->ev_red, c->cs));\n", "",
     T_ENGINE, "step end: record ev_red after the sums of squares"),
    ("F15", FSDP, "static void step_end(zt_fsdp *f) { ZT_CUDA_CHECK(cudaEventRecord(st(f)->ev_optim, st(f)->cs)); }",
     "static void step_end(zt_fsdp *f) { (void)f; }",
     T_ENGINE, "step end: record ev_optim after AdamW"),
    ("F16", FSDP, "    CK(cudaEventRecord(c->ev_optim, c->cs));  // the first step's gathers wait for the drawn shards\n",
     "", ["emu_bench_fsdp_smoke"], "benchmark init: record ev_optim after drawing the parameters"),
    # ---- host synchronisation ----
    ("F17", FSDP, "    CK(cudaStreamSynchronize(c->ks));        // the 8-byte-per-entry copy queued behind it\n", "",
     T_ENGINE, "step end: the host waits for the step's results before reading them"),
    ("F18", FSDP, "    CK(cudaStreamSynchronize(c->cs));         // the host buffers may change after return\n", "",
     T_ENGINE, "to_device: the host waits for the upload of its page-locked copies"),
    ("F19", FSDP, "GPU state to the host for a checkpoint\");\n    CK(cudaStreamSynchronize(c->cs));\n",
     "GPU state to the host for a checkpoint\");\n", T_ENGINE,
     "to_host: the host waits for the download before the checkpoint reads it"),
    ("F20", FSDP, "    cudaStreamSynchronize(c->cs);\n    for (int s = 0; s < f->np; s++)", "    for (int s = 0; s < f->np; s++)",
     T_ENGINE, "free: the host waits for the compute stream before freeing"),
    ("F21", FSDP, "    if (zt_wait(c->dc, rq) != 0) return -1;  // the host's one wait per step (deadline-guarded)\n", "",
     T_ENGINE, "step end: the host retires the all-reduce's request (zt_wait)"),
    ("F22", FSDP, "    retire(f, &c->preq[s]);  // the slot's previous all-gather", "    // (mutated) the slot's previous all-gather",
     T_ENGINE, "gather_issue: the host retires the slot's previous all-gather request"),
    # ---- --async-save's snapshot on the GPU engine (engine/fsdp_cuda.c, train/save.c) ----
    ("C1", FSDP, "        CK(cudaStreamWaitEvent(c->cs, c->ev_snap, 0));\n", "",
     ["emu_cli_async_identical"], "update: the next AdamW waits for the snapshot's device-to-host copy (ev_snap)"),
    ("C2", FSDP, "    CK(cudaStreamWaitEvent(c->ss, c->ev_optim, 0));\n", "",
     ["emu_cli_async_identical"], "snapshot_begin: the snapshot stream waits for the last optimizer update (ev_optim)"),
    ("C3", FSDP, "    CK(cudaEventRecord(c->ev_snap, c->ss));\n", "",
     ["emu_cli_async_identical"], "snapshot_begin: record ev_snap after the copy"),
    ("C4", "train/save.c", "        ready = zt_fsdp_snapshot_ready(r->f, 0);\n", "        ready = 1;\n",
     ["emu_cli_async_identical"], "the writer starts only once the snapshot's copy is complete (instead: at once)"),
    # ---- supervised data and evaluation (engine/fsdp_cuda.c) ----
    ("E1", FSDP, "static void eval_begin(zt_fsdp *f) { ZT_CUDA_CHECK(cudaStreamWaitEvent(st(f)->ds, st(f)->ev_optim, 0)); }",
     "static void eval_begin(zt_fsdp *f) { (void)f; }",
     T_SFT, "eval start: DATA waits for the previous optimizer update (ev_optim)"),
    ("E2", FSDP, "evaluation losses to the host\");\n    ZT_CUDA_CHECK(cudaStreamSynchronize(c->cs));\n",
     "evaluation losses to the host\");\n", T_SFT,
     "eval round: the host waits for the round's losses (and uploads) before reading and refilling"),
    ("E3", FSDP, "evaluation loss to the host\");\n    CK(cudaStreamSynchronize(c->ks));\n",
     "evaluation loss to the host\");\n", T_SFT, "eval end: the host waits for the all-reduced loss before reading it"),
    ("E4", FSDP, "    if (zt_wait(c->dc, rq) != 0) return -1;\n    zt_comm_watch_begin(c->dc, \"cudaStreamSynchronize(ctrl stream): eval",
     "    zt_comm_watch_begin(c->dc, \"cudaStreamSynchronize(ctrl stream): eval", T_SFT,
     "eval end: the host retires the all-reduce's request (zt_wait)"),
    ("E5", FSDP, "    if (f->doc_isolated || f->ctx_world > 1)\n        CK(cudaMemcpyAsync(c->pos_d,", "    if (0)\n        CK(cudaMemcpyAsync(c->pos_d,",
     T_SFT, "use_batch: the micro-batch's document positions to the device"),
    ("E6", FSDP, "    return f->doc_isolated || f->ctx_world > 1 ? st(f)->pos_d : NULL;",
     "    return f->ctx_world > 1 ? st(f)->pos_d : NULL;", T_SFT,
     "the layers get the document positions (instead: plain causal attention, block positions)"),
    # ---- engine/fsdp.c: the one schedule both backends run (its order, not its values) ----
    ("S1", "engine/fsdp.c",
     """        int s_next = gather_issue(f, u + 1);
        if (u + 1 == head && tied) *s_emb = keep ? f->kept[0] : gather_issue(f, 0);  // lm_head is the embedding
        ev(f, ZT_EV_FWD_START, u);
        if (u == 0)
            f->be->embed_fwd(f, p);
        else
            f->be->layer_fwd(f, u - 1, p);
        ev(f, ZT_EV_FWD_END, u);
""",
     """        ev(f, ZT_EV_FWD_START, u);
        if (u == 0)
            f->be->embed_fwd(f, p);
        else
            f->be->layer_fwd(f, u - 1, p);
        ev(f, ZT_EV_FWD_END, u);
        int s_next = gather_issue(f, u + 1);
        if (u + 1 == head && tied) *s_emb = keep ? f->kept[0] : gather_issue(f, 0);  // lm_head is the embedding
""", T_ENGINE, "forward: unit u+1's all-gather issued after unit u computes (no prefetch)"),
    ("S2", "engine/fsdp.c",
     """            s_prev = u - 1 >= 1 ? gather_issue(f, u - 1) : -1;  // before this unit's reduce-scatter
        }
        int g = grad_acquire(f, u);
        ev(f, ZT_EV_BWD_START, u);
        f->be->layer_bwd(f, u - 1, p, f->gbuf[g]);
        ev(f, ZT_EV_BWD_END, u);
        param_release(f, s_cur);
        rs_issue(f, g);
""",
     """        }
        int g = grad_acquire(f, u);
        ev(f, ZT_EV_BWD_START, u);
        f->be->layer_bwd(f, u - 1, p, f->gbuf[g]);
        ev(f, ZT_EV_BWD_END, u);
        param_release(f, s_cur);
        rs_issue(f, g);
        if (!keep) s_prev = u - 1 >= 1 ? gather_issue(f, u - 1) : -1;
""", T_ENGINE, "backward: unit u-1's all-gather issued after unit u's reduce-scatter (no prefetch)"),
    # ---- engine/fsdp_cuda.c: hybrid sharding's replica all-reduce ----
    ("H1", FSDP, "    CK(cudaStreamWaitEvent(c->rs, c->ev_grads, 0));\n", "",
     T_HSDP, "reduce_replicas: the replicas' stream waits for every reduce-scatter's add (ev_grads)"),
    ("H2", FSDP, "    CK(cudaEventRecord(c->ev_rep, c->rs));\n", "",
     T_HSDP, "reduce_replicas: record ev_rep after the replica all-reduces"),
    ("H3", FSDP, "    CK(cudaStreamWaitEvent(c->ds, c->ev_rep, 0));\n", "",
     T_HSDP, "reduce_replicas: DATA waits for the replica all-reduces (ev_rep) before the shards are read"),
    ("H4", FSDP, "if (f->units[i].valid > 0 && f->replica == 0) zt_cuda_sumsq", "if (f->units[i].valid > 0) zt_cuda_sumsq",
     T_HSDP, "step_reduce: a shard's sum of squares counted on every replica (not only replica 0)"),
    ("H5", FSDP, "    CK(cudaEventRecord(c->ev_grads, c->ds));  // after every reduce-scatter's add\n", "",
     T_HSDP, "reduce_replicas: record ev_grads on DATA before the replica all-reduces"),
    # ---- engine/fsdp_cuda.c: context parallelism's exchange (cx_collective) ----
    ("X1", FSDP, "    CK(cudaStreamWaitEvent(c->xs, c->ev_cx_in, 0));\n", "",
     T_CP, "cx_collective: the context group's stream waits for what compute wrote (ev_cx_in)"),
    ("X2", FSDP, "    compute_wait(c, c->ev_cx_out);\n", "",
     T_CP, "cx_collective: compute waits for the context collective (ev_cx_out)"),
    ("X3", FSDP, "    CK(cudaEventRecord(c->ev_cx_in, c->cs));\n", "",
     T_CP, "cx_collective: record ev_cx_in on compute before the collective"),
    ("X4", FSDP, "    CK(cudaEventRecord(c->ev_cx_out, c->xs));\n", "",
     T_CP, "cx_collective: record ev_cx_out after the collective"),
    # ---- model/qwen3_cuda_context.c: the held rows' attention and --recompute's K|V reuse ----
    ("X5", CXG, "    if (!(cx->kv_layer == cx->layer && cx->kv_k == a->k && cx->kv_v == a->v)) {\n",
     "    if (0) {  // (mutated)\n", T_CP,
     "the backward re-gathers K|V unless --recompute's re-run of the same layer just did (always reused)"),
    ("X6", CXG, "    cx->kv_layer = !strcmp(cx->pass, \"recompute\") ? cx->layer : -1;\n",
     "    cx->kv_layer = -1;  // (mutated)\n", T_CP,
     "the recompute's K|V marked for the backward (a third gather again: the bytes check)"),
    ("X7", TILES, "    hi = a, lo = pos ? a - pos[li] : 0;\n", "    hi = li, lo = pos ? li - pos[li] : 0;  // (mutated)\n",
     T_TILED, "a held query row's block row (its row among the held ones used instead)"),
    ("X8", TILED, "        for (int qt = qrow ? 0 : kt; qt < ntiles; qt++) {\n",
     "        for (int qt = kt; qt < ntiles; qt++) {  // (mutated)\n", T_TILED,
     "dK/dV over held rows: every query tile (a rank's late chunk sits in early tiles), not those from the key tile's"),
    # ---- kernels/cuda/attention/dispatch.c: the families' one attention call ----
    ("AD1", "kernels/cuda/attention/dispatch.c",
     "        (scalar_tiles(D) ? zt_cuda_attention_tiled_fwd : zt_cuda_attention_tc_fwd)(c, st, o, lse, q, k, v, a->pos, B,",
     "        (scalar_tiles(D) ? zt_cuda_attention_tiled_fwd : zt_cuda_attention_tc_fwd)(c, st, o, lse, q, k, v, NULL, B,",
     ["emu_fsdp_cuda_sft_w1"], "the tiled kind's forward over whole rows gets the document positions (instead: plain causal)"),
    # ---- engine/comm_nccl.c ----
    ("N1", NCCL, "    ZT_CUDA_CHECK_GOTO(cudaEventRecord(ev, st), cuda_fail, s);\n    *handle = (void *)ev;", "    *handle = (void *)ev;",
     T_COMM, "start: record the collective's event (its handle)"),
    ("N2", NCCL, "    cudaError_t e = cudaEventQuery(ev);\n    if (e == cudaSuccess) {",
     "    cudaError_t e = cudaSuccess;\n    if (e == cudaSuccess) {", T_COMM,
     "test: query the collective's event (instead: report every collective complete)"),
    ("N3", NCCL, "    ZT_CUDA_CHECK_GOTO(cudaMemsetAsync(s->barrier_buf, 0, sizeof(int), s->stream[ZT_CHAN_CTRL]), cuda_fail, s);",
     "    ZT_CUDA_CHECK_GOTO(cudaMemsetAsync(s->barrier_buf, 0, sizeof(int), NULL), cuda_fail, s);", T_COMM,
     "setup: zero the barrier word on the CTRL stream (instead: on the legacy stream)"),
    ("N4", NCCL, "    ZT_CUDA_CHECK_GOTO(cudaMemsetAsync(s->barrier_buf, 0, sizeof(int), s->stream[ZT_CHAN_CTRL]), cuda_fail, s);", "", T_COMM,
     "setup: zero the barrier word at all"),
    ("N5", NCCL, "for (int i = 0; s->stream[ch] && i < 10000 &&", "for (int i = 0; 0 && s->stream[ch] && i < 10000 &&",
     T_COMM, "destroy: wait up to 10 s for the channel's stream to drain"),
    # ---- the three deliberate bugs ----
    ("D1", "kernels/cuda/matmul.cu", "    k.ldb = lda;\n", "    k.ldb = transA ? M : K;  // (mutated: assumes a packed A)\n",
     T_OPS, "a wrong cuBLASLt leading dimension (A's ld taken as its packed width)"),
    ("D2", "kernels/cuda/rmsnorm.cu", "        for (int j = lane; j < d; j += 32) {\n            float f = bf2f(xr[j]);",
     "        for (int j = lane; j <= d; j += 32) {\n            float f = bf2f(xr[j]);", T_OPS,
     "a kernel reading one element past a row (RMSNorm forward, scalar path)"),
    ("D3", "kernels/cuda/xent.cu", "        ss[warp] = s;\n    }\n    __syncthreads();\n",
     "        ss[warp] = s;\n        __syncthreads();\n    }\n", T_OPS,
     "a __syncthreads moved inside a divergent branch (cross-entropy row kernel)"),
    # ---- packed documents in the kernels ----
    ("D4", "kernels/cuda/attention.cu",
     "    const int i = (int)(row % S), lo = first_key(pos, i);\n    const float *s = sc + row * S;\n    bf16 *p =",
     "    const int i = (int)(row % S), lo = 0;  // (mutated: no lower mask bound)\n    const float *s = sc + row * S;\n"
     "    bf16 *p =", T_OPS + T_SFT,
     "the lower mask bound of the forward softmax kernel (keys before the query's document)"),
    ("D5", "kernels/cuda/rope.cu", "    const int64_t pos = posv ? (int64_t)posv[t] : t % S;\n",
     "    const int64_t pos = t % S;  // (mutated: document positions ignored)\n", T_OPS + T_SFT,
     "RoPE by document position (instead: by block position, pos ignored)"),
    # ---- the tiled attention (kernels/cuda/attention_tiled.cu): each barrier that orders shared memory ----
    ("A1", TILED, "        __syncthreads();  // every warp is done with the previous K/V tile and its rows of P\n", "",
     T_TILED, "forward: the barrier before the next K/V tile overwrites the one (and P) other warps still read"),
    ("A2", TILED, "        __syncthreads();  // K/V (and, the first time, Q, rlo and rhi) are in place\n", "",
     T_TILED, "forward: the barrier after the K/V tile's load, before the scores read it"),
    ("A3", TILED, "        __syncwarp();  // the row's 8 lanes (one warp) wrote P\n", "",
     T_TILED, "forward: the warp barrier between writing a row of P and reading it for P V"),
    ("A4", TILED, "        __syncthreads();  // every warp is done with the previous K/V tile and its rows of dS\n", "",
     T_TILED, "dQ: the barrier before the next K/V tile overwrites the one (and dS) other warps still read"),
    ("A5", TILED, "        __syncthreads();  // K/V (and, the first time, Q, dO, rlo and rhi) are in place\n", "",
     T_TILED, "dQ: the barrier after the K/V tile's load, before the scores read it"),
    ("A6", TILED, "        __syncwarp();  // the row's 8 lanes (one warp) wrote dS\n", "",
     T_TILED, "dQ: the warp barrier between writing a row of dS and reading it for dS K"),
    ("A7", TILED, "            __syncthreads();  // every warp is done with the previous Q/dO tile and its rows of P, dS\n",
     "", T_TILED, "dK/dV: the barrier before the next Q/dO tile overwrites the one (and P, dS) other warps still read"),
    ("A8", TILED, "            __syncthreads();  // Q, dO, lse, rowdot (and, the first time, K/V) are in place\n", "",
     T_TILED, "dK/dV: the barrier after the Q/dO tile's load, before the scores read it"),
    ("A9", TILED, "            __syncwarp();  // the key row's 8 lanes (one warp) wrote P and dS\n", "",
     T_TILED, "dK/dV: the warp barrier between writing a key row of P, dS and reading it for P^T dO, dS^T Q"),
    ("A10", TILED, "kt++) {\n        const int k0 = kt * TK;\n        __syncthreads();  // every warp is done with the "
     "previous K/V tile and its rows of P\n",
     "kt++) {\n        const int k0 = kt * TK;\n        if (tile_lo && kt == tile_lo[qt] / TK) continue;  // (mutated)\n"
     "        __syncthreads();  // every warp is done with the previous K/V tile and its rows of P\n",
     T_TILED, "forward: the first key tile of a query tile's documents (skipped as if wholly before them)"),
    ("A11", TILED, "            if (span && (span[qt].x > k_last || span[qt].y < k0)) continue;",
     "            if (span && (span[qt].x > k0 || span[qt].y < k0)) continue;  // (mutated)", T_TILED,
     "dK/dV: the query tiles whose earliest document starts inside the key tile (skipped)"),
    # ---- the tensor-core attention (kernels/cuda/attention_tc.cu): each barrier that orders a write before a
    # read, and the two tile skips (the four warp barriers between a read and a later overwrite are not rows: a
    # WMMA call meets every lane in between, see docs/cudaemu.md) ----
    ("T1", TC, "        __syncthreads();  // every warp is done with the previous K/V tile\n", "",
     T_TC, "forward: the barrier before the next K/V tile overwrites the one other warps still read"),
    ("T2", TC, "        __syncthreads();  // K/V (and, the first time, Q, rlo and rhi) are in place\n", "",
     T_TC, "forward: the barrier after the K/V tile's load, before Q K^T reads it"),
    ("T3", TC, "        __syncwarp();  // the warp's rows of Q K^T are in Sf\n", "",
     T_TC, "forward: the warp barrier between Q K^T stored and its lanes reading their scores"),
    ("T4", TC, "        __syncwarp();  // the warp's rows of P are in Ph, and its lanes have read their scores\n", "",
     T_TC, "forward: the warp barrier between P written (bf16) and loaded for P V"),
    ("T5", TC, "            __syncwarp();  // the chunk of P V is in the warp's rows of Sf\n", "",
     T_TC, "forward: the warp barrier between a chunk of P V stored and its lanes reading it"),
    ("T7", TC, "        __syncwarp();  // the chunk is in the warp's rows of Sf\n", "",
     T_TC, "dQ, dK, dV output: the warp barrier between a chunk stored and its lanes reading it"),
    ("T9", TC, "        __syncthreads();  // every warp is done with the previous K/V tile and dS rows\n", "",
     T_TC, "dQ: the barrier before the next K/V tile overwrites the one other warps still read"),
    ("T10", TC, "        __syncthreads();  // K/V (and, the first time, Q, dO, rlo and rhi) are in place\n", "",
     T_TC, "dQ: the barrier after the K/V tile's load, before Q K^T reads it"),
    ("T11", TC, "        __syncwarp();  // the warp's score rows are in Sf\n", "",
     T_TC, "dQ: the warp barrier between Q K^T stored and its lanes reading their scores"),
    ("T13", TC, "        __syncwarp();  // the warp's rows of dP are in Sf\n", "",
     T_TC, "dQ: the warp barrier between dO V^T stored and its lanes reading it"),
    ("T14", TC, "        __syncwarp();  // the warp's rows of dS are in dSh\n", "",
     T_TC, "dQ: the warp barrier between dS written (bf16) and loaded for dS K"),
    ("T15", TC, "            __syncthreads();  // every warp is done with the previous Q/dO tile and its rows of P, dS\n", "",
     T_TC, "dK/dV: the barrier before the next Q/dO tile overwrites the one other warps still read"),
    ("T16", TC, "            __syncthreads();  // Q, dO, lse, rowdot (and, the first time, K/V) are in place\n", "",
     T_TC, "dK/dV: the barrier after the Q/dO tile's load, before K Q^T reads it"),
    ("T17", TC, "            __syncwarp();  // the warp's rows of S^T are in Sf\n", "",
     T_TC, "dK/dV: the warp barrier between K Q^T stored and its lanes reading it"),
    ("T19", TC, "            __syncwarp();  // the warp's rows of dP^T are in Sf\n", "",
     T_TC, "dK/dV: the warp barrier between V dO^T stored and its lanes reading it"),
    ("T20", TC, "            __syncwarp();  // the warp's rows of P^T and dS^T are in Ph, dSh\n", "",
     T_TC, "dK/dV: the warp barrier between P^T, dS^T written (bf16) and loaded for P^T dO, dS^T Q"),
    ("T21", TC, "    for (int kt = span ? span[qt].x / TK : 0; kt <= kt_end; kt++) {\n        const int k0 = kt * TK;\n        __syncthreads();  // every warp is done with the previous K/V tile\n        copy_tile(Kh, LDH, k + kh * D, kvs, k0, S, D, t);\n        copy_tile(Vh, LDH, v + kh * D, kvs, k0, S, D, t);\n        __syncthreads();  // K/V (and, the first time, Q, rlo and rhi)",
     "    for (int kt = span ? span[qt].x / TK + 1 : 0; kt <= kt_end; kt++) {  // (mutated)\n        const int k0 = kt * TK;\n        __syncthreads();  // every warp is done with the previous K/V tile\n        copy_tile(Kh, LDH, k + kh * D, kvs, k0, S, D, t);\n        copy_tile(Vh, LDH, v + kh * D, kvs, k0, S, D, t);\n        __syncthreads();  // K/V (and, the first time, Q, rlo and rhi)",
     T_TC, "forward: the first key tile of a query tile's documents (skipped as if wholly before them)"),
    ("T22", TC, "            if (span && (span[qt].x > k_last || span[qt].y < k0)) continue;",
     "            if (span && (span[qt].x > k0 || span[qt].y < k0)) continue;  // (mutated)", T_TC,
     "dK/dV: the query tiles whose earliest document starts inside the key tile (skipped)"),
    # ---- the chunked delta rule (kernels/cuda/delta_chunk.cu): every __syncthreads, removed one at a time ----
    ("DF1", DCHUNK, "        __syncthreads();  // DF1: every thread is done with the previous span (K, Q, Gam, S0's update)\n", "",
     T_DCHUNK, "forward: the barrier before the next span's load overwrites K, Q, the gates (and S0 is zeroed) while other threads still update S0"),
    ("DF2", DCHUNK, '        __syncthreads();  // DF2: K, Q, the gates, a and S0 are in place\n', "",
     T_DCHUNK, "forward: the barrier after the span's load (K, Q, gates, decays, S0), before the Gram products read it"),
    ("DF3", DCHUNK, '        __syncthreads();  // DF3: Gam, e, K K^T, Q K^T, KS, QS are in place\n', "",
     T_DCHUNK, "forward: the barrier after Gam, e, K K^T, Q K^T, K S0, Q S0, before the inverse, P and Y read them"),
    ("DF4", DCHUNK, '        __syncthreads();  // DF4: T, P, Y are in place\n', "",
     T_DCHUNK, "forward: the barrier after the inverse T, P and Y, before Vn = T Y"),
    ("DF5", DCHUNK, '        __syncthreads();  // DF5: Vn is in place\n', "",
     T_DCHUNK, "forward: the barrier after Vn, before the output and the state update read it"),
    ("DB1", DCHUNK, "        __syncthreads();  // DB1: every thread is done with the later span (and dS's update is complete)\n", "",
     T_DCHUNK, "backward: the barrier before the next (earlier) span's load overwrites what other threads still read for dS's update"),
    ("DB2", DCHUNK, '        __syncthreads();  // DB2: K, Q, the gates, a, S0, dO are in place\n', "",
     T_DCHUNK, "backward: the barrier after the span's load (K, Q, gates, S0, dO), before the Gram products read it"),
    ("DB3", DCHUNK, '        __syncthreads();  // DB3: Gam, e, K K^T, Q K^T, KS, QS, K dS are in place\n', "",
     T_DCHUNK, "backward: the barrier after Gam, e, K K^T, Q K^T, K S0, Q S0, K dS, before the inverse, P and R read them"),
    ("DB4", DCHUNK, '        __syncthreads();  // DB4: T, P, R are in place\n', "",
     T_DCHUNK, "backward: the barrier after T, P, R, before Vn = T diag(beta) R"),
    ("DB5", DCHUNK, '        __syncthreads();  // DB5: Vn is in place\n', "",
     T_DCHUNK, "backward: the barrier after Vn, before dP, dVn and dF read it"),
    ("DB6", DCHUNK, '        __syncthreads();  // DB6: dP, dVn, dF are in place (and K dS read)\n', "",
     T_DCHUNK, "backward: the barrier after dP, dVn, dF, before dY = T^T dVn overwrites K dS"),
    ("DB7", DCHUNK, '        __syncthreads();  // DB7: dY is in place (and T read)\n', "",
     T_DCHUNK, "backward: the barrier after dY, before dA overwrites T and dR overwrites dVn"),
    ("DB8", DCHUNK, "        __syncthreads();  // DB8: dA, dR, dbeta's R part, dE and the <S0, dS> shares are in place\n", "",
     T_DCHUNK, "backward: the barrier after dA, dR, dE and the <S0, dS> shares, before dbeta, dg, dk, dq read them"),
    ("DB9", DCHUNK, '        __syncthreads();  // DB9: dS (read above for dk and <S0, dS>) may be overwritten\n', "",
     T_DCHUNK, "backward: the barrier after dk's reads of dS, before dS's update overwrites it"),
    # ---- the chunked delta rule's document starts (a start inside a span is a zero decay) ----
    ("DM1", DSPAN, "        if (a) a[i] = start[i] ? 0.0 : exp((double)gs[i]);\n",
     "        if (a) a[i] = exp((double)gs[i]);  // (mutated)\n", T_DCHUNK,
     "a document start inside a span as a zero decay (instead: exp(g), Gam reaching across documents)"),
    ("DM2", DCHUNK, "            if (opens) m.S0[r * LDC + c] = 0.0f;\n", "", T_DCHUNK,
     "forward: the state entering a span that opens a document zeroed (and saved as zero)"),
    ("DM3", DSPAN, "        e[i] = zero || i >= L || ei < ZT_DELTA_TINY ? 0.0f : (float)ei;\n",
     "        e[i] = i >= L || ei < ZT_DELTA_TINY ? 0.0f : (float)ei;  // (mutated)\n", T_DCHUNK,
     "e_i zero from the span's first document start on (instead: the incoming state reaches every document)"),
    # ---- regressions of the four defects fixed with the emulation ----
    ("R1", "kernels/cuda/matmul.cu",
     "    if (hs != CUBLAS_STATUS_SUCCESS || nres < 1 || res.state != CUBLAS_STATUS_SUCCESS) {",
     "    ZT_CUBLAS_CHECK(hs);\n    if (nres < 1) {",
     ["emu_fatal_unaligned"], "defect 2: the heuristic query inside the fatal check again"),
    ("R2", FSDP, "    c->host_pinned = 0;\n    if (!bench) pin_host_copies(f, c);\n",
     OLD_REGISTER.replace("    if (0) {\n", "").replace("i < U &&", "i < f->nunits &&"),
     ["emu_fsdp_cuda"], "defect 4: the host shards registered piecemeal again"),
    ("R3", "kernels/cuda/cuda_device.cu", "    exit(ZT_EXIT_CUDA);", "    exit(1);",
     ["emu_fatal_oom", "gpu_run_rerun_rule"], "defect 1: fatal CUDA errors exit 1 again"),
    # ---- the chunked delta rule on tensor cores (kernels/cuda/delta_chunk_tc.cu): every barrier and document start ----
    ("TF1", DTC, '        __syncthreads();  // TF1: K, Q, the gates, a, S0 and its bf16 copy are in place\n', "",
     T_DTC, "forward: the barrier after the span's load (K, Q, gates, decays, S0 and its bf16 copy), before Gam, e and the Gram products read it"),
    ("TF2", DTC, '        __syncthreads();  // TF2: Gam, e, K K^T, Q K^T, K S0, Q S0 are in place\n', "",
     T_DTC, 'forward: the barrier after Gam, e, K K^T, Q K^T, K S0, Q S0, before the inverse, P and Y read them'),
    ("TF3", DTC, '        __syncthreads();  // TF3: T, P, Y are in place\n', "",
     T_DTC, "forward: the barrier after T's, P's and Y's bf16 parts, before Vn = T Y"),
    ("TF4", DTC, '        __syncthreads();  // TF4: Vn is in place\n', "",
     T_DTC, 'forward: the barrier after Vn, before its bf16 parts are made (and e S0 scaled)'),
    ("TF5", DTC, '        __syncthreads();  // TF5: Vn, diag(f) Vn in bf16 and e_{L-1} S0 are in place\n', "",
     T_DTC, "forward: the barrier after Vn's parts and e_{L-1} S0, before O = P Vn and the state's accumulation"),
    ("TF6", DTC, '        __syncthreads();  // TF6: P Vn is in place\n', "",
     T_DTC, 'forward: the barrier after O = P Vn, before the output reads it'),
    ("TB1", DTC, "        __syncthreads();  // TB1: every thread is done with the later span (and dS's update is complete)\n", "",
     T_DTC, "backward: the barrier before the next (earlier) span's load overwrites what other warps still read for dk, dq and dS's update"),
    ("TB2", DTC, '        __syncthreads();  // TB2: K, Q, the gates, the start flags, S0, dS, dO are in place\n', "",
     T_DTC, "backward: the barrier after the span's load (K, Q, gates, start flags, S0, dS, dO), before the decays and the Gram products"),
    ("TB3", DTC, '        __syncthreads();  // TB3: cum, e, K K^T, Q K^T, K S0, Q S0, K dS are in place\n', "",
     T_DTC, 'backward: the barrier after cum, e, the Gram products, K S0, Q S0, K dS, before the segments overwrite the start flags'),
    ("TB4", DTC, '        __syncthreads();  // TB4: the segments are in place\n', "",
     T_DTC, "backward: the barrier after the segments, before Gam's entries are read"),
    ("TB5", DTC, "        __syncthreads();  // TB5: f, dEq, GK, P and its parts, Y's parts are in place (Q S0 read)\n", "",
     T_DTC, "backward: the barrier after f, GK, P's parts and Y's parts, before the inverse and Vn"),
    ("TB6", DTC, "        __syncthreads();  // TB6: T's parts are in place\n", "",
     T_DTC, "backward: the barrier after T's parts, before Vn = T Y"),
    ("TB7", DTC, '        __syncthreads();  // TB7: Vn = T Y is in place\n', "",
     T_DTC, 'backward: the barrier after Vn, before its parts, diag(f) Vn and dF'),
    ("TB8", DTC, "        __syncthreads();  // TB8: Vn's parts, diag(f) Vn, dF are in place (Vn in X2 read)\n", "",
     T_DTC, "backward: the barrier after Vn's parts and dF, before dP, P^T dO overwrite T and Vn"),
    ("TB9", DTC, '        __syncthreads();  // TB9: dP, P^T dO are in place\n', "",
     T_DTC, "backward: the barrier after dP and P^T dO, before dVn's parts, M2 and dP . P"),
    ("TB10", DTC, "        __syncthreads();  // TB10: dVn's parts, M2's parts, dP . P are in place (dP, P's parts read)\n", "",
     T_DTC, "backward: the barrier after dVn's and M2's parts, before dY = T^T dVn"),
    ("TB11", DTC, "        __syncthreads();  // TB11: dY is in place (K dS, T's parts read)\n", "",
     T_DTC, "backward: the barrier after dY, before its bf16 copy, dv, dbeta's R part and dE"),
    ("TB12", DTC, "        __syncthreads();  // TB12: dY in bf16, -e dR, scale e dO, dbeta's R part, dE, the shares are in place\n", "",
     T_DTC, 'backward: the barrier after dY in bf16, -e dR, scale e dO, dE and the <S0, dS> shares, before dA and e dS'),
    ("TB13", DTC, '        __syncthreads();  // TB13: -dA = dY Vn^T and e_{L-1} dS are in place\n', "",
     T_DTC, "backward: the barrier after -dA and e_{L-1} dS, before M1, dP . P + dA . A and dbeta's A part"),
    ("TB14", DTC, "        __syncthreads();  // TB14: M1's parts, dP . P + dA . A, dbeta are in place\n", "",
     T_DTC, "backward: the barrier after M1's parts and dbeta, before dg, dk, dq and the state's gradient"),
    ('TW1', DTC, '        wmma::store_matrix_sync(stage, c, 16, wmma::mem_row_major);\n        __syncwarp();\n', '        wmma::store_matrix_sync(stage, c, 16, wmma::mem_row_major);\n',
     T_DTC, 'backward dk/dq: the warp barrier after a tile is stored, before the lanes read it'),
    ('TM1', DSPAN, '        if (a) a[i] = start[i] ? 0.0 : exp((double)gs[i]);\n', '        if (a) a[i] = exp((double)gs[i]);  // (mutated)\n',
     T_DTC, 'forward: a document start inside a span as a zero decay (instead: exp(g), Gam reaching across documents)'),
    ('TM2', DTC, '            if (opens) m.S0[r * LS + c] = 0.0f;\n', '',
     T_DTC, 'forward: the state entering a span that opens a document zeroed (and saved as zero)'),
    ('TM3', DSPAN, '        for (int s = 0; s <= i; s++) G += (double)g[s], zero = zero || start[s];\n', '        for (int s = 0; s <= i; s++) G += (double)g[s];  // (mutated)\n',
     T_DTC, "forward: e_i zero from the span's first document start on (instead: the incoming state reaches every document)"),
    ('TM4', DTC, '            for (int s_ = 0; s_ <= i; s_++) G += (double)m.g[s_], sg = m.seg[s_] ? s_ : sg;\n', '            for (int s_ = 0; s_ <= i; s_++) G += (double)m.g[s_];  // (mutated)\n',
     T_DTC, 'backward: Gam zero across a document start (instead: exp(cum_i - cum_j) across documents)'),
    ('TM5', DTC, '            for (int s_ = 0; s_ <= i; s_++) G += (double)m.g[s_], zero = zero || m.seg[s_];\n', '            for (int s_ = 0; s_ <= i; s_++) G += (double)m.g[s_];  // (mutated)\n',
     T_DTC, "backward: e_i zero from the span's first document start on"),
]


def sh(cmd, cwd=None, timeout=None):
    p = subprocess.run(cmd, cwd=cwd, shell=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       timeout=timeout)
    return p.returncode, p.stdout


def first_diagnostic(log):
    for pat in (r"RESULT op=\S+ shape=\S+ err=\S+ tol=\S+ ok=0", r"cudaemu: violation: [^\n]*", r"cudaemu: device fault: [^\n]*", r"zerotrain: error: [^\n]*",
                r"FAIL[^\n]*", r"expected [^\n]*"):
        m = re.search(pat, log)
        if m:
            return m.group(0)[:220]
    return "(test failed; see the log)"


def row_count(path, old):
    """How many times a row's text stands in its file (CK( also spelled ZT_CUDA_CHECK(, as applied)."""
    text = open(os.path.join(ROOT, path)).read()
    n = text.count(old)
    if n != 1 and re.search(r"\bCK\(", old):
        n = text.count(re.sub(r"\bCK\(", "ZT_CUDA_CHECK(", old))
    return n


def check_rows():
    """0 when every row applies (its text once in its file) and no id repeats; else 1, naming each."""
    bad, seen = 0, set()
    for mid, path, old, new, tests, what in MUTATIONS:
        n = row_count(path, old) if os.path.exists(os.path.join(ROOT, path)) else -1
        if n != 1:
            print(f"mutate.py: row {mid}: {path}: " + ("no such file" if n < 0 else f"its text stands {n} times, not once"))
            bad = 1
        if mid in seen:
            print(f"mutate.py: row id {mid} repeats")
            bad = 1
        seen.add(mid)
    print(f"mutate.py: {len(MUTATIONS)} rows, " + ("some do not apply" if bad else "each applies exactly once"))
    return bad


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", default="")
    ap.add_argument("--work", default="/tmp/zt-mutate")
    ap.add_argument("--jobs", default=str(os.cpu_count() or 2))
    ap.add_argument("--check", action="store_true",
                    help="only check that every row's text stands exactly once in its file (no build, no test)")
    a = ap.parse_args()
    only = set(x for x in a.only.split(",") if x)
    if a.check:
        sys.exit(check_rows())
    src, build = os.path.join(a.work, "src"), os.path.join(a.work, "build")
    for d in (src, build):  # a fresh build: copied files keep their times, which would fool ninja
        if os.path.exists(d):
            shutil.rmtree(d)
    shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns("build", "build-*", ".git"))
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    os.environ.update(env)
    rc, out = sh(f"cmake -S {src} -B {build} -G Ninja -DZT_TEST_FILTER='^cudaemu' >/dev/null && "
                 f"ninja -C {build} -j {a.jobs}")
    if rc:
        print(out[-3000:])
        sys.exit("mutate.py: the unmutated tree does not build")
    rows, survived = [], 0
    for mid, path, old, new, tests, what in MUTATIONS:
        if only and mid not in only:
            continue
        f = os.path.join(src, path)
        text = open(f).read()
        n = text.count(old)
        if n != 1 and re.search(r"\bCK\(", old):  # engine/fsdp_cuda.c's CK spelled ZT_CUDA_CHECK
            old, new = (re.sub(r"\bCK\(", "ZT_CUDA_CHECK(", x) for x in (old, new))
            n = text.count(old)
        if n != 1:
            rows.append((mid, path, what, f"NOT APPLIED (pattern found {n} times)", ""))
            continue
        open(f, "w").write(text.replace(old, new))
        t0 = time.time()
        try:
            rc, out = sh(f"ninja -C {build} -j {a.jobs}")
            if rc:
                verdict, detail = "caught (does not build)", out.strip().splitlines()[-1][:200]
            else:
                regex = "^(" + "|".join(tests) + ")$"
                rc, out = sh(f"ctest --test-dir {build} -R '{regex}' --stop-on-failure --output-on-failure "
                             f"--timeout 600", timeout=1800)
                failed = re.findall(r"\d+ - (\S+) \(", out)
                if rc:
                    verdict, detail = f"caught by {failed[0] if failed else '?'}", first_diagnostic(out)
                else:
                    verdict, detail = "SURVIVED", f"passed: {', '.join(tests)}"
                    survived += 1
        finally:
            open(f, "w").write(text)
        rows.append((mid, path, what, verdict, detail))
        print(f"{mid}: {verdict} ({time.time() - t0:.0f} s)", file=sys.stderr, flush=True)
    sh(f"ninja -C {build} -j {a.jobs}")
    print("| id | file | what the mutation removes | result | first diagnostic |")
    print("|---|---|---|---|---|")
    for r in rows:
        print("| " + " | ".join(x.replace("|", "\\|") for x in r) + " |")
    print(f"\n{len(rows)} mutations, {survived} survived")
    sys.exit(1 if survived else 0)


if __name__ == "__main__":
    main()
