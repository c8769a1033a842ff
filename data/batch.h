// A micro-batch from raw block words: what the model and the engines feed on. Version 1
// words are bare ids; version 2 words carry ZT_TOK_DOC_START / ZT_TOK_NO_LOSS
// (data/dataset.h), which only this file interprets.
// defines: zt_batch_words, zt_batch_count_targets, zt_batch_drop_row_targets
#ifndef ZT_BATCH_H
#define ZT_BATCH_H
#include <stdint.h>

// Bare ids, targets and document positions of a micro-batch from its raw block words
// targets[t] = id of token t+1 when that token is a trained target: not
// flagged NO_LOSS and, with `isolated`, not the first token of a document (predicting it
// would look across the boundary); otherwise -1, as for each block's last position.
// pos (NULL allowed when !isolated) = token t's position in its document: 0 at the block
// start and at each DOC_START (isolated), t within the block otherwise. ids may alias raw.
// Returns the number of targets.
int64_t zt_batch_words(const uint32_t *raw, int64_t B, int64_t S, int isolated, uint32_t *ids, int32_t *targets,
                       int32_t *pos);
// The number of targets zt_batch_words would find in one block (no buffers written):
// what an engine needs before the step to scale its gradients.
int64_t zt_batch_count_targets(const uint32_t *raw, int64_t S, int isolated);
// Row b of a micro-batch is a filler (evaluation past a rank's last block): its targets
// are set to -1. Returns how many targets it held.
int64_t zt_batch_drop_row_targets(int32_t *targets, int64_t b, int64_t S);

#endif
