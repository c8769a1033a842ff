// Tests for data/: CRC-32C vectors and hardware/software agreement, pack -> open
// round trips for every input kind and layout, and every bad input that pack or
// zt_dataset_open must refuse, checking that the error names the file and position.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <stdarg.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/crc32c.h"
#include "data/dataset.h"
#include "base/common.h"
#include "tests/support/test_util.h"

static char tmp_root[256];

// Path under the test's scratch directory; a small ring so several can be live at once.
static const char *P(const char *fmt, ...) {
    static char ring[8][4096];
    static int k;
    char rel[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(rel, sizeof rel, fmt, ap);
    va_end(ap);
    char *out = ring[k++ % 8];
    snprintf(out, 4096, "%s/%s", tmp_root, rel);
    return out;
}

static void write_file(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, n, f) != n || fclose(f) != 0) {
        fprintf(stderr, "test setup: cannot write %s: %s\n", path, strerror(errno));
        exit(2);
    }
}

static void write_text(const char *path, const char *text) { write_file(path, text, strlen(text)); }

static void append_file(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "ab");
    if (!f || fwrite(data, 1, n, f) != n || fclose(f) != 0) exit(2);
}

// Overwrite bytes at `off` in place (to corrupt a block file).
static void poke(const char *path, long off, const void *data, size_t n) {
    int fd = open(path, O_WRONLY);
    if (fd < 0 || pwrite(fd, data, n, off) != (ssize_t)n || close(fd) != 0) exit(2);
}

static void replace_in_file(const char *path, const char *old, const char *new_) {
    size_t n;
    char *s = zt_read_file(path, &n);
    char *at = s ? strstr(s, old) : NULL;
    if (!at) {
        fprintf(stderr, "test setup: '%s' not found in %s\n", old, path);
        exit(2);
    }
    FILE *f = fopen(path, "wb");
    fwrite(s, 1, (size_t)(at - s), f);
    fputs(new_, f);
    fputs(at + strlen(old), f);
    fclose(f);
    free(s);
}

static int rm_cb(const char *p, const struct stat *sb, int flag, struct FTW *ftw) { return remove(p); }

// Checks that the last call failed with a message holding every given substring.
#define CHECK_ERR(rc, ...)                                                              \
    do {                                                                                \
        const char *_subs[] = {__VA_ARGS__};                                            \
        CHECK((rc) == -1, "expected failure, got rc %d", (rc));                         \
        for (size_t _i = 0; _i < sizeof _subs / sizeof _subs[0]; _i++)                  \
            CHECK(strstr(zt_errmsg(), _subs[_i]) != NULL, "message '%s' lacks '%s'",    \
                  zt_errmsg(), _subs[_i]);                                              \
        if (getenv("ZT_TEST_VERBOSE")) printf("  error ok: %s\n", zt_errmsg());         \
    } while (0)

static zt_pack_opts popts(zt_pack_input in, int seq_len, int64_t vocab, int64_t eos, int per_rank) {
    zt_pack_opts o = {.input = in, .seq_len = seq_len, .vocab_size = vocab, .eos_id = eos,
                      .per_rank = per_rank, .tokenizer = "test", .quiet = 1};
    return o;
}

static const zt_dataset_opts all_checks = {.verify_crc = 1, .check_tokens = 1, .model_vocab = 0};

// ---------------------------------------------------------------- crc32c
static void test_crc(void) {
    CHECK(zt_crc32c(0, "123456789", 9) == 0xE3069283u, "got 0x%08x", zt_crc32c(0, "123456789", 9));
    CHECK(zt_crc32c_sw(0, "123456789", 9) == 0xE3069283u, "sw got 0x%08x", zt_crc32c_sw(0, "123456789", 9));
    CHECK(zt_crc32c(0, "", 0) == 0, "empty");
    // RFC 3720 appendix B.4 vectors.
    unsigned char b[32];
    memset(b, 0, 32);
    CHECK(zt_crc32c(0, b, 32) == 0x8A9136AAu, "zeros: 0x%08x", zt_crc32c(0, b, 32));
    memset(b, 0xff, 32);
    CHECK(zt_crc32c(0, b, 32) == 0x62A8AB43u, "ones: 0x%08x", zt_crc32c(0, b, 32));
    for (int i = 0; i < 32; i++) b[i] = (unsigned char)i;
    CHECK(zt_crc32c(0, b, 32) == 0x46DD794Eu, "incrementing: 0x%08x", zt_crc32c(0, b, 32));
    for (int i = 0; i < 32; i++) b[i] = (unsigned char)(31 - i);
    CHECK(zt_crc32c(0, b, 32) == 0x113FDB5Cu, "decrementing: 0x%08x", zt_crc32c(0, b, 32));

    // Random buffers, odd lengths and misaligned starts; incremental == one shot.
    enum { N = 1 << 16 };
    unsigned char *buf = zt_xmalloc(N + 16);
    zt_rng r;
    zt_rng_seed(&r, 42);
    for (int i = 0; i < N + 16; i++) buf[i] = (unsigned char)zt_rng_u64(&r);
    int hw = zt_crc32c_hw_available(), bad_hw = 0, bad_inc = 0;
    for (int t = 0; t < 300; t++) {
        size_t off = zt_rng_below(&r, 16), n = zt_rng_below(&r, N) | 1;
        if (t < 64) n = (size_t)t * 2 + 1;  // short lengths hit the head/tail loops
        uint32_t sw = zt_crc32c_sw(0, buf + off, n);
        if (hw && zt_crc32c_hw(0, buf + off, n) != sw) bad_hw++;
        size_t cut = zt_rng_below(&r, n + 1);
        if (zt_crc32c(zt_crc32c(0, buf + off, cut), buf + off + cut, n - cut) != sw) bad_inc++;
    }
    CHECK(bad_hw == 0, "%d buffers where SSE4.2 and table CRC differ", bad_hw);
    CHECK(bad_inc == 0, "%d buffers where incremental CRC differs", bad_inc);
    printf("crc32c: hardware path %s\n", hw ? "available and checked against tables" : "not available");
    free(buf);
}

