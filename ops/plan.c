// The arithmetic behind `zerotrain plan`: memory per GPU, FLOPs per token, ring and
// tree collective times, and a two-queue simulation of one optimizer step that
// follows the zerotrain engine's issue order (engine/fsdp.c) unit by unit, so that
// "how much communication hides behind compute" is computed, not assumed.
// defines: zt_gpu_preset, zt_gpu_spec_load, zt_plan_assumptions_default,
//          zt_plan_flops_per_token(_exact), zt_plan_state_bytes_per_param, zt_plan_predict, zt_plan_read_run
#include "ops/plan.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/json_util.h"
#include "engine/device_peak.h"
#include "model/family.h"
#include "model/flops.h"
#include "base/common.h"
#include "engine/fsdp.h"
#include "engine/job_shape.h"
#include "engine/rank_memory.h"

const char *const zt_shard_names[ZT_SHARD_NCHOICES] = {"full", "nosync", "hsdp"};
const char *const zt_coll_names[ZT_COLL_NKINDS] = {"all-gather (forward)", "all-gather (backward)",
                                                    "reduce-scatter", "all-reduce across replicas",
                                                    "control all-reduce", "context K/V all-gather",
                                                    "context dK/dV reduce-scatter", "context heads all-gather",
                                                    "context heads reduce-scatter"};

const zt_field_row zt_field_table[ZT_FIELD_ROWS] = {
    {4, 3350, 83.7, 1.00}, {8, 3338, 84.1, 1.00}, {16, 3313, 84.7, 0.99}};

// Nominal datasheet numbers, one direction per link. NVLink "1.8 TB/s" (5th gen) and
// "900 GB/s" (4th gen) are bidirectional totals per GPU; the NIC is one per GPU.
static const zt_gpu_spec presets[] = {
    {"B300", ZT_PEAK_BF16_B300, 288e9, 8.0e12, 900e9, 100e9, 8,
     "HGX B300: 2.25 PFLOP/s dense bf16 (the field report's figure), 288 GB HBM3e at 8 TB/s, NVLink 5 "
     "1.8 TB/s bidirectional, one ConnectX-8 800 Gb/s NIC per GPU"},
    {"B200", ZT_PEAK_BF16_B200, 180e9, 8.0e12, 900e9, 50e9, 8,
     "HGX/DGX B200: 2.25 PFLOP/s dense bf16, 180 GB HBM3e at 8 TB/s, NVLink 5 1.8 TB/s bidirectional, one "
     "ConnectX-7 400 Gb/s NIC per GPU"},
    {"H200", ZT_PEAK_BF16_H200, 141e9, 4.8e12, 450e9, 50e9, 8,
     "H200 SXM: 989 TFLOP/s dense bf16, 141 GB HBM3e at 4.8 TB/s, NVLink 4 900 GB/s bidirectional, one "
     "ConnectX-7 400 Gb/s NIC per GPU"},
    {"H100", ZT_PEAK_BF16_H100, 80e9, 3.35e12, 450e9, 50e9, 8,
     "H100 SXM: 989 TFLOP/s dense bf16, 80 GB HBM3 at 3.35 TB/s, NVLink 4 900 GB/s bidirectional, one "
     "ConnectX-7 400 Gb/s NIC per GPU"},
};
#define NPRESETS ((int)(sizeof presets / sizeof presets[0]))

int zt_gpu_preset(const char *name, zt_gpu_spec *out) {
    for (int i = 0; i < NPRESETS; i++)
        if (!strcasecmp(name, presets[i].name)) {
            *out = presets[i];
            return 0;
        }
    char names[128];
    zt_gpu_preset_names(names, sizeof names);
    return zt_err("--gpu %s: not a preset (presets: %s; or describe the GPU with --gpu-file FILE.json)", name,
                  names);
}

void zt_gpu_preset_names(char *buf, size_t n) {
    size_t k = 0;
    buf[0] = 0;
    for (int i = 0; i < NPRESETS && k < n; i++)
        k += (size_t)snprintf(buf + k, n - k, "%s%s", i ? ", " : "", presets[i].name);
}

// A positive number within [lo, hi] `unit`: the command-line overrides' ranges (cmd_plan.c)
// in bytes and bytes/s. cJSON reads 1e400 as inf, which printed "inf TFLOP/s ... fits".
static int json_pos(const cJSON *o, const char *key, double *out, const char *path, double lo, double hi,
                    const char *unit) {
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!it) return zt_err("%s: required field \"%s\" is missing", path, key);
    if (!cJSON_IsNumber(it) || !(it->valuedouble > 0))
        return zt_err("%s: field \"%s\" must be a positive number", path, key);
    const double v = it->valuedouble;
    if (!isfinite(v) || v < lo || v > hi)
        return zt_err("%s: field \"%s\" is %g, out of range: it must be a finite number in [%g, %g] %s", path, key,
                      v, lo, hi, unit);
    *out = v;
    return 0;
}

int zt_gpu_spec_load(const char *path, zt_gpu_spec *out) {
    char *text = zt_read_file(path, NULL);
    if (!text) return zt_err_prefix("--gpu-file");
    cJSON *o = cJSON_Parse(text);
    char deep[160];
    const size_t n = strlen(text);
    const char *too_deep = o ? NULL : zt_json_depth_error(text, n, zt_json_error_col(text, n), deep, sizeof deep);
    free(text);
    if (too_deep) return zt_err("%s: %s", path, too_deep);
    if (!o || !cJSON_IsObject(o)) {
        cJSON_Delete(o);
        return zt_err("%s: not a JSON object", path);
    }
    memset(out, 0, sizeof *out);
    double gpn = 8;
    int rc = -1;
    const cJSON *nm = cJSON_GetObjectItemCaseSensitive(o, "name");
    snprintf(out->name, sizeof out->name, "%s", nm && cJSON_IsString(nm) ? nm->valuestring : path);
    if (json_pos(o, "peak_flops", &out->peak_flops, path, 1e9, 1e18, "FLOP/s") ||
        json_pos(o, "hbm_bytes", &out->hbm_bytes, path, 1e6, 1e15, "bytes") ||
        json_pos(o, "hbm_bw", &out->hbm_bw, path, 1e9, 1e15, "bytes/s") ||
        json_pos(o, "nvlink_bw", &out->nvlink_bw, path, 1e6, 1e15, "bytes/s") ||
        json_pos(o, "net_bw", &out->net_bw, path, 1e6, 1e15, "bytes/s"))
        goto done;
    if (cJSON_GetObjectItemCaseSensitive(o, "gpus_per_node") &&
        json_pos(o, "gpus_per_node", &gpn, path, 1, 1024, "GPUs"))
        goto done;
    if (gpn != floor(gpn) || gpn > 1024) {
        zt_err("%s: field \"gpus_per_node\" must be an integer in [1, 1024]", path);
        goto done;
    }
    out->gpus_per_node = (int)gpn;
    snprintf(out->source, sizeof out->source, "%s", path);
    rc = 0;
done:
    cJSON_Delete(o);
    return rc;
}

