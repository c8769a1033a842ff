// `zerotrain train`: every rank opens and checks (its share of) the data, deals
// blocks, agrees on the step count (evenfix: the global minimum), and runs the FSDP
// engine. Every control-flow decision (stop, error, epoch end) comes from an
// all-reduced value, so all ranks take it at the same step. Rank 0 writes run.json,
// metrics.jsonl and final/.
// Phases, in train_body's order: set_threads, choose_device, run_gate, open_data,
// deal_blocks (train/train_deal.c), build_engine (--init, --resume), print_plan,
// runlog_open; then train_loop: next_batch, zt_fsdp_step, runlog_step, maybe_eval,
// maybe_save; at the end runlog_summary, export_final, runlog_complete.
#define _GNU_SOURCE
#include "train/train.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <mpi.h>
#include <omp.h>
#include <ftw.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "checkpoint/ckpt.h"
#include "checkpoint/safetensors.h"
#include "data/dataset.h"
#include "model/qwen3.h"
#include "engine/comm_mpi.h"
#include "engine/cuda_module.h"
#include "base/common.h"
#include "engine/fsdp.h"
#include "train/liveness.h"
#include "train/preflight.h"
#include "train/run_lock.h"
#include "train/tboard.h"

void openblas_set_num_threads(int);  // OpenBLAS extension, not in cblas.h everywhere

void zt_train_defaults(zt_train_opts *o) {
    memset(o, 0, sizeof *o);
    o->epochs = ZT_DEF_EPOCHS;
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
    o->collective_timeout = ZT_DEF_COLLECTIVE_TIMEOUT;
    o->first_collective_timeout = ZT_DEF_FIRST_COLLECTIVE_TIMEOUT;
    o->save_timeout = ZT_DEF_SAVE_TIMEOUT;
}

typedef struct { int file; int64_t block; } block_ref;

// SIGUSR1 / SIGTERM: checkpoint at the next step boundary and exit 0. The handler
// only sets a flag; the ranks agree on it with an all-reduce every step, so a
// signal to any one rank stops all of them at the same step.
static volatile sig_atomic_t g_stop_signal = 0;
// Outside the training loop (start-up: loading the module, checking the data, reading the
// checkpoint) there is nothing to save, so a stop request ends the process at once, even
// from inside a blocking call.
static volatile sig_atomic_t g_stop_exits = 0;
static void on_stop_signal(int sig) {
    g_stop_signal = sig;
    if (g_stop_exits) {
        static const char msg[] = "zerotrain: a stop signal (SIGUSR1/SIGTERM) arrived before training started; "
                                  "exiting, nothing to save\n";
        (void)!write(STDERR_FILENO, msg, sizeof msg - 1);
        _exit(128 + sig);
    }
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

static void make_run_id(char *out, size_t n) {
    zt_rng r;
    zt_rng_seed(&r, (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32) ^ (uint64_t)(zt_now() * 1e9));
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    char ts[32];
    strftime(ts, sizeof ts, "%Y%m%dT%H%M%SZ", &tm);
    snprintf(out, n, "%s-%06llx", ts, (unsigned long long)(zt_rng_u64(&r) & 0xffffff));
}

// rm -r of a directory this run owns (an earlier final/), so the export can recreate it.
static int rm_entry(const char *p, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb, (void)flag, (void)ftw;
    return remove(p);
}
static int remove_tree(const char *path) {
    struct stat st;
    if (lstat(path, &st) != 0) return 0;  // nothing to remove
    if (nftw(path, rm_entry, 16, FTW_DEPTH | FTW_PHYS) != 0) return zt_err("%s: cannot remove the previous copy", path);
    return 0;
}

// Every rank contributes whether its last phase succeeded; all learn whether all did.
// A failing rank has already put its reason in zt_err and prints it.
static int agree(zt_comm *c, int ok, const char *phase) {
    int64_t bad = ok ? 0 : 1;
    if (zt_allreduce(c, &bad, &bad, 1, ZT_DT_I64, ZT_RED_SUM, phase) != 0) return -1;
    if (bad && ok) return zt_err("%s failed on %lld other rank%s (see their messages)", phase, (long long)bad,
                                 bad == 1 ? "" : "s");
    return bad ? -1 : 0;
}

static int write_run_json(const zt_train_opts *o, const zt_qwen3_config *cfg, const zt_dataset *ds, int isolated,
                          const char *id, int world, const char *settings, int64_t steps_per_epoch, int threads,
                          const zt_fsdp_memory *mem, int64_t data_changed_at) {
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "run_id", id);
    cJSON_AddStringToObject(root, "zerotrain_version", ZT_VERSION);
    cJSON_AddStringToObject(root, "backend", "cpu");
    cJSON_AddNumberToObject(root, "world_size", world);
    cJSON_AddNumberToObject(root, "threads_per_rank", threads);
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    cJSON_AddStringToObject(root, "host_rank0", host);
    char *cj = zt_qwen3_config_json(cfg);
    cJSON_AddItemToObject(root, "model_config", cJSON_Parse(cj));
    free(cj);
    cJSON_AddNumberToObject(root, "param_count", (double)zt_qwen3_param_count(cfg));
    cJSON_AddStringToObject(root, "model", o->model ? o->model : "");
    cJSON_AddStringToObject(root, "init", o->init ? o->init : "random");
    cJSON *data = cJSON_AddObjectToObject(root, "data");
    cJSON_AddStringToObject(data, "dir", o->data);
    cJSON_AddStringToObject(data, "layout", ds->per_rank ? "per-rank" : "single");
    cJSON_AddNumberToObject(data, "seq_len", ds->seq_len);
    cJSON_AddNumberToObject(data, "files", ds->nfiles);
    cJSON_AddNumberToObject(data, "blocks", (double)ds->total_blocks);
    cJSON_AddStringToObject(data, "tokenizer", ds->tokenizer);
    cJSON_AddBoolToObject(data, "evenfix", o->evenfix);
    cJSON_AddNumberToObject(data, "version", ds->version);
    if (ds->token_flags && ds->trained_tokens >= 0)
        cJSON_AddNumberToObject(data, "trained_tokens", (double)ds->trained_tokens);
    cJSON_AddStringToObject(data, "doc_attention", isolated ? "isolated" : "full");
    if (o->eval_data) {
        cJSON_AddStringToObject(data, "eval_dir", o->eval_data);
        cJSON_AddNumberToObject(data, "eval_every", (double)o->eval_every);
        cJSON_AddNumberToObject(data, "eval_batches", (double)o->eval_batches);
    }
    // --resume --allow-new-data on other files: from which step this run trains on them
    if (data_changed_at >= 0) cJSON_AddNumberToObject(data, "data_changed_at_step", (double)data_changed_at);
    // The settings a resume must match (train_settings_json), plus how this launch splits them.
    cJSON *tr = cJSON_Parse(settings);
    cJSON_AddItemToObject(root, "train", tr);
    cJSON_AddNumberToObject(tr, "steps_per_epoch", (double)steps_per_epoch);
    cJSON_AddNumberToObject(tr, "micro_batch", o->micro_batch);
    cJSON_AddNumberToObject(tr, "grad_accum", o->grad_accum);
    cJSON_AddNumberToObject(tr, "tokens_per_step", (double)world * o->micro_batch * o->grad_accum * ds->seq_len);
    cJSON_AddNumberToObject(tr, "save_every", (double)o->save_every);
    cJSON_AddNumberToObject(tr, "keep_last", o->keep_last);
    cJSON *m = cJSON_AddObjectToObject(root, "memory_per_rank_bytes");
    cJSON_AddNumberToObject(m, "params", (double)mem->params);
    cJSON_AddNumberToObject(m, "grads", (double)mem->grads);
    cJSON_AddNumberToObject(m, "optimizer", (double)mem->optimizer);
    cJSON_AddNumberToObject(m, "buffers", (double)mem->buffers);
    cJSON_AddNumberToObject(m, "activations", (double)mem->activations);
    char *text = cJSON_Print(root);
    cJSON_Delete(root);
    char path[4200];
    snprintf(path, sizeof path, "%s/run.json", o->run_dir);
    int rc = zt_write_file_atomic(path, text, strlen(text));
    free(text);
    return rc;
}

