// Causal GQA attention through cuDNN's fused flash attention (SDPA), built with the
// cuDNN frontend graph API (third_party/cudnn_frontend, header-only C++17). The only
// C++ in zerotrain that uses exceptions or the STL; everything is caught here and
// reported through zt_err, so nothing escapes into C.
//
// Layout: no transposes and no copies. q[B*S, H*D] is described to cuDNN as the
// 4-d tensor dims {B, H, S, D} with strides {S*H*D, D, H*D, 1} (BSHD in memory);
// k/v the same with Hkv. GQA is cuDNN's own (K/V heads with fewer heads than Q,
// H % Hkv == 0). Causal mask: diagonal band, top-left aligned, right bound 0 (the
// frontend's set_causal_mask sets exactly these two fields). Stats (natural-log
// logsumexp of the scaled scores, fp32, {B, H, S, 1} packed) is zerotrain's lse[B, H, S].
// Scale 1/sqrtf(D), bf16 I/O, fp32 intermediates and compute.
//
// Built graphs are cached per context in a small table keyed by (B, S, H, Hkv, D,
// direction, packed sequence count), never rebuilt per call; tensors are bound per call by uid.
//
// Packed documents (the _docs entry points): each document of the micro-batch is one sequence
// of a variable-length batch, cuDNN's THD layout: q/k/v/o/dO/dQ/dK/dV keep their [B*S, h*D]
// memory, described as {n, h, S, D} with the BSHD strides plus a ragged offset tensor (INT64,
// {n+1,1,1,1}, element offsets of each sequence's first token: kernels/cuda/cudnn_docs.h) and
// a padding mask whose per-sequence lengths (INT32 {n,1,1,1}) bound each sequence; the causal
// band is top-left inside each sequence, so query i of a document sees its keys 0..i, exactly
// the tiled kernel's "keys i - pos[i] .. i". n is the document count, or (cuDNN >= 9.25, which
// allows empty sequences) the next power of two padded with empty ones, so a run builds at most
// log2(B*S) + 1 graphs per direction; below 9.25 every distinct count is its own graph (the cache
// is bounded, kCacheCap graphs: past it a count rebuilds). The max sequence length is S (a document
// never crosses its block). Stats are ragged too, token-major [B*S, H] (the layout
// TransformerEngine uses; a head-major ragged layout is not one cuDNN documents), kept in the
// scratch arena after the workspace and transposed to/from zerotrain's lse[B, H, S] by two small
// kernels. The backward states max_total_seq_len = B*S, so cuDNN sizes its fp32 dQ/softmax-sum
// workspace by the tokens, not by n * S. Needs cuDNN >= 9.6.0 (zt_cudnn_sdpa_docs_supported),
// and before 9.18.1 a Hopper GPU (cuDNN's own graph check says so). COMPILED ONLY: never run. One cuDNN
// handle per zt_cuda_ctx, created on first use, released by zt_cuda_ctx_destroy;
// cudnnSetStream on every call. Workspace: the context's scratch arena.
//
// Backward asks for cuDNN's deterministic algorithm (zerotrain's rule: no float
// atomics); if cuDNN has no deterministic engine for a shape it falls back to the
// default one, says so once on stderr and counts it (zt_cudnn_sdpa_stats).
//
// Without ZT_HAVE_CUDNN (CMake did not find cuDNN) every call reports "not built".
// STATUS: the whole-block graphs ran on an H200 (cuDNN 9.19: docs/status.md) at head_dim 128; the
// packed-document graphs, and any graph at head_dim 256 (Qwen3.5's full attention, whose output gate
// and partial RoPE stay outside: model/blocks_cuda.c; the rule for training at D > 128 is
// kernels/cuda/attention/policy.h zt_attn_cudnn_head_dim), are COMPILED ONLY, never run on a GPU
// (see docs/cuda.md).
// defines: zt_cudnn_sdpa_built, zt_cudnn_sdpa_fwd, zt_cudnn_sdpa_bwd, zt_cudnn_sdpa_stats,
//          zt_cudnn_ctx_release, zt_cudnn_version, zt_cudnn_sdpa_docs_supported, zt_cudnn_sdpa_docs_fwd,
//          zt_cudnn_sdpa_docs_bwd
#include "kernels/cuda/cuda_internal.h"
#include "kernels/cuda/zt_cudnn_attention.h"
#include "base/common.h"

#ifdef ZT_HAVE_CUDNN
#include <cudnn.h>

#include <cmath>
#include <cstdio>
#include <cstring>  // cudnn_frontend_shim.h uses std::strlen without including it (CUDNN_FRONTEND_SKIP_JSON_LIB)
#include <exception>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

// Without the bundled nlohmann/json (only graph serialisation needs it): halves the
// compile time of this file (about 1 min of host C++ instead of 2).
#define CUDNN_FRONTEND_SKIP_JSON_LIB 1
#include <cudnn_frontend.h>

namespace fe = cudnn_frontend;

