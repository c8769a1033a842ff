// cudaemu: cuBLASLt on the CPU (the subset of include/cublasLt.h), written from NVIDIA's
// documented column-major semantics so that kernels/cuda/matmul.cu runs unchanged: descriptors
// are plain structs, the product runs on the stream's thread as one op with a declared footprint.
//
// Sources for every behaviour below ("docs" = NVIDIA cuBLAS documentation, chapter "Using the
// cuBLASLt API", CUDA 13; "observed" = the host-side functions of the real libcublasLt.so.13,
// which run without a GPU, called on this machine; "own choice" = neither says, see the comment).
//   - D = alpha * op(A) op(B) + beta * C, column-major; op(A) m x k, op(B) k x n, C, D m x n;
//     batch entry b at base + b * STRIDED_BATCH_OFFSET elements (docs, cublasLtMatmul and
//     cublasLtMatrixLayoutAttribute_t). Stride 0 reuses one matrix for every entry.
//   - "in-place matrix multiplication (C == D and Cdesc == Ddesc) and out-of-place matrix
//     multiplication (C != D, both matrices must have the same data type, number of rows, number
//     of columns, batch size, and memory order). In the out-of-place case, the leading dimension
//     of C can be different from the leading dimension of D. Specifically the leading dimension
//     of C can be 0 to achieve row or column broadcast. If Cdesc is omitted, this function assumes
//     it to be equal to Ddesc." (docs, cublasLtMatmul)
//   - beta == 0: C is not read ("If beta==0, C does not have to be a valid input", docs of the
//     cuBLAS GEMMs; the Lt chapter does not repeat it). NaN in C never reaches D.
//   - Numerics: bf16/fp32 operands widened to fp32, products accumulated in fp32 (OpenBLAS
//     cblas_sgemm on dense fp32 copies: a fixed order for a given build and thread count), then
//     alpha * acc + beta * C in fp32, rounded to D's type to nearest even (NaN -> 0x7fff, the
//     canonical bf16 NaN of cuda_bf16.hpp).
#include <cblas.h>
#include <cublasLt.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "emu.h"

// ---- state ---------------------------------------------------------------------------------------
// A magic word per kind catches a descriptor of one kind passed as another (and, usually, one
// used after its destroy, which clears it).
enum : uint64_t {
    MAGIC_HANDLE = 0x5a544c5448414e44ull,  // "ZTLTHAND"
    MAGIC_DESC = 0x5a544c5444455343ull,
    MAGIC_LAYOUT = 0x5a544c544c41594full,
    MAGIC_PREF = 0x5a544c5450524546ull,
    MAGIC_ALGO = 0x5a544c54414c4731ull,  // "ZTLTALG1"
};

struct zt_emu_lt_context {
    uint64_t magic;
    int device;  // current device at cublasLtCreate (diagnostics only: Lt handles are not tied to one)
};

struct zt_emu_lt_layout {
    uint64_t magic;
    uint32_t type;  // cudaDataType
    int32_t order;  // cublasLtOrder_t
    uint64_t rows, cols;
    int64_t ld;
    int32_t batch;        // BATCH_COUNT
    int64_t stride;       // STRIDED_BATCH_OFFSET, elements
    int64_t plane;        // PLANE_OFFSET
    uint32_t batch_mode;  // cublasLtBatchMode_t
};

// Every attribute of cublasLtMatmulDescAttributes_t is stored (Get returns what Set stored);
// which of them the emulation honours or rejects is decided in check_problem.
struct zt_emu_lt_matmul_desc {
    uint64_t magic;
    int32_t compute_type, scale_type, pointer_mode, transa, transb, transc, fill_mode;
    uint32_t epilogue;
    const void *bias;
    int64_t bias_batch_stride;
    void *aux;
    int64_t aux_ld, aux_batch_stride, alpha_vector_batch_stride;
    int32_t sm_count_target;
    int32_t attr16;  // id 16: not in cublasLt.h, but libcublasLt 13 accepts it as 4 bytes (observed)
    const void *a_scale, *b_scale, *c_scale, *d_scale;
    void *amax_d;
    int32_t aux_data_type;
    void *aux_scale, *aux_amax;
    int8_t fast_accum;
    int32_t bias_data_type;
    int32_t a_scale_mode, b_scale_mode, c_scale_mode, d_scale_mode, aux_scale_mode;
    void *d_out_scale;
    int32_t d_out_scale_mode;
    void *emulation_desc;
};

struct zt_emu_lt_preference {
    uint64_t magic;
    uint32_t search_mode;
    uint64_t max_workspace;
    uint32_t reduction_mask;
    uint32_t align[4];  // MIN_ALIGNMENT_{A,B,C,D}_BYTES
    float max_waves;
    uint64_t impl_mask;
};

