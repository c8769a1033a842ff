// `zerotrain plan`: prints the memory and step-time model of ops/plan.c for a
// model, a GPU and a world size; `--field` checks it against the field report's
// 4/8/16-B300 table and extrapolates to 1,024 GPUs.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "cli/flags.h"
#include "engine/device_peak.h"
#include "engine/job_shape.h"
#include "engine/rank_memory.h"
#include "model/family.h"
#include "ops/plan.h"
#include "base/common.h"

static const char synopsis[] =
            "usage: zerotrain plan --model CONFIG [options]\n"
            "       zerotrain plan --field [options]\n"
            "       zerotrain plan --from-run RUN [options]\n"
            "\n"
            "Predicts per-GPU memory and step time of FSDP training on GPUs for three sharding choices:\n"
            "  full    ZeRO-3: all-gather each unit for forward and again for backward, reduce-scatter its\n"
            "          gradient every micro-batch\n"
            "  nosync  ZeRO-3 parameters, gradients accumulated unsharded (--accum-dtype) over the micro-batches and\n"
            "          reduce-scattered once per step\n"
            "  hsdp    full shard inside a group (default: a node), replicated across groups; one all-reduce of\n"
            "          the gradient shards across replicas per step\n"
            "The model and its assumptions: docs/plan.md.\n";

// The assumptions' defaults are zt_plan_assumptions_default's (ops/plan.c, docs/plan.md):
// these flags start unset (-1) and override it only when given; the help names the values.
typedef struct {
    const char *model, *worlds, *shard, *gpu, *gpu_file, *from_run;
    int field, world, micro_batch, grad_accum, shard_group, reduce_bytes, accum_bytes, recompute, gpus_per_node;
    int param_bytes, reshard_after_forward, colls, context_parallel, attention, device_cpu;
    int64_t seq_len, global_batch;
    double epoch_tokens, peak_tflops, hbm_gb, hbm_tbps, nvlink_gbps, net_gbps, ckpt_gbps;
    double mfu, nvlink_eff, net_eff, alpha_nvlink_us, alpha_net_us, hbm_eff, mem_usable;
} plan_flags;

static char gpu_help[192];  // names the presets (zt_gpu_preset_names), filled before parsing
static const zt_flag_choice dtype_choices[] = {{"fp32", 4}, {"bf16", 2}, {0}};
static const zt_flag_choice param_dtype_choices[] = {{"bf16", 2}, {"fp32", 4}, {0}};
static const zt_flag_choice colls_choices[] = {{"nccl", ZT_COLLS_NCCL}, {"mpi", ZT_COLLS_MPI}, {0}};
static const zt_flag_choice device_choices[] = {{"gpu", 0}, {"cpu", 1}, {"cuda", 2}, {0}};
static const zt_flag_choice attention_choices[] = {{"gemm", ZT_ATTN_SCRATCH_GEMM}, {"tiled", ZT_ATTN_SCRATCH_TILED}, {0}};