namespace {

enum : int64_t {
    UID_Q = 1, UID_K, UID_V, UID_O, UID_STATS, UID_DO, UID_DQ, UID_DK, UID_DV,
    // packed documents: the per-sequence lengths (Q and KV sides) and each port's ragged offsets
    UID_SEQ_Q, UID_SEQ_KV, UID_RO_Q, UID_RO_K, UID_RO_V, UID_RO_O, UID_RO_STATS, UID_RO_DO, UID_RO_DQ, UID_RO_DK,
    UID_RO_DV
};

struct sdpa_key {
    int64_t B, S, H, Hkv, D;
    int bwd;
    int64_t nseq;  // 0: whole blocks (causal over each); else the packed graph's sequence count
    bool operator==(const sdpa_key &o) const {
        return B == o.B && S == o.S && H == o.H && Hkv == o.Hkv && D == o.D && bwd == o.bwd && nseq == o.nseq;
    }
};

struct sdpa_entry {
    sdpa_key key;
    std::shared_ptr<fe::graph::Graph> graph;
    int64_t workspace;
    int deterministic;  // backward: 1 when cuDNN's deterministic algorithm was built
};

// Enough for every shape of a run (forward + backward of a few sequence lengths) and, with
// packed documents on a cuDNN below 9.25 (no empty sequences to pad with), forward + backward
// of up to 32 distinct document counts; past it the oldest entry is replaced (round robin),
// so alternating between more than this many shapes would rebuild.
constexpr size_t kCacheCap = 64;

struct cudnn_state {
    cudnnHandle_t handle = nullptr;
    std::vector<sdpa_entry> cache;
    size_t next_evict = 0;
    int64_t hits = 0, builds = 0, nondeterministic = 0;
};

const char *fe_code_name(fe::error_code_t c) {
    switch (c) {
        case fe::error_code_t::OK: return "OK";
        case fe::error_code_t::ATTRIBUTE_NOT_SET: return "ATTRIBUTE_NOT_SET";
        case fe::error_code_t::SHAPE_DEDUCTION_FAILED: return "SHAPE_DEDUCTION_FAILED";
        case fe::error_code_t::INVALID_TENSOR_NAME: return "INVALID_TENSOR_NAME";
        case fe::error_code_t::INVALID_VARIANT_PACK: return "INVALID_VARIANT_PACK";
        case fe::error_code_t::GRAPH_NOT_SUPPORTED: return "GRAPH_NOT_SUPPORTED";
        case fe::error_code_t::GRAPH_EXECUTION_PLAN_CREATION_FAILED: return "GRAPH_EXECUTION_PLAN_CREATION_FAILED";
        case fe::error_code_t::GRAPH_EXECUTION_FAILED: return "GRAPH_EXECUTION_FAILED";
        case fe::error_code_t::HEURISTIC_QUERY_FAILED: return "HEURISTIC_QUERY_FAILED";
        case fe::error_code_t::UNSUPPORTED_GRAPH_FORMAT: return "UNSUPPORTED_GRAPH_FORMAT";
        case fe::error_code_t::CUDA_API_FAILED: return "CUDA_API_FAILED";
        case fe::error_code_t::CUDNN_BACKEND_API_FAILED: return "CUDNN_BACKEND_API_FAILED";
        case fe::error_code_t::INVALID_CUDA_DEVICE: return "INVALID_CUDA_DEVICE";
        case fe::error_code_t::HANDLE_ERROR: return "HANDLE_ERROR";
        case fe::error_code_t::INVALID_VALUE: return "INVALID_VALUE";
        default: return "error";
    }
}

// cuDNN's own last error text (cuDNN 9), for messages about a failed backend call.
std::string cudnn_last_error() {
    char buf[512];
    buf[0] = 0;
    cudnnGetLastErrorString(buf, sizeof buf);
    return buf[0] ? std::string("; cuDNN: ") + buf : std::string();
}

// The "what failed" text: "<what>: <code> <frontend message>[; cuDNN: <last error>]".
std::string fe_failure(const char *what, fe::error_t &e) {
    return std::string(what) + " failed: " + fe_code_name(e.get_code()) + " " + e.get_message() + cudnn_last_error();
}

// -1 with "cuDNN SDPA <dir> (B=.. S=.. H=.. Hkv=.. D=..): <detail>" in zt_errmsg().
int fail(const char *dir, const sdpa_key &k, const std::string &detail) {
    if (k.nseq)
        return zt_err("cuDNN SDPA %s, packed documents (B=%lld S=%lld H=%lld Hkv=%lld D=%lld, %lld sequences): %s",
                      dir, (long long)k.B, (long long)k.S, (long long)k.H, (long long)k.Hkv, (long long)k.D,
                      (long long)k.nseq, detail.c_str());
    return zt_err("cuDNN SDPA %s (B=%lld S=%lld H=%lld Hkv=%lld D=%lld): %s", dir, (long long)k.B, (long long)k.S,
                  (long long)k.H, (long long)k.Hkv, (long long)k.D, detail.c_str());
}

int check_args(const char *dir, const sdpa_key &k, const void *const *ptrs, const char *const *names, int n) {
    if (k.B <= 0 || k.S <= 0 || k.H <= 0 || k.Hkv <= 0 || k.D <= 0)
        return fail(dir, k, "every dimension must be positive");
    if (k.H % k.Hkv) return fail(dir, k, "H must be a multiple of Hkv");
    // cuDNN's fused attention: head dim a multiple of 8 and at most 256 (128 on
    // some cuDNN/architecture combinations; cuDNN reports those itself).
    if (k.D % 8 || k.D > 256) return fail(dir, k, "head dim D must be a multiple of 8 and at most 256");
    for (int i = 0; i < n; i++) {
        if (!ptrs[i]) return fail(dir, k, std::string("pointer ") + names[i] + " is NULL");
        if ((uintptr_t)ptrs[i] & 15)
            return fail(dir, k, std::string("pointer ") + names[i] + " is not 16-byte aligned (cuDNN needs it)");
    }
    return 0;
}

int get_state(zt_cuda_ctx *c, const char *dir, const sdpa_key &k, cudnn_state **out) {
    if (!c->cudnn) {
        cudnnHandle_t h = nullptr;
        cudnnStatus_t s = cudnnCreate(&h);
        if (s != CUDNN_STATUS_SUCCESS)
            return fail(dir, k,
                        std::string("cudnnCreate failed: ") + cudnnGetErrorString(s) + cudnn_last_error() +
                            " (are libcudnn's sub-libraries next to it, and is this a GPU of sm_80 or newer?)");
        std::unique_ptr<cudnn_state> st(new cudnn_state);
        st->handle = h;
        st->cache.reserve(kCacheCap);  // entries never move: get_graph hands out pointers
        c->cudnn = st.release();
    }
    *out = static_cast<cudnn_state *>(c->cudnn);
    return 0;
}

// BSHD memory seen as {B, h, S, D}: no copies.
fe::graph::Tensor_attributes bshd(const char *name, int64_t uid, int64_t B, int64_t h, int64_t S, int64_t D) {
    return fe::graph::Tensor_attributes()
        .set_name(name)
        .set_uid(uid)
        .set_dim({B, h, S, D})
        .set_stride({S * h * D, D, h * D, 1});
}

// An output of the graph with the same BSHD layout.
void out_bshd(const std::shared_ptr<fe::graph::Tensor_attributes> &t, int64_t uid, int64_t B, int64_t h, int64_t S,
              int64_t D) {
    t->set_output(true).set_uid(uid).set_dim({B, h, S, D}).set_stride({S * h * D, D, h * D, 1});
}

std::shared_ptr<fe::graph::Graph> new_graph() {
    auto g = std::make_shared<fe::graph::Graph>();
    g->set_io_data_type(fe::DataType_t::BFLOAT16)
        .set_intermediate_data_type(fe::DataType_t::FLOAT)
        .set_compute_data_type(fe::DataType_t::FLOAT);
    return g;
}

std::shared_ptr<fe::graph::Graph> fwd_graph(const sdpa_key &k) {
    auto g = new_graph();
    auto Q = g->tensor(bshd("Q", UID_Q, k.B, k.H, k.S, k.D));
    auto K = g->tensor(bshd("K", UID_K, k.B, k.Hkv, k.S, k.D));
    auto V = g->tensor(bshd("V", UID_V, k.B, k.Hkv, k.S, k.D));
    auto opt = fe::graph::SDPA_attributes()
                   .set_name("zt_sdpa_fwd")
                   .set_generate_stats(true)
                   .set_attn_scale(1.0f / sqrtf((float)k.D))
                   .set_diagonal_alignment(fe::DiagonalAlignment_t::TOP_LEFT)
                   .set_diagonal_band_right_bound(0);  // causal: key j <= query i
    auto outs = g->sdpa(Q, K, V, opt);
    out_bshd(outs[0], UID_O, k.B, k.H, k.S, k.D);
    outs[1]->set_output(true)
        .set_uid(UID_STATS)
        .set_data_type(fe::DataType_t::FLOAT)
        .set_dim({k.B, k.H, k.S, 1})
        .set_stride({k.H * k.S, k.S, 1, 1});
    return g;
}

std::shared_ptr<fe::graph::Graph> bwd_graph(const sdpa_key &k, bool deterministic) {
    auto g = new_graph();
    auto Q = g->tensor(bshd("Q", UID_Q, k.B, k.H, k.S, k.D));
    auto K = g->tensor(bshd("K", UID_K, k.B, k.Hkv, k.S, k.D));
    auto V = g->tensor(bshd("V", UID_V, k.B, k.Hkv, k.S, k.D));
    auto O = g->tensor(bshd("O", UID_O, k.B, k.H, k.S, k.D));
    auto dO = g->tensor(bshd("dO", UID_DO, k.B, k.H, k.S, k.D));
    auto Stats = g->tensor(fe::graph::Tensor_attributes()
                               .set_name("Stats")
                               .set_uid(UID_STATS)
                               .set_dim({k.B, k.H, k.S, 1})
                               .set_stride({k.H * k.S, k.S, 1, 1})
                               .set_data_type(fe::DataType_t::FLOAT));
    auto opt = fe::graph::SDPA_backward_attributes()
                   .set_name("zt_sdpa_bwd")
                   .set_attn_scale(1.0f / sqrtf((float)k.D))
                   .set_diagonal_alignment(fe::DiagonalAlignment_t::TOP_LEFT)
                   .set_diagonal_band_right_bound(0)
                   .set_deterministic_algorithm(deterministic);
    auto outs = g->sdpa_backward(Q, K, V, O, dO, Stats, opt);
    out_bshd(outs[0], UID_DQ, k.B, k.H, k.S, k.D);
    out_bshd(outs[1], UID_DK, k.B, k.Hkv, k.S, k.D);
    out_bshd(outs[2], UID_DV, k.B, k.Hkv, k.S, k.D);
    return g;
}

// ---- packed documents: the same graphs over a variable-length batch of k.nseq sequences ----
// An index tensor {n, 1, 1, 1} (per-sequence lengths, INT32) or {n+1, 1, 1, 1} (ragged offsets, INT64).
std::shared_ptr<fe::graph::Tensor_attributes> index_tensor(fe::graph::Graph &g, const char *name, int64_t uid,
                                                           int64_t n, fe::DataType_t t) {
    return g.tensor(fe::graph::Tensor_attributes()
                        .set_name(name)
                        .set_uid(uid)
                        .set_dim({n, 1, 1, 1})
                        .set_stride({1, 1, 1, 1})
                        .set_data_type(t));
}
std::shared_ptr<fe::graph::Tensor_attributes> ragged_offsets(fe::graph::Graph &g, const char *name, int64_t uid,
                                                             int64_t n) {
    return index_tensor(g, name, uid, n + 1, fe::DataType_t::INT64);
}
// A BSHD input of the packed batch: {n, h, S, D} with the BSHD strides, starts from `ro`.
std::shared_ptr<fe::graph::Tensor_attributes> packed_in(fe::graph::Graph &g, const char *name, int64_t uid, int64_t n,
                                                        int64_t h, int64_t S, int64_t D, const char *ro_name,
                                                        int64_t ro_uid) {
    return g.tensor(bshd(name, uid, n, h, S, D).set_ragged_offset(ragged_offsets(g, ro_name, ro_uid, n)));
}
// The token-major ragged stats {n, H, S, 1}: element (s, h) of a sequence at its start + s*H + h.
fe::graph::Tensor_attributes &packed_stats(fe::graph::Tensor_attributes &t, fe::graph::Graph &g, int64_t n, int64_t H,
                                           int64_t S) {
    return t.set_uid(UID_STATS)
        .set_data_type(fe::DataType_t::FLOAT)
        .set_dim({n, H, S, 1})
        .set_stride({H * S, 1, H, 1})
        .set_ragged_offset(ragged_offsets(g, "Stats_ragged_offset", UID_RO_STATS, n));
}

std::shared_ptr<fe::graph::Graph> fwd_graph_packed(const sdpa_key &k) {
    auto g = new_graph();
    const int64_t n = k.nseq;
    auto Q = packed_in(*g, "Q", UID_Q, n, k.H, k.S, k.D, "Q_ragged_offset", UID_RO_Q);
    auto K = packed_in(*g, "K", UID_K, n, k.Hkv, k.S, k.D, "K_ragged_offset", UID_RO_K);
    auto V = packed_in(*g, "V", UID_V, n, k.Hkv, k.S, k.D, "V_ragged_offset", UID_RO_V);
    auto opt = fe::graph::SDPA_attributes()
                   .set_name("zt_sdpa_fwd_packed")
                   .set_generate_stats(true)
                   .set_attn_scale(1.0f / sqrtf((float)k.D))
                   .set_padding_mask(true)
                   .set_seq_len_q(index_tensor(*g, "seq_len_q", UID_SEQ_Q, n, fe::DataType_t::INT32))
                   .set_seq_len_kv(index_tensor(*g, "seq_len_kv", UID_SEQ_KV, n, fe::DataType_t::INT32))
                   .set_diagonal_alignment(fe::DiagonalAlignment_t::TOP_LEFT)
                   .set_diagonal_band_right_bound(0);  // causal inside each sequence
    auto outs = g->sdpa(Q, K, V, opt);
    out_bshd(outs[0], UID_O, n, k.H, k.S, k.D);
    outs[0]->set_ragged_offset(ragged_offsets(*g, "O_ragged_offset", UID_RO_O, n));
    outs[1]->set_output(true);
    packed_stats(*outs[1], *g, n, k.H, k.S);
    return g;
}

std::shared_ptr<fe::graph::Graph> bwd_graph_packed(const sdpa_key &k, bool deterministic) {
    auto g = new_graph();
    const int64_t n = k.nseq;
    auto Q = packed_in(*g, "Q", UID_Q, n, k.H, k.S, k.D, "Q_ragged_offset", UID_RO_Q);
    auto K = packed_in(*g, "K", UID_K, n, k.Hkv, k.S, k.D, "K_ragged_offset", UID_RO_K);
    auto V = packed_in(*g, "V", UID_V, n, k.Hkv, k.S, k.D, "V_ragged_offset", UID_RO_V);
    auto O = packed_in(*g, "O", UID_O, n, k.H, k.S, k.D, "O_ragged_offset", UID_RO_O);
    auto dO = packed_in(*g, "dO", UID_DO, n, k.H, k.S, k.D, "dO_ragged_offset", UID_RO_DO);
    fe::graph::Tensor_attributes st;
    st.set_name("Stats");
    auto Stats = g->tensor(packed_stats(st, *g, n, k.H, k.S));
    auto opt = fe::graph::SDPA_backward_attributes()
                   .set_name("zt_sdpa_bwd_packed")
                   .set_attn_scale(1.0f / sqrtf((float)k.D))
                   .set_padding_mask(true)
                   .set_seq_len_q(index_tensor(*g, "seq_len_q", UID_SEQ_Q, n, fe::DataType_t::INT32))
                   .set_seq_len_kv(index_tensor(*g, "seq_len_kv", UID_SEQ_KV, n, fe::DataType_t::INT32))
                   .set_max_total_seq_len_q(k.B * k.S)  // workspace by the tokens, not n * S (cuDNN >= 9.6)
                   .set_max_total_seq_len_kv(k.B * k.S)
                   .set_diagonal_alignment(fe::DiagonalAlignment_t::TOP_LEFT)
                   .set_diagonal_band_right_bound(0)
                   .set_deterministic_algorithm(deterministic);
    auto outs = g->sdpa_backward(Q, K, V, O, dO, Stats, opt);
    out_bshd(outs[0], UID_DQ, n, k.H, k.S, k.D);
    out_bshd(outs[1], UID_DK, n, k.Hkv, k.S, k.D);
    out_bshd(outs[2], UID_DV, n, k.Hkv, k.S, k.D);
    outs[0]->set_ragged_offset(ragged_offsets(*g, "dQ_ragged_offset", UID_RO_DQ, n));
    outs[1]->set_ragged_offset(ragged_offsets(*g, "dK_ragged_offset", UID_RO_DK, n));
    outs[2]->set_ragged_offset(ragged_offsets(*g, "dV_ragged_offset", UID_RO_DV, n));
    return g;
}

// validate -> operation graph -> heuristics -> support check -> plan; "" or what failed.
#define ZT_FE_STEP(call, what)                         \
    do {                                               \
        fe::error_t e_ = (call);                       \
        if (e_.is_bad()) return fe_failure((what), e_); \
    } while (0)
std::string build_graph(fe::graph::Graph &g, cudnnHandle_t h, int64_t *workspace) {
    ZT_FE_STEP(g.validate(), "Graph::validate");
    ZT_FE_STEP(g.build_operation_graph(h), "Graph::build_operation_graph");
    ZT_FE_STEP(g.create_execution_plans({fe::HeurMode_t::A}), "Graph::create_execution_plans(heuristics mode A)");
    ZT_FE_STEP(g.check_support(), "Graph::check_support");
    ZT_FE_STEP(g.build_plans(fe::BuildPlanPolicy_t::HEURISTICS_CHOICE), "Graph::build_plans");
    ZT_FE_STEP(g.get_workspace_size(*workspace), "Graph::get_workspace_size");
    return std::string();
}
#undef ZT_FE_STEP

int get_graph(cudnn_state *st, const char *dir, const sdpa_key &k, sdpa_entry **out) {
    for (auto &e : st->cache)
        if (e.key == k) {
            st->hits++;
            *out = &e;
            return 0;
        }
    sdpa_entry ent{k, nullptr, 0, 0};
    if (!k.bwd) {
        ent.graph = k.nseq ? fwd_graph_packed(k) : fwd_graph(k);
        std::string why = build_graph(*ent.graph, st->handle, &ent.workspace);
        if (!why.empty()) return fail(dir, k, why);
    } else {
        ent.graph = k.nseq ? bwd_graph_packed(k, true) : bwd_graph(k, true);
        ent.deterministic = 1;
        std::string why = build_graph(*ent.graph, st->handle, &ent.workspace);
        if (!why.empty()) {  // no deterministic engine: the default one (atomics in dQ)
            ent.graph = k.nseq ? bwd_graph_packed(k, false) : bwd_graph(k, false);
            ent.deterministic = 0;
            std::string why2 = build_graph(*ent.graph, st->handle, &ent.workspace);
            if (!why2.empty()) return fail(dir, k, "deterministic: " + why + " | default: " + why2);
            st->nondeterministic++;
            fprintf(stderr,
                    "zerotrain: note: cuDNN SDPA backward (B=%lld S=%lld H=%lld Hkv=%lld D=%lld): no deterministic "
                    "algorithm (%s); using the default one, whose dq is not bit-reproducible\n",
                    (long long)k.B, (long long)k.S, (long long)k.H, (long long)k.Hkv, (long long)k.D, why.c_str());
        }
    }
    if (ent.workspace < 0) return fail(dir, k, "cuDNN reported a negative workspace size");
    st->builds++;
    if (st->cache.size() < kCacheCap) {
        st->cache.push_back(std::move(ent));
        *out = &st->cache.back();
    } else {
        const size_t i = st->next_evict;
        st->next_evict = (st->next_evict + 1) % kCacheCap;
        st->cache[i] = std::move(ent);
        *out = &st->cache[i];
    }
    return 0;
}

// The graph's workspace from the context's scratch arena, and `extra` bytes after it (256-byte
// aligned; *extra_at NULL when none asked).
void *scratch_for(zt_cuda_ctx *c, const sdpa_entry *e, cudaStream_t s, size_t extra, void **extra_at) {
    const size_t ws = ((size_t)e->workspace + 255) & ~(size_t)255;
    void *base = ws + extra > 0 ? zt_ctx_scratch(c, ws + extra, s) : nullptr;
    if (extra_at) *extra_at = extra ? (char *)base + ws : nullptr;
    return e->workspace > 0 ? base : nullptr;
}

// Bind the tensors, run on `stream` with workspace `ws`; with ZT_CUDA_SYNC=1 also wait and report a fault.
int execute(cudnn_state *st, sdpa_entry *e, const char *dir, void *stream, std::unordered_map<int64_t, void *> &pack,
            void *ws) {
    cudaStream_t s = zt_st(stream);
    cudnnStatus_t cs = cudnnSetStream(st->handle, s);
    if (cs != CUDNN_STATUS_SUCCESS)
        return fail(dir, e->key, std::string("cudnnSetStream failed: ") + cudnnGetErrorString(cs) + cudnn_last_error());
    fe::error_t r = e->graph->execute(st->handle, pack, ws);
    if (r.is_bad()) return fail(dir, e->key, fe_failure("Graph::execute", r));
    if (zt_cuda_sync_every_op()) {
        cudaError_t ce = cudaStreamSynchronize(s);
        if (ce == cudaSuccess) ce = cudaGetLastError();
        if (ce != cudaSuccess)
            return fail(dir, e->key, std::string("execution failed (ZT_CUDA_SYNC=1): ") + cudaGetErrorString(ce) +
                                         " (" + cudaGetErrorName(ce) + ")");
    }
    return 0;
}

}  // namespace

