// The tokenizer's state, shared by data/tokenizer.c (loading tokenizer.json, encoding) and
// data/tokenizer_cache.c (the binary cache of what loading derives from the file).
// defines: zt_tokenizer (struct), merge_slot, added_token, zt_tok_cache_load, zt_tok_cache_store
#ifndef ZT_TOKENIZER_INTERNAL_H
#define ZT_TOKENIZER_INTERNAL_H
#include <stddef.h>
#include <stdint.h>
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "data/tokenizer.h"

// How the text is split into words: which hand-written matcher, or PCRE2.
enum { SPLIT_QWEN3 = 0, SPLIT_QWEN35 = 1, SPLIT_PCRE2 = 2 };

#define NO_RANK UINT32_MAX
#define MERGE_EMPTY UINT64_MAX

typedef struct {
    uint64_t key;  // (left << 32) | right; MERGE_EMPTY when free
    uint32_t rank, id;
} merge_slot;

typedef struct {
    char *text;  // raw bytes
    size_t len;
    uint32_t id;
} added_token;

struct zt_tokenizer {
    int64_t vocab_size;      // largest id + 1
    uint32_t byte_id[256];   // id of the one-byte token of each byte value
    merge_slot *merges;
    uint64_t merge_mask;
    // decode: bytes of id i are dec_bytes[dec_off[i] .. dec_off[i+1]); dec_def[i] = defined
    uint64_t *dec_off;
    unsigned char *dec_bytes;
    unsigned char *dec_def;
    added_token *added;      // longest first
    int nadded;
    unsigned char added_first[256];  // byte starts some added token
    int added_one_first;     // -1, or the only first byte of all added tokens
    int added_has_newline;   // some added token contains '\n': no safe cuts
    int split;               // SPLIT_*
    pcre2_code *re;          // SPLIT_PCRE2: the compiled regex (JIT when available)
    int re_jit;
    int normalize_nfc;       // normalizer NFC (else none)
    // model.ignore_merges: a word that is itself a vocab entry is that one id
    int ignore_merges;
    uint32_t *whole_ids;     // open-addressing table of vocab ids by their bytes (UINT32_MAX: free)
    uint64_t whole_mask;
    char hash[32];
    int from_cache;          // the tables came from the binary cache, not the JSON
};

// The binary cache (data/tokenizer_cache.c). The key is the tokenizer.json's bytes: its
// length, CRC-32C and a 64-bit hash. zt_tok_cache_load fills tk's tables from the cache file
// of that key and returns 0, or returns -1 (nothing kept) when there is none, or it is stale,
// corrupt or inconsistent; *re_text (malloc'd) is then the file's split regex, which the
// caller turns into tk->split / tk->re. zt_tok_cache_store writes the file atomically,
// silently doing nothing when the directory cannot be written. Both return at once when
// the cache is off (ZT_TOKENIZER_CACHE=off).
typedef struct {
    uint64_t json_len;
    uint32_t json_crc;
    uint64_t json_hash;
} zt_tok_cache_key;
int zt_tok_cache_load(zt_tokenizer *tk, const zt_tok_cache_key *key, char **re_text);
void zt_tok_cache_store(const zt_tokenizer *tk, const zt_tok_cache_key *key, const char *re_text);
// Where the cache of key lives ("" when off or no directory); for messages and tests.
void zt_tok_cache_path(const zt_tok_cache_key *key, char *out, size_t n);

#endif
