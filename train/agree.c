// Agreement of every rank on a phase's outcome (train/agree.h), through the comm's
// all-reduce (so under its deadline and watchdog).
#include <stdio.h>

#include "base/common.h"
#include "train/agree.h"

// Every rank contributes whether its last phase succeeded; all learn whether all did.
// A failing rank has already put its reason in zt_err and prints it.
int zt_train_agree(zt_comm *c, int ok, const char *phase) {
    int64_t bad = ok ? 0 : 1;
    if (zt_allreduce(c, &bad, &bad, 1, ZT_DT_I64, ZT_RED_SUM, phase) != 0) return -1;
    if (bad && ok) return zt_err("%s failed on %lld other rank%s (see their messages)", phase, (long long)bad,
                                 bad == 1 ? "" : "s");
    return bad ? -1 : 0;
}

// Like agree(), but every rank ends up with the message of the lowest failing rank (a data
// file that changed under one rank is named in every rank's error and in the heartbeat).
// 0: every rank is ok; 1: some rank failed (zt_err says why); -1: the collective failed.
int zt_train_agree_named(run_state *r, int ok, const char *phase) {
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

