// `zerotrain train`: every rank opens and checks (its share of) the data, deals
// blocks, agrees on the step count (evenfix: the global minimum), and runs the FSDP
// engine. Every control-flow decision (stop, error, epoch end) comes from an
// all-reduced value, so all ranks take it at the same step.
// Phases, in zt_train_body's order: set_threads, choose_device, run_gate, open_data,
// deal_blocks (train/train_deal.c), build_engine (--init, --resume: resume.c), the plan
// and the run log's files (run_log.c); then train_loop: next_batch, zt_fsdp_step,
// zt_runlog_step, maybe_eval, maybe_save; at the end the summary, export_final and
// complete.json. The job around it (MPI, signals, the lock) is session.c.
#define _GNU_SOURCE
#include <cjson/cJSON.h>
#include <math.h>
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <omp.h>

#include "base/common.h"
#include "base/env.h"
#include "checkpoint/safetensors.h"
#include "engine/cuda_module.h"
#include "model/flops.h"
#include "train/device_info.h"
#include "train/preflight.h"
#include "train/agree.h"
#include "train/loop.h"
#include "train/resume.h"
#include "train/run_log.h"
#include "train/signals.h"
#include "data/batch.h"
#include "checkpoint/hf.h"


enum { EVAL_DONE = 0, EVAL_STOPPED = 1, EVAL_DATA_BAD = 2 };

void zt_train_defaults(zt_train_opts *o) {
    memset(o, 0, sizeof *o);
    o->epochs = ZT_DEF_EPOCHS;
    o->attention_cudnn = ZT_ATTN_AUTO;
    o->steps = ZT_DEF_STEPS;
    o->micro_batch = ZT_DEF_MICRO_BATCH;
    o->grad_accum = ZT_DEF_GRAD_ACCUM;
    o->hp = (zt_hparams){.lr = ZT_DEF_LR, .min_lr_ratio = ZT_DEF_MIN_LR_RATIO, .warmup = ZT_DEF_WARMUP,
                         .schedule = ZT_SCHED_COSINE, .beta1 = ZT_DEF_BETA1, .beta2 = ZT_DEF_BETA2,
                         .eps = ZT_DEF_ADAM_EPS, .weight_decay = ZT_DEF_WEIGHT_DECAY, .clip = ZT_DEF_CLIP};
    o->seed = ZT_DEF_SEED;
    o->log_every = ZT_DEF_LOG_EVERY;
    o->verify_crc = ZT_DEF_VERIFY_CRC;
    o->allow_long_seq = ZT_DEF_ALLOW_LONG_SEQ;
    o->save_final = ZT_DEF_SAVE_FINAL;
    o->tensorboard = ZT_DEF_TENSORBOARD;
    o->save_dtype = ZT_ST_BF16;
    o->evenfix = ZT_DEF_EVENFIX;
    o->alive_interval = ZT_DEF_ALIVE_INTERVAL;
    o->preflight = ZT_DEF_PREFLIGHT;
    o->keep_last = ZT_DEF_KEEP_LAST;
    o->reshard_after_forward = 1;
    o->async_save = ZT_DEF_ASYNC_SAVE;
    o->save_io = ZT_DEF_SAVE_IO;
    o->collective_timeout = ZT_DEF_COLLECTIVE_TIMEOUT;
    o->first_collective_timeout = ZT_DEF_FIRST_COLLECTIVE_TIMEOUT;
    o->save_timeout = ZT_DEF_SAVE_TIMEOUT;
}

// Seeded Fisher-Yates; every epoch (and, for per-rank files, every rank) has its own order.
static void shuffle_blocks(block_ref *b, int64_t n, uint64_t seed, int64_t epoch, int stream) {
    zt_rng r;
    zt_rng_seed(&r, seed ^ (0xd1b54a32d192ed03ULL * (uint64_t)(epoch + 1)) ^ (0x9e3779b97f4a7c15ULL * (uint64_t)stream));
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = (int64_t)zt_rng_below(&r, (uint64_t)i + 1);
        block_ref t = b[i];
        b[i] = b[j];
        b[j] = t;
    }
}

void zt_train_cleanup(run_state *r) {
    zt_line_close(r->metrics);
    zt_line_close(r->rank_metrics);
    zt_tb_close(r->tb);
    zt_tb_close(r->tb_rank);
    if (r->trace) fclose(r->trace);
    free(r->order);
    free(r->blocks);
    free(r->batch);
    free(r->settings);
    free(r->schedule_before);
    // a write still in flight is waited for and dropped, never committed; first, as its writer may
    // still be copying the shards that save_slices describes
    zt_ckpt_async_destroy(r->async);
    r->async = NULL;
    free(r->slices);
    free(r->save_slices);
    free(r->fl_words), free(r->fl_ids), free(r->fl_tg), free(r->fl_pos);
    for (int k = 0; r->peer_order && k < r->world; k++) free(r->peer_order[k]);
    free(r->peer_order);
    free(r->peer_n);
    zt_fsdp_destroy(r->f);
    if (r->ds_open) zt_dataset_close(&r->ds);
    if (r->eds_open) zt_dataset_close(&r->eds);
}

// The blocks of --eval-data one evaluation reads: all, or the first --eval-batches x W x
// micro-batch of them.
static int64_t eval_blocks(const zt_train_opts *o, int64_t total, int world) {
    const int64_t per_micro = (int64_t)o->micro_batch * world;
    return o->eval_batches > 0 && o->eval_batches * per_micro < total ? o->eval_batches * per_micro : total;
}

// What an evaluation pass reads, fetched one micro-batch at a time through the guarded copy
// (a file changed underneath is an error, not a SIGBUS).
typedef struct {
    const zt_train_opts *o;
    run_state *r;
    int64_t n;           // blocks evaluated
    uint32_t *buf;       // micro_batch blocks
    int signal_at;       // --debug-signal-in-eval on this rank (0: never)
    int asked;           // micro-batches the stop was asked for
} eval_ctx;

static int eval_fetch(void *ctx, int m, const uint32_t **blocks) {
    eval_ctx *c = ctx;
    const zt_dataset *e = &c->r->eds;
    const int64_t B = c->o->micro_batch, S = e->seq_len;
    for (int64_t b = 0; b < B; b++) {
        int64_t g = ((int64_t)m * c->r->world + c->r->rank) * B + b, fi = 0;
        blocks[b] = NULL;
        if (g >= c->n) continue;  // a filler
        while (g >= e->files[fi].blocks) g -= e->files[fi++].blocks;
        if (zt_dataset_read_block(e, (int)fi, g, c->buf + b * S) != 0) return zt_err_prefix("--eval-data");
        blocks[b] = c->buf + b * S;
    }
    return 0;
}

static int eval_stop(void *ctx) {
    eval_ctx *c = ctx;
    if (c->signal_at && ++c->asked == c->signal_at) raise(SIGUSR1);  // --debug-signal-in-eval
    return zt_signals_stop() != 0;
}

