// Qwen3.5 SFT per conversation, under mpirun -n 2: the tiny Qwen3.5 over the 248,320 vocabulary
// (tests/golden/q35_sft: its weights loaded as train --init loads them, each rank its slices)
// evaluated by the ZeRO-3 engine at W = 2, documents isolated, on one conversation at a time: a
// block holding that conversation's words (ids and trained-target mask as apply_chat_template
// gives them, which pack reproduces: tests/cli/qwen3_5_sft.sh) then padding, on one rank, the other
// rank running a filler that counts nothing (blocks of 64 or 704 tokens: two engines, each
// conversation in the smaller block it fits). Each conversation's summed loss and target count must
// equal Qwen3_5ForCausalLM run on that conversation alone (golden.json "per_conversation", written
// by tests/reference/make_qwen3_5_sft_golden.py): rel 1e-5 for the loss, exact for the count.
// The parameters are untouched by an evaluation: this is the loss at lr 0, conversation by
// conversation (qwen3_5_sft_end_to_end checks the step's loss over all of them).
//   mpirun -n 2 test_q35_doc_loss GOLDEN_DIR(tests/golden/q35_sft) WORK_DIR
#include <cjson/cJSON.h>
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

#include "base/common.h"
#include "checkpoint/hf.h"
#include "engine/comm_mpi.h"
#include "engine/fsdp.h"
#include "model/config.h"
#include "tests/support/test_util.h"

#define PAD_ID 248044u  // <|endoftext|>, Qwen3.5's pad: pack's padding document
#define DOC_START (1u << 30)
#define NO_LOSS (1u << 31)

static int gunzip_to(const char *src, const char *dst) {
    gzFile in = gzopen(src, "rb");
    FILE *out = fopen(dst, "wb");
    if (!in || !out) return -1;
    char buf[1 << 16];
    int r;
    while ((r = gzread(in, buf, sizeof buf)) > 0) fwrite(buf, 1, (size_t)r, out);
    gzclose(in);
    return fclose(out) == 0 && r == 0 ? 0 : -1;
}

