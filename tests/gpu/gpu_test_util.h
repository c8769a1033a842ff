// Host helpers shared by the GPU test programs: bf16 rounding, random data,
// upload/download, error norms, the no-device skip.
// defines: zt_host_*, zt_dev_*, zt_relerr, zt_median, zt_round_bf16, zt_op_report, zt_op_checks,
//          zt_op_failures, ZT_SKIP_NO_DEVICE
#ifndef ZT_GPU_TEST_UTIL_H
#define ZT_GPU_TEST_UTIL_H
#include <stdint.h>

#include "base/bf16.h"
#include "kernels/cuda/zt_cuda.h"

#define ZT_EXIT_SKIP 77  // ctest SKIP_RETURN_CODE

// bf16 rounding: zt_f32_to_bf16, zt_bf16_to_f32, zt_bf16_round (base/bf16.h).

// N(0, std) from a seeded generator, rounded to bf16 when round_bf16.
float *zt_host_normal(int64_t n, float std, uint64_t seed, int round_bf16);
float *zt_host_uniform(int64_t n, float lo, float hi, uint64_t seed, int round_bf16);

// Device copies (allocated here; free with zt_cuda_free).
zt_bf16 *zt_dev_bf16(const float *x, int64_t n);
float *zt_dev_f32(const float *x, int64_t n);
void zt_dev_get_bf16(float *dst, const zt_bf16 *src, int64_t n);
void zt_dev_get_f32(float *dst, const float *src, int64_t n);

// Host buffers: zeros (at least one element), a copy. Free with free().
float *zt_host_buf(int64_t n);
float *zt_host_copy(const float *x, int64_t n);
void zt_round_bf16(float *x, int64_t n);  // each element to its nearest bf16, in place

// Device buffers filled with NaN (an element the op under test does not write then fails the
// check), an int32 upload. Free with zt_cuda_free.
zt_bf16 *zt_dev_bf16_nan(int64_t n);
float *zt_dev_f32_nan(int64_t n);
int32_t *zt_dev_i32(const int32_t *x, int64_t n);
// zt_relerr of a device buffer against a host reference.
double zt_dev_err_bf16(const zt_bf16 *dev, const float *ref, int64_t n);
double zt_dev_err_f32(const float *dev, const float *ref, int64_t n);
// 0 when two device buffers hold the same n bytes, else 1 (determinism checks).
double zt_dev_bytes_differ(const void *a, const void *b, size_t n);

// One check of an op test: prints "RESULT op=... shape=... err=... tol=... ok=..." (flushed) and
// counts it; err <= tol passes (NaN never does). zt_op_checks / zt_op_failures: the counts so far.
void zt_op_report(const char *op, const char *shape, double err, double tol);
int zt_op_checks(void);
int zt_op_failures(void);

// max |got - ref| / max |ref| (max-norm relative error). Any NaN or Inf in got
// (an unwritten, poisoned element) gives +inf.
double zt_relerr(const float *got, const float *ref, int64_t n);

// Median of v[0..n) (sorts v in place).
double zt_median(double *v, int n);

// Exit 77 with "SKIPPED: no CUDA device" when no device is visible.
void zt_skip_without_device(void);
#endif