// Validation: the evaluated blocks in file order, dealt round-robin by micro-batch; every
// rank runs the same number of micro-batches (ranks past the end run fillers that count
// nothing), so the collectives match and the mean is over the same blocks at any world
// size. Stateless: the training order, RNG, optimizer and checkpoints never see it. A stop
// request ends the pass at the next micro-batch (EVAL_STOPPED), a changed file at the
// micro-batch that reads it (EVAL_DATA_BAD, the reason in zt_err), on every rank alike.
static int run_eval(const zt_train_opts *o, run_state *r, int64_t step) {
    const zt_dataset *e = &r->eds;
    const int64_t B = o->micro_batch, per_micro = B * r->world;
    const int64_t n = eval_blocks(o, e->total_blocks, r->world);
    const int64_t nmicro = (n + per_micro - 1) / per_micro;
    if (nmicro == 0) return EVAL_DONE;
    eval_ctx c = {o, r, n, zt_xmalloc((size_t)(B * e->seq_len) * sizeof(uint32_t)), 0, 0};
    // --debug-signal-in-eval: the last rank, in the first evaluation only
    if (o->debug_signal_in_eval > 0 && r->rank == r->world - 1 && !r->eval_signalled) {
        c.signal_at = (int)o->debug_signal_in_eval;
        r->eval_signalled = 1;
    }
    const zt_fsdp_eval_source src = {.fetch = eval_fetch, .stop = eval_stop, .ctx = &c};
    const double t0 = zt_now();
    zt_fsdp_eval_result res;
    int rc = zt_fsdp_eval_from(r->f, (int)nmicro, &src, &res);
    free(c.buf);
    if (rc) return -1;
    if (res.bad) {
        if (!strstr(zt_errmsg(), "changed while training"))  // another rank's file: it printed the details
            zt_err("the evaluation data changed while training on %d rank%s (see %s messages)", res.bad,
                   res.bad == 1 ? "" : "s", res.bad == 1 ? "its" : "their");
        return EVAL_DATA_BAD;
    }
    if (res.stopped) {
        if (r->rank == 0) {
            zt_runlog_clear_progress();
            printf("eval  %5lld | ended after %d of %lld micro-batches: a stop signal reached %d rank%s; not "
                   "recorded, checkpointing\n",
                   (long long)step, res.micro_done, (long long)nmicro, res.stopped, res.stopped == 1 ? "" : "s");
            fflush(stdout);
        }
        r->eval_stopped = res.stopped;
        return EVAL_STOPPED;
    }
    const int64_t targets = res.targets;
    zt_runlog_eval(r, step, n, targets, targets ? res.loss_sum / (double)targets : NAN, zt_now() - t0);
    return EVAL_DONE;
}

// OpenMP threads (the CPU ops and their matrix products): --threads, else OMP_NUM_THREADS, else the node's cores
// split between the ranks on it.
static void set_threads(const zt_train_opts *o, run_state *r) {
    int threads = o->threads;
    if (threads > 0) {
        omp_set_num_threads(threads);
    } else if (!getenv("OMP_NUM_THREADS")) {
        // Ranks sharing a node split its cores instead of each taking all of them.
        zt_comm_info ci;
        zt_comm_get_info(r->comm, &ci);
        long cores = sysconf(_SC_NPROCESSORS_ONLN);
        threads = (int)(cores / (ci.local_world > 0 ? ci.local_world : 1));
        if (threads < 1) threads = 1;
        omp_set_num_threads(threads);
    } else {
        threads = omp_get_max_threads();
    }
    r->threads = threads;
}

// Every rank takes the same backend: cuda when asked (refused, agreed, when any rank has no
// GPU), or with auto when every rank has one; else cpu.
static int choose_device(const zt_train_opts *o, run_state *r) {
    // cuda loads the CUDA module (its error names what was looked for and why it failed);
    // auto loads it only on a host with an NVIDIA driver; cpu never does.
    const int want = o->device == ZT_DEVICE_CUDA;
    int mine = o->device != ZT_DEVICE_CPU && zt_fsdp_cuda_devices(want) > 0, all = mine;
    if (zt_allreduce(r->comm, &mine, &all, 1, ZT_DT_I32, ZT_RED_MIN, "device choice") != 0) return -1;
    char mod[4400];
    if (r->rank == 0 && zt_cuda_module_describe(mod, sizeof mod)) printf("cuda module: %s\n", mod);
    if (want) {
        const int ok = mine || (zt_cuda_module_loaded()
                                    ? zt_err("--device cuda: rank %d sees no CUDA device (check CUDA_VISIBLE_DEVICES and "
                                             "the driver: nvidia-smi)", r->rank)
                                    : zt_err_prefix("--device cuda")) == 0;
        if (zt_train_agree(r->comm, ok, "choosing the device") != 0) return -1;
        r->cuda = 1;
    } else {
        r->cuda = o->device == ZT_DEVICE_AUTO && all;
        const char *why = zt_fsdp_cuda_why_none();
        if (o->device == ZT_DEVICE_AUTO && !r->cuda && (why || mine))
            fprintf(stderr, "zerotrain: warning: rank %d: --device auto takes the cpu backend: %s\n", r->rank,
                    why ? why : "this rank has a GPU but another rank has none (every rank must have one)");
    }
    return 0;
}

// The gate: data integrity and balance, token ids, disk, devices, network.
static int run_gate(const zt_train_opts *o, run_state *r, const char *cfg_src) {
    if (!o->preflight) return 0;
    zt_preflight_opts po;
    zt_preflight_defaults(&po);
    po.data = o->data;
    po.model = cfg_src;
    po.run_dir = o->run_dir;
    po.micro_batch = o->micro_batch;
    po.grad_accum = o->grad_accum;
    po.evenfix = o->evenfix;
    po.keep_last = o->keep_last;
    po.verify_crc = o->verify_crc;
    po.allow_long_seq = o->allow_long_seq;
    po.shard_group = o->shard_group;
    po.reshard_after_forward = o->reshard_after_forward;
    po.mem_need = o->mem_need;
    po.device = r->cuda ? "cuda" : "cpu";  // check 3 inspects each rank's GPU on the cuda backend
    if (zt_preflight_run(r->comm, &po, stdout) != 0)
        return zt_err_prefix("stopping before training (pass --no-preflight to override)");
    return 0;
}

