// Byte-level BPE for Qwen-style tokenizers (Qwen2/3, Qwen3.5, any tokenizer.json of
// that shape), loaded from tokenizer.json and exact against Hugging Face `tokenizers`.
// Encoding: added tokens are cut out of the raw text, each stretch between them goes
// through NFC (data/unicode.c), is split into words by the file's split regex -- a
// hand-written matcher for the Qwen2/3 and Qwen3.5 regexes, PCRE2 (JIT) for any
// other -- and each word's bytes are merged by rank (a rank-ordered heap on long
// words, so no quadratic loop), with a per-encoder cache of word -> ids in front.
#include "data/tokenizer.h"

#include <cjson/cJSON.h>
#include <omp.h>
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "base/crc32c.h"
#include "base/json_util.h"
#include "data/tokenizer_internal.h"
#include "base/common.h"

// The split regex of Qwen2, Qwen2.5 and Qwen3, which zt_pretokenize implements.
static const char QWEN_SPLIT_REGEX[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|"
    "\\s+(?!\\S)|\\s+";
// Qwen3.5's (and Qwen3.6's): combining marks (\\p{M}) join letters and leave punctuation.
static const char QWEN35_SPLIT_REGEX[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|"
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

// The per-encoder cache of word -> ids.
#define CACHE_MAX_WORD 128    // longer words are merged every time
#define CACHE_SLOTS (1u << 17)
#define CACHE_KEY_BYTES (1u << 21)
#define CACHE_IDS (1u << 19)
#define SMALL_WORD 48         // up to this many bytes: linear merge loop, else heap

// ---------------------------------------------------------------------------
// hashing

static inline uint64_t mix64(uint64_t h) {
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ULL;
    h ^= h >> 33;
    return h;
}

static inline uint64_t hash_bytes(const unsigned char *p, size_t n) {
    uint64_t h = 0x9E3779B97F4A7C15ULL ^ (uint64_t)n;
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        h = (h ^ w) * 0xBF58476D1CE4E5B9ULL;
        h ^= h >> 29;
        p += 8;
        n -= 8;
    }
    uint64_t w = 0;
    memcpy(&w, p, n);
    return mix64(h ^ w);
}

static inline const merge_slot *merge_find(const zt_tokenizer *tk, uint32_t a, uint32_t b) {
    uint64_t key = ((uint64_t)a << 32) | b;
    for (uint64_t i = mix64(key) & tk->merge_mask;; i = (i + 1) & tk->merge_mask) {
        const merge_slot *s = &tk->merges[i];
        if (s->key == key) return s;
        if (s->key == MERGE_EMPTY) return NULL;
    }
}

// ---------------------------------------------------------------------------
// loading tokenizer.json

// GPT-2's reversible map from bytes to printable code points: the printable
// Latin-1 bytes stand for themselves, the rest are moved to U+0100 and up.
static void byte_level_alphabet(uint32_t byte_to_cp[256], int16_t cp_to_byte[324]) {
    int n = 0;
    for (int i = 0; i < 324; i++) cp_to_byte[i] = -1;
    for (int b = 0; b < 256; b++) {
        int printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
        byte_to_cp[b] = printable ? (uint32_t)b : (uint32_t)(256 + n++);
        cp_to_byte[byte_to_cp[b]] = (int16_t)b;
    }
}

// Byte-level token text -> raw bytes (at most as long). -1 when a character is not
// in the byte-level alphabet.
static int unbyte(const char *tok, const int16_t cp_to_byte[324], unsigned char *out, size_t *outlen) {
    const unsigned char *s = (const unsigned char *)tok;
    size_t n = strlen(tok), k = 0;
    if (zt_utf8_valid_prefix(tok, n) != n) return -1;
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        i += (size_t)zt_utf8_decode(s + i, &cp);
        if (cp >= 324 || cp_to_byte[cp] < 0) return -1;
        out[k++] = (unsigned char)cp_to_byte[cp];
    }
    *outlen = k;
    return 0;
}

// String -> id map used while loading (keys point into the cJSON tree).
typedef struct {
    const char **keys;
    uint64_t *hashes;  // compared first, so that a probe rarely touches a key
    uint32_t *ids;
    uint64_t mask;
} str_map;

static void str_map_init(str_map *m, size_t n) {
    uint64_t cap = 1024;
    while (cap < 2 * n) cap *= 2;
    m->keys = zt_xcalloc(cap, sizeof *m->keys);
    m->hashes = zt_xmalloc(cap * sizeof *m->hashes);
    m->ids = zt_xmalloc(cap * sizeof *m->ids);
    m->mask = cap - 1;
}

static int str_map_put(str_map *m, const char *key, uint32_t id) {
    size_t len = strlen(key);
    uint64_t h = hash_bytes((const unsigned char *)key, len);
    for (uint64_t i = h & m->mask;; i = (i + 1) & m->mask) {
        if (!m->keys[i]) {
            m->keys[i] = key;
            m->hashes[i] = h;
            m->ids[i] = id;
            return 0;
        }
        if (m->hashes[i] == h && !strcmp(m->keys[i], key)) return -1;
    }
}

static int64_t str_map_get(const str_map *m, const char *key, size_t len) {
    uint64_t h = hash_bytes((const unsigned char *)key, len);
    for (uint64_t i = h & m->mask;; i = (i + 1) & m->mask) {
        if (!m->keys[i]) return -1;
        if (m->hashes[i] == h && !strncmp(m->keys[i], key, len) && m->keys[i][len] == 0) return m->ids[i];
    }
}

static void str_map_free(str_map *m) {
    free(m->keys);
    free(m->hashes);
    free(m->ids);
}

static const char *json_str(const cJSON *obj, const char *name) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, name);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

// true when the member is absent, null, false, 0 or "" (a feature left off)
static int json_off(const cJSON *obj, const char *name) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, name);
    if (!v || cJSON_IsNull(v) || cJSON_IsFalse(v)) return 1;
    if (cJSON_IsNumber(v)) return v->valuedouble == 0;
    if (cJSON_IsString(v)) return v->valuestring[0] == 0;
    return 0;
}

