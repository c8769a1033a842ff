// `zerotrain train`: the flag table (every flag once: field, range, default, help,
// run.json setting), parsed into zt_train_opts, then the training loop.
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint/ckpt.h"
#include "checkpoint/safetensors.h"
#include "cli/args.h"
#include "cli/commands.h"
#include "cli/flags.h"
#include "cli/tables.h"
#include "base/common.h"
#include "train/train.h"

#define T zt_train_opts
static const zt_flag_choice device_choices[] = {{"auto", ZT_DEVICE_AUTO}, {"cuda", ZT_DEVICE_CUDA}, {"cpu", ZT_DEVICE_CPU}, {0}};
static const zt_flag_choice attention_choices[] = {
    {"auto", ZT_ATTN_AUTO}, {"tiled", ZT_ATTN_TILED}, {"gemm", ZT_ATTN_GEMM}, {"cudnn", ZT_ATTN_CUDNN}, {0}};
static const zt_flag_choice doc_attention_choices[] = {{"isolated", ZT_DOC_ATTN_ISOLATED}, {"full", ZT_DOC_ATTN_FULL}, {0}};
static const zt_flag_choice schedule_choices[] = {{"cosine", ZT_SCHED_COSINE}, {"constant", ZT_SCHED_CONSTANT}, {0}};
static const zt_flag_choice save_io_choices[] = {{"direct", ZT_SAVE_IO_DIRECT}, {"posix", ZT_SAVE_IO_POSIX}, {"mpiio", ZT_SAVE_IO_MPIIO}, {0}};
static const zt_flag_choice dtype_choices[] = {{"bf16", ZT_ST_BF16}, {"fp32", ZT_ST_F32}, {0}};