// Every rank maps all files; crc/tokens were checked by the gate (or here, split by rank).
static int open_data(const zt_train_opts *o, run_state *r) {
    const int R0 = r->rank == 0;
    const zt_model_config *cfg = &r->cfg;
    double t0 = zt_now();
    zt_dataset_opts dopts = {.verify_crc = o->verify_crc && !o->preflight, .check_tokens = !o->preflight,
                             .model_vocab = cfg->vocab_size, .part = r->rank, .nparts = r->world};
    int ok = zt_dataset_open(&r->ds, o->data, &dopts) == 0;
    r->ds_open = ok;
    if (ok && r->ds.per_rank && r->ds.nfiles != r->world)
        ok = zt_err("%s: a per-rank dataset with %d file%s needs exactly %d rank%s, but the job has %d (pack it "
                    "again with --per-rank %d, or launch %d ranks)",
                    o->data, r->ds.nfiles, r->ds.nfiles == 1 ? "" : "s", r->ds.nfiles, r->ds.nfiles == 1 ? "" : "s",
                    r->world, r->world, r->ds.nfiles) == 0;
    if (zt_train_agree(r->comm, ok, "opening the dataset") != 0) return -1;
    const zt_dataset *ds = &r->ds;
    if (R0)
        printf("data: %s: %s layout, %d file%s, %lld blocks of %d tokens (%.2f M tokens) (%.2f s)\n", o->data,
               ds->per_rank ? "per-rank" : "single", ds->nfiles, ds->nfiles == 1 ? "" : "s",
               (long long)ds->total_blocks, ds->seq_len, (double)ds->total_blocks * ds->seq_len / 1e6, zt_now() - t0);
    r->isolated = o->doc_attention == ZT_DOC_ATTN_ISOLATED || (o->doc_attention == ZT_DOC_ATTN_DATASET && ds->doc_isolated);
    if (r->isolated && !ds->token_flags)
        return zt_err("--doc-attention isolated: %s is a version %d dataset, which stores no document boundaries "
                      "(pack conversations with `zerotrain pack --input chat`)",
                      o->data, ds->version);
    if (R0 && ds->token_flags) {
        char trained[48] = "count not recorded";
        if (ds->trained_tokens >= 0) snprintf(trained, sizeof trained, "%lld trained tokens", (long long)ds->trained_tokens);
        printf("data: version 2 words: loss masks (%s), documents %s\n", trained,
               r->isolated ? "isolated (attention and RoPE positions per document)" : "see each other (full attention)");
    }
    if (o->eval_data) {
        t0 = zt_now();
        zt_dataset_opts eo = {.verify_crc = o->verify_crc, .check_tokens = 1, .model_vocab = cfg->vocab_size,
                              .part = r->rank, .nparts = r->world};
        ok = zt_dataset_open(&r->eds, o->eval_data, &eo) == 0;
        r->eds_open = ok;
        if (ok && r->eds.seq_len != ds->seq_len)
            ok = zt_err("--eval-data %s: seq_len %d differs from the training data's %d", o->eval_data, r->eds.seq_len,
                        ds->seq_len) == 0;
        if (ok && r->eds.tokenizer[0] && ds->tokenizer[0] && strcmp(r->eds.tokenizer, ds->tokenizer))
            ok = zt_err("--eval-data %s: tokenizer %s differs from the training data's %s", o->eval_data,
                        r->eds.tokenizer, ds->tokenizer) == 0;
        if (ok && r->isolated && !r->eds.token_flags)
            ok = zt_err("--eval-data %s: a version %d dataset has no document boundaries, but training isolates "
                        "documents (evaluate on data packed the same way)",
                        o->eval_data, r->eds.version) == 0;
        // Nothing to evaluate would print "evaluated every N steps" and never do it, or log a
        // loss of 0/0: both are refused here, before any step.
        if (ok && r->eds.total_blocks == 0)
            ok = zt_err("--eval-data %s: the dataset holds no blocks, so there is nothing to evaluate (pack more "
                        "held-out data, or leave --eval-data out)",
                        o->eval_data) == 0;
        if (ok) {
            const int64_t n = eval_blocks(o, r->eds.total_blocks, r->world);
            int64_t targets = 0, k = 0;
            for (int fi = 0; fi < r->eds.nfiles && k < n; fi++)
                for (int64_t b = 0; b < r->eds.files[fi].blocks && k < n; b++, k++)
                    targets += zt_batch_count_targets(zt_dataset_block(&r->eds, fi, b), r->eds.seq_len, r->isolated);
            if (targets == 0)
                ok = zt_err("--eval-data %s: the %lld block%s an evaluation reads hold no trained target (every token "
                            "is masked out of the loss: packed with --train-on rules that leave nothing?), so the "
                            "validation loss would be 0/0",
                            o->eval_data, (long long)n, n == 1 ? "" : "s") == 0;
        }
        if (zt_train_agree(r->comm, ok, "opening the evaluation dataset") != 0) return -1;
        if (R0) {
            char when[64] = "";
            if (o->eval_every) snprintf(when, sizeof when, "every %lld steps and ", (long long)o->eval_every);
            printf("eval: %s: %lld blocks, evaluated %safter the last step (%.2f s)\n", o->eval_data,
                   (long long)r->eds.total_blocks, when, zt_now() - t0);
        }
    }
    if (R0 && ds->seq_len > zt_model_max_positions(cfg))
        fprintf(stderr, "zerotrain: warning: dataset seq_len %d exceeds the model's %s %lld\n", ds->seq_len,
                cfg->rope_yarn ? "YaRN range" : "max_position_embeddings", (long long)zt_model_max_positions(cfg));
    return 0;
}

// Dealing and evenfix: every rank's block count (zt_deal_blocks, all-gathered), the steps
// per epoch every rank agrees on (zt_evenfix), and the run's length.
static int deal_blocks(const zt_train_opts *o, run_state *r) {
    const zt_dataset *ds = &r->ds;
    r->per_rank_step = (int64_t)o->micro_batch * o->grad_accum;
    r->global_step_blocks = r->per_rank_step * r->world;
    int64_t *file_blocks = zt_xcalloc((size_t)(ds->nfiles > 0 ? ds->nfiles : 1), sizeof(int64_t));
    for (int i = 0; i < ds->nfiles; i++) file_blocks[i] = ds->files[i].blocks;
    const zt_deal d = {.per_rank = ds->per_rank, .file_blocks = file_blocks, .total_blocks = ds->total_blocks,
                       .world = r->world, .per_rank_step = r->per_rank_step};
    int64_t my_blocks = zt_deal_blocks(&d, r->rank);  // blocks this rank would train on in one epoch
    free(file_blocks);
    int64_t *counts = zt_xcalloc((size_t)r->world, sizeof(int64_t));
    if (zt_allgather(r->comm, &my_blocks, counts, 1, ZT_DT_I64, "evenfix block counts") != 0) {
        free(counts);
        return -1;
    }
    zt_evenfix_plan p;
    zt_evenfix(counts, r->world, r->rank, r->per_rank_step, o->evenfix, &p);
    if (r->rank == 0) {
        printf("evenfix: blocks per rank min %lld, max %lld, spread %lld", (long long)p.min_blocks,
               (long long)p.max_blocks, (long long)(p.max_blocks - p.min_blocks));
        if (o->evenfix) {
            printf("; every rank stops after %lld steps per epoch; dropped %lld blocks (%.3f%% of tokens)\n",
                   (long long)p.min_steps, (long long)p.dropped, p.total ? 100.0 * p.dropped / p.total : 0.0);
            for (int i = 0; i < r->world && p.max_blocks != p.min_blocks; i++)
                printf("evenfix: rank %d has %lld blocks, drops %lld\n", i, (long long)counts[i],
                       (long long)(counts[i] - p.min_steps * r->per_rank_step));
        } else {
            printf("\n");
            if (p.max_steps != p.min_steps)
                fprintf(stderr,
                        "zerotrain: warning: --no-evenfix with uneven ranks: steps per epoch range from %lld to %lld; "
                        "ranks will leave the epoch at different steps and the job WILL HANG until the collective "
                        "deadline aborts it (this flag exists to reproduce that failure)\n",
                        (long long)p.min_steps, (long long)p.max_steps);
        }
    }
    free(counts);
    r->steps_per_epoch = p.steps_per_epoch;
    if (zt_train_agree(r->comm, r->steps_per_epoch >= 1 ||
                           zt_err("%s: rank %d gets %lld blocks, fewer than one step needs (micro-batch %d x "
                                  "grad-accum %d = %lld blocks per rank%s)",
                                  o->data, r->rank, (long long)my_blocks, o->micro_batch, o->grad_accum,
                                  (long long)r->per_rank_step, r->world > 1 ? "; more ranks than blocks?" : "") == 0,
              "checking the block count") != 0)
        return -1;
    r->total_steps = o->steps > 0 ? o->steps : o->epochs * r->steps_per_epoch;
    r->hp = o->hp;
    r->hp.total_steps = r->total_steps;
    return 0;
}

// --init: every rank maps the safetensors files and reads only its own slices.
static int load_init_weights(const zt_train_opts *o, run_state *r) {
    const double t0 = zt_now();
    const zt_model_layout *lay = zt_fsdp_layout(r->f);
    int64_t *lo = zt_xcalloc((size_t)lay->nunits, sizeof(int64_t));
    int64_t *valid = zt_xcalloc((size_t)lay->nunits, sizeof(int64_t));
    float **dst = zt_xcalloc((size_t)lay->nunits, sizeof(float *));
    for (int u = 0; u < lay->nunits; u++) {
        zt_fsdp_shard sh;
        zt_fsdp_get_shard(r->f, u, &sh);
        lo[u] = sh.lo;
        valid[u] = sh.valid;
        dst[u] = sh.master;
        memset(sh.master, 0, (size_t)sh.shard * sizeof(float));
    }
    int ok = zt_hf_load_slices(lay, o->init, lo, valid, dst) == 0;
    if (!ok) zt_err_prefix("--init %s", o->init);
    // Weights that hold NaN or Inf could only train to a non-finite loss, which would then be
    // blamed on --lr or the data: refuse them here, naming the tensor (each rank its slices).
    for (int u = 0; ok && u < lay->nunits; u++)
        for (int64_t i = 0; ok && i < valid[u]; i++) {
            if (isfinite(dst[u][i])) continue;
            const int64_t e = lo[u] + i;  // the element inside the unit's flat vector
            const zt_unit_layout *ul = &lay->units[u];
            int t = 0;
            while (t + 1 < ul->ntensors && e >= ul->t[t + 1].offset) t++;
            const zt_tensor_desc *td = &ul->t[t];
            const int64_t k = e - td->offset, cols = td->ndim == 2 ? td->shape[1] : 0;
            char where[64];
            if (cols > 0) snprintf(where, sizeof where, "[%lld, %lld]", (long long)(k / cols), (long long)(k % cols));
            else snprintf(where, sizeof where, "[%lld]", (long long)k);
            ok = zt_err("--init %s: tensor %s holds a non-finite value (%g) at %s; a model that starts from it can "
                        "only produce non-finite losses (weights saved after a diverged run, or damaged)",
                        o->init, td->name, (double)dst[u][i], where) == 0;
        }
    free(lo), free(valid), free(dst);
    if (zt_train_agree_named(r, ok, "loading --init weights") != 0) return -1;
    if (r->rank == 0) printf("init: loaded Hugging Face weights from %s (%.2f s)\n", o->init, zt_now() - t0);
    return 0;
}

