// `zerotrain pack`: turns documents of token ids (raw uint32, decimal text, or
// plain bytes) or of text (JSON Lines, text files, text lines: data/pack_text.c
// tokenizes them) into a dataset directory of seq_len-token uint32 block files plus
// dataset.json, written last so that its presence means the pack completed.
// Conversations (--input chat) become version 2 words with loss masks; each one sits
// inside a single block, the rest of a block it does not fit in is padding. Weighted inputs
// make a mixture (below); dataset.json records each input's share of it.
#define _GNU_SOURCE
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "data/chat.h"
#include "base/crc32c.h"
#include "data/dataset.h"
#include "data/pack_text.h"
#include "data/tokenizer.h"
#include "base/common.h"
#include "base/env.h"
#include "base/out_file.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "pack writes host uint32 as little-endian block files: a big-endian host needs byte swapping here"
#endif

// Token buffer budget shared by all output streams (tokens): big writes without
// letting --per-rank 1024 allocate gigabytes.
#define ZT_PACK_BUF_TOKENS ((int64_t)1 << 22)
// ... and the most they may take when every stream needs a whole block (--per-rank W x seq_len): 4 GiB
#define ZT_PACK_BUF_MAX_TOKENS ((int64_t)1 << 30)
#define ZT_PACK_READ_BYTES ((size_t)1 << 20)

// One output block file and the tokens not yet written to it.
typedef struct {
    char path[4096];  // the block file's name once the pack is complete
    char tmp[4200];   // written under this name (path + ".partial"), renamed at the end
    int fd;
    uint32_t *buf;
    int64_t cap, n;  // cap is a whole number of blocks, so a full buffer is whole blocks
    uint32_t crc;
    uint64_t bytes_written;
    int64_t blocks, documents, tokens, dropped;
    int64_t trained, padding;  // chat
} pack_writer;

typedef struct {
    const zt_pack_opts *o;
    pack_writer *w;
    int nw;
    pack_writer *cur;  // stream of the document being read; NULL between documents
    zt_pack_stats *st;
    double t0, last_report;
    int64_t bytes_total;  // of all inputs (for the progress line's ETA)
    uint32_t pad_id;  // chat: <|endoftext|>
} packer;

