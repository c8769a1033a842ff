// The run log (train/run_log.h): everything a run writes about itself. run.json once;
// per step one metrics record, computed once and rendered by every sink from one table —
// RUN/metrics.jsonl, RUN/ranks/rank-N.metrics.jsonl, RUN/tb and RUN/tb/ranks/rank-N
// (TensorBoard), the heartbeat, the plain log line and the terminal's progress line — so a
// metric added to the table reaches each of them (and the report, which reads metrics.jsonl);
// evaluation lines the same way; the end of a run: summary, heartbeat, complete.json.
#define _GNU_SOURCE
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/common.h"
#include "base/out_file.h"
#include "engine/job_shape.h"
#include "model/family.h"
#include "model/flops.h"
#include "train/agree.h"
#include "train/device_info.h"
#include "train/run_log.h"

void zt_runlog_make_run_id(char *out, size_t n) {
    zt_rng r;
    zt_rng_seed(&r, (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32) ^ (uint64_t)(zt_now() * 1e9));
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    char ts[32];
    strftime(ts, sizeof ts, "%Y%m%dT%H%M%SZ", &tm);
    snprintf(out, n, "%s-%06llx", ts, (unsigned long long)(zt_rng_u64(&r) & 0xffffff));
}

// Where the run's configuration came from: the --config file (path and CRC-32C of its bytes)
// or none, the command line as given, and every flag's resolved value (as --print-config).
static void add_config(cJSON *root, const zt_train_opts *o) {
    cJSON *c = cJSON_AddObjectToObject(root, "config");
    cJSON_AddStringToObject(c, "origin", o->has_config_file ? "config file, then the command line" : "command line");
    if (o->has_config_file) {
        char crc[16];
        snprintf(crc, sizeof crc, "%08x", o->config_crc32c);
        cJSON_AddStringToObject(c, "file", o->config_file);
        cJSON_AddStringToObject(c, "crc32c", crc);
    } else {
        cJSON_AddNullToObject(c, "file");
        cJSON_AddNullToObject(c, "crc32c");
    }
    cJSON *args = cJSON_AddArrayToObject(c, "args");
    for (int i = 1; i < o->argc; i++) cJSON_AddItemToArray(args, cJSON_CreateString(o->argv[i]));
    cJSON *set = o->config_json ? cJSON_Parse(o->config_json) : NULL;
    cJSON_AddItemToObject(c, "settings", set ? set : cJSON_CreateObject());
}

// What ran the run: the device, the peak MFU is against, the FLOP convention, the libraries.
static void add_device(cJSON *root, const zt_train_opts *o, const run_state *r) {
    cJSON *d = cJSON_AddObjectToObject(root, "device");
    cJSON_AddStringToObject(d, "backend", r->cuda ? "cuda" : "cpu");
    cJSON_AddStringToObject(d, "name", r->flops.device_name);
    cJSON_AddNumberToObject(d, "count", r->world);
    cJSON_AddStringToObject(d, "kind", r->cuda ? "GPU per rank" : "CPU cores per rank");
    cJSON_AddStringToObject(d, "described", r->backend);
    static const char *const kinds[] = {"unknown", "preset", "given", "cpu_gemm_probe"};
    if (isfinite(r->flops.peak_flops)) cJSON_AddNumberToObject(d, "peak_tflops_per_rank", r->flops.peak_flops / 1e12);
    else cJSON_AddNullToObject(d, "peak_tflops_per_rank");
    cJSON_AddStringToObject(d, "peak_kind", kinds[r->flops.peak_kind]);
    cJSON_AddStringToObject(d, "peak_source", r->flops.peak_source);
    cJSON *f = cJSON_AddObjectToObject(root, "flops");
    const double S = r->data.ds.seq_len;
    cJSON_AddNumberToObject(f, "per_token_one_document_per_block", zt_model_train_flops(&r->cfg, S, S * S) / S);
    cJSON_AddNumberToObject(f, "matmul_per_token", zt_model_flops_matmul_per_token(&r->cfg));
    cJSON_AddStringToObject(f, "convention",
                            "6 x matmul parameters per token + 6 L H D x (sum of each document's length squared); "
                            "the planner's exact formula (docs/plan.md); isolated documents count their own lengths");
    cJSON_AddBoolToObject(f, "recompute_counted_as_hardware_flops", r->cuda && o->recompute);
    cJSON_AddItemToObject(root, "libraries", zt_library_versions());
}