// The split regex: a hand-written matcher when it is one zerotrain knows, else PCRE2
// in UTF mode with Unicode properties (\\s, \\d, \\w and POSIX classes by Unicode, as
// Oniguruma in tokenizers has them), JIT-compiled when the platform allows.
static int choose_split(zt_tokenizer *tk, const char *re, const char *path) {
    if (!strcmp(re, QWEN_SPLIT_REGEX)) {
        tk->split = SPLIT_QWEN3;
        return 0;
    }
    if (!strcmp(re, QWEN35_SPLIT_REGEX)) {
        tk->split = SPLIT_QWEN35;
        return 0;
    }
    int err;
    PCRE2_SIZE eoff;
    // the pattern's UTF-8 checked by the compile (no PCRE2_NO_UTF_CHECK): cJSON passes invalid UTF-8 in
    // a JSON string through, and PCRE2 reads out of bounds on such a pattern when told it is valid
    tk->re = pcre2_compile((PCRE2_SPTR)re, PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_UCP, &err, &eoff, NULL);
    if (!tk->re) {
        PCRE2_UCHAR msg[160];
        pcre2_get_error_message(err, msg, sizeof msg);
        return zt_err("%s: pre_tokenizer.pretokenizers[0].pattern.Regex does not compile (PCRE2, at offset %zu: %s):\n  %s",
                      path, (size_t)eoff, (const char *)msg, re);
    }
    tk->re_jit = pcre2_jit_compile(tk->re, PCRE2_JIT_COMPLETE) == 0;
    tk->split = SPLIT_PCRE2;
    return 0;
}

// The pipeline's fields zerotrain implements, else refused naming the field; *re = the split regex.
static int check_pipeline(zt_tokenizer *tk, const cJSON *root, const char *path, const char **re_out) {
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
    const char *type = json_str(model, "type");
    if (!type || strcmp(type, "BPE"))
        return zt_err("%s: model.type is %s; only byte-level BPE is supported", path, type ? type : "missing");
    const char *off[] = {"dropout", "byte_fallback", "continuing_subword_prefix", "end_of_word_suffix"};
    for (size_t i = 0; i < sizeof off / sizeof off[0]; i++)
        if (!json_off(model, off[i])) return zt_err("%s: model.%s is set; this tokenizer does not implement it", path, off[i]);

    const cJSON *norm = cJSON_GetObjectItemCaseSensitive(root, "normalizer");
    if (norm && !cJSON_IsNull(norm)) {
        const char *nt = json_str(norm, "type");
        if (!nt || strcmp(nt, "NFC"))
            return zt_err("%s: normalizer %s is not supported (only NFC or none)", path, nt ? nt : "?");
        tk->normalize_nfc = 1;
    }
    tk->ignore_merges = !json_off(model, "ignore_merges");

    const cJSON *pre = cJSON_GetObjectItemCaseSensitive(root, "pre_tokenizer");
    const char *pt = json_str(pre, "type");
    const cJSON *seq = cJSON_GetObjectItemCaseSensitive(pre, "pretokenizers");
    if (!pt || strcmp(pt, "Sequence") || cJSON_GetArraySize(seq) != 2)
        return zt_err("%s: pre_tokenizer %s is not supported: it must be a Sequence of Split (a regex) and ByteLevel", path,
                      pt ? pt : "missing");
    const cJSON *split = cJSON_GetArrayItem(seq, 0), *bl = cJSON_GetArrayItem(seq, 1);
    const char *st = json_str(split, "type"), *bt = json_str(bl, "type");
    const char *re = json_str(cJSON_GetObjectItemCaseSensitive(split, "pattern"), "Regex");
    const char *beh = json_str(split, "behavior");
    if (!st || strcmp(st, "Split") || !re || !beh || strcmp(beh, "Isolated") || !json_off(split, "invert"))
        return zt_err("%s: pre_tokenizer.pretokenizers[0] must be Split by a Regex pattern with behavior Isolated, not "
                      "inverted", path);
    if (!bt || strcmp(bt, "ByteLevel") || !json_off(bl, "add_prefix_space") || !json_off(bl, "use_regex"))
        return zt_err("%s: pre_tokenizer.pretokenizers[1] must be ByteLevel with add_prefix_space and use_regex false",
                      path);
    const cJSON *dec = cJSON_GetObjectItemCaseSensitive(root, "decoder");
    if (dec && !cJSON_IsNull(dec)) {
        const char *dt = json_str(dec, "type");
        if (!dt || strcmp(dt, "ByteLevel"))
            return zt_err("%s: decoder %s is not supported (only ByteLevel or none)", path, dt ? dt : "?");
    }

    const cJSON *post = cJSON_GetObjectItemCaseSensitive(root, "post_processor");
    if (post && !cJSON_IsNull(post)) {
        const char *ppt = json_str(post, "type");
        if (!ppt || strcmp(ppt, "ByteLevel"))
            return zt_err("%s: post_processor %s would add tokens; only ByteLevel or none is supported", path,
                          ppt ? ppt : "?");
    }
    *re_out = re;
    return 0;
}

static int cmp_added_len_desc(const void *a, const void *b) {
    const added_token *x = a, *y = b;
    return x->len < y->len ? 1 : x->len > y->len ? -1 : 0;
}

// The vocabulary size: one more than the largest id of model.vocab and added_tokens.
static int read_vocab_size(zt_tokenizer *tk, const cJSON *vocab, const cJSON *added, const char *path) {
    int64_t max_id = -1;
    const cJSON *it;
    cJSON_ArrayForEach(it, vocab) {
        if (!cJSON_IsNumber(it) || it->valuedouble < 0 || it->valuedouble >= 4e9 || it->valuedouble != (double)(int64_t)it->valuedouble)
            return zt_err("%s: model.vocab[\"%s\"] is not a valid id", path, it->string);
        if ((int64_t)it->valuedouble > max_id) max_id = (int64_t)it->valuedouble;
    }
    cJSON_ArrayForEach(it, added) {
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(it, "id");
        if (!cJSON_IsNumber(id) || id->valuedouble < 0 || id->valuedouble >= 4e9)
            return zt_err("%s: added_tokens entry without a valid id", path);
        if ((int64_t)id->valuedouble > max_id) max_id = (int64_t)id->valuedouble;
    }
    tk->vocab_size = max_id + 1;
    return 0;
}

// What reading the vocabulary leaves for the merges and the decode table.
typedef struct {
    str_map sm;              // token string -> id, for the merges
    uint64_t *len_of;        // raw bytes of each id
    unsigned char **bytes_of;
    unsigned char *tmp;      // holds every vocab token's raw bytes
} vocab_scratch;

