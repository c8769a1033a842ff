// One Qwen3.5 Gated DeltaNet decoder layer (input norm, the linear-attention mixer, the MLP),
// forward + backward on the CPU through the family's passes (model/qwen3_5.c), for
// benchmarks/deltanet_layer_vs_torch.py. The directory holds a one-layer Qwen3.5 config whose
// vocabulary is the token count, so the embedding's rows are the layer's input (ids 0..N-1), its
// model.safetensors, and r.bin (float32 [N, d]: d(loss)/d(layer output)).
//   zt_deltanet_layer_bench DIR REPS
// Prints "seconds <best fwd+bwd>" and writes DIR/zt_grads.bin (unit 1's parameter gradient of one
// pass, the layout's flat order), DIR/zt_dx.bin (d(loss)/d(input)) and DIR/zt_layout.txt (name,
// offset, numel per tensor).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/common.h"
#include "checkpoint/hf.h"
#include "kernels/ops.h"
#include "model/config.h"
#include "model/family.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

// The family's progress hook is called between the layer's parts (model/qwen3_5.c TICK()): the
// times between calls say where a pass goes (printed as "ticks" for the fastest pass).
#define MAX_TICKS 64
static double g_ticks[MAX_TICKS];
static int g_nticks;
static void tick(void *ctx) {
    (void)ctx;
    if (g_nticks < MAX_TICKS) g_ticks[g_nticks++] = now();
}

static void write_bin(const char *dir, const char *name, const float *p, int64_t n) {
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(p, sizeof(float), (size_t)n, f) != (size_t)n) zt_fatal("cannot write %s", path);
    fclose(f);
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s DIR REPS\n", argv[0]);
        return 2;
    }
    const char *dir = argv[1];
    const int reps = atoi(argv[2]);
    zt_model_config cfg;
    if (zt_model_config_load(&cfg, dir) != 0) zt_die_on_err();
    zt_layer_plan kind;  // the family's word on its one layer: not softmax attention (a linear_attention layer)
    if (cfg.num_layers == 1) zt_model_layer_plan(&cfg, cfg.family->layer_kind(&cfg, 0), 1, &kind);
    if (cfg.num_layers != 1 || kind.attention) zt_fatal("%s: want one linear_attention layer", dir);
    const int64_t N = cfg.vocab_size, d = cfg.hidden_size;
    const zt_family *f = cfg.family;
    void *m = f->cpu->create(&cfg, &zt_cpu_ops, 1, N, NULL);
    if (!m) zt_die_on_err();
    zt_model_layout lay;
    if (zt_model_layout_init(&lay, &cfg) != 0) zt_die_on_err();
    float *params[3], *grads[3];
    for (int u = 0; u < 3; u++) {
        params[u] = zt_xcalloc((size_t)lay.units[u].numel, sizeof(float));
        grads[u] = zt_xcalloc((size_t)lay.units[u].numel, sizeof(float));
    }
    if (zt_hf_load(&lay, dir, params) != 0) zt_die_on_err();
    uint32_t *ids = zt_xmalloc((size_t)N * sizeof(uint32_t));
    int32_t *targets = zt_xmalloc((size_t)N * sizeof(int32_t));
    for (int64_t i = 0; i < N; i++) ids[i] = (uint32_t)i, targets[i] = -1;
    f->cpu->set_batch(m, ids, targets, NULL);
    f->cpu->embed_fwd(m, params[0]);
    float *r = zt_xmalloc((size_t)(N * d) * sizeof(float)), *dx = zt_xmalloc((size_t)(N * d) * sizeof(float));
    char path[4200];
    snprintf(path, sizeof path, "%s/r.bin", dir);
    FILE *rf = fopen(path, "rb");
    if (!rf || fread(r, sizeof(float), (size_t)(N * d), rf) != (size_t)(N * d)) zt_fatal("cannot read %s", path);
    fclose(rf);
    double best = 1e30, best_ticks[MAX_TICKS], t_fwd = 0;
    int best_n = 0;
    f->cpu->set_progress(m, tick, NULL);
    for (int k = 0; k < reps; k++) {
        g_nticks = 0;
        memset(grads[1], 0, (size_t)lay.units[1].numel * sizeof(float));
        memcpy(dx, r, (size_t)(N * d) * sizeof(float));
        const double t0 = now();
        f->cpu->layer_fwd(m, 0, params[1]);
        const double t1 = now();
        f->cpu->layer_bwd(m, 0, params[1], grads[1], dx);
        const double t = now() - t0;
        if (t < best) {
            best = t, t_fwd = t1 - t0, best_n = g_nticks;
            for (int i = 0; i < g_nticks; i++) best_ticks[i] = g_ticks[i] - t0;
        }
    }
    printf("seconds %.6f\n", best);
    printf("forward %.6f\nticks", t_fwd);
    for (int i = 0; i < best_n; i++) printf(" %.4f", best_ticks[i]);
    printf("\n");
    write_bin(dir, "zt_grads.bin", grads[1], lay.units[1].numel);
    write_bin(dir, "zt_dx.bin", dx, N * d);
    snprintf(path, sizeof path, "%s/zt_layout.txt", dir);
    FILE *lf = fopen(path, "w");
    if (!lf) zt_fatal("cannot write %s", path);
    for (int i = 0; i < lay.units[1].ntensors; i++)
        fprintf(lf, "%s %lld %lld\n", lay.units[1].t[i].name, (long long)lay.units[1].t[i].offset,
                (long long)lay.units[1].t[i].numel);
    fclose(lf);
    f->cpu->destroy(m);
    return 0;
}
