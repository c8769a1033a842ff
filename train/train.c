// `zerotrain train`'s run (train/loop.h): its phases and the training loop. Every rank opens
// and checks (its share of) the data, deals blocks, agrees on the step count (evenfix: the
// global minimum), and runs the FSDP engine. Every control-flow decision (stop, error, epoch
// end) comes from an all-reduced value, so all ranks take it at the same step.
// Phases, in zt_train_body's order: set_threads, choose_device, run_gate, open_data (evaluation
// data: eval.c), dealing (data_cursor.c), build_engine (--init; the checkpoint shards and
// --async-save's snapshot: save.c; --resume: resume.c), the device (device_info.c), the plan and
// the run log's files (run_log.c); then train_loop: the step's blocks (data_cursor.c), its FLOPs
// (flops_acct.c), zt_fsdp_step, zt_runlog_step, evaluation (eval.c), the checkpoint policy
// (save.c); at the end the summary, export_final and complete.json. The job around it (MPI,
// signals, the lock) is session.c.
// defines: zt_train_defaults, zt_train_body, zt_train_cleanup
#define _GNU_SOURCE
#include <cjson/cJSON.h>
#include <math.h>
#include <mpi.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <omp.h>

#include "base/common.h"
#include "checkpoint/hf.h"
#include "checkpoint/safetensors.h"
#include "engine/comm_mpi.h"
#include "engine/cuda_module.h"
#include "engine/job_shape.h"
#include "train/agree.h"
#include "train/device_info.h"
#include "train/eval.h"
#include "train/loop.h"
#include "train/preflight.h"
#include "train/resume.h"
#include "train/run_log.h"
#include "train/save.h"
#include "train/signals.h"

void zt_train_defaults(zt_train_opts *o) {
    memset(o, 0, sizeof *o);
    o->epochs = ZT_DEF_EPOCHS;
    o->attention = ZT_ATTN_AUTO;
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
    o->context_parallel = 1;
    o->async_save = ZT_DEF_ASYNC_SAVE;
    o->save_io = ZT_DEF_SAVE_IO;
    o->collective_timeout = ZT_DEF_COLLECTIVE_TIMEOUT;
    o->first_collective_timeout = ZT_DEF_FIRST_COLLECTIVE_TIMEOUT;
    o->save_timeout = ZT_DEF_SAVE_TIMEOUT;
}