// ---------------------------------------------------------------- pack round trips
static int block_eq(const zt_dataset *ds, int file, int64_t block, const uint32_t *want) {
    const uint32_t *b = zt_dataset_block(ds, file, block);
    return b && !memcmp(b, want, (size_t)ds->seq_len * 4);
}

static void test_pack_ids(void) {
    const char *in = P("ids.txt");
    write_text(in, "1 2 3\n\n4,5, 6\t7\n  ,\n8 9 10 11 12\r\n");
    zt_pack_opts o = popts(ZT_PACK_TEXT_IDS, 4, 100, 99, 0);
    zt_pack_stats st;
    const char *inputs[] = {in};
    int rc = zt_pack(inputs, 1, P("ids"), &o, &st);
    CHECK(rc == 0, "pack: %s", zt_errmsg());
    // stream 1 2 3 99 | 4 5 6 7 | 99 8 9 10 | 11 12 99 (dropped)
    CHECK(st.documents == 3, "documents %lld", (long long)st.documents);
    CHECK(st.tokens == 15, "tokens %lld", (long long)st.tokens);
    CHECK(st.blocks == 3, "blocks %lld", (long long)st.blocks);
    CHECK(st.dropped_tokens == 3, "dropped %lld", (long long)st.dropped_tokens);
    CHECK(st.nfiles == 1, "nfiles %d", st.nfiles);

    zt_dataset ds;
    char dir_slash[4200];
    snprintf(dir_slash, sizeof dir_slash, "%s/", P("ids"));  // a trailing slash names the same dataset
    rc = zt_dataset_open(&ds, dir_slash, &all_checks);
    CHECK(rc == 0, "open: %s", zt_errmsg());
    if (rc) return;
    CHECK(ds.seq_len == 4 && ds.vocab_size == 100 && ds.eos_id == 99, "header %d %lld %lld", ds.seq_len,
          (long long)ds.vocab_size, (long long)ds.eos_id);
    CHECK(!strcmp(ds.tokenizer, "test"), "tokenizer '%s'", ds.tokenizer);
    CHECK(ds.nfiles == 1 && !strcmp(ds.files[0].name, "data.u32"), "files %d", ds.nfiles);
    CHECK(ds.total_blocks == 3 && ds.files[0].tokens == 12 && ds.files[0].bytes == 48, "counts");
    const uint32_t want[3][4] = {{1, 2, 3, 99}, {4, 5, 6, 7}, {99, 8, 9, 10}};
    for (int b = 0; b < 3; b++) CHECK(block_eq(&ds, 0, b, want[b]), "block %d differs", b);
    CHECK(zt_dataset_block(&ds, 0, 3) == NULL && zt_dataset_block(&ds, 1, 0) == NULL, "out-of-range block");
    size_t n;
    char *raw = zt_read_file(P("ids/data.u32"), &n);
    CHECK(raw && n == 48 && zt_crc32c(0, raw, n) == ds.files[0].crc32c, "crc in dataset.json matches the file");
    free(raw);
    zt_dataset_close(&ds);
}

static void test_pack_u32_and_bytes(void) {
    uint32_t a[5] = {10, 11, 12, 13, 14}, b[7] = {20, 21, 22, 23, 24, 25, 26};
    write_file(P("a.u32"), a, sizeof a);
    write_file(P("empty.u32"), "", 0);
    write_file(P("b.u32"), b, sizeof b);
    zt_pack_opts o = popts(ZT_PACK_U32, 3, 30, -1, 0);
    zt_pack_stats st;
    const char *inputs[] = {P("a.u32"), P("empty.u32"), P("b.u32")};
    int rc = zt_pack(inputs, 3, P("u32"), &o, &st);
    CHECK(rc == 0, "pack u32: %s", zt_errmsg());
    CHECK(st.documents == 2 && st.blocks == 4 && st.dropped_tokens == 0, "u32 stats %lld %lld %lld",
          (long long)st.documents, (long long)st.blocks, (long long)st.dropped_tokens);
    zt_dataset ds;
    rc = zt_dataset_open(&ds, P("u32"), &all_checks);
    CHECK(rc == 0, "open u32: %s", zt_errmsg());
    if (rc == 0) {
        CHECK(ds.eos_id == -1, "no eos recorded");
        const uint32_t w1[3] = {13, 14, 20}, w3[3] = {24, 25, 26};
        CHECK(block_eq(&ds, 0, 1, w1) && block_eq(&ds, 0, 3, w3), "u32 blocks");
        zt_dataset_close(&ds);
    }

    write_text(P("h.txt"), "hello");
    write_text(P("w.txt"), "world!");
    o = popts(ZT_PACK_BYTES, 4, 257, 256, 0);
    const char *bin[] = {P("h.txt"), P("w.txt")};
    rc = zt_pack(bin, 2, P("bytes"), &o, &st);
    CHECK(rc == 0, "pack bytes: %s", zt_errmsg());
    CHECK(st.documents == 2 && st.tokens == 13 && st.blocks == 3 && st.dropped_tokens == 1, "bytes stats");
    rc = zt_dataset_open(&ds, P("bytes"), &all_checks);
    CHECK(rc == 0, "open bytes: %s", zt_errmsg());
    if (rc == 0) {
        const uint32_t w1[4] = {'o', 256, 'w', 'o'};
        CHECK(block_eq(&ds, 0, 1, w1), "bytes block 1");
        zt_dataset_close(&ds);
    }
}

