// safetensors reader (mmap + full header validation before any tensor is handed out)
// and writer (header in insertion order, padded like the Python library, written to
// a tmp file and renamed so that a crash or full disk never damages an existing file).
#define _GNU_SOURCE
#include "base/json_util.h"
#include "checkpoint/safetensors.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/common.h"
#include "base/crc32c.h"
#include "base/out_file.h"

// The format is little-endian and every read below is a plain memcpy of the bytes.
#if defined(__BYTE_ORDER__)
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "safetensors.c assumes a little-endian host");
#endif

#define ZT_ST_MAX_HEADER 100000000ull  // same bound as the Python library
#define ZT_ST_MAX_NDIM 8
// JSON numbers are doubles in cJSON; integers above 2^53 would not be exact.
#define ZT_ST_MAX_JSON_INT 9007199254740992.0

// ---- dtypes ------------------------------------------------------------------

typedef struct {
    const char *name;
    zt_st_dtype dtype;
    size_t size;  // bytes per element
} dtype_info;

// Every dtype the Python library defines with a whole-byte size. Those without a
// zt_st_dtype of their own become ZT_ST_OTHER: the file still validates (their size
// is known) but they cannot be converted. F4/F6 pack several values per byte and
// are refused, since end - begin cannot be checked per element.
static const dtype_info dtype_table[] = {
    {"F64", ZT_ST_F64, 8},       {"F32", ZT_ST_F32, 4},       {"F16", ZT_ST_F16, 2},
    {"BF16", ZT_ST_BF16, 2},     {"I64", ZT_ST_I64, 8},       {"I32", ZT_ST_I32, 4},
    {"U32", ZT_ST_U32, 4},       {"U8", ZT_ST_U8, 1},         {"BOOL", ZT_ST_OTHER, 1},
    {"I8", ZT_ST_OTHER, 1},      {"I16", ZT_ST_OTHER, 2},     {"U16", ZT_ST_OTHER, 2},
    {"U64", ZT_ST_OTHER, 8},     {"F8_E4M3", ZT_ST_OTHER, 1}, {"F8_E5M2", ZT_ST_OTHER, 1},
    {"F8_E8M0", ZT_ST_OTHER, 1}, {"C64", ZT_ST_OTHER, 8},
};

static const dtype_info *dtype_lookup(const char *name) {
    for (size_t i = 0; i < sizeof dtype_table / sizeof dtype_table[0]; i++)
        if (strcmp(dtype_table[i].name, name) == 0) return &dtype_table[i];
    return NULL;
}

const char *zt_st_dtype_name(zt_st_dtype d) {
    switch (d) {
    case ZT_ST_F32: return "F32";
    case ZT_ST_BF16: return "BF16";
    case ZT_ST_F16: return "F16";
    case ZT_ST_F64: return "F64";
    case ZT_ST_I64: return "I64";
    case ZT_ST_I32: return "I32";
    case ZT_ST_U32: return "U32";
    case ZT_ST_U8: return "U8";
    default: return "OTHER";
    }
}

// 0 for ZT_ST_OTHER: its size depends on which foreign dtype it stands for.
size_t zt_st_dtype_size(zt_st_dtype d) {
    switch (d) {
    case ZT_ST_F32: case ZT_ST_I32: case ZT_ST_U32: return 4;
    case ZT_ST_BF16: case ZT_ST_F16: return 2;
    case ZT_ST_F64: case ZT_ST_I64: return 8;
    case ZT_ST_U8: return 1;
    default: return 0;
    }
}

// ---- scalar conversions --------------------------------------------------------

static float bits_f32(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

float zt_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t man = h & 0x3ffu;
    if (exp == 0x1f) return bits_f32(sign | 0x7f800000u | (man << 13));  // inf / NaN (payload kept)
    if (exp != 0) return bits_f32(sign | ((exp + 112u) << 23) | (man << 13));
    if (man == 0) return bits_f32(sign);  // +-0
    // Subnormal: value = man * 2^-24, exact in fp32 (ldexp is exact for this range).
    float v = ldexpf((float)man, -24);
    return sign ? -v : v;
}

// ---- reader --------------------------------------------------------------------

// A non-negative integer that a JSON double represents exactly; -1 if it is not one.
static int json_uint(const cJSON *item, uint64_t *out) {
    if (!cJSON_IsNumber(item)) return -1;
    double d = item->valuedouble;
    if (!(d >= 0) || d > ZT_ST_MAX_JSON_INT || d != floor(d)) return -1;
    *out = (uint64_t)d;
    return 0;
}