// model.vocab: the string map and each id's raw bytes; the id of each one-byte token.
static int read_vocab(zt_tokenizer *tk, const cJSON *vocab, vocab_scratch *v, const char *path) {
    uint32_t byte_to_cp[256];
    int16_t cp_to_byte[324];
    byte_level_alphabet(byte_to_cp, cp_to_byte);
    str_map_init(&v->sm, (size_t)cJSON_GetArraySize(vocab));
    size_t total = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, vocab) total += strlen(it->string);
    tk->dec_off = zt_xcalloc((size_t)tk->vocab_size + 1, sizeof *tk->dec_off);
    tk->dec_def = zt_xcalloc((size_t)tk->vocab_size, 1);
    v->len_of = zt_xcalloc((size_t)tk->vocab_size, sizeof *v->len_of);
    v->bytes_of = zt_xcalloc((size_t)tk->vocab_size, sizeof *v->bytes_of);
    v->tmp = zt_xmalloc(total + 1);
    size_t tmp_used = 0;
    cJSON_ArrayForEach(it, vocab) {
        uint32_t id = (uint32_t)it->valuedouble;
        size_t blen;
        if (tk->dec_def[id]) return zt_err("%s: id %u appears twice in model.vocab", path, id);
        if (unbyte(it->string, cp_to_byte, v->tmp + tmp_used, &blen))
            return zt_err("%s: model.vocab token \"%s\" is not in the byte-level alphabet", path, it->string);
        if (str_map_put(&v->sm, it->string, id)) return zt_err("%s: token \"%s\" twice in model.vocab", path, it->string);
        tk->dec_def[id] = 1;
        v->bytes_of[id] = v->tmp + tmp_used;
        v->len_of[id] = blen;
        tmp_used += blen;
    }
    for (int b = 0; b < 256; b++) {
        char s[4] = {0};
        uint32_t cp = byte_to_cp[b];
        if (cp < 0x80) s[0] = (char)cp;
        else { s[0] = (char)(0xC0 | (cp >> 6)); s[1] = (char)(0x80 | (cp & 0x3F)); }
        int64_t id = str_map_get(&v->sm, s, strlen(s));
        if (id < 0) return zt_err("%s: model.vocab lacks the one-byte token for byte 0x%02x", path, b);
        tk->byte_id[b] = (uint32_t)id;
    }
    return 0;
}

// model.merges: (left, right) -> rank, merged id, in an open-addressing table.
static int read_merges(zt_tokenizer *tk, const cJSON *merges, const str_map *sm, const char *path) {
    int64_t nmerges = cJSON_GetArraySize(merges);
    uint64_t cap = 1024;
    while (cap < 2 * (uint64_t)nmerges) cap *= 2;
    tk->merges = zt_xmalloc(cap * sizeof *tk->merges);
    for (uint64_t i = 0; i < cap; i++) tk->merges[i].key = MERGE_EMPTY;
    tk->merge_mask = cap - 1;
    char *joined = NULL;
    size_t joined_cap = 0;
    int64_t rank = 0;
    int rc = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, merges) {
        const char *a, *b;
        size_t alen, blen;
        if (cJSON_IsString(it)) {  // "left right"
            const char *sp = strchr(it->valuestring, ' ');
            if (!sp || strchr(sp + 1, ' ')) { rc = zt_err("%s: model.merges[%lld] \"%s\" is not two tokens", path, (long long)rank, it->valuestring); break; }
            a = it->valuestring; alen = (size_t)(sp - a);
            b = sp + 1; blen = strlen(b);
        } else if (cJSON_IsArray(it) && cJSON_GetArraySize(it) == 2 && cJSON_IsString(cJSON_GetArrayItem(it, 0)) &&
                   cJSON_IsString(cJSON_GetArrayItem(it, 1))) {
            a = cJSON_GetArrayItem(it, 0)->valuestring; alen = strlen(a);
            b = cJSON_GetArrayItem(it, 1)->valuestring; blen = strlen(b);
        } else { rc = zt_err("%s: model.merges[%lld] is neither \"a b\" nor [a, b]", path, (long long)rank); break; }
        if (alen + blen + 1 > joined_cap) {
            joined_cap = 2 * (alen + blen + 1);
            joined = realloc(joined, joined_cap);
            if (!joined) zt_fatal("out of host memory");
        }
        memcpy(joined, a, alen);
        memcpy(joined + alen, b, blen);
        int64_t ia = str_map_get(sm, a, alen), ib = str_map_get(sm, b, blen), ij = str_map_get(sm, joined, alen + blen);
        if (ia < 0 || ib < 0 || ij < 0) {
            rc = zt_err("%s: model.merges[%lld] (%.*s %.*s) names a token missing from model.vocab", path, (long long)rank,
                        (int)alen, a, (int)blen, b);
            break;
        }
        uint64_t key = ((uint64_t)ia << 32) | (uint64_t)ib;
        for (uint64_t i = mix64(key) & tk->merge_mask;; i = (i + 1) & tk->merge_mask) {
            if (tk->merges[i].key == MERGE_EMPTY) {
                tk->merges[i] = (merge_slot){key, (uint32_t)rank, (uint32_t)ij};
                break;
            }
            if (tk->merges[i].key == key) {  // a repeated merge takes its last rank, as tokenizers'
                tk->merges[i].rank = (uint32_t)rank;  // HashMap built from the list does
                break;
            }
        }
        rank++;
    }
    free(joined);
    return rc;
}

// added_tokens: matched on the raw text, never normalised; longest first, with the index of
// their first bytes the encoder's scan uses.
static int read_added(zt_tokenizer *tk, const cJSON *added, const char *path) {
    tk->nadded = cJSON_GetArraySize(added);
    tk->added = zt_xcalloc((size_t)tk->nadded + 1, sizeof *tk->added);
    int k = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, added) {
        const char *content = json_str(it, "content");
        uint32_t id = (uint32_t)cJSON_GetObjectItemCaseSensitive(it, "id")->valuedouble;
        if (!content || !content[0]) return zt_err("%s: added_tokens[%d] has no content", path, k);
        if (zt_utf8_valid_prefix(content, strlen(content)) != strlen(content))
            return zt_err("%s: added_tokens[%d] is not UTF-8", path, k);
        const char *flags[] = {"normalized", "lstrip", "rstrip", "single_word"};
        for (int f = 0; f < 4; f++)
            if (!json_off(it, flags[f]))
                return zt_err("%s: added token \"%s\" has %s set; only plain added tokens are supported", path,
                              content, flags[f]);
        tk->added[k].len = strlen(content);
        tk->added[k].text = zt_xmalloc(tk->added[k].len + 1);
        memcpy(tk->added[k].text, content, tk->added[k].len + 1);
        tk->added[k].id = id;
        k++;
    }
    qsort(tk->added, (size_t)tk->nadded, sizeof *tk->added, cmp_added_len_desc);
    tk->added_one_first = -1;
    for (int i = 0; i < tk->nadded; i++) {
        unsigned char f = (unsigned char)tk->added[i].text[0];
        tk->added_first[f] = 1;
        if (memchr(tk->added[i].text, '\n', tk->added[i].len)) tk->added_has_newline = 1;
        tk->added_one_first = (i == 0 || tk->added_one_first == f) ? f : -2;
    }
    if (tk->added_one_first < 0) tk->added_one_first = -1;
    return 0;
}