// Per-rank layout: documents dealt round-robin, each rank packed on its own, so
// the block counts differ (the field deadlock's layout).
static void test_pack_per_rank(void) {
    write_text(P("pr.txt"), "1 2 3 4 5\n6 7\n8 9 10 11 12 13 14\n15\n16 17 18 19\n");
    zt_pack_opts o = popts(ZT_PACK_TEXT_IDS, 4, 50, 0, 3);
    zt_pack_stats st;
    const char *inputs[] = {P("pr.txt")};
    int rc = zt_pack(inputs, 1, P("pr"), &o, &st);
    CHECK(rc == 0, "pack per-rank: %s", zt_errmsg());
    // rank0: docs 0,3 = 1 2 3 4 5 0 15 0; rank1: docs 1,4 = 6 7 0 16 17 18 19 0; rank2: doc 2 = 8..14 0.
    CHECK(st.blocks == 6 && st.dropped_tokens == 0 && st.nfiles == 3, "stats blocks %lld dropped %lld",
          (long long)st.blocks, (long long)st.dropped_tokens);
    zt_dataset ds;
    rc = zt_dataset_open(&ds, P("pr"), &all_checks);
    CHECK(rc == 0, "open per-rank: %s", zt_errmsg());
    if (rc == 0) {
        CHECK(ds.nfiles == 3 && !strcmp(ds.files[2].name, "rank-00002.u32"), "rank file names");
        const uint32_t r1b1[4] = {17, 18, 19, 0};
        CHECK(block_eq(&ds, 1, 1, r1b1), "rank 1 block 1");
        zt_dataset_close(&ds);
    }

    // The same 5 documents over 2 ranks: uneven block counts.
    o = popts(ZT_PACK_TEXT_IDS, 4, 50, 0, 2);
    rc = zt_pack(inputs, 1, P("pr2"), &o, &st);
    CHECK(rc == 0, "pack per-rank 2: %s", zt_errmsg());
    rc = zt_dataset_open(&ds, P("pr2"), &all_checks);
    CHECK(rc == 0, "open per-rank 2: %s", zt_errmsg());
    if (rc == 0) {
        // rank0: docs 0,2,4 = 6+8+5 = 19 tokens -> 4 blocks; rank1: docs 1,3 = 3+2 = 5 -> 1 block.
        CHECK(ds.files[0].blocks == 4 && ds.files[1].blocks == 1, "uneven blocks %lld %lld",
              (long long)ds.files[0].blocks, (long long)ds.files[1].blocks);
        zt_dataset_close(&ds);
    }
    CHECK(st.dropped_tokens == 3 + 1, "dropped %lld", (long long)st.dropped_tokens);

    // More ranks than documents: pack refuses a file that gets no block (issue 47 item 11), naming
    // it, and writes no dataset.json ...
    write_text(P("two.txt"), "1 2 3 4\n5 6 7 8\n");
    const char *in2[] = {P("two.txt")};
    o = popts(ZT_PACK_TEXT_IDS, 2, 50, -1, 3);
    rc = zt_pack(in2, 1, P("pr3"), &o, &st);
    CHECK(rc != 0 && strstr(zt_errmsg(), "rank-00002.u32 gets no block") && access(P("pr3/dataset.json"), F_OK) != 0,
          "pack per-rank 3 over 2 documents must be refused naming rank-00002.u32: rc %d, %s", rc, zt_errmsg());
    // ... but a dataset whose last rank file is empty (made by hand, or by an older pack) still
    // opens: that rank has nothing, and evenfix stops every rank at once.
    o = popts(ZT_PACK_TEXT_IDS, 2, 50, -1, 2);
    rc = zt_pack(in2, 1, P("pr3b"), &o, &st);
    CHECK(rc == 0, "pack per-rank 2: %s", zt_errmsg());
    size_t jn = 0;
    char *j = zt_read_file(P("pr3b/dataset.json"), &jn), *end = j ? strrchr(j, ']') : NULL;
    CHECK(end != NULL, "pr3b/dataset.json");
    if (end) {
        *end = 0;
        char fixed[8192];
        snprintf(fixed, sizeof fixed,
                 "%s, {\"name\": \"rank-00002.u32\", \"blocks\": 0, \"tokens\": 0, \"crc32c\": \"0x00000000\", "
                 "\"documents\": 0, \"dropped_tokens\": 0}]%s",
                 j, end + 1);
        write_text(P("pr3b/dataset.json"), fixed);
        write_text(P("pr3b/rank-00002.u32"), "");
    }
    free(j);
    rc = zt_dataset_open(&ds, P("pr3b"), &all_checks);
    CHECK(rc == 0, "open with an empty rank file: %s", zt_errmsg());
    if (rc == 0) {
        CHECK(ds.files[2].blocks == 0 && ds.files[2].data == NULL && ds.total_blocks == 4, "empty rank");
        zt_dataset_close(&ds);
    }
}

