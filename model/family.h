// A model family as one table: what the engine, the checkpoints, the trainer and the planner
// know of a model. The engine is given a config whose `family` points here and never names a
// model: it asks the table for the unit layout, the initial values, and the passes of one unit
// on the CPU (`cpu`); the CUDA module holds the GPU passes under the same name
// (model/family_cuda.h). Qwen3 is the first table (model/qwen3.c: zt_qwen3_family).
// The config codec (config.json <-> zt_model_config) is the one part not in this table: it
// needs cJSON, which the GPU-only build lacks, so a family registers a zt_config_codec
// (model/hf_config_codec.h) in model/hf_config.c's list instead. A family's own config fields
// live in zt_model_config.own, read only by its code. docs/design.md "The model seam" is the how-to.
// defines: zt_family, zt_family_cpu, zt_family_context, zt_layer_plan, zt_family_find, zt_family_list, zt_model_preset,
//          zt_model_title, zt_model_family_name, zt_model_hf_prefix, zt_model_layer_kinds, zt_model_layer_plan
//          (model/family.c also defines the zt_model_* functions that dispatch through a config's table: zt_model_layout_init and
//          zt_model_init_unit (declared in model/layout.h), zt_model_param_count and
//          zt_model_max_positions (model/hf_config.h), the FLOP counts (model/flops.h))
#ifndef ZT_FAMILY_H
#define ZT_FAMILY_H
#include <stddef.h>
#include <stdint.h>

#include "kernels/ops.h"
#include "model/layout.h"

// Context parallelism (docs/design.md "Context parallelism"): C ranks share each block, each
// holding some of its tokens in every row of its micro-batch. What a bound model is told of the
// split, and the exchange over its context group that the engine supplies and the family's
// sequence mixing (attention) calls, in the same order on every rank of the group. The engine
// never names what is exchanged; the family never names a communicator.
typedef struct zt_family_context {
    int C, rank;           // ranks sharing each block; this rank's place among them (0..C-1)
    int64_t S;             // tokens of a whole block (RoPE's table, the keys attention ranges over)
    int64_t S_local;       // tokens of a block each rank holds: a row of the bound model (padded to it)
    const int32_t *index;  // [C * S_local]: the block position of rank r's token t of a row is
                           // index[r * S_local + t]; -1: padding (no token; nothing trains on it)
    // All-gather over the context group: all[r * n, (r + 1) * n) = rank r's mine[0, n).
    void (*gather)(void *ctx, const float *mine, float *all, int64_t n, const char *what);
    // Reduce-scatter: mine[0, n) = the sum over the group's ranks of their all[rank * n, (rank + 1) * n)
    // (rank: this rank's place). `what` names the collective in the flight recorder.
    void (*scatter)(void *ctx, const float *all, float *mine, int64_t n, const char *what);
    // All-to-all: send packs send_n[r] floats for each rank r (rank order); recv gets recv_n[r] from each
    // rank r, likewise packed. Rank a's send_n[b] equals rank b's recv_n[a]. NULL where the engine has none.
    void (*alltoall)(void *ctx, const float *send, const int64_t *send_n, float *recv, const int64_t *recv_n,
                     const char *what);
    void *ctx;
} zt_family_context;

// The CPU passes of a family on a model bound to one micro-batch shape (B rows of S tokens):
// its activations and workspaces, opaque to the engine. Units: 0 = embedding, 1..L = decoder
// layers (layer l = unit l + 1), L + 1 = the head (final norm, + lm_head when untied; tied, the
// head reads the embedding unit's matrix). p: a unit's full flat parameter vector (fp32);
// dp: its gradient, accumulated (+=). Activation gradients are assigned.
typedef struct zt_family_cpu {
    // NULL + zt_err when the shape is refused. cx NULL: whole rows of S tokens; else the model
    // holds B rows of cx->S_local tokens of blocks of S = cx->S (copied: cx need not outlive it).
    void *(*create)(const zt_model_config *c, const zt_ops *ops, int64_t B, int64_t S, const zt_family_context *cx);
    void (*destroy)(void *m);
    int64_t (*act_bytes)(const void *m);  // activations and workspaces held for one micro-batch
    // What act_bytes of a model created for B rows of blocks of S tokens would be, without creating
    // it (plan's CPU memory, engine/rank_memory.c): C > 1 with S_local the tokens a rank holds under
    // a context split of C ranks (zt_context_split's count), C = 1 with S_local = S. Optional (NULL:
    // the family cannot say); plan_cpu_memory holds it equal to what runs report.
    int64_t (*act_bytes_for)(const zt_model_config *c, int64_t B, int64_t S, int C, int64_t S_local);
    // The micro-batch the passes read next (copied): bare ids and targets [B*S]; pos: the
    // positions inside packed documents (attention stays inside each, RoPE restarts), or NULL
    // for plain causal rows. Context parallelism: [B*S_local] of the held tokens, and pos is
    // always given: each token's RoPE position (its block position, or its document position);
    // a token at block position g with position p sees keys g - p .. g.
    void (*set_batch)(void *m, const uint32_t *ids, const int32_t *targets, const int32_t *pos);
    // Called between the ops of a pass (an engine moves its pending collectives there).
    void (*set_progress)(void *m, void (*fn)(void *ctx), void *ctx);
    void (*embed_fwd)(void *m, const float *p);
    void (*layer_fwd)(void *m, int layer, const float *p);
    // Head forward (+ backward when dhead): the summed loss times nothing; gradients times
    // `scale`. emb: the embedding unit's parameters when tied (else NULL); demb: its gradient
    // slot (tied). dx: d(loss)/d(last layer's output), written.
    double (*head)(void *m, const float *p, const float *emb, float scale, float *dx, float *dhead, float *demb);
    // dx: d(loss)/d(layer output) in, d(loss)/d(layer input) out (in place).
    void (*layer_bwd)(void *m, int layer, const float *p, float *dp, float *dx);
    void (*embed_bwd)(void *m, const float *dx, float *demb);
    // Optional (tests; NULL: not offered): after the layers' forward, the logits [B*S, V] of the
    // final norm and lm_head (emb: the embedding unit's parameters when tied, else NULL).
    void (*logits)(void *m, const float *p, const float *emb, float *out);
} zt_family_cpu;

