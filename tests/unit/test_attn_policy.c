// The --attention auto policy (kernels/cuda/attention/policy.c) against the choice the trainer made
// before the policy moved there: train/train.c build_engine at commit c20692c, copied below as
// old_choice (the reference), over a table of cases that takes every branch (with the boundary of
// the GEMM scratch at two head_dims) and a sweep of every combination of its inputs; then cuDNN's
// head_dim rule (zt_attn_cudnn_head_dim, issue 50 item 3) row by row against the frontend's checks
// written out by hand, and auto's choice for Qwen3.5-27B's attention with a family that asks it.
#include <stdio.h>

#include "kernels/cuda/attention/policy.h"
#include "tests/support/test_util.h"


// ---- the reference: train.c before this change, verbatim but for the names of its inputs ----
#define OLD_AUTO (-1)
#define OLD_TILED 0
#define OLD_CUDNN 1
#define OLD_GEMM 2
#define OLD_AUTO_GEMM_SCRATCH (8.0 * 1024 * 1024 * 1024)
typedef struct {
    int asked, cuda, isolated, context_parallel, serves;
    int64_t seq_len, num_heads, num_kv_heads, head_dim;
} old_in;
static int old_serves_calls;
static int old_serves(const old_in *x) {
    old_serves_calls++;
    return x->serves;
}
static int old_choice(const old_in *x) {
    const double g = (double)x->num_heads / (double)x->num_kv_heads, S = (double)x->seq_len;
    const double gemm_scratch = 12 * g * S * S + 8 * g * S * x->head_dim + 4 * g * S;
    const int attention = x->asked != OLD_AUTO                                            ? x->asked
                          : x->cuda && !x->isolated && x->context_parallel <= 1 && old_serves(x) ? OLD_CUDNN
                          : gemm_scratch <= OLD_AUTO_GEMM_SCRATCH                           ? OLD_GEMM
                                                                                            : OLD_TILED;
    return attention;
}

// ---- the policy under test ----
static int new_serves_calls;
static int new_serves(const void *arg) {
    new_serves_calls++;
    return ((const old_in *)arg)->serves;
}
static zt_attn_kind new_choice(const old_in *x) {
    const zt_attn_auto_in in = {.cuda = x->cuda, .isolated = x->isolated, .context = x->context_parallel,
                                .cudnn_serves = new_serves, .cudnn_arg = x, .S = x->seq_len, .H = x->num_heads,
                                .Hkv = x->num_kv_heads, .D = x->head_dim};
    return zt_attn_choose(x->asked, &in);
}

// A family that asks the head_dim rule (Qwen3.5's cudnn_serves) on a device {sm, cuDNN version}.
static int rule_serves(const void *arg) {
    const int64_t *dev = arg;
    return zt_attn_cudnn_head_dim(256, (int)dev[0], dev[1]) == 0;
}

// The smallest S at which the old rule's GEMM scratch passes the limit (g, D given).
static int64_t first_tiled_S(int64_t H, int64_t Hkv, int64_t D) {
    int64_t S = 1;
    for (;;) {
        const old_in x = {.asked = OLD_AUTO, .seq_len = S, .num_heads = H, .num_kv_heads = Hkv, .head_dim = D};
        if (old_choice(&x) == OLD_TILED) return S;
        S++;
    }
}