// Random documents and layouts against a reference model of the packing rule.
static void test_pack_random(void) {
    zt_rng r;
    zt_rng_seed(&r, 7);
    for (int trial = 0; trial < 6; trial++) {
        int W = (int)zt_rng_below(&r, 4), nw = W ? W : 1, seq = 2 + (int)zt_rng_below(&r, 40);
        int64_t vocab = 1000, eos = zt_rng_below(&r, 2) ? 999 : -1;
        int ndocs = 1 + (int)zt_rng_below(&r, 60);
        // expected streams
        uint32_t **want = zt_xcalloc((size_t)nw, sizeof *want);
        int64_t *wn = zt_xcalloc((size_t)nw, sizeof *wn);
        for (int i = 0; i < nw; i++) want[i] = zt_xmalloc(200 * 61 * 4);
        FILE *f = fopen(P("rand%d.txt", trial), "w");
        for (int d = 0; d < ndocs; d++) {
            int len = 1 + (int)zt_rng_below(&r, 200);
            for (int j = 0; j < len; j++) {
                uint32_t t = (uint32_t)zt_rng_below(&r, 999);
                fprintf(f, j ? (zt_rng_below(&r, 2) ? " %u" : ",%u") : "%u", t);
                want[d % nw][wn[d % nw]++] = t;
            }
            if (eos >= 0) want[d % nw][wn[d % nw]++] = (uint32_t)eos;
            fputc('\n', f);
        }
        fclose(f);
        zt_pack_opts o = popts(ZT_PACK_TEXT_IDS, seq, vocab, eos, W);
        zt_pack_stats st;
        const char *inputs[] = {P("rand%d.txt", trial)};
        int rc = zt_pack(inputs, 1, P("rand%d", trial), &o, &st);
        CHECK(rc == 0, "pack random %d: %s", trial, zt_errmsg());
        zt_dataset ds;
        rc = zt_dataset_open(&ds, P("rand%d", trial), &all_checks);
        CHECK(rc == 0, "open random %d: %s", trial, zt_errmsg());
        if (rc == 0) {
            int64_t dropped = 0;
            for (int i = 0; i < nw; i++) {
                CHECK(ds.files[i].blocks == wn[i] / seq, "trial %d file %d blocks", trial, i);
                dropped += wn[i] % seq;
                int ok = 1;
                for (int64_t b = 0; b < ds.files[i].blocks; b++) ok &= block_eq(&ds, i, b, want[i] + b * seq);
                CHECK(ok, "trial %d file %d contents differ from the reference", trial, i);
            }
            CHECK(st.dropped_tokens == dropped && st.documents == ndocs, "trial %d stats", trial);
            zt_dataset_close(&ds);
        }
        for (int i = 0; i < nw; i++) free(want[i]);
        free(want);
        free(wn);
    }
}

// ---------------------------------------------------------------- pack errors
static void test_pack_errors(void) {
    zt_pack_opts o = popts(ZT_PACK_TEXT_IDS, 4, 100, -1, 0);
    zt_pack_stats st;
    write_text(P("bad1.txt"), "1 2\n3 12x 4\n");
    const char *i1[] = {P("bad1.txt")};
    CHECK_ERR(zt_pack(i1, 1, P("e1"), &o, &st), "bad1.txt:2:3:", "\"12x\"", "not a decimal token id");
    struct stat sb;
    CHECK(stat(P("e1/data.u32"), &sb) != 0 && stat(P("e1/dataset.json"), &sb) != 0, "failed pack leaves no files");

    write_text(P("bad2.txt"), "5 6 7\n8 100\n");
    const char *i2[] = {P("bad2.txt")};
    CHECK_ERR(zt_pack(i2, 1, P("e2"), &o, &st), "bad2.txt:2:3:", "token id 100 >= vocab_size 100");
    write_text(P("bad3.txt"), "-1\n");
    const char *i3[] = {P("bad3.txt")};
    CHECK_ERR(zt_pack(i3, 1, P("e3"), &o, &st), "bad3.txt:1:1:", "\"-1\"");
    write_text(P("bad4.txt"), "99999999999999999999999\n");
    const char *i4[] = {P("bad4.txt")};
    CHECK_ERR(zt_pack(i4, 1, P("e4"), &o, &st), "bad4.txt:1:1:", ">= vocab_size 100");

    const char *missing[] = {P("no-such-input.txt")};
    CHECK_ERR(zt_pack(missing, 1, P("e5"), &o, &st), "no-such-input.txt", "cannot open input");
    CHECK(stat(P("e5"), &sb) != 0, "missing input: output directory not created");

    zt_pack_opts ou = popts(ZT_PACK_U32, 4, 100, -1, 0);
    write_file(P("odd.u32"), "\1\0\0\0\2\0", 6);
    const char *i6[] = {P("odd.u32")};
    CHECK_ERR(zt_pack(i6, 1, P("e6"), &ou, &st), "odd.u32", "6 bytes is not a whole number of uint32");
    uint32_t ids[4] = {1, 2, 300, 4};
    write_file(P("big.u32"), ids, sizeof ids);
    const char *i7[] = {P("big.u32")};
    CHECK_ERR(zt_pack(i7, 1, P("e7"), &ou, &st), "big.u32", "token 2 (byte offset 8)", "id 300 >= vocab_size 100");

    zt_pack_opts ob = popts(ZT_PACK_BYTES, 4, 100, -1, 0);
    write_text(P("hi.txt"), "hi");  // 'h' = 104
    const char *i8[] = {P("hi.txt")};
    CHECK_ERR(zt_pack(i8, 1, P("e8"), &ob, &st), "hi.txt", "byte offset 0", "byte value 104 >= vocab_size 100");

    // Refuse to write over a finished dataset.
    write_text(P("ok.txt"), "1 2 3 4\n");
    const char *i9[] = {P("ok.txt")};
    CHECK(zt_pack(i9, 1, P("e9"), &o, &st) == 0, "first pack: %s", zt_errmsg());
    CHECK_ERR(zt_pack(i9, 1, P("e9"), &o, &st), "e9/dataset.json already exists", "new output directory");

    zt_pack_opts obad = popts(ZT_PACK_TEXT_IDS, 1, 100, -1, 0);
    CHECK_ERR(zt_pack(i9, 1, P("e10"), &obad, &st), "seq_len 1");
    obad = popts(ZT_PACK_TEXT_IDS, 4, 100, 100, 0);
    CHECK_ERR(zt_pack(i9, 1, P("e11"), &obad, &st), "eos id 100 >= vocab_size 100");

    // A full disk: a 16 KiB tmpfs (root only) and a 64 KiB input, so a write fails with ENOSPC.
    if (geteuid() == 0) {
        char fulldir[4096], big[4096];
        snprintf(fulldir, sizeof fulldir, "%s", P("full"));
        snprintf(big, sizeof big, "%s", P("big64k.u32"));
        uint32_t *many = zt_xcalloc(16384, sizeof *many);
        write_file(big, many, 16384 * sizeof *many);
        free(many);
        zt_mkdirs(fulldir);
        if (mount("tmpfs", fulldir, "tmpfs", 0, "size=16k") == 0) {
            const char *ib[] = {big};
            char out[4200];
            snprintf(out, sizeof out, "%s/ds", fulldir);
            CHECK_ERR(zt_pack(ib, 1, out, &ou, &st), "full/ds/data.u32", "write failed after",
                      "No space left on device");
            char js[4300];
            snprintf(js, sizeof js, "%s/dataset.json", out);
            CHECK(stat(js, &sb) != 0, "no dataset.json after a failed write");
            snprintf(js, sizeof js, "%s/data.u32.partial", out);
            CHECK(stat(js, &sb) != 0, "no partial block file after a failed write");
            umount(fulldir);
        } else {
            printf("  (full disk case skipped: cannot mount a tmpfs: %s)\n", strerror(errno));
        }
    }
}