// The planner's view of one kind of decoder layer (engine/rank_memory.c's memory, ops/plan.c's
// step time; docs/plan.md "Memory per GPU"). The counts are of what the family's passes keep from a
// layer's forward to its backward, split by the dtype the GPU plan gives them: `values` in the
// activation dtype (bf16 in the plan: the matmul, norm and mixing outputs, the layer's input),
// `stats` in fp32 (norm statistics, gates, a flash softmax's log-sum-exp). A layer of this kind on B
// rows of S tokens keeps B S (2 values + 4 stats) + 4 B row_stats bytes in the plan.
typedef struct {
    char name[128];    // "attention", "linear attention (Gated DeltaNet, ...)": plan's header
    double values;     // elements per token in the activation dtype (the layer's input included)
    double stats;      // fp32 elements per token
    double row_stats;  // fp32 elements per row of S tokens (Qwen3.5: the delta rule's chunk states)
    double work;       // elements per token of one layer's activation gradients while its backward runs
    double flops;      // training FLOPs (model/flops.h's convention) of one such layer on one row of S tokens
    int attention;     // 1: softmax attention over the S keys (the attention scratch, the context K/V)
} zt_layer_plan;

// The planner's view of a family's context split on the GPU beyond the attention layers' K/V exchange
// (zt_family.context_plan; Qwen3.5: its Gated DeltaNet layers' head sharding, model/qwen3_5_cuda_context.c),
// per rank of a split of C ranks, B rows of blocks of S tokens.
typedef struct {
    double bytes;           // device bytes of the split's buffers (the layers' block tensors and workspaces)
    double ag_fwd, rs_fwd;  // one such layer's forward all-gather (bytes gathered: the group's rows, bf16) and
                            // reduce-scatter (bytes of its input: the block's rows, fp32), per micro-batch
    double ag_bwd, rs_bwd;  // the same in its backward
} zt_context_split_plan;

// zt_family.context_parallel's bits.
#define ZT_CONTEXT_CPU 1
#define ZT_CONTEXT_GPU 2

// Kinds a family's decoder layers may have (zt_family.layer_kind's range).
#define ZT_LAYER_KINDS 4