extern "C" int zt_cudnn_sdpa_built(void) { return 1; }

extern "C" int zt_cudnn_sdpa_fwd(zt_cuda_ctx *c, void *stream, zt_bf16 *o, float *lse, const zt_bf16 *q,
                                 const zt_bf16 *k, const zt_bf16 *v, int64_t B, int64_t S, int64_t H, int64_t Hkv,
                                 int64_t D) {
    const sdpa_key key{B, S, H, Hkv, D, 0, 0};
    const char *dir = "forward";
    const void *ptrs[] = {o, lse, q, k, v};
    const char *names[] = {"o", "lse", "q", "k", "v"};
    if (check_args(dir, key, ptrs, names, 5)) return -1;
    try {
        cudnn_state *st;
        sdpa_entry *e;
        if (get_state(c, dir, key, &st) || get_graph(st, dir, key, &e)) return -1;
        std::unordered_map<int64_t, void *> pack = {{UID_Q, (void *)q}, {UID_K, (void *)k}, {UID_V, (void *)v},
                                                    {UID_O, (void *)o}, {UID_STATS, (void *)lse}};
        return execute(st, e, dir, stream, pack, scratch_for(c, e, zt_st(stream), 0, nullptr));
    } catch (const std::exception &ex) {
        return fail(dir, key, std::string("C++ exception: ") + ex.what());
    } catch (...) {
        return fail(dir, key, "unknown C++ exception");
    }
}

