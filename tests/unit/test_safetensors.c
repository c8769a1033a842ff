// safetensors reader/writer: (a) a file written by Hugging Face's Python library,
// (b) writer -> reader round trips and the bf16/f16 conversions bit by bit,
// (c) corrupt files (made here from a good one in a temp dir) each refused with the rule named,
// (d) the fingerprint ranks compare of --init files.
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <float.h>
#include <signal.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "checkpoint/safetensors.h"
#include "base/common.h"
#include "tests/support/test_util.h"

static char tmpdir[64];

// Same formula as ramp() in tests/reference/make_safetensors_fixtures.py.
static float ramp(int i) { return (float)(sin(0.37 * i + 0.1) * (1.0 + 0.25 * i)); }

static int same_float(float a, float b) { return (isnan(a) && isnan(b)) || zt_f32_bits(a) == zt_f32_bits(b); }

static char *tmp_path(const char *name) {
    static char buf[4][256];
    static int k = 0;
    char *p = buf[k++ & 3];
    snprintf(p, 256, "%s/%s", tmpdir, name);
    return p;
}

static void write_bytes(const char *path, const void *data, size_t n) {
    FILE *fp = fopen(path, "wb");
    if (!fp || fwrite(data, 1, n, fp) != n || fclose(fp) != 0) {
        fprintf(stderr, "cannot write %s\n", path);
        exit(2);
    }
}

// No "<name>.tmp.<pid>" may be left behind in the temp dir.
static int count_tmp_files(void) {
    DIR *d = opendir(tmpdir);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)))
        if (strstr(e->d_name, ".tmp.")) n++;
    if (d) closedir(d);
    return n;
}

static const zt_st_tensor *need(const zt_st_file *f, const char *name) {
    const zt_st_tensor *t = zt_st_find(f, name);
    CHECK(t != NULL, "tensor %s missing", name);
    return t;
}

// Reads tensor `name` and its stored "<name>.expect" twin; both must agree bit for bit.
static void check_against_expect(const zt_st_file *f, const char *name, float *got, float *want) {
    char ename[300];
    snprintf(ename, sizeof ename, "%s.expect", name);
    const zt_st_tensor *t = need(f, name), *e = need(f, ename);
    if (!t || !e) return;
    CHECK(t->numel == e->numel, "%s numel %lld vs %lld", name, (long long)t->numel, (long long)e->numel);
    CHECK(zt_st_read_f32(f, t, got) == 0, "read %s: %s", name, zt_errmsg());
    CHECK(zt_st_read_f32(f, e, want) == 0, "read %s: %s", ename, zt_errmsg());
    for (int64_t i = 0; i < t->numel; i++)
        CHECK(same_float(got[i], want[i]), "%s[%lld] = %.9g (0x%08x), torch says %.9g (0x%08x)", name, (long long)i,
              got[i], zt_f32_bits(got[i]), want[i], zt_f32_bits(want[i]));
}

// ---- (a) the Python library's file -------------------------------------------------

