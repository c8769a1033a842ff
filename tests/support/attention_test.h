// Test-only attention choices (kernels/cuda/attention/dispatch.h zt_attn_test_overrides): linked
// into the GPU test programs, never into the product, so no product flag or kind reaches them.
// defines: zt_attn_test_scalar_tiles, zt_attn_test_cudnn_unbuilt_ok
#ifndef ZT_TEST_ATTENTION_TEST_H
#define ZT_TEST_ATTENTION_TEST_H

// 1: the tiled kind runs the scalar tiled kernels even where the tensor-core ones apply.
void zt_attn_test_scalar_tiles(int on);
// 1: the cuDNN kind passes zt_attn_usable in a build without cuDNN (to reach the engine's and the
// families' refusals; no cuDNN call may run then).
void zt_attn_test_cudnn_unbuilt_ok(int on);

#endif