// ---------------------------------------------------------------- open errors
// A fresh 3-block dataset (seq_len 4, vocab 100) in DIR to be damaged by a test.
static const char *fresh(const char *name) {
    write_text(P("%s.txt", name), "1 2 3 4 5 6 7 8 9 10 11 12\n");
    zt_pack_opts o = popts(ZT_PACK_TEXT_IDS, 4, 100, -1, 0);
    const char *in[] = {P("%s.txt", name)};
    if (zt_pack(in, 1, P("%s", name), &o, NULL) != 0) {
        fprintf(stderr, "test setup: %s\n", zt_errmsg());
        exit(2);
    }
    return P("%s", name);
}

static void test_open_errors(void) {
    zt_dataset ds;
    const zt_dataset_opts nocrc_v2 = {.verify_crc = 0, .check_tokens = 1};
    zt_mkdirs(P("empty"));
    CHECK_ERR(zt_dataset_open(&ds, P("empty"), &all_checks), "empty/dataset.json: not found", "zerotrain pack");
    CHECK_ERR(zt_dataset_open(&ds, P("nowhere"), &all_checks), "nowhere", "does not exist", "zerotrain pack");

    const char *d = fresh("j1");
    write_text(P("j1/dataset.json"), "{\"format\": \"zerotrain-tokens\",\n \"version\": 1,\n oops }\n");
    CHECK_ERR(zt_dataset_open(&ds, d, &all_checks), "j1/dataset.json", "line 3", "not valid JSON");
    d = fresh("j1deep");  // nested past cJSON's limit: said so, not "malformed at column 1121"
    {
        char deep[2400];
        size_t k = (size_t)snprintf(deep, sizeof deep, "{\"format\": ");
        for (int i = 0; i < 1100; i++) deep[k++] = '[';
        deep[k] = 0;
        write_text(P("j1deep/dataset.json"), deep);
    }
    CHECK_ERR(zt_dataset_open(&ds, d, &all_checks), "j1deep/dataset.json", "nested deeper than 1000 levels");

    d = fresh("j2");
    replace_in_file(P("j2/dataset.json"), "zerotrain-tokens", "something-else");
    CHECK_ERR(zt_dataset_open(&ds, d, &all_checks), "j2/dataset.json", "format", "something-else");

    d = fresh("j3");
    replace_in_file(P("j3/dataset.json"), "\"version\":\t1", "\"version\":\t3");
    CHECK_ERR(zt_dataset_open(&ds, d, &all_checks), "version: 3 is not supported", "reads versions 1 and 2",
              "newer zerotrain");

    // version 2 (token flags): the flag bits are fixed by the format
    d = fresh("g1");
    replace_in_file(P("g1/dataset.json"), "\"version\":\t1", "\"version\":\t2");
    CHECK_ERR(zt_dataset_open(&ds, d, &all_checks), "g1/dataset.json: token_flags", "doc_start_bit");
    d = fresh("g2");
    replace_in_file(P("g2/dataset.json"), "\"version\":\t1",
                    "\"version\": 2, \"token_flags\": {\"doc_start_bit\": 29, \"no_loss_bit\": 31}");
    CHECK_ERR(zt_dataset_open(&ds, d, &all_checks), "g2/dataset.json: token_flags: doc_start_bit 29",
              "bit 30 for a document start");
    d = fresh("g3");  // flags set on ids: masked off before the vocabulary check
    replace_in_file(P("g3/dataset.json"), "\"version\":\t1",
                    "\"version\": 2, \"doc_attention\": \"isolated\", \"trained_tokens\": 7, "
                    "\"token_flags\": {\"doc_start_bit\": 30, \"no_loss_bit\": 31}");
    uint32_t flagged = 7u | ZT_TOK_DOC_START | ZT_TOK_NO_LOSS;
    poke(P("g3/data.u32"), (1 * 4 + 2) * 4, &flagged, 4);
    CHECK(zt_dataset_open(&ds, d, &nocrc_v2) == 0, "a flagged id below the vocabulary opens: %s", zt_errmsg());
    if (ds.nfiles) {
        CHECK(ds.version == 2 && ds.token_flags && ds.doc_isolated && ds.trained_tokens == 7,
              "version 2 members read: version %d flags %d isolated %d trained %lld", ds.version, ds.token_flags,
              ds.doc_isolated, (long long)ds.trained_tokens);
        zt_dataset_close(&ds);
    }
    flagged = 150u | ZT_TOK_NO_LOSS;
    poke(P("g3/data.u32"), (2 * 4 + 1) * 4, &flagged, 4);
    CHECK_ERR(zt_dataset_open(&ds, d, &nocrc_v2), "g3/data.u32: block 2 position 1: token id 150 >= vocab_size 100");
    d = fresh("g4");  // a version 1 word with a flag bit is an out-of-range id, and says why
    flagged = 5u | ZT_TOK_NO_LOSS;
    poke(P("g4/data.u32"), 4, &flagged, 4);
    CHECK_ERR(zt_dataset_open(&ds, d, &nocrc_v2), "g4/data.u32: block 0 position 1", "version 1 dataset holds bare ids");
    d = fresh("g5");
    replace_in_file(P("g5/dataset.json"), "\"version\":\t1", "\"version\": 1, \"doc_attention\": \"isolated\"");
    CHECK_ERR(zt_dataset_open(&ds, d, &all_checks), "g5/dataset.json: doc_attention", "only version 2");

    d = fresh("j4");
    replace_in_file(P("j4/dataset.json"), "\"seq_len\":\t4", "\"seq_len\":\t1");
    CHECK_ERR(zt_dataset_open(&ds, d, &all_checks), "j4/dataset.json", "seq_len", "got 1");

    d = fresh("j5");
    replace_in_file(P("j5/dataset.json"), "\"vocab_size\":\t100", "\"vocab_size\":\t\"big\"");
    CHECK_ERR(zt_dataset_open(&ds, d, &all_checks), "vocab_size", "got \"big\"");

    d = fresh("j6");
    replace_in_file(P("j6/dataset.json"), "\"name\":\t\"data.u32\"", "\"name\":\t\"gone.u32\"");
    CHECK_ERR(zt_dataset_open(&ds, d, &all_checks), "j6/gone.u32", "cannot open");

    d = fresh("j7");
    replace_in_file(P("j7/dataset.json"), "\"name\":\t\"data.u32\"", "\"name\":\t\"../j1/data.u32\"");
    CHECK_ERR(zt_dataset_open(&ds, d, &all_checks), "files[0].name", "not a plain file name");

    d = fresh("t1");
    append_file(P("t1/data.u32"), "abc", 3);
    CHECK_ERR(zt_dataset_open(&ds, d, &all_checks), "t1/data.u32: truncated: 51 bytes",
              "not a whole number of 4-token blocks", "last block has 3 bytes");

    d = fresh("m1");
    replace_in_file(P("m1/dataset.json"), "\"blocks\":\t3", "\"blocks\":\t5");
    replace_in_file(P("m1/dataset.json"), "\"tokens\":\t12", "\"tokens\":\t20");
    CHECK_ERR(zt_dataset_open(&ds, d, &all_checks), "m1/data.u32", "holds 3 blocks", "says 5 blocks");

    d = fresh("m2");
    replace_in_file(P("m2/dataset.json"), "\"tokens\":\t12", "\"tokens\":\t13");
    CHECK_ERR(zt_dataset_open(&ds, d, &all_checks), "files[0].tokens: 13 is not blocks * seq_len");

    d = fresh("m3");  // 2^53 blocks of 2^17 tokens: the product must not wrap before the check
    replace_in_file(P("m3/dataset.json"), "\"seq_len\":\t4", "\"seq_len\":\t131072");
    replace_in_file(P("m3/dataset.json"), "\"blocks\":\t3", "\"blocks\":\t9007199254740992");
    CHECK_ERR(zt_dataset_open(&ds, d, &all_checks), "files[0].blocks: 9007199254740992 blocks of seq_len 131072",
              "more tokens than can exist");

    d = fresh("m4");  // a block longer than the maximum (an older pack allowed up to 2^30): refused, named
    replace_in_file(P("m4/dataset.json"), "\"seq_len\":\t4", "\"seq_len\":\t131073");
    CHECK_ERR(zt_dataset_open(&ds, d, &all_checks), "seq_len: 131073 is above the maximum of 131072 tokens per block",
              "--seq-len 131072 or less");

    d = fresh("c1");
    uint32_t seven = 77;  // block 1 position 2 was 7
    poke(P("c1/data.u32"), (1 * 4 + 2) * 4, &seven, 4);
    CHECK_ERR(zt_dataset_open(&ds, d, &all_checks), "c1/data.u32: crc32c mismatch", "dataset.json says 0x",
              "file has 0x");
    zt_dataset_opts nocrc = {.verify_crc = 0, .check_tokens = 1};
    CHECK(zt_dataset_open(&ds, d, &nocrc) == 0, "without verify_crc a changed file opens: %s", zt_errmsg());
    if (ds.nfiles) {
        CHECK(zt_dataset_block(&ds, 0, 1)[2] == 77, "mapped data is the file's");
        zt_dataset_close(&ds);
    }

    d = fresh("v1");
    uint32_t big = 150;
    poke(P("v1/data.u32"), (1 * 4 + 2) * 4, &big, 4);
    CHECK_ERR(zt_dataset_open(&ds, d, &nocrc), "v1/data.u32: block 1 position 2: token id 150 >= vocab_size 100");
    zt_dataset_opts model = {.verify_crc = 0, .check_tokens = 1, .model_vocab = 50};
    CHECK_ERR(zt_dataset_open(&ds, fresh("v2"), &model), "dataset vocab_size 100 exceeds model vocab_size 50");
    model.model_vocab = 200;
    CHECK(zt_dataset_open(&ds, d, &model) == 0, "150 < model vocab 200: %s", zt_errmsg());
    zt_dataset_close(&ds);
}