int main(int argc, char **argv) {
    if (argc != 3) zt_fatal("usage: test_q35_doc_loss GOLDEN_DIR WORK_DIR");
    const char *gold = argv[1], *work = argv[2];
    if (zt_mpi_init_once() != 0) zt_die_on_err();
    zt_comm *comm;
    zt_comm_opts co = zt_comm_opts_default();
    co.timeout_s = 120;
    if (zt_comm_init_mpi(&comm, MPI_COMM_WORLD, &co) != 0) zt_die_on_err();
    zt_comm_info info;
    zt_comm_get_info(comm, &info);
    const int W = info.world, rank = info.rank;
    CHECK(W == 2, "run with mpirun -n 2 (world %d)", W);

    // the model directory: config.json and the weights, unpacked by each rank into its own file
    char path[1024], model[1024];
    snprintf(model, sizeof model, "%s/model-rank%d.safetensors", work, rank);
    snprintf(path, sizeof path, "%s/model.safetensors.gz", gold);
    if (zt_mkdirs(work) != 0 || gunzip_to(path, model) != 0) zt_fatal("cannot unpack %s into %s", path, model);
    zt_model_config cfg;
    if (zt_model_config_load(&cfg, gold) != 0) zt_die_on_err();
    snprintf(path, sizeof path, "%s/golden.json", gold);
    size_t gjn;
    char *gj = zt_read_file(path, &gjn);
    cJSON *g = gj ? cJSON_Parse(gj) : NULL;
    const cJSON *per = cJSON_GetObjectItem(g, "per_conversation"), *ids = cJSON_GetObjectItem(g, "ids"),
                *masks = cJSON_GetObjectItem(g, "masks");
    if (!per || !ids || !masks) zt_fatal("cannot read %s", path);
    const int nconv = cJSON_GetArraySize(per);

    // Two engines, blocks of 64 and of 704 tokens: each conversation goes to the smaller one it fits
    // (the 248,320-wide head makes every position of a block cost, padding included)
    const int64_t sizes[2] = {64, 704};
    zt_hparams hp = {.lr = 0, .total_steps = 1, .schedule = ZT_SCHED_COSINE, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8};
    int same = 0, done = 0;
    double worst = 0;
    for (int e = 0; e < 2; e++) {
        const int64_t S = sizes[e];
        zt_fsdp *f = NULL;
        const zt_fsdp_config ec = {.backend = "cpu", .comm = comm, .cfg = &cfg, .micro_batch = 1, .grad_accum = 1,
                                   .seq_len = S, .hp = hp, .seed = 1, .no_seed_init = 1};
        if (zt_fsdp_create(&ec, &f) != 0) zt_die_on_err();
        // --init: this rank's slices of every unit
        const zt_model_layout *lay = zt_fsdp_layout(f);
        int64_t *lo = zt_xcalloc((size_t)lay->nunits, sizeof(int64_t)),
                *valid = zt_xcalloc((size_t)lay->nunits, sizeof(int64_t));
        float **dst = zt_xcalloc((size_t)lay->nunits, sizeof(float *));
        for (int u = 0; u < lay->nunits; u++) {
            zt_fsdp_shard sh;
            zt_fsdp_get_shard(f, u, &sh);
            lo[u] = sh.lo, valid[u] = sh.valid, dst[u] = sh.master;
        }
        if (zt_hf_load_slices(lay, model, lo, valid, dst) != 0) zt_die_on_err();
        if (zt_fsdp_set_data(f, 1, 1) != 0) zt_die_on_err();
        uint32_t *block = zt_xmalloc((size_t)S * sizeof *block);
        for (int k = 0; k < nconv; k++) {
            const cJSON *ck = cJSON_GetArrayItem(ids, k);
            const char *mk = cJSON_GetArrayItem(masks, k)->valuestring;
            const int n = cJSON_GetArraySize(ck);
            if (n >= S || (e == 1 && n < sizes[0])) continue;  // another engine's
            done++;
            CHECK((int)strlen(mk) == n, "conversation %d: %d tokens, mask of %zu", k, n, strlen(mk));
            for (int i = 0; i < n; i++)
                block[i] = (uint32_t)cJSON_GetArrayItem(ck, i)->valuedouble | (i ? 0 : DOC_START) |
                           (mk[i] == '1' ? 0 : NO_LOSS);
            for (int64_t i = n; i < S; i++) block[i] = PAD_ID | NO_LOSS | (i == n ? DOC_START : 0);
            // the conversation on rank k % 2, a filler (counts nothing) on the other
            const uint32_t *blocks[1] = {rank == k % 2 ? block : NULL};
            double sum = 0;
            int64_t targets = 0;
            if (zt_fsdp_eval(f, blocks, 1, &sum, &targets) != 0) zt_die_on_err();
            const cJSON *pk = cJSON_GetArrayItem(per, k);
            const double want = cJSON_GetObjectItem(pk, "loss_sum")->valuedouble;
            const int64_t count = (int64_t)cJSON_GetObjectItem(pk, "count")->valuedouble;
            const double rel = fabs(sum - want) / fabs(want);
            if (rel > worst) worst = rel;
            const int ok = targets == count && rel <= 1e-5;
            same += ok;
            if (rank == 0)
                printf("conversation %d (%d tokens, block of %lld) on rank %d: loss %.9f over %lld targets, "
                       "transformers %.9f over %lld: rel %.2e\n", k, n, (long long)S, k % 2, sum / (double)targets,
                       (long long)targets, want / (double)count, (long long)count, rel);
            CHECK(ok, "conversation %d: loss sum %.9f over %lld targets, transformers %.9f over %lld (rel %.2e, tol "
                  "1e-5)", k, sum, (long long)targets, want, (long long)count, rel);
        }
        free(block), free(lo), free(valid), free(dst);
        zt_fsdp_destroy(f);
    }
    CHECK(done == nconv, "%d of %d conversations evaluated (one longer than %lld tokens?)", done, nconv,
          (long long)sizes[1]);
    if (rank == 0)
        printf("per conversation at W = 2, lr 0: %d of %d equal transformers on each conversation alone (worst rel "
               "%.2e)\n", same, nconv, worst);
    CHECK(nconv == 8, "golden.json has %d conversations, 8 expected", nconv);
    remove(model);
    free(gj);
    cJSON_Delete(g);
    int failed = zt_test_failures;
    MPI_Allreduce(MPI_IN_PLACE, &failed, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    zt_comm_finalize(comm);
    zt_mpi_finalize_once();
    if (rank == 0) printf("%d checks, %d failed (all ranks)\n", zt_test_checks, failed);
    return failed ? 1 : 0;
}
