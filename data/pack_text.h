// Inside `zerotrain pack`: the text inputs (JSON Lines, text files, text lines, chat
// conversations), tokenized in parallel and handed, in input order, to pack's block writer
// (or, for a mixture, to pack's spool of each input).
// defines: zt_pack_sink, zt_pack_text
#ifndef ZT_PACK_TEXT_H
#define ZT_PACK_TEXT_H
#include <stddef.h>
#include <stdint.h>

#include "data/dataset.h"

// What pack.c gives the text reader: one document is begin, put..., end.
typedef struct {
    void *ctx;
    void (*begin_doc)(void *ctx);
    int (*put)(void *ctx, const uint32_t *ids, size_t n);
    int (*end_doc)(void *ctx);
    void (*progress)(void *ctx, const char *input);
    // chat: one whole conversation of version 2 words (at most seq_len of them), `trained`
    // of them without ZT_TOK_NO_LOSS; begin/put/end are not used
    int (*put_conversation)(void *ctx, const uint32_t *words, size_t n, int64_t trained);
} zt_pack_sink;

// Read every input (kind o->input, one of the text kinds), tokenize with o->tok on
// o->threads workers, and feed the documents to the sink in input order. Adds to
// st->bytes_in, st->bad_documents and (chat) st->conversations_too_long, and when st->inputs
// is set, to each input's counts there (and, chat, its format: o->chat_format, or detected from
// its first lines and said on stderr). -1 + zt_err naming file:line on a bad document unless
// o->skip_bad.
int zt_pack_text(const char *const *inputs, int ninputs, const zt_pack_opts *o, const zt_pack_sink *sink,
                 zt_pack_stats *st);

#endif
