// Test-only attention choices: the definition of the dispatcher's weak hook (tests/support/attention_test.h).
#include "tests/support/attention_test.h"

#include "kernels/cuda/attention/dispatch.h"

static zt_attn_test_overrides g_overrides;

const zt_attn_test_overrides *zt_attn_test_overrides_get(void) { return &g_overrides; }
void zt_attn_test_scalar_tiles(int on) { g_overrides.scalar_tiles = on; }
void zt_attn_test_cudnn_unbuilt_ok(int on) { g_overrides.cudnn_unbuilt_ok = on; }
