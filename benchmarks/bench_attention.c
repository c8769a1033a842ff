// The CPU causal GQA attention (zt_cpu_ops: kernels/cpu/attention.c), forward and backward, timed
// alone; the driver behind benchmarks/attention_vs_torch.py, which compares it with PyTorch's
// scaled_dot_product_attention on the same inputs.
//   build/zt_attention_bench [--B 1 --S 8192 --H 8 --Hkv 2 --D 32] [--docs N] [--reps N]
//                            [--in FILE --out FILE]
// --docs N: N documents of equal length per row (document positions), else plain causal.
// --in: raw little-endian fp32 q[B*S, H*D], k, v [B*S, Hkv*D], dout[B*S, H*D] back to back; without
// it the inputs are random. --out: o, dq, dk, dv back to back. Prints one line per repetition,
// "best_fwd_s", "best_bwd_s" (the fastest of each) and the GFLOP/s of a causal count.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/ops.h"
#include "base/common.h"

static void read_raw(FILE *f, float *p, int64_t n, const char *path) {
    if (fread(p, sizeof(float), (size_t)n, f) != (size_t)n) zt_fatal("%s: short read", path);
}

int main(int argc, char **argv) {
    int64_t B = 1, S = 8192, H = 8, Hkv = 2, D = 32, docs = 0;
    int reps = 3;
    const char *in = NULL, *out = NULL;
    for (int i = 1; i + 1 < argc; i += 2) {
        const char *a = argv[i], *v = argv[i + 1];
        if (!strcmp(a, "--B")) B = atoll(v);
        else if (!strcmp(a, "--S")) S = atoll(v);
        else if (!strcmp(a, "--H")) H = atoll(v);
        else if (!strcmp(a, "--Hkv")) Hkv = atoll(v);
        else if (!strcmp(a, "--D")) D = atoll(v);
        else if (!strcmp(a, "--docs")) docs = atoll(v);
        else if (!strcmp(a, "--reps")) reps = atoi(v);
        else if (!strcmp(a, "--in")) in = v;
        else if (!strcmp(a, "--out")) out = v;
        else zt_fatal("unknown argument %s (see the head of benchmarks/bench_attention.c)", a);
    }
    if (H % Hkv) zt_fatal("--H %lld is not a multiple of --Hkv %lld", (long long)H, (long long)Hkv);
    const int64_t nq = B * S * H * D, nk = B * S * Hkv * D;
    float *q = zt_xmalloc((size_t)nq * 4), *k = zt_xmalloc((size_t)nk * 4), *v = zt_xmalloc((size_t)nk * 4);
    float *dout = zt_xmalloc((size_t)nq * 4);
    if (in) {
        FILE *f = fopen(in, "rb");
        if (!f) zt_fatal("cannot open %s", in);
        read_raw(f, q, nq, in), read_raw(f, k, nk, in), read_raw(f, v, nk, in), read_raw(f, dout, nq, in);
        fclose(f);
    } else {
        zt_rng rng;
        zt_rng_seed(&rng, 1);
        for (int64_t i = 0; i < nq; i++) q[i] = (float)zt_rng_normal(&rng), dout[i] = (float)zt_rng_normal(&rng);
        for (int64_t i = 0; i < nk; i++) k[i] = (float)zt_rng_normal(&rng), v[i] = (float)zt_rng_normal(&rng);
    }
    int32_t *pos = NULL;
    double pairs = 0;  // (query, key) pairs a query may see
    if (docs > 0) {
        pos = zt_xmalloc((size_t)(B * S) * sizeof(int32_t));
        const int64_t len = (S + docs - 1) / docs;
        for (int64_t b = 0; b < B; b++)
            for (int64_t t = 0; t < S; t++) pos[b * S + t] = (int32_t)(t % len);
        for (int64_t t = 0; t < S; t++) pairs += (double)(t % len + 1);
    } else {
        pairs = (double)S * (double)(S + 1) / 2;
    }
    pairs *= (double)B * (double)H;
    float *o = zt_xmalloc((size_t)nq * 4), *stats = zt_xmalloc((size_t)(B * H * S * 2) * 4);
    float *dq = zt_xmalloc((size_t)nq * 4), *dk = zt_xmalloc((size_t)nk * 4), *dv = zt_xmalloc((size_t)nk * 4);
    double bf = INFINITY, bb = INFINITY;
    for (int r = 0; r < reps; r++) {
        const double t0 = zt_now();
        zt_cpu_ops.attention_fwd(o, stats, q, k, v, pos, B, S, H, Hkv, D);
        const double t1 = zt_now();
        zt_cpu_ops.attention_bwd(dq, dk, dv, dout, o, stats, q, k, v, pos, B, S, H, Hkv, D);
        const double t2 = zt_now();
        printf("rep %d: forward %.4f s, backward %.4f s\n", r, t1 - t0, t2 - t1);
        if (t1 - t0 < bf) bf = t1 - t0;
        if (t2 - t1 < bb) bb = t2 - t1;
    }
    // useful work: 2 products of 2 * D flops per visible pair forward, 5 backward (with the recompute)
    printf("best_fwd_s %.6f (%.1f GFLOP/s)\nbest_bwd_s %.6f (%.1f GFLOP/s)\n", bf, 4 * D * pairs / bf * 1e-9, bb,
           10 * D * pairs / bb * 1e-9);
    if (out) {
        FILE *f = fopen(out, "wb");
        if (!f) zt_fatal("cannot write %s", out);
        fwrite(o, 4, (size_t)nq, f), fwrite(dq, 4, (size_t)nq, f), fwrite(dk, 4, (size_t)nk, f);
        fwrite(dv, 4, (size_t)nk, f);
        if (fclose(f) != 0) zt_fatal("cannot write %s", out);
    }
    free(q), free(k), free(v), free(dout), free(pos), free(o), free(stats), free(dq), free(dk), free(dv);
    return 0;
}