static int cmp_by_offset(const void *a, const void *b) {
    const zt_st_tensor *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return 0;
}

static int cmp_name_ptr(const void *a, const void *b) {
    const zt_st_tensor *const *x = a, *const *y = b;
    return strcmp((*x)->name, (*y)->name);
}

// Fill t from one header entry {"dtype", "shape", "data_offsets"}; offsets are
// still relative to the data section here.
static int parse_tensor(const char *path, const cJSON *e, zt_st_tensor *t) {
    const char *name = e->string;
    if (strlen(name) >= sizeof t->name)
        return zt_err("%s: tensor name of %zu chars is longer than the %zu allowed: \"%.60s...\"", path,
                      strlen(name), sizeof t->name - 1, name);
    memcpy(t->name, name, strlen(name) + 1);
    if (!cJSON_IsObject(e)) return zt_err("%s: tensor %s: header entry is not a JSON object", path, name);

    const cJSON *dt = cJSON_GetObjectItemCaseSensitive(e, "dtype");
    if (!cJSON_IsString(dt)) return zt_err("%s: tensor %s: \"dtype\" is missing or not a string", path, name);
    if (strcmp(dt->valuestring, "F4") == 0 || strncmp(dt->valuestring, "F6_", 3) == 0)
        return zt_err("%s: tensor %s: dtype %s packs values below one byte, not supported", path, name,
                      dt->valuestring);
    const dtype_info *di = dtype_lookup(dt->valuestring);
    if (!di) return zt_err("%s: tensor %s: unknown dtype \"%s\"", path, name, dt->valuestring);
    t->dtype = di->dtype;
    snprintf(t->dtype_name, sizeof t->dtype_name, "%s", di->name);

    const cJSON *shape = cJSON_GetObjectItemCaseSensitive(e, "shape");
    if (!cJSON_IsArray(shape)) return zt_err("%s: tensor %s: \"shape\" is missing or not an array", path, name);
    int ndim = cJSON_GetArraySize(shape);
    if (ndim > ZT_ST_MAX_NDIM)
        return zt_err("%s: tensor %s: shape has %d dims, at most %d supported", path, name, ndim, ZT_ST_MAX_NDIM);
    t->ndim = ndim;
    uint64_t numel = 1;
    int k = 0;
    const cJSON *d;
    cJSON_ArrayForEach(d, shape) {
        uint64_t v;
        if (json_uint(d, &v) != 0)
            return zt_err("%s: tensor %s: shape[%d] is not a non-negative integer", path, name, k);
        // Bound by 2^62 so numel * size (size <= 8) below cannot overflow either.
        if (v != 0 && numel > (UINT64_C(1) << 62) / v)
            return zt_err("%s: tensor %s: shape product overflows", path, name);
        numel *= v;
        t->shape[k++] = (int64_t)v;
    }
    t->numel = (int64_t)numel;

    const cJSON *off = cJSON_GetObjectItemCaseSensitive(e, "data_offsets");
    uint64_t begin, end;
    if (!cJSON_IsArray(off) || cJSON_GetArraySize(off) != 2 || json_uint(cJSON_GetArrayItem(off, 0), &begin) != 0 ||
        json_uint(cJSON_GetArrayItem(off, 1), &end) != 0)
        return zt_err("%s: tensor %s: \"data_offsets\" must be [begin, end] of non-negative integers", path, name);
    if (begin > end)
        return zt_err("%s: tensor %s: data_offsets [%" PRIu64 ", %" PRIu64 ") has begin > end", path, name, begin,
                      end);
    if (end - begin != numel * di->size)
        return zt_err("%s: tensor %s: data_offsets span %" PRIu64 " bytes but shape x dtype %s needs %" PRIu64
                      " (%" PRIu64 " elements x %zu bytes)",
                      path, name, end - begin, di->dtype == ZT_ST_OTHER ? di->name : zt_st_dtype_name(di->dtype),
                      numel * di->size, numel, di->size);
    t->begin = begin;
    t->end = end;
    return 0;
}