static int write_all(pack_writer *w, const void *data, size_t n) {
    const char *p = data;
    while (n) {
        ssize_t k = write(w->fd, p, n);
        if (k < 0) {
            int e = errno;
            if (e == EINTR) continue;
            return zt_err("%s: write failed after %llu bytes written: %s%s", w->tmp,
                          (unsigned long long)w->bytes_written, strerror(e),
                          e == ENOSPC ? " (free space or pack to another disk; this pack is incomplete and "
                                            "has no dataset.json)"
                                          : "");
        }
        w->crc = zt_crc32c(w->crc, p, (size_t)k);
        w->bytes_written += (uint64_t)k;
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

// Writes the buffer's whole blocks; a partial block stays behind for the next call.
static int flush_blocks(pack_writer *w, int seq_len) {
    int64_t whole = w->n / seq_len * seq_len;
    if (whole == 0) return 0;
    if (write_all(w, w->buf, (size_t)whole * 4)) return -1;
    w->blocks += whole / seq_len;
    memmove(w->buf, w->buf + whole, (size_t)(w->n - whole) * 4);
    w->n -= whole;
    return 0;
}

static inline int put_token(packer *pk, uint32_t t) {
    pack_writer *w = pk->cur;
    w->buf[w->n++] = t;
    w->tokens++;
    return w->n == w->cap ? flush_blocks(w, pk->o->seq_len) : 0;
}

// Documents are dealt round-robin to the output streams by their index.
static void begin_doc(packer *pk) {
    pk->cur = &pk->w[pk->st->documents % pk->nw];
    pk->cur->documents++;
    pk->st->documents++;
}

static int end_doc(packer *pk) {
    int rc = 0;
    if (pk->cur && pk->o->eos_id >= 0) rc = put_token(pk, (uint32_t)pk->o->eos_id);
    pk->cur = NULL;
    return rc;
}

static void progress(packer *pk, const char *input) {
    if (pk->o->quiet) return;
    double now = zt_now();
    // one line a second; ZT_PROGRESS_INTERVAL (seconds) changes that (tests use 0)
    static double interval = -1;
    if (interval < 0) {
        const char *e = zt_env_str(ZT_ENV_PROGRESS_INTERVAL);
        interval = e ? atof(e) : 1.0;
        if (!(interval >= 0)) interval = 1.0;
    }
    if (now - pk->last_report < interval) return;
    pk->last_report = now;
    double dt = now - pk->t0 > 1e-9 ? now - pk->t0 : 1e-9;
    int64_t tok = 0;
    for (int i = 0; i < pk->nw; i++) tok += pk->w[i].tokens;
    const double rate = (double)pk->st->bytes_in / dt;  // bytes/s
    char eta[48] = "";
    if (pk->bytes_total > 0 && rate > 0 && pk->st->bytes_in <= pk->bytes_total) {
        const double left = (double)(pk->bytes_total - pk->st->bytes_in) / rate;
        snprintf(eta, sizeof eta, " of %.1f MB (%.0f%%), ETA %.0f s", (double)pk->bytes_total / 1e6,
                 100.0 * (double)pk->st->bytes_in / (double)pk->bytes_total, left);
    }
    fprintf(stderr, "pack: %s: %.1f MB read%s (%.1f MB/s), %lld documents, %.2fM tokens (%.2fM tok/s)\n", input,
            (double)pk->st->bytes_in / 1e6, eta, rate / 1e6, (long long)pk->st->documents, (double)tok / 1e6,
            (double)tok / 1e6 / dt);
}

// Raw little-endian uint32 ids; the whole file is one document.
static int read_u32(packer *pk, const char *input, FILE *f, uint64_t size) {
    if (size % 4)
        return zt_err("%s: %llu bytes is not a whole number of uint32 token ids (4 bytes each; --input u32 "
                      "expects raw little-endian uint32)",
                      input, (unsigned long long)size);
    if (size == 0) return 0;
    uint32_t *buf = zt_xmalloc(ZT_PACK_READ_BYTES);
    int64_t pos = 0;
    int rc = 0;
    begin_doc(pk);
    for (;;) {
        size_t k = fread(buf, 4, ZT_PACK_READ_BYTES / 4, f);
        if (k == 0) {
            if (ferror(f)) rc = zt_err("%s: read failed after %lld tokens: %s", input, (long long)pos, strerror(errno));
            break;
        }
        pk->st->bytes_in += (int64_t)k * 4;
        for (size_t j = 0; j < k && rc == 0; j++, pos++) {
            if ((int64_t)buf[j] >= pk->o->vocab_size)
                rc = zt_err("%s: token %lld (byte offset %lld): id %u >= vocab_size %lld", input, (long long)pos,
                            (long long)pos * 4, buf[j], (long long)pk->o->vocab_size);
            else
                rc = put_token(pk, buf[j]);
        }
        if (rc) break;
        progress(pk, input);
    }
    free(buf);
    return rc ? rc : end_doc(pk);
}

// Every byte is a token (0..255); the whole file is one document.
static int read_bytes(packer *pk, const char *input, FILE *f, uint64_t size) {
    if (size == 0) return 0;
    unsigned char *buf = zt_xmalloc(ZT_PACK_READ_BYTES);
    int64_t pos = 0;
    int rc = 0;
    begin_doc(pk);
    for (;;) {
        size_t k = fread(buf, 1, ZT_PACK_READ_BYTES, f);
        if (k == 0) {
            if (ferror(f)) rc = zt_err("%s: read failed after %lld bytes: %s", input, (long long)pos, strerror(errno));
            break;
        }
        pk->st->bytes_in += (int64_t)k;
        for (size_t j = 0; j < k && rc == 0; j++, pos++) {
            if ((int64_t)buf[j] >= pk->o->vocab_size)
                rc = zt_err("%s: byte offset %lld: byte value %u >= vocab_size %lld", input, (long long)pos, buf[j],
                            (long long)pk->o->vocab_size);
            else
                rc = put_token(pk, buf[j]);
        }
        if (rc) break;
        progress(pk, input);
    }
    free(buf);
    return rc ? rc : end_doc(pk);
}

static int is_sep(char c) { return c == ' ' || c == '\t' || c == ',' || c == '\r' || c == '\v' || c == '\f'; }

// Decimal ids separated by spaces/tabs/commas; each non-empty line is a document.
static int read_text_ids(packer *pk, const char *input, FILE *f) {
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    int64_t lineno = 0;
    int rc = 0;
    errno = 0;
    while (rc == 0 && (len = getline(&line, &cap, f)) >= 0) {
        lineno++;
        pk->st->bytes_in += len;
        if (len && line[len - 1] == '\n') len--;
        ssize_t i = 0;
        while (rc == 0) {
            while (i < len && is_sep(line[i])) i++;
            if (i >= len) break;
            ssize_t start = i;
            uint64_t v = 0;
            int digits_only = 1;
            while (i < len && !is_sep(line[i])) {
                char c = line[i++];
                if (c < '0' || c > '9') digits_only = 0;
                else if (v <= UINT32_MAX) v = v * 10 + (uint64_t)(c - '0');  // past 2^32 it only has to stay big
            }
            int tl = (int)(i - start);
            if (!digits_only)
                rc = zt_err("%s:%lld:%lld: \"%.*s%s\" is not a decimal token id (--input ids expects ids separated by "
                            "spaces or commas, one document per line)",
                            input, (long long)lineno, (long long)start + 1, tl > 24 ? 24 : tl, line + start,
                            tl > 24 ? "..." : "");
            else if ((int64_t)v >= pk->o->vocab_size)
                rc = zt_err("%s:%lld:%lld: token id %.*s%s >= vocab_size %lld", input, (long long)lineno,
                            (long long)start + 1, tl > 24 ? 24 : tl, line + start, tl > 24 ? "..." : "",
                            (long long)pk->o->vocab_size);
            else {
                if (!pk->cur) begin_doc(pk);
                rc = put_token(pk, (uint32_t)v);
            }
        }
        if (rc == 0) rc = end_doc(pk);
        progress(pk, input);
        errno = 0;
    }
    if (rc == 0 && ferror(f)) rc = zt_err("%s: read failed at line %lld: %s", input, (long long)lineno + 1, strerror(errno));
    free(line);
    return rc;
}

// The text reader's view of the packer (data/pack_text.h).
static void sink_begin(void *ctx) { begin_doc(ctx); }
static int sink_end(void *ctx) { return end_doc(ctx); }
static void sink_progress(void *ctx, const char *input) { progress(ctx, input); }
static int sink_put(void *ctx, const uint32_t *ids, size_t n) {
    packer *pk = ctx;
    for (size_t i = 0; i < n; i++)
        if (put_token(pk, ids[i])) return -1;
    return 0;
}

// Chat: the rest of the current block as padding words: <|endoftext|>, never a target,
// the first one starting a document of its own (so isolated attention keeps it apart).
static int pad_block(packer *pk, pack_writer *w) {
    const int64_t pos = w->n % pk->o->seq_len;  // w->buf always starts on a block boundary
    if (pos == 0) return 0;
    pk->cur = w;
    const int64_t k = pk->o->seq_len - pos;
    int rc = 0;
    for (int64_t i = 0; i < k && rc == 0; i++)
        rc = put_token(pk, pk->pad_id | ZT_TOK_NO_LOSS | (i == 0 ? ZT_TOK_DOC_START : 0));
    w->padding += k;
    pk->cur = NULL;
    return rc;
}

// Chat: a whole conversation (n <= seq_len words), in the current block if it fits there,
// else at the start of the next one.
static int sink_put_conversation(void *ctx, const uint32_t *words, size_t n, int64_t trained) {
    packer *pk = ctx;
    begin_doc(pk);
    pack_writer *w = pk->cur;
    int rc = 0;
    if (w->n % pk->o->seq_len + (int64_t)n > pk->o->seq_len) rc = pad_block(pk, w);
    pk->cur = w;
    for (size_t i = 0; i < n && rc == 0; i++) rc = put_token(pk, words[i]);
    w->trained += trained;
    pk->cur = NULL;
    return rc;
}

// ---- mixtures ----------------------------------------------------------------------------
// A weighted mixture of several text or chat inputs. Each input is read and tokenized whole
// first (data/pack_text.c) into a spool file beside the output, then every input contributes
// weight / sum of the mixture's tokens -- whole passes over it, then the first documents of a
// fixed pseudo-random order of it up to the rest -- and the documents taken are dealt to the
// block writer in a seeded shuffle. Which documents are taken depends only on the inputs, the
// weights and the size; the seed changes only their order.
// The order a partial pass takes an input's documents in: one fixed seed, so that the documents
// taken never depend on --seed (another seed: another interleave of the same documents).
#define ZT_MIX_ORDER_SEED 0x6d69787475726531ull

typedef struct {
    int64_t off;  // first word in the spool
    uint32_t n;   // words (text: ids without the eos the writer appends)
    uint32_t trained;
} spool_doc;

// One input's documents, as words in an unlinked temporary file.
typedef struct {
    FILE *f;
    int64_t words;
    spool_doc *docs;
    int64_t ndocs, cap;
    int64_t doc_start;
    int eos;  // text: the writer appends an eos to every document
    const uint32_t *map;
    size_t map_bytes;
} spool;

static int spool_add(spool *sp, int64_t off, int64_t n, int64_t trained) {
    if (n > (int64_t)UINT32_MAX)
        return zt_err("a document of %lld tokens: a mixture takes documents of fewer than 2^32 tokens", (long long)n);
    if (sp->ndocs == sp->cap) {
        sp->cap = sp->cap ? 2 * sp->cap : 1024;
        sp->docs = realloc(sp->docs, (size_t)sp->cap * sizeof *sp->docs);
        if (!sp->docs) zt_fatal("out of host memory for %lld mixture documents", (long long)sp->cap);
    }
    sp->docs[sp->ndocs++] = (spool_doc){off, (uint32_t)n, (uint32_t)trained};
    return 0;
}

static int spool_write(spool *sp, const uint32_t *w, size_t n) {
    if (fwrite(w, 4, n, sp->f) != n) return zt_err("the mixture's spool file: write failed: %s", strerror(errno));
    sp->words += (int64_t)n;
    return 0;
}

static void spool_begin(void *ctx) { ((spool *)ctx)->doc_start = ((spool *)ctx)->words; }
static int spool_put(void *ctx, const uint32_t *ids, size_t n) { return spool_write(ctx, ids, n); }
static int spool_end(void *ctx) {
    spool *sp = ctx;
    return spool_add(sp, sp->doc_start, sp->words - sp->doc_start, 0);
}
static void spool_progress(void *ctx, const char *input) { (void)ctx, (void)input; }
static int spool_conversation(void *ctx, const uint32_t *words, size_t n, int64_t trained) {
    spool *sp = ctx;
    const int64_t at = sp->words;
    if (spool_write(sp, words, n)) return -1;
    return spool_add(sp, at, (int64_t)n, trained);
}

static int64_t doc_tokens(const spool *sp, int64_t d) { return (int64_t)sp->docs[d].n + sp->eos; }

typedef struct {
    uint32_t input;
    int64_t doc;
} pick;

// A mixture (o->weights): every input read whole into a spool file in spool_dir (unlinked at
// once), then the documents each input's weight takes dealt to the sink in a seeded shuffle.
// Fills st->inputs (one per input, allocated by the caller), st->mix_tokens and the counts
// zt_pack_text adds. -1 + zt_err as zt_pack_text, or when an input gives no document.
static int pack_mixture(const char *const *inputs, int ninputs, const zt_pack_opts *o, const zt_pack_sink *out,
                        const char *spool_dir, zt_pack_stats *st) {
    const int chat = o->input == ZT_PACK_CHAT;
    zt_pack_input_stats *in = st->inputs;
    if (!in) return zt_err("pack: a mixture needs per-input statistics (internal error)");
    spool *sp = zt_xcalloc((size_t)ninputs, sizeof *sp);
    pick *picks = NULL;
    int rc = 0;
    // the shares: every weight over the largest first, so that neither the sum of huge weights
    // (1e308 + 1e308) overflows nor tiny ones lose the sum: each term is in (0, 1], the sum in [1, n]
    double wmax = 0, wsum = 0;
    for (int i = 0; i < ninputs; i++) wmax = fmax(wmax, o->weights[i]);
    for (int i = 0; i < ninputs; i++) wsum += o->weights[i] / wmax;

    // 1. every input read, tokenized and spooled
    for (int i = 0; i < ninputs && rc == 0; i++) {
        char tmpl[4200];
        snprintf(tmpl, sizeof tmpl, "%s/.mix-spool-XXXXXX", spool_dir);
        const int fd = mkstemp(tmpl);
        if (fd < 0) {
            rc = zt_err("%s: cannot create the mixture's spool file: %s", tmpl, strerror(errno));
            break;
        }
        unlink(tmpl);  // gone with the pack, whatever happens to it
        sp[i].f = fdopen(fd, "w+b");
        if (!sp[i].f) zt_fatal("fdopen of the mixture's spool file failed: %s", strerror(errno));
        sp[i].eos = !chat && o->eos_id >= 0;
        zt_pack_sink sink = {&sp[i], spool_begin, spool_put, spool_end, spool_progress, spool_conversation};
        zt_pack_stats one = {.inputs = &in[i], .ninputs = 1};
        rc = zt_pack_text(inputs + i, 1, o, &sink, &one);
        st->bytes_in += one.bytes_in;
        st->bad_documents += one.bad_documents;
        st->conversations_too_long += one.conversations_too_long;
        if (rc) break;
        if (fflush(sp[i].f) != 0) {
            rc = zt_err("the mixture's spool file: write failed: %s", strerror(errno));
            break;
        }
        in[i].weight = o->weights[i];
        in[i].share = o->weights[i] / wmax / wsum;
        if (sp[i].ndocs == 0 || in[i].tokens <= 0) {
            rc = zt_err("%s: the input holds no document to take (%s), so its weight %g cannot be met", inputs[i],
                        in[i].bad_documents || in[i].too_long ? "every one was skipped" : "it is empty", in[i].weight);
            break;
        }
        sp[i].map_bytes = (size_t)sp[i].words * 4;
        void *m = sp[i].map_bytes ? mmap(NULL, sp[i].map_bytes, PROT_READ, MAP_PRIVATE, fd, 0) : NULL;
        if (m == MAP_FAILED) {
            rc = zt_err("the mixture's spool file (%zu bytes): mmap failed: %s", sp[i].map_bytes, strerror(errno));
            break;
        }
        sp[i].map = m;
        if (!o->quiet)
            fprintf(stderr, "pack: mixture: %s: %lld %s, %lld tokens, weight %g (%.4f of the mixture)\n", inputs[i],
                    (long long)in[i].documents, chat ? "conversations" : "documents", (long long)in[i].tokens,
                    in[i].weight, in[i].share);
    }

    // 2. the size, and what each input gives: whole passes, then a prefix of its fixed order
    int64_t npicks = 0;
    if (rc == 0) {
        double size = (double)o->mix_tokens;
        if (o->mix_tokens <= 0) {  // the largest mixture that takes no input more than once
            // finite: the input of the largest weight has a share of at least 1/n
            size = INFINITY;
            for (int i = 0; i < ninputs; i++)
                if (in[i].share > 0) size = fmin(size, (double)in[i].tokens / in[i].share);
            size = floor(size + 0.5);
        }
        st->mix_tokens = (int64_t)size;
        int64_t cap = 0;
        for (int i = 0; i < ninputs; i++) {
            const double quota = in[i].share * size, total = (double)in[i].tokens;
            int64_t passes = (int64_t)floor(quota / total);
            double rest = quota - (double)passes * total;
            if (rest > total - 0.5) passes++, rest = 0;  // a whole pass short only by rounding
            int64_t *order = zt_xmalloc((size_t)sp[i].ndocs * sizeof *order);
            for (int64_t d = 0; d < sp[i].ndocs; d++) order[d] = d;
            zt_rng r;
            zt_rng_seed(&r, ZT_MIX_ORDER_SEED);
            for (int64_t d = sp[i].ndocs - 1; d > 0; d--) {
                const int64_t k = (int64_t)zt_rng_below(&r, (uint64_t)d + 1), t = order[d];
                order[d] = order[k], order[k] = t;
            }
            int64_t partial = 0, taken = 0, trained = 0;
            while (partial < sp[i].ndocs && (double)taken + 0.5 * (double)doc_tokens(&sp[i], order[partial]) <= rest) {
                trained += sp[i].docs[order[partial]].trained;
                taken += doc_tokens(&sp[i], order[partial++]);
            }
            const int64_t n = passes * sp[i].ndocs + partial;
            if (npicks + n > cap) {
                cap = (npicks + n) * 2;
                picks = realloc(picks, (size_t)cap * sizeof *picks);
                if (!picks) zt_fatal("out of host memory for %lld mixture documents", (long long)cap);
            }
            for (int64_t p = 0; p < passes; p++)
                for (int64_t d = 0; d < sp[i].ndocs; d++) picks[npicks++] = (pick){(uint32_t)i, d};
            for (int64_t d = 0; d < partial; d++) picks[npicks++] = (pick){(uint32_t)i, order[d]};
            free(order);
            in[i].taken_documents = n;
            in[i].taken_tokens = passes * in[i].tokens + taken;
            in[i].taken_trained = passes * in[i].trained + trained;
            in[i].epochs = (double)in[i].taken_tokens / total;
            if (n == 0 && !o->quiet)
                fprintf(stderr, "pack: mixture: warning: %s: its share of %lld tokens is less than half of a "
                                "document: nothing of it is taken\n",
                        inputs[i], (long long)floor(quota));
        }
    }

    // 3. the seeded interleave, dealt to the writer
    if (rc == 0) {
        zt_rng r;
        zt_rng_seed(&r, o->mix_seed);
        for (int64_t k = npicks - 1; k > 0; k--) {
            const int64_t j = (int64_t)zt_rng_below(&r, (uint64_t)k + 1);
            const pick t = picks[k];
            picks[k] = picks[j], picks[j] = t;
        }
        for (int64_t k = 0; k < npicks && rc == 0; k++) {
            const spool *s = &sp[picks[k].input];
            const spool_doc *d = &s->docs[picks[k].doc];
            if (chat) {
                rc = out->put_conversation(out->ctx, s->map + d->off, d->n, d->trained);
            } else {
                out->begin_doc(out->ctx);
                rc = out->put(out->ctx, s->map + d->off, d->n);
                if (rc == 0) rc = out->end_doc(out->ctx);
            }
            if ((k & 4095) == 4095) out->progress(out->ctx, "mixture");
        }
    }
    for (int i = 0; i < ninputs; i++) {
        if (sp[i].map) munmap((void *)sp[i].map, sp[i].map_bytes);
        if (sp[i].f) fclose(sp[i].f);
        free(sp[i].docs);
    }
    free(sp);
    free(picks);
    return rc;
}

static int is_text_kind(zt_pack_input k) {
    return k == ZT_PACK_JSONL || k == ZT_PACK_TEXT_FILES || k == ZT_PACK_TEXT_LINES || k == ZT_PACK_CHAT;
}

static int pack_input(packer *pk, const char *input) {
    FILE *f = fopen(input, "rb");
    if (!f) return zt_err("%s: cannot open input: %s", input, strerror(errno));
    struct stat st;
    if (fstat(fileno(f), &st) != 0) {
        int e = errno;
        fclose(f);
        return zt_err("%s: cannot stat input: %s", input, strerror(e));
    }
    if (S_ISDIR(st.st_mode)) {
        fclose(f);
        return zt_err("%s: is a directory, not an input file", input);
    }
    int rc;
    switch (pk->o->input) {
    case ZT_PACK_U32: rc = read_u32(pk, input, f, (uint64_t)st.st_size); break;
    case ZT_PACK_BYTES: rc = read_bytes(pk, input, f, (uint64_t)st.st_size); break;
    default: rc = read_text_ids(pk, input, f); break;
    }
    fclose(f);
    return rc;
}

static const char *input_name(zt_pack_input k) {
    switch (k) {
    case ZT_PACK_U32: return "u32";
    case ZT_PACK_BYTES: return "bytes";
    case ZT_PACK_JSONL: return "jsonl";
    case ZT_PACK_TEXT_FILES: return "text";
    case ZT_PACK_TEXT_LINES: return "lines";
    case ZT_PACK_CHAT: return "chat";
    default: return "ids";
    }
}

// Where each document came from: "inputs" (chat packs and mixtures), and "mixture".
static void provenance_json(cJSON *root, const zt_pack_opts *o, const char *const *inputs, const zt_pack_stats *st) {
    const int chat = o->input == ZT_PACK_CHAT;
    if (!st->inputs) return;
    if (o->weights) {
        cJSON *mix = cJSON_AddObjectToObject(root, "mixture");
        cJSON_AddNumberToObject(mix, "tokens", (double)st->mix_tokens);
        cJSON_AddStringToObject(mix, "weights_by", "tokens");
        cJSON_AddNumberToObject(mix, "seed", (double)o->mix_seed);
        cJSON_AddStringToObject(mix, "interleave", "seeded shuffle of the documents taken");
    }
    cJSON *arr = cJSON_AddArrayToObject(root, "inputs");
    for (int i = 0; i < st->ninputs; i++) {
        const zt_pack_input_stats *in = &st->inputs[i];
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "input", inputs[i]);
        if (chat) {
            cJSON_AddStringToObject(e, "format", zt_chat_format_name((zt_chat_format)in->chat_format));
            cJSON_AddStringToObject(e, "format_from", in->format_from);
        }
        // packed (or, in a mixture, available) documents, their tokens and trained tokens
        cJSON_AddNumberToObject(e, o->weights ? "available_documents" : "packed_documents", (double)in->documents);
        cJSON_AddNumberToObject(e, o->weights ? "available_tokens" : "packed_tokens", (double)in->tokens);
        if (chat) cJSON_AddNumberToObject(e, o->weights ? "available_trained_tokens" : "packed_trained_tokens", (double)in->trained);
        cJSON_AddNumberToObject(e, "bad_skipped", (double)in->bad_documents);
        if (chat) cJSON_AddNumberToObject(e, "too_long_skipped", (double)in->too_long);
        if (o->weights) {
            cJSON_AddNumberToObject(e, "weight", in->weight);
            cJSON_AddNumberToObject(e, "share", in->share);
            cJSON_AddNumberToObject(e, "taken_documents", (double)in->taken_documents);
            cJSON_AddNumberToObject(e, "taken_tokens", (double)in->taken_tokens);
            if (chat) cJSON_AddNumberToObject(e, "taken_trained_tokens", (double)in->taken_trained);
            cJSON_AddNumberToObject(e, "epochs", round(in->epochs * 1e6) / 1e6);
        }
        cJSON_AddItemToArray(arr, e);
    }
}

static char *dataset_json(const zt_pack_opts *o, const pack_writer *w, int nw, const zt_pack_stats *st,
                          const char *const *inputs) {
    const int chat = o->input == ZT_PACK_CHAT;
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "format", ZT_DATASET_FORMAT);
    cJSON_AddNumberToObject(root, "version", chat ? ZT_DATASET_VERSION_FLAGS : ZT_DATASET_VERSION);
    if (chat) {
        cJSON *tf = cJSON_AddObjectToObject(root, "token_flags");
        cJSON_AddNumberToObject(tf, "doc_start_bit", 30);
        cJSON_AddNumberToObject(tf, "no_loss_bit", 31);
        cJSON_AddStringToObject(root, "doc_attention", "isolated");  // the trainer's default for this data
    }
    cJSON_AddNumberToObject(root, "seq_len", o->seq_len);
    cJSON_AddNumberToObject(root, "vocab_size", (double)o->vocab_size);
    if (o->eos_id >= 0) cJSON_AddNumberToObject(root, "eos_id", (double)o->eos_id);
    if (o->tokenizer && o->tokenizer[0]) cJSON_AddStringToObject(root, "tokenizer", o->tokenizer);
    // Informational: the reader ignores these, preflight and people read them.
    cJSON_AddStringToObject(root, "input", input_name(o->input));
    if (o->input == ZT_PACK_JSONL) cJSON_AddStringToObject(root, "field", o->field && o->field[0] ? o->field : "text");
    if (chat) {
        cJSON_AddStringToObject(root, "field", o->field && o->field[0] ? o->field : "messages");
        cJSON_AddStringToObject(root, "train_on", zt_chat_train_name((zt_chat_train)o->train_on));
        if (o->chat_template) cJSON_AddStringToObject(root, "chat_template", o->chat_template);
        if (o->model_chat_template) cJSON_AddStringToObject(root, "model_chat_template", o->model_chat_template);
        cJSON_AddNumberToObject(root, "pad_id", (double)zt_tokenizer_token_id(o->tok, "<|endoftext|>"));
    }
    if (is_text_kind(o->input)) cJSON_AddNumberToObject(root, "bad_documents_skipped", (double)st->bad_documents);
    cJSON_AddStringToObject(root, "layout", nw > 1 || o->per_rank > 0 ? "per-rank" : "single");
    cJSON_AddNumberToObject(root, "documents", (double)st->documents);
    cJSON_AddNumberToObject(root, "dropped_tokens", (double)st->dropped_tokens);
    if (chat) {
        cJSON_AddNumberToObject(root, "conversations_too_long", (double)st->conversations_too_long);
        cJSON_AddNumberToObject(root, "trained_tokens", (double)st->trained_tokens);
        cJSON_AddNumberToObject(root, "padding_tokens", (double)st->padding_tokens);
    }
    provenance_json(root, o, inputs, st);
    cJSON *files = cJSON_AddArrayToObject(root, "files");
    for (int i = 0; i < nw; i++) {
        cJSON *f = cJSON_CreateObject();
        const char *slash = strrchr(w[i].path, '/');
        char crc[16];
        snprintf(crc, sizeof crc, "0x%08x", w[i].crc);
        cJSON_AddStringToObject(f, "name", slash ? slash + 1 : w[i].path);
        cJSON_AddNumberToObject(f, "blocks", (double)w[i].blocks);
        cJSON_AddNumberToObject(f, "tokens", (double)(w[i].blocks * o->seq_len));
        cJSON_AddStringToObject(f, "crc32c", crc);
        cJSON_AddNumberToObject(f, "documents", (double)w[i].documents);
        cJSON_AddNumberToObject(f, "dropped_tokens", (double)w[i].dropped);
        if (chat) {
            cJSON_AddNumberToObject(f, "trained_tokens", (double)w[i].trained);
            cJSON_AddNumberToObject(f, "padding_tokens", (double)w[i].padding);
        }
        cJSON_AddItemToArray(files, f);
    }
    char *s = cJSON_Print(root);
    cJSON_Delete(root);
    return s;
}