static int write_run_json(const zt_train_opts *o, const run_state *r, const zt_model_config *cfg,
                          const zt_dataset *ds, int isolated, const char *id, int world, const char *settings,
                          int64_t steps_per_epoch, int threads, const zt_fsdp_memory *mem, int64_t data_changed_at) {
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "run_id", id);
    cJSON_AddStringToObject(root, "zerotrain_version", ZT_VERSION);
    cJSON_AddStringToObject(root, "backend", r->cuda ? "cuda" : "cpu");
    cJSON_AddNumberToObject(root, "world_size", world);
    cJSON_AddNumberToObject(root, "threads_per_rank", threads);
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    cJSON_AddStringToObject(root, "host_rank0", host);
    char *cj = zt_model_config_json(cfg);
    cJSON_AddItemToObject(root, "model_config", cJSON_Parse(cj));
    free(cj);
    cJSON_AddNumberToObject(root, "param_count", (double)zt_model_param_count(cfg));
    cJSON_AddStringToObject(root, "model", o->model ? o->model : "");
    cJSON_AddStringToObject(root, "init", o->init ? o->init : "random");
    // what rank 0 read at those paths, as every rank's agreed at start (train/input_digest.h)
    cJSON *inputs = r->inputs_json ? cJSON_Parse(r->inputs_json) : NULL;
    if (inputs) cJSON_AddItemToObject(root, "inputs", inputs);
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
    // --resume --allow-new-schedule: from which step the new length / schedule applies, and
    // the checkpoint's values of what changed
    if (r->ckpt.schedule_before) {
        cJSON_AddNumberToObject(tr, "schedule_changed_at_step", (double)r->progress.start_step);
        cJSON_AddItemToObject(tr, "schedule_before", cJSON_Parse(r->ckpt.schedule_before));
    }
    cJSON_AddNumberToObject(tr, "micro_batch", o->micro_batch);
    cJSON_AddNumberToObject(tr, "grad_accum", o->grad_accum);
    // C ranks of a context group share each block: the data-parallel ranks' blocks (engine/job_shape.h)
    cJSON_AddNumberToObject(tr, "tokens_per_step",
                            (double)zt_tokens_per_step(world, r->context, o->micro_batch, o->grad_accum,
                                                       ds->seq_len));
    cJSON_AddNumberToObject(tr, "save_every", (double)o->save_every);
    cJSON_AddNumberToObject(tr, "keep_last", o->keep_last);
    // how the world is laid out (the mesh's; `node` resolved): `plan --from-run` plans this job
    zt_fsdp_strategy strat;
    zt_fsdp_get_strategy(r->f, &strat);
    cJSON *mesh = cJSON_AddObjectToObject(root, "mesh");
    cJSON_AddNumberToObject(mesh, "world", world);
    cJSON_AddNumberToObject(mesh, "shard_group", strat.shard_group);
    cJSON_AddNumberToObject(mesh, "replicas", world / strat.shard_group);
    cJSON_AddNumberToObject(mesh, "context_parallel", r->context);
    cJSON_AddNumberToObject(mesh, "data_parallel_ranks", zt_data_parallel_ranks(world, r->context));
    cJSON *m = cJSON_AddObjectToObject(root, "memory_per_rank_bytes");
    cJSON_AddNumberToObject(m, "params", (double)mem->params);
    cJSON_AddNumberToObject(m, "grads", (double)mem->grads);
    cJSON_AddNumberToObject(m, "optimizer", (double)mem->optimizer);
    cJSON_AddNumberToObject(m, "buffers", (double)mem->buffers);
    cJSON_AddNumberToObject(m, "activations", (double)mem->activations);
    if (mem->workspace > 0) {  // the GPU engine's other device parts (`plan --device cuda` prints the same)
        cJSON_AddNumberToObject(m, "context", (double)mem->context);
        cJSON_AddNumberToObject(m, "scratch", (double)mem->scratch);
        cJSON_AddNumberToObject(m, "workspace", (double)mem->workspace);
    }
    add_device(root, o, r);
    add_config(root, o);
    char *text = cJSON_Print(root);
    cJSON_Delete(root);
    char path[4200];
    snprintf(path, sizeof path, "%s/run.json", o->run_dir);
    int rc = zt_write_file_atomic(path, text, strlen(text));
    free(text);
    return rc;
}

// The terminal's progress line (rank 0): cleared before anything else is printed.
static int g_progress_shown;
void zt_runlog_clear_progress(void) {
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

// JSON has no NaN or Infinity: such a value is written as null.
static const char *json_num(char *buf, size_t n, const char *fmt, double v) {
    if (isfinite(v)) snprintf(buf, n, fmt, v);
    else snprintf(buf, n, "null");
    return buf;
}

// Rank 0: the model, the memory per rank and the run's shape, before the first step.
void zt_runlog_plan(const zt_train_opts *o, const run_state *r, const zt_fsdp_memory *mem) {
    if (r->rank != 0) return;
    const zt_model_config *cfg = &r->cfg;
    const int threads = r->threads;
    char b1[32], b2[32], b3[32], b4[32], b5[32];
    zt_fsdp_strategy strat;  // the state is sharded over the shard group (G), replicated W/G times
    zt_fsdp_get_strategy(r->f, &strat);
    // the layer mix of a family with two kinds of layers (Qwen3.5: " (48 linear + 16 full)"); Qwen3's line as it was
    char mix[96] = "";
    if (cfg->family && cfg->family->layer_mix) cfg->family->layer_mix(cfg, mix, sizeof mix);
    printf("model: %s %d layers%s, d=%lld, ffn=%lld, heads %d/%d, head_dim %d, vocab %lld, %s, %.2f M params\n",
           zt_model_title(cfg), cfg->num_layers, mix, (long long)cfg->hidden_size, (long long)cfg->intermediate_size, cfg->num_heads,
           cfg->num_kv_heads, cfg->head_dim, (long long)cfg->vocab_size, cfg->tie_word_embeddings ? "tied" : "untied",
           zt_model_param_count(cfg) / 1e6);
    printf("memory per rank: params %s, grads %s, optimizer %s (sharded 1/%d), gather/scatter buffers %s, "
           "activations %s\n",
           zt_human_bytes((double)mem->params, 1, b1, sizeof b1), zt_human_bytes((double)mem->grads, 1, b2, sizeof b2),
           zt_human_bytes((double)mem->optimizer, 1, b3, sizeof b3), strat.shard_group,
           zt_human_bytes((double)mem->buffers, 1, b4, sizeof b4),
           zt_human_bytes((double)mem->activations, 1, b5, sizeof b5));
    if (mem->workspace > 0)
        printf("  on the GPU also: context-split buffers %s, scratch %s, cuBLASLt workspace %s\n",
               zt_human_bytes((double)mem->context, 1, b1, sizeof b1), zt_human_bytes((double)mem->scratch, 1, b2, sizeof b2),
               zt_human_bytes((double)mem->workspace, 1, b3, sizeof b3));
    // the factors multiply to the total: under --context-parallel C the W / C data-parallel ranks'
    char ranks[96];
    const int C = r->context, dp = zt_data_parallel_ranks(r->world, C);
    if (C > 1)
        snprintf(ranks, sizeof ranks, "%d data-parallel rank%s (%d ranks / context parallel %d)", dp,
                 dp == 1 ? "" : "s", r->world, C);
    else
        snprintf(ranks, sizeof ranks, "%d rank%s", r->world, r->world == 1 ? "" : "s");
    printf("train: %lld steps (%lld per epoch), %s x micro-batch %d x grad-accum %d x seq %d = %lld tokens "
           "per step, %d thread%s per rank, %s\n",
           (long long)r->total_steps, (long long)r->data.steps_per_epoch, ranks, o->micro_batch, o->grad_accum,
           r->data.ds.seq_len,
           (long long)zt_tokens_per_step(r->world, C, o->micro_batch, o->grad_accum, r->data.ds.seq_len), threads,
           threads == 1 ? "" : "s", r->backend);
    const double S = r->data.ds.seq_len, per_token = zt_model_train_flops(cfg, S, S * S) / S;
    printf("flops: %.4g per token, %.4g per step (model/flops.h%s)\n", per_token,
           per_token * S * (double)r->data.global_step_blocks,
           r->data.isolated ? ", one document per block; isolated documents count their own, shorter lengths" : "");
    if (r->ckpt.async) {
        const int64_t snap = zt_ckpt_async_bytes(r->ckpt.async);
        if (snap > 0)
            printf("checkpoints: asynchronous (--async-save): host snapshot %s per rank (master, Adam m and v of its "
                   "shards), a writer thread per rank; one save in flight, committed at a later step boundary\n",
                   zt_human_bytes((double)snap, 1, b1, sizeof b1));
        else
            printf("checkpoints: asynchronous (--async-save): the snapshot is the engine's page-locked host copies, "
                   "filled by a device-to-host copy on its own stream (no extra host memory), a writer thread per "
                   "rank; one save in flight, committed at a later step boundary\n");
    }
    if (isfinite(r->flops.peak_flops))
        printf("mfu: against %.4g TFLOP/s per rank on %s: %s\n", r->flops.peak_flops / 1e12, r->flops.device_name,
               r->flops.peak_source);
    else
        printf("mfu: unknown peak on %s: %s\n", r->flops.device_name, r->flops.peak_source);
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
        if (zt_out_mkdirs(o->run_dir, dir) != 0) return -1;  // real directories: never through a link
        if (o->resume && zt_tb_truncate_dir(dir, start_step) < 0) return -1;
        zt_tb *tb = zt_tb_open(dir, host[0] ? host : "host");
        if (!tb) return -1;
        if (k == 0) r->sinks.tb = tb;
        else r->sinks.tb_rank = tb;
    }
    return 0;
}

