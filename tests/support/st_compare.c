// Test helper: compares two safetensors files tensor by tensor.
//   st_compare A B TOL   -> 0 when both hold the same tensor names and shapes and every
// tensor's max|a-b| / max|b| <= TOL (TOL 0 demands bit-identical values); prints the worst.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint/safetensors.h"
#include "base/common.h"
#include "tests/support/test_util.h"

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: st_compare A.safetensors B.safetensors TOL\n");
        return 2;
    }
    const double tol = atof(argv[3]);
    zt_st_file a, b;
    if (zt_st_open(&a, argv[1]) != 0 || zt_st_open(&b, argv[2]) != 0) zt_die_on_err();
    if (a.ntensors != b.ntensors) zt_fatal("%s has %d tensors, %s has %d", argv[1], a.ntensors, argv[2], b.ntensors);
    double worst = 0;
    const char *worst_name = "";
    int bad = 0;
    for (int i = 0; i < a.ntensors; i++) {
        const zt_st_tensor *ta = &a.tensors[i], *tb = zt_st_find(&b, ta->name);
        if (!tb || tb->numel != ta->numel) zt_fatal("tensor %s missing or of another size in %s", ta->name, argv[2]);
        float *x = zt_xmalloc((size_t)ta->numel * sizeof(float)), *y = zt_xmalloc((size_t)ta->numel * sizeof(float));
        if (zt_st_read_f32(&a, ta, x) != 0 || zt_st_read_f32(&b, tb, y) != 0) zt_die_on_err();
        double e = tol == 0 ? (memcmp(x, y, (size_t)ta->numel * sizeof(float)) != 0) : zt_rel_err(x, y, ta->numel, 1e-30);
        if (e > worst) worst = e, worst_name = ta->name;
        if (!(e <= tol)) bad++;
        free(x);
        free(y);
    }
    if (tol == 0)
        printf("%s: %d tensor%s differ bitwise%s%s\n", bad ? "FAIL" : "ok", bad, bad == 1 ? "" : "s",
               bad ? ", e.g. " : "", bad ? worst_name : "");
    else
        printf("%s: worst relative difference %.3e (%s), tolerance %.1e\n", bad ? "FAIL" : "ok", worst, worst_name, tol);
    zt_st_close(&a);
    zt_st_close(&b);
    return bad ? 1 : 0;
}