// The node's MemAvailable in bytes (-1: unknown). Testing: ZT_DEBUG_MEM_AVAILABLE=BYTES.
static double host_mem_available(void) {
    double bytes;
    if (zt_env_f64(ZT_ENV_DEBUG_MEM_AVAILABLE, &bytes)) return bytes;
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f) return -1;
    char line[256];
    double kib = -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %lf kB", &kib) == 1) break;
    fclose(f);
    return kib < 0 ? -1 : kib * 1024.0;
}

// --async-save: the host snapshot of this rank's shards (master, m, v), checked against the
// node's available memory first (every rank of the node holds one), then allocated and the
// writer's communicator duplicated. A refusal names the sizes.
// Under hybrid sharding the snapshot holds what this rank writes (replica 0's shards; nothing on
// the other replicas), and the replicas' checksum check runs before each snapshot.
static int make_snapshot(run_state *r) {
    if (zt_fsdp_has_snapshot(r->f)) {  // GPU engine: its page-locked host copies are the snapshot
        zt_fsdp_strategy strat;
        zt_fsdp_get_strategy(r->f, &strat);
        // the replica check reads the host copies, which the snapshot's copy fills asynchronously
        int ok = strat.replicas <= 1 ||
                 zt_err("--async-save with --shard-group %d of %d ranks (hybrid sharding) is not supported on the "
                        "cuda backend yet: run with synchronous saves, or full shard",
                        strat.shard_group, r->world) == 0;
        if (zt_train_agree_named(r, ok, "--async-save with hybrid sharding") != 0) return -1;
        ok = zt_ckpt_async_create(MPI_COMM_WORLD, zt_fsdp_layout(r->f), &r->save_shards, 0, &r->async) == 0;
        return zt_train_agree_named(r, ok, "--async-save snapshot") != 0 ? -1 : 0;
    }
    const int64_t bytes = zt_ckpt_snapshot_bytes(&r->save_shards);
    zt_comm_info info;
    zt_comm_get_info(r->comm, &info);
    const int local = info.local_world > 0 ? info.local_world : 1;
    int64_t node_bytes = bytes, node_max = 0;
    if (zt_allreduce(r->comm, &bytes, &node_max, 1, ZT_DT_I64, ZT_RED_MAX, "snapshot size") != 0) return -1;
    node_bytes = node_max * local;
    const double avail = host_mem_available();
    char b1[32], b2[32], b3[32];
    int ok = 1;
    if (avail >= 0 && (double)node_bytes > avail)
        ok = zt_err("--async-save: the checkpoint snapshot needs %s of host memory per rank, %s for the %d rank%s on "
                    "this node, and the node has %s available (MemAvailable, /proc/meminfo, after the model was "
                    "built); run without --async-save, or on more nodes",
                    zt_human_bytes((double)node_max, 2, b1, sizeof b1),
                    zt_human_bytes((double)node_bytes, 2, b2, sizeof b2), local, local == 1 ? "" : "s", zt_human_bytes(avail, 2, b3, sizeof b3)) == 0;
    if (zt_train_agree_named(r, ok, "--async-save memory check") != 0) return -1;
    ok = zt_ckpt_async_create(MPI_COMM_WORLD, zt_fsdp_layout(r->f), &r->save_shards, 1, &r->async) == 0;
    // the writer thread copies the snapshot while the next step computes; that step's optimizer
    // update waits for the copy
    if (ok) zt_fsdp_set_update_fence(r->f, zt_ckpt_async_wait_copied, r->async);
    return zt_train_agree_named(r, ok, "--async-save snapshot") != 0 ? -1 : 0;
}

// The engine: NCCL communicators (cuda), the sharded model and optimizer state, then its
// starting point: --init weights, or the checkpoint of --resume, copied to the device.
static int build_engine(const zt_train_opts *o, run_state *r) {
    const zt_model_config cfg = r->cfg;
    const zt_dataset *ds = &r->ds;
    const zt_hparams hp = r->hp;
    char backend[192];
    snprintf(backend, sizeof backend, "cpu backend (%s sgemm kernel)", zt_cpu_gemm_kernel());
    int ok = 1;
    // --attention auto: cuDNN's fused attention where the module has it and it can serve the
    // data (it cannot keep packed documents apart): a Qwen3-32B layer on an H200 ran 1.18x /
    // 1.65x faster with it than with the GEMM path at 2,048 / 8,192 tokens, and it needs no
    // S x S scratch (docs/gpu-runs/2026-12-04-h200/full).
    const int cudnn = o->attention_cudnn == ZT_ATTN_AUTO ? r->cuda && !r->isolated && zt_fsdp_cuda_cudnn_built()
                                                         : o->attention_cudnn;
    if (r->cuda) {
        // Its own flight recorders (RUN/nccl/ranks/rank-N.flight): a deadline report on the
        // NCCL comm summarises the peers' NCCL recorders, not the MPI comm's.
        char ndir[4200];
        snprintf(ndir, sizeof ndir, "%s/nccl", o->run_dir);
        zt_comm_opts dco = r->copts;
        dco.run_dir = ndir;
        MPI_Comm world = MPI_COMM_WORLD;
        ok = zt_cuda_comm_init(&r->dcomm, &world, -1, &dco) == 0;
        if (zt_train_agree(r->comm, ok, "creating the NCCL communicators") != 0) return -1;
        zt_fsdp_cuda_describe(r->dcomm, backend, sizeof backend);
        size_t bl = strlen(backend);
        snprintf(backend + bl, sizeof backend - bl, ", %s attention%s%s", cudnn ? "cuDNN flash" : "GEMM",
                 o->attention_cudnn == ZT_ATTN_AUTO ? " (auto)" : "", o->recompute ? ", activation recomputation" : "");
    }

    snprintf(r->backend, sizeof r->backend, "%s", backend);
    if (!r->cuda && (o->attention_cudnn == 1 || o->recompute) && r->rank == 0)
        fprintf(stderr, "zerotrain: warning: --attention cudnn and --recompute apply to the cuda backend; the cpu "
                        "backend ignores them\n");

    // ---- model and optimizer state, sharded (over all W ranks, or hybrid: groups of G) ----
    int G = r->world;
    if (zt_train_agree(r->comm, zt_shard_group_resolve(r->comm, o->shard_group, r->world, &G) == 0,
                       "resolving --shard-group") != 0)
        return -1;
    if (r->rank == 0 && (G < r->world || !o->reshard_after_forward))
        printf("sharding: %s over groups of %d rank%s x %d replica%s%s\n", G < r->world ? "hybrid" : "full shard", G,
               G == 1 ? "" : "s", r->world / G, r->world / G == 1 ? "" : "s",
               o->reshard_after_forward ? "" : ", parameters kept gathered from forward to backward");
    const zt_fsdp_config ec = {.backend = r->cuda ? "cuda" : "cpu", .comm = r->comm, .dcomm = r->dcomm, .cfg = &cfg,
                               .micro_batch = o->micro_batch, .grad_accum = o->grad_accum, .seq_len = ds->seq_len,
                               .hp = hp, .seed = o->seed, .recompute = o->recompute,
                               .attention_cudnn = cudnn, .shard_group = G,
                               .keep_gathered = !o->reshard_after_forward};
    ok = zt_fsdp_create(&ec, &r->f) == 0;
    if (ok) ok = zt_fsdp_set_data(r->f, ds->token_flags, r->isolated) == 0;
    if (zt_train_agree(r->comm, ok, "building the model") != 0) return -1;
    if (o->init && load_init_weights(o, r) != 0) return -1;
    const int nunits = zt_fsdp_unit_count(r->f);
    r->slices = zt_xcalloc((size_t)nunits, sizeof *r->slices);
    r->save_slices = zt_xcalloc((size_t)nunits, sizeof *r->save_slices);
    zt_fsdp_strategy strat;
    zt_fsdp_get_strategy(r->f, &strat);
    for (int u = 0; u < nunits; u++) {
        zt_fsdp_shard sh;
        zt_fsdp_get_shard(r->f, u, &sh);
        r->slices[u] = (zt_ckpt_slice){sh.numel, sh.lo, sh.valid, sh.master, sh.m, sh.v};
        // One copy of each shard is written: replica 0's (hybrid sharding); the others write nothing
        r->save_slices[u] = r->slices[u];
        if (strat.replica > 0) r->save_slices[u].valid = 0;
    }
    r->shards = (zt_ckpt_shards){nunits, r->slices};
    r->save_shards = (zt_ckpt_shards){nunits, r->save_slices};
    zt_ckpt_set_save_io(o->save_io);  // before any save, and before the async writer exists
    if (o->async_save && make_snapshot(r) != 0) return -1;
    r->settings = zt_resume_settings_json(o, ds, r->isolated, r->global_step_blocks, r->total_steps);
    if (o->resume && zt_resume_from_checkpoint(o, r) != 0) return -1;
    if ((o->init || o->resume) && zt_fsdp_to_device(r->f) != 0) return -1;  // the loaded host shards to the GPU
    return 0;
}