// The decode table: vocab bytes, overridden by added tokens.
static void build_decode_table(zt_tokenizer *tk, const vocab_scratch *v) {
    for (int i = 0; i < tk->nadded; i++) v->len_of[tk->added[i].id] = tk->added[i].len;
    uint64_t off = 0;
    for (int64_t i = 0; i < tk->vocab_size; i++) {
        tk->dec_off[i] = off;
        off += v->len_of[i];
    }
    tk->dec_off[tk->vocab_size] = off;
    tk->dec_bytes = zt_xmalloc(off + 1);
    for (int64_t i = 0; i < tk->vocab_size; i++)
        if (tk->dec_def[i]) memcpy(tk->dec_bytes + tk->dec_off[i], v->bytes_of[i], v->len_of[i]);
    for (int i = 0; i < tk->nadded; i++) {
        memcpy(tk->dec_bytes + tk->dec_off[tk->added[i].id], tk->added[i].text, tk->added[i].len);
        tk->dec_def[tk->added[i].id] = 1;
    }
}

// ignore_merges: vocab ids by their raw bytes (model.vocab only, as tokenizers' BPE
// looks the word up in its vocab, not among the added tokens).
static void build_whole_table(zt_tokenizer *tk, const vocab_scratch *v) {
    uint64_t cap = 1024;
    while (cap < 2 * (uint64_t)tk->vocab_size) cap *= 2;
    tk->whole_ids = zt_xmalloc(cap * sizeof *tk->whole_ids);
    memset(tk->whole_ids, 0xFF, cap * sizeof *tk->whole_ids);
    tk->whole_mask = cap - 1;
    for (int64_t id = 0; id < tk->vocab_size; id++) {
        uint64_t len = tk->dec_off[id + 1] - tk->dec_off[id];
        if (!v->bytes_of[id] || len < 2) continue;  // in model.vocab; one byte is byte_id already
        uint64_t i = hash_bytes(tk->dec_bytes + tk->dec_off[id], len) & tk->whole_mask;
        while (tk->whole_ids[i] != UINT32_MAX) i = (i + 1) & tk->whole_mask;
        tk->whole_ids[i] = (uint32_t)id;
    }
}

static inline int64_t whole_find(const zt_tokenizer *tk, const unsigned char *w, size_t n) {
    for (uint64_t i = hash_bytes(w, n) & tk->whole_mask;; i = (i + 1) & tk->whole_mask) {
        uint32_t id = tk->whole_ids[i];
        if (id == UINT32_MAX) return -1;
        if (tk->dec_off[id + 1] - tk->dec_off[id] == n && !memcmp(tk->dec_bytes + tk->dec_off[id], w, n)) return id;
    }
}

static int load_tree(zt_tokenizer *tk, const cJSON *root, const char *path, const char **re) {
    if (check_pipeline(tk, root, path, re) || choose_split(tk, *re, path)) return -1;
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
    const cJSON *vocab = cJSON_GetObjectItemCaseSensitive(model, "vocab");
    const cJSON *merges = cJSON_GetObjectItemCaseSensitive(model, "merges");
    const cJSON *added = cJSON_GetObjectItemCaseSensitive(root, "added_tokens");
    if (!cJSON_IsObject(vocab)) return zt_err("%s: model.vocab missing or not an object", path);
    if (!cJSON_IsArray(merges)) return zt_err("%s: model.merges missing or not an array", path);
    if (read_vocab_size(tk, vocab, added, path)) return -1;
    vocab_scratch v = {0};
    int rc = read_vocab(tk, vocab, &v, path);
    if (rc == 0) rc = read_merges(tk, merges, &v.sm, path);
    if (rc == 0) rc = read_added(tk, added, path);
    if (rc == 0) build_decode_table(tk, &v);
    if (rc == 0 && tk->ignore_merges) build_whole_table(tk, &v);
    free(v.tmp);
    free(v.len_of);
    free(v.bytes_of);
    str_map_free(&v.sm);
    return rc;
}

zt_tokenizer *zt_tokenizer_load(const char *path) {
    // NFC must know every code point the reference normaliser knows (Unicode 9.0)
    if (atoi(utf8proc_unicode_version()) < 9) {
        zt_err("%s: utf8proc %s knows Unicode %s; the tokenizer's NFC needs Unicode 9.0 or newer (Debian: "
               "libutf8proc-dev)", path, utf8proc_version(), utf8proc_unicode_version());
        return NULL;
    }
    size_t len;
    char *text = zt_read_file(path, &len);
    if (!text) return NULL;
    zt_tokenizer *tk = zt_xcalloc(1, sizeof *tk);
    const zt_tok_cache_key key = {len, zt_crc32c(0, text, len), hash_bytes((const unsigned char *)text, len)};
    snprintf(tk->hash, sizeof tk->hash, "crc32c:%08x", key.json_crc);
    char *cached_re = NULL;
    if (zt_tok_cache_load(tk, &key, &cached_re) == 0) {  // the tables of this very file, parsed before
        const int rc = choose_split(tk, cached_re, path);
        free(cached_re);
        if (rc == 0) {
            free(text);
            tk->from_cache = 1;
            return tk;
        }
        // a cached regex that does not compile (the file was forged): the JSON decides, as without a cache
        zt_tokenizer_free(tk);
        tk = zt_xcalloc(1, sizeof *tk);
        snprintf(tk->hash, sizeof tk->hash, "crc32c:%08x", key.json_crc);
    }
    cJSON *root = cJSON_ParseWithLength(text, len);
    if (!root) {
        const char *at = cJSON_GetErrorPtr();
        size_t off = (at && at >= text && at <= text + len) ? (size_t)(at - text) : 0;
        size_t line = 1;
        for (size_t i = 0; i < off; i++) line += text[i] == '\n';
        char deep[160];
        if (zt_json_depth_error(text, len, zt_json_error_col(text, len), deep, sizeof deep))
            zt_err("%s: %s (line %zu)", path, deep, line);
        else
            zt_err("%s: not valid JSON (parse error at byte %zu, line %zu)", path, off, line);
        free(text);
        free(tk);
        return NULL;
    }
    const char *re = NULL;
    int rc = load_tree(tk, root, path, &re);
    if (rc == 0) zt_tok_cache_store(tk, &key, re);
    cJSON_Delete(root);
    free(text);
    if (rc) {
        zt_tokenizer_free(tk);
        return NULL;
    }
    return tk;
}

