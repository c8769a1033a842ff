// zerotrain's fp32 CPU Qwen3.5 text model (model/qwen3_5.c) against transformers 5's
// Qwen3_5ForCausalLM (eager attention, the pure-PyTorch chunked gated delta rule and conv1d, fp32)
// on the golden files of tests/reference/make_qwen3_5_golden.py. Tolerances as the Qwen3 golden
// test's (relative: max|ours - HF| / max|HF| per tensor): logits and loss 1e-5, every parameter
// gradient 1e-4, parameters after 3 clipped AdamW steps (grad-accum) 1e-5; packed isolated
// documents against transformers on each document alone: loss 1e-5, gradients 1e-4. Cases:
// q35_mix (linear, linear, full, linear; value heads 2x key heads; Dk 8 != Dv 12; untied; 80
// tokens, more than a 64-token chunk), q35_tied (full, linear, linear; tied; GQA 4).
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/common.h"
#include "checkpoint/hf.h"
#include "checkpoint/safetensors.h"
#include "model/config.h"
#include "model/family.h"
#include "model/qwen3_5.h"
#include "tests/support/golden_read.h"
#include "tests/support/test_util.h"
#include "tests/support/trainer.h"

static uint32_t *read_words(const zt_st_file *g, const char *name) { return zt_golden_ids(g, name, NULL); }

static int count_tensors(const zt_model_layout *lay) {
    int n = 0;
    for (int u = 0; u < lay->nunits; u++) n += lay->units[u].ntensors;
    return n;
}

static void run_case(const char *name, int expect_tensors) {
    char dir[4096], path[4200];
    snprintf(dir, sizeof dir, "%s/%s", ZT_GOLDEN_DIR, name);
    printf("case %s\n", name);
    zt_model_config cfg;
    if (zt_model_config_load(&cfg, dir) != 0) zt_die_on_err();
    CHECK(cfg.family == &zt_qwen3_5_family, "%s: config.json read as family %s", name, cfg.family->name);
    snprintf(path, sizeof path, "%s/golden.safetensors", dir);
    zt_st_file g;
    if (zt_st_open(&g, path) != 0) zt_die_on_err();
    const zt_st_tensor *tt = zt_st_find(&g, "tokens");
    if (!tt || tt->ndim != 2) zt_fatal("%s: tokens [B, S] missing", path);
    const int64_t B = tt->shape[0], S = tt->shape[1], V = cfg.vocab_size;
    zt_hparams hp = {.lr = zt_golden_meta(&g, "lr"), .beta1 = zt_golden_meta(&g, "beta1"), .beta2 = zt_golden_meta(&g, "beta2"),
                     .eps = zt_golden_meta(&g, "eps"), .weight_decay = zt_golden_meta(&g, "weight_decay"),
                     .clip = zt_golden_meta(&g, "clip"), .schedule = ZT_SCHED_CONSTANT, .total_steps = 3};

    // ---- logits, loss and every gradient of one batch ----
    zt_trainer tr;
    if (zt_trainer_init(&tr, &cfg, &zt_cpu_ops, (int)B, 1, S, &hp, 1) != 0) zt_die_on_err();
    const zt_model_layout *lay = zt_trainer_layout(&tr);
    CHECK(count_tensors(lay) == expect_tensors, "%s: layout has %d tensors, expected %d", name, count_tensors(lay),
          expect_tensors);
    if (zt_hf_load(lay, dir, tr.params) != 0) zt_die_on_err();
    uint32_t *tokens = read_words(&g, "tokens");
    float *logits = zt_xmalloc((size_t)(B * S * V) * sizeof(float));
    const double ntargets = (double)(B * (S - 1));
    int64_t nt = 0;
    double loss = zt_family_fwd_bwd(tr.fam, tr.fm, lay, tr.params, tr.grads, tokens, B, S, 0,
                                    (float)(1.0 / ntargets), &nt, logits) / ntargets;
    CHECK(nt == (int64_t)ntargets, "targets %lld, expected %.0f", (long long)nt, ntargets);
    float *ref = zt_golden_f32(&g, "logits", B * S * V);
    CHECK_CLOSE("logits", logits, ref, B * S * V, 1e-5);
    free(ref);
    float *ref_loss = zt_golden_f32(&g, "loss", 1);
    float l32 = (float)loss;
    CHECK_CLOSE("loss", &l32, ref_loss, 1, 1e-5);
    printf("  loss ours %.7f HF %.7f\n", loss, ref_loss[0]);
    free(ref_loss);
    CHECK(zt_golden_check_grads(&g, lay, tr.grads, "") == expect_tensors, "every gradient compared");
    zt_trainer_free(&tr);

    // ---- 3 AdamW steps with clipping, as micro-batches of 1 block x grad-accum B ----
    if (zt_trainer_init(&tr, &cfg, &zt_cpu_ops, 1, (int)B, S, &hp, 1) != 0) zt_die_on_err();
    lay = zt_trainer_layout(&tr);
    if (zt_hf_load(lay, dir, tr.params) != 0) zt_die_on_err();
    uint32_t *steps = read_words(&g, "steps.tokens");
    float *ref_losses = zt_golden_f32(&g, "steps.losses", 3), *ref_norms = zt_golden_f32(&g, "steps.gradnorms", 3);
    for (int s = 0; s < 3; s++) {
        const uint32_t *blocks[64];
        for (int64_t b = 0; b < B; b++) blocks[b] = steps + (s * B + b) * S;
        zt_step_stats st;
        zt_trainer_step(&tr, blocks, &st);
        float l = (float)st.loss, gn = (float)st.grad_norm;
        printf("  step %d loss %.7f (HF %.7f) grad norm %.6f (HF %.6f) clip coef %.4f\n", s + 1, st.loss,
               ref_losses[s], st.grad_norm, ref_norms[s], st.clip_coef);
        CHECK_CLOSE("step loss", &l, &ref_losses[s], 1, 1e-5);
        CHECK_CLOSE("step grad norm", &gn, &ref_norms[s], 1, 1e-5);
        CHECK(st.clip_coef < 1.0, "clipping must be active in this test (coef %.4f)", st.clip_coef);
    }
    int compared = 0;
    for (int u = 0; u < lay->nunits; u++)
        for (int k = 0; k < lay->units[u].ntensors; k++) {
            const zt_tensor_desc *d = &lay->units[u].t[k];
            snprintf(path, sizeof path, "step3.%s", d->name);
            float *p3 = zt_golden_f32(&g, path, d->numel);
            if (!p3) continue;
            CHECK_CLOSE(path, tr.params[u] + d->offset, p3, d->numel, 1e-5);
            compared++;
            free(p3);
        }
    CHECK(compared == expect_tensors, "compared %d parameters after 3 steps", compared);
    free(ref_losses), free(ref_norms), free(steps), free(tokens), free(logits);
    zt_trainer_free(&tr);
    zt_st_close(&g);
}