#define T plan_flags
#define UNSET .def = -1
static const zt_flag flags[] = {
    {.type = ZT_FLAG_SECTION, .help = "model and job:"},
    {"model", ZT_FLAG_STR, ZT_AT_STR(T, model), "PATH",
     .help = "config.json or HF directory of a Qwen3 or Qwen3.5 model (--field: built-in Qwen3-32B)"},
    {"field", ZT_FLAG_SET, ZT_AT_INT(T, field),
     .help = "reproduce the field report's table (Qwen3-32B, 4/8/16 B300s) and\nextrapolate to 1,024 GPUs"},
    {"from-run", ZT_FLAG_STR, ZT_AT_STR(T, from_run), "RUN",
     .help = "learn from a training run: its model, shape and W from RUN/run.json, and its measured\n"
             "MFU (from the compute time of metrics.jsonl) in place of the --mfu assumption;\n"
             "prints predicted against measured step time at the run's W"},
    {"world", ZT_FLAG_INT, ZT_AT_INT(T, world), "W", 1, 1 << 20, .def = 16,
     .help = "GPUs for the detailed breakdown (default {default})"},
    {"worlds", ZT_FLAG_STR, ZT_AT_STR(T, worlds), "LIST", .sdef = "4,8,16,32,64,128,256,512,1024",
     .help = "comma-separated GPU counts for the scaling table\n(default {default})"},
    {"seq-len", ZT_FLAG_I64, ZT_AT_I64(T, seq_len), "S", 2, 1 << 24, .def = 2048,
     .help = "tokens per block ({default})"},
    {"micro-batch", ZT_FLAG_INT, ZT_AT_INT(T, micro_batch), "B", 1, 1 << 20, .def = 1,
     .help = "blocks per forward/backward ({default})"},
    {"grad-accum", ZT_FLAG_INT, ZT_AT_INT(T, grad_accum), "G", 1, 1 << 20, .def = 8,
     .help = "micro-batches per step, per GPU ({default})"},
    {"global-batch", ZT_FLAG_I64, ZT_AT_I64(T, global_batch), "T", 1, INT64_MAX,
     .help = "instead: tokens per step for the whole job; grad-accum = T / (W B S)"},
    {"shard", ZT_FLAG_STR, ZT_AT_STR(T, shard), "C", .sdef = "all",
     .help = "full, nosync, hsdp or all ({default})"},
    {"shard-group", ZT_FLAG_INT, ZT_AT_INT(T, shard_group), "G", 1, 1 << 20,
     .help = "HSDP shard group (default: GPUs per node)"},
    {"reduce-dtype", ZT_FLAG_ENUM, ZT_AT_INT(T, reduce_bytes), "T", .def = 4, .choices = dtype_choices,
     .help = "{default} (default) or bf16 gradient reduction"},
    {"accum-dtype", ZT_FLAG_ENUM, ZT_AT_INT(T, accum_bytes), "T", .def = 4, .choices = dtype_choices,
     .help = "nosync's unsharded gradient accumulator: {default} (default) or bf16"},
    {"param-dtype", ZT_FLAG_ENUM, ZT_AT_INT(T, param_bytes), "T", .def = 2, .choices = param_dtype_choices,
     .help = "gathered parameters: {default} (default, the GPU engine) or fp32 (the CPU engine)"},
    {"reshard-after-forward", ZT_FLAG_ENUM, ZT_AT_INT(T, reshard_after_forward), "true|false", .def = 1,
     .choices = zt_bool_choices,
     .help = "false: keep-gathered (no backward all-gather; every unit's gathered\nparameters resident), as train's flag"},
    {"collectives", ZT_FLAG_ENUM, ZT_AT_INT(T, colls), "nccl|mpi", .def = ZT_COLLS_NCCL, .choices = colls_choices,
     .help = "algorithms for the node-link bytes: {default} (rings, default) or mpi\n(Open MPI 4.1's libnbc, the CPU engine's)"},
    {"recompute", ZT_FLAG_SET, ZT_AT_INT(T, recompute),
     .help = "recompute every decoder layer's activations in backward"},
    {"context-parallel", ZT_FLAG_INT, ZT_AT_INT(T, context_parallel), "C", 1, 1 << 20,
     .help = "C consecutive ranks of a shard group share each block (S/C tokens\n"
             "each; W/C data-parallel ranks); adds the per-layer K/V all-gathers\n"
             "and the attention's scratch to the model (1: no split, the scratch)"},
    {"attention", ZT_FLAG_ENUM, ZT_AT_INT(T, attention), "gemm|tiled", .choices = attention_choices,
     .help = "with --context-parallel: whose scratch the total counts: gemm\n"
             "(default, kernels/cuda/attention.cu, O(S^2)) or tiled (O(S D))"},
    {"device", ZT_FLAG_ENUM, ZT_AT_INT(T, device_cpu), "gpu|cpu|cuda", .def = 0, .choices = device_choices,
     .help = "gpu (default): the GPU model below; cpu: the CPU engine's memory per rank,\n"
             "byte for byte as `train --device cpu` allocates it (--world, --shard-group,\n"
             "--micro-batch, --seq-len, --context-parallel, --reshard-after-forward; no step time);\n"
             "cuda: the GPU engine's device bytes per rank as `train --device cuda` asks\n"
             "for them (also --grad-accum, --recompute, --attention; needs the CUDA module)"},
    {"epoch-tokens", ZT_FLAG_F64, ZT_AT_F64(T, epoch_tokens), "N", .fmin = 1, .fmax = 1e18,
     .def = ZT_FIELD_EPOCH_TOKENS, .help = "tokens per epoch for GPU-hours ({default})"},

    {.type = ZT_FLAG_SECTION, .help = "GPU (preset, then overrides):"},
    {"gpu", ZT_FLAG_STR, ZT_AT_STR(T, gpu), "NAME", .sdef = "B300", .help = gpu_help},
    {"gpu-file", ZT_FLAG_STR, ZT_AT_STR(T, gpu_file), "FILE",
     .help = "JSON with peak_flops, hbm_bytes, hbm_bw, nvlink_bw, net_bw (bytes/s,\none direction per GPU), "
             "gpus_per_node, name"},
    {"peak-tflops", ZT_FLAG_F64, ZT_AT_F64(T, peak_tflops), "X", .fmin = 1e-3, .fmax = 1e6, UNSET,
     .help = "bf16 dense peak, TFLOP/s"},
    {"hbm-gb", ZT_FLAG_F64, ZT_AT_F64(T, hbm_gb), "X", .fmin = 1e-3, .fmax = 1e6, UNSET, .help = "HBM size, GB"},
    {"hbm-tbps", ZT_FLAG_F64, ZT_AT_F64(T, hbm_tbps), "X", .fmin = 1e-3, .fmax = 1e3, UNSET,
     .help = "HBM bandwidth, TB/s"},
    {"nvlink-gbps", ZT_FLAG_F64, ZT_AT_F64(T, nvlink_gbps), "X", .fmin = 1e-3, .fmax = 1e6, UNSET,
     .help = "NVLink bandwidth per GPU per direction, GB/s"},
    {"net-gbps", ZT_FLAG_F64, ZT_AT_F64(T, net_gbps), "X", .fmin = 1e-3, .fmax = 1e6, UNSET,
     .help = "network bandwidth per GPU per direction, GB/s"},
    {"gpus-per-node", ZT_FLAG_INT, ZT_AT_INT(T, gpus_per_node), "N", 1, 1024, UNSET, .help = "GPUs per node"},

    {"ckpt-gbps", ZT_FLAG_F64, ZT_AT_F64(T, ckpt_gbps), "X", .fmin = 1e-3, .fmax = 1e6, .def = 2,
     .help = "checkpoint write bandwidth per node into the file system, GB/s (default {default})"},

    {.type = ZT_FLAG_SECTION, .help = "assumptions (defaults in docs/plan.md):"},
    {"mfu", ZT_FLAG_F64, ZT_AT_F64(T, mfu), "X", .fmin = 1e-4, .fmax = 1, UNSET,
     .help = "achieved fraction of peak while computing (0.30)"},
    {"nvlink-eff", ZT_FLAG_F64, ZT_AT_F64(T, nvlink_eff), "X", .fmin = 1e-4, .fmax = 1, UNSET,
     .help = "ring bus bandwidth / NVLink line rate (0.82)"},
    {"net-eff", ZT_FLAG_F64, ZT_AT_F64(T, net_eff), "X", .fmin = 1e-4, .fmax = 1, UNSET,
     .help = "ring bus bandwidth / NIC line rate (0.90)"},
    {"alpha-nvlink-us", ZT_FLAG_F64, ZT_AT_F64(T, alpha_nvlink_us), "X", .fmin = 0, .fmax = 1e6, UNSET,
     .help = "latency per ring step inside a node (3)"},
    {"alpha-net-us", ZT_FLAG_F64, ZT_AT_F64(T, alpha_net_us), "X", .fmin = 0, .fmax = 1e6, UNSET,
     .help = "latency per ring step across nodes (15)"},
    {"hbm-eff", ZT_FLAG_F64, ZT_AT_F64(T, hbm_eff), "X", .fmin = 1e-4, .fmax = 1, UNSET,
     .help = "achieved HBM bandwidth fraction, optimizer step (0.80)"},
    {"mem-usable", ZT_FLAG_F64, ZT_AT_F64(T, mem_usable), "X", .fmin = 1e-4, .fmax = 1, UNSET,
     .help = "fraction of HBM a job can hold (0.92)"},
    {0}};
#undef UNSET
#undef T

static void print_header(const char *model_src, const zt_model_config *c, const zt_gpu_spec *g,
                         const zt_plan_assumptions *a, int64_t S) {
    const int64_t n = zt_model_param_count(c);
    int nk[ZT_LAYER_KINDS];
    if (zt_model_layer_kinds(c, nk) == 1) {  // one kind of layer (Qwen3): softmax attention in each
        printf("model: %s (%s): %d layers, hidden %lld, ffn %lld, heads %d/%d x %d, vocab %lld, %s embeddings\n",
               c->family->title, model_src, c->num_layers, (long long)c->hidden_size, (long long)c->intermediate_size,
               c->num_heads, c->num_kv_heads, c->head_dim, (long long)c->vocab_size,
               c->tie_word_embeddings ? "tied" : "untied");
        printf("  parameters %lld (%.2f GB in bf16)\n", (long long)n, 2.0 * n / 1e9);
        printf("  FLOPs per token at seq %lld: %.1f G = 6 N + 12 L S hidden (the field convention, used for MFU); "
               "the GPU executes %.1f G (6 N_matmul + 6 L S H D, causal)\n",
               (long long)S, zt_plan_flops_per_token(c, S) / 1e9, zt_plan_flops_per_token_exact(c, S) / 1e9);
    } else {  // layers of several kinds: each named with its count
        printf("model: %s (%s): %d layers (", c->family->title, model_src, c->num_layers);
        for (int k = 0, first = 1; k < ZT_LAYER_KINDS; k++) {
            if (!nk[k]) continue;
            zt_layer_plan p;
            zt_model_layer_plan(c, k, S, &p);
            printf("%s%d %s", first ? "" : " + ", nk[k], p.name);
            first = 0;
        }
        printf("), hidden %lld, ffn %lld, vocab %lld, %s embeddings\n", (long long)c->hidden_size,
               (long long)c->intermediate_size, (long long)c->vocab_size, c->tie_word_embeddings ? "tied" : "untied");
        printf("  parameters %lld (%.2f GB in bf16)\n", (long long)n, 2.0 * n / 1e9);
        const int la = zt_plan_attention_layers(c);
        printf("  FLOPs per token at seq %lld: %.1f G = 6 N + 12 L_attn S hidden, L_attn = the %d layers with softmax "
               "attention (the field convention, used for MFU); the GPU executes %.1f G (the family's count: its "
               "matmuls, the %d attention layers' causal 6 S H D, the other layers' sequence mixing)\n",
               (long long)S, zt_plan_flops_per_token(c, S) / 1e9, la, zt_plan_flops_per_token_exact(c, S) / 1e9, la);
    }
    printf("gpu: %s: %.0f TFLOP/s bf16 dense, %.0f GB HBM at %.2f TB/s, NVLink %.0f GB/s and network %.0f GB/s "
           "per GPU per direction, %d GPUs per node\n",
           g->name, g->peak_flops / 1e12, g->hbm_bytes / 1e9, g->hbm_bw / 1e12, g->nvlink_bw / 1e9, g->net_bw / 1e9,
           g->gpus_per_node);
    printf("  (%s)\n", g->source);
    printf("assumptions: compute at %.0f%% MFU; ring bus bandwidth %.0f GB/s inside a node (%.0f%% of NVLink), "
           "min(that, %d x %.0f GB/s) across nodes (%.0f%% of the NICs); %.0f us per ring step in a node, %.0f "
           "us across nodes; HBM at %.0f%%; %.0f%% of HBM usable\n",
           100 * a->mfu, g->nvlink_bw * a->nvlink_eff / 1e9, 100 * a->nvlink_eff, g->gpus_per_node,
           g->net_bw * a->net_eff / 1e9, 100 * a->net_eff, a->alpha_nvlink * 1e6, a->alpha_net * 1e6,
           100 * a->hbm_eff, 100 * a->mem_usable);
}