// This rank's blocks of `step` in r->blocks: the epoch's seeded order (reshuffled when a
// new epoch starts), cut into steps of W slices (per-rank layout: this rank's own file),
// copied out of the mapped files (a file changed underneath: -1 + zt_err, never a SIGBUS;
// a block that could not be read holds zeros, valid ids for the step that then updates nothing).
static int next_batch(const zt_train_opts *o, run_state *r, int64_t step) {
    const zt_dataset *ds = &r->ds;
    int bad = 0;
    const int64_t e = step / r->steps_per_epoch, within = step % r->steps_per_epoch;
    if (e != r->epoch) {
        r->epoch = e;
        zt_fsdp_set_epoch(r->f, e);
        int64_t k = 0;
        if (ds->per_rank) {
            for (int64_t b = 0; b < ds->files[r->rank].blocks; b++) r->order[k++] = (block_ref){r->rank, b};
            shuffle_blocks(r->order, k, o->seed, r->epoch, r->rank + 1);
        } else {
            for (int fi = 0; fi < ds->nfiles; fi++)
                for (int64_t b = 0; b < ds->files[fi].blocks; b++) r->order[k++] = (block_ref){fi, b};
            shuffle_blocks(r->order, k, o->seed, r->epoch, 0);
        }
    }
    if (r->trace) fprintf(r->trace, "%lld", (long long)step + 1);
    for (int64_t i = 0; i < r->per_rank_step; i++) {
        int64_t idx = ds->per_rank ? within * r->per_rank_step + i
                                   : within * r->global_step_blocks + (int64_t)r->rank * r->per_rank_step + i;
        block_ref br = r->order[idx];
        uint32_t *dst = r->batch + i * (int64_t)ds->seq_len;
        if (zt_dataset_read_block(ds, br.file, br.block, dst) != 0) {
            if (!bad++) zt_err_prefix("--data (rank %d, step %lld)", r->rank, (long long)step + 1);
            memset(dst, 0, (size_t)ds->seq_len * sizeof *dst);  // valid ids: the step runs, then makes no update
        }
        r->blocks[i] = dst;
        if (r->trace) fprintf(r->trace, " %d:%lld", br.file, (long long)br.block);
    }
    if (r->trace) fputc('\n', r->trace), fflush(r->trace);
    return bad ? -1 : 0;
}

// One block's sum of document lengths squared (model/flops.h): S^2 for full attention, each
// packed document's own length under isolation.
static double block_sq(run_state *r, const uint32_t *words) {
    const int64_t S = r->ds.seq_len;
    if (!r->isolated) return (double)S * (double)S;
    zt_batch_words(words, 1, S, 1, r->fl_ids, r->fl_tg, r->fl_pos);
    return zt_doc_sq_sum(r->fl_pos, S);
}

// Where rank k's i-th block of `step` is: the epoch's global order (single layout), or rank k's
// own shuffle of its own file (per-rank layout; rank 0 keeps every rank's order for this).
static block_ref peer_block(const zt_train_opts *o, run_state *r, int64_t step, int k, int64_t i) {
    const int64_t e = step / r->steps_per_epoch, within = step % r->steps_per_epoch;
    if (!r->ds.per_rank) return r->order[within * r->global_step_blocks + (int64_t)k * r->per_rank_step + i];
    if (!r->peer_order) {
        r->peer_order = zt_xcalloc((size_t)r->world, sizeof *r->peer_order);
        r->peer_n = zt_xcalloc((size_t)r->world, sizeof *r->peer_n);
        r->peer_epoch = -1;
    }
    if (r->peer_epoch != e) {  // as next_batch shuffles rank k's order
        for (int q = 0; q < r->world; q++) {
            const int64_t n = r->ds.files[q].blocks;
            free(r->peer_order[q]);
            r->peer_order[q] = zt_xmalloc((size_t)(n > 0 ? n : 1) * sizeof(block_ref));
            for (int64_t b = 0; b < n; b++) r->peer_order[q][b] = (block_ref){q, b};
            shuffle_blocks(r->peer_order[q], n, o->seed, e, q + 1);
            r->peer_n[q] = n;
        }
        r->peer_epoch = e;
    }
    return r->peer_order[k][within * r->per_rank_step + i];
}

// The model FLOPs of `step` (model/flops.h, the planner's exact formula): this rank's blocks,
// and on rank 0 every rank's (under isolation read from the dataset: documents differ by rank),
// plus what --recompute adds on the cuda backend (hardware FLOPs). Outside the timed step.
static void step_flops(const zt_train_opts *o, run_state *r, int64_t step) {
    const zt_model_config *c = &r->cfg;
    const int64_t S = r->ds.seq_len, n = r->per_rank_step;
    const double tokens = (double)(n * S);
    const int recompute = r->cuda && o->recompute;
    if (r->isolated && !r->fl_words) {
        r->fl_words = zt_xmalloc((size_t)S * sizeof *r->fl_words);
        r->fl_ids = zt_xmalloc((size_t)S * sizeof *r->fl_ids);
        r->fl_tg = zt_xmalloc((size_t)S * sizeof *r->fl_tg);
        r->fl_pos = zt_xmalloc((size_t)S * sizeof *r->fl_pos);
    }
    double sq = 0;
    for (int64_t i = 0; i < n; i++) sq += block_sq(r, r->blocks[i]);
    r->flops_rank = zt_model_train_flops(c, tokens, sq);
    r->hw_extra_rank = recompute ? zt_model_recompute_flops(c, tokens, sq) : 0;
    if (r->rank != 0) return;
    double sq_all = sq;
    if (!r->isolated) {
        sq_all = sq * r->world;
    } else {
        char pending[ZT_ERR_MAX];  // a read error here must not replace one the step will report
        snprintf(pending, sizeof pending, "%s", zt_errmsg());
        for (int k = 1; k < r->world && isfinite(sq_all); k++)
            for (int64_t i = 0; i < n && isfinite(sq_all); i++) {
                const block_ref b = peer_block(o, r, step, k, i);
                if (zt_dataset_read_block(&r->ds, b.file, b.block, r->fl_words) != 0) {
                    sq_all = NAN;  // that rank reports it; this step's FLOPs are unknown
                    zt_err("%s", pending);
                } else {
                    sq_all += block_sq(r, r->fl_words);
                }
            }
    }
    r->flops_all = zt_model_train_flops(c, tokens * r->world, sq_all);
    r->hw_extra_all = recompute ? zt_model_recompute_flops(c, tokens * r->world, sq_all) : 0;
}

