// Which OpenBLAS kernels run the CPU backend's matrix products (named in the trainer's start
// line). OpenBLAS builds with DYNAMIC_ARCH pick them once, when the library is loaded, from
// the CPU or from OPENBLAS_CORETYPE; zerotrain never overrides that choice (some older OpenBLAS
// builds compute wrong results with the kernels they would pick on some processors, which is
// why a machine may pin them: docs/benchmarks.md, head-to-head).
// defines: zt_blas_core_name
#include "kernels/ops.h"

char *openblas_get_corename(void);  // OpenBLAS extension, not in cblas.h everywhere

const char *zt_blas_core_name(void) {
    const char *c = openblas_get_corename();
    return c && *c ? c : "unknown";
}
