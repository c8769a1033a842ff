// The CPU gated delta rule (zt_cpu_ops: kernels/cpu/delta_chunk.c), forward + backward, timed alone; the
// driver behind benchmarks/delta_rule_vs_torch.py, which compares it with transformers'
// torch_chunk_gated_delta_rule on the same inputs.
//   build/zt_delta_bench [--B 1 --S 2048 --Hk 4 --Hv 12 --Dk 128 --Dv 128] [--reps N]
//                        [--in FILE --out FILE]
// --in: raw little-endian fp32 q, k, v, g, beta, dout back to back (q, k already l2-normalised);
// without it the inputs are random. --out: o, dq, dk, dv, dg, dbeta back to back. Prints one
// line per repetition and "best_s <seconds>" (forward + backward, the fastest repetition).
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
    int64_t B = 1, S = 2048, Hk = 4, Hv = 12, Dk = 128, Dv = 128;
    int reps = 3;
    const char *in = NULL, *out = NULL;
    for (int i = 1; i + 1 < argc; i += 2) {
        const char *a = argv[i], *v = argv[i + 1];
        if (!strcmp(a, "--B")) B = atoll(v);
        else if (!strcmp(a, "--S")) S = atoll(v);
        else if (!strcmp(a, "--Hk")) Hk = atoll(v);
        else if (!strcmp(a, "--Hv")) Hv = atoll(v);
        else if (!strcmp(a, "--Dk")) Dk = atoll(v);
        else if (!strcmp(a, "--Dv")) Dv = atoll(v);
        else if (!strcmp(a, "--reps")) reps = atoi(v);
        else if (!strcmp(a, "--in")) in = v;
        else if (!strcmp(a, "--out")) out = v;
        else zt_fatal("unknown argument %s (see the head of benchmarks/bench_delta.c)", a);
    }
    const int64_t N = B * S, nq = N * Hk * Dk, nv = N * Hv * Dv, ng = N * Hv;
    float *q = zt_xmalloc((size_t)nq * 4), *k = zt_xmalloc((size_t)nq * 4), *v = zt_xmalloc((size_t)nv * 4);
    float *g = zt_xmalloc((size_t)ng * 4), *beta = zt_xmalloc((size_t)ng * 4), *dout = zt_xmalloc((size_t)nv * 4);
    if (in) {
        FILE *f = fopen(in, "rb");
        if (!f) zt_fatal("cannot open %s", in);
        read_raw(f, q, nq, in), read_raw(f, k, nq, in), read_raw(f, v, nv, in);
        read_raw(f, g, ng, in), read_raw(f, beta, ng, in), read_raw(f, dout, nv, in);
        fclose(f);
    } else {
        zt_rng rng;
        zt_rng_seed(&rng, 1);
        for (int64_t i = 0; i < nq; i++) q[i] = (float)zt_rng_normal(&rng) / sqrtf((float)Dk);
        for (int64_t i = 0; i < nq; i++) k[i] = (float)zt_rng_normal(&rng) / sqrtf((float)Dk);
        for (int64_t i = 0; i < nv; i++) v[i] = (float)zt_rng_normal(&rng), dout[i] = (float)zt_rng_normal(&rng);
        for (int64_t i = 0; i < ng; i++) g[i] = (float)(-0.1 - zt_rng_uniform(&rng)), beta[i] = 0.5f;
    }
    float *o = zt_xmalloc((size_t)nv * 4), *saved = zt_xmalloc((size_t)zt_delta_saved_floats(B, S, Hv, Dk, Dv) * 4);
    float *dq = zt_xmalloc((size_t)nq * 4), *dk = zt_xmalloc((size_t)nq * 4), *dv = zt_xmalloc((size_t)nv * 4);
    float *dg = zt_xmalloc((size_t)ng * 4), *dbeta = zt_xmalloc((size_t)ng * 4);
    double best = INFINITY;
    for (int r = 0; r < reps; r++) {
        const double t0 = zt_now();
        zt_cpu_ops.delta_fwd(o, saved, q, k, v, g, beta, NULL, B, S, Hk, Hv, Dk, Dv);
        const double t1 = zt_now();
        zt_cpu_ops.delta_bwd(dq, dk, dv, dg, dbeta, dout, saved, q, k, v, g, beta, NULL, B, S, Hk, Hv, Dk, Dv);
        const double t2 = zt_now();
        printf("rep %d: forward %.4f s, backward %.4f s, total %.4f s\n", r, t1 - t0, t2 - t1, t2 - t0);
        if (t2 - t0 < best) best = t2 - t0;
    }
    printf("best_s %.6f\n", best);
    if (out) {
        FILE *f = fopen(out, "wb");
        if (!f) zt_fatal("cannot write %s", out);
        fwrite(o, 4, (size_t)nv, f), fwrite(dq, 4, (size_t)nq, f), fwrite(dk, 4, (size_t)nq, f);
        fwrite(dv, 4, (size_t)nv, f), fwrite(dg, 4, (size_t)ng, f), fwrite(dbeta, 4, (size_t)ng, f);
        if (fclose(f) != 0) zt_fatal("cannot write %s", out);
    }
    free(q), free(k), free(v), free(g), free(beta), free(dout), free(o), free(saved);
    free(dq), free(dk), free(dv), free(dg), free(dbeta);
    return 0;
}
