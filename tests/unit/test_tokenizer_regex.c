// The hand-written split matcher (zt_pretokenize) against PCRE2 running the Qwen
// split regex itself, on random strings over characters from every class the regex
// distinguishes. The character classes are checked separately, code point by code
// point against tokenizers' Oniguruma, when data/unicode_gen.py writes the tables;
// this test checks the matching logic: alternation order, greediness, backtracking,
// the lookahead, case-insensitive contractions.
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/tokenizer.h"
#include "base/common.h"
#include "tests/support/test_util.h"

static const char QWEN_RE[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|"
    "\\s+(?!\\S)|\\s+";

// Characters whose classes PCRE2 (Unicode 14 in Debian 12) and the tables agree on:
// letters (ASCII, Latin-1, Greek, CJK, Hangul, long s), digits of several kinds,
// whitespace (ASCII, NBSP, ideographic, NEL, line separator), CR, LF, apostrophes,
// punctuation, symbols, emoji, combining marks, NUL.
static const char *ALPHABET[] = {
    "a", "b", "s", "S", "t", "T", "r", "R", "e", "E", "v", "V", "m", "M", "l", "L", "d", "D", "x", "\xc5\xbf",
    "\xc3\xa9", "\xce\xb1", "\xe4\xb8\xad", "\xea\xb0\x80", "\xe3\x81\x82", "1", "9", "\xd9\xa3", "\xc2\xbd",
    "\xe2\x85\xab", " ", " ", " ", "  ", "\t", "\n", "\n", "\r", "\r\n", "\xc2\xa0", "\xe3\x80\x80", "\xc2\x85",
    "\xe2\x80\xa8", "\x0b", "'", "'", "'", "!", ".", ",", "<", "|", "_", "-", "\xe2\x80\x94", "\xf0\x9f\x98\x80",
    "\xcc\x81", "\x00", "\xef\xbf\xbd",
};

// Qwen3.5's regex, which adds \p{M}, and an alphabet with marks of each kind (Mn, Mc, Me,
// a variation selector) beside the classes above.
static const char QWEN35_RE[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|"
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
static const char *ALPHABET35[] = {
    "a", "s", "S", "t", "l", "L", "r", "e", "v", "d", "\xc5\xbf", "\xc3\xa9", "\xe4\xb8\xad", "\xe0\xa4\x95", "1", "\xd9\xa3",
    " ", " ", "  ", "\t", "\n", "\r", "\xc2\xa0", "'", "'", "!", ".", "<", "\xf0\x9f\x98\x80", "\x00",
    "\xcc\x81", "\xcc\x81", "\xcc\xa3", "\xe0\xa4\xbf", "\xe2\x83\xa3", "\xef\xb8\x8f", "\xd6\xb0", "\xe2\x80\x8d",
};

// Split nstrings random strings over alphabet with split() and with PCRE2 running regex;
// returns how many differ.
static int compare(const char *name, const char *regex, size_t (*split)(const char *, size_t, size_t **, size_t *),
                   const char *const *alphabet, int nalpha, int nstrings, uint64_t seed) {
    int err;
    PCRE2_SIZE eoff;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)regex, PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_UCP, &err, &eoff, NULL);
    if (!re) {
        fprintf(stderr, "FAIL: pcre2_compile error %d at %zu\n", err, (size_t)eoff);
        return nstrings;
    }
    pcre2_jit_compile(re, PCRE2_JIT_COMPLETE);
    pcre2_match_data *md = pcre2_match_data_create_from_pattern(re, NULL);
    zt_rng rng;
    zt_rng_seed(&rng, seed);
    size_t *ends = NULL, cap = 0;
    char buf[1024];
    int bad = 0;
    long npieces = 0;
    for (int it = 0; it < nstrings; it++) {
        size_t n = 0;
        int len = 1 + (int)zt_rng_below(&rng, it % 10 == 0 ? 60 : 12);
        for (int k = 0; k < len; k++) {
            const char *c = alphabet[zt_rng_below(&rng, (uint64_t)nalpha)];
            size_t cl = c[0] ? strlen(c) : 1;  // "\x00" is one NUL byte
            memcpy(buf + n, c, cl);
            n += cl;
        }
        size_t np = split(buf, n, &ends, &cap);
        npieces += (long)np;
        // PCRE2 find-all: the matches must tile the string exactly as ours do
        size_t pos = 0, k = 0;
        int ok = 1;
        while (pos < n) {
            int rc = pcre2_match(re, (PCRE2_SPTR)buf, n, pos, 0, md, NULL);
            PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
            if (rc < 0 || ov[0] != pos || k >= np || ends[k] != ov[1]) {
                ok = 0;
                break;
            }
            pos = ov[1];
            k++;
        }
        if (!ok || k != np) {
            if (bad++ < 10) {
                fprintf(stderr, "FAIL: string %d differs from PCRE2 at piece %zu; bytes:", it, k);
                for (size_t b = 0; b < n; b++) fprintf(stderr, " %02x", (unsigned char)buf[b]);
                fprintf(stderr, "\n  ours ends:");
                for (size_t b = 0; b < np; b++) fprintf(stderr, " %zu", ends[b]);
                fputc('\n', stderr);
            }
        }
    }
    printf("%s: %d random strings, %ld pieces, %d differ from PCRE2\n", name, nstrings, npieces, bad);
    free(ends);
    pcre2_match_data_free(md);
    pcre2_code_free(re);
    return bad;
}

int main(void) {
    int bad = compare("qwen3", QWEN_RE, zt_pretokenize, ALPHABET, (int)(sizeof ALPHABET / sizeof ALPHABET[0]), 200000, 7);
    CHECK(bad == 0, "%d strings split differently from PCRE2", bad);
    bad = compare("qwen3.5", QWEN35_RE, zt_pretokenize_qwen35, ALPHABET35, (int)(sizeof ALPHABET35 / sizeof ALPHABET35[0]),
                  100000, 8);
    CHECK(bad == 0, "Qwen3.5: %d strings split differently from PCRE2", bad);
    TEST_END();
}