// Parse and validate the header; on success f->tensors is sorted by offset
// (file order) with absolute offsets.
static int parse_header(zt_st_file *f, uint64_t hlen) {
    const char *path = f->path;
    const char *text = (const char *)f->map + 8;
    const char *stop = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(text, (size_t)hlen, &stop, 0);
    if (!root) {
        size_t at = stop ? (size_t)(stop - text) : 0;
        char deep[160];
        if (zt_json_depth_error(text, (size_t)hlen, at + 1, deep, sizeof deep))
            return zt_err("%s: header %s", path, deep);
        return zt_err("%s: header is not valid JSON (error near header byte %zu of %" PRIu64 ")", path, at, hlen);
    }
    // The Python writer pads with spaces; anything else after the object is corrupt.
    for (const char *p = stop; p < text + hlen; p++) {
        if (*p != ' ' && *p != '\t' && *p != '\n' && *p != '\r') {
            cJSON_Delete(root);
            return zt_err("%s: header is not valid JSON (trailing byte 0x%02x at header byte %zu)", path,
                          (unsigned char)*p, (size_t)(p - text));
        }
    }
    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return zt_err("%s: header is valid JSON but not a JSON object", path);
    }

    int n = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, root) n++;
    f->tensors = zt_xcalloc((size_t)(n ? n : 1), sizeof(zt_st_tensor));
    int rc = 0;
    cJSON_ArrayForEach(e, root) {
        if (strcmp(e->string, "__metadata__") == 0) {
            // Only checked to be a map of strings, like the Python library requires.
            const cJSON *m;
            if (!cJSON_IsObject(e)) {
                rc = zt_err("%s: \"__metadata__\" is not a JSON object", path);
                break;
            }
            cJSON_ArrayForEach(m, e) {
                if (!cJSON_IsString(m)) {
                    rc = zt_err("%s: \"__metadata__\" value for key \"%s\" is not a string", path, m->string);
                    break;
                }
            }
            if (rc) break;
            continue;
        }
        if ((rc = parse_tensor(path, e, &f->tensors[f->ntensors])) != 0) break;
        f->ntensors++;
    }
    cJSON_Delete(root);
    if (rc) return rc;

    // cJSON keeps duplicate keys; a second entry for one name would make zt_st_find
    // ambiguous, so refuse it.
    const zt_st_tensor **by_name = zt_xmalloc(sizeof(*by_name) * (size_t)(f->ntensors ? f->ntensors : 1));
    for (int i = 0; i < f->ntensors; i++) by_name[i] = &f->tensors[i];
    qsort(by_name, (size_t)f->ntensors, sizeof(*by_name), cmp_name_ptr);
    for (int i = 1; i < f->ntensors; i++) {
        if (strcmp(by_name[i - 1]->name, by_name[i]->name) == 0) {
            rc = zt_err("%s: tensor %s appears twice in the header", path, by_name[i]->name);
            break;
        }
    }
    free(by_name);
    if (rc) return rc;

    // Sorted by offset, each tensor must start where the previous ended: a gap means
    // bytes nobody owns, an overlap means two tensors alias the same bytes.
    qsort(f->tensors, (size_t)f->ntensors, sizeof(zt_st_tensor), cmp_by_offset);
    uint64_t data_bytes = (uint64_t)f->size - 8 - hlen;
    uint64_t pos = 0;
    for (int i = 0; i < f->ntensors; i++) {
        zt_st_tensor *t = &f->tensors[i];
        const char *prev = i ? f->tensors[i - 1].name : NULL;
        if (t->begin > pos) {
            if (prev)
                return zt_err("%s: gap between tensors: %s ends at data byte %" PRIu64 " but the next tensor %s begins "
                              "at %" PRIu64 " (offsets must be contiguous)",
                              path, prev, pos, t->name, t->begin);
            return zt_err("%s: gap before the first tensor: %s begins at data byte %" PRIu64
                          " (offsets must be contiguous from 0)",
                          path, t->name, t->begin);
        }
        if (t->begin < pos)
            return zt_err("%s: overlap between tensors: %s ends at data byte %" PRIu64 " but %s begins at %" PRIu64,
                          path, prev, pos, t->name, t->begin);
        if (t->end > data_bytes)
            return zt_err("%s: truncated: tensor %s needs bytes [%" PRIu64 ",%" PRIu64 ") but only %" PRIu64
                          " data bytes are present",
                          path, t->name, t->begin, t->end, data_bytes);
        pos = t->end;
        t->begin += 8 + hlen;
        t->end += 8 + hlen;
    }
    return 0;
}