void zt_plan_assumptions_default(zt_plan_assumptions *a) {
    a->mfu = 0.30;           // the field report's own ~30% for its healthy runs
    a->nvlink_eff = 0.82;    // NCCL reaches ~370 GB/s ring busbw on 450 GB/s H100 NVLink (protocol overhead)
    a->net_eff = 0.90;       // rail-optimized IB: 8 x 200 Gb/s DGX A100 measures ~192 GB/s ring busbw
    a->alpha_nvlink = 3e-6;  // per ring step
    a->alpha_net = 15e-6;    // per ring step across nodes (reproduces ~200 GB/s for a 2 GB all-gather on 256 H100)
    a->hbm_eff = 0.80;
    a->mem_usable = 0.92;    // CUDA context, NCCL buffers, allocator fragmentation
}

// Decoder layers with softmax attention over the S keys (Qwen3: all; Qwen3.5: its full-attention ones).
int zt_plan_attention_layers(const zt_model_config *c) {
    int n[ZT_LAYER_KINDS], a = 0;
    zt_model_layer_kinds(c, n);
    for (int k = 0; k < ZT_LAYER_KINDS; k++) {
        if (!n[k]) continue;
        zt_layer_plan p;
        zt_model_layer_plan(c, k, 1, &p);
        if (p.attention) a += n[k];
    }
    return a;
}

// The PaLM formula's L counts the layers that attend over S: a linear-attention layer's sequence mixing
// is linear in S, and the formula has no term for it (its parameters are in N).
double zt_plan_flops_per_token(const zt_model_config *c, int64_t S) {
    return 6.0 * (double)zt_model_param_count(c) +
           12.0 * zt_plan_attention_layers(c) * (double)S * (double)c->hidden_size;
}

// The model's own count (model/flops.c, what a run's MFU uses) for one block of S tokens.
double zt_plan_flops_per_token_exact(const zt_model_config *c, int64_t S) {
    return zt_model_train_flops(c, (double)S, (double)S * (double)S) / (double)S;
}

double zt_plan_state_bytes_per_param(zt_shard_choice choice, int world, int shard_group) {
    // fp32 master 4 + bf16 parameter shard 2 + fp32 gradient shard 4 + Adam m, v 8 = 18 bytes, sharded
    const int g = choice == ZT_SHARD_HSDP ? shard_group : world;
    return 18.0 / g + (choice == ZT_SHARD_NOSYNC ? 4.0 : 0.0);
}

// ---- collective times -------------------------------------------------------------

static int ceil_log2(int n) {
    int k = 0;
    while ((1 << k) < n) k++;
    return k;
}

// Ring all-gather / reduce-scatter of `bytes` (the full, gathered size) over n ranks:
// (n-1) steps of latency alpha, each rank moving (n-1)/n of the data at the bus bandwidth.
static double ring_ag_rs(int n, double bytes, double busbw, double alpha) {
    if (n <= 1) return 0;
    return (n - 1) * alpha + (double)(n - 1) / n * bytes / busbw;
}

// All-reduce: ring (2(n-1) steps, 2(n-1)/n of the data) or double binary tree
// (2 log2 n steps, ~2x the data per rank); the faster one, as NCCL's tuner picks.
static double allreduce(int n, double bytes, double busbw, double alpha) {
    if (n <= 1) return 0;
    double ring = 2.0 * (n - 1) * alpha + 2.0 * (n - 1) / n * bytes / busbw;
    double tree = 2.0 * ceil_log2(n) * alpha + 2.0 * bytes / busbw;
    return ring < tree ? ring : tree;
}

// ---- bytes over the node link -------------------------------------------------------------
// A communicator of n members whose world ranks are base + i * stride, ranks placed node by node
// (gpn per node). Each function returns the bytes its collective puts on the node links, all nodes'
// sends summed; `full` is the gathered (all-gather, reduce-scatter) or reduced (all-reduce) size.
typedef struct { int n, base, stride, gpn; zt_plan_colls colls; } link_comm;

static int link_node(const link_comm *c, int i) { return (c->base + i * c->stride) / c->gpn; }
static int link_cross(const link_comm *c, int i, int j) { return link_node(c, i) != link_node(c, j); }

// Ring edges i -> i+1 that leave a node (NCCL's rings in rank order).
static int ring_crossings(const link_comm *c) {
    int k = 0;
    for (int i = 0; i < c->n; i++) k += link_cross(c, i, (i + 1) % c->n);
    return c->n > 1 ? k : 0;
}
// Binomial-tree edges to rank 0 that leave a node: in round r the members i = 2^(r-1) mod 2^r send to
// i - 2^(r-1) (libnbc's reduce-scatter and all-reduce; its broadcast uses the same tree).
static int binomial_crossings(const link_comm *c) {
    int k = 0;
    for (int h = 1; h < c->n; h *= 2)
        for (int i = h; i < c->n; i += 2 * h) k += link_cross(c, i, i - h);
    return k;
}
static double link_allgather(const link_comm *c, double full) {
    if (c->n <= 1) return 0;
    if (c->colls == ZT_COLLS_NCCL) return ring_crossings(c) * full * (c->n - 1) / c->n;
    double b = 0;  // linear: every member sends its block (full / n) to every other member
    for (int i = 0; i < c->n; i++)
        for (int j = 0; j < c->n; j++) b += i != j && link_cross(c, i, j) ? full / c->n : 0;
    return b;
}
static double link_reduce_scatter(const link_comm *c, double full) {
    if (c->n <= 1) return 0;
    if (c->colls == ZT_COLLS_NCCL) return ring_crossings(c) * full * (c->n - 1) / c->n;
    double b = binomial_crossings(c) * full;  // the whole buffer along each tree edge
    for (int i = 1; i < c->n; i++) b += link_cross(c, 0, i) ? full / c->n : 0;  // rank 0 scatters the blocks
    return b;
}
static double link_allreduce(const link_comm *c, double full) {
    if (c->n <= 1) return 0;
    if (c->colls == ZT_COLLS_NCCL) return ring_crossings(c) * full * 2.0 * (c->n - 1) / c->n;
    return 2.0 * binomial_crossings(c) * full;  // reduce up the tree, broadcast down it
}