// The token scan runs in parallel chunks but must name the first bad token.
static void test_first_bad_token(void) {
    const int64_t n = 300000;  // several 64k-token scan chunks per file
    uint32_t *ids = zt_xmalloc((size_t)n * 4);
    for (int64_t i = 0; i < n; i++) ids[i] = (uint32_t)(i % 1000);
    write_file(P("f0.u32"), ids, (size_t)n * 4);
    write_file(P("f1.u32"), ids, (size_t)n * 4);
    free(ids);
    zt_pack_opts o = popts(ZT_PACK_U32, 1000, 1000, -1, 2);
    const char *in[] = {P("f0.u32"), P("f1.u32")};
    CHECK(zt_pack(in, 2, P("scan"), &o, NULL) == 0, "pack scan: %s", zt_errmsg());
    uint32_t bad = 5000;
    poke(P("scan/rank-00001.u32"), 10 * 4, &bad, 4);          // file 1, block 0 (later file)
    poke(P("scan/rank-00000.u32"), (290000 + 7) * 4, &bad, 4);  // file 0, last chunk
    poke(P("scan/rank-00000.u32"), (131072 + 3) * 4, &bad, 4);  // file 0, block 131, position 75: first
    zt_dataset ds;
    zt_dataset_opts nocrc = {.verify_crc = 0, .check_tokens = 1};
    CHECK_ERR(zt_dataset_open(&ds, P("scan"), &nocrc), "rank-00000.u32: block 131 position 75: token id 5000");
}


