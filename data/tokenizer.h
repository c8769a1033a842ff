// Qwen-style tokenizers: byte-level BPE loaded from a Hugging Face tokenizer.json,
// giving the same ids as `tokenizers` (added tokens on the raw text, NFC, the file's
// split regex -- hand-matched for Qwen2/3 and Qwen3.5, PCRE2 for any other -- GPT-2
// byte-to-unicode map, merges by rank, ignore_merges). Encoding runs on one
// worker per core through a pool; each worker keeps its own cache of words.
// defines: zt_tokenizer, zt_tokenizer_load, zt_tokenizer_from_cache, zt_encoder, zt_encode, zt_decode, zt_tok_pool
#ifndef ZT_TOKENIZER_H
#define ZT_TOKENIZER_H
#include <stddef.h>
#include <stdint.h>

#include "data/unicode.h"

typedef struct zt_tokenizer zt_tokenizer;

// Load tokenizer.json. NULL + zt_err when the file is missing, not JSON, or uses a
// feature this implementation does not have (the message names the file and the
// field): the model must be BPE without dropout or byte fallback, the normalizer
// NFC (or none), the pre-tokenizer a Split by a regex (Isolated) followed by
// ByteLevel without its own regex, the decoder ByteLevel (or none), added tokens
// unnormalized without lstrip/rstrip/single_word.
// What loading derives from the file is cached (data/tokenizer_cache.c): a later load of the
// same bytes reads the tables from $XDG_CACHE_HOME/zerotrain/tokenizer (or ZT_TOKENIZER_CACHE)
// instead of parsing the JSON; a stale, corrupt or inconsistent cache file is ignored and
// rewritten, a directory that cannot be written means no cache.
zt_tokenizer *zt_tokenizer_load(const char *path);
void zt_tokenizer_free(zt_tokenizer *tk);
// 1 when the last load read the binary cache (for tests and messages).
int zt_tokenizer_from_cache(const zt_tokenizer *tk);

int64_t zt_tokenizer_vocab_size(const zt_tokenizer *tk);  // largest id + 1 (151669 for Qwen3)
int64_t zt_tokenizer_token_id(const zt_tokenizer *tk, const char *token);  // -1 if absent
// The added (special) tokens, longest first, as zt_encode matches them on the raw text:
// k in [0, zt_tokenizer_added_count); returns the text (len bytes) and sets *id.
int zt_tokenizer_added_count(const zt_tokenizer *tk);
const char *zt_tokenizer_added(const zt_tokenizer *tk, int k, size_t *len, uint32_t *id);
// "crc32c:xxxxxxxx": CRC-32C of the tokenizer.json bytes, recorded in datasets.
const char *zt_tokenizer_hash(const zt_tokenizer *tk);
// How words are split: "qwen3" or "qwen3.5" (hand-written matchers), "pcre2-jit" or
// "pcre2" (the file's regex run by PCRE2, JIT-compiled or interpreted).
const char *zt_tokenizer_split_name(const zt_tokenizer *tk);

typedef struct {
    uint32_t *ids;
    size_t n, cap;
} zt_ids;
void zt_ids_push(zt_ids *v, uint32_t id);
void zt_ids_free(zt_ids *v);

// Per-thread encoding state: scratch buffers and a cache of word -> ids.
typedef struct zt_encoder zt_encoder;
zt_encoder *zt_encoder_new(const zt_tokenizer *tk);
void zt_encoder_free(zt_encoder *enc);

// Encode UTF-8 text, appending ids to out. Returns 0, or -1 with zt_err naming the
// byte offset when the text is not valid UTF-8 (out is then left as it was).
int zt_encode(zt_encoder *enc, const char *text, size_t len, zt_ids *out);

// Decode ids to the bytes they stand for, appended to out (added tokens included).
// -1 + zt_err for an id outside the vocabulary.
int zt_decode(const zt_tokenizer *tk, const uint32_t *ids, size_t n, zt_buf *out);

// Byte-pair merges of one pre-tokenized word given as bytes: the building block of
// zt_encode, exposed for tests. Appends the ids to out.
void zt_bpe_word(zt_encoder *enc, const unsigned char *word, size_t len, zt_ids *out);
// Split text (valid UTF-8, already NFC) the way the Qwen2/3 regex does: writes the end
// offset of each piece to ends (grown as needed), returns the number of pieces.
size_t zt_pretokenize(const char *text, size_t len, size_t **ends, size_t *cap);
// The same with Qwen3.5's regex (combining marks, \p{M}, go with letters).
size_t zt_pretokenize_qwen35(const char *text, size_t len, size_t **ends, size_t *cap);

// First position >= from (and > 0) where text may be cut into two pieces that
// encode, one after the other, to the ids of the whole: just after a '\n' that is
// followed by a letter that is an NFC boundary (the split regex always ends a piece
// there, NFC never looks across it, and no added token spans it). len when there is
// none, or when an added token contains '\n'. Lets one long document be encoded by
// many workers.
size_t zt_tokenizer_safe_cut(const zt_tokenizer *tk, const char *text, size_t len, size_t from);

// A pool of workers (OpenMP threads), each with its own encoder.
typedef struct zt_tok_pool zt_tok_pool;
zt_tok_pool *zt_tok_pool_new(const zt_tokenizer *tk, int nthreads);  // nthreads <= 0: one per core
int zt_tok_pool_threads(const zt_tok_pool *pool);
void zt_tok_pool_free(zt_tok_pool *pool);
// Encode docs[i] (lens[i] bytes) into outs[i] (cleared first), in parallel, output
// in input order. err_off[i] = -1, or the byte offset of invalid UTF-8 in docs[i].
// Returns the number of documents that failed.
int64_t zt_tok_pool_encode(zt_tok_pool *pool, const char *const *docs, const size_t *lens, size_t ndocs,
                           zt_ids *outs, int64_t *err_off);

#endif
