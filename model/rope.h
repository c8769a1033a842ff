// A Qwen3 config's RoPE frequencies (kernels/rope_freqs.h) for both backends' tables: plain,
// or YaRN with the correction range and attention factor computed as transformers'
// _compute_yarn_parameters does, in double (Python floats), step for step.
// Header-only so that every program that builds a table (the CPU model, the GPU engine,
// the GPU tests) has it without another source file.
// defines: zt_qwen3_rope_freqs
#ifndef ZT_MODEL_ROPE_H
#define ZT_MODEL_ROPE_H
#include <math.h>

#include "kernels/rope_freqs.h"
#include "model/hf_config.h"

// yarn_get_mscale: 0.1 * mscale * ln(scale) + 1, or 1 for scale <= 1.
static inline double zt_yarn_mscale(double scale, double mscale) {
    return scale <= 1 ? 1.0 : 0.1 * mscale * log(scale) + 1.0;
}

// find_correction_dim: the dimension at which `rotations` full turns fit the original range.
static inline double zt_yarn_correction_dim(double rotations, double dim, double base, double max_pos) {
    const double pi = 3.141592653589793;  // Python's math.pi
    return (dim * log(max_pos / (rotations * 2 * pi))) / (2 * log(base));
}

static inline void zt_qwen3_rope_freqs(const zt_model_config *c, zt_rope_freqs *f) {
    f->theta = c->rope_theta;
    f->yarn = c->rope_yarn;
    f->factor = c->rope_yarn ? c->rope_factor : 0;
    f->low = f->high = 0;
    f->attention = 1.0;
    if (!c->rope_yarn) return;
    const double dim = c->head_dim, base = c->rope_theta, orig = (double)c->rope_original_max_positions;
    if (c->rope_attention_factor > 0)
        f->attention = c->rope_attention_factor;
    else if (c->rope_mscale > 0 && c->rope_mscale_all_dim > 0)
        f->attention = zt_yarn_mscale(c->rope_factor, c->rope_mscale) / zt_yarn_mscale(c->rope_factor, c->rope_mscale_all_dim);
    else
        f->attention = zt_yarn_mscale(c->rope_factor, 1.0);
    const double beta_fast = c->rope_beta_fast > 0 ? c->rope_beta_fast : 32;
    const double beta_slow = c->rope_beta_slow > 0 ? c->rope_beta_slow : 1;
    double low = zt_yarn_correction_dim(beta_fast, dim, base, orig);
    double high = zt_yarn_correction_dim(beta_slow, dim, base, orig);
    if (!c->rope_no_truncate) {
        low = floor(low);
        high = ceil(high);
    }
    f->low = low > 0 ? low : 0;
    f->high = high < dim - 1 ? high : dim - 1;
    if (f->low == f->high) f->high += 0.001;  // linear_ramp_factor: "prevent singularity"
}
#endif