// ---------------------------------------------------------------- files that change while in use
// A block file truncated or rewritten in place after open: zt_dataset_read_block names the
// file, the block and what changed; the guarded copy turns a SIGBUS into -1; outside a
// guarded copy the SIGBUS handler names the file before the process dies of the signal.
static void test_changed_files(void) {
    uint32_t ids[64];
    for (int i = 0; i < 64; i++) ids[i] = (uint32_t)i;
    write_file(P("chg.u32"), ids, sizeof ids);
    zt_pack_opts o = popts(ZT_PACK_U32, 8, 100, -1, 0);
    char chgin[4096];
    snprintf(chgin, sizeof chgin, "%s", P("chg.u32"));
    const char *inputs[] = {chgin};
    CHECK(zt_pack(inputs, 1, P("chg"), &o, NULL) == 0, "pack: %s", zt_errmsg());
    zt_dataset ds;
    int rc = zt_dataset_open(&ds, P("chg"), &all_checks);
    CHECK(rc == 0, "open: %s", zt_errmsg());
    if (rc) return;
    uint32_t got[8];
    CHECK(zt_dataset_read_block(&ds, 0, 3, got) == 0 && !memcmp(got, ids + 24, sizeof got), "read_block 3: %s",
          zt_errmsg());
    CHECK_ERR(zt_dataset_read_block(&ds, 0, 8, got), "out of range");
    // rewritten in place, same size (cp other.u32 over it): the modification time moves
    uint32_t other[64];
    for (int i = 0; i < 64; i++) other[i] = 63u - (uint32_t)i;
    const char *f = P("chg/data.u32");
    poke(f, 0, other, sizeof other);
    struct timespec ts[2] = {{0, UTIME_OMIT}, {0, 0}};
    clock_gettime(CLOCK_REALTIME, &ts[1]);
    ts[1].tv_sec += 5;  // a later time whatever the file system's timestamp granularity
    CHECK(utimensat(AT_FDCWD, f, ts, 0) == 0, "utimensat: %s", strerror(errno));
    CHECK_ERR(zt_dataset_read_block(&ds, 0, 3, got), "chg/data.u32", "the file changed while training",
              "written to after training opened it", "block 3");
    CHECK_ERR(zt_dataset_check_unchanged(&ds, 0), "the file changed while training");
    // truncated (truncate -s 0): the size says so before anything is read
    CHECK(truncate(f, 0) == 0, "truncate");
    CHECK_ERR(zt_dataset_read_block(&ds, 0, 5, got), "chg/data.u32", "now holds 0 bytes, 256 when", "block 5");
    zt_dataset_close(&ds);

    // rewritten in place with the same size and its modification time put back (touch -r,
    // rsync --inplace -t): the status change time moved; then, a file system that did not show
    // it (the time patched back here): the copied ids out of range still refuse the block
    CHECK(zt_pack(inputs, 1, P("chg3"), &o, NULL) == 0, "pack: %s", zt_errmsg());
    rc = zt_dataset_open(&ds, P("chg3"), &all_checks);
    CHECK(rc == 0, "open: %s", zt_errmsg());
    if (rc) return;
    const char *f3 = P("chg3/data.u32");
    struct stat st0, st1;
    CHECK(stat(f3, &st0) == 0, "stat");
    CHECK(zt_dataset_read_block(&ds, 0, 2, got) == 0, "read before the change: %s", zt_errmsg());
    uint32_t wild[8];
    for (int i = 0; i < 8; i++) wild[i] = 1000u + (uint32_t)i;  // >= vocab_size 100
    struct timespec slept = {0, 20 * 1000 * 1000};
    nanosleep(&slept, NULL);  // the status change time must differ whatever the clock's granularity
    poke(f3, 2 * 8 * 4, wild, sizeof wild);
    struct timespec back[2] = {st0.st_atim, st0.st_mtim};
    CHECK(utimensat(AT_FDCWD, f3, back, 0) == 0, "utimensat: %s", strerror(errno));
    CHECK(stat(f3, &st1) == 0 && st1.st_size == st0.st_size && st1.st_mtim.tv_sec == st0.st_mtim.tv_sec &&
              st1.st_mtim.tv_nsec == st0.st_mtim.tv_nsec,
          "size and mtime restored");
    CHECK_ERR(zt_dataset_read_block(&ds, 0, 1, got), "chg3/data.u32", "the file changed while training",
              "status change time moved", "modification time restored", "block 1");
    CHECK_ERR(zt_dataset_check_unchanged(&ds, 0), "status change time moved");
    ds.files[0].ctime = st1.st_ctim;  // as if the file system had not moved it
    CHECK(zt_dataset_read_block(&ds, 0, 1, got) == 0, "block 1 is as packed: %s", zt_errmsg());
    CHECK_ERR(zt_dataset_read_block(&ds, 0, 2, got), "chg3/data.u32", "the file changed while training",
              "position 0 of block 2 holds token id 1000, not below vocab_size 100", "block 2");
    // renamed over (rsync without --inplace): the path names another inode; removed: no file
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s", P("chg3/data.u32.new"));
    write_file(tmp, ids, sizeof ids);
    CHECK(rename(tmp, f3) == 0, "rename: %s", strerror(errno));
    CHECK_ERR(zt_dataset_read_block(&ds, 0, 1, got), "chg3/data.u32", "the path now names another file (inode",
              "block 1");
    CHECK(unlink(f3) == 0, "unlink");
    CHECK_ERR(zt_dataset_check_unchanged(&ds, 0), "the path no longer names it", "removed or renamed");
    zt_dataset_close(&ds);

    // the guard itself: a mapping whose file lost its pages
    write_file(P("bus.bin"), ids, sizeof ids);
    int fd = open(P("bus.bin"), O_RDWR);
    void *map = mmap(NULL, 4096, PROT_READ, MAP_SHARED, fd, 0);
    CHECK(map != MAP_FAILED, "mmap");
    CHECK(zt_copy_guarded(got, map, sizeof got) == 0 && !memcmp(got, ids, sizeof got), "guarded copy of good pages");
    CHECK(ftruncate(fd, 0) == 0, "ftruncate");
    CHECK(zt_copy_guarded(got, map, sizeof got) == -1, "a SIGBUS in the guarded copy must come back as -1");
    CHECK(zt_copy_guarded(got, ids, sizeof got) == 0, "the guard works again after a caught SIGBUS");
    munmap(map, 4096);
    close(fd);

    // unguarded access to a truncated dataset mapping: the process dies of SIGBUS, and the
    // handler has named the file first
    char chg2in[4096];
    snprintf(chg2in, sizeof chg2in, "%s", P("chg2.u32"));
    write_file(chg2in, ids, sizeof ids);
    const char *in2[] = {chg2in};
    CHECK(zt_pack(in2, 1, P("chg2"), &o, NULL) == 0, "pack: %s", zt_errmsg());
    int pfd[2];
    CHECK(pipe(pfd) == 0, "pipe");
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(pfd[1], STDERR_FILENO);
        zt_dataset d2;
        if (zt_dataset_open(&d2, P("chg2"), NULL) != 0) _exit(10);
        if (truncate(P("chg2/data.u32"), 0) != 0) _exit(11);
        volatile uint32_t x = zt_dataset_block(&d2, 0, 1)[0];
        (void)x;
        _exit(12);  // not reached: the read faults
    }
    close(pfd[1]);
    char msg[2048] = "";
    ssize_t k, at = 0;
    while ((k = read(pfd[0], msg + at, sizeof msg - 1 - (size_t)at)) > 0) at += k;
    msg[at > 0 ? at : 0] = 0;
    close(pfd[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGBUS, "child status 0x%x, expected death by SIGBUS", status);
    CHECK(strstr(msg, "chg2/data.u32") && strstr(msg, "the file changed while it was in use"),
          "SIGBUS message names the file: '%s'", msg);
}