int zt_st_open(zt_st_file *f, const char *path) {
    memset(f, 0, sizeof *f);
    f->fd = -1;
    if (strlen(path) >= sizeof f->path) return zt_err("%.200s...: path longer than %zu chars", path, sizeof f->path);
    snprintf(f->path, sizeof f->path, "%s", path);

    f->fd = open(path, O_RDONLY | O_CLOEXEC);
    if (f->fd < 0) return zt_err("%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(f->fd, &st) != 0) {
        int e = errno;
        zt_st_close(f);
        return zt_err("%s: cannot stat: %s", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        zt_st_close(f);
        return zt_err("%s: not a regular file", path);
    }
    if (st.st_size < 8) {
        zt_st_close(f);
        return zt_err("%s: file is %lld bytes, shorter than the 8-byte header length", path, (long long)st.st_size);
    }
    f->size = (size_t)st.st_size;
    void *m = mmap(NULL, f->size, PROT_READ, MAP_PRIVATE, f->fd, 0);
    if (m == MAP_FAILED) {
        int e = errno;
        zt_st_close(f);
        return zt_err("%s: mmap of %zu bytes failed: %s", path, (size_t)st.st_size, strerror(e));
    }
    f->map = m;

    uint64_t hlen;
    memcpy(&hlen, f->map, 8);  // little-endian u64 (host checked above)
    if (hlen > ZT_ST_MAX_HEADER) {
        zt_st_close(f);
        return zt_err("%s: header length %" PRIu64 " exceeds the %llu-byte limit", path, hlen, ZT_ST_MAX_HEADER);
    }
    if (8 + hlen > (uint64_t)f->size) {
        size_t size = f->size;
        zt_st_close(f);
        return zt_err("%s: header length %" PRIu64 " runs past the end of the file (8 + %" PRIu64 " > %zu bytes)",
                      path, hlen, hlen, size);
    }
    if (parse_header(f, hlen) != 0) {
        zt_st_close(f);
        return -1;
    }
    return 0;
}

void zt_st_close(zt_st_file *f) {
    if (f->map) munmap((void *)f->map, f->size);
    if (f->fd >= 0) close(f->fd);
    free(f->tensors);
    f->map = NULL;
    f->fd = -1;
    f->tensors = NULL;
    f->ntensors = 0;
    f->size = 0;
}

// Linear: a shard holds at most a few hundred tensors and lookups happen once per load.
const zt_st_tensor *zt_st_find(const zt_st_file *f, const char *name) {
    for (int i = 0; i < f->ntensors; i++)
        if (strcmp(f->tensors[i].name, name) == 0) return &f->tensors[i];
    return NULL;
}

// Guards against a tensor from another (or closed) file being read out of bounds.
static int check_tensor(const zt_st_file *f, const zt_st_tensor *t) {
    if (!f->map || t->end > f->size || t->begin > t->end)
        return zt_err("%s: tensor %s [%" PRIu64 ",%" PRIu64 ") lies outside this %zu-byte file", f->path, t->name,
                      t->begin, t->end, f->size);
    return 0;
}

int zt_st_read_f32(const zt_st_file *f, const zt_st_tensor *t, float *out) {
    return zt_st_read_f32_range(f, t, 0, t->numel, out);
}

int zt_st_read_f32_range(const zt_st_file *f, const zt_st_tensor *t, int64_t first, int64_t count, float *out) {
    if (check_tensor(f, t) != 0) return -1;
    if (first < 0 || count < 0 || first > t->numel || count > t->numel - first)  // no first + count: it may wrap
        return zt_err("%s: tensor %s: elements [%lld, +%lld) are outside its %lld elements", f->path, t->name,
                      (long long)first, (long long)count, (long long)t->numel);
    const size_t es = zt_st_dtype_size(t->dtype);
    const uint8_t *p = f->map + t->begin + (size_t)first * es;
    size_t n = (size_t)count;
    // Tensor data is not guaranteed to be aligned in the mapping, so every element
    // is fetched with memcpy rather than through a cast pointer.
    switch (t->dtype) {
    case ZT_ST_F32: memcpy(out, p, n * 4); return 0;
    case ZT_ST_BF16:
        for (size_t i = 0; i < n; i++) {
            uint16_t h;
            memcpy(&h, p + 2 * i, 2);
            out[i] = zt_bf16_to_f32(h);
        }
        return 0;
    case ZT_ST_F16:
        for (size_t i = 0; i < n; i++) {
            uint16_t h;
            memcpy(&h, p + 2 * i, 2);
            out[i] = zt_f16_to_f32(h);
        }
        return 0;
    case ZT_ST_F64:
        for (size_t i = 0; i < n; i++) {
            double d;
            memcpy(&d, p + 8 * i, 8);
            out[i] = (float)d;
        }
        return 0;
    default:
        return zt_err("%s: tensor %s has dtype %s, which cannot be read as fp32 (F32/BF16/F16/F64 only)", f->path,
                      t->name, zt_st_dtype_name(t->dtype));
    }
}

int zt_st_read_i64(const zt_st_file *f, const zt_st_tensor *t, int64_t *out) {
    if (check_tensor(f, t) != 0) return -1;
    const uint8_t *p = f->map + t->begin;
    size_t n = (size_t)t->numel;
    switch (t->dtype) {
    case ZT_ST_I64: memcpy(out, p, n * 8); return 0;
    case ZT_ST_I32:
        for (size_t i = 0; i < n; i++) {
            int32_t v;
            memcpy(&v, p + 4 * i, 4);
            out[i] = v;
        }
        return 0;
    case ZT_ST_U32:
        for (size_t i = 0; i < n; i++) {
            uint32_t v;
            memcpy(&v, p + 4 * i, 4);
            out[i] = v;
        }
        return 0;
    default:
        return zt_err("%s: tensor %s has dtype %s, which cannot be read as int64 (I64/I32/U32 only)", f->path,
                      t->name, zt_st_dtype_name(t->dtype));
    }
}

// ---- writer --------------------------------------------------------------------

typedef struct {
    char name[256];
    const float *data;  // caller's buffer, read at zt_st_write time
    zt_st_dtype dtype;
    int ndim;
    int64_t shape[ZT_ST_MAX_NDIM];
    uint64_t numel;
    const void *raw;    // zt_st_writer_add_raw: these bytes as they are (data NULL)
    char raw_dtype[12];
    uint64_t raw_bytes;
} writer_tensor;

static uint64_t tensor_bytes(const writer_tensor *t) {
    return t->raw ? t->raw_bytes : t->numel * zt_st_dtype_size(t->dtype);
}

struct zt_st_writer {
    writer_tensor *t;
    int n, cap;
    char **meta;  // key, value, key, value, ...
    int nmeta;
};

zt_st_writer *zt_st_writer_new(void) { return zt_xcalloc(1, sizeof(zt_st_writer)); }

void zt_st_writer_free(zt_st_writer *w) {
    if (!w) return;
    for (int i = 0; i < 2 * w->nmeta; i++) free(w->meta[i]);
    free(w->meta);
    free(w->t);
    free(w);
}

// The checks and the slot every add shares: NULL + zt_err when refused.
static writer_tensor *add_slot(zt_st_writer *w, const char *name, int ndim, const int64_t *shape, uint64_t *numel_out) {
    size_t len = strlen(name);
    if (len == 0 || len > 255) {
        zt_err("safetensors writer: tensor name must be 1..255 chars, got %zu", len);
        return NULL;
    }
    if (strcmp(name, "__metadata__") == 0) {
        zt_err("safetensors writer: \"__metadata__\" is reserved");
        return NULL;
    }
    if (ndim < 0 || ndim > ZT_ST_MAX_NDIM) {
        zt_err("safetensors writer: tensor %s: ndim %d outside 0..%d", name, ndim, ZT_ST_MAX_NDIM);
        return NULL;
    }
    uint64_t numel = 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0) {
            zt_err("safetensors writer: tensor %s: shape[%d] = %" PRId64 " < 0", name, i, shape[i]);
            return NULL;
        }
        if (shape[i] != 0 && numel > (UINT64_C(1) << 50) / (uint64_t)shape[i]) {
            zt_err("safetensors writer: tensor %s: shape product too large", name);
            return NULL;
        }
        numel *= (uint64_t)shape[i];
    }
    for (int i = 0; i < w->n; i++)
        if (strcmp(w->t[i].name, name) == 0) {
            zt_err("safetensors writer: tensor %s added twice", name);
            return NULL;
        }
    if (w->n == w->cap) {
        w->cap = w->cap ? 2 * w->cap : 16;
        writer_tensor *nt = zt_xmalloc(sizeof(writer_tensor) * (size_t)w->cap);
        if (w->n) memcpy(nt, w->t, sizeof(writer_tensor) * (size_t)w->n);
        free(w->t);
        w->t = nt;
    }
    writer_tensor *t = &w->t[w->n];
    memset(t, 0, sizeof *t);
    memcpy(t->name, name, len + 1);
    t->ndim = ndim;
    for (int i = 0; i < ndim; i++) t->shape[i] = shape[i];
    t->numel = numel;
    *numel_out = numel;
    return t;
}