// ---- the two-queue step simulation ----------------------------------------------------

typedef struct { double start, end; int kind, queue; } sim_iv;
typedef struct {
    double tc;          // compute queue: time it is free
    double tq[3];       // communication queues: 0 = the sharding group's communicator, 1 = replicas (HSDP),
                        // 2 = the context group's (context parallelism)
    sim_iv *iv;
    int niv, cap;
    double *stall;      // [a, b) pairs when compute waited on communication
    int nstall, stall_cap;
    double rs_end[ZT_FSDP_GRAD_SLOTS];  // reduce-scatters in flight (grad buffer slots)
    int rs_n;
    zt_plan_result *r;
} sim;

static double sim_issue(sim *s, int queue, int kind, double t_issue, double dur, double bytes_sent, double link) {
    double start = t_issue > s->tq[queue] ? t_issue : s->tq[queue];
    double end = start + dur;
    s->tq[queue] = end;
    if (s->niv == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 1024;
        s->iv = realloc(s->iv, (size_t)s->cap * sizeof *s->iv);
        if (!s->iv) zt_fatal("out of memory in the plan simulation");
    }
    s->iv[s->niv++] = (sim_iv){start, end, kind, queue};
    s->r->coll[kind].count++;
    s->r->coll[kind].time += dur;
    s->r->coll[kind].bytes += bytes_sent;
    s->r->coll[kind].link += link;
    return end;
}

static void sim_wait(sim *s, double t_ready) {
    if (t_ready <= s->tc) return;
    if (s->nstall == s->stall_cap) {
        s->stall_cap = s->stall_cap ? 2 * s->stall_cap : 256;
        s->stall = realloc(s->stall, (size_t)s->stall_cap * 2 * sizeof *s->stall);
        if (!s->stall) zt_fatal("out of memory in the plan simulation");
    }
    s->stall[2 * s->nstall] = s->tc;
    s->stall[2 * s->nstall + 1] = t_ready;
    s->nstall++;
    s->tc = t_ready;
}

// A free full-gradient buffer: as in grad_acquire(), wait for the oldest reduce-scatter.
static void sim_grad_acquire(sim *s) {
    int k = 0;
    for (int i = 0; i < s->rs_n; i++)
        if (s->rs_end[i] > s->tc) s->rs_end[k++] = s->rs_end[i];
    s->rs_n = k;
    if (s->rs_n < ZT_FSDP_GRAD_SLOTS) return;
    double oldest = s->rs_end[0];
    for (int i = 1; i < s->rs_n; i++)
        if (s->rs_end[i] < oldest) oldest = s->rs_end[i];
    sim_wait(s, oldest);
    sim_grad_acquire(s);
}

static void sim_rs_push(sim *s, double end) {
    if (s->rs_n < ZT_FSDP_GRAD_SLOTS) s->rs_end[s->rs_n++] = end;
}

typedef struct {
    int L, nunits, tied;
    int grad_slots;             // full-gradient buffers limit reduce-scatters in flight (0: no limit)
    int gs, reps, world;        // sharding group, replicas, world
    int keep;                   // keep-gathered: no backward all-gather
    double *ag_bytes, *rs_bytes, *ar_bytes;  // per unit: full sizes (ag, rs) and shard size (ar)
    double *ag_link, *rs_link, *ar_link;     // per unit: node-link bytes of one such collective, all comms
    double *fwd, *bwd;          // per unit compute seconds per micro-batch (head: fwd+bwd in fwd[])
    double bw_group, a_group;   // the sharding group's ring bus bandwidth and step latency
    double bw_rep, a_rep;       // replica all-reduce
    int cp;                     // context parallelism: ranks sharing a block (1: none)
    int recompute;
    double cp_ag, cp_rs;        // one layer's K/V all-gather and dK/dV reduce-scatter: seconds
    double cp_ag_sent, cp_rs_sent, cp_ag_link, cp_rs_link;  // bytes each rank sends; node-link bytes, all groups
    // head-sharded layers (zt_family.context_plan; hs[l] 1: layer l shards heads, NULL: none): their forward
    // all-gather and reduce-scatter, backward all-gather and reduce-scatter (seconds, bytes sent, link bytes)
    const unsigned char *hs;
    double hs_t[4], hs_sent[4], hs_link[4];
} sim_model;

static double t_ag(const sim_model *m, int u) { return ring_ag_rs(m->gs, m->ag_bytes[u], m->bw_group, m->a_group); }
static double t_rs(const sim_model *m, int u) { return ring_ag_rs(m->gs, m->rs_bytes[u], m->bw_group, m->a_group); }
static double sent(const sim_model *m, double full) { return m->gs > 1 ? full * (m->gs - 1) / m->gs : 0; }

static double issue_ag(sim *s, const sim_model *m, int kind, int u) {
    return sim_issue(s, 0, kind, s->tc, t_ag(m, u), sent(m, m->ag_bytes[u]), m->ag_link[u]);
}