struct zt_family {
    const char *name;        // "qwen3": messages, and the GPU passes' name in the CUDA module
    const char *title;       // how a person's messages name it: "Qwen3", "Qwen3.5" (plan's header too)
    const char *model_type;  // Hugging Face config.json model_type
    // units: the layout (which tensors, in which unit, at which offset) and the initial values
    int (*layout_init)(zt_model_layout *lay, const zt_model_config *c);
    void (*init_unit)(const zt_model_layout *lay, int unit, float *params, uint64_t seed);
    // counts (-1: overflow) and the positions its RoPE covers
    int64_t (*param_count)(const zt_model_config *c);
    int64_t (*max_positions)(const zt_model_config *c);
    // FLOPs (model/flops.h's convention: forward + backward): the matmul FLOPs of one trained
    // token, the sequence-mixing FLOPs of documents whose lengths squared sum to sum_sq, and
    // what --recompute adds (one more forward of every layer)
    double (*flops_matmul_per_token)(const zt_model_config *c);
    double (*flops_mixing)(const zt_model_config *c, double sum_sq);
    double (*recompute_flops)(const zt_model_config *c, double tokens, double sum_sq);
    // the planner: which kind decoder layer `layer` is (0 .. ZT_LAYER_KINDS - 1), and that kind's
    // counts for rows of S tokens (zt_layer_plan)
    int (*layer_kind)(const zt_model_config *c, int layer);
    void (*layer_plan)(const zt_model_config *c, int kind, int64_t S, zt_layer_plan *out);
    const zt_family_cpu *cpu;
    // Tensors of a Hugging Face checkpoint this family keeps but does not train (Qwen3.5: "mtp.",
    // "model.visual."): names starting with one of these prefixes (NULL-terminated; NULL: none)
    // are carried bit-identically from --init to export and RUN/final.
    const char *const *carry_prefixes;
    // Optional (NULL: none): the names of the n tensors of a checkpoint it carries, against the config
    // (Qwen3.5: the MTP head's layers against mtp_num_hidden_layers), so that what is carried to export
    // is what the config says it is. 0, or -1 + zt_err naming the tensor and the field.
    int (*check_carried)(const zt_model_config *c, const char *const *names, int n);
    // Its Hugging Face name adapter (torchtitan's state-dict adapter): the prefix that a checkpoint
    // of config c puts in place of a layout name's leading "model." (Qwen3.5 read from a
    // Qwen3_5ForConditionalGeneration config: "model.language_model."; "lm_head.weight" stays at
    // the top level), or NULL: the checkpoint's names are the layout's. NULL function: never.
    // checkpoint/ maps names only through zt_model_hf_prefix (model/family.c).
    const char *(*hf_prefix)(const zt_model_config *c);
    // Which passes' `create` take a zt_family_context (--context-parallel): ZT_CONTEXT_CPU | ZT_CONTEXT_GPU
    // (Qwen3, Qwen3.5); 0: none, refused at start
    // (engine/job_shape.c's zt_context_check), the refusal naming what is missing, e.g.
    // context_parallel_missing (NULL: nothing named).
    int context_parallel;
    const char *context_parallel_missing;
    // Optional (NULL: none): the family's own rule for a split of C ranks of a config (Qwen3.5: C at most
    // its value heads): 0, or -1 + zt_err with the rule and the numbers (engine/job_shape.c calls it).
    int (*context_rule)(const zt_model_config *c, int C);
    // Optional (NULL: none): the rule its GPU passes add (Qwen3.5: C divides its key heads), called after
    // context_rule where the GPU passes run the split (zt_context_job.gpu).
    int (*context_rule_gpu)(const zt_model_config *c, int C);
    // Optional (NULL: only the attention layers' K/V exchange): what the GPU passes' split of C ranks adds for
    // the layers that are not softmax attention (zt_layer_plan.attention 0), in the plan's terms. 0, or -1 +
    // zt_err (the rules above).
    int (*context_plan)(const zt_model_config *c, int C, int64_t B, int64_t S, int recompute,
                        zt_context_split_plan *out);
    // What a checkpoint of this family must agree on beyond the fields every family has (resume
    // compares the checkpoint's config `a` with the run's `b`): appends to out (NUL-terminated, n
    // bytes), which holds k phrases already, one "; "-separated phrase per difference ("checkpoint
    // has X, the run has Y"), and returns k plus their count. NULL: nothing more.
    int (*config_diff)(const zt_model_config *a, const zt_model_config *b, char *out, size_t n, int k);
    // How many decoder layers of each kind, for the start line ("48 linear + 16 full"), into out;
    // NULL or "": one kind, nothing said.
    void (*layer_mix)(const zt_model_config *c, char *out, size_t n);
    // 1: a checkpoint keeps the family's whole config.json (a family whose fields the checkpoint's
    // fixed attributes do not cover); 0: those attributes are the whole config (Qwen3).
    int ckpt_config_json;
};

// Decoder layers of a config by kind (through its table): n[k] layers of kind k; returns the number
// of kinds present (a kind with n[k] = 0 is absent).
int zt_model_layer_kinds(const zt_model_config *c, int n[ZT_LAYER_KINDS]);
void zt_model_layer_plan(const zt_model_config *c, int kind, int64_t S, zt_layer_plan *out);

// Every family this build knows (NULL-terminated), and one by model_type (NULL: none).
const zt_family *const *zt_family_list(void);
const zt_family *zt_family_find(const char *model_type);
// The title of a config's family ("Qwen3" for a config built by hand without a table).
static inline const char *zt_model_title(const zt_model_config *c) {
    return c->family && c->family->title ? c->family->title : "Qwen3";
}
// The name of a config's family ("qwen3" for a config built by hand without a table): what a
// checkpoint's family check compares.
static inline const char *zt_model_family_name(const zt_model_config *c) {
    return c->family && c->family->name ? c->family->name : "qwen3";
}
// The family's checkpoint-name prefix for config c (zt_family.hf_prefix), or NULL.
const char *zt_model_hf_prefix(const zt_model_config *c);
// A built-in config by name ("qwen3-32b": what `plan` shows without --model): 0, or -1 + zt_err.
int zt_model_preset(const char *name, zt_model_config *c);

#endif
