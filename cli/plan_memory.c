// The planner's memory per rank for the preflight gate's keep-gathered check: the command line
// layer hands ops/plan.c's formula down to train/preflight.c (which may not include ops/).
// defines: zt_cli_plan_memory
#include <stdio.h>

#include "cli/commands.h"
#include "ops/plan.h"
#include "base/common.h"

double zt_cli_plan_memory(const zt_model_config *cfg, int world, int shard_group, int keep_gathered, int micro_batch,
                          int64_t seq_len, int cuda, char *what, size_t n) {
    zt_gpu_spec g;
    zt_gpu_preset("B300", &g);  // the memory formula does not depend on the GPU's figures
    g.gpus_per_node = world;
    zt_plan_assumptions a;
    zt_plan_assumptions_default(&a);
    const zt_plan_job j = {.world = world, .micro_batch = micro_batch, .grad_accum = 1, .seq_len = seq_len,
                           .choice = shard_group < world ? ZT_SHARD_HSDP : ZT_SHARD_FULL, .shard_group = shard_group,
                           .reduce_bytes = 4, .param_bytes = cuda ? 2 : 4, .keep_gathered = keep_gathered};
    zt_plan_result r;
    if (zt_plan_predict(cfg, &g, &a, &j, &r) != 0) {
        snprintf(what, n, "no estimate: %s", zt_errmsg());
        zt_err_clear();
        return 0;
    }
    snprintf(what, n, "parameters %.3g MB, gradients %.3g MB, optimizer %.3g MB, gathered buffers %.3g MB%s, "
             "activations %.3g MB", r.mem.params / 1e6, r.mem.grads / 1e6, r.mem.optimizer / 1e6, r.mem.buffers / 1e6,
             keep_gathered ? " (every unit kept)" : "", r.mem.activations / 1e6);
    return r.mem.total;
}
