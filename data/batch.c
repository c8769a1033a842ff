// Block words to a micro-batch (data/batch.h): the one place that reads the dataset's flag
// bits (ZT_TOK_*, data/dataset.h) for training.
#include "data/batch.h"

#include "data/dataset.h"

// Word `next` is a trained target: not flagged no-loss and, with isolated documents, not
// a document start (predicting it would look across the boundary).
static inline int is_target(uint32_t next, int isolated) {
    return !(next & ZT_TOK_NO_LOSS) && !(isolated && (next & ZT_TOK_DOC_START));
}

int64_t zt_batch_count_targets(const uint32_t *raw, int64_t S, int isolated) {
    int64_t n = 0;
    for (int64_t t = 1; t < S; t++) n += is_target(raw[t], isolated);
    return n;
}

int64_t zt_batch_drop_row_targets(int32_t *targets, int64_t b, int64_t S) {
    int64_t n = 0;
    for (int64_t t = 0; t < S; t++) {
        n += targets[b * S + t] >= 0;
        targets[b * S + t] = -1;
    }
    return n;
}

int64_t zt_batch_words(const uint32_t *raw, int64_t B, int64_t S, int isolated, uint32_t *ids, int32_t *targets,
                       int32_t *pos) {
    int64_t n = 0;
    for (int64_t b = 0; b < B; b++) {
        const uint32_t *w = raw + b * S;
        int32_t p = 0;
        for (int64_t t = 0; t < S; t++) {
            if (t > 0 && !(isolated && (w[t] & ZT_TOK_DOC_START))) p++;
            else p = 0;
            if (pos) pos[b * S + t] = isolated ? p : (int32_t)t;
            const int32_t tg = t + 1 < S && is_target(w[t + 1], isolated) ? (int32_t)(w[t + 1] & ZT_TOK_ID_MASK) : -1;
            targets[b * S + t] = tg;
            n += tg >= 0;
        }
    }
    for (int64_t i = 0; i < B * S; i++) ids[i] = raw[i] & ZT_TOK_ID_MASK;  // after reading the flags (ids may alias raw)
    return n;
}

