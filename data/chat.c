// A chat line into token ids and a trained mask (data/chat.h): read in its format (chat_read.c),
// rendered through the template (chat_template.c), and masked from token byte offsets the way
// transformers' return_assistant_tokens_mask takes it from char offsets.
// defines: zt_chat_render, zt_chat_render_as, zt_chat_free, zt_chat_tokenize, zt_chat_tokens_free
#include "data/chat.h"

#include <stdlib.h>
#include <string.h>

#include "base/common.h"

int zt_chat_render_as(const cJSON *root, const char *field, zt_chat_format fmt, const char *json, size_t json_len,
                      zt_chat_train rule, zt_chat *out) {
    out->text.n = 0;
    out->nspans = 0;
    out->nmessages = out->ntools = out->weight0 = 0;
    if (zt_chat_read(root, field, fmt, json, json_len, &out->conv)) return -1;
    return zt_chat_render_conv(&out->conv, rule, out);
}

int zt_chat_render(const cJSON *root, const char *field, const char *json, size_t json_len, zt_chat_train rule,
                   zt_chat *out) {
    return zt_chat_render_as(root, field, ZT_CHAT_FORMAT_MESSAGES, json, json_len, rule, out);
}

void zt_chat_free(zt_chat *c) {
    free(c->text.p);
    free(c->spans);
    zt_chat_conv_free(&c->conv);
    memset(c, 0, sizeof *c);
}

// ---- tokens and the mask -----------------------------------------------------------------
// s[0, n) normalised as the tokenizer normalises it: added tokens found on the raw text
// (leftmost, longest first, as zt_encode finds them) kept as they are, NFC between them.
static int normalise_append(const zt_tokenizer *tk, const unsigned char *first, const char *s, size_t n,
                            zt_buf *out, zt_buf *tmp) {
    size_t seg = 0, i = 0;
    const int na = zt_tokenizer_added_count(tk);
    for (;;) {
        size_t alen = 0;
        for (; i < n && !alen; i++) {
            if (!first[(unsigned char)s[i]]) continue;
            for (int k = 0; k < na && !alen; k++) {
                size_t len;
                const char *a = zt_tokenizer_added(tk, k, &len, NULL);
                if (len <= n - i && !memcmp(a, s + i, len)) alen = len;
            }
        }
        const size_t end = alen ? i - 1 : n;  // the loop stepped past the token's first byte
        const int r = zt_nfc(s + seg, end - seg, tmp);
        if (r < 0) return -1;
        if (r == 1) zt_buf_append(out, tmp->p, tmp->n);
        else zt_buf_append(out, s + seg, end - seg);
        if (!alen) return 0;
        zt_buf_append(out, s + end, alen);
        i = seg = end + alen;
    }
}

int zt_chat_tokenize(zt_encoder *enc, const zt_tokenizer *tk, const zt_chat *c, zt_chat_tokens *t) {
    t->ids.n = 0;
    t->ntrained = 0;
    for (size_t k = 0; k < c->nspans; k++) {  // what the mapping below relies on
        const zt_chat_span *sp = &c->spans[k];
        const unsigned char *p = (const unsigned char *)c->text.p;
        if (sp->begin > sp->end || sp->end > c->text.n || (k && sp->begin < c->spans[k - 1].end) ||
            (sp->begin < c->text.n && (p[sp->begin] & 0xC0) == 0x80) || (sp->end < c->text.n && (p[sp->end] & 0xC0) == 0x80))
            return zt_err("trained span %zu [%zu, %zu) of a %zu-byte text: spans must be in order, disjoint "
                          "and start and end on character boundaries (internal error)",
                          k, sp->begin, sp->end, c->text.n);
    }
    if (zt_encode(enc, c->text.p, c->text.n, &t->ids)) return -1;
    const size_t n = t->ids.n;
    if (n > t->trained_cap) {
        t->trained_cap = n + n / 2 + 16;
        t->trained = realloc(t->trained, t->trained_cap);
        if (!t->trained) zt_fatal("out of host memory for a %zu-token mask", n);
    }
    unsigned char first[256] = {0};
    for (int k = 0; k < zt_tokenizer_added_count(tk); k++) first[(unsigned char)zt_tokenizer_added(tk, k, NULL, NULL)[0]] = 1;

    // the spans in the normalised text: the text normalised in pieces cut at every span boundary
    if (2 * c->nspans > t->cuts_cap) {
        t->cuts_cap = 2 * c->nspans + 8;
        t->cuts = realloc(t->cuts, t->cuts_cap * sizeof *t->cuts);
        if (!t->cuts) zt_fatal("out of host memory for %zu span boundaries", t->cuts_cap);
    }
    t->norm.n = 0;
    size_t prev = 0;
    for (size_t k = 0; k < 2 * c->nspans; k++) {
        const size_t at = k & 1 ? c->spans[k / 2].end : c->spans[k / 2].begin;
        if (normalise_append(tk, first, c->text.p + prev, at - prev, &t->norm, &t->tmp)) return -1;
        t->cuts[k] = t->norm.n;
        prev = at;
    }
    if (normalise_append(tk, first, c->text.p + prev, c->text.n - prev, &t->norm, &t->tmp)) return -1;

    // token offsets from the decoded bytes; a token is trained iff it overlaps a span
    t->dec.n = 0;
    size_t s = 0;
    for (size_t i = 0; i < n; i++) {
        const size_t a = t->dec.n;
        if (zt_decode(tk, &t->ids.ids[i], 1, &t->dec)) return -1;
        const size_t b = t->dec.n;
        while (s < c->nspans && t->cuts[2 * s + 1] <= a) s++;
        t->trained[i] = s < c->nspans && b > t->cuts[2 * s];
        t->ntrained += t->trained[i];
    }
    if (t->dec.n != t->norm.n || memcmp(t->dec.p, t->norm.p, t->dec.n)) {
        size_t at = 0;
        while (at < t->dec.n && at < t->norm.n && t->dec.p[at] == t->norm.p[at]) at++;
        return zt_err("the tokens decode to text that differs from the rendered text normalised turn by turn, at "
                      "byte %zu of the normalised text (NFC across a template boundary?); the mask would be "
                      "misplaced",
                      at);
    }
    return 0;
}

void zt_chat_tokens_free(zt_chat_tokens *t) {
    zt_ids_free(&t->ids);
    free(t->trained);
    free(t->norm.p);
    free(t->dec.p);
    free(t->tmp.p);
    free(t->cuts);
    memset(t, 0, sizeof *t);
}

