// `zerotrain pack`: turns documents of token ids (raw uint32, decimal text, or
// plain bytes) or of text (JSON Lines, text files, text lines: data/pack_text.c
// tokenizes them) into a dataset directory of seq_len-token uint32 block files plus
// dataset.json, written last so that its presence means the pack completed.
// Conversations (--input chat) become version 2 words with loss masks; each one sits
// inside a single block, the rest of a block it does not fit in is padding.
#define _GNU_SOURCE
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "data/chat.h"
#include "base/crc32c.h"
#include "data/dataset.h"
#include "data/pack_text.h"
#include "data/tokenizer.h"
#include "base/common.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "pack writes host uint32 as little-endian block files: a big-endian host needs byte swapping here"
#endif

// Token buffer budget shared by all output streams (tokens): big writes without
// letting --per-rank 1024 allocate gigabytes.
#define ZT_PACK_BUF_TOKENS ((int64_t)1 << 22)
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
        const char *e = getenv("ZT_PROGRESS_INTERVAL");
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

static char *dataset_json(const zt_pack_opts *o, const pack_writer *w, int nw, const zt_pack_stats *st) {
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
    if (o->seq_len < 2 || o->seq_len > (1 << 30))
        return zt_err("pack: seq_len %d must be in [2, 2^30] (a block needs at least one input and one target)",
                      o->seq_len);
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
    pack_writer *w = zt_xcalloc((size_t)nw, sizeof *w);
    packer pk = {.o = opts, .w = w, .nw = nw, .st = stats, .t0 = zt_now()};
    if (opts->input == ZT_PACK_CHAT) pk.pad_id = (uint32_t)zt_tokenizer_token_id(opts->tok, "<|endoftext|>");
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
    if (rc == 0 && zt_mkdirs(out_dir)) rc = -1;
    for (int i = 0; i < nw && rc == 0; i++, opened++) {
        // a stale .partial of an interrupted pack goes first; never written through (O_EXCL: not
        // a symlink left there, whatever it points to)
        if (unlink(w[i].tmp) != 0 && errno != ENOENT) {
            rc = zt_err("%s: cannot remove the stale partial file: %s", w[i].tmp, strerror(errno));
            break;
        }
        w[i].fd = open(w[i].tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        if (w[i].fd < 0) {
            rc = zt_err("%s: cannot create: %s", w[i].tmp, strerror(errno));
            break;
        }
        w[i].cap = cap_blocks * opts->seq_len;
        w[i].buf = zt_xmalloc((size_t)w[i].cap * 4);
    }
    if (rc == 0 && is_text_kind(opts->input)) {
        zt_pack_sink sink = {&pk, sink_begin, sink_put, sink_end, sink_progress, sink_put_conversation};
        rc = zt_pack_text(inputs, ninputs, opts, &sink, stats);
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
        char *json = dataset_json(opts, w, nw, stats);
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
    return rc;
}