void zt_train_cleanup(run_state *r) {
    zt_sinks_close(&r->sinks);
    zt_save_free(&r->ckpt);  // first: a write still in flight may be copying the engine's shards
    zt_flops_free(&r->flops);
    zt_fsdp_destroy(r->f);
    zt_cursor_free(&r->data, r->data_world);
    zt_eval_free(&r->eval);
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
// The model config as this run trains it. What the file contradicts itself on (read as
// transformers reads it) is said once. A tied config whose --init checkpoint stores an
// lm_head.weight of its own trains untied, as transformers 5 loads it (both present with
// different values: "we will NOT tie them", and it warns), so the stored head is neither dropped
// nor replaced by the embedding; the checkpoints, RUN/final and export then hold it. Rank 0 reads
// the two tensors; every rank takes its word.
static int settle_config(const zt_train_opts *o, run_state *r, const char *cfg_src) {
    if (r->rank == 0 && r->cfg.note[0]) fprintf(stderr, "zerotrain: warning: %s\n", r->cfg.note);
    if (!o->init || !r->cfg.tie_word_embeddings) return 0;
    int64_t word = 0;
    int ok = 1;
    if (r->rank == 0) {
        int distinct = 0;
        char detail[400];
        ok = zt_hf_tied_head_differs(&r->cfg, o->init, &distinct, detail, sizeof detail) == 0;
        if (!ok) zt_err_prefix("--init %s", o->init);
        if (ok && distinct) {
            word = 1;
            fprintf(stderr, "zerotrain: warning: --init %s: %s says tie_word_embeddings true, but %s; as transformers 5 "
                    "does, the two are not tied: lm_head.weight is loaded and trained as a matrix of its own (set "
                    "tie_word_embeddings false in the config to say so)\n",
                    o->init, cfg_src, detail);
        }
    }
    if (zt_train_agree(r->comm, ok, "comparing --init's lm_head.weight with its embedding") != 0) return -1;
    if (zt_allreduce(r->comm, &word, &word, 1, ZT_DT_I64, ZT_RED_MAX, "tied head") != 0) return -1;
    if (word) r->cfg.tie_word_embeddings = 0;
    return 0;
}

static int run_gate(const zt_train_opts *o, run_state *r, const char *cfg_src) {
    if (!o->preflight) return 0;
    zt_preflight_opts po;
    zt_preflight_defaults(&po);
    po.data = o->data;
    po.model = cfg_src;
    po.cfg = &r->cfg;  // as settled (settle_config): an --init head that unties it counts
    po.run_dir = o->run_dir;
    po.micro_batch = o->micro_batch;
    po.grad_accum = o->grad_accum;
    po.evenfix = o->evenfix;
    po.keep_last = o->keep_last;
    po.verify_crc = o->verify_crc;
    po.allow_long_seq = o->allow_long_seq;
    po.shard_group = o->shard_group;
    po.reshard_after_forward = o->reshard_after_forward;
    po.context_parallel = o->context_parallel;
    po.device = r->cuda ? "cuda" : "cpu";  // check 3 inspects each rank's GPU on the cuda backend
    if (zt_preflight_run(r->comm, &po, stdout) != 0)
        return zt_err_prefix("stopping before training (pass --no-preflight to override)");
    return 0;
}

// Every rank maps all files; crc/tokens were checked by the gate (or here, split by rank).
static int open_data(const zt_train_opts *o, run_state *r) {
    const int R0 = r->rank == 0;
    const zt_model_config *cfg = &r->cfg;
    data_cursor *c = &r->data;
    const zt_dataset *ds = &c->ds;
    const double t0 = zt_now();
    zt_dataset_opts dopts = {.verify_crc = o->verify_crc && !o->preflight, .check_tokens = !o->preflight,
                             .model_vocab = cfg->vocab_size, .part = r->rank, .nparts = r->world};
    int ok = zt_dataset_open(&c->ds, o->data, &dopts) == 0;
    c->ds_open = ok;
    // a dataset packed with another tokenizer than the model directory's is refused
    if (ok) ok = zt_dataset_check_tokenizer(ds, o->data, o->init ? o->init : o->model) == 0;
    if (ok && ds->per_rank && ds->nfiles != r->data_world && r->context == 1)
        ok = zt_err("%s: a per-rank dataset with %d file%s needs exactly %d rank%s, but the job has %d (pack it "
                    "again with --per-rank %d, or launch %d ranks)",
                    o->data, ds->nfiles, ds->nfiles == 1 ? "" : "s", ds->nfiles, ds->nfiles == 1 ? "" : "s",
                    r->world, r->world, ds->nfiles) == 0;
    else if (ok && ds->per_rank && ds->nfiles != r->data_world)  // a context group's ranks read one file
        ok = zt_err("%s: a per-rank dataset with %d file%s needs exactly %d data-parallel rank%s, but the job has %d "
                    "(W = %d / --context-parallel %d; pack it again with --per-rank %d, or launch %d ranks)",
                    o->data, ds->nfiles, ds->nfiles == 1 ? "" : "s", ds->nfiles, ds->nfiles == 1 ? "" : "s",
                    r->data_world, r->world, r->context, r->data_world, ds->nfiles * r->context) == 0;
    if (zt_train_agree(r->comm, ok, "opening the dataset") != 0) return -1;
    if (R0)
        printf("data: %s: %s layout, %d file%s, %lld blocks of %d tokens (%.2f M tokens) (%.2f s)\n", o->data,
               ds->per_rank ? "per-rank" : "single", ds->nfiles, ds->nfiles == 1 ? "" : "s",
               (long long)ds->total_blocks, ds->seq_len, (double)ds->total_blocks * ds->seq_len / 1e6, zt_now() - t0);
    c->isolated =
        o->doc_attention == ZT_DOC_ATTN_ISOLATED || (o->doc_attention == ZT_DOC_ATTN_DATASET && ds->doc_isolated);
    if (c->isolated && !ds->token_flags)
        return zt_err("--doc-attention isolated: %s is a version %d dataset, which stores no document boundaries "
                      "(pack conversations with `zerotrain pack --input chat`)",
                      o->data, ds->version);
    if (R0 && ds->token_flags) {
        char trained[48] = "count not recorded";
        if (ds->trained_tokens >= 0) snprintf(trained, sizeof trained, "%lld trained tokens", (long long)ds->trained_tokens);
        printf("data: version 2 words: loss masks (%s), documents %s\n", trained,
               c->isolated ? "isolated (attention and RoPE positions per document)"
                           : "see each other (full attention)");
    }
    if (o->eval_data && zt_eval_open(&r->eval, o, &r->data, cfg->vocab_size, r->comm, r->rank, r->world,
                                     r->data_world) != 0)
        return -1;
    if (R0 && ds->seq_len > zt_model_max_positions(cfg))
        fprintf(stderr, "zerotrain: warning: dataset seq_len %d exceeds the model's %s %lld\n", ds->seq_len,
                cfg->rope_yarn ? "YaRN range" : "max_position_embeddings", (long long)zt_model_max_positions(cfg));
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
            int64_t k = e - td->offset, idx[3] = {0, 0, 0};
            for (int j = td->ndim - 1; j >= 0; j--) idx[j] = j ? k % td->shape[j] : k, k = j ? k / td->shape[j] : k;
            char where[80];
            size_t wo = (size_t)snprintf(where, sizeof where, "[");
            for (int j = 0; j < td->ndim; j++)
                wo += (size_t)snprintf(where + wo, sizeof where - wo, "%s%lld", j ? ", " : "", (long long)idx[j]);
            snprintf(where + wo, sizeof where - wo, "]");
            ok = zt_err("--init %s: tensor %s holds a non-finite value (%g) at %s; a model that starts from it can "
                        "only produce non-finite losses (weights saved after a diverged run, or damaged)",
                        o->init, td->name, (double)dst[u][i], where) == 0;
        }
    free(lo), free(valid), free(dst);
    if (zt_train_agree_named(r, ok, "loading --init weights") != 0) return -1;
    if (r->rank == 0) printf("init: loaded Hugging Face weights from %s (%.2f s)\n", o->init, zt_now() - t0);
    return 0;
}

