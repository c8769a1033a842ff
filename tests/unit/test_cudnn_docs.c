// The cuDNN packed-document table (kernels/cuda/cudnn_docs.c) against a naive reading of the
// positions: for every token t of every block, the sequence that holds it must start at token
// t - pos[t] (what the tiled kernel and the CPU reference read: query t sees keys t - pos[t] .. t),
// in the order of the tokens, cover pos[t] (and no more than its document), with the element
// offsets of q, k/v and the stats at that start times H*D, Hkv*D and H. Positions come from
// zt_batch_words over flagged words, as the engine stages them: many documents, one-token ones,
// a tail of padding (a no-loss document), B > 1 blocks; malformed positions are refused.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "data/batch.h"
#include "data/dataset.h"
#include "kernels/cuda/cudnn_docs.h"
#include "tests/support/test_util.h"

// Words of B blocks of S tokens; starts[] lists, per block, the token indices that begin a
// document (0 is implied); -1 ends a block's list. Returns the positions zt_batch_words stages.
static int32_t *positions(int64_t B, int64_t S, const int *starts, int tail_nolos) {
    uint32_t *w = calloc((size_t)(B * S), 4), *ids = calloc((size_t)(B * S), 4);
    int32_t *tg = calloc((size_t)(B * S), 4), *pos = calloc((size_t)(B * S), 4);
    int64_t b = 0;
    for (int i = 0; b < B; i++) {
        if (starts[i] < 0) {
            b++;
            continue;
        }
        w[b * S + starts[i]] |= ZT_TOK_DOC_START;
    }
    for (int64_t i = 0; i < B * S; i++) w[i] |= (uint32_t)(i % 1000 + 1);
    if (tail_nolos)  // the last block's last quarter: a padding document counting nothing
        for (int64_t t = S - S / 4; t < S; t++) w[(B - 1) * S + t] |= ZT_TOK_NO_LOSS | (t == S - S / 4 ? ZT_TOK_DOC_START : 0);
    zt_batch_words(w, B, S, 1, ids, tg, pos);
    free(w), free(ids), free(tg);
    return pos;
}

// The naive check of a built table; returns the number of failures it added.
static int check_table(const char *name, const int32_t *pos, int64_t B, int64_t S, int64_t H, int64_t Hkv, int64_t D,
                       int pad, const void *table, const zt_cudnn_docs_table *t) {
    const int before = zt_test_failures;
    const unsigned char *base = table;
    const int32_t *len = (const int32_t *)(base + t->len_at);
    const int64_t *oq = (const int64_t *)(base + t->q_at), *okv = (const int64_t *)(base + t->kv_at);
    const int64_t *ost = (const int64_t *)(base + t->st_at);
    const int64_t T = B * S;
    // documents: the number of tokens whose position is 0
    int64_t ndoc = 0, maxlen = 0;
    for (int64_t i = 0; i < T; i++) ndoc += pos[i] == 0;
    CHECK(t->n_docs == ndoc, "%s: %lld documents, naive %lld", name, (long long)t->n_docs, (long long)ndoc);
    int64_t ng = ndoc;
    if (pad) {
        ng = 1;
        while (ng < ndoc) ng <<= 1;
    }
    CHECK(t->n_graph == ng, "%s: %lld graph sequences, expected %lld", name, (long long)t->n_graph, (long long)ng);
    CHECK(t->bytes == zt_cudnn_docs_bytes(t->n_graph), "%s: table bytes", name);
    CHECK(t->len_at % 16 == 0 && t->q_at % 16 == 0 && t->kv_at % 16 == 0 && t->st_at % 16 == 0, "%s: alignment", name);
    if (zt_test_failures > before) return zt_test_failures - before;
    // every token: the sequence s whose start is t - pos[t], found by scanning the offsets
    int64_t s = -1;
    for (int64_t tok = 0; tok < T; tok++) {
        const int64_t start = tok - pos[tok];
        if (pos[tok] == 0) s++;  // tokens in order: a new document takes the next sequence
        CHECK(s >= 0 && s < t->n_docs, "%s: token %lld has no sequence", name, (long long)tok);
        if (s < 0 || s >= t->n_docs) break;
        CHECK(oq[s] == start * H * D && okv[s] == start * Hkv * D && ost[s] == start * H,
              "%s: token %lld (pos %d): sequence %lld offsets %lld/%lld/%lld, start %lld", name, (long long)tok,
              pos[tok], (long long)s, (long long)oq[s], (long long)okv[s], (long long)ost[s], (long long)start);
        CHECK(pos[tok] < len[s], "%s: token %lld (pos %d) past sequence %lld's length %d", name, (long long)tok,
              pos[tok], (long long)s, len[s]);
        // the sequence never runs past its document: the token after its end starts another or ends the block
        const int64_t end = start + len[s];
        CHECK(end <= T && (end == T || pos[end] == 0) && (start / S == (end - 1) / S),
              "%s: sequence %lld [%lld, %lld) does not end where its document does", name, (long long)s,
              (long long)start, (long long)end);
        maxlen = len[s] > maxlen ? len[s] : maxlen;
    }
    CHECK(t->max_len == maxlen, "%s: max_len %lld, naive %lld", name, (long long)t->max_len, (long long)maxlen);
    // the lengths sum to the tokens; offsets end at T; padding is empty and starts at the end
    int64_t sum = 0;
    for (int64_t i = 0; i < t->n_graph; i++) sum += len[i];
    CHECK(sum == T, "%s: lengths sum to %lld, not %lld", name, (long long)sum, (long long)T);
    for (int64_t i = t->n_docs; i < t->n_graph; i++)
        CHECK(len[i] == 0, "%s: padding sequence %lld has length %d", name, (long long)i, len[i]);
    for (int64_t i = t->n_docs; i <= t->n_graph; i++)
        CHECK(oq[i] == T * H * D && okv[i] == T * Hkv * D && ost[i] == T * H, "%s: offsets[%lld] not the end", name,
              (long long)i);
    for (int64_t i = 0; i < t->n_graph; i++)
        CHECK(oq[i + 1] - oq[i] == (int64_t)len[i] * H * D && okv[i + 1] - okv[i] == (int64_t)len[i] * Hkv * D &&
                  ost[i + 1] - ost[i] == (int64_t)len[i] * H,
              "%s: offsets of sequence %lld do not step by its length", name, (long long)i);
    return zt_test_failures - before;
}