int main(void) {
    // the enum's values are the ones the flags, the engine and the tests spelled before
    CHECK(ZT_ATTN_AUTO == OLD_AUTO && ZT_ATTN_TILED == OLD_TILED && ZT_ATTN_CUDNN == OLD_CUDNN &&
              ZT_ATTN_GEMM == OLD_GEMM,
          "kind values %d %d %d %d", ZT_ATTN_AUTO, ZT_ATTN_TILED, ZT_ATTN_CUDNN, ZT_ATTN_GEMM);
    CHECK(ZT_AUTO_GEMM_SCRATCH == OLD_AUTO_GEMM_SCRATCH, "limit %.0f", ZT_AUTO_GEMM_SCRATCH);

    // the table: every branch of the old rule, its expected kind written out by hand
    const int64_t S_32b_gemm = 8192, S_32b_tiled = 32768;  // Qwen3-32B: H 64, Hkv 8, D 128 (g = 8)
    const int64_t edge128 = first_tiled_S(64, 8, 128), edge256 = first_tiled_S(64, 8, 256);
    struct {
        const char *what;
        old_in x;
        int want;
    } table[] = {
        {"asked tiled stays tiled (auto would pick cuDNN)", {OLD_TILED, 1, 0, 1, 1, 2048, 64, 8, 128}, OLD_TILED},
        {"asked gemm stays gemm (auto would pick tiled)", {OLD_GEMM, 1, 0, 1, 0, S_32b_tiled, 64, 8, 128}, OLD_GEMM},
        {"asked cudnn stays cudnn (isolated, split)", {OLD_CUDNN, 1, 1, 4, 0, 2048, 64, 8, 128}, OLD_CUDNN},
        {"auto: cuda, not isolated, no split, cuDNN serves", {OLD_AUTO, 1, 0, 1, 1, 2048, 64, 8, 128}, OLD_CUDNN},
        {"auto: the same at 32,768 tokens (cuDNN needs no scratch)", {OLD_AUTO, 1, 0, 1, 1, S_32b_tiled, 64, 8, 128},
         OLD_CUDNN},
        {"auto: C = 0 counts as no split", {OLD_AUTO, 1, 0, 0, 1, 2048, 64, 8, 128}, OLD_CUDNN},
        {"auto: the CPU engine never gets cuDNN", {OLD_AUTO, 0, 0, 1, 1, 2048, 64, 8, 128}, OLD_GEMM},
        {"auto: isolated documents skip cuDNN", {OLD_AUTO, 1, 1, 1, 1, 2048, 64, 8, 128}, OLD_GEMM},
        {"auto: a context split skips cuDNN", {OLD_AUTO, 1, 0, 2, 1, 2048, 64, 8, 128}, OLD_GEMM},
        {"auto: cuDNN not served (not built, or the family)", {OLD_AUTO, 1, 0, 1, 0, S_32b_gemm, 64, 8, 128}, OLD_GEMM},
        {"auto: GEMM scratch over 8 GiB -> tiled", {OLD_AUTO, 1, 0, 1, 0, S_32b_tiled, 64, 8, 128}, OLD_TILED},
        {"auto: isolated and long -> tiled", {OLD_AUTO, 1, 1, 1, 1, S_32b_tiled, 64, 8, 128}, OLD_TILED},
        {"auto: split and long -> tiled", {OLD_AUTO, 1, 0, 8, 1, S_32b_tiled, 64, 8, 128}, OLD_TILED},
        {"auto: last GEMM token count at D 128", {OLD_AUTO, 1, 0, 1, 0, edge128 - 1, 64, 8, 128}, OLD_GEMM},
        {"auto: first tiled token count at D 128", {OLD_AUTO, 1, 0, 1, 0, edge128, 64, 8, 128}, OLD_TILED},
        {"auto: head_dim 256 moves the edge down", {OLD_AUTO, 1, 0, 1, 0, edge256, 64, 8, 256}, OLD_TILED},
        {"auto: ... the same S at head_dim 128 is GEMM", {OLD_AUTO, 1, 0, 1, 0, edge256, 64, 8, 128}, OLD_GEMM},
        {"auto: MHA (g = 1) keeps GEMM at 16,384", {OLD_AUTO, 1, 0, 1, 0, 16384, 16, 16, 128}, OLD_GEMM},
    };
    CHECK(edge256 < edge128 && edge128 > 9000 && edge128 < 9500, "edges %lld %lld", (long long)edge128,
          (long long)edge256);
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        const int old = old_choice(&table[i].x), got = new_choice(&table[i].x);
        CHECK(old == table[i].want, "table row %zu (%s): the old rule gives %s", i, table[i].what,
              zt_attn_kind_name(old));
        CHECK(got == table[i].want, "table row %zu (%s): the policy gives %s, want %s", i, table[i].what,
              zt_attn_kind_name(got), zt_attn_kind_name(table[i].want));
        printf("%-58s %s\n", table[i].what, zt_attn_kind_name(got));
    }

    // ---- issue 50 item 3: cuDNN's head_dim rule (zt_attn_cudnn_head_dim), each row written out by
    // hand from the vendored frontend's backward checks (third_party/cudnn_frontend 1.32,
    // node/scaled_dot_product_flash_attention.h: sm 9.x d <= 256; sm 10.x d_qk = d_v = 256 from backend
    // 9.23.0, else <= 128; others <= 128; a multiple of 8) and cuDNN's support matrix (Ampere/Ada
    // backward d <= 128, Hopper d <= 256)
    struct {
        const char *what;
        int64_t D;
        int sm;
        int64_t version;
        int ok;
    } hd[] = {
        {"Qwen3-32B's 128 on an A100", 128, 80, 90100, 1},
        {"128 without cuDNN's version (0)", 128, 90, 0, 1},
        {"64 on sm_120", 64, 120, 92500, 1},
        {"Qwen3.5's 256 on an H100/H200 (9.19)", 256, 90, 91900, 1},
        {"256 on Hopper, an old cuDNN 9.1", 256, 90, 90100, 1},
        {"136 on Hopper", 136, 90, 91900, 1},
        {"256 on an A100 (Ampere backward: <= 128)", 256, 80, 92500, 0},
        {"256 on sm_86 (Ada/Ampere)", 256, 86, 92500, 0},
        {"256 on a B200 with cuDNN 9.22", 256, 100, 92299, 0},
        {"256 on a B200 with cuDNN 9.23", 256, 100, 92300, 1},
        {"256 on a B300 (sm_103) with cuDNN 9.26", 256, 103, 92600, 1},
        {"192 on a B200 with cuDNN 9.23 (only 256 itself)", 192, 100, 92300, 0},
        {"256 on sm_120 (GeForce Blackwell)", 256, 120, 99900, 0},
        {"264 on Hopper (over 256)", 264, 90, 91900, 0},
        {"100 (not a multiple of 8)", 100, 90, 91900, 0},
        {"0", 0, 90, 91900, 0},
    };
    for (size_t i = 0; i < sizeof hd / sizeof hd[0]; i++) {
        zt_err_clear();
        const int rc = zt_attn_cudnn_head_dim(hd[i].D, hd[i].sm, hd[i].version);
        CHECK((rc == 0) == hd[i].ok, "head_dim rule row %zu (%s): got %s, want %s", i, hd[i].what,
              rc == 0 ? "accepted" : "refused", hd[i].ok ? "accepted" : "refused");
        CHECK(rc == 0 || strstr(zt_errmsg(), "up to 256 on Hopper"), "row %zu: the refusal names the rule: %s", i,
              zt_errmsg());
        printf("cuDNN head_dim %-48s %s\n", hd[i].what, rc == 0 ? "yes" : "no");
    }
    // ... and --attention auto with a family that asks it (Qwen3.5-27B's full attention: H 24, Hkv 4,
    // D 256, 8,192 tokens): cuDNN on Hopper, GEMM on an A100 (its scratch is 4.8 GB), GEMM with packed
    // documents; tiled at 32,768 tokens where cuDNN does not serve
    static const int64_t hd_sm[] = {90, 80, 100, 100};
    static const int64_t hd_ver[] = {91900, 91900, 92200, 92300};
    static const int hd_want[] = {ZT_ATTN_CUDNN, ZT_ATTN_GEMM, ZT_ATTN_GEMM, ZT_ATTN_CUDNN};
    for (int i = 0; i < 4; i++) {
        const int64_t dev[2] = {hd_sm[i], hd_ver[i]};
        zt_attn_auto_in in = {.cuda = 1, .context = 1, .cudnn_serves = rule_serves, .cudnn_arg = dev, .S = 8192,
                              .H = 24, .Hkv = 4, .D = 256};
        const zt_attn_kind got = zt_attn_choose(ZT_ATTN_AUTO, &in);
        CHECK(got == hd_want[i], "27B attention, sm_%lld cuDNN %lld: auto gives %s, want %s", (long long)hd_sm[i],
              (long long)hd_ver[i], zt_attn_kind_name(got), zt_attn_kind_name(hd_want[i]));
        in.isolated = 1;
        CHECK(zt_attn_choose(ZT_ATTN_AUTO, &in) == ZT_ATTN_GEMM, "27B attention, packed documents: GEMM");
        in.isolated = 0, in.S = 32768;
        CHECK(zt_attn_choose(ZT_ATTN_AUTO, &in) == (hd_want[i] == ZT_ATTN_CUDNN ? ZT_ATTN_CUDNN : ZT_ATTN_TILED),
              "27B attention at 32,768 tokens");
        printf("auto, Qwen3.5-27B attention on sm_%lld, cuDNN %lld: %s\n", (long long)hd_sm[i], (long long)hd_ver[i],
               zt_attn_kind_name(got));
    }

    // the sweep: every combination; the same kind and the same cuDNN questions (the module loads)
    const int asks[] = {OLD_AUTO, OLD_TILED, OLD_CUDNN, OLD_GEMM}, Cs[] = {0, 1, 2, 4};
    const int64_t Ss[] = {1, 64, 2048, 8192, edge128 - 1, edge128, 16384, 32768, 131072};
    const int64_t heads[][2] = {{64, 8}, {40, 8}, {16, 16}, {24, 4}, {32, 2}}, Ds[] = {64, 128, 256};
    int cases = 0, same = 0, same_calls = 0;
    for (int a = 0; a < 4; a++)
        for (int cuda = 0; cuda < 2; cuda++)
            for (int iso = 0; iso < 2; iso++)
                for (int c = 0; c < 4; c++)
                    for (int sv = 0; sv < 2; sv++)
                        for (size_t s = 0; s < sizeof Ss / sizeof Ss[0]; s++)
                            for (size_t h = 0; h < sizeof heads / sizeof heads[0]; h++)
                                for (size_t d = 0; d < sizeof Ds / sizeof Ds[0]; d++) {
                                    const old_in x = {asks[a], cuda, iso, Cs[c], sv, Ss[s], heads[h][0], heads[h][1],
                                                      Ds[d]};
                                    old_serves_calls = new_serves_calls = 0;
                                    const int old = old_choice(&x), got = new_choice(&x);
                                    cases++;
                                    same += old == got;
                                    same_calls += old_serves_calls == new_serves_calls;
                                    if (old != got || old_serves_calls != new_serves_calls)
                                        fprintf(stderr,
                                                "differs: asked %d cuda %d isolated %d C %d serves %d S %lld H %lld "
                                                "Hkv %lld D %lld: old %s (%d asks), new %s (%d asks)\n",
                                                x.asked, cuda, iso, x.context_parallel, sv, (long long)x.seq_len,
                                                (long long)x.num_heads, (long long)x.num_kv_heads,
                                                (long long)x.head_dim, zt_attn_kind_name(old), old_serves_calls,
                                                zt_attn_kind_name(got), new_serves_calls);
                                }
    CHECK(same == cases, "the sweep: %d of %d cases choose as before", same, cases);
    CHECK(same_calls == cases, "the sweep: %d of %d cases ask cuDNN's question as often as before", same_calls,
          cases);
    printf("sweep: %d of %d cases the same kind, %d the same cuDNN questions\n", same, cases, same_calls);

    CHECK(!strcmp(zt_attn_kind_name(ZT_ATTN_AUTO), "auto") && !strcmp(zt_attn_kind_name(ZT_ATTN_TILED), "tiled") &&
              !strcmp(zt_attn_kind_name(ZT_ATTN_CUDNN), "cudnn") && !strcmp(zt_attn_kind_name(ZT_ATTN_GEMM), "gemm") &&
              !strcmp(zt_attn_kind_name(7), "?"),
          "kind names");
    TEST_END();
}