void zt_tokenizer_free(zt_tokenizer *tk) {
    if (!tk) return;
    free(tk->merges);
    free(tk->dec_off);
    free(tk->dec_bytes);
    free(tk->dec_def);
    for (int i = 0; i < tk->nadded && tk->added; i++) free(tk->added[i].text);
    free(tk->added);
    free(tk->whole_ids);
    if (tk->re) pcre2_code_free(tk->re);
    free(tk);
}

int64_t zt_tokenizer_vocab_size(const zt_tokenizer *tk) { return tk->vocab_size; }
int zt_tokenizer_from_cache(const zt_tokenizer *tk) { return tk->from_cache; }
const char *zt_tokenizer_hash(const zt_tokenizer *tk) { return tk->hash; }
const char *zt_tokenizer_split_name(const zt_tokenizer *tk) {
    return tk->split == SPLIT_QWEN3 ? "qwen3" : tk->split == SPLIT_QWEN35 ? "qwen3.5" : tk->re_jit ? "pcre2-jit" : "pcre2";
}

int64_t zt_tokenizer_token_id(const zt_tokenizer *tk, const char *token) {
    size_t n = strlen(token);
    for (int i = 0; i < tk->nadded; i++)
        if (tk->added[i].len == n && !memcmp(tk->added[i].text, token, n)) return tk->added[i].id;
    for (int64_t i = 0; i < tk->vocab_size; i++)
        if (tk->dec_def[i] && tk->dec_off[i + 1] - tk->dec_off[i] == n && !memcmp(tk->dec_bytes + tk->dec_off[i], token, n))
            return i;
    return -1;
}

// ---------------------------------------------------------------------------
// id vectors

void zt_ids_push(zt_ids *v, uint32_t id) {
    if (v->n == v->cap) {
        size_t cap = v->cap ? 2 * v->cap : 256;
        uint32_t *p = realloc(v->ids, cap * sizeof *p);
        if (!p) zt_fatal("out of host memory growing an id vector to %zu ids", cap);
        v->ids = p;
        v->cap = cap;
    }
    v->ids[v->n++] = id;
}

static void ids_append(zt_ids *v, const uint32_t *ids, size_t n) {
    if (v->n + n > v->cap) {
        size_t cap = v->cap ? v->cap : 256;
        while (cap < v->n + n) cap *= 2;
        uint32_t *p = realloc(v->ids, cap * sizeof *p);
        if (!p) zt_fatal("out of host memory growing an id vector to %zu ids", cap);
        v->ids = p;
        v->cap = cap;
    }
    memcpy(v->ids + v->n, ids, n * sizeof *ids);
    v->n += n;
}

void zt_ids_free(zt_ids *v) {
    free(v->ids);
    v->ids = NULL;
    v->n = v->cap = 0;
}

// ---------------------------------------------------------------------------
// the split regex, by hand

// The class of the character at s[i]. marks: Qwen3.5's regex, where \p{M} goes with
// \p{L} in both places it matters ([\p{L}\p{M}]+ and [^\s\p{L}\p{M}\p{N}]+), so a
// mark is simply a letter to its matcher.
static inline __attribute__((always_inline)) unsigned cls_at(const unsigned char *s, size_t i, uint32_t *cp, int *len,
                                                             int marks) {
    if (s[i] < 0x80) {
        *cp = s[i];
        *len = 1;
    } else {
        *len = zt_utf8_decode(s + i, cp);
    }
    unsigned p = zt_uni_props(*cp);
    if (marks && (p & ZT_UC_MARK)) return ZT_UC_LETTER;
    return p & ZT_UC_CLASS;
}

static inline __attribute__((always_inline)) size_t skip_class(const unsigned char *s, size_t n, size_t i, unsigned want,
                                                               int marks) {
    while (i < n) {
        uint32_t cp;
        int l;
        if (cls_at(s, i, &cp, &l, marks) != want) break;
        i += (size_t)l;
    }
    return i;
}

static inline int is_ws(unsigned k) { return k == ZT_UC_SPACE || k == ZT_UC_CRLF; }

// End of the piece that starts at byte i, trying the regex's alternatives in order:
//   (?i:'s|'t|'re|'ve|'m|'ll|'d) | [^\r\n\p{L}\p{N}]?\p{L}+ | \p{N}
//   | ?[^\s\p{L}\p{N}]+[\r\n]* | \s*[\r\n]+ | \s+(?!\S) | \s+
// Every position matches one of them, so the pieces tile the text. With marks set,
// Qwen3.5's regex, the same with \p{L} read as [\p{L}\p{M}]: a mark as the optional
// first character before letters is covered too, since a mark starting a piece
// takes the letter branch either way.
static inline __attribute__((always_inline)) size_t split_next_impl(const unsigned char *s, size_t n, size_t i,
                                                                    int marks) {
    uint32_t c, c1 = 0;
    int l, l1 = 0;
    unsigned k = cls_at(s, i, &c, &l, marks), k1 = 0;
    size_t j = i + (size_t)l;
    if (j < n) k1 = cls_at(s, j, &c1, &l1, marks);

    if (c == '\'' && j < n) {  // contractions; under (?i) 's' also matches U+017F (long s)
        uint32_t lc = c1 < 0x80 ? (c1 | 0x20) : c1;
        if (lc == 's' || lc == 't' || lc == 'm' || lc == 'd' || c1 == 0x17F) return j + (size_t)l1;
        if ((lc == 'r' || lc == 'v' || lc == 'l') && j + 1 < n) {
            unsigned char c2 = s[j + 1] | 0x20;
            if ((lc == 'l' && c2 == 'l') || (lc != 'l' && c2 == 'e')) return j + 2;
        }
    }
    if (k == ZT_UC_LETTER) return skip_class(s, n, j, ZT_UC_LETTER, marks);
    if (k != ZT_UC_CRLF && k != ZT_UC_NUMBER && k1 == ZT_UC_LETTER) return skip_class(s, n, j, ZT_UC_LETTER, marks);
    if (k == ZT_UC_NUMBER) return j;
    if (k == ZT_UC_OTHER || (c == ' ' && k1 == ZT_UC_OTHER)) {
        size_t e = skip_class(s, n, k == ZT_UC_OTHER ? j : j + (size_t)l1, ZT_UC_OTHER, marks);
        while (e < n && (s[e] == '\r' || s[e] == '\n')) e++;
        return e;
    }
    // whitespace: the run [i, e), the last CR/LF in it, and its last character
    size_t e = i, last_crlf = SIZE_MAX, last_start = i;
    while (e < n) {
        uint32_t cp;
        int ll;
        unsigned kk = cls_at(s, e, &cp, &ll, marks);
        if (!is_ws(kk)) break;
        if (kk == ZT_UC_CRLF) last_crlf = e;
        last_start = e;
        e += (size_t)ll;
    }
    if (last_crlf != SIZE_MAX) return last_crlf + 1;  // \s*[\r\n]+
    if (e == n) return e;                            // \s+(?!\S) at the end
    if (last_start > i) return last_start;           // \s+(?!\S): leave one for the next word
    return e;                                        // \s+
}