int zt_st_writer_add_f32(zt_st_writer *w, const char *name, const float *data, int ndim, const int64_t *shape,
                         zt_st_dtype dtype) {
    size_t len = strlen(name);
    if (len == 0 || len > 255) return zt_err("safetensors writer: tensor name must be 1..255 chars, got %zu", len);
    if (strcmp(name, "__metadata__") == 0) return zt_err("safetensors writer: \"__metadata__\" is reserved");
    if (dtype != ZT_ST_F32 && dtype != ZT_ST_BF16)
        return zt_err("safetensors writer: tensor %s: dtype %s not supported (F32 or BF16 only)", name,
                      zt_st_dtype_name(dtype));
    uint64_t numel;
    writer_tensor *t = add_slot(w, name, ndim, shape, &numel);
    if (!t) return -1;
    if (numel && !data) return zt_err("safetensors writer: tensor %s: data is NULL", name);
    t->data = data;
    t->dtype = dtype;
    w->n++;
    return 0;
}

int zt_st_writer_add_raw(zt_st_writer *w, const char *name, const char *dtype_name, int ndim, const int64_t *shape,
                         const void *data, uint64_t nbytes) {
    const dtype_info *di = dtype_name ? dtype_lookup(dtype_name) : NULL;
    if (!di) return zt_err("safetensors writer: tensor %s: unknown dtype \"%s\"", name, dtype_name ? dtype_name : "");
    uint64_t numel;
    writer_tensor *t = add_slot(w, name, ndim, shape, &numel);
    if (!t) return -1;
    if (numel * di->size != nbytes)
        return zt_err("safetensors writer: tensor %s: %" PRIu64 " bytes, but shape x dtype %s needs %" PRIu64, name,
                      nbytes, di->name, numel * di->size);
    if (nbytes && !data) return zt_err("safetensors writer: tensor %s: data is NULL", name);
    static const char empty = 0;
    t->raw = nbytes ? data : &empty;
    snprintf(t->raw_dtype, sizeof t->raw_dtype, "%s", di->name);
    t->raw_bytes = nbytes;
    t->dtype = di->dtype;
    w->n++;
    return 0;
}