static void run_case(const char *name, const int32_t *pos, int64_t B, int64_t S, int64_t H, int64_t Hkv, int64_t D) {
    for (int pad = 0; pad <= 1; pad++) {
        const size_t cap = zt_cudnn_docs_bytes(2 * B * S);
        void *table = malloc(cap);
        memset(table, 0xAB, cap);  // poison: every entry the graph reads must be written
        zt_cudnn_docs_table t;
        const int rc = zt_cudnn_docs_build(pos, B, S, H, Hkv, D, pad, table, cap, &t);
        CHECK(rc == 0, "%s pad=%d: %s", name, pad, zt_errmsg());
        if (rc == 0) {
            const int f = check_table(name, pos, B, S, H, Hkv, D, pad, table, &t);
            printf("%-28s pad=%d: %lld documents, %lld sequences, longest %lld, %zu bytes%s\n", name, pad,
                   (long long)t.n_docs, (long long)t.n_graph, (long long)t.max_len, t.bytes, f ? "  FAILED" : "");
        }
        free(table);
    }
}

int main(void) {
    // B = 3 blocks of 37 tokens: many documents, one-token ones (adjacent, at a block's start and
    // end), a padding tail on the last block
    {
        const int starts[] = {1, 2, 3, 10, 11, 20, 36, -1, 5, 6, 7, 8, 30, -1, 4, 16, 17, -1};
        int32_t *pos = positions(3, 37, starts, 1);
        run_case("B3_S37_many_docs_tail", pos, 3, 37, 8, 2, 16);
        free(pos);
    }
    // every token its own document (the largest count: B*S sequences)
    {
        int starts[2 * 16 + 2];
        int n = 0;
        for (int b = 0; b < 2; b++) {
            for (int t = 1; t < 16; t++) starts[n++] = t;
            starts[n++] = -1;
        }
        int32_t *pos = positions(2, 16, starts, 0);
        run_case("B2_S16_one_token_docs", pos, 2, 16, 4, 4, 8);
        free(pos);
    }
    // one document per block (plain rows with isolation: filler blocks look like this), 5 blocks
    // (5 sequences: padded to 8)
    {
        const int starts[] = {-1, -1, -1, -1, -1};
        int32_t *pos = positions(5, 64, starts, 0);
        run_case("B5_S64_one_doc_per_block", pos, 5, 64, 64, 8, 128);
        free(pos);
    }
    // a longer block with hashed document lengths, B = 1, Qwen3-32B's heads
    {
        int starts[600];
        int n = 0;
        for (int t = 1; t < 4096 && n < 598; t++)
            if (((uint32_t)t * 2654435761u >> 20) % 23 == 0) starts[n++] = t;
        starts[n++] = -1;
        int32_t *pos = positions(1, 4096, starts, 1);
        run_case("B1_S4096_hashed_docs_tail", pos, 1, 4096, 64, 8, 128);
        free(pos);
    }
    // malformed positions are refused, naming the token
    {
        const int64_t S = 8;
        int32_t bad[3][8] = {{1, 2, 3, 4, 5, 6, 7, 8}, {0, 1, 2, 4, 5, 0, 1, 2}, {0, 1, 1, 2, 0, 1, 2, 3}};
        const size_t cap = zt_cudnn_docs_bytes(2 * S);
        void *table = malloc(cap);
        for (int i = 0; i < 3; i++) {
            zt_cudnn_docs_table t;
            const int rc = zt_cudnn_docs_build(bad[i], 1, S, 2, 1, 8, 0, table, cap, &t);
            CHECK(rc == -1 && strstr(zt_errmsg(), "run of positions"), "malformed positions %d accepted (%s)", i,
                  rc ? zt_errmsg() : "rc 0");
        }
        // a table that does not fit is refused, not overrun
        int32_t ones[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        zt_cudnn_docs_table t;
        const int rc = zt_cudnn_docs_build(ones, 1, S, 2, 1, 8, 0, table, zt_cudnn_docs_bytes(4), &t);
        CHECK(rc == -1 && strstr(zt_errmsg(), "over the"), "8 documents in a table for 4 accepted");
        free(table);
    }
    printf("%d checks, %d failures\n", zt_test_checks, zt_test_failures);
    return zt_test_failures ? 1 : 0;
}
