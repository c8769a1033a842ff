// The overlap schedule the design promises (docs/design.md), read from an FSDP engine's
// event log: one definition for the CPU backend's test (tests/unit/test_fsdp.c) and the GPU
// backend's (tests/gpu/test_fsdp_cuda.c), since both backends run the one schedule of
// engine/fsdp.c. `report(ok, message)` is called once per condition.
#ifndef ZT_TESTS_FSDP_SCHEDULE_H
#define ZT_TESTS_FSDP_SCHEDULE_H
#include <stdio.h>

#include "engine/fsdp.h"
#include "engine/fsdp_internal.h"  // the engine's struct: pools, event log, test knobs

static int zt_sched_find(const zt_fsdp *f, int from, zt_fsdp_ev_kind k, int unit, int micro) {
    for (int i = from; i < f->nevents; i++)
        if (f->events[i].kind == k && f->events[i].unit == unit && f->events[i].micro == micro) return i;
    return -1;
}

// Per micro-batch: unit u+1's all-gather issued before unit u's forward starts; in
// backward, unit u-1's gather issued before unit u computes and before u's reduce-scatter;
// u's reduce-scatter issued before u-1's backward starts and completed after it (in flight
// while u-1 computes). Needs the default pools (with one gradient slot nothing overlaps).
static void zt_check_fsdp_schedule(const zt_fsdp *f, void (*report)(int ok, const char *message)) {
    char msg[256];
    const int L = f->lay.cfg.num_layers, head = L + 1;
    for (int mb = 0; mb < f->grad_accum; mb++) {
        for (int u = 0; u <= L; u++) {
            int fwd = zt_sched_find(f, 0, ZT_EV_FWD_START, u, mb);
            int ag_next = zt_sched_find(f, 0, ZT_EV_AG_ISSUE, u + 1, mb);
            snprintf(msg, sizeof msg,
                     "micro %d: all-gather of unit %d must be issued before unit %d's forward starts (%d vs %d)", mb,
                     u + 1, u, ag_next, fwd);
            report(fwd >= 0 && ag_next >= 0 && ag_next < fwd, msg);
        }
        int head_bwd = zt_sched_find(f, 0, ZT_EV_BWD_START, head, mb);
        for (int u = L; u >= 1; u--) {
            int bwd = zt_sched_find(f, head_bwd, ZT_EV_BWD_START, u, mb);
            int rs = zt_sched_find(f, head_bwd, ZT_EV_RS_ISSUE, u, mb);
            int next_bwd = zt_sched_find(f, head_bwd, ZT_EV_BWD_START, u - 1, mb);
            int rs_done = zt_sched_find(f, head_bwd, ZT_EV_RS_DONE, u, mb);
            if (u - 1 >= 1) {
                int ag_prev = zt_sched_find(f, head_bwd, ZT_EV_AG_ISSUE, u - 1, mb);
                snprintf(msg, sizeof msg,
                         "micro %d: gather of unit %d must be issued before unit %d computes and before its "
                         "reduce-scatter (%d, %d, %d)", mb, u - 1, u, ag_prev, bwd, rs);
                report(ag_prev >= 0 && ag_prev < rs && ag_prev < bwd, msg);
            }
            snprintf(msg, sizeof msg,
                     "micro %d: reduce-scatter of unit %d must be in flight while unit %d computes (issue %d, next "
                     "start %d, done %d)", mb, u, u - 1, rs, next_bwd, rs_done);
            report(rs >= 0 && next_bwd >= 0 && rs < next_bwd && rs_done > next_bwd, msg);
        }
    }
}
#endif
