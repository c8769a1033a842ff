// `zerotrain plan`: an analytic model of one FSDP training step on GPUs. Given a
// model config (any family: its layer kinds, model/family.h), a GPU description and a world size it predicts per-GPU memory and
// the step time (compute, each collective over NVLink or the network, and how much
// of it hides behind compute) for three sharding choices. The step is simulated
// unit by unit on two queues (compute, communication) in the order the zerotrain
// engine issues its work (engine/fsdp.c). docs/plan.md states every assumption.
// defines: zt_gpu_spec, zt_plan_assumptions, zt_plan_job, zt_plan_result, zt_plan_*
#ifndef ZT_PLAN_H
#define ZT_PLAN_H
#include <stddef.h>
#include <stdint.h>

#include "model/config.h"
#include "model/family.h"

typedef struct {
    char name[64];
    double peak_flops;  // dense bf16 FLOP/s (no sparsity)
    double hbm_bytes;   // nominal HBM capacity (decimal bytes, as sold)
    double hbm_bw;      // HBM bytes/s
    double nvlink_bw;   // NVLink bytes/s per GPU, one direction
    double net_bw;      // scale-out network bytes/s per GPU (its own NIC), one direction
    int gpus_per_node;
    char source[256];   // where the numbers come from
} zt_gpu_spec;

// Efficiencies and latencies that turn line rates into achieved times.
typedef struct {
    double mfu;           // achieved fraction of peak_flops while computing, against the FLOP count
                          // of zt_plan_flops_per_token (the field convention)
    double nvlink_eff;    // achieved ring bus bandwidth / NVLink line rate
    double net_eff;       // achieved ring bus bandwidth / NIC line rate
    double alpha_nvlink;  // seconds per ring step inside a node
    double alpha_net;     // seconds per ring step that crosses nodes
    double hbm_eff;       // achieved fraction of HBM bandwidth (optimizer step)
    double mem_usable;    // fraction of HBM a job can hold (context, NCCL buffers, fragmentation)
} zt_plan_assumptions;

typedef enum {
    ZT_SHARD_FULL = 0,    // ZeRO-3: gather for forward and again for backward, reduce-scatter every micro-batch
    ZT_SHARD_NOSYNC = 1,  // ZeRO-3 params, but gradients accumulate unsharded; one reduce-scatter per step
    ZT_SHARD_HSDP = 2,    // full shard inside a group of shard_group GPUs (a node), replicas across groups,
                          // one all-reduce of the gradient shards across replicas per step
    ZT_SHARD_NCHOICES = 3
} zt_shard_choice;

// The collective algorithms whose bytes cross the node link. NCCL: rings (and trees for all-reduce,
// whose bytes per rank match the ring's). MPI: Open MPI 4.1's non-blocking collectives (coll/libnbc,
// default selection), what the CPU engine's MPI_I* calls run: a linear all-gather (every rank sends
// its block to every other rank), reduce-scatter = a binomial-tree reduce of the whole buffer to rank
// 0 + a linear scatter, and (in place) all-reduce = a binomial reduce to rank 0 + a binomial broadcast.
typedef enum { ZT_COLLS_NCCL = 0, ZT_COLLS_MPI = 1 } zt_plan_colls;

typedef struct {
    int world;
    int micro_batch, grad_accum;
    int64_t seq_len;
    zt_shard_choice choice;
    int shard_group;      // HSDP only; 0 = min(world, gpus_per_node)
    int reduce_bytes;     // gradient reduction dtype: 4 (fp32, default) or 2 (bf16)
    int accum_bytes;      // NOSYNC's unsharded gradient accumulator: 4 (fp32; 0 means 4) or 2 (bf16)
    int recompute;        // full activation recomputation (checkpoint every decoder layer)
    int param_bytes;      // gathered parameter dtype: 2 (bf16; 0 means 2, the GPU engine) or 4 (fp32, the CPU engine)
    int keep_gathered;    // --reshard-after-forward false: no backward re-gather; every unit's gathered
                          // parameters may be resident at once (the engine's max(units, slots) buffers)
    zt_plan_colls colls;  // which algorithms carry the collectives (only the node-link bytes depend on it)
    // Context parallelism (0: not modelled, every output as before it). C >= 1: C consecutive ranks
    // of a shard group share each block, each holding S/C of its tokens; parameters, gradients and
    // Adam state stay sharded over the shard group (no per-rank state added); W/C data-parallel
    // ranks; every layer all-gathers the block's K and V over the C ranks (forward and backward)
    // and reduce-scatters dK, dV. The memory then counts the attention's scratch (`attention`).
    int context_parallel;
    int attention;        // ZT_ATTN_SCRATCH_GEMM (default with context_parallel) or _TILED (engine/rank_memory.h)
} zt_plan_job;

