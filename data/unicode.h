// Unicode pieces the tokenizer needs: strict UTF-8 validation and decoding, the
// character classes of the Qwen split regexes (Qwen2/3 and Qwen3.5), and NFC that agrees code point for
// code point with Hugging Face `tokenizers` (whose normaliser predates Unicode 16).
// defines: zt_buf, zt_uni_props, zt_utf8_valid_prefix, zt_utf8_decode, zt_nfc
#ifndef ZT_UNICODE_H
#define ZT_UNICODE_H
#include <stddef.h>
#include <stdint.h>

// A growable byte buffer (owned by the caller; free(buf.p) when done).
typedef struct {
    char *p;
    size_t n, cap;
} zt_buf;
void zt_buf_reserve(zt_buf *b, size_t extra);
void zt_buf_append(zt_buf *b, const void *data, size_t n);

// Split classes (bits 0-2 of the properties), see data/unicode_gen.py.
enum { ZT_UC_OTHER = 0, ZT_UC_LETTER = 1, ZT_UC_NUMBER = 2, ZT_UC_SPACE = 3, ZT_UC_CRLF = 4 };
#define ZT_UC_CLASS 7u
#define ZT_UC_NFC_BOUNDARY 8u  // ccc 0 and NFC_QC Yes: NFC never looks across it
#define ZT_UC_NFC_VERBATIM 16u // unknown to the reference normaliser: passes through untouched
#define ZT_UC_MARK 32u         // \p{M}: a combining mark (class ZT_UC_OTHER)

extern const uint16_t zt_uni_stage1[0x110000 >> 8];
extern const uint8_t zt_uni_stage2[];

static inline unsigned zt_uni_props(uint32_t cp) {
    return zt_uni_stage2[((size_t)zt_uni_stage1[cp >> 8] << 8) | (cp & 0xFFu)];
}

// Length of the longest valid UTF-8 prefix of s (n when all of it is valid).
// Strict (RFC 3629): no overlong forms, no surrogates, nothing above U+10FFFF.
size_t zt_utf8_valid_prefix(const char *s, size_t n);

// Decode the code point at s, which must be valid UTF-8; returns its length.
static inline int zt_utf8_decode(const unsigned char *s, uint32_t *cp) {
    unsigned c = s[0];
    if (c < 0x80) { *cp = c; return 1; }
    if (c < 0xE0) { *cp = ((c & 0x1Fu) << 6) | (s[1] & 0x3Fu); return 2; }
    if (c < 0xF0) { *cp = ((c & 0x0Fu) << 12) | ((s[1] & 0x3Fu) << 6) | (s[2] & 0x3Fu); return 3; }
    *cp = ((c & 0x07u) << 18) | ((s[1] & 0x3Fu) << 12) | ((s[2] & 0x3Fu) << 6) | (s[3] & 0x3Fu);
    return 4;
}

// NFC of valid UTF-8 text. Returns 0 when the text is already NFC (out untouched),
// 1 when the normalised text was written to out (replacing its contents), -1 with
// zt_err if the normaliser failed.
int zt_nfc(const char *s, size_t n, zt_buf *out);

#endif