extern "C" int zt_cudnn_sdpa_bwd(zt_cuda_ctx *c, void *stream, zt_bf16 *dq, zt_bf16 *dk, zt_bf16 *dv,
                                 const zt_bf16 *dout, const zt_bf16 *o, const float *lse, const zt_bf16 *q,
                                 const zt_bf16 *k, const zt_bf16 *v, int64_t B, int64_t S, int64_t H, int64_t Hkv,
                                 int64_t D) {
    const sdpa_key key{B, S, H, Hkv, D, 1, 0};
    const char *dir = "backward";
    const void *ptrs[] = {dq, dk, dv, dout, o, lse, q, k, v};
    const char *names[] = {"dq", "dk", "dv", "dout", "o", "lse", "q", "k", "v"};
    if (check_args(dir, key, ptrs, names, 9)) return -1;
    try {
        cudnn_state *st;
        sdpa_entry *e;
        if (get_state(c, dir, key, &st) || get_graph(st, dir, key, &e)) return -1;
        std::unordered_map<int64_t, void *> pack = {
            {UID_Q, (void *)q},     {UID_K, (void *)k},       {UID_V, (void *)v},
            {UID_O, (void *)o},     {UID_DO, (void *)dout},   {UID_STATS, (void *)lse},
            {UID_DQ, (void *)dq},   {UID_DK, (void *)dk},     {UID_DV, (void *)dv}};
        return execute(st, e, dir, stream, pack, scratch_for(c, e, zt_st(stream), 0, nullptr));
    } catch (const std::exception &ex) {
        return fail(dir, key, std::string("C++ exception: ") + ex.what());
    } catch (...) {
        return fail(dir, key, "unknown C++ exception");
    }
}