// Opens every file the run writes to (rank 0: run.json, metrics.jsonl, RUN/tb; every rank:
// its metrics, its TensorBoard and --trace-blocks file). Agreed: all ranks or none go on.
int zt_runlog_open(const zt_train_opts *o, run_state *r, const zt_fsdp_memory *mem) {
    const int R0 = r->rank == 0;
    const int64_t start_step = r->progress.start_step;
    char path[4200];
    int ok = 1;
    if (R0 && o->overwrite && !o->resume) {
        // A fresh run in a reused directory: nothing of the old run may look like this one's
        // (a stale complete.json would read as COMPLETE; old checkpoints would resume into it).
        const char *stale[] = {"checkpoints", "complete.json", "heartbeat.json", "final", "watch.json", "report.html", "tb"};
        for (size_t i = 0; i < sizeof stale / sizeof stale[0] && ok; i++) {
            snprintf(path, sizeof path, "%s/%s", o->run_dir, stale[i]);
            ok = zt_remove_tree(path) == 0;
        }
    }
    // No rank opens a file of its own in RUN (RUN/tb/ranks/...) before rank 0 has cleared the old
    // run's: removing RUN/tb raced another rank creating its TensorBoard directory in it.
    if (o->overwrite && !o->resume && zt_train_agree(r->comm, ok, "clearing the old run's outputs") != 0) return -1;
    if (R0 && ok) {
        if (!r->run_id[0]) zt_runlog_make_run_id(r->run_id, sizeof r->run_id);
        ok = zt_run_lock_set_run_id(r->lock, r->run_id) == 0;  // a second job's refusal names it
    }
    if (R0 && ok) {
        ok = write_run_json(o, r, &r->cfg, &r->data.ds, r->data.isolated, r->run_id, r->world, r->ckpt.settings,
                            r->data.steps_per_epoch, r->threads, mem, r->ckpt.data_changed ? start_step : -1) == 0;
        if (ok) {
            snprintf(path, sizeof path, "%s/metrics.jsonl", o->run_dir);
            if (o->resume) ok = zt_runlog_truncate(path, start_step) == 0;
            r->sinks.metrics = ok ? zt_line_open(path, o->resume != NULL) : NULL;
            if (!r->sinks.metrics) ok = 0;
        }
    }
    if (ok) {  // every rank: its own compute / wait split and bytes per step
        snprintf(path, sizeof path, "%s/ranks/rank-%05d.metrics.jsonl", o->run_dir, r->rank);
        if (o->resume) ok = zt_runlog_truncate(path, start_step) == 0;
        r->sinks.rank_metrics = ok ? zt_line_open(path, o->resume != NULL) : NULL;
        if (!r->sinks.rank_metrics) ok = 0;
    }
    if (ok && o->tensorboard) ok = open_tensorboard(o, r, start_step) == 0;
    if (ok && o->trace_blocks) {  // every rank: its own block ids per step
        snprintf(path, sizeof path, "%s/ranks/rank-%05d.blocks", o->run_dir, r->rank);
        r->sinks.trace = zt_out_fopen(path, o->resume ? ZT_OUT_APPEND : ZT_OUT_TRUNC);
        if (!r->sinks.trace) ok = 0;
    }
    return zt_train_agree(r->comm, ok, "writing run.json");
}