static const char *choice_text(zt_shard_choice c) {
    switch (c) {
    case ZT_SHARD_FULL: return "ZeRO-3, reshard after forward, reduce-scatter every micro-batch";
    case ZT_SHARD_NOSYNC: return "ZeRO-3 parameters, unsharded gradient accumulation, one reduce-scatter per step";
    default: return "shard within a group, replicate across groups, gradient all-reduce across replicas per step";
    }
}

static void row_p(const char *label, double v, int prec, const char *tail) {
    printf("  %-44s %9.*f%s\n", label, prec, v, tail ? tail : "");
}
static void row(const char *label, double v, const char *tail) { row_p(label, v, 3, tail); }
static void row_gb(const char *label, double bytes, const char *tail) { row_p(label, bytes / 1e9, 1, tail); }

// A checkpoint of this job: fp32 master + Adam m and v, 12 bytes per parameter (the training
// state is a few attributes); each GPU writes its shard's part, which is also what
// --async-save's host snapshot holds; the file system takes ckpt_gbps per node.
static void print_checkpoint(const zt_plan_result *r, const zt_model_config *c, const zt_gpu_spec *g, double gbps) {
    const zt_plan_job *j = &r->job;
    const double whole = 12.0 * (double)zt_model_param_count(c), snap = r->mem.optimizer * 1.5;  // m+v: 8 B/param
    const int per_node = j->world < g->gpus_per_node ? j->world : g->gpus_per_node;
    const int nodes = (j->world + g->gpus_per_node - 1) / g->gpus_per_node;
    const double t_write = whole / (gbps * 1e9 * nodes);
    char tail[200];
    printf("checkpoint (fp32 master + Adam m, v = 12 bytes per parameter):\n");
    row_gb("size (whole job)", whole, NULL);
    snprintf(tail, sizeof tail, "   (%.1f GB of host memory for the %d GPUs of a node)", per_node * snap / 1e9,
             per_node);
    row_gb("--async-save host snapshot per GPU", snap, tail);
    snprintf(tail, sizeof tail, "   at %.3g GB/s per node x %d node%s: %.1f steps of %.3f s", gbps, nodes,
             nodes == 1 ? "" : "s", t_write / r->t_step, r->t_step);
    row("write time (s)", t_write, tail);
    printf("  %s\n", "(without --async-save every GPU waits for the whole write at each save; with it, for the "
                     "snapshot copy)");
}

// With --context-parallel: the block's gathered K/V and both GPU attention paths' scratch; the
// total counts the one --attention names.
static void print_attention_memory(const zt_plan_result *r) {
    const zt_plan_memory *m = &r->mem;
    const int counted = r->job.attention == ZT_ATTN_SCRATCH_TILED ? ZT_ATTN_SCRATCH_TILED : ZT_ATTN_SCRATCH_GEMM;
    char tail[160];
    if (r->context > 1)
        row_gb("context K/V (gathered K, V + block dK, dV)", m->cp_kv, "   (one layer at a time: 12 B S Hkv D)");
    if (r->context > 1 && m->cp_heads > 0)
        row_gb("context heads (block rows, my heads' state)", m->cp_heads,
               r->job.recompute ? "   (head-sharded layers: one layer's block tensors + workspaces)"
                                : "   (head-sharded layers: every layer's block tensors + workspaces)");
    snprintf(tail, sizeof tail, "   (12 g Sq S + 8 g S D + 4 g Sq; %s)",
             counted == ZT_ATTN_SCRATCH_GEMM ? "counted" : "not counted: --attention tiled");
    row_gb("attention scratch, GEMM path (today's)", m->attn_gemm, tail);
    snprintf(tail, sizeof tail, "   (g Sq (6 D + 8) + 8 S D; %s)",
             counted == ZT_ATTN_SCRATCH_TILED ? "counted" : "not counted: --attention gemm");
    row_gb("attention scratch, tiled path", m->attn_tiled, tail);
}