// One reduce-scatter issued now; with replicas, the all-reduce of that unit's shard
// follows it on the replica communicator (last micro-batch only).
static void issue_rs(sim *s, const sim_model *m, int u, int replica_ar) {
    double e = sim_issue(s, 0, ZT_COLL_RS, s->tc, t_rs(m, u), sent(m, m->rs_bytes[u]), m->rs_link[u]);
    sim_rs_push(s, e);
    if (replica_ar && m->reps > 1) {
        double bytes = m->ar_bytes[u];
        sim_issue(s, 1, ZT_COLL_AR_REPLICA, e, allreduce(m->reps, bytes, m->bw_rep, m->a_rep),
                  2.0 * (m->reps - 1) / m->reps * bytes, m->ar_link[u]);
    }
}

// Context parallelism, one layer (queue 2): K and V exist only once the layer's projections have
// run and its attention needs all of them, so the all-gather is waited for where it is issued; in
// backward the gather can be issued a layer ahead (the local K, V are saved) unless they are
// recomputed; dK, dV feed the layer's own projection backward, so their reduce-scatter is waited for.
static double issue_cp_ag(sim *s, const sim_model *m) {
    return sim_issue(s, 2, ZT_COLL_CP_AG, s->tc, m->cp_ag, m->cp_ag_sent, m->cp_ag_link);
}
static void cp_rs(sim *s, const sim_model *m) {
    sim_wait(s, sim_issue(s, 2, ZT_COLL_CP_RS, s->tc, m->cp_rs, m->cp_rs_sent, m->cp_rs_link));
}
// A head-sharded layer's collective i (0, 1: forward all-gather, reduce-scatter; 2, 3: backward's): each
// sits between two of the layer's own kernels (the projections and the conv; the delta rule and the gated
// norm), so it is waited for where it is issued.
static void hs_coll(sim *s, const sim_model *m, int i) {
    sim_wait(s, sim_issue(s, 2, i % 2 ? ZT_COLL_CP_HEADS_RS : ZT_COLL_CP_HEADS_AG, s->tc, m->hs_t[i], m->hs_sent[i],
                          m->hs_link[i]));
}
static int is_hs(const sim_model *m, int u) { return m->hs && u >= 1 && u <= m->L && m->hs[u - 1]; }

// The engine's micro-batch (engine/fsdp.c micro_step) on the two queues (three with context parallelism).
static void sim_micro(sim *s, const sim_model *m, int do_rs, int replica_ar) {
    const int L = m->L, head = L + 1;
    if (m->gs == 1) do_rs = 0;
    sim_wait(s, issue_ag(s, m, ZT_COLL_AG_FWD, 0));
    double next_emb = 0;
    for (int u = 0; u <= L; u++) {
        double next = issue_ag(s, m, ZT_COLL_AG_FWD, u + 1);
        // (keep-gathered: the head uses the tied embedding kept from unit 0's forward)
        if (u + 1 == head && m->tied && !m->keep) next_emb = issue_ag(s, m, ZT_COLL_AG_FWD, 0);
        if (is_hs(m, u))
            hs_coll(s, m, 0), hs_coll(s, m, 1);
        else if (m->cp > 1 && u >= 1)
            sim_wait(s, issue_cp_ag(s, m));
        s->tc += m->fwd[u];
        sim_wait(s, next);
        if (u + 1 == head && m->tied) sim_wait(s, next_emb);
    }
    double layer_ready = L >= 1 && !m->keep ? issue_ag(s, m, ZT_COLL_AG_BWD, L) : 0;
    if (do_rs && m->grad_slots) sim_grad_acquire(s);
    s->tc += m->fwd[head];  // fused final norm + lm_head + loss, forward and backward
    if (do_rs) issue_rs(s, m, head, replica_ar);
    double kv_ready = 0;
    int kv_ahead = 0;  // the next attention layer's K/V gather was issued ahead
    for (int u = L; u >= 1; u--) {
        sim_wait(s, layer_ready);
        if (u - 1 >= 1 && !m->keep) layer_ready = issue_ag(s, m, ZT_COLL_AG_BWD, u - 1);
        if (do_rs && m->grad_slots) sim_grad_acquire(s);
        if (is_hs(m, u)) {
            if (m->recompute) hs_coll(s, m, 0), hs_coll(s, m, 1);  // the forward's again
            hs_coll(s, m, 2);
        } else if (m->cp > 1) {
            if (m->recompute || !kv_ahead) kv_ready = issue_cp_ag(s, m);
            sim_wait(s, kv_ready);
            kv_ahead = !m->recompute && u - 1 >= 1 && !is_hs(m, u - 1);
            if (kv_ahead) kv_ready = issue_cp_ag(s, m);  // the next layer's, ahead
        }
        s->tc += m->bwd[u];
        if (is_hs(m, u))
            hs_coll(s, m, 3);
        else if (m->cp > 1)
            cp_rs(s, m);
        if (do_rs) issue_rs(s, m, u, replica_ar);
    }
    if (do_rs && m->grad_slots) sim_grad_acquire(s);
    s->tc += m->bwd[0];
    if (do_rs) issue_rs(s, m, 0, replica_ar);
}

// Splits each stall among the collectives running during it.
static void attribute_stalls(sim *s) {
    for (int i = 0; i < s->nstall; i++) {
        double a = s->stall[2 * i], b = s->stall[2 * i + 1], tot = 0;
        double part[ZT_COLL_NKINDS] = {0};
        for (int j = 0; j < s->niv; j++) {
            double lo = s->iv[j].start > a ? s->iv[j].start : a, hi = s->iv[j].end < b ? s->iv[j].end : b;
            if (hi > lo) part[s->iv[j].kind] += hi - lo, tot += hi - lo;
        }
        double scale = tot > b - a ? (b - a) / tot : 1.0;
        for (int k = 0; k < ZT_COLL_NKINDS; k++) s->r->coll[k].exposed += part[k] * scale;
        s->r->t_exposed_comm += b - a;
    }
}

// ---- memory ---------------------------------------------------------------------------

static double pad_to(double n, double m) { return ceil(n / m) * m; }

