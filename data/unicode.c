// UTF-8 validation and NFC for the tokenizer. NFC itself is utf8proc's; this file
// decides which stretches of text need it: most text is already NFC (quick check:
// every code point an NFC boundary), and only the stretch from the last boundary
// before a non-boundary to the next boundary is handed to utf8proc. Code points the
// reference normaliser does not know are never handed over, so that a newer
// utf8proc cannot compose or reorder what the reference leaves alone.
#include "data/unicode.h"

#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "base/common.h"

void zt_buf_reserve(zt_buf *b, size_t extra) {
    if (b->n + extra <= b->cap) return;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->n + extra) cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p) zt_fatal("out of host memory growing a buffer to %zu bytes", cap);
    b->p = p;
    b->cap = cap;
}

void zt_buf_append(zt_buf *b, const void *data, size_t n) {
    if (n == 0) return;  // memcpy with a NULL pointer is undefined even for 0 bytes (zt_nfc of "")
    zt_buf_reserve(b, n);
    memcpy(b->p + b->n, data, n);
    b->n += n;
}

size_t zt_utf8_valid_prefix(const char *str, size_t n) {
    const unsigned char *s = (const unsigned char *)str;
    size_t i = 0;
    while (i < n) {
        // ASCII runs eight bytes at a time
        while (i + 8 <= n) {
            uint64_t w;
            memcpy(&w, s + i, 8);
            if (w & 0x8080808080808080ULL) break;
            i += 8;
        }
        if (i >= n) break;
        unsigned c = s[i];
        if (c < 0x80) { i++; continue; }
        size_t len;
        uint32_t lo = 0x80, hi = 0xBF;  // allowed range of the second byte
        if (c >= 0xC2 && c <= 0xDF) len = 2;
        else if (c >= 0xE0 && c <= 0xEF) {
            len = 3;
            if (c == 0xE0) lo = 0xA0;        // overlong
            else if (c == 0xED) hi = 0x9F;   // surrogates
        } else if (c >= 0xF0 && c <= 0xF4) {
            len = 4;
            if (c == 0xF0) lo = 0x90;        // overlong
            else if (c == 0xF4) hi = 0x8F;   // above U+10FFFF
        } else return i;
        if (i + len > n) return i;
        if (s[i + 1] < lo || s[i + 1] > hi) return i;
        for (size_t k = 2; k < len; k++)
            if ((s[i + k] & 0xC0) != 0x80) return i;
        i += len;
    }
    return n;
}

static int nfc_region(const char *s, size_t n, zt_buf *out) {
    utf8proc_uint8_t *dst = NULL;
    utf8proc_ssize_t r = utf8proc_map((const utf8proc_uint8_t *)s, (utf8proc_ssize_t)n, &dst,
                                      UTF8PROC_STABLE | UTF8PROC_COMPOSE);
    if (r < 0) return zt_err("NFC: utf8proc failed: %s", utf8proc_errmsg(r));
    zt_buf_append(out, dst, (size_t)r);
    free(dst);
    return 0;
}

int zt_nfc(const char *str, size_t n, zt_buf *out) {
    const unsigned char *s = (const unsigned char *)str;
    size_t i = 0, copied = 0, last_b = 0;  // last_b: where a region needing NFC would start
    int changed = 0;
    while (i < n) {
        uint32_t cp;
        if (s[i] < 0x80) {  // ASCII: always a boundary
            last_b = i++;
            continue;
        }
        int len = zt_utf8_decode(s + i, &cp);
        unsigned p = zt_uni_props(cp);
        if (p & ZT_UC_NFC_BOUNDARY) {
            last_b = (p & ZT_UC_NFC_VERBATIM) ? i + (size_t)len : i;
            i += (size_t)len;
            continue;
        }
        // a code point NFC may change or combine: normalise [last_b, next boundary)
        size_t j = i + (size_t)len;
        while (j < n) {
            if (s[j] < 0x80) break;
            int l = zt_utf8_decode(s + j, &cp);
            if (zt_uni_props(cp) & ZT_UC_NFC_BOUNDARY) break;
            j += (size_t)l;
        }
        if (!changed) {
            out->n = 0;
            changed = 1;
        }
        zt_buf_append(out, s + copied, last_b - copied);
        if (nfc_region(str + last_b, j - last_b, out)) return -1;
        copied = last_b = i = j;
    }
    if (!changed) return 0;
    zt_buf_append(out, s + copied, n - copied);
    return 1;
}