// Packed isolated masked documents against transformers on each document alone.
static void run_sft_case(const char *name, int expect_tensors) {
    char dir[4096], path[4200];
    snprintf(dir, sizeof dir, "%s/%s", ZT_GOLDEN_DIR, name);
    printf("case %s (packed documents, isolated, masked)\n", name);
    zt_model_config cfg;
    if (zt_model_config_load(&cfg, dir) != 0) zt_die_on_err();
    snprintf(path, sizeof path, "%s/sft.safetensors", dir);
    zt_st_file g;
    if (zt_st_open(&g, path) != 0) zt_die_on_err();
    const zt_st_tensor *wt = zt_st_find(&g, "words");
    if (!wt || wt->ndim != 2) zt_fatal("%s: words [B, S] missing", path);
    const int64_t B = wt->shape[0], S = wt->shape[1];
    uint32_t *words = read_words(&g, "words");
    const zt_st_tensor *ct = zt_st_find(&g, "count");
    int64_t count = 0;
    if (!ct || zt_st_read_i64(&g, ct, &count) != 0) zt_fatal("%s: count missing", path);
    float *ref_loss = zt_golden_f32(&g, "loss", 1);
    zt_hparams hp = {.lr = 1e-2, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .clip = 0, .total_steps = 1};
    zt_trainer tr;
    if (zt_trainer_init(&tr, &cfg, &zt_cpu_ops, (int)B, 1, S, &hp, 1) != 0) zt_die_on_err();
    const zt_model_layout *lay = zt_trainer_layout(&tr);
    if (zt_hf_load(lay, dir, tr.params) != 0) zt_die_on_err();
    int64_t nt = 0;
    double loss = zt_family_fwd_bwd(tr.fam, tr.fm, lay, tr.params, tr.grads, words, B, S, 1,
                                    (float)(1.0 / (double)count), &nt, NULL);
    CHECK(nt == count, "trained targets %lld, HF counted %lld", (long long)nt, (long long)count);
    float l32 = (float)(loss / (double)count);
    CHECK_CLOSE("sft loss", &l32, ref_loss, 1, 1e-5);
    printf("  loss ours %.7f HF %.7f over %lld trained targets\n", l32, ref_loss[0], (long long)count);
    CHECK(zt_golden_check_grads(&g, lay, tr.grads, "sft ") == expect_tensors, "every gradient compared");
    // documents that see each other (attention, the conv window, the recurrent state) give another loss
    double full = zt_family_fwd_bwd(tr.fam, tr.fm, lay, tr.params, tr.grads, words, B, S, 0, 0.0f, &nt, NULL);
    CHECK(fabs(full / (double)nt - ref_loss[0]) > 1e-4,
          "documents not kept apart should not reproduce the isolated loss (%.7f vs %.7f)", full / (double)nt,
          ref_loss[0]);
    zt_trainer_free(&tr);
    free(words), free(ref_loss);
    zt_st_close(&g);
}