// ---------------------------------------------------------------- pack never reads what it writes
static void test_pack_input_is_output(void) {
    uint32_t ids[32];
    for (int i = 0; i < 32; i++) ids[i] = (uint32_t)i;
    zt_pack_opts o = popts(ZT_PACK_U32, 8, 100, -1, 0);
    zt_pack_stats st;
    CHECK(mkdir(P("self"), 0755) == 0, "mkdir");
    char selfin[4096], origin[4096];
    snprintf(selfin, sizeof selfin, "%s", P("self/data.u32"));
    snprintf(origin, sizeof origin, "%s", P("orig.u32"));
    write_file(selfin, ids, sizeof ids);
    const char *same[] = {selfin};
    CHECK_ERR(zt_pack(same, 1, P("self"), &o, &st), "self/data.u32", "a file the pack writes", "the same path");
    size_t n;
    char *raw = zt_read_file(P("self/data.u32"), &n);
    CHECK(raw && n == sizeof ids && !memcmp(raw, ids, n), "the input must be untouched (%zu bytes)", n);
    free(raw);
    struct stat sb;
    CHECK(stat(P("self/dataset.json"), &sb) != 0 && stat(P("self/data.u32.partial"), &sb) != 0,
          "nothing written beside it");
    // a hard link and a symlink to the output name
    write_file(origin, ids, sizeof ids);
    CHECK(mkdir(P("hard"), 0755) == 0 && link(origin, P("hard/data.u32")) == 0, "link");
    const char *orig[] = {origin};
    CHECK_ERR(zt_pack(orig, 1, P("hard"), &o, &st), "orig.u32", "hard/data.u32", "through a link");
    CHECK(mkdir(P("soft"), 0755) == 0 && symlink("../orig.u32", P("soft/rank-00001.u32")) == 0, "symlink");
    o.per_rank = 2;
    CHECK_ERR(zt_pack(orig, 1, P("soft"), &o, &st), "soft/rank-00001.u32", "through a link");
    raw = zt_read_file(origin, &n);
    CHECK(raw && n == sizeof ids && !memcmp(raw, ids, n), "the linked input must be untouched");
    free(raw);
    // a leftover block file that is no input is replaced only when the pack completes
    o.per_rank = 0;
    CHECK(mkdir(P("left"), 0755) == 0, "mkdir");
    write_text(P("left/data.u32"), "leftover");
    CHECK(zt_pack(orig, 1, P("left"), &o, &st) == 0 && st.blocks == 4, "pack over a leftover: %s", zt_errmsg());
    raw = zt_read_file(P("left/data.u32"), &n);
    CHECK(raw && n == sizeof ids && !memcmp(raw, ids, n), "the new blocks replaced the leftover");
    free(raw);
    CHECK(stat(P("left/data.u32.partial"), &sb) != 0, "no .partial name left after a pack");
}

int main(void) {
    snprintf(tmp_root, sizeof tmp_root, "test_data_tmp_XXXXXX");
    if (!mkdtemp(tmp_root)) {
        perror("mkdtemp");
        return 2;
    }
    test_crc();
    test_pack_ids();
    test_pack_u32_and_bytes();
    test_pack_per_rank();
    test_pack_random();
    test_pack_errors();
    test_open_errors();
    test_first_bad_token();
    test_changed_files();
    test_pack_input_is_output();
    if (zt_test_failures == 0 && !getenv("ZT_TEST_KEEP")) nftw(tmp_root, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
    else printf("scratch files kept in %s\n", tmp_root);
    TEST_END();
}