// A step's outcome the loop stops on: a non-finite loss or gradient norm (all-reduced).
static int check_finite(const run_state *r, int64_t step, const zt_fsdp_stats *s) {
    if (!s->nonfinite) return 0;
    char what[96];
    if (s->nonfinite_ranks > 0)
        snprintf(what, sizeof what, "the loss is not finite on %d of %d rank%s", s->nonfinite_ranks, r->world,
                 r->world == 1 ? "" : "s");
    else if (s->nonfinite_ranks < 0)
        snprintf(what, sizeof what, "the loss is not finite");
    else
        snprintf(what, sizeof what, "the gradient norm is not finite");
    char ckpt[160];  // what is left to go back to: this job's last save, the resumed one, or none
    if (r->saved_step >= 0)
        snprintf(ckpt, sizeof ckpt, "the last checkpoint (step %lld) is untouched", (long long)r->saved_step);
    else
        snprintf(ckpt, sizeof ckpt, "no checkpoint of this run exists yet");
    return zt_err("step %lld: %s; stopping before the update (the parameters are those of step %lld, finite). Lower "
                  "--lr or check the data; %s",
                  (long long)step + 1, what, (long long)step, ckpt);
}

// The running totals after a step.
static void account_step(run_state *r, int64_t step, const zt_fsdp_stats *s) {
    r->step = step + 1;
    r->steps_run++;
    zt_liveness_set_step(r->alive, r->step);
    r->tokens_seen += s->tokens;
    r->t_wait_total += s->t_comm_wait;
    r->t_compute_total += s->t_compute;
    if (r->steps_run == 1) r->loss_first = s->loss;
    r->loss_last = s->loss;
    const double flops = r->rank == 0 ? r->flops_all : r->flops_rank;  // rank 0: the run's
    if (isfinite(flops)) {  // (unknown for a step whose peer block did not read)
        r->t_step_sum += s->t_step;
        r->flops_sum += flops;
        r->hw_extra_sum += r->rank == 0 ? r->hw_extra_all : r->hw_extra_rank;
    }
    r->lr_last = s->lr;
}

// Evaluation after `step` steps: every --eval-every steps and after the last one.
// EVAL_DONE, EVAL_STOPPED, EVAL_DATA_BAD (run_eval), or -1.
static int maybe_eval(const zt_train_opts *o, run_state *r, int64_t step, int last) {
    if (!o->eval_data || !(last || (o->eval_every > 0 && step % o->eval_every == 0))) return EVAL_DONE;
    zt_comm_set_context(r->comm, step, r->epoch, -1);
    return run_eval(o, r, step);
}

// --async-save: the save in flight (one at most) commits once every rank's writer has
// finished, and every rank learns that at a step boundary: a one-word all-reduce on the
// training comm (MAX of 0 = done, 1 = writing, 2 = writing past --save-timeout) while one is in
// flight. block = 1 (a save point, a stop, the last step): wait for this rank's writer first,
// under the comm watchdog for what is left of --save-timeout, so a stalled writer is reported
// and the job aborted like a stuck collective (exit 3). *waited: seconds spent waiting.
// 0: committed, or still writing (block = 0); -1 + zt_err: the write or the commit failed
// (the writers' agreed error, naming the rank and the cause; the .partial is gone, latest and
// every earlier checkpoint untouched).
// The step of the save in flight (-1: none): a GPU snapshot still copying, or a writer.
static int64_t async_inflight(const run_state *r) {
    return r->snap_step > 0 ? r->snap_step : zt_ckpt_async_step(r->async);
}

// GPU engine: this rank's writer starts once the snapshot's device-to-host copy has landed in
// the host copies (asked without blocking at every step boundary; block = 1 waits, watched).
// Each rank starts its own: the writers' first collective waits for the others.
static int launch_when_copied(const zt_train_opts *o, run_state *r, int block) {
    if (r->snap_step <= 0) return 0;
    int ready;
    if (block) {
        const double prev = zt_comm_set_timeout(r->comm, fmax(0.001, r->async_t0 + o->save_timeout - zt_now()));
        zt_comm_watch_begin(r->comm, "checkpoint snapshot: device-to-host copy (limit: --save-timeout)");
        ready = zt_fsdp_snapshot_ready(r->f, 1);
        zt_comm_watch_end(r->comm);
        zt_comm_set_timeout(r->comm, prev);
    } else {
        ready = zt_fsdp_snapshot_ready(r->f, 0);
    }
    if (ready <= 0) return ready;
    if (zt_ckpt_async_start(r->async, o->run_dir, &r->snap_meta, r->settings, &r->save_shards) != 0)
        return zt_err_prefix("step %lld: starting the background checkpoint write", (long long)r->snap_step);
    r->snap_step = 0;
    return 0;
}

static int async_settle(const zt_train_opts *o, run_state *r, int64_t step, int block, double *waited) {
    *waited = 0;
    if (launch_when_copied(o, r, block) < 0) return -1;
    const int64_t ck = async_inflight(r);
    if (ck < 0) return 0;
    const double deadline = r->async_t0 + o->save_timeout;
    if (!block) {
        int64_t state = r->snap_step <= 0 && zt_ckpt_async_done(r->async) ? 0 : zt_now() > deadline ? 2 : 1;
        if (zt_allreduce(r->comm, &state, &state, 1, ZT_DT_I64, ZT_RED_MAX, "checkpoint writer state") != 0) return -1;
        if (state == 1) return 0;
        // 2: some rank's writer is past --save-timeout; every rank waits under the watchdog
        if (launch_when_copied(o, r, 1) < 0) return -1;
    }
    const double tw = zt_now();
    if (!zt_ckpt_async_done(r->async)) {
        char label[96];
        snprintf(label, sizeof label, "background checkpoint write of step %lld (limit: --save-timeout)", (long long)ck);
        const double prev = zt_comm_set_timeout(r->comm, fmax(0.001, deadline - zt_now()));
        zt_comm_watch_begin(r->comm, label);
        zt_ckpt_async_join(r->async);
        zt_comm_watch_end(r->comm);
        zt_comm_set_timeout(r->comm, prev);
    }
    *waited = zt_now() - tw;
    const double write_s = zt_ckpt_async_write_seconds(r->async);
    // rank 0 renames and moves latest; every rank agrees (today's commit, under the same watch)
    const double prev = zt_comm_set_timeout(r->comm, fmax(o->save_timeout, r->copts.timeout_s));
    zt_comm_watch_begin(r->comm, "checkpoint commit (rename, latest; limit: --save-timeout)");
    const int rc = zt_ckpt_async_commit(r->async, MPI_COMM_WORLD, o->keep_last, r->ckpt_path, sizeof r->ckpt_path);
    zt_comm_watch_end(r->comm);
    zt_comm_set_timeout(r->comm, prev);
    if (rc != 0)
        return zt_err_prefix("step %lld: the checkpoint written in the background (found failed at step %lld)",
                             (long long)ck, (long long)step);
    r->saved_step = ck;
    r->t_durable = r->async_t0;  // the state of step ck is safe since its snapshot
    zt_runlog_ckpt(r, step, "commit", ck, NAN, *waited, NAN, write_s);
    if (r->rank == 0) {
        zt_runlog_clear_progress();
        printf("checkpoint: step %lld -> %s (written in the background in %.2f s, committed after step %lld)\n",
               (long long)ck, r->ckpt_path, write_s, (long long)step);
        if (*waited > 0.0005) printf("checkpoint: waited %.2f s for the write of step %lld\n", *waited, (long long)ck);
        fflush(stdout);
    }
    return 0;
}