static void print_detail(const zt_plan_result *r) {
    char tail[160];
    const zt_plan_memory *m = &r->mem;
    const zt_plan_job *j = &r->job;
    char share[24] = "all";
    if (r->context > 1) snprintf(share, sizeof share, "its 1/%d", r->context);
    if (j->context_parallel > 0)
        printf("\n== %s%s (%s): %d GPUs, shard group %d x %d replica%s, context parallel %d: %d data-parallel ranks x "
               "micro-batch %d x grad-accum %d x seq %lld = %.0f tokens per step, %.0f per GPU (%s of each block)\n",
               zt_shard_names[j->choice], j->keep_gathered ? " + keep-gathered" : "", choice_text(j->choice), j->world,
               r->shard_group, r->replicas, r->replicas == 1 ? "" : "s", r->context, r->data_parallel, j->micro_batch,
               j->grad_accum, (long long)j->seq_len,
               (double)zt_tokens_per_step(j->world, r->context, j->micro_batch, j->grad_accum, j->seq_len),
               r->tokens_per_gpu, share);
    else
    printf("\n== %s%s (%s): %d GPUs, shard group %d x %d replica%s, micro-batch %d x grad-accum %d x seq %lld = %.0f "
           "tokens per GPU per step, %.0f per step\n",
           zt_shard_names[j->choice], j->keep_gathered ? " + keep-gathered" : "", choice_text(j->choice), j->world, r->shard_group, r->replicas,
           r->replicas == 1 ? "" : "s", j->micro_batch, j->grad_accum, (long long)j->seq_len, r->tokens_per_gpu,
           (double)zt_tokens_per_step(j->world, 1, j->micro_batch, j->grad_accum, j->seq_len));
    printf("memory per GPU (GB):\n");
    row_gb(j->param_bytes == 4 ? "parameters (fp32 master, gathered as is)" : "parameters (fp32 master + bf16 shard)",
           m->params, NULL);
    row_gb(j->choice != ZT_SHARD_NOSYNC ? "gradients (fp32 shard)"
           : j->accum_bytes == 2    ? "gradients (fp32 shard + unsharded bf16 sum)"
                                    : "gradients (fp32 shard + unsharded fp32 sum)",
           m->grads, NULL);
    row_gb("optimizer (Adam m, v in fp32)", m->optimizer, NULL);
    row_gb(j->keep_gathered                 ? "gathered-unit buffers (every unit kept, grads)"
           : j->choice == ZT_SHARD_NOSYNC ? "gathered-unit buffers (params)"
                                          : "gathered-unit buffers (params, grads)",
           m->buffers, NULL);
    snprintf(tail, sizeof tail, "   (without recompute %.1f, with %.1f)", m->act_no_recompute / 1e9,
             m->act_recompute / 1e9);
    row_gb(j->recompute ? "activations (recompute)" : "activations (no recompute)", m->activations, tail);
    if (j->context_parallel > 0) print_attention_memory(r);
    snprintf(tail, sizeof tail, "   of %.1f usable: %s", m->usable / 1e9, m->fits ? "fits" : "DOES NOT FIT");
    row_gb("total", m->total, tail);
    printf("step time (s):\n");
    row(j->recompute ? "compute (with recompute)" : "compute", r->t_compute, NULL);
    row("exposed communication", r->t_exposed_comm, NULL);
    row("optimizer (AdamW over the shard, HBM bound)", r->t_optimizer, NULL);
    snprintf(tail, sizeof tail, "   -> %.0f tok/s per GPU, %.0f tok/s in all, MFU %.1f%%", r->tok_per_s_per_gpu,
             r->tok_per_s_per_gpu * j->world, 100 * r->mfu);
    row("step", r->t_step, tail);
    printf("node link: %.2f GB per step leave each node (one direction, %s; %s)\n", r->node_link_bytes / 1e9,
           j->colls == ZT_COLLS_MPI ? "Open MPI libnbc, the nodes' mean" : "ring model",
           r->node_link_bytes > 0 ? "the collectives marked network below" : "one node: nothing crosses");
    printf("node link bytes per step, all nodes' sends summed: %.0f\n", r->node_link_total);
    if (r->context > 1) {
        const zt_plan_coll *ag = &r->coll[ZT_COLL_CP_AG], *rs = &r->coll[ZT_COLL_CP_RS];
        printf("context parallel: per layer and micro-batch the %d ranks all-gather the block's K and V (%.1f MB "
               "gathered, bf16; %.1f MB sent per GPU) in forward and again in backward, and reduce-scatter dK, dV "
               "(%.1f MB sent per GPU); per step %.2f GB sent per GPU, %.3f s of it exposed (compute waits for "
               "it)\n",
               r->context, r->cp_kv_layer / 1e6, r->cp_kv_layer * (r->context - 1) / r->context / 1e6,
               rs->count ? rs->bytes / rs->count / 1e6 : 0.0, (ag->bytes + rs->bytes) / 1e9, ag->exposed + rs->exposed);
        const zt_plan_coll *hg = &r->coll[ZT_COLL_CP_HEADS_AG], *hr = &r->coll[ZT_COLL_CP_HEADS_RS];
        const zt_context_split_plan *h = &r->cp_heads;
        if (r->cp_heads_layers > 0)
            printf("context parallel, head sharding: in each of the %d layers that shard their heads, per micro-batch "
                   "the %d ranks all-gather the projected rows (%.1f MB gathered) and reduce-scatter the output "
                   "(%.1f MB in, fp32) in forward%s, all-gather its gradient (%.1f MB) and reduce-scatter the rows' "
                   "gradients (%.1f MB in, fp32) in backward; each GPU sends (C-1)/C of each; per step %.2f GB "
                   "sent per GPU, %.3f s of it exposed\n",
                   r->cp_heads_layers, r->context, h->ag_fwd / 1e6, h->rs_fwd / 1e6,
                   r->job.recompute ? " (and again with recompute)" : "", h->ag_bwd / 1e6, h->rs_bwd / 1e6,
                   (hg->bytes + hr->bytes) / 1e9, hg->exposed + hr->exposed);
    }
    printf("  %-28s %-8s %6s %6s %12s %10s %8s %8s %9s\n", "collective (per step)", "link", "ranks", "count",
           "GB sent/GPU", "busbw GB/s", "time s", "hidden s", "exposed s");
    for (int k = 0; k < ZT_COLL_NKINDS; k++) {
        const zt_plan_coll *c = &r->coll[k];
        if (!c->count || c->group <= 1) continue;
        char bw[16] = "-";
        if (k != ZT_COLL_AR_CTRL) snprintf(bw, sizeof bw, "%.0f", c->busbw / 1e9);
        printf("  %-28s %-8s %6d %6d %12.2f %10s %8.3f %8.3f %9.3f\n", zt_coll_names[k],
               c->over_network ? "network" : "NVLink", c->group, c->count, c->bytes / 1e9, bw, c->time,
               fmax(0.0, c->time - c->exposed), c->exposed);
    }
}

typedef struct {
    zt_plan_job job;
    int64_t global_batch;
} job_tmpl;

// Data-parallel ranks of world W: W / C with context parallelism (C ranks share a block).
static int data_ranks(const job_tmpl *t, int W) { return zt_data_parallel_ranks(W, t->job.context_parallel); }

// grad-accum for world W under a fixed global batch; 0 when W cannot hold it.
static int accum_for(const job_tmpl *t, int W) {
    if (t->global_batch <= 0) return t->job.grad_accum;
    int64_t per = (int64_t)data_ranks(t, W) * t->job.micro_batch * t->job.seq_len;
    if (t->global_batch % per) return 0;
    return (int)(t->global_batch / per);
}

static int predict_at(const zt_model_config *c, const zt_gpu_spec *g, const zt_plan_assumptions *a,
                      const job_tmpl *t, zt_shard_choice ch, int W, zt_plan_result *r) {
    zt_plan_job j = t->job;
    j.world = W;
    j.choice = ch;
    j.grad_accum = accum_for(t, W);
    if (j.grad_accum < 1 && j.context_parallel > 1)
        return zt_err("--global-batch %lld is not a multiple of %d data-parallel ranks (%d GPUs / context %d) x "
                      "micro-batch %d x seq %lld",
                      (long long)t->global_batch, data_ranks(t, W), W, j.context_parallel, j.micro_batch,
                      (long long)j.seq_len);
    if (j.grad_accum < 1)
        return zt_err("--global-batch %lld is not a multiple of %d GPUs x micro-batch %d x seq %lld",
                      (long long)t->global_batch, W, j.micro_batch, (long long)j.seq_len);
    if (ch == ZT_SHARD_HSDP && j.shard_group > W) j.shard_group = W;
    return zt_plan_predict(c, g, a, &j, r);
}