// The tensors of --init its family carries but does not train (RUN/carry, checkpoint/hf.h): rank 0
// copies them at a fresh start (a resumed run keeps the copy it has and only verifies it), and the
// training settings record which copy it is, so its checkpoints, export and RUN/final find it.
static int setup_carry(const zt_train_opts *o, run_state *r) {
    const zt_model_layout *lay = zt_fsdp_layout(r->f);
    const char *const *pre = lay->cfg.family ? lay->cfg.family->carry_prefixes : NULL;
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/carry", o->run_dir);
    int64_t word = 0;  // rank 0's answer: 1 << 32 | the manifest's crc32c, or 0 when nothing is carried
    int ok = 1;
    if (r->rank == 0) {
        struct stat st;
        const int have = lstat(dir, &st) == 0;
        zt_hf_carry c;
        int n = 0;
        if (o->resume && have) {
            ok = zt_hf_carry_open(&c, dir) == 0;
            if (!ok) zt_err_prefix("--resume");
            n = ok;
        } else if (o->init && pre && *pre) {
            const double t0 = zt_now();
            const char *src = o->model ? o->model : o->init;
            char cfg_path[4200];
            snprintf(cfg_path, sizeof cfg_path, stat(src, &st) == 0 && S_ISDIR(st.st_mode) ? "%s/config.json" : "%s", src);
            ok = zt_hf_carry_write(lay, o->init, cfg_path, o->run_dir, &n) == 0 && (n == 0 || zt_hf_carry_open(&c, dir) == 0);
            if (!ok) zt_err_prefix("--init %s", o->init);
            char names[256] = "";
            for (size_t i = 0, o = 0; pre[i] && o < sizeof names; i++)
                o += (size_t)snprintf(names + o, sizeof names - o, "%s%s*", i ? ", " : "", pre[i]);
            if (ok && n > 0)
                printf("init: carried %d tensor%s the model does not train (%s) into %s, kept as they are for "
                       "export and RUN/final (%.2f s)\n", n, n == 1 ? "" : "s", names, dir, zt_now() - t0);
        } else if (!o->resume && have) {
            ok = zt_remove_tree(dir) == 0;  // an earlier run's in a reused directory
        }
        if (ok && n > 0) {
            word = (int64_t)1 << 32 | c.manifest_crc;
            zt_hf_carry_close(&c);
        }
    }
    if (zt_train_agree(r->comm, ok, "carrying the tensors the model does not train") != 0) return -1;
    if (zt_allreduce(r->comm, &word, &word, 1, ZT_DT_I64, ZT_RED_MAX, "carry record") != 0) return -1;
    r->carry[0] = 0;
    if (word) snprintf(r->carry, sizeof r->carry, "manifest.json crc32c %08x", (unsigned)(word & 0xffffffffu));
    return 0;
}