// ---- packed documents ----------------------------------------------------------------------------
namespace {

// zerotrain's lse[B, H, S] <-> cuDNN's token-major ragged stats [B*S, H] (one thread per value).
__global__ void stats_to_lse(float *lse, const float *st, int64_t B, int64_t S, int64_t H) {
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= B * H * S) return;
    const int64_t s = i % S, h = (i / S) % H, b = i / (S * H);
    lse[i] = st[(b * S + s) * H + h];
}
__global__ void lse_to_stats(float *st, const float *lse, int64_t B, int64_t S, int64_t H) {
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= B * H * S) return;
    const int64_t s = i % S, h = (i / S) % H, b = i / (S * H);
    st[(b * S + s) * H + h] = lse[i];
}
int launch_transpose(bool to_lse, float *dst, const float *src, int64_t B, int64_t S, int64_t H, cudaStream_t s) {
    const int64_t n = B * H * S;
    const unsigned blocks = (unsigned)((n + 255) / 256);
    if (to_lse)
        stats_to_lse<<<blocks, 256, 0, s>>>(dst, src, B, S, H);
    else
        lse_to_stats<<<blocks, 256, 0, s>>>(dst, src, B, S, H);
    return cudaGetLastError() == cudaSuccess ? 0 : -1;
}

// The table's checks, and the key of its graph.
int docs_key(const char *dir, const zt_cudnn_docs_table *t, const void *table, int64_t B, int64_t S, int64_t H,
             int64_t Hkv, int64_t D, int bwd, sdpa_key *key) {
    *key = sdpa_key{B, S, H, Hkv, D, bwd, t ? t->n_graph : 0};
    if (!t || !table || t->n_graph < 1 || t->n_docs < 1 || t->n_docs > t->n_graph || t->max_len > S)
        return fail(dir, *key, "no packed-document table (zt_cudnn_docs_build), or one for another shape");
    if (t->n_graph > t->n_docs && zt_cudnn_version() < ZT_CUDNN_DOCS_ZERO_LEN_VERSION)
        return fail(dir, *key, "the table is padded with empty sequences, which this cuDNN (" +
                                   std::to_string(zt_cudnn_version()) + ") does not allow (9.25.0 does)");
    if ((uintptr_t)table & 15) return fail(dir, *key, "the table is not 16-byte aligned");
    if (!zt_cudnn_sdpa_docs_supported()) return fail(dir, *key, zt_errmsg());
    return 0;
}