static void print_scaling(const zt_model_config *c, const zt_gpu_spec *g, const zt_plan_assumptions *a,
                          const job_tmpl *t, const int *worlds, int nw, const int *choices, int nch,
                          double epoch_tokens) {
    printf("\nscaling (per-GPU batch %s): tok/s per GPU | efficiency vs %d GPUs | GPU-h per epoch of %.3g tokens | "
           "exposed comm %% of step | memory GB (* = does not fit)\n",
           t->global_batch > 0 ? "from the fixed global batch" : "fixed", worlds[0], epoch_tokens);
    printf("%6s %10s", "GPUs", "tokens/step");
    for (int k = 0; k < nch; k++) printf(" | %-36s", zt_shard_names[choices[k]]);
    printf("\n");
    double base[ZT_SHARD_NCHOICES] = {0};
    for (int i = 0; i < nw; i++) {
        if (t->job.context_parallel > 1 && worlds[i] % t->job.context_parallel) {
            printf("%6d %10s   (context parallel %d does not divide %d GPUs)\n", worlds[i], "-",
                   t->job.context_parallel, worlds[i]);
            continue;
        }
        int ga = accum_for(t, worlds[i]);
        if (ga < 1) {
            printf("%6d %10s   (the global batch does not divide into %d GPUs)\n", worlds[i], "-", worlds[i]);
            continue;
        }
        printf("%6d %10.0f", worlds[i],
               (double)zt_tokens_per_step(worlds[i], t->job.context_parallel, t->job.micro_batch, ga, t->job.seq_len));
        for (int k = 0; k < nch; k++) {
            zt_plan_result r;
            if (predict_at(c, g, a, t, (zt_shard_choice)choices[k], worlds[i], &r) != 0) {
                printf(" | %-36s", "n/a");
                zt_err_clear();
                continue;
            }
            if (base[k] == 0) base[k] = r.tok_per_s_per_gpu;
            char cell[64];
            snprintf(cell, sizeof cell, "%6.0f %4.0f%% %7.1f %5.1f%% %6.0f%s", r.tok_per_s_per_gpu,
                     100 * r.tok_per_s_per_gpu / base[k], epoch_tokens / r.tok_per_s_per_gpu / 3600,
                     100 * r.t_exposed_comm / r.t_step, r.mem.total / 1e9, r.mem.fits ? "" : "*");
            printf(" | %-36s", cell);
        }
        printf("\n");
    }
}

static int print_field(const zt_model_config *c, const zt_gpu_spec *g, const zt_plan_assumptions *a,
                       const job_tmpl *t, double epoch_tokens) {
    printf("\nfield report: Qwen3-32B on %s, seq %lld, micro-batch %d, grad-accum %d (tokens per GPU per step "
           "fixed), ~%.3g tokens per epoch\n",
           g->name, (long long)t->job.seq_len, t->job.micro_batch, t->job.grad_accum, epoch_tokens);
    printf("%5s %10s %7s %5s", "GPUs", "tok/s/GPU", "GPU-h", "eff");
    for (int k = 0; k < ZT_SHARD_NCHOICES; k++) printf(" | %-6s %9s %7s %6s %5s", zt_shard_names[k], "tok/s/GPU", "error",
                                                       "GPU-h", "mem");
    printf("\n");
    int ok[ZT_SHARD_NCHOICES] = {1, 1, 1};
    char why[ZT_SHARD_NCHOICES][160] = {{0}};
    double base[ZT_SHARD_NCHOICES] = {0};
    for (int i = 0; i < ZT_FIELD_ROWS; i++) {
        const zt_field_row *f = &zt_field_table[i];
        printf("%5d %10.0f %7.1f %4.0f%%", f->world, f->tok_per_s_per_gpu, f->gpu_h_per_epoch, 100 * f->efficiency);
        for (int k = 0; k < ZT_SHARD_NCHOICES; k++) {
            zt_plan_result r;
            if (predict_at(c, g, a, t, (zt_shard_choice)k, f->world, &r) != 0) return -1;
            if (!base[k]) base[k] = r.tok_per_s_per_gpu;
            double err = r.tok_per_s_per_gpu / f->tok_per_s_per_gpu - 1;
            printf(" | %-6s %9.0f %+6.1f%% %6.1f %5s", "", r.tok_per_s_per_gpu, 100 * err,
                   epoch_tokens / r.tok_per_s_per_gpu / 3600, r.mem.fits ? "fits" : "NO");
            if (ok[k] && fabs(err) > 0.10) {
                ok[k] = 0;
                snprintf(why[k], sizeof why[k], "%d GPUs: %.0f tok/s per GPU, %+.1f%% off", f->world,
                         r.tok_per_s_per_gpu, 100 * err);
            }
            if (ok[k] && !r.mem.fits) {
                ok[k] = 0;
                snprintf(why[k], sizeof why[k], "%d GPUs: needs %.0f GB per GPU, %.0f GB usable%s", f->world,
                         r.mem.total / 1e9, r.mem.usable / 1e9,
                         k != ZT_SHARD_NOSYNC       ? ""
                         : t->job.accum_bytes == 2 ? ", with a bf16 unsharded gradient"
                                                   : ", with an fp32 unsharded gradient; try --accum-dtype bf16");
            }
        }
        printf("\n");
    }
    printf("consistent with the field table (every size within 10%% and fits in memory):");
    int any = 0;
    for (int k = 0; k < ZT_SHARD_NCHOICES; k++)
        if (ok[k]) printf("%s %s", any++ ? "," : "", zt_shard_names[k]);
    printf("%s\n", any ? "" : " none");
    for (int k = 0; k < ZT_SHARD_NCHOICES; k++)
        if (!ok[k]) printf("not consistent: %s (%s)\n", zt_shard_names[k], why[k]);
    printf("at 4 and 8 GPUs (one node) hsdp is full shard; at 16 they differ in where the gradient crosses nodes.\n");
    return 0;
}

static int parse_worlds(const char *s, int *out, int max, int *n) {
    *n = 0;
    const char *p = s;
    while (*p) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p || v < 1 || v > 1 << 20 || (*end && *end != ','))
            return zt_err("--worlds: '%s' is not a comma-separated list of GPU counts (at position %d)", s,
                          (int)(p - s) + 1);
        if (*n == max) return zt_err("--worlds: at most %d entries", max);
        out[(*n)++] = (int)v;
        p = *end ? end + 1 : end;
    }
    if (*n == 0) return zt_err("--worlds: empty list");
    return 0;
}