// The checkpoint policy after `step` steps: at each epoch end (behind a barrier every rank
// reaches), every --save-every steps, at the last step, and when a stop was requested.
// --async-save: a save point first waits for (and commits) a save still in flight, then takes
// the snapshot and lets training go on; the last step's and a stop's save wait for it and
// then save synchronously as without the flag (the job ends with everything committed).
static int maybe_save(const zt_train_opts *o, run_state *r, int64_t step, int last, int stop) {
    if (step == r->saved_step) return 0;  // committed already (a stop right after a save point)
    double waited = 0;
    // a stop for the step whose save is in flight (a data error after a save point): commit it
    if (r->async && async_inflight(r) == step) return async_settle(o, r, step, 1, &waited);
    const int epoch_end = step % r->steps_per_epoch == 0;
    if (epoch_end) {
        zt_comm_set_context(r->comm, step, r->epoch, -1);  // steps completed so far
        if (zt_barrier(r->comm, "epoch-end save") != 0) return -1;
    }
    if (!(epoch_end || last || stop || (o->save_every > 0 && step % o->save_every == 0))) return 0;
    // The run directory still this job's before it commits anything to it: RUN/lock removed
    // where RUN itself cannot be locked would let a second job in (train/run_lock.h).
    const int lock_rc = zt_train_agree_named(r, r->rank != 0 || zt_run_lock_verify(r->lock) == 0,
                                             "checking the run directory's lock");
    if (lock_rc != 0) return lock_rc < 0 ? -1 : zt_err_prefix("step %lld: checkpoint refused", (long long)step);
    const double ts = zt_now();
    // Deadline-guarded: a rank that is not here is reported instead of hanging in HDF5's own barrier.
    if (!epoch_end && zt_barrier(r->comm, "checkpoint save") != 0) return -1;
    zt_ckpt_meta meta;
    memset(&meta, 0, sizeof meta);
    meta.step = step;
    meta.epoch = step / r->steps_per_epoch;
    meta.epoch_step = step % r->steps_per_epoch;
    meta.epoch_blocks = meta.epoch_step * (r->ds.per_rank ? r->per_rank_step : r->global_step_blocks);
    meta.tokens_seen = r->tokens_seen;
    meta.seed = o->seed;
    meta.world_size = r->world;
    snprintf(meta.run_id, sizeof meta.run_id, "%s", r->run_id);
    meta.lr_last = r->lr_last;
    meta.final = last;
    // at most one save in flight: this save point waits for the previous write (and says so)
    if (r->async && async_settle(o, r, step, 1, &waited) != 0) return -1;
    if (r->async && !last && !stop) {
        const double tsnap = zt_now();
        int ok;
        if (zt_fsdp_has_snapshot(r->f)) {  // GPU engine: the copy is queued; the writer starts once it landed
            r->snap_meta = meta;
            ok = zt_fsdp_snapshot_begin(r->f) == 0;
            if (ok) r->snap_step = step;
        } else {  // hybrid sharding: the replicas agree that they hold replica 0's bytes first
            ok = zt_fsdp_check_replicas(r->f) == 0 &&
                 zt_ckpt_async_start(r->async, o->run_dir, &meta, r->settings, &r->save_shards) == 0;
        }
        if (zt_train_agree(r->comm, ok, "starting the background checkpoint write") != 0)
            return zt_err_prefix("step %lld", (long long)step);
        r->async_t0 = zt_now();
        const double snap_s = r->async_t0 - tsnap, blocked = r->async_t0 - ts;
        const int dev = zt_fsdp_has_snapshot(r->f);
        if (!dev) r->copy_step = step;
        zt_runlog_ckpt(r, step, "snapshot", step, blocked, waited, dev ? snap_s : NAN, NAN);
        if (r->rank == 0) {
            zt_runlog_clear_progress();
            printf("checkpoint: step %lld snapshot %s %.3f s (training blocked %.3f s%s), writing in the background\n",
                   (long long)step,
                   dev ? "(device-to-host on its own stream) queued in"
                       : "copied by the writer thread while the next step computes (its update waits for it); started in",
                   snap_s, blocked, waited > 0.0005 ? ", of it waiting for the previous write" : "");
            fflush(stdout);
        }
        return 0;
    }
    if (zt_fsdp_to_host(r->f) != 0) return -1;  // GPU engine: device state to the host copies
    // Hybrid sharding: the replicas that do not write agree that they hold replica 0's bytes.
    if (zt_fsdp_check_replicas(r->f) != 0) return zt_err_prefix("step %lld: checkpoint refused", (long long)step);
    // HDF5 runs its own MPI barriers inside the collective write; the comm watchdog
    // gives them a deadline (--save-timeout) and the usual report instead of a silent hang.
    const double prev_timeout = zt_comm_set_timeout(r->comm, fmax(o->save_timeout, r->copts.timeout_s));
    zt_comm_watch_begin(r->comm, "checkpoint save (HDF5 collective write; limit: --save-timeout)");
    const int save_rc = zt_ckpt_save(MPI_COMM_WORLD, o->run_dir, &meta, zt_fsdp_layout(r->f), r->settings, &r->save_shards,
                                     o->keep_last, r->ckpt_path, sizeof r->ckpt_path);
    zt_comm_watch_end(r->comm);
    zt_comm_set_timeout(r->comm, prev_timeout);
    if (save_rc != 0) return zt_err_prefix("step %lld", (long long)step);
    r->saved_step = step;
    r->t_durable = zt_now();
    if (r->async) zt_runlog_ckpt(r, step, "sync", step, r->t_durable - ts, waited, NAN, NAN);
    if (r->rank == 0) {
        zt_runlog_clear_progress();
        printf("checkpoint: step %lld -> %s (%.2f s)\n", (long long)step, r->ckpt_path, r->t_durable - ts);
    }
    return 0;
}

// RUN/final/: exported by rank 0 from the final checkpoint (checksums verified, one unit in
// memory at a time, shards of at most 5 GB): no rank ever assembles the whole model.
static int export_final(const zt_train_opts *o, run_state *r) {
    if (!o->save_final) return 0;
    int ok = 1;
    if (r->rank == 0) {
        const double ts = zt_now();
        char path[4200];
        snprintf(path, sizeof path, "%s/final", o->run_dir);
        ok = zt_remove_tree(path) == 0 && zt_ckpt_export_hf(r->ckpt_path, path, o->save_dtype, 0) == 0;
        if (ok)
            printf("saved: %s (Hugging Face config.json + safetensors, %s, from %s, %.2f s)\n", path,
                   o->save_dtype == ZT_ST_BF16 ? "bf16" : "fp32", r->ckpt_path, zt_now() - ts);
    }
    return zt_train_agree(r->comm, ok, "exporting final weights");
}

