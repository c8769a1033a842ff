// The subset of the CBLAS interface that kernels/cpu uses (cblas_sgemm), for the
// ZT_GPU_ONLY build on machines without OpenBLAS; served by tests/gpu/naive_cblas.c.
// Enum values are the standard CBLAS ones.
#ifndef ZT_NAIVE_CBLAS_H
#define ZT_NAIVE_CBLAS_H
#ifdef __cplusplus
extern "C" {
#endif
enum CBLAS_ORDER { CblasRowMajor = 101, CblasColMajor = 102 };
enum CBLAS_TRANSPOSE { CblasNoTrans = 111, CblasTrans = 112, CblasConjTrans = 113 };
void cblas_sgemm(enum CBLAS_ORDER order, enum CBLAS_TRANSPOSE transA, enum CBLAS_TRANSPOSE transB, int M, int N, int K,
                 float alpha, const float *A, int lda, const float *B, int ldb, float beta, float *C, int ldc);
#ifdef __cplusplus
}
#endif
#endif