static size_t split_next(const unsigned char *s, size_t n, size_t i) { return split_next_impl(s, n, i, 0); }
static size_t split_next_marks(const unsigned char *s, size_t n, size_t i) { return split_next_impl(s, n, i, 1); }

static size_t pretokenize(const char *text, size_t len, size_t **ends, size_t *cap, int marks) {
    size_t np = 0;
    for (size_t i = 0; i < len;) {
        const unsigned char *u = (const unsigned char *)text;
        size_t e = marks ? split_next_marks(u, len, i) : split_next(u, len, i);
        if (np == *cap) {
            *cap = *cap ? 2 * *cap : 256;
            *ends = realloc(*ends, *cap * sizeof **ends);
            if (!*ends) zt_fatal("out of host memory");
        }
        (*ends)[np++] = e;
        i = e;
    }
    return np;
}

size_t zt_pretokenize(const char *text, size_t len, size_t **ends, size_t *cap) {
    return pretokenize(text, len, ends, cap, 0);
}
size_t zt_pretokenize_qwen35(const char *text, size_t len, size_t **ends, size_t *cap) {
    return pretokenize(text, len, ends, cap, 1);
}

// ---------------------------------------------------------------------------
// the encoder: BPE, cache, the whole text

typedef struct {
    uint64_t hash;
    uint32_t koff, klen, voff, vlen;  // klen == 0: free slot
} cache_slot;

typedef struct {
    uint32_t id;
    int32_t prev, next;
} bpe_sym;

struct zt_encoder {
    const zt_tokenizer *tk;
    zt_buf nfc;
    pcre2_match_data *md;  // SPLIT_PCRE2
    // BPE scratch
    uint32_t *ids, *ranks;
    bpe_sym *syms;
    uint64_t *heap;
    size_t cap;
    zt_ids word;
    // cache of word bytes -> ids; emptied whenever it fills up
    cache_slot *slots;
    unsigned char *keys;
    uint32_t *vals;
    uint32_t nslots_used, keys_used, vals_used;
};

zt_encoder *zt_encoder_new(const zt_tokenizer *tk) {
    zt_encoder *e = zt_xcalloc(1, sizeof *e);
    e->tk = tk;
    e->slots = zt_xcalloc(CACHE_SLOTS, sizeof *e->slots);
    e->keys = zt_xmalloc(CACHE_KEY_BYTES);
    e->vals = zt_xmalloc(CACHE_IDS * sizeof *e->vals);
    if (tk->re) {
        e->md = pcre2_match_data_create_from_pattern(tk->re, NULL);
        if (!e->md) zt_fatal("out of host memory (PCRE2 match data)");
    }
    return e;
}

void zt_encoder_free(zt_encoder *e) {
    if (!e) return;
    free(e->nfc.p);
    if (e->md) pcre2_match_data_free(e->md);
    free(e->ids);
    free(e->ranks);
    free(e->syms);
    free(e->heap);
    zt_ids_free(&e->word);
    free(e->slots);
    free(e->keys);
    free(e->vals);
    free(e);
}

static void bpe_reserve(zt_encoder *e, size_t n) {
    if (n <= e->cap) return;
    size_t cap = e->cap ? e->cap : 64;
    while (cap < n) cap *= 2;
    free(e->ids);
    free(e->ranks);
    free(e->syms);
    free(e->heap);
    e->ids = zt_xmalloc(cap * sizeof *e->ids);
    e->ranks = zt_xmalloc(cap * sizeof *e->ranks);
    e->syms = zt_xmalloc(cap * sizeof *e->syms);
    e->heap = zt_xmalloc(2 * cap * sizeof *e->heap);  // n - 1 pairs, plus at most one more per merge
    e->cap = cap;
}

static inline uint32_t pair_rank(const zt_tokenizer *tk, uint32_t a, uint32_t b) {
    const merge_slot *m = merge_find(tk, a, b);
    return m ? m->rank : NO_RANK;
}

// Short words: keep the rank of every adjacent pair and merge the lowest (the
// leftmost among equals), O(n^2) on at most SMALL_WORD symbols.
static void bpe_small(zt_encoder *e, const unsigned char *w, size_t n, zt_ids *out) {
    const zt_tokenizer *tk = e->tk;
    uint32_t *ids = e->ids, *ranks = e->ranks;
    for (size_t i = 0; i < n; i++) ids[i] = tk->byte_id[w[i]];
    for (size_t i = 0; i + 1 < n; i++) ranks[i] = pair_rank(tk, ids[i], ids[i + 1]);
    size_t cnt = n;
    for (;;) {
        uint32_t best = NO_RANK;
        size_t bi = 0;
        for (size_t i = 0; i + 1 < cnt; i++)
            if (ranks[i] < best) {
                best = ranks[i];
                bi = i;
            }
        if (best == NO_RANK) break;
        ids[bi] = merge_find(tk, ids[bi], ids[bi + 1])->id;
        memmove(ids + bi + 1, ids + bi + 2, (cnt - bi - 2) * sizeof *ids);
        if (bi + 3 <= cnt) memmove(ranks + bi + 1, ranks + bi + 2, (cnt - bi - 3) * sizeof *ranks);
        cnt--;
        if (bi > 0) ranks[bi - 1] = pair_rank(tk, ids[bi - 1], ids[bi]);
        if (bi + 1 < cnt) ranks[bi] = pair_rank(tk, ids[bi], ids[bi + 1]);
    }
    ids_append(out, ids, cnt);
}

// Min-heap of (rank << 32 | position of the left symbol): lowest rank first, then
// leftmost, the order in which tokenizers' Word::merge_all applies merges.
static void heap_push(uint64_t *h, size_t *n, uint64_t v) {
    size_t i = (*n)++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (h[p] <= v) break;
        h[i] = h[p];
        i = p;
    }
    h[i] = v;
}