void zt_sinks_close(log_sinks *s) {
    zt_line_close(s->metrics);
    zt_line_close(s->rank_metrics);
    zt_tb_close(s->tb);
    zt_tb_close(s->tb_rank);
    if (s->trace) fclose(s->trace);
    *s = (log_sinks){0};
}

int zt_runlog_check_outputs(const zt_train_opts *o, int rank) {
    // cleared: a fresh start over an old run (--overwrite) removes it first, a link itself (never followed)
    static const struct { const char *name; int dir, cleared; } run0[] = {
        {"ranks", 1, 0},          {"run.json", 0, 0},      {"metrics.jsonl", 0, 0},
        {"heartbeat.json", 0, 1}, {"complete.json", 0, 1}, {"checkpoints", 1, 1},
        {"checkpoints/latest", 0, 1}, {"tb", 1, 1},        {"tb/ranks", 1, 1},
        {"final", 1, 1},          {"carry", 1, 1},         {"carry.partial", 1, 1}};
    static const char *const rank_files[] = {"metrics.jsonl", "blocks", "alive", "power.csv", "flight", "flight.json"};
    const int cleared = o->overwrite && !o->resume;
    char p[4400];
    for (size_t i = 0; rank == 0 && i < sizeof run0 / sizeof *run0; i++) {
        if (cleared && run0[i].cleared) continue;
        snprintf(p, sizeof p, "%s/%s", o->run_dir, run0[i].name);
        if ((run0[i].dir ? zt_out_check_dir(p) : zt_out_check(p)) != 0) return -1;
    }
    for (size_t i = 0; i < sizeof rank_files / sizeof *rank_files; i++) {
        snprintf(p, sizeof p, "%s/ranks/rank-%05d.%s", o->run_dir, rank, rank_files[i]);
        if (zt_out_check(p) != 0) return -1;
    }
    snprintf(p, sizeof p, "%s/tb/ranks/rank-%05d", o->run_dir, rank);
    return cleared ? 0 : zt_out_check_dir(p);
}

