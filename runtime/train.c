// `zerotrain train` for one process: opens and validates the data, builds the
// model (random init or HF weights), runs the optimizer steps in a seeded
// per-epoch block order, and records run.json and metrics.jsonl in the run directory.
#define _GNU_SOURCE
#include "runtime/train.h"

#include <cblas.h>
#include <cjson/cJSON.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "checkpoint/safetensors.h"
#include "data/dataset.h"
#include "model/qwen3.h"
#include "runtime/common.h"
#include "runtime/trainer.h"

void openblas_set_num_threads(int);  // OpenBLAS extension, not in cblas.h everywhere

void zt_train_defaults(zt_train_opts *o) {
    memset(o, 0, sizeof *o);
    o->epochs = 1;
    o->micro_batch = 1;
    o->grad_accum = 1;
    o->hp = (zt_hparams){.lr = 1e-4, .min_lr_ratio = 0.1, .warmup = 0, .schedule = ZT_SCHED_COSINE,
                         .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = 0.1, .clip = 1.0};
    o->seed = 1234;
    o->log_every = 1;
    o->verify_data = 1;
    o->save_final = 1;
    o->save_dtype = ZT_ST_BF16;
}

// A block's place in the dataset.
typedef struct { int file; int64_t block; } block_ref;

// Seeded Fisher-Yates over all blocks; epoch e uses seed ^ f(e), so every epoch
// has its own order and a restart reproduces it.
static void shuffle_blocks(block_ref *b, int64_t n, uint64_t seed, int64_t epoch) {
    zt_rng r;
    zt_rng_seed(&r, seed ^ (0xd1b54a32d192ed03ULL * (uint64_t)(epoch + 1)));
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = (int64_t)zt_rng_below(&r, (uint64_t)i + 1);
        block_ref t = b[i];
        b[i] = b[j];
        b[j] = t;
    }
}

static void run_id(char *out, size_t n) {
    zt_rng r;
    zt_rng_seed(&r, (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32) ^ (uint64_t)(zt_now() * 1e9));
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    char ts[32];
    strftime(ts, sizeof ts, "%Y%m%dT%H%M%SZ", &tm);
    snprintf(out, n, "%s-%06llx", ts, (unsigned long long)(zt_rng_u64(&r) & 0xffffff));
}

static int write_run_json(const zt_train_opts *o, const zt_qwen3_config *cfg, const zt_dataset *ds,
                          const char *id, int64_t total_steps, int64_t steps_per_epoch, int threads) {
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "run_id", id);
#ifdef ZT_VERSION
    cJSON_AddStringToObject(root, "zerotrain_version", ZT_VERSION);
#endif
    cJSON_AddStringToObject(root, "backend", "cpu");
    cJSON_AddNumberToObject(root, "world_size", 1);
    cJSON_AddNumberToObject(root, "threads", threads);
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    cJSON_AddStringToObject(root, "host", host);
    char *cj = zt_qwen3_config_json(cfg);
    cJSON_AddItemToObject(root, "model_config", cJSON_Parse(cj));
    free(cj);
    cJSON_AddNumberToObject(root, "param_count", (double)zt_qwen3_param_count(cfg));
    cJSON_AddStringToObject(root, "model", o->model ? o->model : "");
    cJSON_AddStringToObject(root, "init", o->init ? o->init : "random");
    cJSON *data = cJSON_AddObjectToObject(root, "data");
    cJSON_AddStringToObject(data, "dir", o->data);
    cJSON_AddNumberToObject(data, "seq_len", ds->seq_len);
    cJSON_AddNumberToObject(data, "files", ds->nfiles);
    cJSON_AddNumberToObject(data, "blocks", (double)ds->total_blocks);
    cJSON_AddStringToObject(data, "tokenizer", ds->tokenizer);
    cJSON *tr = cJSON_AddObjectToObject(root, "train");
    cJSON_AddNumberToObject(tr, "steps", (double)total_steps);
    cJSON_AddNumberToObject(tr, "steps_per_epoch", (double)steps_per_epoch);
    cJSON_AddNumberToObject(tr, "micro_batch", o->micro_batch);
    cJSON_AddNumberToObject(tr, "grad_accum", o->grad_accum);
    cJSON_AddNumberToObject(tr, "tokens_per_step", (double)o->micro_batch * o->grad_accum * ds->seq_len);
    cJSON_AddNumberToObject(tr, "lr", o->hp.lr);
    cJSON_AddNumberToObject(tr, "min_lr_ratio", o->hp.min_lr_ratio);
    cJSON_AddNumberToObject(tr, "warmup", (double)o->hp.warmup);
    cJSON_AddStringToObject(tr, "schedule", o->hp.schedule == ZT_SCHED_COSINE ? "cosine" : "constant");
    cJSON_AddNumberToObject(tr, "beta1", o->hp.beta1);
    cJSON_AddNumberToObject(tr, "beta2", o->hp.beta2);
    cJSON_AddNumberToObject(tr, "eps", o->hp.eps);
    cJSON_AddNumberToObject(tr, "weight_decay", o->hp.weight_decay);
    cJSON_AddNumberToObject(tr, "clip", o->hp.clip);
    cJSON_AddNumberToObject(tr, "seed", (double)o->seed);
    char *text = cJSON_Print(root);
    cJSON_Delete(root);
    char path[4200];
    snprintf(path, sizeof path, "%s/run.json", o->run_dir);
    int rc = zt_write_file_atomic(path, text, strlen(text));
    free(text);
    return rc;
}