// The engine's formula (engine/rank_memory.h) for this job, and whether it fits the GPU.
static int plan_memory(const zt_model_config *c, const zt_gpu_spec *g, const zt_plan_assumptions *a,
                       const zt_plan_job *job, int gs, zt_plan_memory *mem) {
    const zt_rank_memory_job mj = {.shard_group = gs, .micro_batch = job->micro_batch, .seq_len = job->seq_len,
                                   .param_bytes = job->param_bytes, .reduce_bytes = job->reduce_bytes,
                                   .accum_bytes = job->accum_bytes, .nosync = job->choice == ZT_SHARD_NOSYNC,
                                   .recompute = job->recompute, .keep_gathered = job->keep_gathered,
                                   .context_parallel = job->context_parallel,
                                   .attention = job->context_parallel > 0 && !job->attention ? ZT_ATTN_SCRATCH_GEMM
                                                                                           : job->attention};
    zt_rank_memory m;
    if (zt_rank_memory_predict(c, &mj, &m) != 0) return -1;
    mem->params = m.params;
    mem->grads = m.grads;
    mem->optimizer = m.optimizer;
    mem->buffers = m.buffers;
    mem->activations = m.activations;
    mem->act_no_recompute = m.act_no_recompute;
    mem->act_recompute = m.act_recompute;
    mem->cp_kv = m.cp_kv;
    mem->cp_heads = m.cp_heads;
    mem->attn_gemm = m.attn_gemm;
    mem->attn_tiled = m.attn_tiled;
    mem->attention = m.attention;
    mem->total = m.total;
    mem->usable = g->hbm_bytes * a->mem_usable;
    mem->fits = mem->total <= mem->usable;
    return 0;
}

// Context parallelism's per-layer collectives over C consecutive ranks: over NVLink when they sit in
// one node, else as the shard group's rings across nodes (docs/plan.md). Every decoder layer exchanges
// K and V: a family that trains this way has softmax attention in each (Qwen3); zt_plan_predict refuses
// C > 1 for a family without context parallelism (Qwen3.5's linear layers).
static void context_model(const zt_model_config *c, const zt_gpu_spec *g, const zt_plan_assumptions *a,
                          const zt_plan_job *job, int C, sim_model *m, zt_plan_result *r) {
    const int gpn = g->gpus_per_node;
    const double kv = (double)job->micro_batch * (double)job->seq_len * 2.0 * c->num_kv_heads * c->head_dim;
    r->cp_kv_layer = kv * 2.0;
    const int cp_multi = C > gpn;
    const double bw = cp_multi ? fmin(g->nvlink_bw * a->nvlink_eff, gpn * g->net_bw * a->net_eff)
                               : g->nvlink_bw * a->nvlink_eff;
    const double al = cp_multi ? a->alpha_net : a->alpha_nvlink;
    m->cp_ag = ring_ag_rs(C, kv * 2.0, bw, al);
    m->cp_rs = ring_ag_rs(C, kv * job->reduce_bytes, bw, al);
    m->cp_ag_sent = kv * 2.0 * (C - 1) / C;
    m->cp_rs_sent = kv * job->reduce_bytes * (C - 1) / C;
    for (int grp = 0; grp < job->world / C; grp++) {
        const link_comm cc = {.n = C, .base = grp * C, .stride = 1, .gpn = gpn, .colls = job->colls};
        m->cp_ag_link += link_allgather(&cc, kv * 2.0);
        m->cp_rs_link += link_reduce_scatter(&cc, kv * job->reduce_bytes);
    }
    r->coll[ZT_COLL_CP_AG].busbw = r->coll[ZT_COLL_CP_RS].busbw = bw;
    r->coll[ZT_COLL_CP_AG].over_network = r->coll[ZT_COLL_CP_RS].over_network = cp_multi;
    if (!m->hs) return;
    const double full[4] = {r->cp_heads.ag_fwd, r->cp_heads.rs_fwd, r->cp_heads.ag_bwd, r->cp_heads.rs_bwd};
    for (int i = 0; i < 4; i++) {
        m->hs_t[i] = ring_ag_rs(C, full[i], bw, al);
        m->hs_sent[i] = full[i] * (C - 1) / C;
        for (int grp = 0; grp < job->world / C; grp++) {
            const link_comm cc = {.n = C, .base = grp * C, .stride = 1, .gpn = gpn, .colls = job->colls};
            m->hs_link[i] += i % 2 ? link_reduce_scatter(&cc, full[i]) : link_allgather(&cc, full[i]);
        }
    }
    r->coll[ZT_COLL_CP_HEADS_AG].busbw = r->coll[ZT_COLL_CP_HEADS_RS].busbw = bw;
    r->coll[ZT_COLL_CP_HEADS_AG].over_network = r->coll[ZT_COLL_CP_HEADS_RS].over_network = cp_multi;
}

// ---- prediction ----------------------------------------------------------------------

