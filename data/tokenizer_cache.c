// The tokenizer's binary cache: the tables zt_tokenizer_load derives from a tokenizer.json
// (merge table, decode table, whole-word table, added tokens, flags, split regex), written
// once and read back on later loads instead of parsing the JSON (about 0.6 s for Qwen3's
// 11 MB file, 1.9 s for Qwen3.5's). Never trusted: the file's name and header carry the
// tokenizer.json's length, CRC-32C and 64-bit hash (a stale cache does not match), the
// payload has its own CRC-32C (a corrupt one does not match), and every id, offset and
// table size is bounds-checked before use (a forged one is refused); any mismatch means
// "parse the JSON and rewrite the cache". A directory that cannot be written means no cache.
// Where: ZT_TOKENIZER_CACHE (a directory, or "off"), else $XDG_CACHE_HOME/zerotrain/tokenizer,
// else $HOME/.cache/zerotrain/tokenizer.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "base/crc32c.h"
#include "base/env.h"
#include "base/out_file.h"
#include "data/tokenizer_internal.h"
#include "data/unicode.h"

#define TOK_CACHE_MAGIC "ZTTOKC\0\0"
#define TOK_CACHE_VERSION 1u  // bump when the tables or how they are derived change

typedef struct {
    char magic[8];
    uint32_t version, json_crc;
    uint64_t json_len, json_hash;
    uint64_t payload_len;
    uint32_t payload_crc, pad;
} cache_header;

// The scalars of the payload, first in it.
typedef struct {
    int64_t vocab_size;
    uint64_t merge_mask, whole_mask;  // whole_mask 0: no whole-word table
    uint64_t dec_bytes_len, added_bytes_len, re_len;
    int32_t nadded, added_one_first, added_has_newline, normalize_nfc, ignore_merges, pad;
    uint32_t byte_id[256];
    unsigned char added_first[256];
} cache_scalars;

static void cache_dir(char *out, size_t n) {
    out[0] = 0;
    const char *env = zt_env_str(ZT_ENV_TOKENIZER_CACHE);
    if (env && !strcmp(env, "off")) return;
    if (env && env[0]) { snprintf(out, n, "%s", env); return; }
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    if (xdg && xdg[0] == '/') snprintf(out, n, "%s/zerotrain/tokenizer", xdg);
    else if (home && home[0] == '/') snprintf(out, n, "%s/.cache/zerotrain/tokenizer", home);
}

void zt_tok_cache_path(const zt_tok_cache_key *key, char *out, size_t n) {
    char dir[4096];
    cache_dir(dir, sizeof dir);
    if (!dir[0]) { out[0] = 0; return; }
    if (snprintf(out, n, "%s/tokenizer-%08x-%llu-%016llx.bin", dir, key->json_crc, (unsigned long long)key->json_len,
                 (unsigned long long)key->json_hash) >= (int)n)
        out[0] = 0;
}

// ---------------------------------------------------------------------------
// writing

static void put(zt_buf *b, const void *p, size_t n) {
    zt_buf_append(b, p, n);
    static const char zeros[8] = {0};
    if (b->n % 8) zt_buf_append(b, zeros, 8 - b->n % 8);  // every section starts 8-aligned
}