// Settings a resumed run must share with the checkpoint for an exact continuation
// (the world size may change; the global batch, data and schedule may not).
static char *train_settings_json(const zt_train_opts *o, const zt_dataset *ds, int isolated,
                                 int64_t global_batch_blocks, int64_t total_steps) {
    cJSON *t = cJSON_CreateObject();
    cJSON_AddNumberToObject(t, "global_batch_blocks", (double)global_batch_blocks);
    cJSON_AddNumberToObject(t, "seq_len", ds->seq_len);
    cJSON_AddNumberToObject(t, "dataset_blocks", (double)ds->total_blocks);
    // The dataset's identity: every file's name, blocks and crc32c (from dataset.json).
    cJSON *files = cJSON_AddArrayToObject(t, "dataset_files");
    for (int i = 0; i < ds->nfiles; i++) {
        char f[400];
        snprintf(f, sizeof f, "%s %lld blocks crc32c %08x", ds->files[i].name, (long long)ds->files[i].blocks,
                 ds->files[i].crc32c);
        cJSON_AddItemToArray(files, cJSON_CreateString(f));
    }
    cJSON_AddStringToObject(t, "layout", ds->per_rank ? "per-rank" : "single");
    // supervised data (version 2): the attention decides what the loss means, so a resume keeps it
    if (ds->token_flags) cJSON_AddStringToObject(t, "doc_attention", isolated ? "isolated" : "full");
    // The flags a resume must match come from the flag table (o->flag_settings, in its order:
    // evenfix, seed, lr, ...); total_steps, derived from --steps/--epochs, follows the seed.
    cJSON *flags = o->flag_settings ? cJSON_Parse(o->flag_settings) : NULL;
    while (flags && flags->child) {
        cJSON *it = cJSON_DetachItemViaPointer(flags, flags->child);
        char key[64];
        snprintf(key, sizeof key, "%s", it->string);
        cJSON_AddItemToObject(t, key, it);
        const int after = !strcmp(key, "seed");
        if (after) cJSON_AddNumberToObject(t, "total_steps", (double)total_steps);
    }
    cJSON_Delete(flags);
    if (!cJSON_GetObjectItemCaseSensitive(t, "total_steps")) cJSON_AddNumberToObject(t, "total_steps", (double)total_steps);
    char *text = cJSON_PrintUnformatted(t);
    cJSON_Delete(t);
    return text;
}

// All state of one run, so that cleanup is one function.
typedef struct {
    zt_comm *comm;            // MPI: host collectives (evenfix, agreement, the CPU engine)
    zt_comm *dcomm;           // NCCL: the GPU engine's collectives on device buffers (cuda only)
    zt_comm_opts copts;
    int cuda;                 // the GPU engine runs this job
    int rank, world;
    zt_dataset ds;
    int ds_open;
    zt_dataset eds;           // --eval-data
    int eds_open;
    int isolated;             // packed documents kept apart (--doc-attention)
    zt_fsdp *f;               // the engine (opaque: engine/fsdp.h)
    int data_changed;         // resumed with --allow-new-data on files other than the checkpoint's
    block_ref *order;
    const uint32_t **blocks;
    FILE *metrics;
    FILE *rank_metrics;       // every rank: its own times and bytes per step
    zt_tb *tb;                // rank 0: RUN/tb (the run's curves)
    zt_tb *tb_rank;           // every rank: RUN/tb/ranks/rank-N (its own)
    FILE *trace;
    zt_liveness *alive;
    zt_power_sampler *power;
    char run_id[64];
    int64_t step;             // optimizer steps completed

    // what this run is: filled by the phases before the loop
    double t_start;
    int threads;
    zt_qwen3_config cfg;
    char backend[192];
    int64_t per_rank_step;    // micro-batch x grad-accum blocks per rank and step
    int64_t global_step_blocks;
    int64_t steps_per_epoch;  // after evenfix
    int64_t total_steps;
    zt_hparams hp;
    char *settings;           // train_settings_json: what a resume must match
    zt_ckpt_slice *slices;    // this rank's slices of every unit (checkpoint save and load)
    zt_ckpt_shards shards;
    char ckpt_path[4200];     // the checkpoint resumed from, then the last one saved
    int64_t start_step;

    // the loop's running totals
    int64_t epoch, steps_run, tokens_seen;
    double t_loop, t_durable;  // t_durable: when the last checkpoint committed (GPU-hours at risk)
    double loss_first, loss_last, lr_last, t_wait_total, t_compute_total;
    int progress_tty;          // rank 0 on a terminal: a progress line rewritten in place
    int64_t saved_step;        // the step of the last checkpoint this job committed (-1: none)
    uint32_t *batch;           // this rank's blocks of the step, copied out of the mapped files
    int eval_signalled;        // --debug-signal-in-eval done
    int eval_stopped;          // ranks whose stop request ended the last evaluation

    zt_run_lock *lock;         // rank 0: RUN/lock, held for the job's life
    char **resume_candidates;  // --resume auto: the checkpoints to try in order (NULL-terminated)
} run_state;

static void run_cleanup(run_state *r) {
    if (r->metrics) fclose(r->metrics);
    if (r->rank_metrics) fclose(r->rank_metrics);
    zt_tb_close(r->tb);
    zt_tb_close(r->tb_rank);
    if (r->trace) fclose(r->trace);
    free(r->order);
    free(r->blocks);
    free(r->batch);
    free(r->settings);
    free(r->slices);
    zt_fsdp_destroy(r->f);
    if (r->ds_open) zt_dataset_close(&r->ds);
    if (r->eds_open) zt_dataset_close(&r->eds);
}

static const char *human(double b, char *buf, size_t n) {
    const char *u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int i = 0;
    while (b >= 1024 && i < 4) b /= 1024, i++;
    snprintf(buf, n, "%.1f %s", b, u[i]);
    return buf;
}

// The terminal's progress line (rank 0): cleared before anything else is printed.
static int g_progress_shown;
static void clear_progress(void) {
    if (!g_progress_shown) return;
    printf("\r\033[K");
    g_progress_shown = 0;
}

static const char *human_time(double s, char *buf, size_t n) {
    if (!(s >= 0) || s > 1e9) snprintf(buf, n, "?");
    else if (s < 60) snprintf(buf, n, "%.0f s", s);
    else if (s < 3600) snprintf(buf, n, "%d min %02d s", (int)(s / 60), (int)s % 60);
    else snprintf(buf, n, "%d h %02d min", (int)(s / 3600), (int)(s / 60) % 60);
    return buf;
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
    return g_stop_signal != 0;
}

// JSON has no NaN or Infinity: such a value is written as null.
static const char *json_num(char *buf, size_t n, const char *fmt, double v) {
    if (isfinite(v)) snprintf(buf, n, fmt, v);
    else snprintf(buf, n, "null");
    return buf;
}

enum { EVAL_DONE = 0, EVAL_STOPPED = 1, EVAL_DATA_BAD = 2 };

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
            clear_progress();
            printf("eval  %5lld | ended after %d of %lld micro-batches: a stop signal reached %d rank%s; not "
                   "recorded, checkpointing\n",
                   (long long)step, res.micro_done, (long long)nmicro, res.stopped, res.stopped == 1 ? "" : "s");
            fflush(stdout);
        }
        r->eval_stopped = res.stopped;
        return EVAL_STOPPED;
    }
    const int64_t targets = res.targets;
    const double loss = targets ? res.loss_sum / (double)targets : NAN, dt = zt_now() - t0;
    if (r->rank == 0) {
        clear_progress();
        printf("eval  %5lld | loss %.4f | ppl %.3f | %lld blocks, %lld targets | %.2f s\n", (long long)step, loss,
               exp(loss), (long long)n, (long long)targets, dt);
        fflush(stdout);
        if (r->metrics) {
            char l[48], p[48];
            fprintf(r->metrics,
                    "{\"step\":%lld,\"eval_loss\":%s,\"eval_ppl\":%s,\"eval_blocks\":%lld,\"eval_targets\":%lld,"
                    "\"eval_time_s\":%.3f%s}\n",
                    (long long)step, json_num(l, sizeof l, "%.17g", loss), json_num(p, sizeof p, "%.6f", exp(loss)),
                    (long long)n, (long long)targets, dt,
                    isfinite(loss) && isfinite(exp(loss)) ? "" : ",\"eval_note\":\"the loss is not finite\"");
            fflush(r->metrics);
        }
        if (r->tb) {
            zt_tb_scalar(r->tb, "eval/loss", step, zt_wall_now(), (float)loss);
            zt_tb_scalar(r->tb, "eval/ppl", step, zt_wall_now(), (float)exp(loss));
            zt_tb_flush(r->tb);
        }
    }
    return EVAL_DONE;
}