// `plan --from-run RUN`: the run's measured MFU in place of the assumption, and the planner's
// step time at the run's own W against the measured one. The planner's compute time is the
// field convention's FLOPs at mfu x peak, so the MFU it takes is the one that reproduces the
// run's measured compute time: tokens x F_field / (peak x compute_s). On a device that is no
// preset (a cpu run) the planner's links describe nothing there: the measured comm wait is
// taken as the exposed communication, and the update is inside the measured compute.
// Returns the exit status; *go_on when the usual output (the scaling table) follows with it.
static int plan_from_run(const plan_flags *f, zt_plan_assumptions *a, zt_model_config *cfg, zt_gpu_spec *g,
                         job_tmpl *t, int *go_on) {
    zt_plan_run run;
    *go_on = 0;
    if (zt_plan_read_run(f->from_run, &run) != 0) {
        fprintf(stderr, "zerotrain: error: %s\n", zt_errmsg());
        return 2;
    }
    if (!isfinite(run.peak_flops) || !(run.peak_flops > 0)) {
        fprintf(stderr, "zerotrain: error: --from-run %s: the run has no peak to measure MFU against (%s); run it "
                        "with --peak-tflops\n", f->from_run, run.peak_source[0] ? run.peak_source : "none recorded");
        return 2;
    }
    if (!isfinite(run.compute_s) || !(run.compute_s > 0)) {
        fprintf(stderr, "zerotrain: error: --from-run %s: metrics.jsonl has no compute_s\n", f->from_run);
        return 2;
    }
    *cfg = run.cfg;
    const char *preset = NULL;
    const int is_preset = !strcmp(run.backend, "cuda") && zt_device_peak(run.device, &preset, NULL);
    if (zt_gpu_preset(is_preset ? preset : f->gpu, g) != 0) {
        fprintf(stderr, "zerotrain: error: %s\n", zt_errmsg());
        return 2;
    }
    g->peak_flops = run.peak_flops;
    if (!is_preset) {
        snprintf(g->name, sizeof g->name, "%.63s", run.device);
        if (g->gpus_per_node < run.world) g->gpus_per_node = run.world;  // one machine: no node boundary to model
        snprintf(g->source, sizeof g->source, "the run's device (%s peak); its links are not modelled",
                 run.peak_kind);
    } else {
        size_t k = strlen(g->source);
        snprintf(g->source + k, sizeof g->source - k, "; peak as the run measured MFU against it");
    }
    // Each rank computed its share of its blocks: under --context-parallel C the W / C data-parallel
    // ranks' blocks are split C ways, so a rank's tokens are the step's tokens over W (engine/job_shape.h)
    const int C = run.context_parallel, G = run.shard_group;
    const double tokens = (double)zt_tokens_per_step(run.world, C, run.micro_batch, run.grad_accum, run.seq_len) /
                          run.world;
    const double f_field = zt_plan_flops_per_token(cfg, run.seq_len);
    a->mfu = tokens * f_field / (run.peak_flops * run.compute_s);
    t->job = (zt_plan_job){.micro_batch = run.micro_batch, .grad_accum = run.grad_accum, .seq_len = run.seq_len,
                           .shard_group = f->shard_group > 0 ? f->shard_group : G < run.world ? G : 0,
                           .reduce_bytes = f->reduce_bytes, .accum_bytes = f->accum_bytes, .recompute = run.recompute,
                           .param_bytes = f->param_bytes, .keep_gathered = !f->reshard_after_forward,
                           .colls = (zt_plan_colls)f->colls, .context_parallel = C > 1 ? C : 0};
    t->global_batch = 0;
    zt_plan_job j = t->job;
    j.world = run.world;
    j.choice = G < run.world ? ZT_SHARD_HSDP : ZT_SHARD_FULL;  // the run's own sharding
    j.shard_group = G < run.world ? G : 0;
    zt_plan_result r;
    if (zt_plan_predict(cfg, g, a, &j, &r) != 0) {  // before any output: a refused job prints nothing
        fprintf(stderr, "zerotrain: error: %s\n", zt_errmsg());
        return 2;
    }
    char shape[160] = "";
    if (G < run.world) snprintf(shape, sizeof shape, ", shard group %d x %d replicas", G, run.world / G);
    if (C > 1) {
        const size_t n = strlen(shape);
        snprintf(shape + n, sizeof shape - n, ", context parallel %d (%d data-parallel ranks, each rank 1/%d of each "
                 "block)", C, zt_data_parallel_ranks(run.world, C), C);
    }
    printf("from run %s (%s): %s backend on %s, %d rank%s%s, micro-batch %d x grad-accum %d x seq %lld: %.0f tokens per "
           "rank per step%s%s\n",
           f->from_run, run.run_id, run.backend, run.device, run.world, run.world == 1 ? "" : "s", shape,
           run.micro_batch, run.grad_accum, (long long)run.seq_len, tokens, run.isolated ? ", isolated documents" : "",
           run.recompute ? ", --recompute" : "");
    printf("measured (rank 0, the mean of steps %lld..%lld%s):\n", (long long)run.first_step,
           (long long)run.last_step, run.first_step > 1 ? "; step 1, with the warm-up, left out" : "");
    printf("  step %.6g s = compute %.6g s + comm wait %.6g s (%.1f%% of the step)\n", run.step_s, run.compute_s,
           run.comm_wait_s, 100 * run.comm_wait_s / run.step_s);
    if (isfinite(run.mfu))
        printf("  MFU %.2f%% (model FLOPs of model/flops.h, %.4g TFLOP/s per rank) over the whole step\n",
               100 * run.mfu, run.tflops_per_rank);
    printf("  peak %.4g TFLOP/s per rank: %s\n", run.peak_flops / 1e12, run.peak_source);
    zt_plan_assumptions def;
    zt_plan_assumptions_default(&def);
    printf("the planner's MFU: %.2f%% (in place of the %.2f assumption) = tokens x %.4g FLOP/token (6 N + 12 L S d, "
           "the field convention its compute time uses) / (peak x measured compute %.6g s)\n",
           100 * a->mfu, def.mfu, f_field, run.compute_s);
    if (a->mfu > 1)
        fprintf(stderr, "zerotrain: warning: --from-run: the run computed faster than its peak allows (MFU %.2f > 1 "
                        "in the field convention): the peak it measured against (%s) is too low\n", a->mfu,
                run.peak_source);
    const double comm = is_preset ? r.t_exposed_comm : run.comm_wait_s;
    const double opt = is_preset ? r.t_optimizer : 0;
    const double pred = r.t_compute + comm + opt;
    printf("predicted against measured at W = %d (%s, as the run trained):\n", run.world,
           G < run.world ? "hsdp" : "full shard");
    printf("  %-16s %12.6g s   measured %.6g s\n", "compute", r.t_compute, run.compute_s);
    printf("  %-16s %12.6g s   measured comm wait %.6g s%s\n", "exposed comm", comm, run.comm_wait_s,
           is_preset ? " (the planner's collective model)" : " (taken from the run: the planner models GPU links)");
    printf("  %-16s %12.6g s   %s\n", "optimizer", opt,
           is_preset ? "(HBM bound; the run counts it in its compute time)" : "(inside the measured compute here)");
    printf("  %-16s %12.6g s   measured %.6g s: %+.1f%%\n", "step", pred, run.step_s, 100 * (pred / run.step_s - 1));
    if (!is_preset) {
        printf("the run's device is no GPU preset: its MFU says nothing about a GPU, so no scaling is extrapolated "
               "from it\n");
        return 0;
    }
    *go_on = 1;
    return 0;
}