static char *xstrdup(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = zt_xmalloc(n);
    memcpy(d, s, n);
    return d;
}

int zt_st_writer_metadata(zt_st_writer *w, const char *key, const char *value) {
    for (int i = 0; i < w->nmeta; i++) {
        if (strcmp(w->meta[2 * i], key) == 0) {  // last value wins, as in a dict
            free(w->meta[2 * i + 1]);
            w->meta[2 * i + 1] = xstrdup(value);
            return 0;
        }
    }
    char **nm = zt_xmalloc(sizeof(char *) * 2 * (size_t)(w->nmeta + 1));
    if (w->nmeta) memcpy(nm, w->meta, sizeof(char *) * 2 * (size_t)w->nmeta);
    free(w->meta);
    w->meta = nm;
    w->meta[2 * w->nmeta] = xstrdup(key);
    w->meta[2 * w->nmeta + 1] = xstrdup(value);
    w->nmeta++;
    return 0;
}

// Integers go in as raw JSON text: cJSON would print large doubles as 1e+15, which
// the Python reader (serde, usize) rejects.
static cJSON *json_raw_u64(uint64_t v) {
    char buf[32];
    snprintf(buf, sizeof buf, "%" PRIu64, v);
    return cJSON_CreateRaw(buf);
}

// Header text padded with spaces so that 8 + N is a multiple of 8 (what the Python
// library does, keeping the data section 8-byte aligned). NULL on failure.
static char *build_header(const zt_st_writer *w, size_t *len_out) {
    cJSON *root = cJSON_CreateObject();
    if (w->nmeta) {
        cJSON *m = cJSON_AddObjectToObject(root, "__metadata__");
        for (int i = 0; i < w->nmeta; i++) cJSON_AddStringToObject(m, w->meta[2 * i], w->meta[2 * i + 1]);
    }
    uint64_t off = 0;
    for (int i = 0; i < w->n; i++) {
        const writer_tensor *t = &w->t[i];
        cJSON *e = cJSON_AddObjectToObject(root, t->name);
        cJSON_AddStringToObject(e, "dtype", t->raw ? t->raw_dtype : zt_st_dtype_name(t->dtype));
        cJSON *shape = cJSON_AddArrayToObject(e, "shape");
        for (int k = 0; k < t->ndim; k++) cJSON_AddItemToArray(shape, json_raw_u64((uint64_t)t->shape[k]));
        cJSON *offs = cJSON_AddArrayToObject(e, "data_offsets");
        uint64_t bytes = tensor_bytes(t);
        cJSON_AddItemToArray(offs, json_raw_u64(off));
        cJSON_AddItemToArray(offs, json_raw_u64(off + bytes));
        off += bytes;
    }
    char *text = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    if (!text) {
        zt_err("safetensors writer: cJSON could not print the header (out of memory?)");
        return NULL;
    }
    size_t n = strlen(text);
    size_t padded = (n + 7) & ~(size_t)7;
    char *out = zt_xmalloc(padded);
    memcpy(out, text, n);
    memset(out + n, ' ', padded - n);
    cJSON_free(text);
    *len_out = padded;
    return out;
}

