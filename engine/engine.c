// The engine's public face (engine/fsdp.h): one constructor by backend name, which picks the
// CPU backend (fsdp_cpu.c) or the GPU one (the CUDA module through fsdp.c), and the accessors
// the trainer and the checkpoints use instead of the struct.
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "base/crc32c.h"
#include "base/env.h"
#include "engine/fsdp.h"
#include "engine/fsdp_internal.h"
#include "kernels/ops.h"

int zt_fsdp_create(const zt_fsdp_config *c, zt_fsdp **out) {
    *out = NULL;
    zt_fsdp *f = zt_xcalloc(1, sizeof *f);
    int rc;
    if (!strcmp(c->backend, "cpu")) {
        const zt_fsdp_opts o = {.shard_group = c->shard_group, .mesh = c->mesh, .keep_gathered = c->keep_gathered,
                                .context = c->context, .no_seed_init = c->no_seed_init};
        rc = zt_fsdp_init_opts(f, c->comm, c->cfg, &zt_cpu_ops, c->micro_batch, c->grad_accum, c->seq_len, &c->hp,
                               c->seed, &o);
    } else if (!strcmp(c->backend, "cuda")) {
        const zt_fsdp_opts o = {.recompute = c->recompute, .attention = c->attention,
                                .shard_group = c->shard_group, .mesh = c->mesh, .keep_gathered = c->keep_gathered,
                                .context = c->context, .no_seed_init = c->no_seed_init};
        rc = zt_fsdp_init_cuda(f, c->comm, c->dcomm, c->cfg, c->micro_batch, c->grad_accum, c->seq_len, &c->hp,
                               c->seed, &o);
    } else {
        rc = zt_err("FSDP engine: unknown backend \"%s\" (cpu or cuda)", c->backend);
    }
    if (rc != 0) {
        zt_fsdp_free(f);
        free(f);
        return -1;
    }
    *out = f;
    return 0;
}

void zt_fsdp_destroy(zt_fsdp *f) {
    if (!f) return;
    zt_fsdp_free(f);
    free(f);
}

int64_t zt_fsdp_get_step(const zt_fsdp *f) { return f->step; }
void zt_fsdp_set_step(zt_fsdp *f, int64_t step) { f->step = step; }
void zt_fsdp_set_epoch(zt_fsdp *f, int64_t epoch) { f->epoch = epoch; }
const zt_model_layout *zt_fsdp_layout(const zt_fsdp *f) { return &f->lay; }
int zt_fsdp_unit_count(const zt_fsdp *f) { return f->nunits; }

void zt_fsdp_get_shard(const zt_fsdp *f, int u, zt_fsdp_shard *out) {
    const zt_fsdp_unit *x = &f->units[u];
    *out = (zt_fsdp_shard){.numel = x->numel, .lo = x->lo, .shard = x->shard, .valid = x->valid,
                           .master = x->master, .m = x->m, .v = x->v};
}

void zt_fsdp_get_strategy(const zt_fsdp *f, zt_fsdp_strategy *out) {
    *out = (zt_fsdp_strategy){.shard_group = f->shard_world, .replicas = f->replicas, .replica = f->replica,
                              .shard_rank = f->shard_rank, .keep_gathered = f->keep_gathered,
                              .context = f->ctx_world};
}

int zt_fsdp_check_replicas(zt_fsdp *f) {
    if (f->replicas <= 1) return 0;
    const char *corrupt = zt_env_str(ZT_ENV_TEST_CORRUPT_REPLICA);  // tests: one rank's copy made to differ
    if (corrupt && *corrupt && atoi(corrupt) == f->rank && f->units[0].shard > 0) {
        uint32_t bits;
        memcpy(&bits, &f->units[0].master[0], sizeof bits);
        bits ^= 1u;
        memcpy(&f->units[0].master[0], &bits, sizeof bits);
    }
    uint32_t crc = 0;
    for (int i = 0; i < f->nunits; i++) {
        const zt_fsdp_unit *u = &f->units[i];
        const size_t n = (size_t)u->valid * sizeof(float);
        crc = zt_crc32c(crc, u->master, n);
        crc = zt_crc32c(crc, u->m, n);
        crc = zt_crc32c(crc, u->v, n);
    }
    int64_t mine = crc, *all = zt_xcalloc((size_t)f->world, sizeof *all);
    if (zt_allgather(f->comm, &mine, all, 1, ZT_DT_I64, "replica checksums") != 0) {
        free(all);
        return -1;
    }
    // Every rank sees every checksum, so every rank builds the same message.
    char msg[ZT_ERR_MAX] = "";
    size_t at = 0;
    int bad = 0;
    const int G = f->shard_world;
    for (int r = G; r < f->world; r++) {
        const int ref = r % G;  // replica 0 of the same shard: the writer
        if (all[r] == all[ref]) continue;
        if (bad++ < 8 && at < sizeof msg)
            at += (size_t)snprintf(msg + at, sizeof msg - at, "%srank %d (replica %d of shard %d, CRC-32C 0x%08" PRIx32
                                   ") differs from rank %d (replica 0, the writer, 0x%08" PRIx32 ")",
                                   bad > 1 ? "; " : "", r, r / G, ref, (uint32_t)all[r], ref, (uint32_t)all[ref]);
    }
    free(all);
    if (bad)
        return zt_err("hybrid sharding: the replicas of a shard no longer hold the same state: %s%s. Each shard is "
                      "written once, by replica 0, so the checkpoint is refused rather than keeping one copy of "
                      "diverged state (a reduction that is not bit-identical on every rank, or corrupted memory)",
                      msg, bad > 8 ? " (and more)" : "");
    return 0;
}