// The --device plans' common start: the model's config, the mesh (W ranks, shard group G, context
// parallelism C). 0, or the exit code (2: G does not divide W).
static int plan_device_start(const plan_flags *f, zt_model_config *cfg, int *W, int *G, int *C) {
    if (zt_model_config_load(cfg, f->model) != 0) zt_die_on_err();
    *W = f->world, *G = f->shard_group > 0 ? f->shard_group : *W, *C = f->context_parallel > 0 ? f->context_parallel : 1;
    if (*G > *W || *W % *G) {
        fprintf(stderr, "zerotrain: error: --shard-group %d does not divide --world %d\n", *G, *W);
        return 2;
    }
    return 0;
}

static void print_model_line(const plan_flags *f, const zt_model_config *cfg) {
    printf("model: %s (%s): %d layers, hidden %lld, vocab %lld, %lld parameters\n", cfg->family->title, f->model,
           cfg->num_layers, (long long)cfg->hidden_size, (long long)cfg->vocab_size,
           (long long)zt_model_param_count(cfg));
}

// --device cpu: the CPU engine's bytes per rank (engine/rank_memory.c zt_rank_memory_cpu), which
// run.json's memory_per_rank_bytes of a `train --device cpu` run with the same job equals.
static int plan_cpu(const plan_flags *f) {
    if (!f->model) {
        fprintf(stderr, "zerotrain: error: --device cpu needs --model CONFIG.json|HF_DIR\n");
        return 2;
    }
    if (f->field || f->from_run) {
        fprintf(stderr, "zerotrain: error: --device cpu plans a model's memory on CPU ranks: give it without "
                        "--field or --from-run\n");
        return 2;
    }
    zt_model_config cfg;
    int W, G, C;
    const int rc = plan_device_start(f, &cfg, &W, &G, &C);
    if (rc) return rc;
    const zt_rank_memory_job job = {.shard_group = G, .micro_batch = f->micro_batch, .seq_len = f->seq_len,
                                    .reduce_bytes = 4, .param_bytes = 4, .keep_gathered = !f->reshard_after_forward,
                                    .context_parallel = C};
    zt_rank_memory m;
    if (zt_rank_memory_cpu(&cfg, &job, &m) != 0) {
        fprintf(stderr, "zerotrain: error: %s\n", zt_errmsg());
        return 2;
    }
    const double MiB = 1024.0 * 1024.0;
    print_model_line(f, &cfg);
    printf("cpu backend (fp32): %d rank%s, shard group %d x %d replica%s, context parallel %d, micro-batch %d x seq "
           "%lld (%s)%s\n",
           W, W == 1 ? "" : "s", G, W / G, W / G == 1 ? "" : "s", C, f->micro_batch, (long long)f->seq_len,
           C > 1 ? "each rank holds its share of each block" : "whole blocks",
           f->reshard_after_forward ? "" : ", keep-gathered");
    printf("memory per rank (MiB; bytes as `train --device cpu` allocates them, run.json memory_per_rank_bytes):\n");
    printf("  %-66s %10.1f   (%.0f bytes)\n", "parameters (fp32 master shard)", m.params / MiB, m.params);
    printf("  %-66s %10.1f   (%.0f bytes)\n", "gradients (fp32 shard)", m.grads / MiB, m.grads);
    printf("  %-66s %10.1f   (%.0f bytes)\n", "optimizer (Adam m, v in fp32)", m.optimizer / MiB, m.optimizer);
    printf("  %-66s %10.1f   (%.0f bytes)\n", G == 1 ? "gradient buffers (a shard group of one gathers nothing)"
                                       : "gathered-unit, full-gradient and receive buffers", m.buffers / MiB, m.buffers);
    printf("  %-66s %10.1f   (%.0f bytes)\n", C > 1 ? "activations + workspaces (with the block's K|V for the split)"
                                      : "activations + workspaces", m.activations / MiB, m.activations);
    printf("  %-66s %10.1f   (%.0f bytes)\n", "total", m.total / MiB, m.total);
    printf("not counted: the process itself (code, libraries, MPI: tens of MiB), the data loader and the sgemm's "
           "and attention's per-thread panels (under a MiB per thread at these shapes)\n");
    return 0;
}