// The table's arrays bound to every port's uid.
void bind_docs(std::unordered_map<int64_t, void *> &pack, const zt_cudnn_docs_table *t, const void *table, bool bwd) {
    char *b = (char *)table;
    void *len = b + t->len_at, *oq = b + t->q_at, *okv = b + t->kv_at, *ost = b + t->st_at;
    pack[UID_SEQ_Q] = len, pack[UID_SEQ_KV] = len;
    pack[UID_RO_Q] = oq, pack[UID_RO_O] = oq, pack[UID_RO_K] = okv, pack[UID_RO_V] = okv, pack[UID_RO_STATS] = ost;
    if (bwd) pack[UID_RO_DO] = oq, pack[UID_RO_DQ] = oq, pack[UID_RO_DK] = okv, pack[UID_RO_DV] = okv;
}

}  // namespace

extern "C" int64_t zt_cudnn_version(void) { return (int64_t)cudnnGetVersion(); }

extern "C" int zt_cudnn_sdpa_docs_supported(void) {
    const int64_t v = zt_cudnn_version();
    if (v >= ZT_CUDNN_DOCS_MIN_VERSION) return 1;
    zt_err("the cuDNN attention keeps packed documents apart from cuDNN %d.%d.%d (ragged INT64 offsets and ragged "
           "stats, forward and backward); this process loaded cuDNN %lld.%lld.%lld (built against %d.%d.%d)",
           ZT_CUDNN_DOCS_MIN_VERSION / 10000, ZT_CUDNN_DOCS_MIN_VERSION / 100 % 100, ZT_CUDNN_DOCS_MIN_VERSION % 100,
           (long long)(v / 10000), (long long)(v / 100 % 100), (long long)(v % 100), CUDNN_MAJOR, CUDNN_MINOR,
           CUDNN_PATCHLEVEL);
    return 0;
}