// The shipped 27B config (examples/qwen3.5-27b/config.json, the published shape) read by the codec:
// its parameter count against transformers' Qwen3_5ForCausalLM built from the same file on the meta
// device (26,895,998,464: the text model, MTP not included), its layer mix, and the built-in preset.
static void check_27b(void) {
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/../../examples/qwen3.5-27b", ZT_GOLDEN_DIR);
    zt_model_config c, p;
    if (zt_model_config_load(&c, dir) != 0) zt_die_on_err();
    CHECK(zt_model_param_count(&c) == 26895998464LL, "27B parameters %lld, transformers counts 26895998464",
          (long long)zt_model_param_count(&c));
    int lin = 0;
    for (int l = 0; l < c.num_layers; l++) lin += zt_q35(&c)->layer_linear[l];
    CHECK(lin == 48 && c.rotary_dim == 64 && zt_q35(&c)->lin_value_heads == 48 && zt_q35(&c)->mtp_layers == 1,
          "27B: %d linear layers, %d rotary dims, %d value heads, %d MTP layers", lin, c.rotary_dim, zt_q35(&c)->lin_value_heads,
          zt_q35(&c)->mtp_layers);
    if (zt_model_preset("qwen3.5-27b", &p) != 0) zt_die_on_err();
    CHECK(zt_model_param_count(&p) == zt_model_param_count(&c), "the qwen3.5-27b preset counts %lld",
          (long long)zt_model_param_count(&p));
    // written back and read again: the same config
    char *j = zt_model_config_json(&c);
    zt_model_config b;
    if (zt_model_config_parse(&b, j, "written 27B config") != 0) zt_die_on_err();
    free(j);
    CHECK(b.family == c.family && zt_model_param_count(&b) == zt_model_param_count(&c) &&
              !memcmp(zt_q35(&b)->layer_linear, zt_q35(&c)->layer_linear, sizeof zt_q35(&b)->layer_linear) && b.rotary_dim == c.rotary_dim &&
              b.partial_rotary_factor == c.partial_rotary_factor && zt_q35(&b)->mrope_section[2] == zt_q35(&c)->mrope_section[2],
          "the written 27B config reads back equal");
}

// Bad Qwen3.5 configs: refused by the codec naming the field and the rule.
static void refuse(const char *extra, const char *want) {
    char json[2048];
    snprintf(json, sizeof json,
             "{\"model_type\": \"qwen3_5_text\", \"vocab_size\": 64, \"hidden_size\": 32, \"intermediate_size\": 48, "
             "\"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"num_key_value_heads\": 2, \"head_dim\": 8%s}",
             extra);
    zt_model_config c;
    const int rc = zt_model_config_parse(&c, json, "bad.json");
    CHECK(rc != 0 && strstr(zt_errmsg(), want), "config with %s: want an error naming \"%s\", got rc %d: %s", extra,
          want, rc, rc ? zt_errmsg() : "(accepted)");
}

static void check_refusals(void) {
    refuse(", \"layer_types\": [\"linear_attention\", \"sliding_attention\"]", "layer_types[1] is \"sliding_attention\"");
    refuse(", \"layer_types\": [\"linear_attention\"]", "layer_types must be an array of num_hidden_layers = 2");
    refuse(", \"linear_num_key_heads\": 4, \"linear_num_value_heads\": 6", "linear_num_value_heads 6 is not a multiple");
    refuse(", \"partial_rotary_factor\": 0.1", "RoPE needs an even number");
    refuse(", \"attn_output_gate\": false", "attn_output_gate is false");
    refuse(", \"rope_parameters\": {\"rope_type\": \"yarn\", \"factor\": 4.0, \"rope_theta\": 1e7}", "not implemented for Qwen3.5");
    zt_model_config c;
    CHECK(zt_model_config_parse(&c, "{\"model_type\": \"qwen3_5\", \"vision_config\": {}}", "vlm.json") != 0 &&
              strstr(zt_errmsg(), "needs a \"text_config\""),
          "a Qwen3_5ForConditionalGeneration config without text_config is refused: %s", zt_errmsg());
    // the defaults: every fourth layer full attention, transformers' linear-attention shape
    CHECK(zt_model_config_parse(&c, "{\"model_type\": \"qwen3_5_text\", \"vocab_size\": 64, \"hidden_size\": 32, "
                                    "\"intermediate_size\": 48, \"num_hidden_layers\": 8, \"num_attention_heads\": 4}",
                                "defaults.json") == 0 &&
              zt_q35(&c)->layer_linear[2] && !zt_q35(&c)->layer_linear[3] && !zt_q35(&c)->layer_linear[7] && c.head_dim == 256 && c.rotary_dim == 64 &&
              zt_q35(&c)->lin_value_heads == 32 && zt_q35(&c)->lin_conv_kernel == 4,
          "Qwen3_5TextConfig's defaults");
}

int main(void) {
    check_refusals();
    check_27b();
    // q35_mix: embedding, 3 linear layers of 14 tensors, 1 full of 11, final norm, lm_head
    run_case("q35_mix", 1 + 3 * 14 + 11 + 2);
    // q35_tied: embedding, 1 full layer, 2 linear, final norm (tied: no lm_head)
    run_case("q35_tied", 1 + 11 + 2 * 14 + 1);
    run_sft_case("q35_mix", 1 + 3 * 14 + 11 + 2);
    run_sft_case("q35_tied", 1 + 11 + 2 * 14 + 1);
    TEST_END();
}