// --device cuda: the GPU engine's device bytes per rank (engine/rank_memory.c zt_rank_memory_cuda, the
// family's counts through the CUDA module), which run.json's memory_per_rank_bytes of a
// `train --device cuda` run with the same job equals.
static int plan_cuda(const plan_flags *f) {
    if (!f->model || f->field || f->from_run) {
        fprintf(stderr, "zerotrain: error: --device cuda plans a model's memory on the GPU engine: give it --model "
                        "CONFIG.json|HF_DIR, without --field or --from-run\n");
        return 2;
    }
    zt_model_config cfg;
    int W, G, C;
    const int rc = plan_device_start(f, &cfg, &W, &G, &C);
    if (rc) return rc;
    const int attention = f->attention == ZT_ATTN_SCRATCH_TILED ? ZT_ATTN_SCRATCH_TILED : ZT_ATTN_SCRATCH_GEMM;
    const zt_rank_memory_job job = {.shard_group = G, .micro_batch = f->micro_batch, .seq_len = f->seq_len,
                                    .reduce_bytes = 4, .keep_gathered = !f->reshard_after_forward,
                                    .recompute = f->recompute, .context_parallel = C, .attention = attention,
                                    .grad_accum = f->grad_accum};
    zt_rank_memory m;
    if (zt_rank_memory_cuda(&cfg, &job, &m) != 0) {
        fprintf(stderr, "zerotrain: error: %s\n", zt_errmsg());
        return 2;
    }
    const double MiB = 1024.0 * 1024.0;
    print_model_line(f, &cfg);
    printf("cuda backend (bf16 gathers, fp32 state): %d rank%s, shard group %d x %d replica%s, context parallel %d, "
           "micro-batch %d x grad-accum %d x seq %lld, %s attention%s%s\n",
           W, W == 1 ? "" : "s", G, W / G, W / G == 1 ? "" : "s", C, f->micro_batch, f->grad_accum,
           (long long)f->seq_len, attention == ZT_ATTN_SCRATCH_TILED ? "tiled" : "gemm",
           f->recompute ? ", recompute" : "", f->reshard_after_forward ? "" : ", keep-gathered");
    printf("device memory per rank (MiB; bytes as `train --device cuda` asks cudaMalloc for them, run.json "
           "memory_per_rank_bytes):\n");
    const struct {
        const char *label;
        double v;
    } rows[] = {
        {"parameters (fp32 master + bf16 all-gather shard)", m.params},
        {"gradients (fp32 shard)", m.grads},
        {"optimizer (Adam m, v in fp32)", m.optimizer},
        {"buffers (bf16 gathered units, fp32 unit gradients + receive shards)", m.buffers},
        {"activations (the family's passes, staged ids, targets, positions)", m.activations},
        {"context (the split's gathered K|V and whole-block buffers)", m.context},
        {"scratch (the op layer's arena, reserved at start for the largest op)", m.scratch},
        {"workspace (cuBLASLt)", m.workspace},
        {"total", m.total},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
        printf("  %-72s %10.1f   (%.0f bytes)\n", rows[i].label, rows[i].v / MiB, rows[i].v);
    printf("not counted: the CUDA context, cuBLASLt's and NCCL's own memory, the allocator's rounding (train warns "
           "when an op grows the scratch arena past its reservation)\n");
    return 0;
}

// A flag left at its default of -1 keeps the preset's value.
static void override(double *dst, double v, double scale) {
    if (v >= 0) *dst = v * scale;
}

int zt_cmd_plan(int argc, char **argv) {
    char names[128];
    zt_gpu_preset_names(names, sizeof names);
    snprintf(gpu_help, sizeof gpu_help, "%s (default {default})", names);
    plan_flags f;
    const int prc = zt_flags_parse("plan", flags, &f, argc, argv, synopsis, NULL);
    if (prc) return prc == 1 ? 0 : 2;
    if (f.device_cpu == 1) return plan_cpu(&f);
    if (f.device_cpu == 2) return plan_cuda(&f);
    const char *model = f.model, *gpu_name = f.gpu, *gpu_file = f.gpu_file, *worlds_s = f.worlds;
    const int field = f.field, world = f.world;
    const double epoch_tokens = f.epoch_tokens;
    const double ov[6] = {f.peak_tflops, f.hbm_gb, f.hbm_tbps, f.nvlink_gbps, f.net_gbps, f.gpus_per_node};
    job_tmpl t = {.job = {.micro_batch = f.micro_batch, .grad_accum = f.grad_accum, .seq_len = f.seq_len,
                          .shard_group = f.shard_group, .reduce_bytes = f.reduce_bytes, .accum_bytes = f.accum_bytes,
                          .recompute = f.recompute, .param_bytes = f.param_bytes,
                          .keep_gathered = !f.reshard_after_forward, .colls = (zt_plan_colls)f.colls,
                          .context_parallel = f.context_parallel, .attention = f.attention},
                  .global_batch = f.global_batch};
    zt_plan_assumptions a;
    zt_plan_assumptions_default(&a);
    override(&a.mfu, f.mfu, 1);
    override(&a.nvlink_eff, f.nvlink_eff, 1);
    override(&a.net_eff, f.net_eff, 1);
    override(&a.alpha_nvlink, f.alpha_nvlink_us, 1e-6);
    override(&a.alpha_net, f.alpha_net_us, 1e-6);
    override(&a.hbm_eff, f.hbm_eff, 1);
    override(&a.mem_usable, f.mem_usable, 1);
    int shard = -2;  // -1: all
    for (int k = 0; k < ZT_SHARD_NCHOICES; k++)
        if (!strcmp(f.shard, zt_shard_names[k])) shard = k;
    if (!strcmp(f.shard, "all")) shard = -1;
    if (shard == -2) {
        fprintf(stderr, "zerotrain: error: --shard: '%s' is not one of full, nosync, hsdp, all\n", f.shard);
        return 2;
    }
    if (f.from_run && (model || field)) {
        fprintf(stderr, "zerotrain: error: --from-run takes the model from the run: give it without --model or "
                        "--field\n");
        return 2;
    }
    // the scaling table's world sizes and sharding choices, for --from-run and a model alike
    int worlds[64], nw;
    if (parse_worlds(worlds_s, worlds, 64, &nw) != 0) {
        fprintf(stderr, "zerotrain: error: %s\n", zt_errmsg());
        return 2;
    }
    int choices[ZT_SHARD_NCHOICES], nch = 0;
    for (int k = 0; k < ZT_SHARD_NCHOICES; k++)
        if (shard < 0 || shard == k) choices[nch++] = k;
    if (f.from_run) {
        zt_model_config cfg;
        zt_gpu_spec g;
        int go_on;
        const int rc = plan_from_run(&f, &a, &cfg, &g, &t, &go_on);
        if (rc || !go_on) return rc;
        printf("\n");
        print_header(f.from_run, &cfg, &g, &a, t.job.seq_len);
        print_scaling(&cfg, &g, &a, &t, worlds, nw, choices, nch, epoch_tokens);
        return 0;
    }
    if (!model && !field) {
        fprintf(stderr, "zerotrain: error: no model: give --model CONFIG.json|HF_DIR, --field for the field "
                        "report's Qwen3-32B, or --from-run RUN\n");
        return 2;
    }

    zt_model_config cfg;
    if (model) {
        if (zt_model_config_load(&cfg, model) != 0) zt_die_on_err();
    } else {
        if (zt_model_preset("qwen3-32b", &cfg) != 0) zt_die_on_err();
    }
    zt_gpu_spec g;
    if ((gpu_file ? zt_gpu_spec_load(gpu_file, &g) : zt_gpu_preset(gpu_name, &g)) != 0) {
        fprintf(stderr, "zerotrain: error: %s\n", zt_errmsg());
        return 2;
    }
    int overridden = 0;
    if (ov[0] > 0) g.peak_flops = ov[0] * 1e12, overridden = 1;
    if (ov[1] > 0) g.hbm_bytes = ov[1] * 1e9, overridden = 1;
    if (ov[2] > 0) g.hbm_bw = ov[2] * 1e12, overridden = 1;
    if (ov[3] > 0) g.nvlink_bw = ov[3] * 1e9, overridden = 1;
    if (ov[4] > 0) g.net_bw = ov[4] * 1e9, overridden = 1;
    if (ov[5] > 0) g.gpus_per_node = (int)ov[5], overridden = 1;
    if (overridden) {
        size_t k = strlen(g.source);
        snprintf(g.source + k, sizeof g.source - k, "; with command-line overrides");
    }
    if (field && model && zt_model_param_count(&cfg) != 32762123264LL)
        fprintf(stderr, "zerotrain: warning: --field compares with a Qwen3-32B run, but %s has %lld parameters\n",
                model, (long long)zt_model_param_count(&cfg));
    // Every job the breakdown and the field table predict is checked before anything is
    // printed: arguments that make one impossible are a usage error, not a half-printed plan
    // (the scaling table marks the sizes it cannot hold n/a instead).
    for (int k = 0; k < nch; k++) {
        zt_plan_result r;
        if (predict_at(&cfg, &g, &a, &t, (zt_shard_choice)choices[k], world, &r) != 0) {
            fprintf(stderr, "zerotrain: error: %s\n", zt_errmsg());
            return 2;
        }
    }
    for (int i = 0; field && i < ZT_FIELD_ROWS; i++)
        for (int k = 0; k < ZT_SHARD_NCHOICES; k++) {
            zt_plan_result r;
            if (predict_at(&cfg, &g, &a, &t, (zt_shard_choice)k, zt_field_table[i].world, &r) != 0) {
                fprintf(stderr, "zerotrain: error: --field predicts the field table's %d GPUs (%s): %s\n",
                        zt_field_table[i].world, zt_shard_names[k], zt_errmsg());
                return 2;
            }
        }

    print_header(model ? model : "built-in Qwen3-32B config", &cfg, &g, &a, t.job.seq_len);
    if (field) {
        if (print_field(&cfg, &g, &a, &t, epoch_tokens) != 0) zt_die_on_err();
    }
    for (int k = 0; k < nch; k++) {
        zt_plan_result r;
        if (predict_at(&cfg, &g, &a, &t, (zt_shard_choice)choices[k], world, &r) != 0) zt_die_on_err();  // checked above
        print_detail(&r);
        print_checkpoint(&r, &cfg, &g, f.ckpt_gbps);
    }
    print_scaling(&cfg, &g, &a, &t, worlds, nw, choices, nch, epoch_tokens);
    return 0;
}
