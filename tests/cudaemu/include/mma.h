// cudaemu: <mma.h>, the part of the WMMA API (nvcuda::wmma) zerotrain's kernels use: 16x16x16
// fragments of bf16 (matrix_a, matrix_b, row- or column-major) with an fp32 accumulator;
// fill_fragment, load_matrix_sync, store_matrix_sync, mma_sync. The _sync calls are warp
// collectives: all 32 lanes of the warp must reach the same call (kernel.cpp checks it; a lane
// that has exited or waits elsewhere is a violation), with the same pointer, leading dimension
// and layout; the pointer must be 32-byte aligned and ldm a multiple of 8 (bf16) or 4 (float).
//
// Fragment layout (unspecified by CUDA; this is the emulator's): element i of lane l is the tile's
// element (31 - l) * 8 + i in row-major order: lane 0 holds the last row, far from the rows a
// kernel's low lanes usually handle themselves. A load moves the lane's own 8 elements when the
// lane reaches the call, then meets the warp; a store meets the warp first, then each lane stores
// its elements when it resumes (lanes resume in order). So a lane neither waits for other lanes'
// earlier shared-memory writes before loading nor sees other lanes' parts of a store before its
// next instruction: a missing __syncwarp between lanes writing a tile and the warp loading it, or
// between a store and the lanes reading it back, reads 0xff poison or stale data.
//
// mma_sync's rounding is a model, not the hardware's: each product of two bf16 values is exact
// (8-bit significands: the product fits in fp32), and D = C + the 16 products of a k-step is
// summed in double and rounded once to fp32 (round to nearest even). Tensor cores (sm_80, sm_90)
// also form the products exactly but add them with their own alignment and truncation (round
// toward zero of the aligned significands, Fasi et al. 2021), so emulated results can differ from
// a GPU's in the last bits of each k-step; the op tests' tolerances are the GPU ones.
#ifndef ZT_CUDAEMU_MMA_H
#define ZT_CUDAEMU_MMA_H
#include <stdint.h>
#include <stdio.h>

#include "cuda_bf16.h"
#include "cudaemu_device.h"

namespace nvcuda {
namespace wmma {
struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };

template <class Use, int M, int N, int K, class T, class Layout = void>
class fragment;  // only the 16x16x16 shapes below exist here
template <class Use, class T, class Layout>
class fragment<Use, 16, 16, 16, T, Layout> {
   public:
    typedef T element_type;
    typedef T storage_element_type;
    static constexpr int num_elements = 8;
    T x[8];
};

// fill_fragment is not a _sync call: each thread fills its own elements (CUDA: "ordinarily
// called by all threads in the warp with a common value").
template <class Use, class T, class Layout>
static inline void fill_fragment(fragment<Use, 16, 16, 16, T, Layout> &f,
                                 const typename fragment<Use, 16, 16, 16, T, Layout>::element_type &v) {
    for (int i = 0; i < 8; i++) f.x[i] = v;
}
}  // namespace wmma
}  // namespace nvcuda