// The training settings with the carry's record (none: as they were).
static char *settings_with_carry(char *settings, const char *carry) {
    if (!carry[0]) return settings;
    cJSON *t = cJSON_Parse(settings);
    cJSON_AddStringToObject(t, ZT_HF_CARRY_KEY, carry);
    char *text = cJSON_PrintUnformatted(t);
    cJSON_Delete(t);
    free(settings);
    return text;
}

// --attention auto's question to the CUDA module (kernels/cuda/attention/policy.h zt_attn_auto_in).
static int cudnn_serves(const void *cfg) { return zt_fsdp_cuda_cudnn_serves(cfg); }

// The engine: NCCL communicators (cuda), the sharded model and optimizer state, then its
// starting point: --init weights, or the checkpoint of --resume, copied to the device.
static int build_engine(const zt_train_opts *o, run_state *r) {
    const zt_model_config cfg = r->cfg;
    const zt_dataset *ds = &r->data.ds;
    const zt_hparams hp = r->hp;
    char backend[192];
    snprintf(backend, sizeof backend, "cpu backend (%s sgemm kernel)", zt_cpu_gemm_kernel());
    int ok = 1;
    // --attention: the kind the GPU layers run; auto decides in kernels/cuda/attention/policy.h
    const zt_attn_auto_in ain = {.cuda = r->cuda, .isolated = r->data.isolated, .context = o->context_parallel,
                                 .cudnn_serves = cudnn_serves, .cudnn_arg = &cfg, .S = ds->seq_len,
                                 .H = cfg.num_heads, .Hkv = cfg.num_kv_heads, .D = cfg.head_dim};
    const int attention = zt_attn_choose(o->attention, &ain);
    if (r->cuda) {
        // Its own flight recorders (RUN/nccl/ranks/rank-N.flight): a deadline report on the
        // NCCL comm summarises the peers' NCCL recorders, not the MPI comm's.
        char ndir[4200];
        snprintf(ndir, sizeof ndir, "%s/nccl", o->run_dir);
        zt_comm_opts dco = r->copts;
        dco.run_dir = ndir;
        MPI_Comm world = zt_comm_mpi_base(r->comm);
        ok = zt_cuda_comm_init(&r->dcomm, &world, -1, &dco) == 0;
        if (zt_train_agree(r->comm, ok, "creating the NCCL communicators") != 0) return -1;
        ok = zt_mesh_attach_device(r->mesh, r->dcomm, 1) == 0;  // the mesh's groups on the GPU; owns dcomm
        if (zt_train_agree(r->comm, ok, "making the NCCL process groups") != 0) return -1;
        zt_fsdp_cuda_describe(r->dcomm, backend, sizeof backend);
        size_t bl = strlen(backend);
        snprintf(backend + bl, sizeof backend - bl, ", %s attention%s%s",
                 attention == ZT_ATTN_CUDNN ? "cuDNN flash" : attention == ZT_ATTN_GEMM ? "GEMM" : "tiled",
                 o->attention == ZT_ATTN_AUTO ? " (auto)" : "", o->recompute ? ", activation recomputation" : "");
    }

    snprintf(r->backend, sizeof r->backend, "%s", backend);
    if (!r->cuda && (o->attention != ZT_ATTN_AUTO || o->recompute) && r->rank == 0)
        fprintf(stderr, "zerotrain: warning: --attention and --recompute apply to the cuda backend; the cpu "
                        "backend ignores them\n");

    // ---- model and optimizer state, sharded (over all W ranks, or hybrid: groups of G) ----
    const int G = zt_mesh_size(r->mesh, ZT_MESH_SHARD);  // the session resolved --shard-group into the mesh
    if (r->rank == 0 && (G < r->world || !o->reshard_after_forward))
        printf("sharding: %s over groups of %d rank%s x %d replica%s%s\n", G < r->world ? "hybrid" : "full shard", G,
               G == 1 ? "" : "s", r->world / G, r->world / G == 1 ? "" : "s",
               o->reshard_after_forward ? "" : ", parameters kept gathered from forward to backward");
    if (r->rank == 0 && r->context > 1)
        printf("context parallelism: groups of %d consecutive ranks share each block (each holds an early and a late "
               "chunk, about %d of its %d tokens), %d data-parallel group%s\n", r->context, ds->seq_len / r->context,
               ds->seq_len, r->data_world, r->data_world == 1 ? "" : "s");
    const zt_fsdp_config ec = {.backend = r->cuda ? "cuda" : "cpu", .comm = r->comm, .dcomm = r->dcomm, .mesh = r->mesh,
                               .cfg = &cfg,
                               .micro_batch = o->micro_batch, .grad_accum = o->grad_accum, .seq_len = ds->seq_len,
                               .hp = hp, .seed = o->seed, .recompute = o->recompute,
                               .attention = attention, .shard_group = G,
                               .keep_gathered = !o->reshard_after_forward, .context = r->context,
                               .no_seed_init = o->init != NULL};  // load_init_weights writes every value
    ok = zt_fsdp_create(&ec, &r->f) == 0;
    if (ok) ok = zt_fsdp_set_data(r->f, ds->token_flags, r->data.isolated) == 0;
    if (zt_train_agree(r->comm, ok, "building the model") != 0) return -1;
    if (o->init && load_init_weights(o, r) != 0) return -1;
    if (setup_carry(o, r) != 0) return -1;
    zt_save_shards(&r->ckpt, r->f);
    zt_ckpt_set_save_io(o->save_io);  // before any save, and before the async writer exists
    if (o->async_save && zt_save_make_snapshot(r) != 0) return -1;
    r->ckpt.settings = settings_with_carry(
        zt_resume_settings_json(o, ds, r->data.isolated, r->data.global_step_blocks, r->total_steps), r->carry);
    if (o->resume && zt_resume_from_checkpoint(o, r) != 0) return -1;
    if ((o->init || o->resume) && zt_fsdp_to_device(r->f) != 0) return -1;  // the loaded host shards to the GPU
    return 0;
}