static int check_opts(const zt_pack_opts *o, int ninputs) {
    if (ninputs < 1) return zt_err("pack: no input files given");
    if (o->input != ZT_PACK_U32 && o->input != ZT_PACK_TEXT_IDS && o->input != ZT_PACK_BYTES &&
        !is_text_kind(o->input))
        return zt_err("pack: unknown input kind %d", (int)o->input);
    if (is_text_kind(o->input)) {
        if (!o->tok) return zt_err("pack: --input %s needs a tokenizer", input_name(o->input));
        if (o->vocab_size < zt_tokenizer_vocab_size(o->tok))
            return zt_err("pack: vocab_size %lld is smaller than the tokenizer's vocabulary (%lld ids)",
                          (long long)o->vocab_size, (long long)zt_tokenizer_vocab_size(o->tok));
    }
    if (o->seq_len < 2) return zt_err("pack: seq_len %d must be at least 2 (a block needs one input and one target)", o->seq_len);
    if (o->seq_len > ZT_SEQ_LEN_MAX)
        return zt_err("pack: seq_len %d is above the maximum of %d tokens per block (Qwen3's YaRN range, 4 x 32,768; "
                      "the longest block pack, --verify and the trainer's loader are tested at)",
                      o->seq_len, ZT_SEQ_LEN_MAX);
    if (o->vocab_size < 1 || o->vocab_size > ((int64_t)1 << 32))
        return zt_err("pack: vocab_size %lld must be in [1, 2^32] (ids are stored as uint32)",
                      (long long)o->vocab_size);
    if (o->eos_id >= o->vocab_size)
        return zt_err("pack: eos id %lld >= vocab_size %lld", (long long)o->eos_id, (long long)o->vocab_size);
    if (o->per_rank < 0 || o->per_rank > 99999)
        return zt_err("pack: per_rank %d must be in [0, 99999] (0 = one data.u32 file)", o->per_rank);
    if (o->input == ZT_PACK_CHAT) {
        if (o->eos_id >= 0)
            return zt_err("pack: --input chat appends no eos (the template ends every turn with <|im_end|>\\n)");
        if (o->vocab_size > (int64_t)ZT_TOK_ID_MASK + 1)
            return zt_err("pack: vocab_size %lld: version 2 words hold ids below 2^30", (long long)o->vocab_size);
        if (zt_tokenizer_token_id(o->tok, "<|endoftext|>") < 0)
            return zt_err("pack: --input chat pads blocks with <|endoftext|>, which the tokenizer lacks");
        if (o->train_on < ZT_CHAT_TRAIN_ASSISTANT || o->train_on > ZT_CHAT_TRAIN_ALL)
            return zt_err("pack: unknown train_on rule %d", o->train_on);
        if (o->chat_format < ZT_CHAT_FORMAT_AUTO || o->chat_format > ZT_CHAT_FORMAT_SHAREGPT)
            return zt_err("pack: unknown chat format %d", o->chat_format);
    }
    if (o->weights) {
        if (!is_text_kind(o->input))
            return zt_err("pack: a mixture takes text or chat inputs (--input jsonl, text, lines or chat), not --input "
                          "%s",
                          input_name(o->input));
        for (int i = 0; i < ninputs; i++)
            if (!(o->weights[i] > 0) || !isfinite(o->weights[i]))
                return zt_err("pack: input %d of the mixture has weight %g: weights are positive numbers", i + 1,
                              o->weights[i]);
        if (o->mix_tokens < 0) return zt_err("pack: mix_tokens %lld is negative", (long long)o->mix_tokens);
    } else if (o->mix_tokens) {
        return zt_err("pack: a mixture size (--mix-tokens) needs weighted inputs (INPUT:WEIGHT)");
    }
    return 0;
}