// The job's own rules, before anything is modelled: sizes and dtypes in range, whole nodes, the
// shard group (r->shard_group, r->replicas) and the context split (engine/job_shape.h, said with the
// choice's words: r->context, r->data_parallel). 0, or -1 + zt_err.
static int check_job(const zt_model_config *c, const zt_gpu_spec *g, const zt_plan_assumptions *a,
                     const zt_plan_job *job, zt_plan_result *r) {
    const int W = job->world, gpn = g->gpus_per_node;
    if (W < 1) return zt_err("world size %d must be >= 1", W);
    if (job->micro_batch < 1 || job->grad_accum < 1 || job->seq_len < 2)
        return zt_err("micro-batch (%d) and grad-accum (%d) must be >= 1 and seq-len (%lld) >= 2", job->micro_batch,
                      job->grad_accum, (long long)job->seq_len);
    if (job->reduce_bytes != 2 && job->reduce_bytes != 4)
        return zt_err("reduce dtype must be bf16 (2 bytes) or fp32 (4 bytes), got %d bytes", job->reduce_bytes);
    if (job->accum_bytes != 0 && job->accum_bytes != 2 && job->accum_bytes != 4)
        return zt_err("accumulator dtype must be bf16 (2 bytes) or fp32 (4 bytes), got %d bytes", job->accum_bytes);
    if (job->param_bytes != 0 && job->param_bytes != 2 && job->param_bytes != 4)
        return zt_err("parameter dtype must be bf16 (2 bytes) or fp32 (4 bytes), got %d bytes", job->param_bytes);
    if (gpn < 1) return zt_err("gpus per node must be >= 1");
    if (W > gpn && W % gpn)
        return zt_err("world size %d spans nodes of %d GPUs but is not a multiple of %d (whole nodes only)", W, gpn,
                      gpn);
    // --mfu is limited to (0, 1] by its flag; a run's measured one (--from-run) may exceed 1 when
    // the peak it was measured against is too low (a CPU probe on a busy machine): it is kept
    if (!(a->mfu > 0 && isfinite(a->mfu))) return zt_err("--mfu %g must be positive", a->mfu);
    int gs = W;
    if (job->choice == ZT_SHARD_HSDP) {
        gs = job->shard_group > 0 ? job->shard_group : (W < gpn ? W : gpn);
        if (gs > W || W % gs)
            return zt_err("--shard-group %d must divide the world size %d (HSDP: replicas of whole shard groups)", gs,
                          W);
    }
    r->shard_group = gs;
    r->replicas = W / gs;
    const int C = job->context_parallel > 1 ? job->context_parallel : 1;
    if (job->context_parallel < 0) return zt_err("--context-parallel %d must be >= 1", job->context_parallel);
    if (job->attention && job->context_parallel < 1)
        return zt_err("the attention scratch is modelled with context parallelism: give --context-parallel C (1: none)");
    // the rule train, preflight and the engines apply (rank_memory checks it too): said here with the choice's words
    const zt_context_job cj = {.context = C, .shard_group = gs, .world = W, .seq_len = job->seq_len,
                               .family = c->family, .config = c, .gpu = 1, .shard_name = zt_shard_names[job->choice]};
    if (zt_context_check(&cj) != 0) {
        if (C > 1 && c->family && !(c->family->context_parallel & ZT_CONTEXT_GPU)) {
            char why[ZT_ERR_MAX];
            snprintf(why, sizeof why, "%s", zt_errmsg());
            zt_err("%.1500s; plan it without, or with --context-parallel 1 for the attention scratch alone", why);
        }
        return -1;
    }
    r->context = C;
    r->data_parallel = zt_data_parallel_ranks(W, C);
    return 0;
}