// A resumed run continues after step `keep`: lines of a metrics file written for later
// steps (after that checkpoint, before the stop or crash) are dropped, so each step
// appears once. The file is walked by length, not as a C string: a line that does not
// parse (a NUL byte, garbage) is kept as it is and counted, never a reason to drop what
// follows it; only a torn last line (no newline: the crash cut it) goes. Atomic rewrite;
// a missing file is fine.
int zt_runlog_truncate(const char *path, int64_t keep) {
    size_t n;
    if (zt_out_check(path) != 0) return -1;  // a link there is refused, not read or written through
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

// ---- one record, many sinks ----

// A step's metrics. The table says where each goes: its metrics.jsonl member and format
// (members in this order), rank 0's TensorBoard tag, this rank's own metrics file member
// and TensorBoard tag. A value that is not finite is null in JSON and no TensorBoard point.
enum {
    M_EPOCH, M_LOSS, M_LR, M_GRAD_NORM, M_CLIP_COEF, M_TOKENS, M_TOK_S, M_TOK_S_RANK, M_STEP_TIME, M_COMPUTE,
    M_COMM_WAIT, M_BYTES_AG, M_BYTES_RS, M_BYTES_REP, M_BYTES_CTX, M_GPU_HOURS, M_GPU_HOURS_AT_RISK, M_ELAPSED, M_TRAINED, M_WAIT_SHARE,
    M_GPU_HOURS_PER_EPOCH, M_POWER_W, M_UTIL,
    // added at the end of each line: the run's (rank 0, every rank's FLOPs / W), then this rank's own
    M_FLOPS, M_TFLOPS, M_MFU, M_HFU, M_RANK_FLOPS, M_RANK_TFLOPS, M_RANK_MFU, M_RANK_HFU, M_COUNT
};
typedef struct {
    const char *key, *fmt;     // RUN/metrics.jsonl (NULL: not there)
    const char *tb;            // RUN/tb, rank 0 (NULL: none)
    const char *rank_key;      // RUN/ranks/rank-N.metrics.jsonl (same format; NULL: not there)
    const char *rank_tb;       // RUN/tb/ranks/rank-N (NULL: none)
    int optional;              // left out of a line (not null) when not finite
} metric_def;
static const metric_def k_metrics[M_COUNT] = {
    [M_EPOCH] = {"epoch", "%.0f"},
    [M_LOSS] = {"loss", "%.6f", "train/loss"},
    [M_LR] = {"lr", "%.6e", "train/lr"},
    [M_GRAD_NORM] = {"grad_norm", "%.6f", "train/grad_norm"},
    [M_CLIP_COEF] = {"clip_coef", "%.6f", "train/clip_coef"},
    [M_TOKENS] = {"tokens", "%.0f", "train/tokens"},
    [M_TOK_S] = {"tok_per_s", "%.1f", "perf/tok_per_s"},
    [M_TOK_S_RANK] = {"tok_per_s_per_rank", "%.1f", "perf/tok_per_s_per_rank", "tok_per_s", "rank/tok_per_s"},
    [M_STEP_TIME] = {"step_time_s", "%.4f", "perf/step_time_s", "step_time_s", "rank/step_time_s"},
    [M_COMPUTE] = {"compute_s", "%.4f", NULL, "compute_s"},
    [M_COMM_WAIT] = {"comm_wait_s", "%.4f", NULL, "comm_wait_s"},
    [M_BYTES_AG] = {"bytes_gathered", "%.0f", "comm/bytes_gathered", "bytes_gathered", "rank/bytes_gathered"},
    [M_BYTES_RS] = {"bytes_scattered", "%.0f", "comm/bytes_scattered", "bytes_scattered", "rank/bytes_scattered"},
    // hybrid sharding only: the replica all-reduce's bytes (absent at full shard)
    [M_BYTES_REP] = {"bytes_replicated", "%.0f", "comm/bytes_replicated", "bytes_replicated", "rank/bytes_replicated",
                     .optional = 1},
    // context parallelism only: the K/V all-gathers received and dK/dV reduce-scatters sent (absent at C = 1)
    [M_BYTES_CTX] = {"bytes_context", "%.0f", "comm/bytes_context", "bytes_context", "rank/bytes_context",
                     .optional = 1},
    [M_GPU_HOURS] = {"gpu_hours", "%.6f", "cost/gpu_hours"},
    [M_GPU_HOURS_AT_RISK] = {"gpu_hours_at_risk", "%.6f", "cost/gpu_hours_at_risk"},
    [M_ELAPSED] = {"elapsed_s", "%.3f"},
    [M_TRAINED] = {"trained_tokens", "%.0f", "train/trained_tokens"},
    [M_WAIT_SHARE] = {NULL, NULL, "perf/comm_wait_share", NULL, "rank/comm_wait_share"},
    [M_GPU_HOURS_PER_EPOCH] = {NULL},  // the heartbeat's projection
    [M_POWER_W] = {NULL, NULL, NULL, NULL, "power/board_w"},  // this rank's GPU as NVML last saw it
    [M_UTIL] = {NULL, NULL, NULL, NULL, "power/util_pct"},
    // the step's model FLOPs (model/flops.h; metrics.jsonl: every rank's, a rank file: its own),
    // per second per rank, and as a fraction of the peak (run.json "device"); hfu adds what
    // --recompute recomputes (hardware FLOPs), only then
    [M_FLOPS] = {"model_flops", "%.0f"},
    [M_TFLOPS] = {"tflops_per_rank", "%.8g", "perf/tflops"},
    [M_MFU] = {"mfu", "%.8g", "perf/mfu"},
    [M_HFU] = {"hfu", "%.8g", "perf/hfu", .optional = 1},
    [M_RANK_FLOPS] = {NULL, "%.0f", NULL, "model_flops"},
    [M_RANK_TFLOPS] = {NULL, "%.8g", NULL, "tflops", "rank/tflops"},
    [M_RANK_MFU] = {NULL, "%.8g", NULL, "mfu", "rank/mfu"},
    [M_RANK_HFU] = {NULL, "%.8g", NULL, "hfu", "rank/hfu", 1},
};

// An evaluation's record, rendered the same way (metrics.jsonl and rank 0's TensorBoard).
enum { E_LOSS, E_PPL, E_BLOCKS, E_TARGETS, E_TIME, E_COUNT };
static const metric_def k_eval[E_COUNT] = {
    [E_LOSS] = {"eval_loss", "%.17g", "eval/loss"},
    [E_PPL] = {"eval_ppl", "%.6f", "eval/ppl"},
    [E_BLOCKS] = {"eval_blocks", "%.0f"},
    [E_TARGETS] = {"eval_targets", "%.0f"},
    [E_TIME] = {"eval_time_s", "%.3f"},
};

// A checkpoint event of --async-save (rank 0): "snapshot" (the save point: training blocked
// for ckpt_blocked_s, of it ckpt_wait_s waiting for the previous write and, GPU engine,
// ckpt_snapshot_s queueing the device-to-host copy), "copied" (CPU engine: the writer thread's
// snapshot copy of ckpt_step took ckpt_snapshot_s, and the step's optimizer update waited
// ckpt_blocked_s for it), "commit" (the write of ckpt_step took ckpt_write_s; ckpt_wait_s: how long this
// boundary waited for it) and "sync" (a synchronous save: the last step's or a stop's).
enum { K_STEP, K_BLOCKED, K_WAIT, K_SNAPSHOT, K_WRITE, K_COUNT };
static const metric_def k_ckpt[K_COUNT] = {
    [K_STEP] = {"ckpt_step", "%.0f"},
    [K_BLOCKED] = {"ckpt_blocked_s", "%.4f", "ckpt/blocked_s", .optional = 1},
    [K_WAIT] = {"ckpt_wait_s", "%.4f", "ckpt/wait_s", .optional = 1},
    [K_SNAPSHOT] = {"ckpt_snapshot_s", "%.4f", "ckpt/snapshot_s", .optional = 1},
    [K_WRITE] = {"ckpt_write_s", "%.4f", "ckpt/write_s", .optional = 1},
};

// {"step":S[,"rank":R],"key":value,...} of the members the table gives (rank: the rank file's),
// written as one whole line (train/line_file.h): a rank that dies or hangs next, or a disk that
// is full, leaves whole lines behind; a record the disk refused is counted and warned.
static void jsonl_line(zt_line_file *f, const metric_def *defs, int n, const double *v, int64_t step, int rank_file,
                       int rank, const char *extra) {
    if (!f) return;
    char line[8192];
    size_t o = 0;
#define ADD(...) (o += (size_t)snprintf(line + o, o < sizeof line ? sizeof line - o : 0, __VA_ARGS__), \
                  o = o < sizeof line ? o : sizeof line)
    ADD("{\"step\":%lld", (long long)step);
    if (rank_file) ADD(",\"rank\":%d", rank);
    for (int i = 0; i < n; i++) {
        const char *key = rank_file ? defs[i].rank_key : defs[i].key;
        char num[64];
        if (key && !(defs[i].optional && !isfinite(v[i]))) ADD(",\"%s\":%s", key, json_num(num, sizeof num, defs[i].fmt, v[i]));
    }
    ADD("%s}\n", extra ? extra : "");
#undef ADD
    if (o >= sizeof line - 1) {  // the members are fixed: cannot happen; never write a cut line
        fprintf(stderr, "zerotrain: warning: %s: the record of step %lld is longer than %zu bytes and is left out\n",
                zt_line_path(f), (long long)step, sizeof line);
        return;
    }
    zt_line_write(f, line, o, step);
}