// 0 when no input is one of the files the pack writes (block files, their .partial names,
// dataset.json): compared by device and inode, so a hard link or a symlink counts too.
static int check_inputs_not_outputs(const char *const *inputs, int ninputs, const pack_writer *w, int nw,
                                    const char *jpath) {
    for (int i = 0; i < ninputs; i++) {
        struct stat in, out;
        if (stat(inputs[i], &in) != 0) continue;  // a missing input is refused by the caller
        for (int k = 0; k < 2 * nw + 1; k++) {
            const char *o = k == 2 * nw ? jpath : k % 2 ? w[k / 2].tmp : w[k / 2].path;
            if (stat(o, &out) == 0 && out.st_dev == in.st_dev && out.st_ino == in.st_ino)
                return zt_err("%s: this input is %s, a file the pack writes (%s): packing would destroy the input "
                              "before reading it; write the dataset to another directory with -o",
                              inputs[i], o, strcmp(inputs[i], o) ? "the same file through a link" : "the same path");
        }
    }
    return 0;
}

// A dataset is for training on its blocks: a pack that yields none (every document together shorter
// than one block, its tail dropped; every conversation longer than a block, skipped) or a per-rank
// file without one (more files than the documents fill) is refused, as a mixture that yields none
// is, instead of written for `train` to refuse later. 0, or -1 + zt_err saying why and what to do.
static int check_every_file_trains(const zt_pack_opts *o, const pack_writer *w, int nw, const zt_pack_stats *st) {
    const int chat = o->input == ZT_PACK_CHAT;
    if (st->blocks == 0) {
        if (chat && st->documents == 0 && st->conversations_too_long > 0)
            return zt_err("pack: no block: every conversation (%lld) is longer than a block of %d tokens (--seq-len) "
                          "and was skipped (a conversation never straddles two blocks); pack with a --seq-len that "
                          "holds them", (long long)st->conversations_too_long, o->seq_len);
        return zt_err("pack: no block: the inputs gave %lld %s%s of %lld tokens in all, fewer than one block of %d "
                      "(--seq-len; a tail shorter than a block is dropped)%s; give more data or a shorter --seq-len",
                      (long long)st->documents, chat ? "conversation" : "document", st->documents == 1 ? "" : "s",
                      (long long)st->tokens, o->seq_len,
                      st->conversations_too_long > 0 ? ", conversations longer than a block skipped" : "");
    }
    for (int i = 0; i < nw && o->per_rank > 0; i++)
        if (w[i].blocks == 0)
            return zt_err("pack: --per-rank %d: %s gets no block (%lld tokens, fewer than one block of %d): documents "
                          "are dealt to the files round-robin, so each of the %d files needs a block's worth; pack "
                          "fewer files (--per-rank) or more documents", o->per_rank, w[i].path,
                          (long long)w[i].tokens, o->seq_len, nw);
    return 0;
}