// Bytes held by one GPU.
typedef struct {
    double params;        // fp32 master shard + bf16 parameter shard (the all-gather source)
    double grads;         // fp32 gradient shard (+ unsharded fp32 accumulator for NOSYNC)
    double optimizer;     // fp32 Adam m and v shards
    double buffers;       // gathered-unit parameter buffers + full-unit gradient buffers
    double activations;   // saved activations of one micro-batch, with or without recompute (per job)
    double act_no_recompute, act_recompute;  // both variants, for the report
    double cp_kv, attn_gemm, attn_tiled, attention;  // job.context_parallel >= 1 (engine/rank_memory.h)
    double cp_heads;      // C > 1: the family's head-sharded layers' split buffers (engine/rank_memory.h)
    double total;
    double usable;        // hbm_bytes * mem_usable
    int fits;
} zt_plan_memory;

// ZT_COLL_CP_*: context parallelism's per-layer K/V all-gathers (forward and backward) and dK/dV
// reduce-scatters over the C ranks that share a block (count 0 without it); ZT_COLL_CP_HEADS_*: the
// head-sharded layers' (Qwen3.5's Gated DeltaNet: zt_family.context_plan) all-gathers of the projected
// rows and of the output's gradient, and reduce-scatters of the output and of the rows' gradients.
typedef enum {
    ZT_COLL_AG_FWD, ZT_COLL_AG_BWD, ZT_COLL_RS, ZT_COLL_AR_REPLICA, ZT_COLL_AR_CTRL, ZT_COLL_CP_AG, ZT_COLL_CP_RS,
    ZT_COLL_CP_HEADS_AG, ZT_COLL_CP_HEADS_RS, ZT_COLL_NKINDS
} zt_coll_kind;

typedef struct {
    int count;            // per step
    double bytes;         // bytes each GPU sends per step (ring: (n-1)/n of the full size per collective)
    double time;          // seconds the collectives occupy their queue per step
    double exposed;       // seconds of that during which compute was waiting for communication
    int over_network;     // 1 when the collective's ring crosses nodes
    double busbw;         // bytes/s bus bandwidth used
    int group;            // ranks in the collective
    double link;          // bytes per step these collectives put on the node links, all nodes' sends summed
} zt_plan_coll;

typedef struct {
    zt_plan_job job;
    int shard_group, replicas;   // effective sharding group and replica count
    int context, data_parallel;  // ranks sharing a block (1 without context parallelism) and world / context
    double cp_kv_layer;          // context parallelism: bytes of one layer's gathered K and V (bf16, the whole
                                 // micro-batch's blocks); each rank sends (C-1)/C of it per all-gather
    zt_context_split_plan cp_heads;  // the head-sharded layers' collectives per layer (zt_family.context_plan;
                                     // zeros without them)
    int cp_heads_layers;         // how many layers shard heads (Qwen3.5's linear layers under C > 1)
    double flops_per_token;      // field convention (zt_plan_flops_per_token)
    double tokens_per_gpu;       // per optimizer step (with context parallelism: its S/C share of each block)
    double t_compute;            // seconds of compute per step (all micro-batches)
    double t_optimizer;          // AdamW over this GPU's shard (HBM bound), exposed
    double t_exposed_comm;       // seconds compute waited on communication
    double t_step;
    double tok_per_s_per_gpu;
    double mfu;                  // achieved MFU over the whole step (field convention)
    zt_plan_coll coll[ZT_COLL_NKINDS];
    double node_link_bytes;      // bytes one node sends over its link to the other nodes per step (one
                                 // direction; 0 on one node). Ring model, ranks placed node by node: a ring
                                 // crosses each node boundary once, carrying what each of its ranks sends, so
                                 // a node's link carries one rank's bytes per ring that leaves it (the shard
                                 // group's ring when the group spans nodes; min(G, GPUs per node) replica rings)
                                 // -- with job.colls == ZT_COLLS_MPI: node_link_total / nodes
    double node_link_total;      // bytes all nodes send over their links per step, summed (what the sum of
                                 // every node's interface tx counter measures), for job.colls' algorithms
    zt_plan_memory mem;
} zt_plan_result;