// The table's TensorBoard points; a writer that fails is closed with a warning (the jsonl goes on).
static void tb_points(zt_tb **tb, const metric_def *defs, int n, const double *v, int64_t step, int rank_tb,
                      const char *who) {
    if (!*tb) return;
    const double wt = zt_wall_now();
    for (int i = 0; i < n; i++) {
        const char *tag = rank_tb ? defs[i].rank_tb : defs[i].tb;
        if (tag && isfinite(v[i])) zt_tb_scalar(*tb, tag, step, wt, (float)v[i]);
    }
    if (zt_tb_flush(*tb) != 0) {
        fprintf(stderr, "zerotrain: warning: %s; TensorBoard output %s stops here (metrics.jsonl goes on)\n",
                zt_errmsg(), who);
        zt_tb_close(*tb);
        *tb = NULL;
    }
}

// One finished step: the record, then this rank's metrics file and TensorBoard; on rank 0 the
// heartbeat, the run's metrics and TensorBoard, the plain log line and the progress line.
void zt_runlog_step(const zt_train_opts *o, run_state *r, int64_t step, const zt_fsdp_stats *s) {
    const int64_t total_steps = r->total_steps, steps_per_epoch = r->data.steps_per_epoch;
    const double now = zt_now(), el = now - r->progress.t_loop, mean_step = el / (double)r->progress.steps_run;
    const double tok_s = (double)s->tokens / s->t_step;
    double v[M_COUNT];
    v[M_EPOCH] = (double)r->data.epoch;
    v[M_LOSS] = s->loss;
    v[M_LR] = s->lr;
    v[M_GRAD_NORM] = s->grad_norm;
    v[M_CLIP_COEF] = s->clip_coef;
    v[M_TOKENS] = (double)r->progress.tokens_seen;
    v[M_TOK_S] = tok_s;
    v[M_TOK_S_RANK] = tok_s / r->world;
    v[M_STEP_TIME] = s->t_step;
    v[M_COMPUTE] = s->t_compute;
    v[M_COMM_WAIT] = s->t_comm_wait;
    v[M_BYTES_AG] = (double)s->bytes_gathered;
    v[M_BYTES_RS] = (double)s->bytes_scattered;
    v[M_BYTES_REP] = s->bytes_replicated > 0 ? (double)s->bytes_replicated : NAN;
    v[M_BYTES_CTX] = s->bytes_context > 0 ? (double)s->bytes_context : NAN;
    // GPU-hours (rank-hours on the CPU backend): spent in this process so far, projected per
    // epoch at the mean step time, and at risk = spent since the last checkpoint.
    v[M_GPU_HOURS] = r->world * el / 3600.0;
    v[M_GPU_HOURS_AT_RISK] = r->world * (now - r->ckpt.t_durable) / 3600.0;
    v[M_GPU_HOURS_PER_EPOCH] = r->world * mean_step * (double)steps_per_epoch / 3600.0;
    v[M_ELAPSED] = now - r->t_start;
    v[M_TRAINED] = (double)s->targets;
    v[M_WAIT_SHARE] = s->t_comm_wait / s->t_step;
    double util = NAN;
    const double watts = zt_power_last(r->power, &util);
    v[M_POWER_W] = watts >= 0 ? watts : NAN;
    v[M_UTIL] = watts >= 0 ? util : NAN;
    const int hw = r->flops.hw_extra_all > 0 || r->flops.hw_extra_rank > 0;  // --recompute on the cuda backend
    v[M_FLOPS] = r->flops.flops_all;
    v[M_RANK_FLOPS] = r->flops.flops_rank;
    v[M_TFLOPS] = r->flops.flops_all / r->world / s->t_step / 1e12;
    v[M_MFU] = r->flops.flops_all / r->world / s->t_step / r->flops.peak_flops;
    v[M_HFU] = hw ? (r->flops.flops_all + r->flops.hw_extra_all) / r->world / s->t_step / r->flops.peak_flops : NAN;
    v[M_RANK_TFLOPS] = r->flops.flops_rank / s->t_step / 1e12;
    v[M_RANK_MFU] = r->flops.flops_rank / s->t_step / r->flops.peak_flops;
    v[M_RANK_HFU] = hw ? (r->flops.flops_rank + r->flops.hw_extra_rank) / s->t_step / r->flops.peak_flops : NAN;

    char who[32];
    snprintf(who, sizeof who, "of rank %d", r->rank);
    tb_points(&r->sinks.tb_rank, k_metrics, M_COUNT, v, step + 1, 1, who);
    jsonl_line(r->sinks.rank_metrics, k_metrics, M_COUNT, v, step + 1, 1, r->rank, NULL);
    if (r->rank != 0) return;
    zt_heartbeat hb = {.run_id = r->run_id, .state = "running", .step = step + 1, .total_steps = total_steps,
                       .epoch = r->data.epoch, .tokens = r->progress.tokens_seen, .elapsed_s = v[M_ELAPSED],
                       .step_time_s = v[M_STEP_TIME], .tok_per_s = v[M_TOK_S], .loss = v[M_LOSS],
                       .world_size = r->world, .gpu_hours = v[M_GPU_HOURS],
                       .gpu_hours_per_epoch = v[M_GPU_HOURS_PER_EPOCH], .gpu_hours_at_risk = v[M_GPU_HOURS_AT_RISK],
                       .ckpt_writing = r->ckpt.snap_step > 0                    ? r->ckpt.snap_step
                                       : zt_ckpt_async_step(r->ckpt.async) > 0 ? zt_ckpt_async_step(r->ckpt.async)
                                                                          : 0,
                       .ckpt_writing_s = now - r->ckpt.async_t0, .records_lost = zt_line_lost(r->sinks.metrics)};
    if (zt_heartbeat_write(o->run_dir, &hb) != 0) fprintf(stderr, "zerotrain: warning: %s\n", zt_errmsg());
    jsonl_line(r->sinks.metrics, k_metrics, M_COUNT, v, step + 1, 0, 0, NULL);
    tb_points(&r->sinks.tb, k_metrics, M_COUNT, v, step + 1, 0, "of the run");

    const int logged =
        o->log_every > 0 && ((step + 1) % o->log_every == 0 || r->progress.steps_run == 1 || step + 1 == total_steps);
    zt_runlog_clear_progress();  // the progress line gives way to the plain one
    if (logged) {
        char mfu[48] = "";
        if (isfinite(v[M_MFU])) snprintf(mfu, sizeof mfu, "MFU %.1f%%, ", 100.0 * v[M_MFU]);
        printf("step %5lld/%lld | epoch %lld | loss %.4f | lr %.3e | grad norm %7.4f%s | %8.0f tok/s (%.0f "
               "/rank) | %.3f s, comm wait %.0f%% | %s%.4g TFLOP/s/rank\n",
               (long long)step + 1, (long long)total_steps, (long long)r->data.epoch, v[M_LOSS], v[M_LR], v[M_GRAD_NORM],
               v[M_CLIP_COEF] < 1 ? " (clipped)" : "", v[M_TOK_S], v[M_TOK_S_RANK], v[M_STEP_TIME],
               100.0 * v[M_WAIT_SHARE], mfu, v[M_TFLOPS]);
        fflush(stdout);
    }
    if (r->sinks.progress_tty && step + 1 < total_steps) {
        // on a terminal: one line rewritten in place, ETA from the mean step time so far
        int64_t next_save = steps_per_epoch - (step + 1) % steps_per_epoch;
        if (o->save_every > 0 && o->save_every - (step + 1) % o->save_every < next_save)
            next_save = o->save_every - (step + 1) % o->save_every;
        if (total_steps - (step + 1) < next_save) next_save = total_steps - (step + 1);
        char eta[32], eta_save[32];
        char mfu[32] = "";
        if (isfinite(v[M_MFU])) snprintf(mfu, sizeof mfu, " | MFU %.1f%%", 100.0 * v[M_MFU]);
        printf("[%lld/%lld %4.1f%%] epoch %lld | %.2fM tokens | %.0f tok/s%s | loss %.4f | ETA %s | next "
               "checkpoint in %lld step%s (%s)",
               (long long)step + 1, (long long)total_steps, 100.0 * (double)(step + 1) / (double)total_steps,
               (long long)r->data.epoch, v[M_TOKENS] / 1e6, v[M_TOK_S], mfu, v[M_LOSS],
               human_time(mean_step * (double)(total_steps - step - 1), eta, sizeof eta), (long long)next_save,
               next_save == 1 ? "" : "s", human_time(mean_step * (double)next_save, eta_save, sizeof eta_save));
        fflush(stdout);
        g_progress_shown = 1;
    }
}

