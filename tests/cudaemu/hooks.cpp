// cudaemu access hooks: the entry points that g++'s -fsanitize=thread instrumentation calls
// before every load and store of the code compiled for the emulator (the kernels and the
// GPU-side host files). This is not ThreadSanitizer: no TSan runtime is linked; these
// functions only look at addresses inside the emulator's heap (device memory and
// page-locked host memory) and hand those to the runtime (bounds, alignment,
// initialisation, the op's footprint). Everything else returns at once. The atomic entry
// points perform the operation (instrumented code turns __atomic builtins into calls).
#include <stddef.h>
#include <stdint.h>

#include "internal.h"

using zt_emu::g_hook_lo;
using zt_emu::g_hook_span;

#define HOOK(addr, n, w, al)                                                                  \
    do {                                                                                      \
        const uintptr_t a_ = (uintptr_t)(addr);                                              \
        if (__builtin_expect(a_ - g_hook_lo >= g_hook_span, 1)) return;                      \
        zt_emu::access_slow(a_, (n), (w), (al), __builtin_return_address(0));                \
    } while (0)

extern "C" {
void __tsan_init(void) {}
void __tsan_func_entry(void *) {}
void __tsan_func_exit(void) {}
void __tsan_vptr_update(void **, void *) {}
void __tsan_vptr_read(void **) {}
void __tsan_ignore_thread_begin(void) {}
void __tsan_ignore_thread_end(void) {}

#define RW(n)                                                                           \
    void __tsan_read##n(void *p) { HOOK(p, n, false, true); }                          \
    void __tsan_write##n(void *p) { HOOK(p, n, true, true); }                          \
    void __tsan_unaligned_read##n(const void *p) { HOOK(p, n, false, false); }         \
    void __tsan_unaligned_write##n(void *p) { HOOK(p, n, true, false); }               \
    void __tsan_volatile_read##n(void *p) { HOOK(p, n, false, true); }                 \
    void __tsan_volatile_write##n(void *p) { HOOK(p, n, true, true); }
RW(1)
RW(2)
RW(4)
RW(8)
RW(16)
#undef RW
void __tsan_read_range(void *p, unsigned long n) { HOOK(p, n, false, false); }
void __tsan_write_range(void *p, unsigned long n) { HOOK(p, n, true, false); }

// ---- atomics: performed here, uninstrumented ----
typedef char a8;
typedef short a16;
typedef int a32;
typedef long a64;
#define ATOMICS(B, T)                                                                                              \
    T __tsan_atomic##B##_load(const volatile T *a, int mo) {                                                       \
        HOOK_NR(a, sizeof(T), false);                                                                              \
        return __atomic_load_n(a, __ATOMIC_SEQ_CST);                                                               \
    }                                                                                                              \
    void __tsan_atomic##B##_store(volatile T *a, T v, int mo) {                                                    \
        HOOK_NR(a, sizeof(T), true);                                                                               \
        __atomic_store_n(a, v, __ATOMIC_SEQ_CST);                                                                  \
    }                                                                                                              \
    T __tsan_atomic##B##_exchange(volatile T *a, T v, int mo) {                                                    \
        HOOK_RMW(a, sizeof(T));                                                                                    \
        return __atomic_exchange_n(a, v, __ATOMIC_SEQ_CST);                                                        \
    }                                                                                                              \
    T __tsan_atomic##B##_fetch_add(volatile T *a, T v, int mo) {                                                   \
        HOOK_RMW(a, sizeof(T));                                                                                    \
        return __atomic_fetch_add(a, v, __ATOMIC_SEQ_CST);                                                         \
    }                                                                                                              \
    T __tsan_atomic##B##_fetch_sub(volatile T *a, T v, int mo) {                                                   \
        HOOK_RMW(a, sizeof(T));                                                                                    \
        return __atomic_fetch_sub(a, v, __ATOMIC_SEQ_CST);                                                         \
    }                                                                                                              \
    T __tsan_atomic##B##_fetch_and(volatile T *a, T v, int mo) {                                                   \
        HOOK_RMW(a, sizeof(T));                                                                                    \
        return __atomic_fetch_and(a, v, __ATOMIC_SEQ_CST);                                                         \
    }                                                                                                              \
    T __tsan_atomic##B##_fetch_or(volatile T *a, T v, int mo) {                                                    \
        HOOK_RMW(a, sizeof(T));                                                                                    \
        return __atomic_fetch_or(a, v, __ATOMIC_SEQ_CST);                                                          \
    }                                                                                                              \
    T __tsan_atomic##B##_fetch_xor(volatile T *a, T v, int mo) {                                                   \
        HOOK_RMW(a, sizeof(T));                                                                                    \
        return __atomic_fetch_xor(a, v, __ATOMIC_SEQ_CST);                                                         \
    }                                                                                                              \
    T __tsan_atomic##B##_fetch_nand(volatile T *a, T v, int mo) {                                                  \
        HOOK_RMW(a, sizeof(T));                                                                                    \
        return __atomic_fetch_nand(a, v, __ATOMIC_SEQ_CST);                                                        \
    }                                                                                                              \
    int __tsan_atomic##B##_compare_exchange_strong(volatile T *a, T *c, T v, int mo, int fmo) {                    \
        HOOK_RMW(a, sizeof(T));                                                                                    \
        return __atomic_compare_exchange_n(a, c, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);                    \
    }                                                                                                              \
    int __tsan_atomic##B##_compare_exchange_weak(volatile T *a, T *c, T v, int mo, int fmo) {                      \
        HOOK_RMW(a, sizeof(T));                                                                                    \
        return __atomic_compare_exchange_n(a, c, v, true, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);                     \
    }                                                                                                              \
    T __tsan_atomic##B##_compare_exchange_val(volatile T *a, T c, T v, int mo, int fmo) {                          \
        HOOK_RMW(a, sizeof(T));                                                                                    \
        __atomic_compare_exchange_n(a, &c, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);                          \
        return c;                                                                                                  \
    }
#define HOOK_NR(a, n, w)                                                                              \
    do {                                                                                              \
        const uintptr_t a_ = (uintptr_t)(a);                                                          \
        if (__builtin_expect(a_ - g_hook_lo < g_hook_span, 0))                                        \
            zt_emu::access_slow(a_, (n), (w), true, __builtin_return_address(0));                     \
    } while (0)
#define HOOK_RMW(a, n)                \
    do {                              \
        HOOK_NR(a, n, false);         \
        HOOK_NR(a, n, true);          \
    } while (0)
ATOMICS(8, a8)
ATOMICS(16, a16)
ATOMICS(32, a32)
ATOMICS(64, a64)
void __tsan_atomic_thread_fence(int mo) { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
void __tsan_atomic_signal_fence(int mo) { __atomic_signal_fence(__ATOMIC_SEQ_CST); }
}