// A step's outcome the loop stops on: a non-finite loss or gradient norm (all-reduced).
static int check_finite(const zt_train_opts *o, const run_state *r, int64_t step, const zt_fsdp_stats *s) {
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
    if (r->ckpt.saved_step >= 0)
        snprintf(ckpt, sizeof ckpt, "the last checkpoint (step %lld) is untouched", (long long)r->ckpt.saved_step);
    else
        snprintf(ckpt, sizeof ckpt, "no checkpoint of this run exists yet");
    if (step == 0) {  // no update was ever made: the model as it starts overflows, whatever --lr is
        const char *cfg_src = o->model ? o->model : o->init;
        char init[4300];
        if (o->init)
            snprintf(init, sizeof init, "the --init weights (%s: a value too large for the op it feeds, e.g. a decay "
                     "parameter whose exponential overflows)", o->init);
        else
            snprintf(init, sizeof init, "the weights' random start (initializer_range)");
        return zt_err("step 1: %s; stopping before the update, and before any update: --lr plays no part yet, the "
                      "model as it starts overflows on this data. Check its config (%s: e.g. YaRN's mscale or "
                      "attention_factor) and %s; %s",
                      what, cfg_src, init, ckpt);
    }
    return zt_err("step %lld: %s; stopping before the update (the parameters are those of step %lld, finite). Lower "
                  "--lr or check the data; %s",
                  (long long)step + 1, what, (long long)step, ckpt);
}