void zt_runlog_ckpt(log_sinks *sk, int rank, int64_t step, const char *event, int64_t ckpt_step, double blocked_s,
                    double wait_s, double snapshot_s, double write_s) {
    if (rank != 0) return;
    double v[K_COUNT];
    v[K_STEP] = (double)ckpt_step;
    v[K_BLOCKED] = blocked_s;
    v[K_WAIT] = wait_s;
    v[K_SNAPSHOT] = snapshot_s;
    v[K_WRITE] = write_s;
    char extra[64];
    snprintf(extra, sizeof extra, ",\"ckpt_event\":\"%s\"", event);
    jsonl_line(sk->metrics, k_ckpt, K_COUNT, v, step, 0, 0, extra);
    tb_points(&sk->tb, k_ckpt, K_COUNT, v, step, 0, "of the run");
}

// One evaluation (rank 0): the terminal line, metrics.jsonl, TensorBoard.
void zt_runlog_eval(log_sinks *sk, int rank, int64_t step, int64_t blocks, int64_t targets, double loss,
                    double seconds) {
    if (rank != 0) return;
    zt_runlog_clear_progress();
    printf("eval  %5lld | loss %.4f | ppl %.3f | %lld blocks, %lld targets | %.2f s\n", (long long)step, loss,
           exp(loss), (long long)blocks, (long long)targets, seconds);
    fflush(stdout);
    const double v[E_COUNT] = {[E_LOSS] = loss, [E_PPL] = exp(loss), [E_BLOCKS] = (double)blocks,
                               [E_TARGETS] = (double)targets, [E_TIME] = seconds};
    const int finite = isfinite(v[E_LOSS]) && isfinite(v[E_PPL]);
    jsonl_line(sk->metrics, k_eval, E_COUNT, v, step, 0, 0, finite ? NULL : ",\"eval_note\":\"the loss is not finite\"");
    tb_points(&sk->tb, k_eval, E_COUNT, v, step, 0, "of the run");
}

// ---- the end of a run ----