extern "C" int zt_cudnn_sdpa_docs_fwd(zt_cuda_ctx *c, void *stream, zt_bf16 *o, float *lse, const zt_bf16 *q,
                                      const zt_bf16 *k, const zt_bf16 *v, const zt_cudnn_docs_table *t,
                                      const void *table, int64_t B, int64_t S, int64_t H, int64_t Hkv, int64_t D) {
    const char *dir = "forward";
    sdpa_key key;
    if (docs_key(dir, t, table, B, S, H, Hkv, D, 0, &key)) return -1;
    const void *ptrs[] = {o, lse, q, k, v};
    const char *names[] = {"o", "lse", "q", "k", "v"};
    if (check_args(dir, key, ptrs, names, 5)) return -1;
    try {
        cudnn_state *st;
        sdpa_entry *e;
        if (get_state(c, dir, key, &st) || get_graph(st, dir, key, &e)) return -1;
        cudaStream_t s = zt_st(stream);
        void *stats = nullptr;
        void *ws = scratch_for(c, e, s, (size_t)(B * S * H) * sizeof(float), &stats);
        std::unordered_map<int64_t, void *> pack = {{UID_Q, (void *)q}, {UID_K, (void *)k}, {UID_V, (void *)v},
                                                    {UID_O, (void *)o}, {UID_STATS, stats}};
        bind_docs(pack, t, table, false);
        if (execute(st, e, dir, stream, pack, ws)) return -1;
        if (launch_transpose(true, lse, (const float *)stats, B, S, H, s))
            return fail(dir, key, "the stats-to-lse transpose did not launch");
        if (zt_cuda_sync_every_op()) {  // as execute does for cuDNN's own kernels
            cudaError_t ce = cudaStreamSynchronize(s);
            if (ce == cudaSuccess) ce = cudaGetLastError();
            if (ce != cudaSuccess)
                return fail(dir, key, std::string("stats-to-lse transpose failed (ZT_CUDA_SYNC=1): ") +
                                          cudaGetErrorString(ce) + " (" + cudaGetErrorName(ce) + ")");
        }
        return 0;
    } catch (const std::exception &ex) {
        return fail(dir, key, std::string("C++ exception: ") + ex.what());
    } catch (...) {
        return fail(dir, key, "unknown C++ exception");
    }
}

extern "C" int zt_cudnn_sdpa_docs_bwd(zt_cuda_ctx *c, void *stream, zt_bf16 *dq, zt_bf16 *dk, zt_bf16 *dv,
                                      const zt_bf16 *dout, const zt_bf16 *o, const float *lse, const zt_bf16 *q,
                                      const zt_bf16 *k, const zt_bf16 *v, const zt_cudnn_docs_table *t,
                                      const void *table, int64_t B, int64_t S, int64_t H, int64_t Hkv, int64_t D) {
    const char *dir = "backward";
    sdpa_key key;
    if (docs_key(dir, t, table, B, S, H, Hkv, D, 1, &key)) return -1;
    const void *ptrs[] = {dq, dk, dv, dout, o, lse, q, k, v};
    const char *names[] = {"dq", "dk", "dv", "dout", "o", "lse", "q", "k", "v"};
    if (check_args(dir, key, ptrs, names, 9)) return -1;
    try {
        cudnn_state *st;
        sdpa_entry *e;
        if (get_state(c, dir, key, &st) || get_graph(st, dir, key, &e)) return -1;
        cudaStream_t s = zt_st(stream);
        void *stats = nullptr;
        void *ws = scratch_for(c, e, s, (size_t)(B * S * H) * sizeof(float), &stats);
        if (launch_transpose(false, (float *)stats, lse, B, S, H, s))
            return fail(dir, key, "the lse-to-stats transpose did not launch");
        std::unordered_map<int64_t, void *> pack = {
            {UID_Q, (void *)q},   {UID_K, (void *)k},     {UID_V, (void *)v},  {UID_O, (void *)o},
            {UID_DO, (void *)dout}, {UID_STATS, stats},   {UID_DQ, (void *)dq}, {UID_DK, (void *)dk},
            {UID_DV, (void *)dv}};
        bind_docs(pack, t, table, true);
        return execute(st, e, dir, stream, pack, ws);
    } catch (const std::exception &ex) {
        return fail(dir, key, std::string("C++ exception: ") + ex.what());
    } catch (...) {
        return fail(dir, key, "unknown C++ exception");
    }
}