typedef struct {
    int fd;
    const char *tmp;
    uint64_t written, total;
} out_file;

static int write_all(out_file *o, const void *buf, size_t n) {
    const char *p = buf;
    while (n) {
        ssize_t r = write(o->fd, p, n);
        if (r < 0) {
            if (errno == EINTR) continue;
            return zt_err("%s: write failed after %" PRIu64 " of %" PRIu64 " bytes: %s", o->tmp, o->written,
                          o->total, strerror(errno));
        }
        p += r;
        n -= (size_t)r;
        o->written += (uint64_t)r;
    }
    return 0;
}

static int write_body(out_file *o, const zt_st_writer *w, const char *header, size_t hlen) {
    uint64_t hlen64 = hlen;
    if (write_all(o, &hlen64, 8) != 0 || write_all(o, header, hlen) != 0) return -1;
    enum { CHUNK = 1 << 18 };
    uint16_t *buf = NULL;
    int rc = 0;
    for (int i = 0; i < w->n && rc == 0; i++) {
        const writer_tensor *t = &w->t[i];
        if (t->raw) {
            rc = write_all(o, t->raw, t->raw_bytes);
            continue;
        }
        if (t->dtype == ZT_ST_F32) {
            rc = write_all(o, t->data, t->numel * 4);
            continue;
        }
        if (!buf) buf = zt_xmalloc(CHUNK * sizeof(uint16_t));
        for (uint64_t s = 0; s < t->numel && rc == 0; s += CHUNK) {
            size_t m = t->numel - s < CHUNK ? (size_t)(t->numel - s) : CHUNK;
            for (size_t k = 0; k < m; k++) buf[k] = zt_f32_to_bf16(t->data[s + k]);
            rc = write_all(o, buf, m * 2);
        }
    }
    free(buf);
    if (rc) return rc;
    if (fsync(o->fd) != 0)
        return zt_err("%s: fsync failed after writing %" PRIu64 " bytes: %s", o->tmp, o->written, strerror(errno));
    return 0;
}

int zt_st_write(zt_st_writer *w, const char *path) {
    size_t hlen;
    char *header = build_header(w, &hlen);
    if (!header) return -1;
    out_file o = {.fd = -1, .written = 0, .total = 8 + hlen};
    for (int i = 0; i < w->n; i++) o.total += tensor_bytes(&w->t[i]);

    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid());
    o.tmp = tmp;
    // The temporary file new (O_EXCL | O_NOFOLLOW), a link or special file at path refused: the
    // rename below would replace a link itself (never its target), but one planted there is named.
    o.fd = zt_out_check(path) == 0 ? zt_out_create_fresh(tmp) : -1;
    if (o.fd < 0) {
        free(header);
        return -1;
    }
    int rc = write_body(&o, w, header, hlen);
    free(header);
    if (close(o.fd) != 0 && rc == 0)
        rc = zt_err("%s: close failed after writing %" PRIu64 " bytes: %s", tmp, o.written, strerror(errno));
    if (rc == 0 && rename(tmp, path) != 0) rc = zt_err("%s: rename to %s failed: %s", tmp, path, strerror(errno));
    if (rc != 0) {
        unlink(tmp);  // the target, if it existed, is untouched
        return -1;
    }
    // Make the rename itself durable; a failure here cannot corrupt the file, so it
    // is not reported.
    char dir[4200];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash == dir) dir[1] = 0;
    else if (slash) *slash = 0;
    else snprintf(dir, sizeof dir, ".");
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        fsync(dfd);
        close(dfd);
    }
    return 0;
}