// A resumed run continues after step `keep`: lines of a metrics file written for later
// steps (after that checkpoint, before the stop or crash) are dropped, so each step
// appears once. The file is walked by length, not as a C string: a line that does not
// parse (a NUL byte, garbage) is kept as it is and counted, never a reason to drop what
// follows it; only a torn last line (no newline: the crash cut it) goes. Atomic rewrite;
// a missing file is fine.
static int truncate_jsonl_steps(const char *path, int64_t keep) {
    size_t n;
    if (access(path, F_OK) != 0) return 0;
    char *text = zt_read_file(path, &n);
    if (!text) return -1;
    char *out = zt_xmalloc(n + 1);
    size_t o = 0, at = 0;
    int64_t bad = 0, lineno = 0, first_bad = 0;
    while (at < n) {
        char *line = text + at, *end = memchr(line, '\n', n - at);
        const size_t len = end ? (size_t)(end - line) + 1 : n - at;
        lineno++;
        const int has_nul = memchr(line, 0, len) != NULL;
        cJSON *j = has_nul ? NULL : cJSON_ParseWithLength(line, len);
        const cJSON *st = j ? cJSON_GetObjectItemCaseSensitive(j, "step") : NULL;
        const int later = cJSON_IsNumber(st) && st->valuedouble > (double)keep;
        const int torn = !j && !end;  // a last line cut short by the crash
        if (!j && !torn && !bad++) first_bad = lineno;
        cJSON_Delete(j);
        if (!later && !torn) memcpy(out + o, line, len), o += len;
        at += len;
    }
    if (bad)
        fprintf(stderr, "zerotrain: warning: %s: %lld line%s that %s not parse (first: line %lld) kept as %s\n", path,
                (long long)bad, bad == 1 ? "" : "s", bad == 1 ? "does" : "do", (long long)first_bad,
                bad == 1 ? "it is" : "they are");
    int rc = o == n ? 0 : zt_write_file_atomic(path, out, o);
    free(out);
    free(text);
    return rc;
}

// TensorBoard: rank 0 the run's curves in RUN/tb, every rank its own in RUN/tb/ranks/rank-N;
// on resume the records of steps after the checkpoint go first (one curve per tag).
static int open_tensorboard(const zt_train_opts *o, run_state *r, int64_t start_step) {
    char dir[4200], host[256] = "";
    gethostname(host, sizeof host - 1);
    for (char *c = host; *c; c++)
        if (*c == '/' || *c == ' ') *c = '_';
    for (int k = 0; k < 2; k++) {
        if (k == 0 && r->rank != 0) continue;
        if (k == 0) snprintf(dir, sizeof dir, "%s/tb", o->run_dir);
        else snprintf(dir, sizeof dir, "%s/tb/ranks/rank-%05d", o->run_dir, r->rank);
        if (o->resume && zt_tb_truncate_dir(dir, start_step) < 0) return -1;
        zt_tb *tb = zt_tb_open(dir, host[0] ? host : "host");
        if (!tb) return -1;
        if (k == 0) r->tb = tb;
        else r->tb_rank = tb;
    }
    return 0;
}

// ---- phases of a run, in the order train_body calls them ----