// Rank 0, after the loop: the summary line, then the heartbeat "stopped", or the heartbeat
// "complete" and complete.json (the watcher's COMPLETE) once the final checkpoint and
// final/ are committed.
// A metrics file with records a full disk refused: said once more at the end, on the rank
// that writes it (the count is in the heartbeat and complete.json too).
static void warn_lost(const zt_line_file *f) {
    const int64_t n = zt_line_lost(f);
    if (n <= 0) return;
    char steps[256];
    fprintf(stderr, "zerotrain: warning: %s: %lld record%s lost (steps %s): the disk refused %s (see the warnings "
                    "above); the file holds whole lines, with %s missing\n",
            zt_line_path(f), (long long)n, n == 1 ? "" : "s", zt_line_lost_steps(f, steps, sizeof steps),
            n == 1 ? "it" : "them", n == 1 ? "that step" : "those steps");
}

void zt_runlog_summary(const run_state *r, int stopped) {
    warn_lost(r->sinks.rank_metrics);
    if (r->rank != 0) return;
    warn_lost(r->sinks.metrics);
    zt_runlog_clear_progress();
    const run_progress *p = &r->progress;
    const flops_acct *fa = &r->flops;
    const double loop_s = zt_now() - p->t_loop;
    const double tokens = (double)(p->steps_run * r->data.global_step_blocks * r->data.ds.seq_len);
    if (p->steps_run > 0)
        printf("%s: %lld steps, %lld tokens in %.1f s (%.0f tok/s, %.0f per rank); rank 0 waited on collectives "
               "%.1f%% of the time; loss %.4f -> %.4f\n",
               stopped ? "stopped" : "done", (long long)p->steps_run, (long long)tokens, loop_s, tokens / loop_s,
               tokens / loop_s / r->world, 100 * p->t_wait_total / (p->t_wait_total + p->t_compute_total),
               p->loss_first, p->loss_last);
    if (p->steps_run > 0 && fa->t_step_sum > 0) {
        // over the steps' own time (evaluation and checkpoints aside): model FLOPs / (W x step time)
        const double tf = fa->flops_sum / r->world / fa->t_step_sum;
        printf("efficiency: %.4g TFLOP/s per rank (model FLOPs, model/flops.h)", tf / 1e12);
        if (isfinite(fa->peak_flops)) {
            printf(", MFU %.2f%%", 100 * tf / fa->peak_flops);
            if (fa->hw_extra_sum > 0)
                printf(", HFU %.2f%% (with the recomputed forward)",
                       100 * (fa->flops_sum + fa->hw_extra_sum) / r->world / fa->t_step_sum / fa->peak_flops);
            printf(" of %.4g TFLOP/s per rank: %s\n", fa->peak_flops / 1e12, fa->peak_source);
        } else {
            printf("; MFU unknown: %s\n", fa->peak_source);
        }
    }
}

// GPU-hours (rank-hours on cpu) this process spent training: the same figure as the last
// metrics line's gpu_hours.
static double gpu_hours_spent(const run_state *r) { return r->world * (zt_now() - r->progress.t_loop) / 3600.0; }

void zt_runlog_stopped(const zt_train_opts *o, const run_state *r) {
    if (r->rank != 0) return;
    const double el = zt_now() - r->progress.t_loop;
    zt_heartbeat hb = {.run_id = r->run_id, .state = "stopped", .step = r->progress.step, .total_steps = r->total_steps,
                       .epoch = r->data.epoch, .tokens = r->progress.tokens_seen, .elapsed_s = zt_now() - r->t_start,
                       .loss = r->progress.loss_last, .world_size = r->world, .gpu_hours = gpu_hours_spent(r),
                       .gpu_hours_per_epoch = r->progress.steps_run ? r->world * el / (double)r->progress.steps_run *
                                                                 (double)r->data.steps_per_epoch / 3600.0 : 0,
                       .records_lost = zt_line_lost(r->sinks.metrics)};
    if (zt_heartbeat_write(o->run_dir, &hb) != 0) fprintf(stderr, "zerotrain: warning: %s\n", zt_errmsg());
}

int zt_runlog_complete(const zt_train_opts *o, const run_state *r, int64_t rank_records_lost) {
    if (r->rank != 0) return 0;
    const double el = zt_now() - r->progress.t_loop;
    const int64_t steps_run = r->progress.steps_run, total_steps = r->total_steps;
    zt_heartbeat hb = {.run_id = r->run_id, .state = "complete", .step = total_steps, .total_steps = total_steps,
                       .epoch = r->data.epoch, .tokens = r->progress.tokens_seen, .elapsed_s = zt_now() - r->t_start,
                       .tok_per_s = steps_run ? steps_run * r->data.global_step_blocks * r->data.ds.seq_len / el : 0,
                       .loss = r->progress.loss_last, .world_size = r->world, .gpu_hours = r->world * el / 3600.0,
                       .gpu_hours_per_epoch = steps_run ? r->world * el / (double)steps_run *
                                                              (double)r->data.steps_per_epoch / 3600.0 : 0,
                       .records_lost = zt_line_lost(r->sinks.metrics)};
    zt_heartbeat_write(o->run_dir, &hb);
    char path[4200], final_dir[4200] = "";
    if (o->save_final) snprintf(final_dir, sizeof final_dir, "%s/final", o->run_dir);
    cJSON *c = cJSON_CreateObject();  // paths may hold any byte: cJSON escapes them
    cJSON_AddStringToObject(c, "run_id", r->run_id);
    cJSON_AddNumberToObject(c, "step", (double)total_steps);
    cJSON_AddNumberToObject(c, "time", (double)time(NULL));
    cJSON_AddStringToObject(c, "checkpoint", r->ckpt.ckpt_path);
    cJSON_AddStringToObject(c, "final", final_dir);
    // records a full disk refused (warned as it happened): metrics.jsonl's, every rank file's
    cJSON_AddNumberToObject(c, "metrics_records_lost", (double)zt_line_lost(r->sinks.metrics));
    cJSON_AddNumberToObject(c, "rank_metrics_records_lost", (double)rank_records_lost);
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

