// libFuzzer harness: the Qwen3 tokenizer (data/tokenizer.c, data/unicode.c) on
// arbitrary bytes, with the shipped assets/qwen3-tokenizer/tokenizer.json.
// Properties:
//   - UTF-8: zt_utf8_valid_prefix agrees with a naive RFC 3629 validator written here;
//     zt_encode refuses exactly the invalid inputs, naming the first bad byte.
//   - round trip: decode(encode(x)) == NFC(x), and NFC is idempotent.
//   - safe cut: at every cut zt_tokenizer_safe_cut returns, encode(x[:cut]) followed by
//     encode(x[cut:]) is encode(x) (what lets pack split one long document across workers).
//   - pre-tokenizer: the pieces are non-empty and tile the text.
#include "data/tokenizer.h"
#include "data/unicode.h"
#include "fuzz_util.h"
#include "base/common.h"

static zt_tokenizer *tk;
static zt_encoder *enc;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    tk = fuzz_load_tokenizer("fuzz_tokenizer");
    enc = zt_encoder_new(tk);
    return 0;
}

// The longest valid prefix, byte by byte from the RFC 3629 table.
static size_t naive_valid_prefix(const uint8_t *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        uint8_t c = s[i];
        size_t len;
        uint8_t lo = 0x80, hi = 0xBF;
        if (c < 0x80) len = 1;
        else if (c >= 0xC2 && c <= 0xDF) len = 2;
        else if (c == 0xE0) len = 3, lo = 0xA0;
        else if (c >= 0xE1 && c <= 0xEC) len = 3;
        else if (c == 0xED) len = 3, hi = 0x9F;
        else if (c >= 0xEE && c <= 0xEF) len = 3;
        else if (c == 0xF0) len = 4, lo = 0x90;
        else if (c >= 0xF1 && c <= 0xF3) len = 4;
        else if (c == 0xF4) len = 4, hi = 0x8F;
        else return i;
        if (i + len > n) return i;
        for (size_t k = 1; k < len; k++) {
            uint8_t b = s[i + k];
            if (b < (k == 1 ? lo : 0x80) || b > (k == 1 ? hi : 0xBF)) return i;
        }
        i += len;
    }
    return n;
}

static int same_ids(const zt_ids *a, const zt_ids *b) {
    return a->n == b->n && (a->n == 0 || !memcmp(a->ids, b->ids, a->n * sizeof *a->ids));
}

// NFC of each stretch between added tokens (matched longest first at each position, as
// zt_encode does), the added tokens kept verbatim. 1 when out holds the result, 0 when
// nothing changed, -1 on error.
static int nfc_between_added(const char *s, size_t n, zt_buf *out) {
    zt_buf part = {0};
    int changed = 0;
    out->n = 0;
    size_t start = 0, i = 0;
    while (i <= n) {
        size_t alen = 0;
        if (i < n)
            for (int k = 0; k < zt_tokenizer_added_count(tk); k++) {
                size_t len;
                const char *a = zt_tokenizer_added(tk, k, &len, NULL);
                if (len <= n - i && !memcmp(a, s + i, len)) {
                    alen = len;
                    break;
                }
            }
        if (alen || i == n) {
            part.n = 0;
            int r = zt_nfc(s + start, i - start, &part);
            if (r < 0) return -1;
            if (r) changed = 1;
            zt_buf_append(out, r ? part.p : s + start, r ? part.n : i - start);
            zt_buf_append(out, s + i, alen);
            if (i == n) break;
            i += alen;
            start = i;
        } else {
            i++;
        }
    }
    free(part.p);
    return changed;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *text = (const char *)data;
    size_t valid = naive_valid_prefix(data, size);
    FUZZ_ASSERT(zt_utf8_valid_prefix(text, size) == valid, "valid prefix %zu, the naive validator says %zu",
                zt_utf8_valid_prefix(text, size), valid);
    zt_ids ids = {0};
    int rc = zt_encode(enc, text, size, &ids);
    FUZZ_ASSERT((rc == 0) == (valid == size), "encode rc %d on %s UTF-8 (valid prefix %zu of %zu)", rc,
                valid == size ? "valid" : "invalid", valid, size);
    if (rc != 0) {
        FUZZ_ASSERT(ids.n == 0, "a refused encode appended %zu ids", ids.n);
        char at[64];
        snprintf(at, sizeof at, "%zu", valid);
        FUZZ_ASSERT(strstr(zt_errmsg(), at), "the error does not name byte %zu: %s", valid, zt_errmsg());
        zt_ids_free(&ids);
        return 0;
    }
    // round trip modulo NFC, which (as in `tokenizers`) applies to the stretches between
    // added tokens, never across one: "<|im_end|>" + U+0338 keeps its '>' (whole-text NFC
    // would compose it into U+226F)
    zt_buf nfc = {0}, again = {0}, dec = {0};
    int nr = nfc_between_added(text, size, &nfc);
    FUZZ_ASSERT(nr >= 0, "NFC failed: %s", zt_errmsg());
    const char *norm = nr ? nfc.p : text;
    size_t nlen = nr ? nfc.n : size;
    // (zt_nfc may return 1 with unchanged text: a region it handed to utf8proc came back the same)
    int ar = nfc_between_added(norm, nlen, &again);
    FUZZ_ASSERT(ar == 0 || (ar == 1 && again.n == nlen && !memcmp(again.p, norm, nlen)),
                "NFC is not idempotent (NFC(NFC(x)) != NFC(x))");
    FUZZ_ASSERT(zt_decode(tk, ids.ids, ids.n, &dec) == 0, "decode of encoded ids failed: %s", zt_errmsg());
    FUZZ_ASSERT(dec.n == nlen && (nlen == 0 || !memcmp(dec.p, norm, nlen)),
                "decode(encode(x)) is %zu bytes, NFC(x) is %zu bytes (or they differ)", dec.n, nlen);
    // pre-tokenizer pieces tile the normalized text
    size_t *ends = NULL, cap = 0;
    size_t np = zt_pretokenize(norm, nlen, &ends, &cap);
    size_t prev = 0;
    for (size_t i = 0; i < np; i++) {
        FUZZ_ASSERT(ends[i] > prev && ends[i] <= nlen, "piece %zu ends at %zu (previous %zu, text %zu)", i, ends[i],
                    prev, nlen);
        prev = ends[i];
    }
    FUZZ_ASSERT(np == 0 ? nlen == 0 : prev == nlen, "pieces end at %zu of %zu", prev, nlen);
    free(ends);
    // safe cuts
    for (size_t from = 0, k = 0; from < size && k < 8; k++) {
        size_t cut = zt_tokenizer_safe_cut(tk, text, size, from);
        FUZZ_ASSERT(cut >= from && cut > 0 && cut <= size, "safe cut %zu from %zu in %zu", cut, from, size);
        if (cut == size) break;
        zt_ids a = {0};
        FUZZ_ASSERT(zt_encode(enc, text, cut, &a) == 0 && zt_encode(enc, text + cut, size - cut, &a) == 0,
                    "a piece of valid text at safe cut %zu did not encode: %s", cut, zt_errmsg());
        FUZZ_ASSERT(same_ids(&a, &ids), "encode(x[:%zu]) + encode(x[%zu:]) has %zu ids, encode(x) has %zu", cut, cut,
                    a.n, ids.n);
        zt_ids_free(&a);
        from = cut + 1;
    }
    free(nfc.p);
    free(again.p);
    free(dec.p);
    zt_ids_free(&ids);
    return 0;
}
