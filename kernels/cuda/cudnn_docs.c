// Packed documents to cuDNN's variable-length batch (kernels/cuda/cudnn_docs.h): pure host C,
// compiled into zt_cuda with the .cu files and into the CPU test that checks it.
// defines: zt_cudnn_docs_bytes, zt_cudnn_docs_build
#include "kernels/cuda/cudnn_docs.h"

#include <string.h>

#include "base/common.h"

static size_t up16(size_t x) { return (x + 15) & ~(size_t)15; }

// The arrays' byte offsets for n sequences; the total size.
static size_t layout(int64_t n, zt_cudnn_docs_table *t) {
    t->len_at = 0;
    t->q_at = up16((size_t)n * sizeof(int32_t));
    t->kv_at = t->q_at + up16((size_t)(n + 1) * sizeof(int64_t));
    t->st_at = t->kv_at + up16((size_t)(n + 1) * sizeof(int64_t));
    t->bytes = t->st_at + up16((size_t)(n + 1) * sizeof(int64_t));
    return t->bytes;
}

size_t zt_cudnn_docs_bytes(int64_t n_graph) {
    zt_cudnn_docs_table t;
    return n_graph < 1 ? 0 : layout(n_graph, &t);
}

int zt_cudnn_docs_build(const int32_t *pos, int64_t B, int64_t S, int64_t H, int64_t Hkv, int64_t D, int pad,
                        void *table, size_t cap, zt_cudnn_docs_table *t) {
    memset(t, 0, sizeof *t);
    if (!pos || !table || B < 1 || S < 1 || H < 1 || Hkv < 1 || D < 1)
        return zt_err("cuDNN packed documents: bad arguments (B=%lld S=%lld H=%lld Hkv=%lld D=%lld)", (long long)B,
                      (long long)S, (long long)H, (long long)Hkv, (long long)D);
    // count, checking that the positions are runs 0, 1, 2, ... (what the tiled kernel's
    // "query i sees keys i - pos[i] .. i" means as documents)
    int64_t n = 0, max_len = 0;
    for (int64_t b = 0; b < B; b++) {
        int64_t len = 0;
        for (int64_t i = 0; i < S; i++) {
            const int32_t p = pos[b * S + i];
            if (p == 0) {
                n++;
                len = 0;
            } else if (i == 0 || p != pos[b * S + i - 1] + 1) {
                return zt_err("cuDNN packed documents: block %lld, token %lld has position %d after %s; the cuDNN "
                              "attention needs each document to be a run of positions 0, 1, 2, ... (as "
                              "zt_batch_words stages them)",
                              (long long)b, (long long)i, (int)p, i == 0 ? "the block's start" : "a different one");
            }
            len++;
            max_len = len > max_len ? len : max_len;
        }
    }
    int64_t ng = n;
    if (pad)
        for (ng = 1; ng < n; ng *= 2) {
        }
    layout(ng, t);
    if (t->bytes > cap)
        return zt_err("cuDNN packed documents: %lld documents (%lld sequences) need a %zu-byte table, over the %zu "
                      "bytes reserved",
                      (long long)n, (long long)ng, t->bytes, cap);
    t->n_docs = n, t->n_graph = ng, t->max_len = max_len;
    unsigned char *base = table;
    int32_t *len = (int32_t *)(base + t->len_at);
    int64_t *oq = (int64_t *)(base + t->q_at), *okv = (int64_t *)(base + t->kv_at), *ost = (int64_t *)(base + t->st_at);
    int64_t s = -1;  // the current sequence
    for (int64_t tok = 0; tok < B * S; tok++) {
        if (pos[tok] == 0) {
            s++;
            len[s] = 0;
            oq[s] = tok * H * D, okv[s] = tok * Hkv * D, ost[s] = tok * H;
        }
        len[s]++;
    }
    const int64_t T = B * S;
    for (int64_t i = n; i < ng; i++) len[i] = 0;  // empty sequences after the last token
    for (int64_t i = n; i <= ng; i++) oq[i] = T * H * D, okv[i] = T * Hkv * D, ost[i] = T * H;
    return 0;
}
