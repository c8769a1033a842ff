// The engine's public face (engine/fsdp.h): one constructor by backend name, which picks the
// CPU backend (fsdp_cpu.c) or the GPU one (the CUDA module through fsdp.c), and the accessors
// the trainer and the checkpoints use instead of the struct.
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "engine/fsdp.h"
#include "engine/fsdp_internal.h"
#include "kernels/ops.h"

int zt_fsdp_create(const zt_fsdp_config *c, zt_fsdp **out) {
    *out = NULL;
    zt_fsdp *f = zt_xcalloc(1, sizeof *f);
    int rc;
    if (!strcmp(c->backend, "cpu")) {
        rc = zt_fsdp_init(f, c->comm, c->cfg, &zt_cpu_ops, c->micro_batch, c->grad_accum, c->seq_len, &c->hp,
                          c->seed);
    } else if (!strcmp(c->backend, "cuda")) {
        const zt_fsdp_opts o = {.recompute = c->recompute, .attention_cudnn = c->attention_cudnn};
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
const zt_qwen3_layout *zt_fsdp_layout(const zt_fsdp *f) { return &f->model.lay; }
int zt_fsdp_unit_count(const zt_fsdp *f) { return f->nunits; }

void zt_fsdp_get_shard(const zt_fsdp *f, int u, zt_fsdp_shard *out) {
    const zt_fsdp_unit *x = &f->units[u];
    *out = (zt_fsdp_shard){.numel = x->numel, .lo = x->lo, .shard = x->shard, .valid = x->valid,
                           .master = x->master, .m = x->m, .v = x->v};
}