void zt_tok_cache_store(const zt_tokenizer *tk, const zt_tok_cache_key *key, const char *re_text) {
    char path[4400], dir[4096];
    zt_tok_cache_path(key, path, sizeof path);
    cache_dir(dir, sizeof dir);
    if (!path[0] || zt_mkdirs(dir) != 0) return;
    cache_scalars sc;
    memset(&sc, 0, sizeof sc);
    sc.vocab_size = tk->vocab_size;
    sc.merge_mask = tk->merge_mask;
    sc.whole_mask = tk->whole_ids ? tk->whole_mask : 0;
    sc.dec_bytes_len = tk->dec_off[tk->vocab_size];
    sc.re_len = strlen(re_text);
    sc.nadded = tk->nadded;
    sc.added_one_first = tk->added_one_first;
    sc.added_has_newline = tk->added_has_newline;
    sc.normalize_nfc = tk->normalize_nfc;
    sc.ignore_merges = tk->ignore_merges;
    memcpy(sc.byte_id, tk->byte_id, sizeof sc.byte_id);
    memcpy(sc.added_first, tk->added_first, sizeof sc.added_first);
    for (int i = 0; i < tk->nadded; i++) sc.added_bytes_len += tk->added[i].len;

    zt_buf b = {0};
    cache_header h;
    memset(&h, 0, sizeof h);
    put(&b, &h, sizeof h);  // filled in below
    put(&b, &sc, sizeof sc);
    put(&b, tk->merges, (tk->merge_mask + 1) * sizeof *tk->merges);
    put(&b, tk->dec_off, ((size_t)tk->vocab_size + 1) * sizeof *tk->dec_off);
    put(&b, tk->dec_def, (size_t)tk->vocab_size);
    put(&b, tk->dec_bytes, sc.dec_bytes_len);
    if (sc.whole_mask) put(&b, tk->whole_ids, (sc.whole_mask + 1) * sizeof *tk->whole_ids);
    uint32_t *meta = zt_xcalloc((size_t)tk->nadded * 2 + 1, sizeof *meta);  // (id, len) per added token
    for (int i = 0; i < tk->nadded; i++) {
        meta[2 * i] = tk->added[i].id;
        meta[2 * i + 1] = (uint32_t)tk->added[i].len;
    }
    put(&b, meta, (size_t)tk->nadded * 2 * sizeof *meta);
    free(meta);
    for (int i = 0; i < tk->nadded; i++) zt_buf_append(&b, tk->added[i].text, tk->added[i].len);
    put(&b, "", 0);
    put(&b, re_text, sc.re_len + 1);

    memcpy(h.magic, TOK_CACHE_MAGIC, 8);
    h.version = TOK_CACHE_VERSION;
    h.json_crc = key->json_crc;
    h.json_len = key->json_len;
    h.json_hash = key->json_hash;
    h.payload_len = b.n - sizeof h;
    h.payload_crc = zt_crc32c(0, b.p + sizeof h, h.payload_len);
    memcpy(b.p, &h, sizeof h);
    // Not durable (no fsync): a cache lost in a crash is rebuilt; the rename keeps it whole.
    (void)zt_replace_file(path, b.p, b.n, 0);
    free(b.p);
}

// ---------------------------------------------------------------------------
// reading: a cursor over the payload that refuses to run past its end

typedef struct {
    const char *p;
    size_t n, at;
} cursor;

static const void *take(cursor *c, uint64_t n) {
    if (n > c->n - c->at) return NULL;
    const void *r = c->p + c->at;
    c->at += (size_t)n;
    c->at = (c->at + 7) & ~(size_t)7;
    if (c->at > c->n) c->at = c->n;
    return r;
}

static void *take_copy(cursor *c, uint64_t n) {
    const void *src = take(c, n);
    if (!src) return NULL;
    void *dst = zt_xmalloc(n ? (size_t)n : 1);
    memcpy(dst, src, (size_t)n);
    return dst;
}

// Every table consistent with the vocabulary: ids in range, offsets in order, each probe
// table with a free slot (a full one would make a lookup of an absent key loop forever).
static int tables_valid(const zt_tokenizer *tk, const cache_scalars *sc) {
    const uint64_t V = (uint64_t)tk->vocab_size;
    int free_slot = 0;
    for (uint64_t i = 0; i <= tk->merge_mask; i++) {
        const merge_slot *s = &tk->merges[i];
        if (s->key == MERGE_EMPTY) { free_slot = 1; continue; }
        if ((s->key >> 32) >= V || (s->key & 0xFFFFFFFFu) >= V || s->id >= V) return 0;
    }
    if (!free_slot) return 0;
    if (tk->dec_off[0] != 0 || tk->dec_off[V] != sc->dec_bytes_len) return 0;
    for (uint64_t i = 0; i < V; i++)
        if (tk->dec_off[i + 1] < tk->dec_off[i] || tk->dec_def[i] > 1) return 0;
    for (int b = 0; b < 256; b++)
        if (tk->byte_id[b] >= V) return 0;
    if (tk->whole_ids) {
        free_slot = 0;
        for (uint64_t i = 0; i <= tk->whole_mask; i++) {
            if (tk->whole_ids[i] == UINT32_MAX) free_slot = 1;
            else if (tk->whole_ids[i] >= V) return 0;
        }
        if (!free_slot) return 0;
    }
    for (int i = 0; i < tk->nadded; i++)
        if (tk->added[i].id >= V || tk->added[i].len == 0) return 0;
    return 1;
}

static int pow2_mask(uint64_t m) { return m > 0 && m < (1ull << 40) && ((m + 1) & m) == 0; }