int zt_plan_predict(const zt_model_config *c, const zt_gpu_spec *g, const zt_plan_assumptions *a,
                    const zt_plan_job *job, zt_plan_result *r) {
    memset(r, 0, sizeof *r);
    r->job = *job;
    if (check_job(c, g, a, job, r) != 0) return -1;
    const int W = job->world, gpn = g->gpus_per_node, gs = r->shard_group, C = r->context;
    if (plan_memory(c, g, a, job, gs, &r->mem) != 0) return -1;
    zt_model_layout lay;
    if (zt_model_layout_init(&lay, c) != 0) return -1;
    const int L = c->num_layers, nu = lay.nunits, head = L + 1;
    // each rank computes its S/C tokens of every block: 1/C of the block's matmuls and, balanced
    // across the context group, 1/C of its attention (its queries against all the keys)
    const double T = (double)job->micro_batch * (double)job->seq_len / C;
    r->flops_per_token = zt_plan_flops_per_token(c, job->seq_len);
    r->tokens_per_gpu = T * job->grad_accum;

    // Compute: the step's FLOPs (field convention) at mfu * peak; split across units by
    // what each really executes (the embedding lookup does no matmul work), the layers' part
    // among their kinds by the family's count of each (zt_layer_plan.flops).
    const double t_micro = T * r->flops_per_token / (g->peak_flops * a->mfu);
    const double d = (double)c->hidden_size, V = (double)c->vocab_size;
    const double layer_real =
        zt_plan_flops_per_token_exact(c, job->seq_len) - 6.0 * V * d;  // all layers
    const double head_real = 6.0 * V * d, real = layer_real + head_real;
    int nk[ZT_LAYER_KINDS];
    double kind_flops[ZT_LAYER_KINDS] = {0}, all_kinds = 0;
    zt_model_layer_kinds(c, nk);
    for (int k = 0; k < ZT_LAYER_KINDS; k++) {
        if (!nk[k]) continue;
        zt_layer_plan p;
        zt_model_layer_plan(c, k, job->seq_len, &p);
        kind_flops[k] = nk[k] * p.flops;
        all_kinds += kind_flops[k];
    }
    double *buf = zt_xcalloc((size_t)nu * 8, sizeof(double));
    // NOSYNC reduce-scatters straight from its unsharded accumulator: no gradient buffers to wait for
    sim_model m = {.L = L, .nunits = nu, .tied = c->tie_word_embeddings,
                   .grad_slots = job->choice == ZT_SHARD_NOSYNC ? 0 : ZT_FSDP_GRAD_SLOTS, .gs = gs,
                   .reps = r->replicas, .world = W, .keep = job->keep_gathered,
                   .ag_bytes = buf, .rs_bytes = buf + nu, .ar_bytes = buf + 2 * nu, .fwd = buf + 3 * nu,
                   .bwd = buf + 4 * nu, .ag_link = buf + 5 * nu, .rs_link = buf + 6 * nu, .ar_link = buf + 7 * nu};
    const double pbytes = job->param_bytes > 0 ? job->param_bytes : 2;
    for (int u = 0; u < nu; u++) {
        double padded = pad_to((double)lay.units[u].numel, (double)gs * ZT_FSDP_ALIGN);
        m.ag_bytes[u] = padded * pbytes;
        m.rs_bytes[u] = padded * job->reduce_bytes;
        m.ar_bytes[u] = padded / gs * job->reduce_bytes;
        // every shard group (consecutive ranks) and every replica communicator (one rank per group)
        for (int grp = 0; grp < r->replicas; grp++) {
            const link_comm c = {.n = gs, .base = grp * gs, .stride = 1, .gpn = gpn, .colls = job->colls};
            m.ag_link[u] += link_allgather(&c, m.ag_bytes[u]);
            m.rs_link[u] += link_reduce_scatter(&c, m.rs_bytes[u]);
        }
        for (int j = 0; j < gs; j++) {
            const link_comm c = {.n = r->replicas, .base = j, .stride = gs, .gpn = gpn, .colls = job->colls};
            m.ar_link[u] += link_allreduce(&c, m.ar_bytes[u]);
        }
    }
    const double emb = T * d * 6.0 / (g->hbm_bw * a->hbm_eff);  // row gather / scatter-add, memory bound
    m.fwd[0] = emb;
    m.bwd[0] = emb;
    for (int u = 1; u <= L; u++) {
        const int k = c->family->layer_kind(c, u - 1);
        const double kind_real = layer_real * (kind_flops[k] / all_kinds);  // one kind: layer_real
        double t = t_micro * kind_real / real / nk[k];
        m.fwd[u] = t / 3.0;
        m.bwd[u] = 2.0 * t / 3.0 + (job->recompute ? t / 3.0 : 0.0);
    }
    m.fwd[head] = t_micro * head_real / real;
    m.bwd[head] = 0;
    const int multi = gs > gpn;
    m.bw_group = multi ? fmin(g->nvlink_bw * a->nvlink_eff, gpn * g->net_bw * a->net_eff) : g->nvlink_bw * a->nvlink_eff;
    m.a_group = multi ? a->alpha_net : a->alpha_nvlink;
    const int rep_net = W > gpn;
    m.bw_rep = rep_net ? g->net_bw * a->net_eff : g->nvlink_bw * a->nvlink_eff;
    m.a_rep = rep_net ? a->alpha_net : a->alpha_nvlink;
    m.cp = C;
    m.recompute = job->recompute;
    unsigned char *hs = NULL;  // the layers whose heads the split shards (zt_family.context_plan)
    if (C > 1 && c->family && c->family->context_plan && c->family->layer_kind) {
        if (c->family->context_plan(c, C, job->micro_batch, job->seq_len, job->recompute, &r->cp_heads) != 0) {
            free(buf);
            zt_model_layout_free(&lay);
            return -1;
        }
        hs = zt_xcalloc((size_t)(L > 0 ? L : 1), 1);
        for (int l = 0; l < L; l++) {
            zt_layer_plan p;
            zt_model_layer_plan(c, c->family->layer_kind(c, l), job->seq_len, &p);
            hs[l] = !p.attention;
            r->cp_heads_layers += hs[l];
        }
        m.hs = hs;
    }
    if (C > 1) context_model(c, g, a, job, C, &m, r);

    sim s = {.r = r};
    for (int mb = 0; mb < job->grad_accum; mb++) {
        const int last = mb == job->grad_accum - 1;
        sim_micro(&s, &m, job->choice != ZT_SHARD_NOSYNC || last, last);
    }
    sim_wait(&s, fmax(fmax(s.tq[0], s.tq[1]), s.tq[2]));  // the step's reduce-scatters and all-reduces drain
    // one small all-reduce (loss, non-finite flag, squared gradient norm) over every rank
    const double ctrl = allreduce(W, 24, W > gpn ? g->net_bw : g->nvlink_bw, W > gpn ? a->alpha_net : a->alpha_nvlink);
    const link_comm wc = {.n = W, .base = 0, .stride = 1, .gpn = gpn, .colls = job->colls};
    sim_wait(&s, sim_issue(&s, 0, ZT_COLL_AR_CTRL, s.tc, ctrl, W > 1 ? 24 : 0, link_allreduce(&wc, 24)));
    attribute_stalls(&s);

    double compute = 0;
    for (int u = 0; u < nu; u++) compute += m.fwd[u] + m.bwd[u];
    r->t_compute = compute * job->grad_accum;
    // AdamW over the shard: read master, grad, m, v; write master, m, v, bf16 shard; zero the grad.
    r->t_optimizer = r->mem.optimizer / 8.0 * 34.0 / (g->hbm_bw * a->hbm_eff);
    r->t_step = s.tc + r->t_optimizer;
    r->tok_per_s_per_gpu = r->tokens_per_gpu / r->t_step;
    r->mfu = r->tok_per_s_per_gpu * r->flops_per_token / g->peak_flops;
    for (int k = 0; k < ZT_COLL_CP_AG; k++) {
        r->coll[k].group = k == ZT_COLL_AR_REPLICA ? r->replicas : k == ZT_COLL_AR_CTRL ? W : gs;
        r->coll[k].over_network = k == ZT_COLL_AR_REPLICA ? rep_net : k == ZT_COLL_AR_CTRL ? W > gpn : multi;
        r->coll[k].busbw = k == ZT_COLL_AR_REPLICA ? m.bw_rep : m.bw_group;
    }
    r->coll[ZT_COLL_CP_AG].group = r->coll[ZT_COLL_CP_RS].group = C;
    r->coll[ZT_COLL_CP_HEADS_AG].group = r->coll[ZT_COLL_CP_HEADS_RS].group = C;
    r->node_link_bytes = 0;
    if (W > gpn) {
        if (multi)
            r->node_link_bytes += r->coll[ZT_COLL_AG_FWD].bytes + r->coll[ZT_COLL_AG_BWD].bytes + r->coll[ZT_COLL_RS].bytes;
        if (C > gpn)
            r->node_link_bytes += r->coll[ZT_COLL_CP_AG].bytes + r->coll[ZT_COLL_CP_RS].bytes +
                                  r->coll[ZT_COLL_CP_HEADS_AG].bytes + r->coll[ZT_COLL_CP_HEADS_RS].bytes;
        if (rep_net && r->replicas > 1) r->node_link_bytes += (gs < gpn ? gs : gpn) * r->coll[ZT_COLL_AR_REPLICA].bytes;
        r->node_link_bytes += r->coll[ZT_COLL_AR_CTRL].bytes;
    }
    for (int k = 0; k < ZT_COLL_NKINDS; k++) r->node_link_total += r->coll[k].link;
    // MPI's algorithms load the nodes unevenly (a reduce-scatter's tree ends at rank 0): the mean
    if (job->colls == ZT_COLLS_MPI) r->node_link_bytes = W > gpn ? r->node_link_total / (W / gpn) : 0;
    free(s.iv);
    free(s.stall);
    free(buf);
    free(hs);
    zt_model_layout_free(&lay);
    return 0;
}

// ---- a run's measurements (plan --from-run) ----------------------------------------------

static const cJSON *member(const cJSON *o, const char *k) { return o ? cJSON_GetObjectItemCaseSensitive(o, k) : NULL; }
static double member_num(const cJSON *o, const char *k) {
    const cJSON *v = member(o, k);
    return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}