int zt_train_run(const zt_train_opts *o) {
    const double t_start = zt_now();
    int threads = o->threads;
    if (threads > 0) {
        omp_set_num_threads(threads);
        openblas_set_num_threads(threads);
    } else {
        threads = omp_get_max_threads();
    }

    // ---- model config ----
    zt_qwen3_config cfg;
    const char *cfg_src = o->model ? o->model : o->init;
    if (!cfg_src) return zt_err("no model: give --model CONFIG.json|HF_DIR (or --init HF_DIR)");
    if (zt_qwen3_config_load(&cfg, cfg_src) != 0) return -1;

    // ---- data ----
    zt_dataset ds;
    zt_dataset_opts dopts = {.verify_crc = o->verify_data, .check_tokens = 1, .model_vocab = cfg.vocab_size};
    double t0 = zt_now();
    if (zt_dataset_open(&ds, o->data, &dopts) != 0) return -1;
    printf("data: %s: %d file%s, %lld blocks of %d tokens (%.1f M tokens), token ids < %lld checked%s (%.2f s)\n",
           o->data, ds.nfiles, ds.nfiles == 1 ? "" : "s", (long long)ds.total_blocks, ds.seq_len,
           (double)ds.total_blocks * ds.seq_len / 1e6, (long long)cfg.vocab_size,
           o->verify_data ? ", crc32c verified" : "", zt_now() - t0);
    if (ds.seq_len > cfg.max_position_embeddings)
        fprintf(stderr, "zerotrain: warning: dataset seq_len %d exceeds the model's max_position_embeddings %lld\n",
                ds.seq_len, (long long)cfg.max_position_embeddings);
    const int64_t per_step = (int64_t)o->micro_batch * o->grad_accum;
    if (per_step <= 0) {
        zt_dataset_close(&ds);
        return zt_err("--micro-batch (%d) and --grad-accum (%d) must be >= 1", o->micro_batch, o->grad_accum);
    }
    const int64_t steps_per_epoch = ds.total_blocks / per_step;
    if (steps_per_epoch < 1) {
        zt_dataset_close(&ds);
        return zt_err("%s: %lld blocks are fewer than one step needs (micro-batch %d x grad-accum %d = %lld blocks)",
                      o->data, (long long)ds.total_blocks, o->micro_batch, o->grad_accum, (long long)per_step);
    }
    const int64_t total_steps = o->steps > 0 ? o->steps : o->epochs * steps_per_epoch;
    zt_hparams hp = o->hp;
    hp.total_steps = total_steps;

    // ---- run directory ----
    char path[4200];
    snprintf(path, sizeof path, "%s/run.json", o->run_dir);
    struct stat st;
    if (!o->overwrite && stat(path, &st) == 0) {
        zt_dataset_close(&ds);
        return zt_err("%s already exists: this run directory holds a run; pick a new --run-dir or pass --overwrite",
                      path);
    }
    if (zt_mkdirs(o->run_dir) != 0) {
        zt_dataset_close(&ds);
        return -1;
    }

    // ---- model and optimizer state ----
    zt_trainer tr;
    if (zt_trainer_init(&tr, &cfg, &zt_cpu_ops, o->micro_batch, o->grad_accum, ds.seq_len, &hp, o->seed) != 0) {
        zt_dataset_close(&ds);
        return -1;
    }
    if (o->init) {
        t0 = zt_now();
        if (zt_qwen3_load_hf(&tr.model.lay, o->init, tr.params) != 0) {
            zt_trainer_free(&tr);
            zt_dataset_close(&ds);
            return zt_err_prefix("--init %s", o->init);
        }
        printf("init: loaded Hugging Face weights from %s (%.2f s)\n", o->init, zt_now() - t0);
    }
    const int64_t nparams = zt_qwen3_param_count(&cfg);
    printf("model: Qwen3 %d layers, d=%lld, ffn=%lld, heads %d/%d, head_dim %d, vocab %lld, %s, %.2f M params\n",
           cfg.num_layers, (long long)cfg.hidden_size, (long long)cfg.intermediate_size, cfg.num_heads,
           cfg.num_kv_heads, cfg.head_dim, (long long)cfg.vocab_size, cfg.tie_word_embeddings ? "tied" : "untied",
           nparams / 1e6);
    printf("train: %lld steps (%lld per epoch), %lld tokens per step (micro-batch %d x grad-accum %d x seq %d), "
           "%d threads, cpu backend\n",
           (long long)total_steps, (long long)steps_per_epoch, (long long)(per_step * ds.seq_len), o->micro_batch,
           o->grad_accum, ds.seq_len, threads);

    char id[64];
    run_id(id, sizeof id);
    if (write_run_json(o, &cfg, &ds, id, total_steps, steps_per_epoch, threads) != 0) {
        zt_trainer_free(&tr);
        zt_dataset_close(&ds);
        return -1;
    }
    snprintf(path, sizeof path, "%s/metrics.jsonl", o->run_dir);
    FILE *metrics = fopen(path, o->overwrite ? "w" : "a");
    if (!metrics) {
        zt_trainer_free(&tr);
        zt_dataset_close(&ds);
        return zt_err("%s: cannot open for writing", path);
    }

    // ---- loop ----
    block_ref *order = zt_xmalloc((size_t)ds.total_blocks * sizeof(block_ref));
    const uint32_t **blocks = zt_xmalloc((size_t)per_step * sizeof(uint32_t *));
    int64_t epoch = -1, tokens_seen = 0;
    double loss_first = NAN, loss_last = NAN;
    const double t_loop = zt_now();
    for (int64_t step = 0; step < total_steps; step++) {
        int64_t e = step / steps_per_epoch, within = step % steps_per_epoch;
        if (e != epoch) {
            epoch = e;
            int64_t k = 0;
            for (int f = 0; f < ds.nfiles; f++)
                for (int64_t b = 0; b < ds.files[f].blocks; b++) order[k++] = (block_ref){f, b};
            shuffle_blocks(order, ds.total_blocks, o->seed, epoch);
        }
        for (int64_t i = 0; i < per_step; i++) {
            block_ref r = order[within * per_step + i];
            blocks[i] = zt_dataset_block(&ds, r.file, r.block);
        }
        const double ts = zt_now();
        zt_step_stats s;
        zt_trainer_step(&tr, blocks, &s);
        const double dt = zt_now() - ts;
        tokens_seen += s.tokens;
        if (step == 0) loss_first = s.loss;
        loss_last = s.loss;
        if (!isfinite(s.loss)) {
            fclose(metrics);
            free(order), free(blocks);
            zt_trainer_free(&tr);
            zt_dataset_close(&ds);
            return zt_err("step %lld: loss is %f (not finite); stopping. Lower --lr or check the data", (long long)step + 1,
                          s.loss);
        }
        const double tok_s = (double)s.tokens / dt;
        fprintf(metrics,
                "{\"step\":%lld,\"epoch\":%lld,\"loss\":%.6f,\"lr\":%.6e,\"grad_norm\":%.6f,\"clip_coef\":%.6f,"
                "\"tokens\":%lld,\"tok_per_s\":%.1f,\"step_time_s\":%.4f,\"elapsed_s\":%.3f}\n",
                (long long)step + 1, (long long)epoch, s.loss, s.lr, s.grad_norm, s.clip_coef, (long long)tokens_seen,
                tok_s, dt, zt_now() - t_start);
        fflush(metrics);
        if (o->log_every > 0 && ((step + 1) % o->log_every == 0 || step == 0 || step + 1 == total_steps)) {
            printf("step %5lld/%lld | epoch %lld | loss %.4f | lr %.3e | grad norm %7.4f%s | %8.0f tok/s | %.3f s\n",
                   (long long)step + 1, (long long)total_steps, (long long)epoch, s.loss, s.lr, s.grad_norm,
                   s.clip_coef < 1 ? " (clipped)" : "", tok_s, dt);
            fflush(stdout);
        }
    }
    const double loop_s = zt_now() - t_loop;
    fclose(metrics);
    printf("done: %lld steps, %lld tokens in %.1f s (%.0f tok/s); loss %.4f -> %.4f\n", (long long)total_steps,
           (long long)tokens_seen, loop_s, tokens_seen / loop_s, loss_first, loss_last);

    int rc = 0;
    if (o->save_final) {
        snprintf(path, sizeof path, "%s/final", o->run_dir);
        rc = zt_qwen3_save_hf(&tr.model.lay, tr.params, path, o->save_dtype);
        if (rc == 0)
            printf("saved: %s (Hugging Face config.json + model.safetensors, %s)\n", path,
                   o->save_dtype == ZT_ST_BF16 ? "bf16" : "fp32");
    }
    free(order);
    free(blocks);
    zt_trainer_free(&tr);
    zt_dataset_close(&ds);
    return rc;
}