static int load_payload(zt_tokenizer *tk, cursor *c, char **re_text) {
    const cache_scalars *sc = take(c, sizeof(cache_scalars));
    if (!sc || sc->vocab_size <= 0 || sc->vocab_size > (int64_t)UINT32_MAX || !pow2_mask(sc->merge_mask) ||
        (sc->whole_mask && !pow2_mask(sc->whole_mask)) || sc->nadded < 0 || sc->nadded > (1 << 24) ||
        (sc->ignore_merges && !sc->whole_mask))
        return -1;
    const uint64_t V = (uint64_t)sc->vocab_size;
    tk->vocab_size = sc->vocab_size;
    tk->merge_mask = sc->merge_mask;
    tk->added_one_first = sc->added_one_first;
    tk->added_has_newline = sc->added_has_newline;
    tk->normalize_nfc = sc->normalize_nfc;
    tk->ignore_merges = sc->ignore_merges;
    memcpy(tk->byte_id, sc->byte_id, sizeof tk->byte_id);
    memcpy(tk->added_first, sc->added_first, sizeof tk->added_first);
    if (!(tk->merges = take_copy(c, (sc->merge_mask + 1) * sizeof *tk->merges))) return -1;
    if (!(tk->dec_off = take_copy(c, (V + 1) * sizeof *tk->dec_off))) return -1;
    if (!(tk->dec_def = take_copy(c, V))) return -1;
    if (!(tk->dec_bytes = take_copy(c, sc->dec_bytes_len))) return -1;
    if (sc->whole_mask) {
        tk->whole_mask = sc->whole_mask;
        if (!(tk->whole_ids = take_copy(c, (sc->whole_mask + 1) * sizeof *tk->whole_ids))) return -1;
    }
    const uint32_t *meta = take(c, (uint64_t)sc->nadded * 2 * sizeof *meta);
    const char *texts = take(c, sc->added_bytes_len);
    if (!meta || !texts) return -1;
    tk->added = zt_xcalloc((size_t)sc->nadded + 1, sizeof *tk->added);
    uint64_t off = 0;
    for (int i = 0; i < sc->nadded; i++) {
        const size_t len = meta[2 * i + 1];
        if (len > sc->added_bytes_len - off) return -1;
        tk->added[i].text = zt_xmalloc(len + 1);
        memcpy(tk->added[i].text, texts + off, len);
        tk->added[i].text[len] = 0;
        tk->added[i].len = len;
        tk->added[i].id = meta[2 * i];
        tk->nadded = i + 1;  // what zt_tokenizer_free must free
        off += len;
    }
    if (off != sc->added_bytes_len) return -1;
    const char *re = take(c, sc->re_len + 1);
    if (!re || re[sc->re_len] != 0 || strlen(re) != sc->re_len || c->at != c->n) return -1;
    if (!tables_valid(tk, sc)) return -1;
    *re_text = zt_xmalloc(sc->re_len + 1);
    memcpy(*re_text, re, sc->re_len + 1);
    return 0;
}

// Undo a partial load, leaving tk as zt_tokenizer_load made it (all tables NULL).
static void unload(zt_tokenizer *tk) {
    free(tk->merges);
    free(tk->dec_off);
    free(tk->dec_def);
    free(tk->dec_bytes);
    free(tk->whole_ids);
    for (int i = 0; i < tk->nadded && tk->added; i++) free(tk->added[i].text);
    free(tk->added);
    char hash[sizeof tk->hash];
    memcpy(hash, tk->hash, sizeof hash);
    memset(tk, 0, sizeof *tk);
    memcpy(tk->hash, hash, sizeof hash);
}

int zt_tok_cache_load(zt_tokenizer *tk, const zt_tok_cache_key *key, char **re_text) {
    char path[4400];
    zt_tok_cache_path(key, path, sizeof path);
    if (!path[0]) return -1;
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    cache_header h;
    char *data = NULL;
    int ok = fread(&h, sizeof h, 1, f) == 1 && !memcmp(h.magic, TOK_CACHE_MAGIC, 8) &&
             h.version == TOK_CACHE_VERSION && h.json_crc == key->json_crc && h.json_len == key->json_len &&
             h.json_hash == key->json_hash && h.payload_len < ((uint64_t)1 << 34);
    if (ok) {
        data = malloc(h.payload_len + 1);
        ok = data && fread(data, 1, h.payload_len, f) == h.payload_len && fgetc(f) == EOF &&
             zt_crc32c(0, data, h.payload_len) == h.payload_crc;
    }
    fclose(f);
    if (ok) {
        cursor c = {data, h.payload_len, 0};
        ok = load_payload(tk, &c, re_text) == 0;
        if (!ok) unload(tk);
    }
    free(data);
    return ok ? 0 : -1;
}