namespace zt_emu {
// The calling thread's lane: its linear index in the block, modulo 32.
static inline int wmma_lane() {
    return (int)(((threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x) % 32);
}
// Each lane's part of a load or store: what every lane must agree on, checked once all arrived.
struct wmma_mem_args {
    const char *what;
    uintptr_t ptr;
    unsigned ldm;
    int col_major;  // the memory layout
    int elem_bytes;
};
static inline const char *wmma_mem_check(void *const lanes[32]) {
    static thread_local char msg[400];
    const wmma_mem_args *a0 = (const wmma_mem_args *)lanes[0];
    for (int l = 1; l < 32; l++) {
        const wmma_mem_args *a = (const wmma_mem_args *)lanes[l];
        if (a->ptr != a0->ptr || a->ldm != a0->ldm || a->col_major != a0->col_major) {
            snprintf(msg, sizeof msg,
                     "%s: lane %d passes (pointer %p, ldm %u, %s) but lane 0 (%p, %u, %s): the arguments of a WMMA "
                     "call must be the same in every lane",
                     a0->what, l, (void *)a->ptr, a->ldm, a->col_major ? "col_major" : "row_major", (void *)a0->ptr,
                     a0->ldm, a0->col_major ? "col_major" : "row_major");
            return msg;
        }
    }
    if (a0->ptr % 32) {
        snprintf(msg, sizeof msg, "%s: pointer %p is not 32-byte (256-bit) aligned, as WMMA requires", a0->what,
                 (void *)a0->ptr);
        return msg;
    }
    const unsigned mult = a0->elem_bytes == 2 ? 8 : 4;
    if (a0->ldm % mult || a0->ldm < 16) {
        snprintf(msg, sizeof msg, "%s: ldm %u is not a multiple of %u elements of %d bytes (or is < 16)", a0->what,
                 a0->ldm, mult, a0->elem_bytes);
        return msg;
    }
    return nullptr;
}

// mma_sync: every lane's fragments; the product is formed once, when the whole warp is there.
struct wmma_mma_args {
    float *d;
    const __nv_bfloat16 *a, *b;
    const float *c;
    int a_col, b_col;  // the fragments' layouts (each lane's must match: they are types)
};
static inline const char *wmma_mma_run(void *const lanes[32]) {
    float A[16][16], B[16][16], C[16][16];
    for (int l = 0; l < 32; l++) {
        const wmma_mma_args *m = (const wmma_mma_args *)lanes[l];
        for (int i = 0; i < 8; i++) {
            const int r = ((31 - l) * 8 + i) / 16, c = ((31 - l) * 8 + i) % 16;
            A[r][c] = (float)m->a[i];
            B[r][c] = (float)m->b[i];
            C[r][c] = m->c[i];
        }
    }
    for (int l = 0; l < 32; l++) {
        const wmma_mma_args *m = (const wmma_mma_args *)lanes[l];
        for (int i = 0; i < 8; i++) {
            const int r = ((31 - l) * 8 + i) / 16, c = ((31 - l) * 8 + i) % 16;
            double s = C[r][c];
            for (int k = 0; k < 16; k++) s += (double)A[r][k] * (double)B[k][c];  // exact products
            m->d[i] = (float)s;
        }
    }
    return nullptr;
}
}  // namespace zt_emu

namespace nvcuda {
namespace wmma {
template <class L>
struct zt_is_col : std::is_same<L, col_major> {};

// matrix_a / matrix_b: the layout is the fragment's type.
template <class Use, class Layout>
static inline void load_matrix_sync(fragment<Use, 16, 16, 16, __nv_bfloat16, Layout> &f, const __nv_bfloat16 *p,
                                    unsigned ldm, const char *file = __builtin_FILE(), int line = __builtin_LINE()) {
    static_assert(!std::is_same<Use, accumulator>::value, "an accumulator load names its memory layout");
    const bool col = zt_is_col<Layout>::value;
    for (int i = 0; i < 8; i++) {
        const int idx = (31 - ::zt_emu::wmma_lane()) * 8 + i, r = idx / 16, c = idx % 16;
        f.x[i] = col ? p[(size_t)c * ldm + r] : p[(size_t)r * ldm + c];
    }
    ::zt_emu::wmma_mem_args a{"wmma::load_matrix_sync", (uintptr_t)p, ldm, col, 2};
    ::zt_emu::k_warp_collective("wmma::load_matrix_sync", ::zt_emu::wmma_mem_check, &a, file, line);
}
static inline void load_matrix_sync(fragment<accumulator, 16, 16, 16, float> &f, const float *p, unsigned ldm,
                                    layout_t layout, const char *file = __builtin_FILE(), int line = __builtin_LINE()) {
    const bool col = layout == mem_col_major;
    for (int i = 0; i < 8; i++) {
        const int idx = (31 - ::zt_emu::wmma_lane()) * 8 + i, r = idx / 16, c = idx % 16;
        f.x[i] = col ? p[(size_t)c * ldm + r] : p[(size_t)r * ldm + c];
    }
    ::zt_emu::wmma_mem_args a{"wmma::load_matrix_sync", (uintptr_t)p, ldm, col, 4};
    ::zt_emu::k_warp_collective("wmma::load_matrix_sync", ::zt_emu::wmma_mem_check, &a, file, line);
}
static inline void store_matrix_sync(float *p, const fragment<accumulator, 16, 16, 16, float> &f, unsigned ldm,
                                     layout_t layout, const char *file = __builtin_FILE(),
                                     int line = __builtin_LINE()) {
    const bool col = layout == mem_col_major;
    ::zt_emu::wmma_mem_args a{"wmma::store_matrix_sync", (uintptr_t)p, ldm, col, 4};
    ::zt_emu::k_warp_collective("wmma::store_matrix_sync", ::zt_emu::wmma_mem_check, &a, file, line);
    for (int i = 0; i < 8; i++) {  // after the meet: other lanes store when they resume
        const int idx = (31 - ::zt_emu::wmma_lane()) * 8 + i, r = idx / 16, c = idx % 16;
        (col ? p[(size_t)c * ldm + r] : p[(size_t)r * ldm + c]) = f.x[i];
    }
}
template <class LA, class LB>
static inline void mma_sync(fragment<accumulator, 16, 16, 16, float> &d,
                            const fragment<matrix_a, 16, 16, 16, __nv_bfloat16, LA> &a,
                            const fragment<matrix_b, 16, 16, 16, __nv_bfloat16, LB> &b,
                            const fragment<accumulator, 16, 16, 16, float> &c, bool satf = false,
                            const char *file = __builtin_FILE(), int line = __builtin_LINE()) {
    (void)satf;
    ::zt_emu::wmma_mma_args m{d.x, a.x, b.x, c.x, zt_is_col<LA>::value, zt_is_col<LB>::value};
    ::zt_emu::k_warp_collective("wmma::mma_sync", ::zt_emu::wmma_mma_run, &m, file, line);
}
}  // namespace wmma
}  // namespace nvcuda
#endif