static uint64_t heap_pop(uint64_t *h, size_t *n) {
    uint64_t top = h[0], v = h[--(*n)];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= *n) break;
        if (c + 1 < *n && h[c + 1] < h[c]) c++;
        if (v <= h[c]) break;
        h[i] = h[c];
        i = c;
    }
    h[i] = v;
    return top;
}

// Long words: linked list of symbols and a heap of candidate merges, O(n log n).
// A popped merge is applied only if its pair is still adjacent and unchanged.
static void bpe_heap(zt_encoder *e, const unsigned char *w, size_t n, zt_ids *out) {
    const zt_tokenizer *tk = e->tk;
    bpe_sym *sy = e->syms;
    uint64_t *heap = e->heap;
    size_t nh = 0;
    for (size_t i = 0; i < n; i++) sy[i] = (bpe_sym){tk->byte_id[w[i]], (int32_t)i - 1, i + 1 < n ? (int32_t)(i + 1) : -1};
    for (size_t i = 0; i + 1 < n; i++) {
        uint32_t r = pair_rank(tk, sy[i].id, sy[i + 1].id);
        if (r != NO_RANK) heap_push(heap, &nh, ((uint64_t)r << 32) | i);
    }
    while (nh) {
        uint64_t top = heap_pop(heap, &nh);
        uint32_t r = (uint32_t)(top >> 32), pos = (uint32_t)top;
        if (sy[pos].id == UINT32_MAX || sy[pos].next < 0) continue;
        int32_t nx = sy[pos].next;
        const merge_slot *m = merge_find(tk, sy[pos].id, sy[nx].id);
        if (!m || m->rank != r) continue;  // stale: one side has changed since
        sy[pos].id = m->id;
        sy[pos].next = sy[nx].next;
        if (sy[nx].next >= 0) sy[sy[nx].next].prev = (int32_t)pos;
        sy[nx].id = UINT32_MAX;
        if (sy[pos].prev >= 0) {
            uint32_t pr = pair_rank(tk, sy[sy[pos].prev].id, sy[pos].id);
            if (pr != NO_RANK) heap_push(heap, &nh, ((uint64_t)pr << 32) | (uint32_t)sy[pos].prev);
        }
        if (sy[pos].next >= 0) {
            uint32_t nr = pair_rank(tk, sy[pos].id, sy[sy[pos].next].id);
            if (nr != NO_RANK) heap_push(heap, &nh, ((uint64_t)nr << 32) | pos);
        }
    }
    for (int32_t i = 0; i >= 0; i = sy[i].next) zt_ids_push(out, sy[i].id);
}

void zt_bpe_word(zt_encoder *e, const unsigned char *w, size_t n, zt_ids *out) {
    if (n == 0) return;
    if (n == 1) {
        zt_ids_push(out, e->tk->byte_id[w[0]]);
        return;
    }
    if (e->tk->ignore_merges) {
        int64_t id = whole_find(e->tk, w, n);
        if (id >= 0) {
            zt_ids_push(out, (uint32_t)id);
            return;
        }
    }
    bpe_reserve(e, n);
    if (n <= SMALL_WORD) bpe_small(e, w, n, out);
    else bpe_heap(e, w, n, out);
}

static void cache_clear(zt_encoder *e) {
    memset(e->slots, 0, CACHE_SLOTS * sizeof *e->slots);
    e->nslots_used = e->keys_used = e->vals_used = 0;
}

static void encode_word(zt_encoder *e, const unsigned char *w, size_t n, zt_ids *out) {
    if (n == 1) {
        zt_ids_push(out, e->tk->byte_id[w[0]]);
        return;
    }
    if (n > CACHE_MAX_WORD) {
        zt_bpe_word(e, w, n, out);
        return;
    }
    uint64_t h = hash_bytes(w, n);
    uint32_t i = (uint32_t)h & (CACHE_SLOTS - 1);
    for (;; i = (i + 1) & (CACHE_SLOTS - 1)) {
        cache_slot *s = &e->slots[i];
        if (!s->klen) break;
        if (s->hash == h && s->klen == n && !memcmp(e->keys + s->koff, w, n)) {
            ids_append(out, e->vals + s->voff, s->vlen);
            return;
        }
    }
    size_t before = out->n;
    zt_bpe_word(e, w, n, out);
    size_t nv = out->n - before;
    if (e->nslots_used + 1 > CACHE_SLOTS / 2 || e->keys_used + n > CACHE_KEY_BYTES || e->vals_used + nv > CACHE_IDS) {
        cache_clear(e);
        i = (uint32_t)h & (CACHE_SLOTS - 1);
    }
    cache_slot *s = &e->slots[i];
    *s = (cache_slot){h, e->keys_used, (uint32_t)n, e->vals_used, (uint32_t)nv};
    memcpy(e->keys + e->keys_used, w, n);
    memcpy(e->vals + e->vals_used, out->ids + before, nv * sizeof *out->ids);
    e->keys_used += (uint32_t)n;
    e->vals_used += (uint32_t)nv;
    e->nslots_used++;
}

// Split by PCRE2 the way tokenizers' Split(Isolated) does with Oniguruma's find_iter:
// each match is a word and so is each stretch between matches; an empty match right
// where the last one ended is skipped (the search moves on one character), other
// empty matches make empty words, which give no ids.
static int encode_pcre2(zt_encoder *e, const unsigned char *u, size_t n, zt_ids *out) {
    const zt_tokenizer *tk = e->tk;
    size_t prev = 0, from = 0, last_end = SIZE_MAX;
    while (from <= n) {
        int rc = tk->re_jit ? pcre2_jit_match(tk->re, u, n, from, PCRE2_NO_UTF_CHECK, e->md, NULL)
                            : pcre2_match(tk->re, u, n, from, PCRE2_NO_UTF_CHECK, e->md, NULL);
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0) {
            PCRE2_UCHAR msg[160];
            pcre2_get_error_message(rc, msg, sizeof msg);
            return zt_err("the tokenizer's split regex failed at byte %zu (PCRE2: %s)", from, (const char *)msg);
        }
        const PCRE2_SIZE *ov = pcre2_get_ovector_pointer(e->md);
        size_t ms = ov[0], me = ov[1];
        if (ms == me && me == last_end) {
            if (from >= n) break;
            uint32_t cp;
            from += (size_t)zt_utf8_decode(u + from, &cp);
            continue;
        }
        if (ms > prev) encode_word(e, u + prev, ms - prev, out);
        if (me > ms) encode_word(e, u + ms, me - ms, out);
        prev = me;
        from = me;
        last_end = me;
    }
    if (prev < n) encode_word(e, u + prev, n - prev, out);
    return 0;
}