static void test_python_fixture(void) {
    zt_st_file f;
    const char *path = ZT_TEST_DIR "/data/safetensors/python_written.safetensors";
    int rc = zt_st_open(&f, path);
    CHECK(rc == 0, "open %s: %s", path, zt_errmsg());
    if (rc) return;
    CHECK(f.ntensors == 12, "ntensors %d", f.ntensors);
    uint64_t hlen;
    memcpy(&hlen, f.map, 8);
    CHECK(f.tensors[0].begin == 8 + hlen, "first tensor at absolute %llu, header ends at %llu",
          (unsigned long long)f.tensors[0].begin, (unsigned long long)(8 + hlen));
    for (int i = 1; i < f.ntensors; i++)
        CHECK(f.tensors[i].begin == f.tensors[i - 1].end, "tensors not in file order at %d", i);
    CHECK(f.tensors[f.ntensors - 1].end == f.size, "last end %llu vs size %zu",
          (unsigned long long)f.tensors[f.ntensors - 1].end, f.size);
    CHECK(zt_st_find(&f, "no.such.tensor") == NULL, "find of a missing name");

    float got[64], want[64];
    const zt_st_tensor *t = need(&f, "model.layers.0.f32");
    if (t) {
        CHECK(t->dtype == ZT_ST_F32 && t->ndim == 2 && t->shape[0] == 2 && t->shape[1] == 3 && t->numel == 6,
              "f32 meta");
        zt_st_read_f32(&f, t, got);
        for (int i = 0; i < 6; i++)
            CHECK(fabsf(got[i] - ramp(i)) <= 1e-6f * fabsf(ramp(i)), "f32[%d] %.9g vs formula %.9g", i, got[i],
                  ramp(i));
    }
    check_against_expect(&f, "model.layers.0.f32", got, want);

    t = need(&f, "model.layers.0.bf16");
    if (t) {
        CHECK(t->dtype == ZT_ST_BF16 && t->ndim == 2 && t->shape[0] == 4 && t->shape[1] == 5, "bf16 meta");
        // Torch rounded the same formula to bf16; our rounding must give the same bits.
        zt_st_read_f32(&f, t, got);
        for (int i = 0; i < 20; i++)
            CHECK(zt_f32_bits(got[i]) == ((uint32_t)zt_f32_to_bf16(ramp(i)) << 16), "bf16[%d] 0x%08x vs ours 0x%04x", i,
                  zt_f32_bits(got[i]), zt_f32_to_bf16(ramp(i)));
    }
    check_against_expect(&f, "model.layers.0.bf16", got, want);

    t = need(&f, "edge.f16");
    if (t) {
        CHECK(t->dtype == ZT_ST_F16 && t->numel == 10, "f16 meta");
        zt_st_read_f32(&f, t, got);
        CHECK(got[0] == ldexpf(1, -24) && got[1] == 1023 * ldexpf(1, -24) && got[2] == ldexpf(1, -14),
              "f16 subnormals/min normal %g %g %g", got[0], got[1], got[2]);
        CHECK(got[3] == 65504.0f && isinf(got[4]) && got[4] > 0 && isinf(got[5]) && got[5] < 0 && isnan(got[6]),
              "f16 max/inf/nan");
        CHECK(got[7] == 0 && signbit(got[7]), "f16 -0");
    }
    check_against_expect(&f, "edge.f16", got, want);
    check_against_expect(&f, "wide.f64", got, want);
    t = need(&f, "wide.f64");
    if (t) CHECK(t->dtype == ZT_ST_F64 && got[0] == (float)(1.0 / 3.0), "f64 -> f32 %.9g", got[0]);

    int64_t iv[8];
    t = need(&f, "ids.i64");
    if (t) {
        CHECK(t->dtype == ZT_ST_I64 && t->numel == 6, "i64 meta");
        CHECK(zt_st_read_i64(&f, t, iv) == 0, "read i64: %s", zt_errmsg());
        const int64_t w[6] = {0, -1, 1, (INT64_C(1) << 40) + 3, -(INT64_C(1) << 62), INT64_MAX};
        for (int i = 0; i < 6; i++) CHECK(iv[i] == w[i], "i64[%d] %lld vs %lld", i, (long long)iv[i], (long long)w[i]);
        CHECK(zt_st_read_f32(&f, t, got) == -1 && strstr(zt_errmsg(), "ids.i64") && strstr(zt_errmsg(), "I64"),
              "reading I64 as fp32 must fail naming tensor and dtype: %s", zt_errmsg());
    }
    t = need(&f, "ids.i32");
    if (t) {
        CHECK(zt_st_read_i64(&f, t, iv) == 0 && iv[0] == INT32_MIN && iv[1] == INT32_MAX && iv[2] == 7, "i32");
    }
    t = need(&f, "model.layers.0.f32");
    if (t) CHECK(zt_st_read_i64(&f, t, iv) == -1 && strstr(zt_errmsg(), "int64"), "F32 as int64: %s", zt_errmsg());

    t = need(&f, "scalar.f32");
    if (t) {
        CHECK(t->ndim == 0 && t->numel == 1, "scalar ndim %d numel %lld", t->ndim, (long long)t->numel);
        CHECK(zt_st_read_f32(&f, t, got) == 0 && got[0] == 2.5f, "scalar value %g", got[0]);
    }
    t = need(&f, "empty.f32");
    if (t) {
        CHECK(t->ndim == 2 && t->shape[0] == 0 && t->shape[1] == 3 && t->numel == 0 && t->begin == t->end,
              "empty meta");
        CHECK(zt_st_read_f32(&f, t, got) == 0, "read empty: %s", zt_errmsg());
    }
    zt_st_close(&f);
    zt_st_close(&f);  // closing twice is harmless
}

// ---- (b) conversions and the writer ------------------------------------------------