// OpenMP and OpenBLAS threads: --threads, else OMP_NUM_THREADS, else the node's cores
// split between the ranks on it.
static void set_threads(const zt_train_opts *o, run_state *r) {
    int threads = o->threads;
    if (threads > 0) {
        omp_set_num_threads(threads);
        openblas_set_num_threads(threads);
    } else if (!getenv("OMP_NUM_THREADS")) {
        // Ranks sharing a node split its cores instead of each taking all of them.
        zt_comm_info ci;
        zt_comm_get_info(r->comm, &ci);
        long cores = sysconf(_SC_NPROCESSORS_ONLN);
        threads = (int)(cores / (ci.local_world > 0 ? ci.local_world : 1));
        if (threads < 1) threads = 1;
        omp_set_num_threads(threads);
        openblas_set_num_threads(threads);
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
        if (agree(r->comm, ok, "choosing the device") != 0) return -1;
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
    po.device = r->cuda ? "cuda" : "cpu";  // check 3 inspects each rank's GPU on the cuda backend
    if (zt_preflight_run(r->comm, &po, stdout) != 0)
        return zt_err_prefix("stopping before training (pass --no-preflight to override)");
    return 0;
}

// Every rank maps all files; crc/tokens were checked by the gate (or here, split by rank).
static int open_data(const zt_train_opts *o, run_state *r) {
    const int R0 = r->rank == 0;
    const zt_qwen3_config *cfg = &r->cfg;
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
    if (agree(r->comm, ok, "opening the dataset") != 0) return -1;
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
                    targets += zt_qwen3_count_targets(zt_dataset_block(&r->eds, fi, b), r->eds.seq_len, r->isolated);
            if (targets == 0)
                ok = zt_err("--eval-data %s: the %lld block%s an evaluation reads hold no trained target (every token "
                            "is masked out of the loss: packed with --train-on rules that leave nothing?), so the "
                            "validation loss would be 0/0",
                            o->eval_data, (long long)n, n == 1 ? "" : "s") == 0;
        }
        if (agree(r->comm, ok, "opening the evaluation dataset") != 0) return -1;
        if (R0) {
            char when[64] = "";
            if (o->eval_every) snprintf(when, sizeof when, "every %lld steps and ", (long long)o->eval_every);
            printf("eval: %s: %lld blocks, evaluated %safter the last step (%.2f s)\n", o->eval_data,
                   (long long)r->eds.total_blocks, when, zt_now() - t0);
        }
    }
    if (R0 && ds->seq_len > cfg->max_position_embeddings)
        fprintf(stderr, "zerotrain: warning: dataset seq_len %d exceeds the model's max_position_embeddings %lld\n",
                ds->seq_len, (long long)cfg->max_position_embeddings);
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
    if (agree(r->comm, r->steps_per_epoch >= 1 ||
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
    const zt_qwen3_layout *lay = zt_fsdp_layout(r->f);
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
    const int ok = zt_qwen3_load_hf_slices(lay, o->init, lo, valid, dst) == 0;
    if (!ok) zt_err_prefix("--init %s", o->init);
    free(lo), free(valid), free(dst);
    if (agree(r->comm, ok, "loading --init weights") != 0) return -1;
    if (r->rank == 0) printf("init: loaded Hugging Face weights from %s (%.2f s)\n", o->init, zt_now() - t0);
    return 0;
}

// --resume: this rank's slices of the canonical vectors, at any world size, after the
// checkpoint's model config, settings and data cursor are checked against this run.
// *load_failed = 1 when everything matched but reading the data failed (a checksum, a
// short file): --resume auto then tries the next candidate.
static int resume_one(const zt_train_opts *o, run_state *r, const char *from, int *load_failed) {
    const zt_dataset *ds = &r->ds;
    const double t0 = zt_now();
    *load_failed = 0;
    int ok = zt_ckpt_resolve(strcmp(from, "latest") ? from : o->run_dir, r->ckpt_path, sizeof r->ckpt_path) == 0;
    const char *ckpt_path = r->ckpt_path;
    zt_ckpt_meta meta;
    zt_qwen3_config saved_cfg;
    char *saved = NULL, diff[1024];
    if (ok) ok = zt_ckpt_open_meta(ckpt_path, &meta, &saved_cfg, &saved) == 0;
    if (ok && zt_ckpt_config_diff(&saved_cfg, &r->cfg, diff, sizeof diff) > 0)
        ok = zt_err("--resume %s: the model config differs from the checkpoint's: %s", ckpt_path, diff) == 0;
    // The dataset's identity (dataset_files, dataset_blocks) is compared like any other
    // setting, with its own way out; a checkpoint written before dataset_files existed
    // has none to compare.
    int has_files = 0, data_differs = 0;
    if (ok && saved && *saved) {
        cJSON *sj = cJSON_Parse(saved), *nj = cJSON_Parse(r->settings);
        has_files = cJSON_GetObjectItemCaseSensitive(sj, "dataset_files") != NULL;
        for (int k = 0; k < 2 && has_files; k++) {
            const char *key = k ? "dataset_blocks" : "dataset_files";
            data_differs |= !cJSON_Compare(cJSON_GetObjectItemCaseSensitive(sj, key),
                                           cJSON_GetObjectItemCaseSensitive(nj, key), 1);
        }
        cJSON_Delete(sj);
        cJSON_Delete(nj);
        const char *may_differ[3] = {NULL, NULL, NULL};
        if (!has_files || o->allow_new_data) may_differ[0] = "dataset_files";
        if (o->allow_new_data) may_differ[1] = "dataset_blocks";
        ok = zt_ckpt_check_train_json(saved, r->settings, may_differ) == 0;
        if (!ok && data_differs) {
            char why[ZT_ERR_MAX];
            snprintf(why, sizeof why, "%s", zt_errmsg());
            zt_err("%.1800s (this run's dataset is not the one the checkpoint trained on; pass --allow-new-data "
                   "to continue on it anyway)", why);
        }
        if (!ok) zt_err_prefix("--resume %s", ckpt_path);
        r->data_changed = ok && data_differs;
    }
    free(saved);
    if (ok && ds->per_rank && meta.world_size != r->world)
        ok = zt_err("--resume %s: saved by %d ranks on a per-rank dataset; it can only continue on %d ranks",
                    ckpt_path, meta.world_size, meta.world_size) == 0;
    if (ok && (meta.epoch != meta.step / r->steps_per_epoch || meta.epoch_step != meta.step % r->steps_per_epoch))
        ok = zt_err("--resume %s: its data cursor (epoch %lld, step %lld of the epoch) does not match %lld steps "
                    "per epoch of this run", ckpt_path, (long long)meta.epoch, (long long)meta.epoch_step,
                    (long long)r->steps_per_epoch) == 0;
    if (agree(r->comm, ok, "reading the checkpoint to resume") != 0) return -1;
    // Collective: refuses a model config that differs (naming the fields) and bad checksums.
    zt_comm_watch_begin(r->comm, "checkpoint load (HDF5 collective read)");  // first-step deadline applies
    const int load_rc = zt_ckpt_load(MPI_COMM_WORLD, ckpt_path, zt_fsdp_layout(r->f), &meta, &r->shards);
    zt_comm_watch_end(r->comm);
    if (load_rc != 0) {
        *load_failed = 1;
        return zt_err_prefix("--resume");
    }
    r->start_step = meta.step;
    r->tokens_seen = meta.tokens_seen;
    snprintf(r->run_id, sizeof r->run_id, "%s", meta.run_id);  // one logical run across restarts
    zt_fsdp_set_step(r->f, meta.step);  // Adam's bias-correction step and the LR schedule continue
    r->step = meta.step;
    if (r->rank == 0)
        printf("resume: %s: step %lld (epoch %lld, %lld steps into it), saved by %d rank%s, loaded by %d (%.2f s)\n",
               ckpt_path, (long long)meta.step, (long long)meta.epoch, (long long)meta.epoch_step, meta.world_size,
               meta.world_size == 1 ? "" : "s", r->world, zt_now() - t0);
    if (r->start_step >= r->total_steps && r->rank == 0)
        printf("resume: the checkpoint is already at step %lld of %lld; nothing to train\n", (long long)r->start_step,
               (long long)r->total_steps);
    return 0;
}

// --resume: one checkpoint; --resume auto: its candidates in order, past any whose data
// fails to load (a checksum, a truncated file), naming what was skipped. The load is
// collective and agreed, so every rank moves to the same next candidate.
static int resume_from_checkpoint(const zt_train_opts *o, run_state *r) {
    char **cand = r->resume_candidates;
    const int is_auto = cand && cand[0] && o->resume == cand[0];
    if (!is_auto) {
        int load_failed;
        return resume_one(o, r, o->resume, &load_failed);
    }
    char skipped[4096] = "";
    for (int i = 0; cand[i]; i++) {
        int load_failed;
        if (resume_one(o, r, cand[i], &load_failed) == 0) {
            if (skipped[0] && r->rank == 0)
                fprintf(stderr, "zerotrain: warning: --resume auto: skipped %s; resumed from %s instead\n", skipped,
                        r->ckpt_path);
            return 0;
        }
        if (!load_failed) return -1;  // a mismatch of config or settings: an older checkpoint would not fit either
        const size_t n = strlen(skipped);
        snprintf(skipped + n, sizeof skipped - n, "%s%.1500s", n ? "; " : "", zt_errmsg());
        if (r->rank == 0)
            fprintf(stderr, "zerotrain: warning: --resume auto: %s does not load (%.1500s)%s\n", cand[i], zt_errmsg(),
                    cand[i + 1] ? "; trying the next newest checkpoint" : "");
    }
    return zt_err("--resume auto: no checkpoint of %s/checkpoints loads: %.3000s; refusing to start over them: name "
                  "one with --resume PATH, or pass --overwrite to discard them",
                  o->run_dir, skipped);
}

// The engine: NCCL communicators (cuda), the sharded model and optimizer state, then its
// starting point: --init weights, or the checkpoint of --resume, copied to the device.
static int build_engine(const zt_train_opts *o, run_state *r) {
    const zt_qwen3_config cfg = r->cfg;
    const zt_dataset *ds = &r->ds;
    const zt_hparams hp = r->hp;
    char backend[192] = "cpu backend";
    int ok = 1;
    if (r->cuda) {
        // Its own flight recorders (RUN/nccl/ranks/rank-N.flight): a deadline report on the
        // NCCL comm summarises the peers' NCCL recorders, not the MPI comm's.
        char ndir[4200];
        snprintf(ndir, sizeof ndir, "%s/nccl", o->run_dir);
        zt_comm_opts dco = r->copts;
        dco.run_dir = ndir;
        MPI_Comm world = MPI_COMM_WORLD;
        ok = zt_cuda_comm_init(&r->dcomm, &world, -1, &dco) == 0;
        if (agree(r->comm, ok, "creating the NCCL communicators") != 0) return -1;
        zt_fsdp_cuda_describe(r->dcomm, backend, sizeof backend);
        size_t bl = strlen(backend);
        snprintf(backend + bl, sizeof backend - bl, ", %s attention%s", o->attention_cudnn ? "cuDNN flash" : "GEMM",
                 o->recompute ? ", activation recomputation" : "");
    }

    snprintf(r->backend, sizeof r->backend, "%s", backend);
    if (!r->cuda && (o->attention_cudnn || o->recompute) && r->rank == 0)
        fprintf(stderr, "zerotrain: warning: --attention cudnn and --recompute apply to the cuda backend; the cpu "
                        "backend ignores them\n");

    // ---- model and optimizer state, sharded ----
    const zt_fsdp_config ec = {.backend = r->cuda ? "cuda" : "cpu", .comm = r->comm, .dcomm = r->dcomm, .cfg = &cfg,
                               .micro_batch = o->micro_batch, .grad_accum = o->grad_accum, .seq_len = ds->seq_len,
                               .hp = hp, .seed = o->seed, .recompute = o->recompute,
                               .attention_cudnn = o->attention_cudnn};
    ok = zt_fsdp_create(&ec, &r->f) == 0;
    if (ok) ok = zt_fsdp_set_data(r->f, ds->token_flags, r->isolated) == 0;
    if (agree(r->comm, ok, "building the model") != 0) return -1;
    if (o->init && load_init_weights(o, r) != 0) return -1;
    const int nunits = zt_fsdp_unit_count(r->f);
    r->slices = zt_xcalloc((size_t)nunits, sizeof *r->slices);
    for (int u = 0; u < nunits; u++) {
        zt_fsdp_shard sh;
        zt_fsdp_get_shard(r->f, u, &sh);
        r->slices[u] = (zt_ckpt_slice){sh.numel, sh.lo, sh.valid, sh.master, sh.m, sh.v};
    }
    r->shards = (zt_ckpt_shards){nunits, r->slices};
    r->settings = train_settings_json(o, ds, r->isolated, r->global_step_blocks, r->total_steps);
    if (o->resume && resume_from_checkpoint(o, r) != 0) return -1;
    if ((o->init || o->resume) && zt_fsdp_to_device(r->f) != 0) return -1;  // the loaded host shards to the GPU
    return 0;
}

// Rank 0: the model, the memory per rank and the run's shape, before the first step.
static void print_plan(const zt_train_opts *o, const run_state *r, const zt_fsdp_memory *mem) {
    if (r->rank != 0) return;
    const zt_qwen3_config *cfg = &r->cfg;
    const int threads = r->threads;
    char b1[32], b2[32], b3[32], b4[32], b5[32];
    printf("model: Qwen3 %d layers, d=%lld, ffn=%lld, heads %d/%d, head_dim %d, vocab %lld, %s, %.2f M params\n",
           cfg->num_layers, (long long)cfg->hidden_size, (long long)cfg->intermediate_size, cfg->num_heads,
           cfg->num_kv_heads, cfg->head_dim, (long long)cfg->vocab_size, cfg->tie_word_embeddings ? "tied" : "untied",
           zt_qwen3_param_count(cfg) / 1e6);
    printf("memory per rank: params %s, grads %s, optimizer %s (sharded 1/%d), gather/scatter buffers %s, "
           "activations %s\n",
           human((double)mem->params, b1, sizeof b1), human((double)mem->grads, b2, sizeof b2),
           human((double)mem->optimizer, b3, sizeof b3), r->world, human((double)mem->buffers, b4, sizeof b4),
           human((double)mem->activations, b5, sizeof b5));
    printf("train: %lld steps (%lld per epoch), %d rank%s x micro-batch %d x grad-accum %d x seq %d = %lld tokens "
           "per step, %d thread%s per rank, %s\n",
           (long long)r->total_steps, (long long)r->steps_per_epoch, r->world, r->world == 1 ? "" : "s",
           o->micro_batch, o->grad_accum, r->ds.seq_len, (long long)(r->global_step_blocks * r->ds.seq_len), threads,
           threads == 1 ? "" : "s", r->backend);
}

// ---- the run log: run.json, metrics.jsonl, per-rank files, TensorBoard, heartbeat, complete.json ----

// Opens every file the run writes to (rank 0: run.json, metrics.jsonl, RUN/tb; every rank:
// its metrics, its TensorBoard and --trace-blocks file). Agreed: all ranks or none go on.
static int runlog_open(const zt_train_opts *o, run_state *r, const zt_fsdp_memory *mem) {
    const int R0 = r->rank == 0;
    const int64_t start_step = r->start_step;
    char path[4200];
    int ok = 1;
    if (R0 && o->overwrite && !o->resume) {
        // A fresh run in a reused directory: nothing of the old run may look like this one's
        // (a stale complete.json would read as COMPLETE; old checkpoints would resume into it).
        const char *stale[] = {"checkpoints", "complete.json", "heartbeat.json", "final", "watch.json", "report.html", "tb"};
        for (size_t i = 0; i < sizeof stale / sizeof stale[0] && ok; i++) {
            snprintf(path, sizeof path, "%s/%s", o->run_dir, stale[i]);
            ok = remove_tree(path) == 0;
        }
    }
    if (R0 && ok) {
        if (!r->run_id[0]) make_run_id(r->run_id, sizeof r->run_id);
        ok = zt_run_lock_set_run_id(r->lock, r->run_id) == 0;  // a second job's refusal names it
    }
    if (R0 && ok) {
        ok = write_run_json(o, &r->cfg, &r->ds, r->isolated, r->run_id, r->world, r->settings, r->steps_per_epoch,
                            r->threads, mem, r->data_changed ? start_step : -1) == 0;
        if (ok) {
            snprintf(path, sizeof path, "%s/metrics.jsonl", o->run_dir);
            if (o->resume) ok = truncate_jsonl_steps(path, start_step) == 0;
            r->metrics = ok ? fopen(path, o->resume ? "a" : "w") : NULL;
            if (ok && !r->metrics) ok = zt_err("%s: cannot open for writing", path) == 0;
        }
    }
    if (ok) {  // every rank: its own compute / wait split and bytes per step
        snprintf(path, sizeof path, "%s/ranks/rank-%05d.metrics.jsonl", o->run_dir, r->rank);
        if (o->resume) ok = truncate_jsonl_steps(path, start_step) == 0;
        r->rank_metrics = ok ? fopen(path, o->resume ? "a" : "w") : NULL;
        if (ok && !r->rank_metrics) ok = zt_err("%s: cannot open for writing", path) == 0;
    }
    if (ok && o->tensorboard) ok = open_tensorboard(o, r, start_step) == 0;
    if (ok && o->trace_blocks) {  // every rank: its own block ids per step
        snprintf(path, sizeof path, "%s/ranks/rank-%05d.blocks", o->run_dir, r->rank);
        r->trace = fopen(path, o->resume ? "a" : "w");
        if (!r->trace) ok = zt_err("%s: cannot open for writing", path) == 0;
    }
    return agree(r->comm, ok, "writing run.json");
}

// One finished step: this rank's metrics and TensorBoard; on rank 0 the heartbeat, the
// run's metrics and TensorBoard, the plain log line and the terminal's progress line.
static void runlog_step(const zt_train_opts *o, run_state *r, int64_t step, const zt_fsdp_stats *sp) {
    const zt_fsdp_stats s = *sp;
    const int64_t total_steps = r->total_steps, steps_per_epoch = r->steps_per_epoch, epoch = r->epoch;
    const int64_t tokens_seen = r->tokens_seen, steps_run = r->steps_run;
    const double tok_s = (double)s.tokens / s.t_step;
    if (r->tb_rank) {  // this rank's own view: its throughput and how long it waited
        const double wt = zt_wall_now();
        zt_tb_scalar(r->tb_rank, "rank/tok_per_s", step + 1, wt, (float)(tok_s / r->world));
        zt_tb_scalar(r->tb_rank, "rank/step_time_s", step + 1, wt, (float)s.t_step);
        zt_tb_scalar(r->tb_rank, "rank/comm_wait_share", step + 1, wt, (float)(s.t_comm_wait / s.t_step));
        zt_tb_scalar(r->tb_rank, "rank/bytes_gathered", step + 1, wt, (float)s.bytes_gathered);
        zt_tb_scalar(r->tb_rank, "rank/bytes_scattered", step + 1, wt, (float)s.bytes_scattered);
        double util;
        const double watts = zt_power_last(r->power, &util);
        if (watts >= 0) {  // this rank's GPU, as NVML last saw it (RUN/ranks/rank-N.power.csv has every sample)
            zt_tb_scalar(r->tb_rank, "power/board_w", step + 1, wt, (float)watts);
            zt_tb_scalar(r->tb_rank, "power/util_pct", step + 1, wt, (float)util);
        }
        if (zt_tb_flush(r->tb_rank) != 0) {
            fprintf(stderr, "zerotrain: warning: %s; TensorBoard output of rank %d stops here\n", zt_errmsg(),
                    r->rank);
            zt_tb_close(r->tb_rank);
            r->tb_rank = NULL;
        }
    }
    fprintf(r->rank_metrics,
            "{\"step\":%lld,\"rank\":%d,\"tok_per_s\":%.1f,\"step_time_s\":%.4f,\"compute_s\":%.4f,"
            "\"comm_wait_s\":%.4f,\"bytes_gathered\":%lld,\"bytes_scattered\":%lld}\n",
            (long long)step + 1, r->rank, tok_s / r->world, s.t_step, s.t_compute, s.t_comm_wait,
            (long long)s.bytes_gathered, (long long)s.bytes_scattered);
    fflush(r->rank_metrics);  // a rank that dies or hangs next leaves whole lines behind
    if (r->rank != 0) return;
    // GPU-hours (rank-hours on the CPU backend): spent in this process so far, projected
    // per epoch at the mean step time, and at risk = spent since the last checkpoint.
    const double now = zt_now(), el = now - r->t_loop, mean_step = el / (double)steps_run;
    zt_heartbeat hb = {.run_id = r->run_id, .state = "running", .step = step + 1, .total_steps = total_steps,
                       .epoch = epoch, .tokens = tokens_seen, .elapsed_s = now - r->t_start,
                       .step_time_s = s.t_step, .tok_per_s = tok_s, .loss = s.loss, .world_size = r->world,
                       .gpu_hours = r->world * el / 3600.0,
                       .gpu_hours_per_epoch = r->world * mean_step * (double)steps_per_epoch / 3600.0,
                       .gpu_hours_at_risk = r->world * (now - r->t_durable) / 3600.0};
    if (zt_heartbeat_write(o->run_dir, &hb) != 0) fprintf(stderr, "zerotrain: warning: %s\n", zt_errmsg());
    fprintf(r->metrics,
            "{\"step\":%lld,\"epoch\":%lld,\"loss\":%.6f,\"lr\":%.6e,\"grad_norm\":%.6f,\"clip_coef\":%.6f,"
            "\"tokens\":%lld,\"tok_per_s\":%.1f,\"tok_per_s_per_rank\":%.1f,\"step_time_s\":%.4f,"
            "\"compute_s\":%.4f,\"comm_wait_s\":%.4f,\"bytes_gathered\":%lld,\"bytes_scattered\":%lld,"
            "\"gpu_hours\":%.6f,\"gpu_hours_at_risk\":%.6f,\"elapsed_s\":%.3f,\"trained_tokens\":%lld}\n",
            (long long)step + 1, (long long)epoch, s.loss, s.lr, s.grad_norm, s.clip_coef,
            (long long)tokens_seen, tok_s, tok_s / r->world, s.t_step, s.t_compute, s.t_comm_wait,
            (long long)s.bytes_gathered, (long long)s.bytes_scattered, hb.gpu_hours, hb.gpu_hours_at_risk,
            now - r->t_start, (long long)s.targets);
    fflush(r->metrics);
    if (r->tb) {
        const double wt = zt_wall_now();
        const struct { const char *tag; double v; } sc[] = {
            {"train/loss", s.loss}, {"train/lr", s.lr}, {"train/grad_norm", s.grad_norm},
            {"train/clip_coef", s.clip_coef}, {"train/trained_tokens", (double)s.targets},
            {"train/tokens", (double)tokens_seen}, {"perf/tok_per_s", tok_s},
            {"perf/tok_per_s_per_rank", tok_s / r->world}, {"perf/step_time_s", s.t_step},
            {"perf/comm_wait_share", s.t_comm_wait / s.t_step},
            {"comm/bytes_gathered", (double)s.bytes_gathered}, {"comm/bytes_scattered", (double)s.bytes_scattered},
            {"cost/gpu_hours", hb.gpu_hours}, {"cost/gpu_hours_at_risk", hb.gpu_hours_at_risk}};
        for (size_t k = 0; k < sizeof sc / sizeof sc[0]; k++)
            zt_tb_scalar(r->tb, sc[k].tag, step + 1, wt, (float)sc[k].v);
        if (zt_tb_flush(r->tb) != 0) {
            fprintf(stderr, "zerotrain: warning: %s; TensorBoard output stops here (metrics.jsonl goes on)\n",
                    zt_errmsg());
            zt_tb_close(r->tb);
            r->tb = NULL;
        }
    }
    const int logged =
        o->log_every > 0 && ((step + 1) % o->log_every == 0 || steps_run == 1 || step + 1 == total_steps);
    clear_progress();  // the progress line gives way to the plain one
    if (logged) {
        printf("step %5lld/%lld | epoch %lld | loss %.4f | lr %.3e | grad norm %7.4f%s | %8.0f tok/s (%.0f "
               "/rank) | %.3f s, comm wait %.0f%%\n",
               (long long)step + 1, (long long)total_steps, (long long)epoch, s.loss, s.lr, s.grad_norm,
               s.clip_coef < 1 ? " (clipped)" : "", tok_s, tok_s / r->world, s.t_step,
               100.0 * s.t_comm_wait / s.t_step);
        fflush(stdout);
    }
    if (r->progress_tty && step + 1 < total_steps) {
        // on a terminal: one line rewritten in place, ETA from the mean step time so far
        int64_t next_save = steps_per_epoch - (step + 1) % steps_per_epoch;
        if (o->save_every > 0 && o->save_every - (step + 1) % o->save_every < next_save)
            next_save = o->save_every - (step + 1) % o->save_every;
        if (total_steps - (step + 1) < next_save) next_save = total_steps - (step + 1);
        char eta[32], eta_save[32];
        printf("[%lld/%lld %4.1f%%] epoch %lld | %.2fM tokens | %.0f tok/s | loss %.4f | ETA %s | next "
               "checkpoint in %lld step%s (%s)",
               (long long)step + 1, (long long)total_steps, 100.0 * (double)(step + 1) / (double)total_steps,
               (long long)epoch, (double)tokens_seen / 1e6, tok_s, s.loss,
               human_time(mean_step * (double)(total_steps - step - 1), eta, sizeof eta), (long long)next_save,
               next_save == 1 ? "" : "s", human_time(mean_step * (double)next_save, eta_save, sizeof eta_save));
        fflush(stdout);
        g_progress_shown = 1;
    }
}

// Rank 0, after the loop: the summary line, then the heartbeat "stopped", or the heartbeat
// "complete" and complete.json (the watcher's COMPLETE) once the final checkpoint and
// final/ are committed.
static void runlog_summary(const run_state *r, int stopped) {
    if (r->rank != 0) return;
    clear_progress();
    const double loop_s = zt_now() - r->t_loop;
    const double tokens = (double)(r->steps_run * r->global_step_blocks * r->ds.seq_len);
    if (r->steps_run > 0)
        printf("%s: %lld steps, %lld tokens in %.1f s (%.0f tok/s, %.0f per rank); rank 0 waited on collectives "
               "%.1f%% of the time; loss %.4f -> %.4f\n",
               stopped ? "stopped" : "done", (long long)r->steps_run, (long long)tokens, loop_s, tokens / loop_s,
               tokens / loop_s / r->world, 100 * r->t_wait_total / (r->t_wait_total + r->t_compute_total),
               r->loss_first, r->loss_last);
}

// GPU-hours (rank-hours on cpu) this process spent training: the same figure as the last
// metrics line's gpu_hours.
static double gpu_hours_spent(const run_state *r) { return r->world * (zt_now() - r->t_loop) / 3600.0; }

static void runlog_stopped(const zt_train_opts *o, const run_state *r) {
    if (r->rank != 0) return;
    const double el = zt_now() - r->t_loop;
    zt_heartbeat hb = {.run_id = r->run_id, .state = "stopped", .step = r->step, .total_steps = r->total_steps,
                       .epoch = r->epoch, .tokens = r->tokens_seen, .elapsed_s = zt_now() - r->t_start,
                       .loss = r->loss_last, .world_size = r->world, .gpu_hours = gpu_hours_spent(r),
                       .gpu_hours_per_epoch = r->steps_run ? r->world * el / (double)r->steps_run *
                                                                 (double)r->steps_per_epoch / 3600.0 : 0};
    if (zt_heartbeat_write(o->run_dir, &hb) != 0) fprintf(stderr, "zerotrain: warning: %s\n", zt_errmsg());
}

static int runlog_complete(const zt_train_opts *o, const run_state *r) {
    if (r->rank != 0) return 0;
    const double el = zt_now() - r->t_loop;
    const int64_t steps_run = r->steps_run, total_steps = r->total_steps;
    zt_heartbeat hb = {.run_id = r->run_id, .state = "complete", .step = total_steps, .total_steps = total_steps,
                       .epoch = r->epoch, .tokens = r->tokens_seen, .elapsed_s = zt_now() - r->t_start,
                       .tok_per_s = steps_run ? steps_run * r->global_step_blocks * r->ds.seq_len / el : 0,
                       .loss = r->loss_last, .world_size = r->world, .gpu_hours = r->world * el / 3600.0,
                       .gpu_hours_per_epoch = steps_run ? r->world * el / (double)steps_run *
                                                              (double)r->steps_per_epoch / 3600.0 : 0};
    zt_heartbeat_write(o->run_dir, &hb);
    char path[4200], final_dir[4200] = "";
    if (o->save_final) snprintf(final_dir, sizeof final_dir, "%s/final", o->run_dir);
    cJSON *c = cJSON_CreateObject();  // paths may hold any byte: cJSON escapes them
    cJSON_AddStringToObject(c, "run_id", r->run_id);
    cJSON_AddNumberToObject(c, "step", (double)total_steps);
    cJSON_AddNumberToObject(c, "time", (double)time(NULL));
    cJSON_AddStringToObject(c, "checkpoint", r->ckpt_path);
    cJSON_AddStringToObject(c, "final", final_dir);
    char *text = cJSON_PrintUnformatted(c);
    cJSON_Delete(c);
    snprintf(path, sizeof path, "%s/complete.json", o->run_dir);
    const int wrc = zt_write_file_atomic(path, text, strlen(text));
    free(text);
    if (wrc != 0) return -1;
    printf("GPU-hours (rank-hours on cpu): %.4f spent in this process, %.4f per epoch projected\n", hb.gpu_hours,
           hb.gpu_hours_per_epoch);
    return 0;
}

// ---- the loop's parts ----

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

// Like agree(), but every rank ends up with the message of the lowest failing rank (a data
// file that changed under one rank is named in every rank's error and in the heartbeat).
// 0: every rank is ok; 1: some rank failed (zt_err says why); -1: the collective failed.
static int agree_named(run_state *r, int ok, const char *phase) {
    int64_t first = ok ? r->world : r->rank;
    if (zt_allreduce(r->comm, &first, &first, 1, ZT_DT_I64, ZT_RED_MIN, phase) != 0) return -1;
    if (first >= r->world) return 0;
    char msg[1800];
    snprintf(msg, sizeof msg, "%s", zt_errmsg());
    if (zt_broadcast(r->comm, msg, sizeof msg, ZT_DT_U8, (int)first, phase) != 0) return -1;
    msg[sizeof msg - 1] = 0;
    if (first != r->rank) zt_err("rank %lld: %s", (long long)first, msg);
    else zt_err("%s", msg);
    return 1;
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
    return zt_err("step %lld: %s; stopping before the update. Lower --lr or check the data; the last checkpoint "
                  "is untouched",
                  (long long)step + 1, what);
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
    r->lr_last = s->lr;
}

// Evaluation after `step` steps: every --eval-every steps and after the last one.
// EVAL_DONE, EVAL_STOPPED, EVAL_DATA_BAD (run_eval), or -1.
static int maybe_eval(const zt_train_opts *o, run_state *r, int64_t step, int last) {
    if (!o->eval_data || !(last || (o->eval_every > 0 && step % o->eval_every == 0))) return EVAL_DONE;
    zt_comm_set_context(r->comm, step, r->epoch, -1);
    return run_eval(o, r, step);
}

// The checkpoint policy after `step` steps: at each epoch end (behind a barrier every rank
// reaches), every --save-every steps, at the last step, and when a stop was requested.
static int maybe_save(const zt_train_opts *o, run_state *r, int64_t step, int last, int stop) {
    if (step == r->saved_step) return 0;  // committed already (a stop right after a save point)
    const int epoch_end = step % r->steps_per_epoch == 0;
    if (epoch_end) {
        zt_comm_set_context(r->comm, step, r->epoch, -1);  // steps completed so far
        if (zt_barrier(r->comm, "epoch-end save") != 0) return -1;
    }
    if (!(epoch_end || last || stop || (o->save_every > 0 && step % o->save_every == 0))) return 0;
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
    if (zt_fsdp_to_host(r->f) != 0) return -1;  // GPU engine: device state to the host copies
    // HDF5 runs its own MPI barriers inside the collective write; the comm watchdog
    // gives them a deadline (--save-timeout) and the usual report instead of a silent hang.
    const double prev_timeout = zt_comm_set_timeout(r->comm, fmax(o->save_timeout, r->copts.timeout_s));
    zt_comm_watch_begin(r->comm, "checkpoint save (HDF5 collective write; limit: --save-timeout)");
    const int save_rc = zt_ckpt_save(MPI_COMM_WORLD, o->run_dir, &meta, zt_fsdp_layout(r->f), r->settings, &r->shards,
                                     o->keep_last, r->ckpt_path, sizeof r->ckpt_path);
    zt_comm_watch_end(r->comm);
    zt_comm_set_timeout(r->comm, prev_timeout);
    if (save_rc != 0) return zt_err_prefix("step %lld", (long long)step);
    r->saved_step = step;
    r->t_durable = zt_now();
    if (r->rank == 0) {
        clear_progress();
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
        ok = remove_tree(path) == 0 && zt_ckpt_export_hf(r->ckpt_path, path, o->save_dtype, 0) == 0;
        if (ok)
            printf("saved: %s (Hugging Face config.json + safetensors, %s, from %s, %.2f s)\n", path,
                   o->save_dtype == ZT_ST_BF16 ? "bf16" : "fp32", r->ckpt_path, zt_now() - ts);
    }
    return agree(r->comm, ok, "exporting final weights");
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
        if (o->debug_signal_at_step > 0 && step + 1 == o->debug_signal_at_step && r->rank == 0) raise(SIGUSR1);
        zt_fsdp_stats s;
        const int flags = (g_stop_signal ? ZT_FSDP_STOP : 0) | (data_ok ? 0 : ZT_FSDP_INPUT_BAD);
        if (zt_fsdp_step(r->f, r->blocks, flags, &s) != 0) return -1;
        // A data file changed under any rank (the step's all-reduce says so; no rank updated):
        // the reason to every rank, a checkpoint of the last good step (the model and optimizer
        // are intact; only the input is not) and the named error.
        if (s.input_bad) {
            if (agree_named(r, data_ok, "step data check") < 0) return -1;
            return data_bad_stop(o, r, step);
        }
        if (r->steps_run == 0) {
            zt_comm_mark_warm(r->comm);
            if (r->dcomm) zt_comm_mark_warm(r->dcomm);
        }
        if (check_finite(r, step, &s) != 0) return -1;
        account_step(r, step, &s);
        runlog_step(o, r, step, &s);

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
                clear_progress();
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
    g_stop_exits = 0;  // from here a stop request checkpoints at the next step boundary
    int stopped = 0;
    const int rc = run_steps(o, r, &stopped);
    if (r->rank == 0) clear_progress();
    if (rc != 0) return -1;
    runlog_summary(r, stopped);
    if (stopped) {
        runlog_stopped(o, r);
        return 0;
    }
    if (export_final(o, r) != 0) return -1;
    return runlog_complete(o, r);
}

// A run: its phases in order, each agreed by every rank before the next.
static int train_body(const zt_train_opts *o, run_state *r) {
    r->t_start = zt_now();
    set_threads(o, r);
    const char *cfg_src = o->model ? o->model : o->init;  // every rank reads it; they must agree
    if (agree(r->comm, zt_qwen3_config_load(&r->cfg, cfg_src) == 0, "reading the model config") != 0) return -1;
    if (choose_device(o, r) != 0) return -1;
    if (run_gate(o, r, cfg_src) != 0) return -1;
    if (open_data(o, r) != 0) return -1;
    if (deal_blocks(o, r) != 0) return -1;
    if (build_engine(o, r) != 0) return -1;
    zt_fsdp_memory mem;
    zt_fsdp_memory_usage(r->f, &mem);
    print_plan(o, r, &mem);
    if (runlog_open(o, r, &mem) != 0) return -1;
    return train_loop(o, r);
}

// Before the communicators exist: every rank contributes ok; when any failed, every rank
// returns -1 with the lowest failing rank's message (MPI_COMM_WORLD, no deadline: nothing
// here waits on anything but the other ranks' start-up).
static int agree_start(int ok) {
    int all = 0, rank = 0, world = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (all) return 0;
    int me = ok ? world : rank, first = world;
    MPI_Allreduce(&me, &first, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    char msg[ZT_ERR_MAX];
    snprintf(msg, sizeof msg, "%s", zt_errmsg());
    MPI_Bcast(msg, (int)sizeof msg, MPI_CHAR, first, MPI_COMM_WORLD);
    if (first != rank && world > 1) return zt_err("rank %d: %.2000s", first, msg);
    return zt_err("%s", msg);
}

// Everything between taking the run directory and handing it back: --resume auto's choice,
// the fresh-start guards, the communicators, the run itself. Every early refusal here is
// agreed (agree_start), so all ranks return together.
static int train_locked(zt_train_opts *eff, run_state *r, char ***candidates) {
    const zt_train_opts *o = eff;
    // --resume auto (what a requeued batch job wants): continue from RUN/checkpoints/latest,
    // or, when latest is missing or damaged, from the newest complete checkpoint that
    // reads; start fresh only when the run directory holds no checkpoint at all; refuse when
    // checkpoints are there but none can be resumed from. Never start over saved work. The
    // candidates are loaded in order: one whose data checksums fail is skipped, named.
    if (eff->resume && !strcmp(eff->resume, "auto")) {
        char note[2600];
        const int rc = zt_ckpt_auto_candidates(eff->run_dir, candidates, note, sizeof note);
        if (agree_start(rc >= 0) != 0) return -1;
        if (rc > 0) {
            eff->resume = (*candidates)[0];
            if (note[0] && r->rank == 0) fprintf(stderr, "zerotrain: warning: %s\n", note);
        } else {
            eff->resume = NULL;
            eff->overwrite = 1;  // an earlier attempt that never checkpointed (run.json only): start clean
            zt_err_clear();
        }
    }
    // A fresh run's id from the start, so that a second job's refusal names it (a resumed run
    // takes its checkpoint's when it loads).
    if (!eff->resume && r->rank == 0) {
        make_run_id(r->run_id, sizeof r->run_id);
        zt_run_lock_set_run_id(r->lock, r->run_id);
    }
    // Checked before anything is written, so every rank sees the same answer.
    char path[4200], found[1024];
    snprintf(path, sizeof path, "%s/run.json", o->run_dir);
    struct stat st;
    int ok = 1;
    if (!o->overwrite && !o->resume && stat(path, &st) == 0)
        ok = zt_err("%s already exists: this run directory holds a run; continue it with --resume, pick a new "
                    "--run-dir, or pass --overwrite",
                    path) == 0;
    // Saved checkpoints block a fresh start even without run.json (--keep-last would delete them).
    if (ok && !o->overwrite && !o->resume && zt_ckpt_scan_run(o->run_dir, found, sizeof found) > 0)
        ok = zt_err("%s/checkpoints holds %s: this run directory holds saved work; continue it with --resume "
                    "(auto, latest or a step directory), pick a new --run-dir, or pass --overwrite to discard it",
                    o->run_dir, found) == 0;
    snprintf(path, sizeof path, "%s/ranks", o->run_dir);
    if (ok) ok = zt_mkdirs(path) == 0;
    // A prune a crashed job left half done (only the job holding the lock may clear it).
    if (ok && r->rank == 0) ok = zt_ckpt_clear_removing(o->run_dir, stdout) == 0;
    if (agree_start(ok) != 0) return -1;

    zt_comm_opts co = zt_comm_opts_default();
    if (o->collective_timeout > 0) co.timeout_s = o->collective_timeout;
    if (o->first_collective_timeout > 0) co.first_timeout_s = o->first_collective_timeout;
    if (co.first_timeout_s < co.timeout_s) co.first_timeout_s = co.timeout_s;
    co.run_dir = o->run_dir;
    r->copts = co;
    if (zt_comm_init_mpi(&r->comm, MPI_COMM_WORLD, &co) != 0) return -1;
    zt_comm_info info;
    zt_comm_get_info(r->comm, &info);
    r->alive = zt_liveness_start(o->run_dir, r->rank, o->alive_interval);
    // Power telemetry whenever this rank's GPU is visible to NVML (health is judged by
    // board power, not utilization); silently absent on machines without NVIDIA GPUs.
    r->power = zt_power_start(o->run_dir, r->rank, info.local_rank, 1.0);
    r->resume_candidates = *candidates;
    const int rc = train_body(o, r);
    // The first error is the one reported: what cleaning up and the last heartbeat run into
    // afterwards (a full disk fails both) is appended, never substituted.
    char first[ZT_ERR_MAX] = "";
    if (rc != 0) snprintf(first, sizeof first, "%s", zt_errmsg());
    run_cleanup(r);
    zt_power_stop(r->power);
    zt_liveness_stop(r->alive, rc == 0 ? "done" : "failed");
    if (rc != 0 && r->rank == 0 && r->run_id[0]) {
        zt_heartbeat hb = {.run_id = r->run_id, .state = "failed", .step = r->step, .total_steps = r->total_steps,
                           .epoch = r->epoch, .tokens = r->tokens_seen, .loss = r->loss_last, .world_size = r->world,
                           .elapsed_s = zt_now() - r->t_start, .error = first};
        if (zt_heartbeat_write(o->run_dir, &hb) != 0) {
            const size_t n = strlen(first);
            snprintf(first + n, sizeof first - n, " (then, recording the failure: %.600s)", zt_errmsg());
        }
    }
    if (rc != 0) {  // failures are agreed (every rank is here); name the rank in multi-rank jobs
        if (r->world > 1) zt_err("rank %d: %.3000s", r->rank, first);
        else zt_err("%s", first);
    }
    if (r->dcomm) zt_comm_finalize(r->dcomm);  // after the engine's buffers are gone (run_cleanup)
    zt_comm_finalize(r->comm);
    return rc;
}

int zt_train_run(const zt_train_opts *opts) {
    zt_train_opts eff = *opts;
    const zt_train_opts *o = &eff;
    if (!o->model && !o->init) return zt_err("no model: give --model CONFIG.json|HF_DIR (or --init HF_DIR)");
    // The flag table refuses these with the flag's range; this guards other callers of the API.
    if (o->micro_batch < 1 || o->grad_accum < 1)
        return zt_err("--micro-batch (%d) and --grad-accum (%d) must be >= 1", o->micro_batch, o->grad_accum);
    // SIGUSR1 / SIGTERM: a checkpoint at the next step boundary once training runs; before
    // that (the module, the data, the checkpoint still loading) the process exits at once.
    g_stop_signal = 0;
    g_stop_exits = 1;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGUSR1, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    if (zt_mpi_init_once() != 0) return -1;

    run_state r;
    memset(&r, 0, sizeof r);
    MPI_Comm_rank(MPI_COMM_WORLD, &r.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &r.world);
    // One job per run directory: rank 0 holds RUN/lock until the job ends, before anything in
    // RUN is read for a decision or written (train/run_lock.h).
    zt_run_lock *lock = NULL;
    int ok = 1;
    if (r.rank == 0 && o->run_lock) ok = zt_run_lock_acquire(o->run_dir, &lock) == 0;
    else if (r.rank == 0) ok = zt_mkdirs(o->run_dir) == 0;
    r.lock = lock;
    char **candidates = NULL;
    int rc = agree_start(ok);
    if (rc == 0) rc = train_locked(&eff, &r, &candidates);
    zt_ckpt_free_paths(candidates);
    char msg[ZT_ERR_MAX];
    snprintf(msg, sizeof msg, "%s", zt_errmsg());
    zt_run_lock_release(lock);
    g_stop_exits = 0;
    zt_mpi_finalize_once();
    if (rc != 0) zt_err("%s", msg);
    return rc;
}