// ---- metadata ----------------------------------------------------------------

int zt_st_metadata(const zt_st_file *f, const char *key, char *out, size_t out_len) {
    uint64_t hlen;
    memcpy(&hlen, f->map, 8);  // validated by zt_st_open
    cJSON *root = cJSON_ParseWithLength((const char *)f->map + 8, (size_t)hlen);
    if (!root) return zt_err("%s: header is not valid JSON", f->path);
    const cJSON *md = cJSON_GetObjectItemCaseSensitive(root, "__metadata__");
    const cJSON *v = md ? cJSON_GetObjectItemCaseSensitive(md, key) : NULL;
    int rc = 0;
    if (!v || !cJSON_IsString(v))
        rc = zt_err("%s: __metadata__ has no string entry \"%s\"", f->path, key);
    else
        snprintf(out, out_len, "%s", v->valuestring);
    cJSON_Delete(root);
    return rc;
}

// ---- fingerprint ---------------------------------------------------------------
// Read with pread, not through the mapping: a page fault on a mapped file reads ahead around
// it (128 KiB and more), which on 700 tensors would turn 7 MB of samples into 100s of MB.

static int sample_crc(const zt_st_file *f, uint64_t at, uint64_t n, uint8_t *buf, uint32_t *crc) {
    while (n > 0) {
        const ssize_t got = pread(f->fd, buf, (size_t)n, (off_t)at);
        if (got <= 0)
            return zt_err("%s: reading %" PRIu64 " bytes at offset %" PRIu64 " for its fingerprint: %s", f->path, n, at,
                          got < 0 ? strerror(errno) : "unexpected end of file");
        *crc = zt_crc32c(*crc, buf, (size_t)got);
        at += (uint64_t)got;
        n -= (uint64_t)got;
    }
    return 0;
}

int zt_st_fingerprint_file(const char *path, zt_st_fingerprint *fp) {
    memset(fp, 0, sizeof *fp);
    zt_st_file f;
    if (zt_st_open(&f, path) != 0) return -1;
    fp->bytes = f.size;
    fp->ntensors = f.ntensors;
    uint64_t hlen;
    memcpy(&hlen, f.map, 8);  // validated by zt_st_open
    const uint64_t base = 8 + hlen;
    fp->data_bytes = f.ntensors ? f.tensors[f.ntensors - 1].end - base : 0;
    // The table as parsed (file order: sorted by offset; offsets from the data's start), not the
    // header's bytes: the same tensors written with other padding, key order or __metadata__ agree.
    uint32_t tc = 0;
    for (int i = 0; i < f.ntensors; i++) {
        const zt_st_tensor *t = &f.tensors[i];
        char line[512];
        int n = snprintf(line, sizeof line, "%s %s [", t->name, t->dtype_name);
        for (int d = 0; d < t->ndim && n < (int)sizeof line; d++)
            n += snprintf(line + n, sizeof line - (size_t)n, "%s%lld", d ? "," : "", (long long)t->shape[d]);
        if (n < (int)sizeof line)
            n += snprintf(line + n, sizeof line - (size_t)n, "] %" PRIu64 " %" PRIu64 "\n", t->begin - base,
                          t->end - base);
        tc = zt_crc32c(tc, line, strlen(line));
    }
    fp->table_crc32c = tc;
    uint8_t *buf = zt_xmalloc(3 * ZT_ST_SAMPLE_BYTES);
    uint32_t sc = 0;
    int rc = 0;
    for (int i = 0; rc == 0 && i < f.ntensors; i++) {
        const zt_st_tensor *t = &f.tensors[i];
        const uint64_t n = t->end - t->begin, s = ZT_ST_SAMPLE_BYTES;
        if (n <= 3 * s) {  // small tensors (norms, biases): whole
            rc = sample_crc(&f, t->begin, n, buf, &sc);
            fp->sampled += n;
            continue;
        }
        const uint64_t at[3] = {t->begin, t->begin + (n - s) / 2, t->end - s};
        for (int k = 0; rc == 0 && k < 3; k++) rc = sample_crc(&f, at[k], s, buf, &sc);
        fp->sampled += 3 * s;
    }
    fp->sample_crc32c = sc;
    free(buf);
    zt_st_close(&f);
    return rc;
}