int zt_pack(const char *const *inputs, int ninputs, const char *out_dir, const zt_pack_opts *opts,
            zt_pack_stats *stats) {
    zt_pack_stats local;
    if (!stats) stats = &local;
    memset(stats, 0, sizeof *stats);
    if (check_opts(opts, ninputs)) return -1;

    char jpath[4096];
    if ((size_t)snprintf(jpath, sizeof jpath, "%s/dataset.json", out_dir) >= sizeof jpath - 32)
        return zt_err("%s: output path is too long", out_dir);
    struct stat st;
    if (zt_out_check(jpath) != 0) return -1;  // a link there is refused, never written through or over
    if (stat(jpath, &st) == 0)
        return zt_err("%s already exists; pack never overwrites a dataset: pick a new output directory (or delete "
                      "the old dataset first)",
                      jpath);
    // Fail on a missing input before creating anything.
    for (int i = 0; i < ninputs; i++) {
        if (access(inputs[i], R_OK) != 0) return zt_err("%s: cannot open input: %s", inputs[i], strerror(errno));
        if (stat(inputs[i], &st) == 0 && S_ISDIR(st.st_mode))
            return zt_err("%s: is a directory, not an input file", inputs[i]);
    }
    int nw = opts->per_rank > 0 ? opts->per_rank : 1;
    int64_t cap_blocks = ZT_PACK_BUF_TOKENS / nw / opts->seq_len;
    if (cap_blocks < 1) cap_blocks = 1;
    // Every output stream holds at least one block (its partial block waits there until it is whole
    // or dropped): at long blocks many streams would need more host memory than a pack should take.
    if ((int64_t)nw * cap_blocks * opts->seq_len > ZT_PACK_BUF_MAX_TOKENS)
        return zt_err("pack: --per-rank %d files of --seq-len %d blocks need %.1f MiB of block buffers (one block per "
                      "file), more than the %lld MiB a pack takes: pack fewer files or shorter blocks",
                      nw, opts->seq_len, (double)nw * opts->seq_len * 4 / (1 << 20),
                      (long long)(ZT_PACK_BUF_MAX_TOKENS * 4 >> 20));
    pack_writer *w = zt_xcalloc((size_t)nw, sizeof *w);
    packer pk = {.o = opts, .w = w, .nw = nw, .st = stats, .t0 = zt_now()};
    if (opts->input == ZT_PACK_CHAT) pk.pad_id = (uint32_t)zt_tokenizer_token_id(opts->tok, "<|endoftext|>");
    if (opts->input == ZT_PACK_CHAT || opts->weights) {  // per-input provenance for dataset.json
        stats->inputs = zt_xcalloc((size_t)ninputs, sizeof *stats->inputs);
        stats->ninputs = ninputs;
    }
    pk.last_report = pk.t0;
    for (int i = 0; i < ninputs; i++)
        if (stat(inputs[i], &st) == 0) pk.bytes_total += (int64_t)st.st_size;
    for (int i = 0; i < nw; i++) {
        if (opts->per_rank > 0) snprintf(w[i].path, sizeof w[i].path, "%s/rank-%05d.u32", out_dir, i);
        else snprintf(w[i].path, sizeof w[i].path, "%s/data.u32", out_dir);
        snprintf(w[i].tmp, sizeof w[i].tmp, "%s.partial", w[i].path);
        w[i].fd = -1;
    }
    // An input that is a file this pack writes (the same path, a hard link or a symlink to it)
    // would be truncated before it is read: refused before anything is opened for writing.
    int rc = check_inputs_not_outputs(inputs, ninputs, w, nw, jpath), opened = 0;
    // A link (or anything but a regular file) at a block file's name is refused before anything
    // is written: the rename at the end would replace a link itself, never its target, but one
    // planted there is named, not silently dropped.
    for (int i = 0; i < nw && rc == 0; i++) rc = zt_out_check(w[i].path);
    if (rc == 0 && zt_mkdirs(out_dir)) rc = -1;
    for (int i = 0; i < nw && rc == 0; i++, opened++) {
        // a stale .partial of an interrupted pack goes first (a regular file only: a link there is
        // refused), then the new one is created O_EXCL | O_NOFOLLOW: never written through
        w[i].fd = zt_out_create_fresh(w[i].tmp);
        if (w[i].fd < 0) {
            rc = -1;
            break;
        }
        w[i].cap = cap_blocks * opts->seq_len;
        w[i].buf = zt_xmalloc((size_t)w[i].cap * 4);
    }
    if (rc == 0 && is_text_kind(opts->input)) {
        zt_pack_sink sink = {&pk, sink_begin, sink_put, sink_end, sink_progress, sink_put_conversation};
        rc = opts->weights ? pack_mixture(inputs, ninputs, opts, &sink, out_dir, stats)
                           : zt_pack_text(inputs, ninputs, opts, &sink, stats);
    } else {
        for (int i = 0; i < ninputs && rc == 0; i++) rc = pack_input(&pk, inputs[i]);
    }

    // Each stream's tail shorter than a block is dropped, never padded: padding
    // would train on fake tokens, and a short block breaks the fixed block size.
    // Chat words say which tokens are targets, so there the last block is padded
    // (nothing trains on the padding) and nothing is dropped.
    for (int i = 0; i < nw && rc == 0; i++) {
        if (opts->input == ZT_PACK_CHAT && (rc = pad_block(&pk, &w[i]))) break;
        rc = flush_blocks(&w[i], opts->seq_len);
        if (rc) break;
        w[i].dropped = w[i].n;
        stats->dropped_tokens += w[i].n;
        stats->blocks += w[i].blocks;
        stats->tokens += w[i].tokens;
        stats->trained_tokens += w[i].trained;
        stats->padding_tokens += w[i].padding;
        // dataset.json must never describe data that a crash could still lose.
        if (fsync(w[i].fd) != 0) rc = zt_err("%s: fsync failed: %s", w[i].tmp, strerror(errno));
    }
    if (rc == 0 && opts->weights && stats->blocks == 0) {  // a mixture asked for is one that trains
        int64_t docs = 0, tokens = 0;
        for (int i = 0; i < stats->ninputs; i++)
            docs += stats->inputs[i].taken_documents, tokens += stats->inputs[i].taken_tokens;
        rc = zt_err("pack: the mixture yields no block: a mixture of %lld tokens (%s) takes %lld %s of %lld tokens, "
                    "and a block holds %d (--seq-len); ask for a larger mixture (--mix-tokens %d or more)",
                    (long long)stats->mix_tokens, opts->mix_tokens > 0 ? "--mix-tokens" : "the default size",
                    (long long)docs, opts->input == ZT_PACK_CHAT ? "conversations" : "documents", (long long)tokens,
                    opts->seq_len, opts->seq_len);
    }
    if (rc == 0 && !opts->weights) rc = check_every_file_trains(opts, w, nw, stats);
    for (int i = 0; i < opened; i++) {
        if (w[i].fd >= 0 && close(w[i].fd) != 0 && rc == 0)
            rc = zt_err("%s: close failed: %s", w[i].tmp, strerror(errno));
        w[i].fd = -1;
    }
    stats->nfiles = nw;
    // Complete: the block files take their names, then dataset.json (written last, atomically)
    // makes the directory a dataset. A crash before that leaves no dataset.json: nothing that
    // looks complete.
    int renamed = 0;
    for (int i = 0; i < nw && rc == 0; i++, renamed++)
        if (rename(w[i].tmp, w[i].path) != 0) rc = zt_err("cannot rename %s to %s: %s", w[i].tmp, w[i].path, strerror(errno));
    if (rc == 0) {
        char *json = dataset_json(opts, w, nw, stats, inputs);
        size_t n = strlen(json);
        char *text = zt_xmalloc(n + 2);
        memcpy(text, json, n);
        text[n] = '\n';
        cJSON_free(json);
        rc = zt_write_file_atomic(jpath, text, n + 1);
        free(text);
    }
    if (rc != 0) {
        // Without dataset.json the block files are unusable; don't leave them to be mistaken for data.
        for (int i = 0; i < opened; i++) unlink(i < renamed ? w[i].path : w[i].tmp);
    }
    for (int i = 0; i < nw; i++) free(w[i].buf);
    free(w);
    stats->seconds = zt_now() - pk.t0;
    if (stats == &local) zt_pack_stats_free(&local);
    return rc;
}

void zt_pack_stats_free(zt_pack_stats *stats) {
    free(stats->inputs);
    stats->inputs = NULL;
    stats->ninputs = 0;
}