static int encode_plain(zt_encoder *e, const char *s, size_t n, zt_ids *out) {
    if (n == 0) return 0;
    const zt_tokenizer *tk = e->tk;
    if (tk->normalize_nfc) {
        int r = zt_nfc(s, n, &e->nfc);
        if (r < 0) return -1;
        if (r == 1) {
            s = e->nfc.p;
            n = e->nfc.n;
        }
    }
    const unsigned char *u = (const unsigned char *)s;
    if (tk->split == SPLIT_PCRE2) return encode_pcre2(e, u, n, out);
    if (tk->split == SPLIT_QWEN35) {
        for (size_t i = 0; i < n;) {
            size_t end = split_next_marks(u, n, i);
            encode_word(e, u + i, end - i, out);
            i = end;
        }
        return 0;
    }
    for (size_t i = 0; i < n;) {
        size_t end = split_next(u, n, i);
        encode_word(e, u + i, end - i, out);
        i = end;
    }
    return 0;
}

int zt_tokenizer_added_count(const zt_tokenizer *tk) { return tk->nadded; }

const char *zt_tokenizer_added(const zt_tokenizer *tk, int k, size_t *len, uint32_t *id) {
    if (k < 0 || k >= tk->nadded) return NULL;
    if (len) *len = tk->added[k].len;
    if (id) *id = (uint32_t)tk->added[k].id;
    return tk->added[k].text;
}

// The added token that starts at s[i] (longest first), or NULL.
static const added_token *added_at(const zt_tokenizer *tk, const char *s, size_t n, size_t i) {
    for (int k = 0; k < tk->nadded; k++) {
        const added_token *a = &tk->added[k];
        if (a->len <= n - i && a->text[0] == s[i] && !memcmp(a->text, s + i, a->len)) return a;
    }
    return NULL;
}

int zt_encode(zt_encoder *e, const char *text, size_t len, zt_ids *out) {
    const zt_tokenizer *tk = e->tk;
    size_t valid = zt_utf8_valid_prefix(text, len);
    if (valid != len) {
        unsigned char b = (unsigned char)text[valid];
        return zt_err("invalid UTF-8 at byte %zu (byte 0x%02x%s)", valid, b,
                      b >= 0x80 && b < 0xC0 ? ": a continuation byte where a character should start"
                      : valid + 4 > len   ? ": truncated sequence or invalid lead byte"
                                          : ": invalid, overlong, surrogate or out-of-range sequence");
    }
    size_t seg = 0, i = 0;
    size_t start_n = out->n;
    while (i < len && tk->nadded) {
        const char *p;
        if (tk->added_one_first >= 0) {
            p = memchr(text + i, tk->added_one_first, len - i);
            if (!p) break;
        } else {
            p = text + i;
            while (p < text + len && !tk->added_first[(unsigned char)*p]) p++;
            if (p == text + len) break;
        }
        i = (size_t)(p - text);
        const added_token *a = added_at(tk, text, len, i);
        if (!a) {
            i++;
            continue;
        }
        if (encode_plain(e, text + seg, i - seg, out)) goto fail;
        zt_ids_push(out, a->id);
        i += a->len;
        seg = i;
    }
    if (encode_plain(e, text + seg, len - seg, out)) goto fail;
    return 0;
fail:
    out->n = start_n;
    return -1;
}

int zt_decode(const zt_tokenizer *tk, const uint32_t *ids, size_t n, zt_buf *out) {
    for (size_t i = 0; i < n; i++) {
        uint32_t id = ids[i];
        if ((int64_t)id >= tk->vocab_size || !tk->dec_def[id])
            return zt_err("decode: id %u at position %zu is not in the vocabulary (size %lld)", id, i,
                          (long long)tk->vocab_size);
        zt_buf_append(out, tk->dec_bytes + tk->dec_off[id], tk->dec_off[id + 1] - tk->dec_off[id]);
    }
    return 0;
}

size_t zt_tokenizer_safe_cut(const zt_tokenizer *tk, const char *text, size_t len, size_t from) {
    // an arbitrary regex may look across a newline: no cut is known to be safe
    if (tk->added_has_newline || tk->split == SPLIT_PCRE2) return len;
    if (from == 0) from = 1;
    while (from < len) {
        const char *nl = memchr(text + from - 1, '\n', len - from);  // a '\n' at from-1 .. len-2
        if (!nl) return len;
        size_t p = (size_t)(nl - text) + 1;
        uint32_t cp;
        if (zt_utf8_valid_prefix(text + p, len - p < 4 ? len - p : 4) > 0) {  // text is not validated yet
            zt_utf8_decode((const unsigned char *)text + p, &cp);
            unsigned props = zt_uni_props(cp);
            if ((props & ZT_UC_CLASS) == ZT_UC_LETTER && (props & ZT_UC_NFC_BOUNDARY)) return p;
        }
        from = p + 1;
    }
    return len;
}

// ---------------------------------------------------------------------------
// the worker pool

struct zt_tok_pool {
    const zt_tokenizer *tk;
    int n;
    zt_encoder **enc;
};

zt_tok_pool *zt_tok_pool_new(const zt_tokenizer *tk, int nthreads) {
    if (nthreads <= 0) nthreads = omp_get_num_procs();
    if (nthreads < 1) nthreads = 1;
    zt_tok_pool *p = zt_xcalloc(1, sizeof *p);
    p->tk = tk;
    p->n = nthreads;
    p->enc = zt_xcalloc((size_t)nthreads, sizeof *p->enc);
    for (int i = 0; i < nthreads; i++) p->enc[i] = zt_encoder_new(tk);
    return p;
}

int zt_tok_pool_threads(const zt_tok_pool *p) { return p->n; }

void zt_tok_pool_free(zt_tok_pool *p) {
    if (!p) return;
    for (int i = 0; i < p->n; i++) zt_encoder_free(p->enc[i]);
    free(p->enc);
    free(p);
}

int64_t zt_tok_pool_encode(zt_tok_pool *p, const char *const *docs, const size_t *lens, size_t ndocs, zt_ids *outs,
                           int64_t *err_off) {
    int64_t bad = 0;
#pragma omp parallel for num_threads(p->n) schedule(dynamic, 4) reduction(+ : bad)
    for (size_t i = 0; i < ndocs; i++) {
        zt_encoder *e = p->enc[omp_get_thread_num()];
        outs[i].n = 0;
        if (zt_encode(e, docs[i], lens[i], &outs[i])) {
            err_off[i] = (int64_t)zt_utf8_valid_prefix(docs[i], lens[i]);
            bad++;
        } else {
            err_off[i] = -1;
        }
    }
    return bad;
}