extern "C" void zt_cudnn_sdpa_stats(const zt_cuda_ctx *c, int64_t *graphs, int64_t *hits, int64_t *builds,
                                    int64_t *nondeterministic) {
    const cudnn_state *st = c ? static_cast<const cudnn_state *>(c->cudnn) : nullptr;
    if (graphs) *graphs = st ? (int64_t)st->cache.size() : 0;
    if (hits) *hits = st ? st->hits : 0;
    if (builds) *builds = st ? st->builds : 0;
    if (nondeterministic) *nondeterministic = st ? st->nondeterministic : 0;
}

// Called by zt_cuda_ctx_destroy after the device is synchronised.
void zt_cudnn_ctx_release(zt_cuda_ctx *c) {
    cudnn_state *st = static_cast<cudnn_state *>(c->cudnn);
    if (!st) return;
    c->cudnn = nullptr;
    try {
        st->cache.clear();  // the graphs' plans before the handle they were built with
    } catch (...) {
    }
    if (st->handle) cudnnDestroy(st->handle);
    delete st;
}

#else  // !ZT_HAVE_CUDNN: CMake did not find cuDNN; the GEMM path in attention.cu is the one in use.

extern "C" int zt_cudnn_sdpa_built(void) { return 0; }

#define ZT_CUDNN_NOT_BUILT                                                                                      \
    zt_err("cuDNN SDPA attention: not built (cuDNN was not found when this build was configured: set "         \
           "CUDNN_ROOT, or install cuDNN 9 into the CUDA toolkit or as the nvidia-cudnn pip wheel; see "          \
           "docs/cuda.md); use the GEMM attention path")

extern "C" int zt_cudnn_sdpa_fwd(zt_cuda_ctx *c, void *stream, zt_bf16 *o, float *lse, const zt_bf16 *q,
                                 const zt_bf16 *k, const zt_bf16 *v, int64_t B, int64_t S, int64_t H, int64_t Hkv,
                                 int64_t D) {
    return ZT_CUDNN_NOT_BUILT;
}

extern "C" int zt_cudnn_sdpa_bwd(zt_cuda_ctx *c, void *stream, zt_bf16 *dq, zt_bf16 *dk, zt_bf16 *dv,
                                 const zt_bf16 *dout, const zt_bf16 *o, const float *lse, const zt_bf16 *q,
                                 const zt_bf16 *k, const zt_bf16 *v, int64_t B, int64_t S, int64_t H, int64_t Hkv,
                                 int64_t D) {
    return ZT_CUDNN_NOT_BUILT;
}

extern "C" int64_t zt_cudnn_version(void) { return 0; }

extern "C" int zt_cudnn_sdpa_docs_supported(void) {
    zt_err("the cuDNN attention keeps packed documents apart from cuDNN %d.%d.%d; this build has no cuDNN (not found "
           "when it was configured)",
           ZT_CUDNN_DOCS_MIN_VERSION / 10000, ZT_CUDNN_DOCS_MIN_VERSION / 100 % 100, ZT_CUDNN_DOCS_MIN_VERSION % 100);
    return 0;
}

extern "C" int zt_cudnn_sdpa_docs_fwd(zt_cuda_ctx *c, void *stream, zt_bf16 *o, float *lse, const zt_bf16 *q,
                                      const zt_bf16 *k, const zt_bf16 *v, const zt_cudnn_docs_table *t,
                                      const void *table, int64_t B, int64_t S, int64_t H, int64_t Hkv, int64_t D) {
    return ZT_CUDNN_NOT_BUILT;
}

extern "C" int zt_cudnn_sdpa_docs_bwd(zt_cuda_ctx *c, void *stream, zt_bf16 *dq, zt_bf16 *dk, zt_bf16 *dv,
                                      const zt_bf16 *dout, const zt_bf16 *o, const float *lse, const zt_bf16 *q,
                                      const zt_bf16 *k, const zt_bf16 *v, const zt_cudnn_docs_table *t,
                                      const void *table, int64_t B, int64_t S, int64_t H, int64_t Hkv, int64_t D) {
    return ZT_CUDNN_NOT_BUILT;
}

extern "C" void zt_cudnn_sdpa_stats(const zt_cuda_ctx *c, int64_t *graphs, int64_t *hits, int64_t *builds,
                                    int64_t *nondeterministic) {
    if (graphs) *graphs = 0;
    if (hits) *hits = 0;
    if (builds) *builds = 0;
    if (nondeterministic) *nondeterministic = 0;
}

void zt_cudnn_ctx_release(zt_cuda_ctx *c) { (void)c; }

#endif  // ZT_HAVE_CUDNN