// The input changed under the job after `step` good steps: every rank checkpoints that step
// (unless nothing was trained since the run started or it is saved already), then fails with
// the data error (kept first; a failing save is appended).
static int data_bad_stop(const zt_train_opts *o, run_state *r, int64_t step) {
    char why[ZT_ERR_MAX];
    snprintf(why, sizeof why, "%s", zt_errmsg());
    if (r->steps_run == 0 || step == r->saved_step)
        return zt_err("%.3000s; nothing trained since the last checkpoint (step %lld)", why, (long long)step);
    if (maybe_save(o, r, step, 0, 1) != 0) {
        char save[ZT_ERR_MAX];
        snprintf(save, sizeof save, "%s", zt_errmsg());
        return zt_err("%.2000s; and the checkpoint of step %lld failed: %.1500s", why, (long long)step, save);
    }
    return zt_err("%.3000s; the checkpoint of step %lld, the last good step, is committed (%s): restore the file "
                  "and continue with --resume (or pack the data anew and add --allow-new-data)",
                  why, (long long)step, r->ckpt_path);
}

// The training loop. Every decision at a step boundary (stop, evaluation, checkpoint,
// epoch end) comes from all-reduced values, so every rank takes it at the same step.
static int run_steps(const zt_train_opts *o, run_state *r, int *stopped) {
    for (int64_t step = r->start_step; step < r->total_steps; step++) {
        const int data_ok = next_batch(o, r, step) == 0;
        if (data_ok) step_flops(o, r, step);
        if (o->debug_signal_at_step > 0 && step + 1 == o->debug_signal_at_step && r->rank == 0) raise(SIGUSR1);
        zt_fsdp_stats s;
        const int flags = (zt_signals_stop() ? ZT_FSDP_STOP : 0) | (data_ok ? 0 : ZT_FSDP_INPUT_BAD);
        if (zt_fsdp_step(r->f, r->blocks, flags, &s) != 0) return -1;
        // A data file changed under any rank (the step's all-reduce says so; no rank updated):
        // the reason to every rank, a checkpoint of the last good step (the model and optimizer
        // are intact; only the input is not) and the named error.
        if (s.input_bad) {
            // this rank's blocks refused by the engine (an id outside the model's vocabulary that
            // the read's own check against dataset.json's did not see): its reason, named
            if (data_ok && s.input_refused) zt_err_prefix("--data (rank %d, step %lld)", r->rank, (long long)step + 1);
            if (zt_train_agree_named(r, data_ok && !s.input_refused, "step data check") < 0) return -1;
            return data_bad_stop(o, r, step);
        }
        if (r->steps_run == 0) {
            zt_comm_mark_warm(r->comm);
            if (r->dcomm) zt_comm_mark_warm(r->dcomm);
        }
        if (check_finite(r, step, &s) != 0) return -1;
        account_step(r, step, &s);
        zt_runlog_step(o, r, step, &s);
        double copy_s;  // --async-save, CPU engine: the snapshot copy is complete (this step's update waited for it)
        if (r->copy_step > 0 && zt_ckpt_async_copied(r->async, &copy_s)) {
            zt_runlog_ckpt(r, step + 1, "copied", r->copy_step, s.t_update_fence, NAN, copy_s, NAN);
            r->copy_step = 0;
        }
        double waited;  // --async-save: a write in flight that every rank has finished commits here
        if (r->async && async_settle(o, r, step + 1, 0, &waited) != 0) return -1;

        const int last = step + 1 == r->total_steps;
        int stop = s.stop_requested > 0;
        // A stop already agreed skips the evaluation: the checkpoint comes first.
        const int ev = stop ? EVAL_DONE : maybe_eval(o, r, step + 1, last);
        if (ev < 0) return -1;
        if (ev == EVAL_DATA_BAD) return data_bad_stop(o, r, step + 1);
        if (ev == EVAL_STOPPED) stop = 1;
        if (maybe_save(o, r, step + 1, last, stop) != 0) return -1;
        if (stop && !last) {
            *stopped = 1;
            if (r->rank == 0) {
                zt_runlog_clear_progress();
                const int n = ev == EVAL_STOPPED ? r->eval_stopped : s.stop_requested;
                printf("stopped: a stop signal (SIGUSR1/SIGTERM) reached %d rank%s%s; checkpoint of step %lld "
                       "committed; continue with --resume\n",
                       n, n == 1 ? "" : "s", ev == EVAL_STOPPED ? " during evaluation" : "", (long long)step + 1);
            }
            return 0;
        }
    }
    return 0;
}

// The loop, then its ending: stopped (heartbeat), or final/ and complete.json.
static int train_loop(const zt_train_opts *o, run_state *r) {
    r->order = zt_xmalloc((size_t)(r->ds.total_blocks > 0 ? r->ds.total_blocks : 1) * sizeof(block_ref));
    r->blocks = zt_xmalloc((size_t)r->per_rank_step * sizeof(uint32_t *));
    r->batch = zt_xmalloc((size_t)(r->per_rank_step * r->ds.seq_len) * sizeof(uint32_t));
    r->epoch = -1;
    r->loss_first = r->loss_last = NAN;
    r->t_loop = r->t_durable = zt_now();
    // A terminal gets a progress line updated in place; logs and Slurm output (not a
    // terminal) only the plain --log-every lines, so they stay greppable.
    r->progress_tty = r->rank == 0 && o->log_every > 0 && isatty(STDOUT_FILENO);
    r->saved_step = o->resume ? r->start_step : -1;  // a resumed step is committed already
    zt_signals_exit_on_stop(0);  // from here a stop request checkpoints at the next step boundary
    int stopped = 0;
    const int rc = run_steps(o, r, &stopped);
    if (rc != 0 && r->async && async_inflight(r) >= 0) {
        // The run failed with a write in flight: wait for it (watched, --save-timeout) and drop it
        // uncommitted; its .partial is cleared by the next save. The last committed checkpoint
        // and latest stay as they are.
        char keep[ZT_ERR_MAX];
        snprintf(keep, sizeof keep, "%s", zt_errmsg());
        zt_comm_set_timeout(r->comm, fmax(0.001, r->async_t0 + o->save_timeout - zt_now()));
        zt_comm_watch_begin(r->comm, "background checkpoint write (run failing; limit: --save-timeout)");
        if (r->snap_step > 0 && zt_fsdp_snapshot_ready(r->f, 1) == 1 &&  // every rank's writer must take part
            zt_ckpt_async_start(r->async, o->run_dir, &r->snap_meta, r->settings, &r->save_shards) == 0)
            r->snap_step = 0;
        zt_ckpt_async_abandon(r->async);
        zt_comm_watch_end(r->comm);
        zt_err("%s", keep);
    }
    if (r->rank == 0) zt_runlog_clear_progress();
    if (rc != 0) return -1;
    zt_runlog_summary(r, stopped);
    if (stopped) {
        zt_runlog_stopped(o, r);
        return 0;
    }
    if (export_final(o, r) != 0) return -1;
    int64_t lost = zt_line_lost(r->rank_metrics);  // the rank files' records a full disk refused
    if (zt_allreduce(r->comm, &lost, &lost, 1, ZT_DT_I64, ZT_RED_SUM, "counting lost metrics records") != 0) return -1;
    return zt_runlog_complete(o, r, lost);
}

// A run: its phases in order, each agreed by every rank before the next.
int zt_train_body(const zt_train_opts *o, run_state *r) {
    r->t_start = zt_now();
    set_threads(o, r);
    const char *cfg_src = o->model ? o->model : o->init;  // every rank reads it; they must agree
    if (zt_train_agree(r->comm, zt_model_config_load(&r->cfg, cfg_src) == 0, "reading the model config") != 0) return -1;
    if (choose_device(o, r) != 0) return -1;
    if (run_gate(o, r, cfg_src) != 0) return -1;
    if (open_data(o, r) != 0) return -1;
    if (deal_blocks(o, r) != 0) return -1;
    if (build_engine(o, r) != 0) return -1;
    zt_run_device(o, r);
    zt_fsdp_memory mem;
    zt_fsdp_memory_usage(r->f, &mem);
    zt_runlog_plan(o, r, &mem);
    if (zt_runlog_open(o, r, &mem) != 0) return -1;
    return train_loop(o, r);
}