static void test_conversions(void) {
    struct {
        uint32_t in;
        uint16_t out;
        const char *what;
    } cases[] = {
        {0x3f800000u, 0x3f80, "1.0 exact"},
        {0x3f808000u, 0x3f80, "1 + 2^-8: tie, keeps even 0x3f80"},
        {0x3f818000u, 0x3f82, "1 + 3*2^-8: tie, rounds up to even 0x3f82"},
        {0x3f808001u, 0x3f81, "just above a tie rounds up"},
        {0x3f817fffu, 0x3f81, "just below a tie rounds down"},
        {0xbf808000u, 0xbf80, "negative tie keeps even"},
        {0x7f800000u, 0x7f80, "+inf"},
        {0xff800000u, 0xff80, "-inf"},
        {0x7f7f0000u, 0x7f7f, "largest finite bf16 exact"},
        {0x7f7f7fffu, 0x7f7f, "below the tie under inf stays finite"},
        {0x7f7f8000u, 0x7f80, "tie above largest bf16 rounds (to even) to inf"},
        {0x7f7fffffu, 0x7f80, "FLT_MAX rounds to inf"},
        {0x00000001u, 0x0000, "smallest fp32 subnormal rounds to +0"},
        {0x80000000u, 0x8000, "-0"},
        {0x7fc00000u, 0x7fc0, "quiet NaN"},
        {0xffc00000u, 0xffc0, "negative NaN keeps sign"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint16_t h = zt_f32_to_bf16(zt_f32_from_bits(cases[i].in));
        CHECK(h == cases[i].out, "bf16(0x%08x) = 0x%04x, want 0x%04x (%s)", cases[i].in, h, cases[i].out,
              cases[i].what);
    }
    // NaNs whose payload sits only in the dropped bits, or would carry on rounding,
    // must stay NaN rather than become inf.
    uint32_t nans[] = {0x7f800001u, 0x7fbfffffu, 0xff800001u, 0x7fffffffu};
    for (size_t i = 0; i < sizeof nans / sizeof nans[0]; i++) {
        float back = zt_bf16_to_f32(zt_f32_to_bf16(zt_f32_from_bits(nans[i])));
        CHECK(isnan(back) && (signbit(back) != 0) == ((nans[i] >> 31) != 0), "NaN 0x%08x -> 0x%04x", nans[i],
              zt_f32_to_bf16(zt_f32_from_bits(nans[i])));
    }
    CHECK(zt_bf16_to_f32(0x4049) == 3.140625f, "bf16 0x4049 -> %g", zt_bf16_to_f32(0x4049));

    struct {
        uint16_t in;
        float out;
    } h16[] = {{0x0001, 5.9604644775390625e-08f}, {0x03ff, 6.0975551605224609e-05f}, {0x0400, 6.103515625e-05f},
               {0x7bff, 65504.0f},                {0x3c00, 1.0f},                    {0xc000, -2.0f},
               {0x8001, -5.9604644775390625e-08f}, {0x3555, 0.333251953125f}};
    for (size_t i = 0; i < sizeof h16 / sizeof h16[0]; i++)
        CHECK(zt_f16_to_f32(h16[i].in) == h16[i].out, "f16 0x%04x -> %.10g, want %.10g", h16[i].in,
              zt_f16_to_f32(h16[i].in), h16[i].out);
    CHECK(isinf(zt_f16_to_f32(0x7c00)) && zt_f16_to_f32(0x7c00) > 0, "f16 +inf");
    CHECK(isinf(zt_f16_to_f32(0xfc00)) && zt_f16_to_f32(0xfc00) < 0, "f16 -inf");
    CHECK(isnan(zt_f16_to_f32(0x7e00)) && isnan(zt_f16_to_f32(0x7c01)), "f16 NaNs");
    CHECK(zt_f16_to_f32(0x8000) == 0 && signbit(zt_f16_to_f32(0x8000)), "f16 -0");

    CHECK(strcmp(zt_st_dtype_name(ZT_ST_BF16), "BF16") == 0 && zt_st_dtype_size(ZT_ST_BF16) == 2 &&
              zt_st_dtype_size(ZT_ST_F64) == 8 && zt_st_dtype_size(ZT_ST_U8) == 1,
          "dtype helpers");
}

#define RT_N 1000

static void test_round_trip(void) {
    static float a[RT_N], b[RT_N], got[RT_N];
    for (int i = 0; i < RT_N; i++) a[i] = ramp(i) * 1e3f, b[i] = ramp(i + 7) * 1e-3f;
    a[0] = zt_f32_from_bits(0x7f7fffffu), a[1] = -0.0f, a[2] = ldexpf(1, -140), a[3] = INFINITY;
    b[0] = NAN, b[1] = -INFINITY, b[2] = zt_f32_from_bits(0x3f808000u);

    zt_st_writer *w = zt_st_writer_new();
    int64_t sa[2] = {10, 100}, sb[3] = {10, 10, 10}, s0[2] = {0, 4}, sc[1] = {3};
    float scal = 7.25f, c[3] = {1.5f, -2.5f, 3.5f};
    CHECK(zt_st_writer_metadata(w, "format", "pt") == 0, "metadata");
    CHECK(zt_st_writer_metadata(w, "note", "quote \" backslash \\ tab \t unicode \xc3\xa9") == 0, "metadata");
    CHECK(zt_st_writer_add_f32(w, "model.layers.0.mlp.up_proj.weight", a, 2, sa, ZT_ST_F32) == 0, "add a: %s",
          zt_errmsg());
    CHECK(zt_st_writer_add_f32(w, "model.layers.0.mlp.down_proj.weight", b, 3, sb, ZT_ST_BF16) == 0, "add b: %s",
          zt_errmsg());
    CHECK(zt_st_writer_add_f32(w, "scalar", &scal, 0, NULL, ZT_ST_BF16) == 0, "add scalar: %s", zt_errmsg());
    CHECK(zt_st_writer_add_f32(w, "empty", NULL, 2, s0, ZT_ST_F32) == 0, "add empty: %s", zt_errmsg());
    CHECK(zt_st_writer_add_f32(w, "c", c, 1, sc, ZT_ST_F32) == 0, "add c: %s", zt_errmsg());

    // Refused additions, each with the reason.
    int64_t s9[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1}, sneg[1] = {-1};
    char long_name[300];
    memset(long_name, 'x', 256);
    long_name[256] = 0;
    CHECK(zt_st_writer_add_f32(w, "f16", a, 1, sc, ZT_ST_F16) == -1 && strstr(zt_errmsg(), "F32 or BF16"),
          "F16 refused: %s", zt_errmsg());
    CHECK(zt_st_writer_add_f32(w, "nine", a, 9, s9, ZT_ST_F32) == -1 && strstr(zt_errmsg(), "ndim"), "ndim 9: %s",
          zt_errmsg());
    CHECK(zt_st_writer_add_f32(w, "neg", a, 1, sneg, ZT_ST_F32) == -1 && strstr(zt_errmsg(), "< 0"), "neg: %s",
          zt_errmsg());
    CHECK(zt_st_writer_add_f32(w, "c", c, 1, sc, ZT_ST_F32) == -1 && strstr(zt_errmsg(), "twice"), "dup: %s",
          zt_errmsg());
    CHECK(zt_st_writer_add_f32(w, long_name, c, 1, sc, ZT_ST_F32) == -1 && strstr(zt_errmsg(), "255"),
          "long name: %s", zt_errmsg());

    const char *path = tmp_path("rt.safetensors");
    CHECK(zt_st_write(w, path) == 0, "write: %s", zt_errmsg());
    const char *sample = getenv("ZT_ST_SAMPLE");  // for checking with the Python library by hand
    if (sample) CHECK(zt_st_write(w, sample) == 0, "write sample: %s", zt_errmsg());
    zt_st_writer_free(w);
    CHECK(count_tmp_files() == 0, "tmp file left behind");

    // Header layout: what the Python library writes (metadata first, insertion
    // order, space padding to 8).
    size_t len;
    char *raw = zt_read_file(path, &len);
    CHECK(raw != NULL, "read back: %s", zt_errmsg());
    if (raw) {
        uint64_t hlen;
        memcpy(&hlen, raw, 8);
        CHECK((8 + hlen) % 8 == 0, "header length %llu not padded to 8", (unsigned long long)hlen);
        CHECK(strncmp(raw + 8, "{\"__metadata__\":{\"format\":\"pt\",", 31) == 0, "header starts %.40s", raw + 8);
        char *h = raw + 8;
        char *pu = strstr(h, "up_proj"), *pd = strstr(h, "down_proj"), *ps = strstr(h, "\"scalar\""),
             *pc = strstr(h, "\"c\"");
        CHECK(pu && pd && ps && pc && pu < pd && pd < ps && ps < pc, "insertion order");
        CHECK(strstr(h, "\"data_offsets\":[0,4000]") != NULL, "first offsets");
        CHECK(h[hlen - 1] == ' ' || h[hlen - 1] == '}', "padding is spaces");
        free(raw);
    }

    zt_st_file f;
    CHECK(zt_st_open(&f, path) == 0, "reopen: %s", zt_errmsg());
    const zt_st_tensor *t = need(&f, "model.layers.0.mlp.up_proj.weight");
    if (t) {
        CHECK(t->dtype == ZT_ST_F32 && t->ndim == 2 && t->shape[1] == 100, "a meta");
        zt_st_read_f32(&f, t, got);
        CHECK(memcmp(got, a, sizeof a) == 0, "F32 round trip is not bit-exact");
    }
    t = need(&f, "model.layers.0.mlp.down_proj.weight");
    if (t) {
        CHECK(t->dtype == ZT_ST_BF16 && t->ndim == 3 && t->numel == RT_N, "b meta");
        zt_st_read_f32(&f, t, got);
        int bad = 0;
        for (int i = 0; i < RT_N; i++) {
            float r = zt_bf16_to_f32(zt_f32_to_bf16(b[i]));
            if (!same_float(got[i], r)) bad++;
            // Round to nearest: at most half a bf16 ulp (8 significant bits), 2^-8 relative.
            if (isfinite(b[i]) && fabsf(got[i] - b[i]) > ldexpf(fabsf(b[i]), -8)) bad++;
        }
        CHECK(bad == 0, "%d BF16 values off", bad);
        CHECK(isnan(got[0]) && isinf(got[1]) && got[1] < 0 && got[2] == 1.0f, "bf16 specials %g %g %g", got[0],
              got[1], got[2]);
    }
    t = need(&f, "scalar");
    if (t) CHECK(t->ndim == 0 && zt_st_read_f32(&f, t, got) == 0 && got[0] == 7.25f, "scalar");
    t = need(&f, "empty");
    if (t) CHECK(t->numel == 0 && t->shape[0] == 0 && t->shape[1] == 4, "empty");
    zt_st_close(&f);

    // Overwriting: the new content replaces the old in one rename.
    zt_st_writer *w2 = zt_st_writer_new();
    zt_st_writer_add_f32(w2, "c", c, 1, sc, ZT_ST_F32);
    CHECK(zt_st_write(w2, path) == 0, "overwrite: %s", zt_errmsg());
    zt_st_writer_free(w2);
    CHECK(zt_st_open(&f, path) == 0 && f.ntensors == 1, "overwritten file has 1 tensor");
    zt_st_close(&f);

    // A missing directory is reported, not crashed on.
    zt_st_writer *w3 = zt_st_writer_new();
    zt_st_writer_add_f32(w3, "c", c, 1, sc, ZT_ST_F32);
    CHECK(zt_st_write(w3, tmp_path("no/such/dir.safetensors")) == -1 && strstr(zt_errmsg(), "cannot create"),
          "missing dir: %s", zt_errmsg());
    zt_st_writer_free(w3);
}

// A full disk, simulated with RLIMIT_FSIZE: the write fails with the byte count, the
// tmp file is removed and the existing good file is left exactly as it was.
static void test_full_disk(void) {
    const char *path = tmp_path("full.safetensors");
    static float big[20000];
    for (int i = 0; i < 20000; i++) big[i] = ramp(i);
    int64_t sgood[1] = {3}, sbig[1] = {20000};
    float good[3] = {1, 2, 3};
    zt_st_writer *w = zt_st_writer_new();
    zt_st_writer_add_f32(w, "good", good, 1, sgood, ZT_ST_F32);
    CHECK(zt_st_write(w, path) == 0, "write good: %s", zt_errmsg());
    zt_st_writer_free(w);
    size_t len0;
    char *before = zt_read_file(path, &len0);

    struct rlimit old, lim;
    getrlimit(RLIMIT_FSIZE, &old);
    lim = old;
    lim.rlim_cur = 16384;
    signal(SIGXFSZ, SIG_IGN);  // get EFBIG from write() instead of being killed
    if (setrlimit(RLIMIT_FSIZE, &lim) != 0) {
        printf("  skipped full-disk check: setrlimit: %s\n", strerror(errno));
        free(before);
        return;
    }
    w = zt_st_writer_new();
    zt_st_writer_add_f32(w, "big", big, 1, sbig, ZT_ST_F32);
    int rc = zt_st_write(w, path);
    setrlimit(RLIMIT_FSIZE, &old);
    zt_st_writer_free(w);
    CHECK(rc == -1, "write past the size limit must fail");
    CHECK(strstr(zt_errmsg(), "full.safetensors.tmp.") && strstr(zt_errmsg(), "write failed after 16384 of 80"),
          "message names the file and bytes written: %s", zt_errmsg());
    CHECK(count_tmp_files() == 0, "tmp file left behind after a failed write");
    size_t len1;
    char *after = zt_read_file(path, &len1);
    CHECK(before && after && len0 == len1 && memcmp(before, after, len0) == 0, "good file changed by a failed write");
    free(before);
    free(after);
}

// ---- (c) corrupt files ------------------------------------------------------------

static char *good_data;  // data section of the good file: a F32[2,3] | b BF16[4] | c F32[2]
static size_t good_data_len;
static char *good_file;
static size_t good_file_len;

static void make_good_file(void) {
    static const float a[6] = {1, 2, 3, 4, 5, 6}, b[4] = {1, 2, 3, 4}, c[2] = {-1, -2};
    int64_t sa[2] = {2, 3}, sb[1] = {4}, sc[1] = {2};
    zt_st_writer *w = zt_st_writer_new();
    zt_st_writer_add_f32(w, "a", a, 2, sa, ZT_ST_F32);
    zt_st_writer_add_f32(w, "b", b, 1, sb, ZT_ST_BF16);
    zt_st_writer_add_f32(w, "c", c, 1, sc, ZT_ST_F32);
    const char *path = tmp_path("good.safetensors");
    CHECK(zt_st_write(w, path) == 0, "write good: %s", zt_errmsg());
    zt_st_writer_free(w);
    good_file = zt_read_file(path, &good_file_len);
    uint64_t hlen;
    memcpy(&hlen, good_file, 8);
    good_data = good_file + 8 + hlen;
    good_data_len = good_file_len - 8 - hlen;
    CHECK(good_data_len == 40, "good data %zu bytes", good_data_len);
}

// Open `bytes`, expect failure with every needle in the message (and the file name).
static void expect_bad(const char *what, const void *bytes, size_t n, const char *needle1, const char *needle2) {
    const char *path = tmp_path("bad.safetensors");
    write_bytes(path, bytes, n);
    zt_st_file f;
    int rc = zt_st_open(&f, path);
    const char *m = zt_errmsg();
    CHECK(rc == -1, "%s: opened without error", what);
    CHECK(strstr(m, "bad.safetensors") != NULL, "%s: message does not name the file: %s", what, m);
    CHECK(strstr(m, needle1) != NULL, "%s: message lacks \"%s\": %s", what, needle1, m);
    if (needle2) CHECK(strstr(m, needle2) != NULL, "%s: message lacks \"%s\": %s", what, needle2, m);
    if (getenv("ZT_TEST_VERBOSE")) printf("  ok %-28s %s\n", what, m);
    if (rc == 0) zt_st_close(&f);
    CHECK(f.map == NULL && f.tensors == NULL && f.fd == -1, "%s: failed open left resources", what);
    unlink(path);
}

// The good data section behind a new header (extra zero bytes appended if asked).
static void expect_bad_header(const char *what, const char *header, size_t extra, const char *needle1,
                              const char *needle2) {
    size_t hlen = strlen(header), n = 8 + hlen + good_data_len + extra;
    char *buf = zt_xcalloc(1, n);
    uint64_t h64 = hlen;
    memcpy(buf, &h64, 8);
    memcpy(buf + 8, header, hlen);
    memcpy(buf + 8 + hlen, good_data, good_data_len);
    expect_bad(what, buf, n, needle1, needle2);
    free(buf);
}

static void test_corrupt(void) {
    make_good_file();
    if (!good_file) return;
    char *buf = zt_xmalloc(good_file_len);

    expect_bad("shorter than 8 bytes", good_file, 5, "shorter than the 8-byte", NULL);
    memcpy(buf, good_file, good_file_len);
    uint64_t h = good_file_len;  // 8 + N > size
    memcpy(buf, &h, 8);
    expect_bad("header length past EOF", buf, good_file_len, "runs past the end of the file", NULL);
    h = 200000000;
    memcpy(buf, &h, 8);
    expect_bad("header length over 100 MB", buf, good_file_len, "exceeds the 100000000-byte limit", NULL);
    expect_bad("truncated data", good_file, good_file_len - 4,
               "truncated: tensor c needs bytes [32,40) but only 36 data bytes are present", NULL);

    // The good header, for reference:
    // {"a":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]},
    //  "b":{"dtype":"BF16","shape":[4],"data_offsets":[24,32]},
    //  "c":{"dtype":"F32","shape":[2],"data_offsets":[32,40]}}
#define A_OK "\"a\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]}"
#define B_OK "\"b\":{\"dtype\":\"BF16\",\"shape\":[4],\"data_offsets\":[24,32]}"
#define C_OK "\"c\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[32,40]}"
    {
        zt_st_file f;
        write_bytes(tmp_path("ok.safetensors"), good_file, good_file_len);
        CHECK(zt_st_open(&f, tmp_path("ok.safetensors")) == 0, "good file: %s", zt_errmsg());
        zt_st_close(&f);
    }
    expect_bad_header("invalid JSON", "{" A_OK "," B_OK ",\"c\":{\"dtype\":F32}}", 0, "not valid JSON", NULL);
    expect_bad_header("trailing garbage", "{" A_OK "," B_OK "," C_OK "}  x", 0, "not valid JSON", "trailing");
    expect_bad_header("empty header", "", 0, "not valid JSON", NULL);
    expect_bad_header("non-object header", "[1,2,3]                ", 0, "not a JSON object", NULL);
    expect_bad_header("entry not an object", "{" A_OK "," B_OK ",\"c\":[1]}", 0, "tensor c", "not a JSON object");
    expect_bad_header("unknown dtype",
                      "{" A_OK "," B_OK ",\"c\":{\"dtype\":\"Q32\",\"shape\":[2],\"data_offsets\":[32,40]}}", 0,
                      "unknown dtype \"Q32\"", "tensor c");
    expect_bad_header("sub-byte dtype",
                      "{" A_OK "," B_OK ",\"c\":{\"dtype\":\"F4\",\"shape\":[2],\"data_offsets\":[32,40]}}", 0,
                      "F4", "not supported");
    expect_bad_header("shape/offset mismatch",
                      "{\"a\":{\"dtype\":\"F32\",\"shape\":[2,4],\"data_offsets\":[0,24]}," B_OK "," C_OK "}", 0,
                      "tensor a: data_offsets span 24 bytes but shape x dtype F32 needs 32", NULL);
    expect_bad_header("negative dim",
                      "{\"a\":{\"dtype\":\"F32\",\"shape\":[-2,3],\"data_offsets\":[0,24]}," B_OK "," C_OK "}", 0,
                      "shape[0] is not a non-negative integer", NULL);
    expect_bad_header("fractional dim",
                      "{\"a\":{\"dtype\":\"F32\",\"shape\":[2,3.5],\"data_offsets\":[0,24]}," B_OK "," C_OK "}", 0,
                      "shape[1] is not a non-negative integer", NULL);
    expect_bad_header("ndim 9",
                      "{\"a\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,2,3],\"data_offsets\":[0,24]}," B_OK
                      "," C_OK "}",
                      0, "9 dims", NULL);
    expect_bad_header("begin > end",
                      "{\"a\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[24,0]}," B_OK "," C_OK "}", 0,
                      "begin > end", NULL);
    expect_bad_header("offsets not integers",
                      "{\"a\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,\"24\"]}," B_OK "," C_OK "}", 0,
                      "data_offsets", "non-negative integers");
    expect_bad_header("gap between tensors",
                      "{" A_OK "," B_OK ",\"c\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[36,44]}}", 4,
                      "gap between tensors: b ends at data byte 32 but the next tensor c begins at 36", NULL);
    expect_bad_header("gap before first",
                      "{\"a\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[8,32]},"
                      "\"b\":{\"dtype\":\"BF16\",\"shape\":[4],\"data_offsets\":[32,40]}}",
                      0, "gap before the first tensor: a", NULL);
    expect_bad_header("overlap",
                      "{" A_OK "," B_OK ",\"c\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[28,36]}}", 0,
                      "overlap between tensors: b ends at data byte 32 but c begins at 28", NULL);
    expect_bad_header("duplicate name", "{" A_OK "," B_OK "," B_OK "}", 0, "tensor b appears twice", NULL);
    expect_bad_header("metadata not strings", "{\"__metadata__\":{\"k\":1}," A_OK "," B_OK "," C_OK "}", 0,
                      "__metadata__", "not a string");
    expect_bad_header("metadata not object", "{\"__metadata__\":[]," A_OK "," B_OK "," C_OK "}", 0, "__metadata__",
                      "not a JSON object");
    {
        char hdr[600];
        char name[300];
        memset(name, 'n', 256);
        name[256] = 0;
        snprintf(hdr, sizeof hdr, "{\"%s\":{\"dtype\":\"U8\",\"shape\":[40],\"data_offsets\":[0,40]}}", name);
        expect_bad_header("name of 256 chars", hdr, 0, "name of 256 chars", NULL);
    }

    // A dtype the library knows but zerotrain does not convert (I8) still validates;
    // converting it is refused by name.
    {
        const char *hdr = "{" A_OK "," B_OK ",\"c\":{\"dtype\":\"I8\",\"shape\":[8],\"data_offsets\":[32,40]}}";
        size_t hlen = strlen(hdr), n = 8 + hlen + good_data_len;
        char *b = zt_xmalloc(n);
        uint64_t h64 = hlen;
        memcpy(b, &h64, 8);
        memcpy(b + 8, hdr, hlen);
        memcpy(b + 8 + hlen, good_data, good_data_len);
        write_bytes(tmp_path("i8.safetensors"), b, n);
        free(b);
        zt_st_file f;
        CHECK(zt_st_open(&f, tmp_path("i8.safetensors")) == 0, "I8 file: %s", zt_errmsg());
        const zt_st_tensor *t = zt_st_find(&f, "c");
        float out[8];
        CHECK(t && t->dtype == ZT_ST_OTHER && zt_st_read_f32(&f, t, out) == -1 && strstr(zt_errmsg(), "tensor c"),
              "I8 read refused: %s", zt_errmsg());
        zt_st_close(&f);
    }
    free(buf);
    free(good_file);
}

// zt_st_fingerprint_file (what ranks compare of --init, train/input_digest.c): the same tensors
// under another header agree; another element in a sampled region, another shape or name differ;
// an element between the samples of a large tensor is not seen (the documented limit, pinned so
// that docs/operations.md stays true).
#define FP_N 8192  // 32 KiB of F32: sampled at [0, 4K), [14K, 18K), [28K, 32K)
static void write_fp_file(const char *path, const char *note, const float *w, int64_t w_rows, const char *wname) {
    static float n[16];
    for (int i = 0; i < 16; i++) n[i] = 1.0f + 0.01f * (float)i;
    zt_st_writer *wr = zt_st_writer_new();
    const int64_t sw[2] = {w_rows, FP_N / w_rows}, sn[1] = {16};
    CHECK(zt_st_writer_metadata(wr, "format", "pt") == 0, "metadata");
    if (note) CHECK(zt_st_writer_metadata(wr, "note", note) == 0, "metadata");
    CHECK(zt_st_writer_add_f32(wr, wname, w, 2, sw, ZT_ST_F32) == 0, "add w: %s", zt_errmsg());
    CHECK(zt_st_writer_add_f32(wr, "model.norm.weight", n, 1, sn, ZT_ST_F32) == 0, "add n: %s", zt_errmsg());
    CHECK(zt_st_write(wr, path) == 0, "write %s: %s", path, zt_errmsg());
    zt_st_writer_free(wr);
}

static zt_st_fingerprint fp_of(const char *name, const char *note, const float *w, int64_t rows, const char *wname) {
    const char *path = tmp_path(name);
    write_fp_file(path, note, w, rows, wname);
    zt_st_fingerprint fp;
    CHECK(zt_st_fingerprint_file(path, &fp) == 0, "fingerprint %s: %s", name, zt_errmsg());
    unlink(path);
    return fp;
}

static void test_fingerprint(void) {
    static float w[FP_N];
    for (int i = 0; i < FP_N; i++) w[i] = ramp(i);
    const char *W = "model.embed_tokens.weight";
    const zt_st_fingerprint a = fp_of("fp_a.safetensors", NULL, w, 64, W);
    CHECK(a.ntensors == 2 && a.data_bytes == 4 * (FP_N + 16), "tensors %d, data bytes %llu", a.ntensors,
          (unsigned long long)a.data_bytes);
    CHECK(a.sampled == 3 * ZT_ST_SAMPLE_BYTES + 64, "sampled %llu bytes", (unsigned long long)a.sampled);
    // another header (metadata, so another length and padding): the same tensors agree
    const zt_st_fingerprint b = fp_of("fp_b.safetensors", "written by another tool", w, 64, W);
    CHECK(b.bytes != a.bytes, "the second header should be longer");
    CHECK(b.data_bytes == a.data_bytes && b.table_crc32c == a.table_crc32c && b.sample_crc32c == a.sample_crc32c,
          "the same tensors under another header must agree");
    // one element changed in each sampled region: the samples differ, the table does not
    const int64_t sampled_at[3] = {3, (14 * 1024 + 100) / 4, FP_N - 1};
    for (int k = 0; k < 3; k++) {
        const float keep = w[sampled_at[k]];
        w[sampled_at[k]] = nextafterf(keep, INFINITY);
        const zt_st_fingerprint c = fp_of("fp_c.safetensors", NULL, w, 64, W);
        w[sampled_at[k]] = keep;
        CHECK(c.table_crc32c == a.table_crc32c && c.sample_crc32c != a.sample_crc32c,
              "element %lld changed: table %08x/%08x, samples %08x/%08x", (long long)sampled_at[k], c.table_crc32c,
              a.table_crc32c, c.sample_crc32c, a.sample_crc32c);
    }
    // between the head and the middle sample (byte 8 KiB of 32): not seen
    const float keep = w[2048];
    w[2048] = nextafterf(keep, INFINITY);
    const zt_st_fingerprint d = fp_of("fp_d.safetensors", NULL, w, 64, W);
    w[2048] = keep;
    CHECK(d.table_crc32c == a.table_crc32c && d.sample_crc32c == a.sample_crc32c,
          "an element between the samples is not read, so it cannot change the fingerprint");
    // another shape or another name: the table differs
    const zt_st_fingerprint e = fp_of("fp_e.safetensors", NULL, w, 128, W);
    CHECK(e.table_crc32c != a.table_crc32c && e.sample_crc32c == a.sample_crc32c, "another shape");
    const zt_st_fingerprint f = fp_of("fp_f.safetensors", NULL, w, 64, "lm_head.weight");
    CHECK(f.table_crc32c != a.table_crc32c, "another name");
    // a file that is not safetensors: refused with zt_st_open's reason
    const char *bad = tmp_path("fp_bad.safetensors");
    write_bytes(bad, "abc", 3);
    zt_st_fingerprint g;
    CHECK(zt_st_fingerprint_file(bad, &g) == -1 && strstr(zt_errmsg(), "shorter than the 8-byte header"), "bad: %s",
          zt_errmsg());
    unlink(bad);
}

int main(void) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/zt_st_XXXXXX");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 2;
    }
    test_conversions();
    test_python_fixture();
    test_round_trip();
    test_full_disk();
    test_corrupt();
    test_fingerprint();

    // Remove what the tests left (every other file was already unlinked).
    const char *left[] = {"rt.safetensors", "full.safetensors", "good.safetensors", "ok.safetensors",
                          "i8.safetensors"};
    for (size_t i = 0; i < sizeof left / sizeof left[0]; i++) unlink(tmp_path(left[i]));
    if (rmdir(tmpdir) != 0) fprintf(stderr, "note: %s not removed: %s\n", tmpdir, strerror(errno));
    TEST_END();
}