// The running totals after a step.
static void account_step(run_progress *p, int64_t step, const zt_fsdp_stats *s) {
    p->step = step + 1;
    p->steps_run++;
    p->tokens_seen += s->tokens;
    p->t_wait_total += s->t_comm_wait;
    p->t_compute_total += s->t_compute;
    if (p->steps_run == 1) p->loss_first = s->loss;
    p->loss_last = s->loss;
    p->lr_last = s->lr;
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
        ok = zt_remove_tree(path) == 0 && zt_ckpt_export_hf(r->ckpt.ckpt_path, path, o->save_dtype, 0) == 0;
        if (ok)
            printf("saved: %s (Hugging Face config.json + safetensors, %s, from %s, %.2f s)\n", path,
                   o->save_dtype == ZT_ST_BF16 ? "bf16" : "fp32", r->ckpt.ckpt_path, zt_now() - ts);
    }
    return zt_train_agree(r->comm, ok, "exporting final weights");
}

// The training loop. Every decision at a step boundary (stop, evaluation, checkpoint,
// epoch end) comes from all-reduced values, so every rank takes it at the same step.
static int run_steps(const zt_train_opts *o, run_state *r, int *stopped) {
    for (int64_t step = r->progress.start_step; step < r->total_steps; step++) {
        const int data_ok = zt_cursor_next_batch(&r->data, r->f, o->seed, r->data_rank, r->sinks.trace, step) == 0;
        if (data_ok)
            zt_flops_step(&r->flops, &r->data, &r->cfg, o->seed, r->cuda && o->recompute, r->rank, r->data_world, r->context,
                          step);
        if (o->debug_signal_at_step > 0 && step + 1 == o->debug_signal_at_step && r->rank == 0) raise(SIGUSR1);
        zt_fsdp_stats s;
        const int flags = (zt_signals_stop() ? ZT_FSDP_STOP : 0) | (data_ok ? 0 : ZT_FSDP_INPUT_BAD);
        if (zt_fsdp_step(r->f, r->data.blocks, flags, &s) != 0) return -1;
        // A data file changed under any rank (the step's all-reduce says so; no rank updated):
        // the reason to every rank, a checkpoint of the last good step (the model and optimizer
        // are intact; only the input is not) and the named error.
        if (s.input_bad) {
            // this rank's blocks refused by the engine (an id outside the model's vocabulary that
            // the read's own check against dataset.json's did not see): its reason, named
            if (data_ok && s.input_refused) zt_err_prefix("--data (rank %d, step %lld)", r->rank, (long long)step + 1);
            if (zt_train_agree_named(r, data_ok && !s.input_refused, "step data check") < 0) return -1;
            return zt_save_data_bad_stop(o, r, step);
        }
        if (r->progress.steps_run == 0) {
            zt_comm_mark_warm(r->comm);
            if (r->dcomm) zt_comm_mark_warm(r->dcomm);
        }
        if (check_finite(o, r, step, &s) != 0) return -1;
        account_step(&r->progress, step, &s);
        zt_liveness_set_step(r->alive, r->progress.step);
        zt_flops_account(&r->flops, r->rank, s.t_step);
        zt_runlog_step(o, r, step, &s);
        if (zt_save_after_step(o, r, step, &s) != 0) return -1;  // --async-save: its events, a commit

        const int last = step + 1 == r->total_steps;
        int stop = s.stop_requested > 0;
        // A stop already agreed skips the evaluation: the checkpoint comes first.
        const int ev = stop ? EVAL_DONE : zt_eval_maybe(o, r, step + 1, last);
        if (ev < 0) return -1;
        if (ev == EVAL_DATA_BAD) return zt_save_data_bad_stop(o, r, step + 1);
        if (ev == EVAL_STOPPED) stop = 1;
        if (zt_save_maybe(o, r, step + 1, last, stop) != 0) return -1;
        if (stop && !last) {
            *stopped = 1;
            if (r->rank == 0) {
                zt_runlog_clear_progress();
                const int n = ev == EVAL_STOPPED ? r->eval.stopped : s.stop_requested;
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
    zt_cursor_start(&r->data);
    r->progress.loss_first = r->progress.loss_last = NAN;
    r->progress.t_loop = r->ckpt.t_durable = zt_now();
    // A terminal gets a progress line updated in place; logs and Slurm output (not a
    // terminal) only the plain --log-every lines, so they stay greppable.
    r->sinks.progress_tty = r->rank == 0 && o->log_every > 0 && isatty(STDOUT_FILENO);
    r->ckpt.saved_step = o->resume ? r->progress.start_step : -1;  // a resumed step is committed already
    zt_signals_exit_on_stop(0);  // from here a stop request checkpoints at the next step boundary
    int stopped = 0;
    const int rc = run_steps(o, r, &stopped);
    if (rc != 0) zt_save_abandon(o, r);
    if (r->rank == 0) zt_runlog_clear_progress();
    if (rc != 0) return -1;
    zt_runlog_summary(r, stopped);
    if (stopped) {
        zt_runlog_stopped(o, r);
        return 0;
    }
    if (export_final(o, r) != 0) return -1;
    int64_t lost = zt_line_lost(r->sinks.rank_metrics);  // the rank files' records a full disk refused
    if (zt_allreduce(r->comm, &lost, &lost, 1, ZT_DT_I64, ZT_RED_SUM, "counting lost metrics records") != 0) return -1;
    return zt_runlog_complete(o, r, lost);
}

// A run: its phases in order, each agreed by every rank before the next.
int zt_train_body(const zt_train_opts *o, run_state *r) {
    r->t_start = zt_now();
    r->context = zt_mesh_size(r->mesh, ZT_MESH_CONTEXT);  // the session made the mesh with --context-parallel
    r->data_rank = r->rank / r->context;
    r->data_world = zt_data_parallel_ranks(r->world, r->context);
    set_threads(o, r);
    const char *cfg_src = o->model ? o->model : o->init;  // every rank reads it; they must agree
    if (zt_train_agree(r->comm, zt_model_config_load(&r->cfg, cfg_src) == 0, "reading the model config") != 0) return -1;
    if (settle_config(o, r, cfg_src) != 0) return -1;
    if (choose_device(o, r) != 0) return -1;
    if (run_gate(o, r, cfg_src) != 0) return -1;
    if (open_data(o, r) != 0) return -1;
    if (zt_cursor_deal(&r->data, o, r->comm, r->rank, r->world, r->context) != 0) return -1;
    r->total_steps = o->steps > 0 ? o->steps : o->epochs * r->data.steps_per_epoch;  // the run's length
    r->hp = o->hp;
    r->hp.total_steps = r->total_steps;
    if (build_engine(o, r) != 0) return -1;
    zt_run_device(o, &r->flops, r->cuda, r->rank, r->threads, r->backend);
    zt_fsdp_memory mem;
    zt_fsdp_memory_usage(r->f, &mem);
    zt_runlog_plan(o, r, &mem);
    if (zt_runlog_open(o, r, &mem) != 0) return -1;
    return train_loop(o, r);
}