namespace {

// ---- diagnostics ---------------------------------------------------------------------------------
// The real library says why it rejects a call only in its log (CUBLASLT_LOG_LEVEL >= 1); the
// emulation prints its reason under the same variable or ZT_EMU_VERBOSE=1.
bool lt_log_on() {
    static const bool on = [] {
        const char *e = getenv("CUBLASLT_LOG_LEVEL");
        return (e && atoi(e) >= 1) || zt_emu::verbose();
    }();
    return on;
}

const char *status_name(cublasStatus_t s) {
    switch (s) {  // the strings of libcublasLt 13 (observed)
        case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
        case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
        case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
        case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
        case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
        case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
        case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
        case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
        case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
        case CUBLAS_STATUS_LICENSE_ERROR: return "CUBLAS_STATUS_LICENSE_ERROR";
    }
    return "unrecognized status";
}

__attribute__((format(printf, 3, 4))) cublasStatus_t fail(cublasStatus_t s, const char *fn, const char *fmt, ...) {
    if (lt_log_on()) {
        char msg[512];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
        fprintf(stderr, "cudaemu: cublasLt: %s: %s -> %s\n", fn, msg, status_name(s));
    }
    return s;
}

// ---- attributes ------------------------------------------------------------------------------------
// (storage, size) of one attribute; size 0: no such attribute. Sizes are those of the header's
// comments and of the real library (observed: a wrong size or an unknown id is INVALID_VALUE).
struct slot {
    void *p;
    size_t size;
};

// docs (every SetAttribute): "CUBLAS_STATUS_INVALID_VALUE if buf is NULL or sizeInBytes doesn't
// match size of internal storage for selected attribute". No value is checked here: the real
// library stores any value (observed: BATCH_COUNT 0, LD -3, ORDER 7 are all SUCCESS) and judges
// the configuration at the heuristic and at cublasLtMatmul; so does the emulation.
cublasStatus_t attr_set(slot s, const void *buf, size_t size, const char *fn, int attr) {
    if (!s.p) return fail(CUBLAS_STATUS_INVALID_VALUE, fn, "unknown attribute %d", attr);
    if (!buf) return fail(CUBLAS_STATUS_INVALID_VALUE, fn, "attribute %d: buf is NULL", attr);
    if (size != s.size)
        return fail(CUBLAS_STATUS_INVALID_VALUE, fn, "attribute %d: sizeInBytes %zu, the attribute has %zu", attr, size,
                    s.size);
    memcpy(s.p, buf, size);
    return CUBLAS_STATUS_SUCCESS;
}

// docs (every GetAttribute): "INVALID_VALUE if sizeInBytes is 0 and sizeWritten is NULL, or if
// sizeInBytes is non-zero and buf is NULL or sizeInBytes doesn't match size of internal storage";
// sizeInBytes 0 asks for the size in *sizeWritten.
cublasStatus_t attr_get(slot s, void *buf, size_t size, size_t *written, const char *fn, int attr) {
    if (!s.p) return fail(CUBLAS_STATUS_INVALID_VALUE, fn, "unknown attribute %d", attr);
    if (size == 0) {
        if (!written)
            return fail(CUBLAS_STATUS_INVALID_VALUE, fn, "attribute %d: sizeInBytes 0, sizeWritten NULL", attr);
        *written = s.size;
        return CUBLAS_STATUS_SUCCESS;
    }
    if (!buf) return fail(CUBLAS_STATUS_INVALID_VALUE, fn, "attribute %d: buf is NULL", attr);
    if (size != s.size)
        return fail(CUBLAS_STATUS_INVALID_VALUE, fn, "attribute %d: sizeInBytes %zu, the attribute has %zu", attr, size,
                    s.size);
    memcpy(buf, s.p, size);
    if (written) *written = size;
    return CUBLAS_STATUS_SUCCESS;
}

slot layout_slot(zt_emu_lt_layout *l, int attr) {
    switch (attr) {
        case CUBLASLT_MATRIX_LAYOUT_TYPE: return {&l->type, 4};
        case CUBLASLT_MATRIX_LAYOUT_ORDER: return {&l->order, 4};
        case CUBLASLT_MATRIX_LAYOUT_ROWS: return {&l->rows, 8};
        case CUBLASLT_MATRIX_LAYOUT_COLS: return {&l->cols, 8};
        case CUBLASLT_MATRIX_LAYOUT_LD: return {&l->ld, 8};
        case CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT: return {&l->batch, 4};
        case CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET: return {&l->stride, 8};
        case CUBLASLT_MATRIX_LAYOUT_PLANE_OFFSET: return {&l->plane, 8};
        case CUBLASLT_MATRIX_LAYOUT_BATCH_MODE: return {&l->batch_mode, 4};
    }
    return {nullptr, 0};
}

slot desc_slot(zt_emu_lt_matmul_desc *d, int attr) {
    switch (attr) {
        case CUBLASLT_MATMUL_DESC_COMPUTE_TYPE: return {&d->compute_type, 4};
        case CUBLASLT_MATMUL_DESC_SCALE_TYPE: return {&d->scale_type, 4};
        case CUBLASLT_MATMUL_DESC_POINTER_MODE: return {&d->pointer_mode, 4};
        case CUBLASLT_MATMUL_DESC_TRANSA: return {&d->transa, 4};
        case CUBLASLT_MATMUL_DESC_TRANSB: return {&d->transb, 4};
        case CUBLASLT_MATMUL_DESC_TRANSC: return {&d->transc, 4};
        case CUBLASLT_MATMUL_DESC_FILL_MODE: return {&d->fill_mode, 4};
        case CUBLASLT_MATMUL_DESC_EPILOGUE: return {&d->epilogue, 4};
        case CUBLASLT_MATMUL_DESC_BIAS_POINTER: return {&d->bias, sizeof(void *)};
        case CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE: return {&d->bias_batch_stride, 8};
        case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER: return {&d->aux, sizeof(void *)};
        case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD: return {&d->aux_ld, 8};
        case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_BATCH_STRIDE: return {&d->aux_batch_stride, 8};
        case CUBLASLT_MATMUL_DESC_ALPHA_VECTOR_BATCH_STRIDE: return {&d->alpha_vector_batch_stride, 8};
        case CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET: return {&d->sm_count_target, 4};
        case 16: return {&d->attr16, 4};
        case CUBLASLT_MATMUL_DESC_A_SCALE_POINTER: return {&d->a_scale, sizeof(void *)};
        case CUBLASLT_MATMUL_DESC_B_SCALE_POINTER: return {&d->b_scale, sizeof(void *)};
        case CUBLASLT_MATMUL_DESC_C_SCALE_POINTER: return {&d->c_scale, sizeof(void *)};
        case CUBLASLT_MATMUL_DESC_D_SCALE_POINTER: return {&d->d_scale, sizeof(void *)};
        case CUBLASLT_MATMUL_DESC_AMAX_D_POINTER: return {&d->amax_d, sizeof(void *)};
        case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE: return {&d->aux_data_type, 4};
        case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_SCALE_POINTER: return {&d->aux_scale, sizeof(void *)};
        case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_AMAX_POINTER: return {&d->aux_amax, sizeof(void *)};
        case CUBLASLT_MATMUL_DESC_FAST_ACCUM: return {&d->fast_accum, 1};
        case CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE: return {&d->bias_data_type, 4};
        case CUBLASLT_MATMUL_DESC_A_SCALE_MODE: return {&d->a_scale_mode, 4};
        case CUBLASLT_MATMUL_DESC_B_SCALE_MODE: return {&d->b_scale_mode, 4};
        case CUBLASLT_MATMUL_DESC_C_SCALE_MODE: return {&d->c_scale_mode, 4};
        case CUBLASLT_MATMUL_DESC_D_SCALE_MODE: return {&d->d_scale_mode, 4};
        case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_SCALE_MODE: return {&d->aux_scale_mode, 4};
        case CUBLASLT_MATMUL_DESC_D_OUT_SCALE_POINTER: return {&d->d_out_scale, sizeof(void *)};
        case CUBLASLT_MATMUL_DESC_D_OUT_SCALE_MODE: return {&d->d_out_scale_mode, 4};
        case CUBLASLT_MATMUL_DESC_EMULATION_DESCRIPTOR: return {&d->emulation_desc, sizeof(void *)};
    }
    return {nullptr, 0};
}

slot pref_slot(zt_emu_lt_preference *p, int attr) {
    switch (attr) {
        case CUBLASLT_MATMUL_PREF_SEARCH_MODE: return {&p->search_mode, 4};
        case CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES: return {&p->max_workspace, 8};
        case CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK: return {&p->reduction_mask, 4};
        case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES: return {&p->align[0], 4};
        case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES: return {&p->align[1], 4};
        case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES: return {&p->align[2], 4};
        case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES: return {&p->align[3], 4};
        case CUBLASLT_MATMUL_PREF_MAX_WAVES_COUNT: return {&p->max_waves, 4};
        case CUBLASLT_MATMUL_PREF_IMPL_MASK: return {&p->impl_mask, 8};
    }
    return {nullptr, 0};
}

// Defaults of the real library (observed, and as documented per attribute).
void pref_defaults(zt_emu_lt_preference *p) {
    memset(p, 0, sizeof *p);
    p->magic = MAGIC_PREF;
    p->search_mode = CUBLASLT_SEARCH_BEST_FIT;
    p->max_workspace = 0;
    p->reduction_mask = CUBLASLT_REDUCTION_SCHEME_MASK;
    for (int i = 0; i < 4; i++) p->align[i] = 256;
    p->max_waves = 0.0f;
    p->impl_mask = ~0ull;
}

bool is_handle(cublasLtHandle_t h) { return h && h->magic == MAGIC_HANDLE; }
bool is_desc(cublasLtMatmulDesc_t d) { return d && d->magic == MAGIC_DESC; }
bool is_layout(cublasLtMatrixLayout_t l) { return l && l->magic == MAGIC_LAYOUT; }
bool is_pref(cublasLtMatmulPreference_t p) { return p && p->magic == MAGIC_PREF; }

// ---- the problem -----------------------------------------------------------------------------------
struct mat {
    int32_t type;  // CUDA_R_16BF or CUDA_R_32F
    size_t elem;   // bytes per element
    int64_t rows, cols, ld, stride;
};

struct problem {
    mat a, b, c, d;
    int ta, tb;  // 1: op is the transpose
    int64_t m, n, k;
    int32_t batch;
    int32_t compute_type;
    bool c_is_d_desc;  // Cdesc omitted or the same object as Ddesc
};

size_t elem_size(int32_t t) { return t == CUDA_R_16BF ? 2 : t == CUDA_R_32F ? 4 : 0; }

const char *type_name(int32_t t) {
    switch (t) {
        case CUDA_R_16F: return "CUDA_R_16F";
        case CUDA_R_32F: return "CUDA_R_32F";
        case CUDA_R_64F: return "CUDA_R_64F";
        case CUDA_R_8I: return "CUDA_R_8I";
        case CUDA_R_32I: return "CUDA_R_32I";
        case CUDA_R_16BF: return "CUDA_R_16BF";
    }
    return "(other cudaDataType)";
}

// Validates the operation and layout descriptors (everything the heuristic and cublasLtMatmul
// can judge without the pointers) and fills p. Unsupported (not emulated, or not offered by
// NVIDIA for these types): NOT_SUPPORTED. Impossible or inconsistent: INVALID_VALUE.
cublasStatus_t check_problem(const zt_emu_lt_matmul_desc *op, const zt_emu_lt_layout *A, const zt_emu_lt_layout *B,
                             const zt_emu_lt_layout *C, const zt_emu_lt_layout *D, problem *p, const char *fn) {
    const cublasStatus_t NS = CUBLAS_STATUS_NOT_SUPPORTED, IV = CUBLAS_STATUS_INVALID_VALUE;
    // Types: the docs' cublasLtMatmul table, rows for computeType CUBLAS_COMPUTE_32F[_PEDANTIC],
    // scaleType CUDA_R_32F: Atype/Btype CUDA_R_16BF with Ctype CUDA_R_16BF or CUDA_R_32F, and
    // CUDA_R_32F with CUDA_R_32F. PEDANTIC only forbids reduced-precision tricks the emulation never
    // uses, so both share one implementation. Not emulated (NOT_SUPPORTED): every other row of the
    // table (16F, 8I/32I, 64F, complex, FP8/FP4, the FAST_*/EMULATED_* compute types, whose
    // down-conversion to TF32/bf16 the emulation would not reproduce).
    if (op->compute_type != CUBLAS_COMPUTE_32F && op->compute_type != CUBLAS_COMPUTE_32F_PEDANTIC)
        return fail(NS, fn, "compute type %d not emulated (CUBLAS_COMPUTE_32F[_PEDANTIC] only)", op->compute_type);
    if (op->scale_type != CUDA_R_32F)
        return fail(NS, fn, "scale type %s with CUBLAS_COMPUTE_32F: only CUDA_R_32F", type_name(op->scale_type));
    if (op->pointer_mode != CUBLASLT_POINTER_MODE_HOST)  // device scalars and alpha vectors: not emulated
        return fail(NS, fn, "pointer mode %d not emulated (CUBLASLT_POINTER_MODE_HOST only)", op->pointer_mode);
    if (op->epilogue != CUBLASLT_EPILOGUE_DEFAULT)  // bias, ReLU, GELU and gradient epilogues: not emulated
        return fail(NS, fn, "epilogue %u not emulated (CUBLASLT_EPILOGUE_DEFAULT only)", op->epilogue);
    for (int i = 0; i < 2; i++) {
        int32_t t = i ? op->transb : op->transa;
        // CUBLAS_OP_C of a real matrix is its transpose. CUBLAS_OP_CONJG: "not supported in the
        // current release" (cublas_api.h). Anything else is not a cublasOperation_t.
        if (t == CUBLAS_OP_CONJG) return fail(NS, fn, "TRANS%c CUBLAS_OP_CONJG is not supported", 'A' + i);
        if (t != CUBLAS_OP_N && t != CUBLAS_OP_T && t != CUBLAS_OP_C)
            return fail(IV, fn, "TRANS%c %d is not a cublasOperation_t", 'A' + i, t);
    }
    // docs, TRANSC: "Currently only CUBLAS_OP_N is supported".
    if (op->transc != CUBLAS_OP_N) return fail(NS, fn, "TRANSC %d: only CUBLAS_OP_N is supported", op->transc);
    // docs, FILL_MODE: "not supported for bfloat16 ... and is not supported on ... Hopper, Blackwell".
    if (op->fill_mode != CUBLAS_FILL_MODE_FULL)
        return fail(NS, fn, "FILL_MODE %d: only CUBLAS_FILL_MODE_FULL", op->fill_mode);
    // docs: the A/B/D scale, amax and D_OUT scale attributes "If set for an unsupported matrix data,
    // scale, and compute type combination, calling cublasLtMatmul() will return CUBLAS_INVALID_VALUE"
    // (they belong to the FP8/FP4 paths, none of which is a 16BF/32F combination).
    if (op->a_scale || op->b_scale || op->d_scale || op->amax_d || op->aux_scale || op->aux_amax || op->d_out_scale)
        return fail(IV, fn, "a scale/amax pointer is set: FP8/FP4 only, not for %s operands", type_name(A->type));
    // A C scale is allowed for these types by NVIDIA (tensorwide mode) but not emulated; scale
    // modes only describe narrow-precision scales; attribute 16 is undocumented.
    if (op->c_scale) return fail(NS, fn, "CUBLASLT_MATMUL_DESC_C_SCALE_POINTER not emulated");
    if (op->a_scale_mode || op->b_scale_mode || op->c_scale_mode || op->d_scale_mode || op->aux_scale_mode ||
        op->d_out_scale_mode)
        return fail(NS, fn, "matrix scale modes not emulated");
    if (op->attr16) return fail(NS, fn, "undocumented matmul attribute 16 = %d not emulated", op->attr16);
    // Ignored because they have no effect here: BIAS_*/EPILOGUE_AUX_* (read only by the rejected
    // epilogues), ALPHA_VECTOR_BATCH_STRIDE (alpha-vector pointer modes only), SM_COUNT_TARGET (a
    // tuning hint), FAST_ACCUM (FP8 only), EMULATION_DESCRIPTOR (EMULATED_* compute types only).

    const zt_emu_lt_layout *L[4] = {A, B, C, D};
    const char NAME[4] = {'A', 'B', 'C', 'D'};
    for (int i = 0; i < 4; i++) {
        const zt_emu_lt_layout *l = L[i];
        // Other memory orders (ROW and the IMMA tile orders), pointer-array batches and planar
        // complex matrices are not emulated.
        if (l->order != CUBLASLT_ORDER_COL)
            return fail(NS, fn, "%c: memory order %d not emulated (CUBLASLT_ORDER_COL only)", NAME[i], l->order);
        if (l->batch_mode != CUBLASLT_BATCH_MODE_STRIDED)
            return fail(NS, fn, "%c: batch mode %u not emulated (strided only)", NAME[i], l->batch_mode);
        if (l->plane != 0) return fail(NS, fn, "%c: planar-complex layout (PLANE_OFFSET) not emulated", NAME[i]);
    }
    const int32_t at = (int32_t)A->type, bt = (int32_t)B->type, ct = (int32_t)C->type, dt = (int32_t)D->type;
    bool types_ok =
        at == bt && ct == dt &&
        ((at == CUDA_R_16BF && (ct == CUDA_R_16BF || ct == CUDA_R_32F)) || (at == CUDA_R_32F && ct == CUDA_R_32F));
    if (!types_ok)
        return fail(NS, fn,
                    "types A %s B %s C %s D %s: not a cuBLASLt combination the emulation offers (A/B 16BF with "
                    "C/D 16BF or 32F, or all 32F; C and D of one type)",
                    type_name(at), type_name(bt), type_name(ct), type_name(dt));
    // docs, ROWS/COLS: "Usually only values that can be expressed as int32_t are supported".
    for (int i = 0; i < 4; i++)
        if (L[i]->rows > 0x7fffffffull || L[i]->cols > 0x7fffffffull)
            return fail(NS, fn, "%c: %llu x %llu exceeds int32", NAME[i], (unsigned long long)L[i]->rows,
                        (unsigned long long)L[i]->cols);

    p->compute_type = op->compute_type;
    p->c_is_d_desc = C == D;
    p->ta = op->transa != CUBLAS_OP_N;
    p->tb = op->transb != CUBLAS_OP_N;
    mat *M[4] = {&p->a, &p->b, &p->c, &p->d};
    for (int i = 0; i < 4; i++) {
        M[i]->type = (int32_t)L[i]->type;
        M[i]->elem = elem_size(M[i]->type);
        M[i]->rows = (int64_t)L[i]->rows;
        M[i]->cols = (int64_t)L[i]->cols;
        M[i]->ld = L[i]->ld;
        M[i]->stride = L[i]->stride;
    }
    // LD: "Currently only non-negative values are supported, must be large enough so that matrix
    // memory locations are not overlapping (e.g. greater or equal to CUBLASLT_MATRIX_LAYOUT_ROWS in
    // case of CUBLASLT_ORDER_COL)" (docs, cublasLtMatrixLayoutAttribute_t). cublasLtMatrixLayoutCreate
    // documents only ALLOC_FAILED and SUCCESS, and the real one accepts ld < rows (observed), so the
    // check belongs to the heuristic and cublasLtMatmul; the docs do not name the status there:
    // INVALID_VALUE ("in conflict or in an impossible configuration", docs of cublasLtMatmul) is the
    // emulation's choice. Exception (docs, quoted at the top): C of an out-of-place product may have
    // ld 0, broadcasting its first column to every column.
    for (int i = 0; i < 4; i++) {
        const mat &x = *M[i];
        bool c_broadcast = i == 2 && !p->c_is_d_desc && x.ld == 0;
        if (x.ld < x.rows && !c_broadcast)
            return fail(IV, fn, "%c: ld %lld < rows %lld", NAME[i], (long long)x.ld, (long long)x.rows);
    }
    // Batches: every layout's BATCH_COUNT must be positive and the same (broadcasting is done with
    // a stride of 0, not with a count of 1); own choice of INVALID_VALUE, the docs only require C
    // and D to have the same "batch size".
    for (int i = 0; i < 4; i++)
        if (L[i]->batch < 1) return fail(IV, fn, "%c: batch count %d", NAME[i], L[i]->batch);
    if (A->batch != B->batch || A->batch != C->batch || A->batch != D->batch)
        return fail(IV, fn, "batch counts differ: A %d B %d C %d D %d", A->batch, B->batch, C->batch, D->batch);
    p->batch = A->batch;
    // Shapes: op(A) m x k, op(B) k x n, C and D m x n.
    p->m = p->ta ? p->a.cols : p->a.rows;
    p->k = p->ta ? p->a.rows : p->a.cols;
    const int64_t kb = p->tb ? p->b.cols : p->b.rows;
    p->n = p->tb ? p->b.rows : p->b.cols;
    if (kb != p->k)
        return fail(IV, fn, "op(A) is %lld x %lld but op(B) is %lld x %lld", (long long)p->m, (long long)p->k,
                    (long long)kb, (long long)p->n);
    for (int i = 2; i < 4; i++)
        if (M[i]->rows != p->m || M[i]->cols != p->n)
            return fail(IV, fn, "%c is %lld x %lld, op(A) op(B) is %lld x %lld", NAME[i], (long long)M[i]->rows,
                        (long long)M[i]->cols, (long long)p->m, (long long)p->n);
    return CUBLAS_STATUS_SUCCESS;
}

// ---- the algorithm ---------------------------------------------------------------------------------
// The one "algorithm" of the emulation, serialised into cublasLtMatmulAlgo_t::data so that
// cublasLtMatmul can check it against its call (docs, cublasLtMatmulAlgoCheck: INVALID_VALUE "if
// matrix layout descriptors or the operation descriptor do not match the algo descriptor"):
//   data[0] MAGIC_ALGO
//   data[1] compute type | scale type << 16 | A/B type << 24 | C/D type << 32
//   data[2] byte alignment it was chosen for: A | B << 16 | C << 32 | D << 48 (powers of two <= 256)
//   data[3] workspace bytes it needs (0)
enum { ALGO_MAGIC = 0, ALGO_TYPES = 1, ALGO_ALIGN = 2, ALGO_WORKSPACE = 3 };

uint64_t algo_types(const problem &p) {
    return (uint64_t)(uint32_t)p.compute_type | (uint64_t)CUDA_R_32F << 16 | (uint64_t)(uint8_t)p.a.type << 24 |
           (uint64_t)(uint8_t)p.d.type << 32;
}

// The largest power of two <= 256 dividing v (0 for 0): the alignment a value guarantees.
uint32_t pow2_part(uint64_t v) {
    if (v == 0) return 0;
    uint32_t a = 1;
    while (a < 256 && !(v & a)) a <<= 1;
    return a;
}

// The heuristic's choice: one algorithm, usable when every operand is promised at least its
// element size of alignment. A preference promising less (MIN_ALIGNMENT below the element size)
// leaves no algorithm: NOT_SUPPORTED, own choice (no kernel can load misaligned elements).
cublasStatus_t choose_algo(const problem &p, const zt_emu_lt_preference &pref, cublasLtMatmulHeuristicResult_t *res,
                           const char *fn) {
    // docs, CUBLASLT_SEARCH_LIMITED_BY_ALGO_ID needs an algo from cublasLtMatmulAlgoInit, which the
    // emulation does not offer; the other values are reserved.
    if (pref.search_mode != CUBLASLT_SEARCH_BEST_FIT)
        return fail(CUBLAS_STATUS_NOT_SUPPORTED, fn, "search mode %u not emulated (CUBLASLT_SEARCH_BEST_FIT only)",
                    pref.search_mode);
    // IMPL_MASK filters algorithms by how they compute; the emulated one is what an NVIDIA GPU
    // would use: tensor ops (HMMA) on bf16 inputs, FMA on fp32 inputs, fp32 accumulation.
    uint64_t impl =
        CUBLASLT_NUMERICAL_IMPL_FLAGS_ACCUMULATOR_32F |
        (p.a.type == CUDA_R_16BF ? CUBLASLT_NUMERICAL_IMPL_FLAGS_HMMA | CUBLASLT_NUMERICAL_IMPL_FLAGS_INPUT_16BF
                                 : CUBLASLT_NUMERICAL_IMPL_FLAGS_FMA | CUBLASLT_NUMERICAL_IMPL_FLAGS_INPUT_32F);
    if ((impl & pref.impl_mask) != impl)
        return fail(CUBLAS_STATUS_NOT_SUPPORTED, fn, "IMPL_MASK 0x%llx excludes the algorithm (0x%llx)",
                    (unsigned long long)pref.impl_mask, (unsigned long long)impl);
    const float waves = 1.0f;
    if (pref.max_waves > 0.0f && waves > pref.max_waves)
        return fail(CUBLAS_STATUS_NOT_SUPPORTED, fn, "MAX_WAVES_COUNT %g excludes the algorithm (%g)",
                    (double)pref.max_waves, (double)waves);
    const mat *M[4] = {&p.a, &p.b, &p.c, &p.d};
    uint64_t al = 0;
    for (int i = 0; i < 4; i++) {
        uint32_t a = pow2_part(pref.align[i]);
        if (a < M[i]->elem)
            return fail(CUBLAS_STATUS_NOT_SUPPORTED, fn, "MIN_ALIGNMENT_%c_BYTES %u is below the element size %zu",
                        'A' + i, pref.align[i], M[i]->elem);
        al |= (uint64_t)a << (16 * i);
    }
    // The reduction-scheme mask and the workspace limit constrain split-K algorithms; this one
    // needs neither a reduction nor a workspace, so every value admits it.
    memset(res, 0, sizeof *res);
    res->algo.data[ALGO_MAGIC] = MAGIC_ALGO;
    res->algo.data[ALGO_TYPES] = algo_types(p);
    res->algo.data[ALGO_ALIGN] = al;
    res->algo.data[ALGO_WORKSPACE] = 0;
    res->workspaceSize = 0;
    res->state = CUBLAS_STATUS_SUCCESS;
    res->wavesCount = waves;
    return CUBLAS_STATUS_SUCCESS;
}

// ---- numerics --------------------------------------------------------------------------------------
inline float bf16_to_f32(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

inline uint16_t f32_to_bf16(float f) {  // round to nearest even; NaN -> canonical 0x7fff
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fff;
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

inline float load(const char *base, int32_t type, int64_t idx) {
    if (type == CUDA_R_16BF) {
        uint16_t h;
        memcpy(&h, base + idx * 2, 2);
        return bf16_to_f32(h);
    }
    float f;
    memcpy(&f, base + idx * 4, 4);
    return f;
}

inline void store(char *base, int32_t type, int64_t idx, float v) {
    if (type == CUDA_R_16BF) {
        uint16_t h = f32_to_bf16(v);
        memcpy(base + idx * 2, &h, 2);
    } else {
        memcpy(base + idx * 4, &v, 4);
    }
}

// The column segments (rows * elem bytes at base + (b * stride + j * ld) * elem) of every batch
// entry, adjacent ones merged; a stride of 0 (or C's ld of 0) repeats memory, walked once.
template <class F>
void walk_segments(const mat &x, const char *base, int32_t batch, F f) {
    if (x.rows == 0 || x.cols == 0) return;
    const int64_t nb = x.stride == 0 ? 1 : batch;
    const int64_t nc = x.ld == 0 ? 1 : x.cols;
    const size_t len = (size_t)x.rows * x.elem;
    const char *start = nullptr;
    size_t run = 0;
    for (int64_t b = 0; b < nb; b++)
        for (int64_t j = 0; j < nc; j++) {
            const char *s = base + (b * x.stride + j * x.ld) * (int64_t)x.elem;
            if (start && s == start + run) {
                run += len;
                continue;
            }
            if (start) f(start, run);
            start = s;
            run = len;
        }
    if (start) f(start, run);
}

// Everything the op needs, captured by value: the descriptors may be changed or destroyed as
// soon as cublasLtMatmul returns (they are on a GPU too: the library copies what it needs).
struct op_args {
    problem p;
    const char *A, *B, *C;
    char *D;
    float alpha, beta;
    int device;  // of the stream: the operands must be its memory
};

cudaError_t run_matmul(const op_args &o) {
    const problem &p = o.p;
    const bool read_c = o.beta != 0.0f;
    // Footprint first (emu.h: declare before touching). record_* report but cannot refuse a range
    // outside every allocation, and the compute below would then touch host memory that is not
    // the program's: such a range is faulted here, as the GPU would fault the load or store.
    struct part {
        const mat *x;
        const char *base;
        bool write;
        char name;
    } parts[4] = {{&p.a, o.A, false, 'A'}, {&p.b, o.B, false, 'B'}, {&p.c, o.C, false, 'C'}, {&p.d, o.D, true, 'D'}};
    const int nparts = 4;
    for (int i = 0; i < nparts; i++) {
        if (parts[i].name == 'C' && !read_c) continue;
        const char *bad = nullptr;
        size_t bad_len = 0;
        walk_segments(*parts[i].x, parts[i].base, p.batch, [&](const char *s, size_t n) {
            if (!bad && !zt_emu::is_device_range(s, n, o.device)) {
                bad = s;
                bad_len = n;
            }
        });
        if (bad)
            return zt_emu::device_fault(cudaErrorIllegalAddress,
                                        "cublasLtMatmul: %s of %c [%p, +%zu) is not inside one live device allocation "
                                        "of device %d",
                                        parts[i].write ? "write" : "read", parts[i].name, (void *)bad, bad_len,
                                        o.device);
    }
    for (int i = 0; i < nparts; i++) {
        if (parts[i].name == 'C' && !read_c) continue;
        if (parts[i].write)
            walk_segments(*parts[i].x, parts[i].base, p.batch,
                          [](const char *s, size_t n) { zt_emu::record_write((void *)s, n); });
        else
            walk_segments(*parts[i].x, parts[i].base, p.batch,
                          [](const char *s, size_t n) { zt_emu::record_read(s, n); });
    }
    if (p.m == 0 || p.n == 0) return cudaSuccess;

    // fp32 views of A and B: fp32 operands with an int-sized ld are used in place, others are
    // widened into dense (ld = rows) copies; reading only rows per column leaves the padding
    // between columns unread, as declared.
    const bool a_direct = p.a.type == CUDA_R_32F && p.a.ld <= 0x7fffffff;
    const bool b_direct = p.b.type == CUDA_R_32F && p.b.ld <= 0x7fffffff;
    const size_t na = p.k > 0 && !a_direct ? (size_t)p.a.rows * (size_t)p.a.cols : 0;
    const size_t nb = p.k > 0 && !b_direct ? (size_t)p.b.rows * (size_t)p.b.cols : 0;
    const size_t nacc = (size_t)p.m * (size_t)p.n;
    float *abuf = na ? (float *)malloc(na * sizeof(float)) : nullptr;
    float *bbuf = nb ? (float *)malloc(nb * sizeof(float)) : nullptr;
    float *acc = (float *)malloc(nacc * sizeof(float));
    if ((na && !abuf) || (nb && !bbuf) || !acc) {
        free(abuf);
        free(bbuf);
        free(acc);
        return zt_emu::device_fault(cudaErrorLaunchFailure,
                                    "cublasLtMatmul: out of host memory for the %lld x %lld x %lld product",
                                    (long long)p.m, (long long)p.n, (long long)p.k);
    }
    for (int32_t bi = 0; bi < p.batch; bi++) {
        const char *Ab = o.A + bi * p.a.stride * (int64_t)p.a.elem;
        const char *Bb = o.B + bi * p.b.stride * (int64_t)p.b.elem;
        const char *Cb = o.C ? o.C + bi * p.c.stride * (int64_t)p.c.elem : nullptr;
        char *Db = o.D + bi * p.d.stride * (int64_t)p.d.elem;
        if (p.k > 0) {
            const float *af, *bf;
            int lda, ldb;
            if (a_direct) {
                af = (const float *)Ab;
                lda = (int)(p.a.ld > 0 ? p.a.ld : 1);
            } else {
                if (bi == 0 || p.a.stride != 0)  // a stride of 0 reuses the widened copy
                    for (int64_t j = 0; j < p.a.cols; j++)
                        for (int64_t i = 0; i < p.a.rows; i++)
                            abuf[i + j * p.a.rows] = load(Ab, p.a.type, i + j * p.a.ld);
                af = abuf;
                lda = (int)p.a.rows;
            }
            if (b_direct) {
                bf = (const float *)Bb;
                ldb = (int)(p.b.ld > 0 ? p.b.ld : 1);
            } else {
                if (bi == 0 || p.b.stride != 0)
                    for (int64_t j = 0; j < p.b.cols; j++)
                        for (int64_t i = 0; i < p.b.rows; i++)
                            bbuf[i + j * p.b.rows] = load(Bb, p.b.type, i + j * p.b.ld);
                bf = bbuf;
                ldb = (int)p.b.rows;
            }
            cblas_sgemm(CblasColMajor, p.ta ? CblasTrans : CblasNoTrans, p.tb ? CblasTrans : CblasNoTrans, (int)p.m,
                        (int)p.n, (int)p.k, 1.0f, af, lda, bf, ldb, 0.0f, acc, (int)p.m);
        } else {
            memset(acc, 0, nacc * sizeof(float));  // an empty sum
        }
        // Epilogue in fp32, C read only when beta != 0; each element of C is read before the same
        // element of D is written, so C == D (in place) is exact.
        for (int64_t j = 0; j < p.n; j++)
            for (int64_t i = 0; i < p.m; i++) {
                float v = o.alpha * acc[i + j * p.m];
                if (read_c) v += o.beta * load(Cb, p.c.type, i + j * p.c.ld);
                store(Db, p.d.type, i + j * p.d.ld, v);
            }
    }
    free(abuf);
    free(bbuf);
    free(acc);
    return cudaSuccess;
}

bool aligned(const void *ptr, int64_t stride_elems, size_t elem, int32_t batch, uint32_t align) {
    uint64_t a = (uint64_t)(uintptr_t)ptr;
    if (batch > 1) a |= (uint64_t)(stride_elems * (int64_t)elem);  // every batch entry's address
    return (a & (align - 1)) == 0;
}

}  // namespace

// ---- the API ---------------------------------------------------------------------------------------
extern "C" {

cublasStatus_t cublasLtCreate(cublasLtHandle_t *lightHandle) {
    // docs: INVALID_VALUE "lighthandle is NULL"
    if (!lightHandle) return fail(CUBLAS_STATUS_INVALID_VALUE, "cublasLtCreate", "lightHandle is NULL");
    zt_emu_lt_context *h = (zt_emu_lt_context *)calloc(1, sizeof *h);
    if (!h) return fail(CUBLAS_STATUS_ALLOC_FAILED, "cublasLtCreate", "out of host memory");
    h->magic = MAGIC_HANDLE;
    h->device = zt_emu::current_device();
    *lightHandle = h;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtDestroy(cublasLtHandle_t lightHandle) {
    // docs: INVALID_VALUE "lightHandle is NULL", NOT_INITIALIZED "The cuBLASLt library was not
    // initialized" (here: a pointer that is not a live handle).
    if (!lightHandle) return fail(CUBLAS_STATUS_INVALID_VALUE, "cublasLtDestroy", "lightHandle is NULL");
    if (!is_handle(lightHandle)) return fail(CUBLAS_STATUS_NOT_INITIALIZED, "cublasLtDestroy", "not a cuBLASLt handle");
    // docs: "the release of those resources by calling cublasLtDestroy() will implicitly call
    // cudaDeviceSynchronize()": programs may rely on that ordering, so it is reproduced. Its error
    // (a sticky one) belongs to the runtime, not to this call.
    (void)cudaDeviceSynchronize();
    lightHandle->magic = 0;
    free(lightHandle);
    return CUBLAS_STATUS_SUCCESS;
}

const char *cublasLtGetStatusName(cublasStatus_t status) { return status_name(status); }

const char *cublasLtGetStatusString(cublasStatus_t status) {
    switch (status) {  // the strings of libcublasLt 13 (observed)
        case CUBLAS_STATUS_SUCCESS: return "success";
        case CUBLAS_STATUS_NOT_INITIALIZED: return "the library was not initialized";
        case CUBLAS_STATUS_ALLOC_FAILED: return "the resource allocation failed";
        case CUBLAS_STATUS_INVALID_VALUE: return "an unsupported value or parameter was passed to the function";
        case CUBLAS_STATUS_ARCH_MISMATCH:
            return "the function requires an architectural feature absent from the device";
        case CUBLAS_STATUS_MAPPING_ERROR: return "an access to GPU memory space failed";
        case CUBLAS_STATUS_EXECUTION_FAILED: return "the function failed to launch on the GPU";
        case CUBLAS_STATUS_INTERNAL_ERROR: return "an internal operation failed";
        case CUBLAS_STATUS_NOT_SUPPORTED: return "the requested functionality is not supported";
        case CUBLAS_STATUS_LICENSE_ERROR: return "the license check failed";
    }
    return "unrecognized status";
}

// Create: NULL out-pointer INVALID_VALUE (observed; the docs list only ALLOC_FAILED/SUCCESS).
// Any compute type, scale type, data type, size and ld is accepted here (observed) and judged at
// the heuristic and cublasLtMatmul. Destroy(NULL): SUCCESS (observed). Set/Get on NULL: INVALID_VALUE (observed).
cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *matmulDesc, cublasComputeType_t computeType,
                                        cudaDataType_t scaleType) {
    if (!matmulDesc) return fail(CUBLAS_STATUS_INVALID_VALUE, "cublasLtMatmulDescCreate", "matmulDesc is NULL");
    zt_emu_lt_matmul_desc *d = (zt_emu_lt_matmul_desc *)calloc(1, sizeof *d);
    if (!d) return fail(CUBLAS_STATUS_ALLOC_FAILED, "cublasLtMatmulDescCreate", "out of host memory");
    d->magic = MAGIC_DESC;
    d->compute_type = (int32_t)computeType;
    d->scale_type = (int32_t)scaleType;
    d->pointer_mode = CUBLASLT_POINTER_MODE_HOST;
    d->transa = d->transb = d->transc = CUBLAS_OP_N;
    d->fill_mode = CUBLAS_FILL_MODE_FULL;
    d->epilogue = CUBLASLT_EPILOGUE_DEFAULT;
    d->aux_data_type = -1;
    d->bias_data_type = -1;
    *matmulDesc = d;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t matmulDesc) {
    if (!matmulDesc) return CUBLAS_STATUS_SUCCESS;
    if (!is_desc(matmulDesc))
        return fail(CUBLAS_STATUS_INVALID_VALUE, "cublasLtMatmulDescDestroy", "not a matmul descriptor");
    matmulDesc->magic = 0;
    free(matmulDesc);
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t matmulDesc, cublasLtMatmulDescAttributes_t attr,
                                              const void *buf, size_t sizeInBytes) {
    const char *fn = "cublasLtMatmulDescSetAttribute";
    if (!is_desc(matmulDesc)) return fail(CUBLAS_STATUS_INVALID_VALUE, fn, "not a matmul descriptor");
    return attr_set(desc_slot(matmulDesc, attr), buf, sizeInBytes, fn, attr);
}

cublasStatus_t cublasLtMatmulDescGetAttribute(cublasLtMatmulDesc_t matmulDesc, cublasLtMatmulDescAttributes_t attr,
                                              void *buf, size_t sizeInBytes, size_t *sizeWritten) {
    const char *fn = "cublasLtMatmulDescGetAttribute";
    if (!is_desc(matmulDesc)) return fail(CUBLAS_STATUS_INVALID_VALUE, fn, "not a matmul descriptor");
    return attr_get(desc_slot(matmulDesc, attr), buf, sizeInBytes, sizeWritten, fn, attr);
}

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *matLayout, cudaDataType type, uint64_t rows,
                                          uint64_t cols, int64_t ld) {
    if (!matLayout) return fail(CUBLAS_STATUS_INVALID_VALUE, "cublasLtMatrixLayoutCreate", "matLayout is NULL");
    zt_emu_lt_layout *l = (zt_emu_lt_layout *)calloc(1, sizeof *l);
    if (!l) return fail(CUBLAS_STATUS_ALLOC_FAILED, "cublasLtMatrixLayoutCreate", "out of host memory");
    l->magic = MAGIC_LAYOUT;
    l->type = (uint32_t)type;
    l->order = CUBLASLT_ORDER_COL;
    l->rows = rows;
    l->cols = cols;
    l->ld = ld;
    l->batch = 1;
    l->stride = 0;
    l->plane = 0;
    l->batch_mode = CUBLASLT_BATCH_MODE_STRIDED;
    *matLayout = l;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t matLayout) {
    if (!matLayout) return CUBLAS_STATUS_SUCCESS;
    if (!is_layout(matLayout))
        return fail(CUBLAS_STATUS_INVALID_VALUE, "cublasLtMatrixLayoutDestroy", "not a matrix layout");
    matLayout->magic = 0;
    free(matLayout);
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t matLayout, cublasLtMatrixLayoutAttribute_t attr,
                                                const void *buf, size_t sizeInBytes) {
    const char *fn = "cublasLtMatrixLayoutSetAttribute";
    if (!is_layout(matLayout)) return fail(CUBLAS_STATUS_INVALID_VALUE, fn, "not a matrix layout");
    return attr_set(layout_slot(matLayout, attr), buf, sizeInBytes, fn, attr);
}

cublasStatus_t cublasLtMatrixLayoutGetAttribute(cublasLtMatrixLayout_t matLayout, cublasLtMatrixLayoutAttribute_t attr,
                                                void *buf, size_t sizeInBytes, size_t *sizeWritten) {
    const char *fn = "cublasLtMatrixLayoutGetAttribute";
    if (!is_layout(matLayout)) return fail(CUBLAS_STATUS_INVALID_VALUE, fn, "not a matrix layout");
    return attr_get(layout_slot(matLayout, attr), buf, sizeInBytes, sizeWritten, fn, attr);
}

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *pref) {
    if (!pref) return fail(CUBLAS_STATUS_INVALID_VALUE, "cublasLtMatmulPreferenceCreate", "pref is NULL");
    zt_emu_lt_preference *p = (zt_emu_lt_preference *)calloc(1, sizeof *p);
    if (!p) return fail(CUBLAS_STATUS_ALLOC_FAILED, "cublasLtMatmulPreferenceCreate", "out of host memory");
    pref_defaults(p);
    *pref = p;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref) {
    if (!pref) return CUBLAS_STATUS_SUCCESS;
    if (!is_pref(pref))
        return fail(CUBLAS_STATUS_INVALID_VALUE, "cublasLtMatmulPreferenceDestroy", "not a matmul preference");
    pref->magic = 0;
    free(pref);
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t pref,
                                                    cublasLtMatmulPreferenceAttributes_t attr, const void *buf,
                                                    size_t sizeInBytes) {
    const char *fn = "cublasLtMatmulPreferenceSetAttribute";
    if (!is_pref(pref)) return fail(CUBLAS_STATUS_INVALID_VALUE, fn, "not a matmul preference");
    return attr_set(pref_slot(pref, attr), buf, sizeInBytes, fn, attr);
}

cublasStatus_t cublasLtMatmulPreferenceGetAttribute(cublasLtMatmulPreference_t pref,
                                                    cublasLtMatmulPreferenceAttributes_t attr, void *buf,
                                                    size_t sizeInBytes, size_t *sizeWritten) {
    const char *fn = "cublasLtMatmulPreferenceGetAttribute";
    if (!is_pref(pref)) return fail(CUBLAS_STATUS_INVALID_VALUE, fn, "not a matmul preference");
    return attr_get(pref_slot(pref, attr), buf, sizeInBytes, sizeWritten, fn, attr);
}

// docs: INVALID_VALUE "if requestedAlgoCount is less or equal to zero", NOT_SUPPORTED "if no
// heuristic function available for current configuration", SUCCESS: inspect
// heuristicResultsArray[0 .. returnAlgoCount-1].state. A supported problem gets exactly one
// result; a configuration the emulation cannot run gets NOT_SUPPORTED with *returnAlgoCount 0, an
// impossible one INVALID_VALUE with *returnAlgoCount 0 (the real heuristic validates the
// configuration too, e.g. "[cublasLtMatmulAlgoGetHeuristic] The scaling mode for A scale ...
// requires a custom pointer" with status 7, NVIDIA/CUDALibrarySamples issue 274). A NULL handle:
// NOT_INITIALIZED with *returnAlgoCount untouched (observed). A NULL preference means the defaults
// (own choice).
cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t operationDesc,
                                              cublasLtMatrixLayout_t Adesc, cublasLtMatrixLayout_t Bdesc,
                                              cublasLtMatrixLayout_t Cdesc, cublasLtMatrixLayout_t Ddesc,
                                              cublasLtMatmulPreference_t preference, int requestedAlgoCount,
                                              cublasLtMatmulHeuristicResult_t heuristicResultsArray[],
                                              int *returnAlgoCount) {
    const char *fn = "cublasLtMatmulAlgoGetHeuristic";
    if (!is_handle(lightHandle)) return fail(CUBLAS_STATUS_NOT_INITIALIZED, fn, "not a cuBLASLt handle");
    if (!returnAlgoCount) return fail(CUBLAS_STATUS_INVALID_VALUE, fn, "returnAlgoCount is NULL");
    *returnAlgoCount = 0;
    if (requestedAlgoCount <= 0)
        return fail(CUBLAS_STATUS_INVALID_VALUE, fn, "requestedAlgoCount %d <= 0", requestedAlgoCount);
    if (!heuristicResultsArray) return fail(CUBLAS_STATUS_INVALID_VALUE, fn, "heuristicResultsArray is NULL");
    if (!is_desc(operationDesc))
        return fail(CUBLAS_STATUS_INVALID_VALUE, fn, "operationDesc is not a matmul descriptor");
    if (!Cdesc) Cdesc = Ddesc;  // docs: "If Cdesc is omitted, this function assumes it to be equal to Ddesc"
    if (!is_layout(Adesc) || !is_layout(Bdesc) || !is_layout(Cdesc) || !is_layout(Ddesc))
        return fail(CUBLAS_STATUS_INVALID_VALUE, fn, "a matrix layout (A, B or D) is NULL or not a layout");
    if (preference && !is_pref(preference))
        return fail(CUBLAS_STATUS_INVALID_VALUE, fn, "preference is not a matmul preference");
    problem p;
    cublasStatus_t s = check_problem(operationDesc, Adesc, Bdesc, Cdesc, Ddesc, &p, fn);
    if (s != CUBLAS_STATUS_SUCCESS) return s;
    zt_emu_lt_preference defaults;
    pref_defaults(&defaults);
    s = choose_algo(p, preference ? *preference : defaults, &heuristicResultsArray[0], fn);
    if (s != CUBLAS_STATUS_SUCCESS) return s;
    *returnAlgoCount = 1;
    return CUBLAS_STATUS_SUCCESS;
}