extern const char *const zt_shard_names[ZT_SHARD_NCHOICES];
extern const char *const zt_coll_names[ZT_COLL_NKINDS];

// Presets: "B300", "B200", "H200", "H100" (case-insensitive). 0 on success.
int zt_gpu_preset(const char *name, zt_gpu_spec *out);
// Lists preset names separated by ", " into buf.
void zt_gpu_preset_names(char *buf, size_t n);
// Reads a GPU description JSON (fields as in zt_gpu_spec, bandwidths in bytes/s).
int zt_gpu_spec_load(const char *path, zt_gpu_spec *out);
void zt_plan_assumptions_default(zt_plan_assumptions *a);

// Decoder layers with softmax attention over the S keys (the family's layer kinds: Qwen3 all L,
// Qwen3.5 its full-attention layers).
int zt_plan_attention_layers(const zt_model_config *c);
// FLOPs per trained token, the field convention: 6 * N_params + 12 * L_attn * S * hidden_size
// (all parameters including the embedding, attention scores + values without causal halving,
// hidden_size rather than heads * head_dim; L_attn = zt_plan_attention_layers, L for Qwen3).
// For Qwen3-32B at S = 2048: 204.6 GFLOP.
double zt_plan_flops_per_token(const zt_model_config *c, int64_t seq_len);
// What the GPU really executes, the family's count (zt_model_train_flops over one block of S tokens):
// Qwen3 6 * (matmul parameters, no embedding lookup, no norms) + 6 * L * S * heads * head_dim
// (causal: each query sees S/2 keys on average); Qwen3.5 adds its linear layers' conv and delta rule.
double zt_plan_flops_per_token_exact(const zt_model_config *c, int64_t seq_len);
// Bytes of sharded state per parameter for a choice (18/W or 18/G, + 4 for NOSYNC's
// unsharded fp32 gradient accumulator); ignores the alignment padding.
double zt_plan_state_bytes_per_param(zt_shard_choice choice, int world, int shard_group);

// The field report (DESIGN.md): Qwen3-32B on B300s, seq 2048, micro-batch 1, grad-accum 8.
typedef struct { int world; double tok_per_s_per_gpu, gpu_h_per_epoch, efficiency; } zt_field_row;
#define ZT_FIELD_ROWS 3
#define ZT_FIELD_EPOCH_TOKENS 1.01e9
extern const zt_field_row zt_field_table[ZT_FIELD_ROWS];

// What a finished (or running) training run measured, for `plan --from-run RUN`: its shape from
// run.json, its per-step times and MFU from metrics.jsonl (means over the step lines, the first
// left out when there are more: it carries the warm-up).
typedef struct {
    zt_model_config cfg;
    char run_id[96], backend[16], device[160], peak_kind[32], peak_source[400];
    int world, micro_batch, grad_accum, recompute, isolated;
    int shard_group;             // the run's shard group G (run.json "mesh"; before it: config.settings, else W)
    int context_parallel;        // C ranks shared each block (the same; 1: none)
    int64_t seq_len;
    double peak_flops;           // per rank (NAN: the run had none)
    int steps;                   // step lines averaged
    int64_t first_step, last_step;
    double step_s, compute_s, comm_wait_s;  // rank 0's means
    double mfu, tflops_per_rank;            // the mean model_flops (model/flops.h) over the mean step
                                            // time (and the peak); NAN when not logged
} zt_plan_run;
// Reads RUN/run.json and RUN/metrics.jsonl. 0, or -1 + zt_err naming the file and what is missing.
int zt_plan_read_run(const char *run_dir, zt_plan_run *out);

// Validates job against gpu (world a multiple of gpus_per_node when larger, ...) and
// fills r. Returns -1 with zt_err naming the rule on a bad job.
int zt_plan_predict(const zt_model_config *c, const zt_gpu_spec *g, const zt_plan_assumptions *a,
                    const zt_plan_job *job, zt_plan_result *r);
#endif