static void member_str(const cJSON *o, const char *k, char *buf, size_t n) {
    const cJSON *v = member(o, k);
    snprintf(buf, n, "%s", cJSON_IsString(v) ? v->valuestring : "");
}

int zt_plan_read_run(const char *run_dir, zt_plan_run *out) {
    memset(out, 0, sizeof *out);
    char path[4200];
    snprintf(path, sizeof path, "%s/run.json", run_dir);
    char *text = zt_read_file(path, NULL);
    if (!text) return zt_err_prefix("--from-run");
    cJSON *run = cJSON_Parse(text);
    free(text);
    int rc = -1;
    if (!cJSON_IsObject(run)) {
        zt_err("--from-run: %s: not a JSON object", path);
        goto done;
    }
    const cJSON *mc = member(run, "model_config"), *tr = member(run, "train"), *data = member(run, "data"),
                *dev = member(run, "device");
    char *mtext = mc ? cJSON_PrintUnformatted(mc) : NULL;
    const int cfg_ok = mtext && zt_model_config_parse(&out->cfg, mtext, path) == 0;
    free(mtext);
    if (!cfg_ok) {
        if (!mc) zt_err("--from-run: %s has no model_config", path);
        goto done;
    }
    out->world = (int)member_num(run, "world_size");
    out->micro_batch = (int)member_num(tr, "micro_batch");
    out->grad_accum = (int)member_num(tr, "grad_accum");
    out->seq_len = (int64_t)member_num(data, "seq_len");
    if (!(out->world >= 1 && out->micro_batch >= 1 && out->grad_accum >= 1 && out->seq_len >= 2)) {
        zt_err("--from-run: %s: world_size, train.micro_batch, train.grad_accum or data.seq_len missing", path);
        goto done;
    }
    // the mesh it ran on; a run.json from before train recorded it: the flags as given (config.settings;
    // --shard-group node, resolved on the job's nodes, reads as full shard there)
    const cJSON *set = member(member(run, "config"), "settings"), *mesh = member(run, "mesh");
    double g = member_num(mesh, "shard_group"), cp = member_num(mesh, "context_parallel");
    if (!isfinite(cp)) cp = member_num(set, "context_parallel");
    if (!isfinite(g)) {
        const cJSON *sg = member(set, "shard_group");
        g = cJSON_IsNumber(sg) ? sg->valuedouble : cJSON_IsString(sg) ? atof(sg->valuestring) : NAN;
        if (!(g >= 1)) g = NAN;
    }
    out->shard_group = isfinite(g) ? (int)g : out->world;
    out->context_parallel = isfinite(cp) && cp >= 1 ? (int)cp : 1;
    if (out->shard_group < 1 || out->shard_group > out->world || out->world % out->shard_group ||
        zt_context_check(&(zt_context_job){.context = out->context_parallel, .shard_group = out->shard_group,
                                           .world = out->world, .seq_len = out->seq_len}) != 0) {
        zt_err("--from-run: %s: mesh.shard_group %d and mesh.context_parallel %d do not lay out world_size %d",
               path, out->shard_group, out->context_parallel, out->world);
        goto done;
    }
    char doc[32];
    member_str(data, "doc_attention", doc, sizeof doc);
    out->isolated = !strcmp(doc, "isolated");
    member_str(run, "run_id", out->run_id, sizeof out->run_id);
    member_str(run, "backend", out->backend, sizeof out->backend);
    member_str(dev, "name", out->device, sizeof out->device);
    member_str(dev, "peak_kind", out->peak_kind, sizeof out->peak_kind);
    member_str(dev, "peak_source", out->peak_source, sizeof out->peak_source);
    out->peak_flops = member_num(dev, "peak_tflops_per_rank") * 1e12;
    out->recompute = !strcmp(out->backend, "cuda") && cJSON_IsTrue(member(set, "recompute"));
    if (!dev) {
        zt_err("--from-run: %s has no \"device\" object: a run of a zerotrain without MFU (run it again)", path);
        goto done;
    }

    snprintf(path, sizeof path, "%s/metrics.jsonl", run_dir);
    FILE *f = fopen(path, "r");
    if (!f) {
        zt_err("--from-run: %s: cannot open: %s", path, strerror(errno));
        goto done;
    }
    char *line = NULL;
    size_t cap = 0;
    double sum[5] = {0}, first[5] = {0};
    int cnt[5] = {0}, n = 0;
    while (getline(&line, &cap, f) > 0) {
        cJSON *j = cJSON_Parse(line);
        const double st = member_num(j, "step_time_s"), step = member_num(j, "step");
        if (cJSON_IsObject(j) && member(j, "loss") && isfinite(st) && st > 0 && isfinite(step)) {
            const double v[5] = {st, member_num(j, "compute_s"), member_num(j, "comm_wait_s"),
                                 member_num(j, "model_flops"), 0};
            if (n == 0) {
                memcpy(first, v, sizeof v);
                out->first_step = (int64_t)step;
            }
            for (int k = 0; k < 5; k++)
                if (isfinite(v[k])) sum[k] += v[k], cnt[k]++;
            out->last_step = (int64_t)step;
            n++;
        }
        cJSON_Delete(j);
    }
    free(line);
    fclose(f);
    if (n == 0) {
        zt_err("--from-run: %s holds no step line yet", path);
        goto done;
    }
    if (n > 1) {  // the first step carries the warm-up (first touches, allocations): left out
        for (int k = 0; k < 5; k++)
            if (isfinite(first[k])) sum[k] -= first[k], cnt[k]--;
        n--;
        out->first_step++;
    }
    out->steps = n;
    double mean[5];
    for (int k = 0; k < 5; k++) mean[k] = cnt[k] ? sum[k] / cnt[k] : NAN;
    out->step_s = mean[0];
    out->compute_s = mean[1];
    out->comm_wait_s = mean[2];
    // over the mean step (as the run's summary: all FLOPs over all the time), not a mean of ratios
    out->tflops_per_rank = mean[3] / out->world / out->step_s / 1e12;
    out->mfu = mean[3] / out->world / out->step_s / out->peak_flops;
    rc = 0;
done:
    cJSON_Delete(run);
    return rc;
}