// docs: NOT_INITIALIZED "if cuBLASLt handle has not been initialized"; INVALID_VALUE "If the
// parameters are unexpectedly NULL, in conflict or in an impossible configuration. For example,
// when workspaceSizeInBytes is less than workspace required by the configured algo";
// NOT_SUPPORTED "If the current implementation on the selected device doesn't support the
// configured operation"; EXECUTION_FAILED "If CUDA reported an execution error from the device".
// All of it is judged here, synchronously; the product runs later on the stream.
cublasStatus_t cublasLtMatmul(cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t computeDesc, const void *alpha,
                              const void *A, cublasLtMatrixLayout_t Adesc, const void *B, cublasLtMatrixLayout_t Bdesc,
                              const void *beta, const void *C, cublasLtMatrixLayout_t Cdesc, void *D,
                              cublasLtMatrixLayout_t Ddesc, const cublasLtMatmulAlgo_t *algo, void *workspace,
                              size_t workspaceSizeInBytes, cudaStream_t stream) {
    const char *fn = "cublasLtMatmul";
    const cublasStatus_t IV = CUBLAS_STATUS_INVALID_VALUE;
    if (!is_handle(lightHandle)) return fail(CUBLAS_STATUS_NOT_INITIALIZED, fn, "not a cuBLASLt handle");
    if (!is_desc(computeDesc)) return fail(IV, fn, "computeDesc is NULL or not a matmul descriptor");
    const bool c_omitted = !Cdesc;
    if (c_omitted) Cdesc = Ddesc;  // docs: "If Cdesc is omitted, ... equal to Ddesc"
    if (!is_layout(Adesc) || !is_layout(Bdesc) || !is_layout(Cdesc) || !is_layout(Ddesc))
        return fail(IV, fn, "a matrix layout (A, B or D) is NULL or not a layout");
    if (!alpha || !beta) return fail(IV, fn, "alpha or beta is NULL");
    problem p;
    cublasStatus_t s = check_problem(computeDesc, Adesc, Bdesc, Cdesc, Ddesc, &p, fn);
    if (s != CUBLAS_STATUS_SUCCESS) return s;
    // CUBLASLT_POINTER_MODE_HOST (the only one check_problem admits): the scalars are read now, so
    // they may live on the caller's stack.
    float a32, b32;
    memcpy(&a32, alpha, 4);
    memcpy(&b32, beta, 4);

    // Pointers: A, B and D are required whenever they have elements; C only when beta != 0 (own
    // choice: with beta == 0 it is never read, so a NULL C is accepted).
    const bool a_empty = p.a.rows == 0 || p.a.cols == 0, b_empty = p.b.rows == 0 || p.b.cols == 0;
    const bool d_empty = p.m == 0 || p.n == 0;
    if ((!A && !a_empty) || (!B && !b_empty) || (!D && !d_empty))
        return fail(IV, fn, "A, B or D is NULL (A %p B %p D %p)", A, B, D);
    if (!C && b32 != 0.0f && !d_empty) return fail(IV, fn, "C is NULL with beta %g != 0", (double)b32);
    // docs: in place means "C == D and Cdesc == Ddesc"; the same memory described twice must be
    // described alike (same ld and batch stride; type, shape and batch count are already equal).
    if (C && C == D && !p.c_is_d_desc && (p.c.ld != p.d.ld || (p.batch > 1 && p.c.stride != p.d.stride)))
        return fail(IV, fn,
                    "C == D (in place) but Cdesc (ld %lld, stride %lld) differs from Ddesc (ld %lld, stride %lld)",
                    (long long)p.c.ld, (long long)p.c.stride, (long long)p.d.ld, (long long)p.d.stride);
    if (C && C == D && p.c.ld == 0 && !d_empty) return fail(IV, fn, "C == D (in place) with ld 0");

    // The algorithm: NULL asks for "an implicit heuristics query with default search preferences"
    // (docs); the emulation promises the alignment the pointers actually have (own choice: the
    // default preference promises 256 bytes, which the real query can check against the pointers).
    cublasLtMatmulHeuristicResult_t implicit;
    if (!algo) {
        zt_emu_lt_preference pref;
        pref_defaults(&pref);
        const void *ptrs[4] = {A, B, C ? C : D, D};
        const mat *M[4] = {&p.a, &p.b, &p.c, &p.d};
        for (int i = 0; i < 4; i++) {
            uint64_t v = (uint64_t)(uintptr_t)ptrs[i];
            if (p.batch > 1) v |= (uint64_t)(M[i]->stride * (int64_t)M[i]->elem);
            pref.align[i] = v ? pow2_part(v) : 256;
        }
        pref.max_workspace = workspaceSizeInBytes;
        s = choose_algo(p, pref, &implicit, fn);
        if (s != CUBLAS_STATUS_SUCCESS) return s;
        algo = &implicit.algo;
    }
    if (algo->data[ALGO_MAGIC] != MAGIC_ALGO)
        return fail(IV, fn, "algo was not produced by cublasLtMatmulAlgoGetHeuristic");
    if (algo->data[ALGO_TYPES] != algo_types(p))
        return fail(IV, fn, "algo was chosen for other compute/data types (0x%llx, this call 0x%llx)",
                    (unsigned long long)algo->data[ALGO_TYPES], (unsigned long long)algo_types(p));
    // Alignment: every operand (each batch entry) at least as aligned as the preference promised
    // when the algorithm was chosen, and never below its element size. INVALID_VALUE ("in
    // conflict") is the emulation's choice of status; on a GPU the kernel would fault or misread.
    {
        const void *ptrs[4] = {A, B, C, D};
        const mat *M[4] = {&p.a, &p.b, &p.c, &p.d};
        for (int i = 0; i < 4; i++) {
            if (!ptrs[i]) continue;
            if (i == 2 && b32 == 0.0f) continue;  // C unread
            uint32_t need = (uint32_t)(algo->data[ALGO_ALIGN] >> (16 * i)) & 0xffffu;
            if (need < M[i]->elem) need = (uint32_t)M[i]->elem;
            if (!aligned(ptrs[i], M[i]->stride, M[i]->elem, p.batch, need))
                return fail(IV, fn,
                            "%c %p (batch stride %lld elements) is not %u-byte aligned, as the algorithm requires",
                            'A' + i, ptrs[i], (long long)M[i]->stride, need);
        }
    }
    // Workspace: docs, INVALID_VALUE "when workspaceSizeInBytes is less than workspace required by
    // the configured algo"; the workspace "Must be 256B aligned" (rejected with INVALID_VALUE when
    // one is given, own choice of status).
    if (workspaceSizeInBytes < algo->data[ALGO_WORKSPACE])
        return fail(IV, fn, "workspaceSizeInBytes %zu < %llu required by the algorithm", workspaceSizeInBytes,
                    (unsigned long long)algo->data[ALGO_WORKSPACE]);
    if (workspaceSizeInBytes > 0 && (!workspace || ((uintptr_t)workspace & 255)))
        return fail(IV, fn, "workspace %p of %zu bytes is NULL or not 256-byte aligned", workspace,
                    workspaceSizeInBytes);

    op_args o;
    o.p = p;
    o.A = (const char *)A;
    o.B = (const char *)B;
    o.C = b32 != 0.0f ? (const char *)C : nullptr;
    o.D = (char *)D;
    o.alpha = a32;
    o.beta = b32;
    o.device = zt_emu::stream_device(stream);
    // Diagnostics name the program's call site through the return address (emu.h).
    cudaError_t e = zt_emu::enqueue_from(stream, "cublasLtMatmul", __FILE__, __LINE__, __builtin_return_address(0),
                                         [o]() { return run_matmul(o); });
    // An invalid stream or the context's sticky error: the product cannot be launched.
    if (e != cudaSuccess)
        return fail(CUBLAS_STATUS_EXECUTION_FAILED, fn, "enqueue on stream %p failed: %s", (void *)stream,
                    cudaGetErrorName(e));
    return CUBLAS_STATUS_SUCCESS;
}

}  // extern "C"