const zt_flag zt_train_flags[] = {
    {.type = ZT_FLAG_SECTION, .help = "data, batch and the gate (the same flags as `zerotrain preflight`):"},
    ZT_FLAGS_DATA_AND_BATCH(T),

    {.type = ZT_FLAG_SECTION, .help = "model and start:"},
    {"init", ZT_FLAG_STR, ZT_AT_STR(T, init), "PATH",
     .help = "start from Hugging Face weights (directory with model.safetensors or a sharded\n"
             "model.safetensors.index.json, or one .safetensors file); without it parameters\n"
             "are initialised like transformers (normal(0, initializer_range), norms = 1)"},
    {"overwrite", ZT_FLAG_SET, ZT_AT_INT(T, overwrite), .help = "reuse a run directory that already holds a run"},
    {"no-preflight", ZT_FLAG_CLEAR, ZT_AT_INT(T, preflight), .def = ZT_DEF_PREFLIGHT,
     .help = "skip the six-check gate (`zerotrain preflight`) that runs before training"},
    {"doc-attention", ZT_FLAG_ENUM, ZT_AT_INT(T, doc_attention), "A", .def = ZT_DOC_ATTN_DATASET,
     .choices = doc_attention_choices,
     .help = "isolated: a token attends only to earlier tokens of its own packed document\n"
             "and RoPE positions restart at 0 per document (needs a version 2 dataset,\n"
             "`pack --input chat`); full: every earlier token of the block (plain text).\n"
             "Default: what dataset.json says (isolated for chat data, else full)"},
    {"allow-new-schedule", ZT_FLAG_SET, ZT_AT_INT(T, allow_new_schedule),
     .help = "resume with another length or learning-rate schedule than the checkpoint's\n"
             "(--steps/--epochs, --lr, --min-lr-ratio, --warmup, --schedule): extends a\n"
             "finished or stopped run. The schedule is recomputed over the new total and\n"
             "the steps already taken keep their numbers (step k continues with the new\n"
             "schedule's rate at k); recorded in run.json as schedule_changed_at_step"},
    {"allow-new-data", ZT_FLAG_SET, ZT_AT_INT(T, allow_new_data),
     .help = "resume on a dataset whose files differ from the checkpoint's (recorded in\n"
             "run.json as data_changed_at_step); training continues at the checkpoint's\n"
             "step in the new data's order, whose epoch length must be the same"},

    {.type = ZT_FLAG_SECTION, .help = "validation:"},
    {"eval-data", ZT_FLAG_STR, ZT_AT_STR(T, eval_data), "DIR",
     .help = "held-out dataset (same seq_len and tokenizer): mean loss and perplexity\n"
             "over its blocks, on stdout and in metrics.jsonl (\"eval_loss\"); always\n"
             "after the last step. Never changes the training order, RNG or checkpoints"},
    {"eval-every", ZT_FLAG_I64, ZT_AT_I64(T, eval_every), "N", 0, INT64_MAX,
     .help = "also evaluate every N steps (default {default}: only at the end)"},
    {"eval-batches", ZT_FLAG_I64, ZT_AT_I64(T, eval_batches), "K", 0, INT64_MAX,
     .help = "micro-batches per rank per evaluation (default {default}: all the blocks every\n"
             "rank has, the same count on every rank: evenfix applies here too)"},

    {.type = ZT_FLAG_SECTION, .help = "length:"},
    {"steps", ZT_FLAG_I64, ZT_AT_I64(T, steps), "N", 1, INT64_MAX, .def = ZT_DEF_STEPS,
     .help = "optimizer steps (default: --epochs worth)"},
    {"epochs", ZT_FLAG_I64, ZT_AT_I64(T, epochs), "N", 1, 1000000, .def = ZT_DEF_EPOCHS,
     .help = "passes over the data (default {default}); block order is reshuffled every epoch"},

    {.type = ZT_FLAG_SECTION,
     .help = "optimizer (AdamW, torch semantics; weight decay on matrices and embeddings, not norm weights):"},
    {"seed", ZT_FLAG_U64, ZT_AT_I64(T, seed), "N", 0, INT64_MAX, .def = ZT_DEF_SEED, .setting = "seed",
     .help = "initialisation and data order (default {default})"},
    {"lr", ZT_FLAG_F64, ZT_AT_F64(T, hp.lr), "X", .fmin = 0, .fmax = 10, .def = ZT_DEF_LR, .setting = "lr",
     .help = "peak learning rate (default {default})"},
    {"min-lr-ratio", ZT_FLAG_F64, ZT_AT_F64(T, hp.min_lr_ratio), "R", .fmin = 0, .fmax = 1, .def = ZT_DEF_MIN_LR_RATIO,
     .setting = "min_lr_ratio", .help = "cosine floor as a fraction of --lr (default {default})"},
    {"warmup", ZT_FLAG_I64, ZT_AT_I64(T, hp.warmup), "N", 0, INT64_MAX, .def = ZT_DEF_WARMUP, .setting = "warmup",
     .help = "linear warmup steps (default {default})"},
    {"schedule", ZT_FLAG_ENUM, ZT_AT_INT(T, hp.schedule), "S", .def = ZT_SCHED_COSINE, .choices = schedule_choices,
     .setting = "schedule", .help = "cosine or constant (default {default})"},
    {"beta1", ZT_FLAG_F64, ZT_AT_F64(T, hp.beta1), "X", .fmin = 0, .fmax = 0.999999, .def = ZT_DEF_BETA1,
     .setting = "beta1", .help = "(default {default})"},
    {"beta2", ZT_FLAG_F64, ZT_AT_F64(T, hp.beta2), "X", .fmin = 0, .fmax = 0.999999999, .def = ZT_DEF_BETA2,
     .setting = "beta2", .help = "(default {default})"},
    {"adam-eps", ZT_FLAG_F64, ZT_AT_F64(T, hp.eps), "X", .fmin = 1e-30, .fmax = 1, .def = ZT_DEF_ADAM_EPS,
     .setting = "eps", .help = "(default {default})"},
    {"weight-decay", ZT_FLAG_F64, ZT_AT_F64(T, hp.weight_decay), "X", .fmin = 0, .fmax = 10, .def = ZT_DEF_WEIGHT_DECAY,
     .setting = "weight_decay", .help = "(default {default})"},
    {"clip", ZT_FLAG_F64, ZT_AT_F64(T, hp.clip), "X", .fmin = 0, .fmax = 1e30, .def = ZT_DEF_CLIP, .setting = "clip",
     .help = "max global gradient norm; 0 disables (default {default})"},

    {.type = ZT_FLAG_SECTION, .help = "checkpoints (RUN/checkpoints/step-NNNNNNNN/, parallel HDF5; docs/checkpoint-format.md):"},
    {"save-every", ZT_FLAG_I64, ZT_AT_I64(T, save_every), "N", 0, INT64_MAX,
     .help = "also checkpoint every N steps (always: each epoch end, the last step, and\n"
             "on SIGUSR1/SIGTERM to any rank, after which the job exits 0)"},
    {"async-save", ZT_FLAG_SET, ZT_AT_INT(T, async_save),
     .help = "write checkpoints in the background: every rank copies its shards to a host\n"
             "snapshot, training goes on, the save commits at a later step boundary (one in\n"
             "flight at a time; the last step's and a stop's save stay synchronous); needs\n"
             "MPI_THREAD_MULTIPLE and (cpu backend) host memory for a copy of this rank's\n"
             "master, m and v; the cuda backend copies into its page-locked host copies on a\n"
             "stream of its own"},
    {"save-io", ZT_FLAG_ENUM, ZT_AT_INT(T, save_io), "M", .def = ZT_DEF_SAVE_IO, .choices = save_io_choices,
     .help = "how a save writes the datasets' bytes (the file is the same either way):\n"
             "direct (default): every rank writes its own slices at their file offsets,\n"
             "whole 4 KiB blocks with O_DIRECT (no page-cache copy; pwrite where the file\n"
             "system refuses it); posix: the same through the page cache; mpiio: HDF5's\n"
             "collective MPI-IO write"},
    {"resume", ZT_FLAG_OPTSTR, ZT_AT_STR(T, resume), "[PATH|auto]", .bare = "latest",
     .help = "continue from RUN/checkpoints/latest, or from the checkpoint PATH; `auto`\n"
             "(requeued jobs): the newest checkpoint that reads, a fresh start only when RUN\n"
             "holds no checkpoint at all, else a refusal naming them; the same\n"
             "world size continues bit-for-bit, another one reshards (fp32 tolerance);\n"
             "the model config, global batch/schedule and dataset must match the checkpoint"},
    {"trace-blocks", ZT_FLAG_SET, ZT_AT_INT(T, trace_blocks),
     .help = "write every rank's block ids per step to RUN/ranks/rank-N.blocks (debugging)"},
    {"debug-signal-at-step", ZT_FLAG_I64, ZT_AT_I64(T, debug_signal_at_step), "K", 1, INT64_MAX,
     .help = "rank 0 raises SIGUSR1 during step K (testing the graceful stop)"},
    {"debug-signal-in-eval", ZT_FLAG_I64, ZT_AT_I64(T, debug_signal_in_eval), "M", 1, INT64_MAX,
     .help = "the last rank raises SIGUSR1 before micro-batch M of the first evaluation\n"
             "(testing the stop during evaluation)"},
    {"no-run-lock", ZT_FLAG_CLEAR, ZT_AT_INT(T, run_lock), .def = ZT_DEF_RUN_LOCK,
     .help = "do not lock RUN/lock (only for file systems without flock; then make sure\n"
             "by other means that one job at a time uses the run directory)"},

    {.type = ZT_FLAG_SECTION, .help = "ranks (launch with mpirun -n W zerotrain train ...; without mpirun W = 1):"},
    {"collective-timeout", ZT_FLAG_F64, ZT_AT_F64(T, collective_timeout), "S", .fmin = 0.1, .fmax = 1e7,
     .def = ZT_DEF_COLLECTIVE_TIMEOUT,
     .help = "a rank stuck longer in one collective reports it and aborts the\njob (default {default})"},
    {"first-collective-timeout", ZT_FLAG_F64, ZT_AT_F64(T, first_collective_timeout), "S", .fmin = 0.1, .fmax = 1e7,
     .def = ZT_DEF_FIRST_COLLECTIVE_TIMEOUT, .help = "the same until the first step has finished (default {default}), as given\n"
             "even when shorter than --collective-timeout (left at its default, a longer\n"
             "--collective-timeout raises it)"},
    {"save-timeout", ZT_FLAG_F64, ZT_AT_F64(T, save_timeout), "S", .fmin = 0.1, .fmax = 1e7, .def = ZT_DEF_SAVE_TIMEOUT,
     .help = "a checkpoint save (HDF5 collective write, its internal barriers included)\n"
             "that takes longer is reported and aborted like a stuck collective (default {default})"},
    {"alive-interval", ZT_FLAG_F64, ZT_AT_F64(T, alive_interval), "S", .fmin = 0.05, .fmax = 3600,
     .def = ZT_DEF_ALIVE_INTERVAL, .help = "seconds between liveness ticks in RUN/ranks/rank-N.alive (default {default})"},

    {.type = ZT_FLAG_SECTION, .help = "execution and output:"},
    {"device", ZT_FLAG_ENUM, ZT_AT_INT(T, device), "D", .def = ZT_DEVICE_AUTO, .choices = device_choices,
     .help = "auto (default: cuda when this build has the GPU engine and every rank\n"
             "sees a GPU, else cpu), cuda (one GPU per rank: the node-local rank, bf16\n"
             "compute, NCCL collectives) or cpu (fp32 reference)"},
    {"attention", ZT_FLAG_ENUM, ZT_AT_INT(T, attention), "A", .def = ZT_ATTN_AUTO, .choices = attention_choices,
     .help = "cuda attention: auto (default: cudnn when the CUDA module has it, the model\n"
             "family's GPU passes run it, the documents of a block are not kept apart and\n"
             "there is no context split; else gemm while its S x S scratch (12 g S^2 bytes,\n"
             "g = query heads per KV head) stays under 8 GiB; else tiled), tiled (64x64 tiles,\n"
             "online softmax, no S x S scratch; tensor cores at head_dim 16..128 in steps of\n"
             "16, else head_dim up to 256; keeps packed documents apart), gemm (cuBLASLt\n"
             "products + fused causal softmax, S x S scratch) or cudnn (cuDNN fused flash\n"
             "attention; packed documents as its variable-length batch from cuDNN 9.6,\n"
             "never run on a GPU yet; see docs/cuda.md)"},
    {"recompute", ZT_FLAG_SET, ZT_AT_INT(T, recompute),
     .help = "cuda: keep only each layer's input and recompute its activations in\n"
             "backward (one more forward pass; fits 32B at W=16 on 80 GB GPUs)"},
    {"peak-tflops", ZT_FLAG_F64, ZT_AT_F64(T, peak_tflops), "X", .fmin = 1e-6, .fmax = 1e7,
     .help = "dense peak per rank, TFLOP/s, that MFU is measured against (default: the GPU's\n"
             "bf16 peak when its name matches a `zerotrain plan` preset; on the cpu backend a\n"
             "short fp32 GEMM probe at start, reported as such)"},
    {"threads", ZT_FLAG_INT, ZT_AT_INT(T, threads), "N", 1, 4096,
     .help = "CPU threads per rank (OpenMP: the CPU ops and their matrix products; default:\nOMP_NUM_THREADS, else "
             "the node's cores divided by the ranks on the node)"},
    {"log-every", ZT_FLAG_INT, ZT_AT_INT(T, log_every), "N", 0, INT_MAX, .def = ZT_DEF_LOG_EVERY,
     .help = "print every N steps (default {default}; metrics.jsonl gets every step)"},
    {"save-dtype", ZT_FLAG_ENUM, ZT_AT_INT(T, save_dtype), "T", .def = ZT_ST_BF16, .choices = dtype_choices,
     .help = "bf16 or fp32 for RUN/final/model.safetensors (default {default})"},
    {"no-save-final", ZT_FLAG_CLEAR, ZT_AT_INT(T, save_final), .def = ZT_DEF_SAVE_FINAL, .help = "do not write RUN/final/"},
    {"no-tensorboard", ZT_FLAG_CLEAR, ZT_AT_INT(T, tensorboard), .def = ZT_DEF_TENSORBOARD,
     .help = "do not write TensorBoard event files (default: RUN/tb/, rank 0's\n"
             "curves, and RUN/tb/ranks/rank-N/ with each rank's own; open with\n"
             "`tensorboard --logdir RUN/tb`)"},
    {.type = ZT_FLAG_END, .config_also = zt_preflight_flags}};
