// Packed documents as the variable-length batch cuDNN's fused attention takes (its THD layout:
// ragged offsets plus a padding mask; kernels/cuda/attention_cudnn.cu). Pure host C, no CUDA:
// the family builds the table from the micro-batch's host positions once per micro-batch and
// uploads it; the CPU test tests/unit/test_cudnn_docs.c holds it to a naive reading of positions.
// defines: zt_cudnn_docs_table, zt_cudnn_docs_bytes, zt_cudnn_docs_build, ZT_CUDNN_DOCS_MIN_VERSION,
//          ZT_CUDNN_DOCS_ZERO_LEN_VERSION
#ifndef ZT_CUDNN_DOCS_H
#define ZT_CUDNN_DOCS_H
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// cuDNN (cudnnGetVersion() numbering, 9.6.0 = 90600) from which the packed path is built: ragged
// Q/K/V/O/dO/dQ/dK/dV with INT64 offsets, ragged Stats and the backward's max_total_seq_len all
// came with 9.6 (docs/design.md §cuDNN packed documents). Before 9.18.1 cuDNN serves ragged
// offsets on Hopper (sm_90) and newer only; the graph build says so itself.
#define ZT_CUDNN_DOCS_MIN_VERSION 90600
// From which a sequence of length 0 is allowed (the frontend's own tests gate zero-length
// sequences at 9.25.0; below it rows of such a batch come back NaN): only then is the sequence
// count rounded up to a power of two and padded with empty sequences.
#define ZT_CUDNN_DOCS_ZERO_LEN_VERSION 92500

// The table in one buffer (uploaded with one copy), n = n_graph sequences, arrays 16-byte aligned:
//   int32 seq_len[n]      each sequence's length in tokens (Q and KV alike), 0 for padding
//   int64 off_q[n + 1]    element offsets of each sequence's first token in q / o / dO / dQ
//                         (token start * H * D); off_q[n] = B * S * H * D
//   int64 off_kv[n + 1]   the same in k / v / dK / dV (token start * Hkv * D)
//   int64 off_st[n + 1]   the same in the token-major stats [B*S, H] (token start * H)
typedef struct {
    int64_t n_docs;   // documents found
    int64_t n_graph;  // sequences of the graph: n_docs, or the next power of two when padding is allowed
    int64_t max_len;  // the longest document (tokens)
    size_t len_at, q_at, kv_at, st_at, bytes;  // byte offsets of the arrays in the table; its size
} zt_cudnn_docs_table;

// Bytes of the table for n_graph sequences (the layout above); 0 when n_graph < 1.
size_t zt_cudnn_docs_bytes(int64_t n_graph);

// The documents of a micro-batch of B blocks of S tokens from their positions (zt_batch_words:
// every block starts a document, and a document is a run pos = 0, 1, 2, ... that the next 0
// ends), in order; each block's documents tile it, so offsets are the running token sum.
// pad: n_graph = the next power of two >= n_docs, the rest zero-length sequences (only for a
// cuDNN that allows them); else n_graph = n_docs. Writes the table into `table` (cap bytes) and
// its description into *t. 0, or -1 + zt_err: positions that are not such runs (a block not
// starting at 0, a step other than +1 or back to 0), a table over cap, a bad shape.
int zt_cudnn_docs_build(const int32_t *pos, int64_t B, int64_t S, int64_t H, int64_t Hkv, int64_t D, int pad,
                        void *table, size_t cap, zt_cudnn_docs_table *t);

#ifdef __cplusplus
}
#endif
#endif
