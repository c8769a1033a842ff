// Evaluation on --eval-data (train/eval.h): the held-out dataset opened and checked beside the
// training data, and each pass, fetched a micro-batch at a time through the guarded copy and
// reported through the run log. Training never sees it.
// defines: zt_eval_open, zt_eval_maybe, zt_eval_free
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "data/batch.h"
#include "train/agree.h"
#include "train/eval.h"
#include "train/run_log.h"
#include "train/signals.h"

// The blocks of --eval-data one evaluation reads: all, or the first --eval-batches x W x
// micro-batch of them.
static int64_t eval_blocks(const zt_train_opts *o, int64_t total, int world) {
    const int64_t per_micro = (int64_t)o->micro_batch * world;
    return o->eval_batches > 0 && o->eval_batches * per_micro < total ? o->eval_batches * per_micro : total;
}

int zt_eval_open(eval_state *ev, const zt_train_opts *o, const data_cursor *train, int64_t vocab, zt_comm *comm,
                 int rank, int world, int data_world) {
    const zt_dataset *ds = &train->ds;
    const double t0 = zt_now();
    zt_dataset_opts eo = {.verify_crc = o->verify_crc, .check_tokens = 1, .model_vocab = vocab,
                          .part = rank, .nparts = world};
    int ok = zt_dataset_open(&ev->eds, o->eval_data, &eo) == 0;
    ev->eds_open = ok;
    if (ok && ev->eds.seq_len != ds->seq_len)
        ok = zt_err("--eval-data %s: seq_len %d differs from the training data's %d", o->eval_data, ev->eds.seq_len,
                    ds->seq_len) == 0;
    if (ok && ev->eds.tokenizer[0] && ds->tokenizer[0] && strcmp(ev->eds.tokenizer, ds->tokenizer))
        ok = zt_err("--eval-data %s: tokenizer %s differs from the training data's %s", o->eval_data,
                    ev->eds.tokenizer, ds->tokenizer) == 0;
    if (ok && train->isolated && !ev->eds.token_flags)
        ok = zt_err("--eval-data %s: a version %d dataset has no document boundaries, but training isolates "
                    "documents (evaluate on data packed the same way)",
                    o->eval_data, ev->eds.version) == 0;
    // Nothing to evaluate would print "evaluated every N steps" and never do it, or log a
    // loss of 0/0: both are refused here, before any step.
    if (ok && ev->eds.total_blocks == 0)
        ok = zt_err("--eval-data %s: the dataset holds no blocks, so there is nothing to evaluate (pack more "
                    "held-out data, or leave --eval-data out)",
                    o->eval_data) == 0;
    if (ok) {
        const int64_t n = eval_blocks(o, ev->eds.total_blocks, data_world);
        int64_t targets = 0, k = 0;
        for (int fi = 0; fi < ev->eds.nfiles && k < n; fi++)
            for (int64_t b = 0; b < ev->eds.files[fi].blocks && k < n; b++, k++)
                targets += zt_batch_count_targets(zt_dataset_block(&ev->eds, fi, b), ev->eds.seq_len, train->isolated);
        if (targets == 0)
            ok = zt_err("--eval-data %s: the %lld block%s an evaluation reads hold no trained target (every token "
                        "is masked out of the loss: packed with --train-on rules that leave nothing?), so the "
                        "validation loss would be 0/0",
                        o->eval_data, (long long)n, n == 1 ? "" : "s") == 0;
    }
    if (zt_train_agree(comm, ok, "opening the evaluation dataset") != 0) return -1;
    if (rank == 0) {
        char when[64] = "";
        if (o->eval_every) snprintf(when, sizeof when, "every %lld steps and ", (long long)o->eval_every);
        printf("eval: %s: %lld blocks, evaluated %safter the last step (%.2f s)\n", o->eval_data,
               (long long)ev->eds.total_blocks, when, zt_now() - t0);
    }
    return 0;
}

// What an evaluation pass reads, fetched one micro-batch at a time through the guarded copy
// (a file changed underneath is an error, not a SIGBUS).
typedef struct {
    const zt_dataset *eds;
    int64_t micro_batch;
    int rank, world;
    int64_t n;           // blocks evaluated
    uint32_t *buf;       // micro_batch blocks
    int signal_at;       // --debug-signal-in-eval on this rank (0: never)
    int asked;           // micro-batches the stop was asked for
} eval_ctx;

static int eval_fetch(void *ctx, int m, const uint32_t **blocks) {
    eval_ctx *c = ctx;
    const zt_dataset *e = c->eds;
    const int64_t B = c->micro_batch, S = e->seq_len;
    for (int64_t b = 0; b < B; b++) {
        int64_t g = ((int64_t)m * c->world + c->rank) * B + b, fi = 0;
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
    return zt_signals_stop() != 0;
}

// Validation: the evaluated blocks in file order, dealt round-robin by micro-batch; every
// rank runs the same number of micro-batches (ranks past the end run fillers that count
// nothing), so the collectives match and the mean is over the same blocks at any world
// size. Stateless: the training order, RNG, optimizer and checkpoints never see it. A stop
// request ends the pass at the next micro-batch (EVAL_STOPPED), a changed file at the
// micro-batch that reads it (EVAL_DATA_BAD, the reason in zt_err), on every rank alike.
static int run_eval(const zt_train_opts *o, run_state *r, int64_t step) {
    const zt_dataset *e = &r->eval.eds;
    const int64_t B = o->micro_batch, per_micro = B * r->data_world;  // a context group shares its blocks
    const int64_t n = eval_blocks(o, e->total_blocks, r->data_world);
    const int64_t nmicro = (n + per_micro - 1) / per_micro;
    if (nmicro == 0) return EVAL_DONE;
    eval_ctx c = {e, B, r->data_rank, r->data_world, n, zt_xmalloc((size_t)(B * e->seq_len) * sizeof(uint32_t)), 0, 0};
    // --debug-signal-in-eval: the last rank, in the first evaluation only
    if (o->debug_signal_in_eval > 0 && r->rank == r->world - 1 && !r->eval.signalled) {
        c.signal_at = (int)o->debug_signal_in_eval;
        r->eval.signalled = 1;
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
            zt_runlog_clear_progress();
            printf("eval  %5lld | ended after %d of %lld micro-batches: a stop signal reached %d rank%s; not "
                   "recorded, checkpointing\n",
                   (long long)step, res.micro_done, (long long)nmicro, res.stopped, res.stopped == 1 ? "" : "s");
            fflush(stdout);
        }
        r->eval.stopped = res.stopped;
        return EVAL_STOPPED;
    }
    const int64_t targets = res.targets;
    zt_runlog_eval(&r->sinks, r->rank, step, n, targets, targets ? res.loss_sum / (double)targets : NAN,
                   zt_now() - t0);
    return EVAL_DONE;
}

int zt_eval_maybe(const zt_train_opts *o, run_state *r, int64_t step, int last) {
    if (!o->eval_data || !(last || (o->eval_every > 0 && step % o->eval_every == 0))) return EVAL_DONE;
    zt_comm_set_context(r->comm, step, r->data.epoch, -1);
    return run_eval(o, r, step);
}

void zt_eval_free(eval_state *ev) {
    if (ev->eds_open) zt_dataset_close(&ev->eds);
    ev->eds_open = 0;
}