#undef T

// The families named from their tables (model/family.h), so a new family is named here too.
static char synopsis[512];
static void make_synopsis(void) {
    char fam[160];
    snprintf(synopsis, sizeof synopsis,
             "usage: zerotrain train --data DIR --run-dir RUN (--model CONFIG|HF_DIR | --init HF_DIR) [options]\n"
             "\n"
             "Trains a %s model (the families this build knows; config.json's model_type says\n"
             "which) on a token dataset made by `zerotrain pack`.\n",
             zt_family_titles(fam, sizeof fam, " or "));
}

int zt_cmd_train(int argc, char **argv) {
    make_synopsis();
    zt_train_opts o;
    zt_train_defaults(&o);
    const int prc = zt_flags_parse("train", zt_train_flags, &o, argc, argv, synopsis, NULL);
    if (prc) return prc == 1 ? 0 : 2;
    if ((o.eval_every || o.eval_batches) && !o.eval_data) {
        fprintf(stderr, "zerotrain train: error: --eval-every and --eval-batches need --eval-data DIR\n");
        return 2;
    }
    if (!o.data || !o.run_dir || (!o.model && !o.init)) {
        fprintf(stderr, "zerotrain train: error: --data, --run-dir and --model (or --init) are required\n\n");
        zt_flags_usage(stderr, zt_train_flags, synopsis, NULL);
        return 2;
    }
    char *settings = zt_flags_settings_json(zt_train_flags, &o);
    char *config = zt_flags_config_json(zt_train_flags, &o);
    o.flag_settings = settings;
    o.config_json = config;
    o.has_config_file = zt_flags_config_file(&o, &o.config_file, &o.config_crc32c);
    o.argc = argc;
    o.argv = (const char *const *)argv;
    const int rc = zt_train_run(&o);
    free(settings);
    free(config);
    if (rc != 0) {
        fprintf(stderr, "zerotrain train: error: %s\n", zt_errmsg());
        return 1;
    }
    return 0;
}
