// The TensorBoard event writer (train/tboard.c): the bytes of one scalar record equal
// those of TensorBoard's own writer (tensorboard 2.21 RecordWriter over event_pb2.Event
// {wall_time 1700000000.5, step 42, summary {value {tag "train/loss" simple_value 2.5}}},
// printed once and pasted here), the masked CRC against TFRecord's definition computed
// independently, and the resume truncation drops exactly the later steps.
#define _GNU_SOURCE
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/crc32c.h"
#include "base/common.h"
#include "train/tboard.h"
#include "tests/support/test_util.h"

static const char golden_hex[] =
    "200000000000000029eda9500900002040fc54d941102a2a130a110a0a747261696e2f6c6f73731500002040504bff3f";

static size_t unhex(const char *h, uint8_t *out) {
    size_t n = strlen(h) / 2;
    for (size_t i = 0; i < n; i++) {
        unsigned v;
        sscanf(h + 2 * i, "%2x", &v);
        out[i] = (uint8_t)v;
    }
    return n;
}

static uint64_t le(const uint8_t *p, int n) {
    uint64_t v = 0;
    for (int i = 0; i < n; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}

// The one events file in dir (NULL if none or several).
static char *only_file(const char *dir) {
    static char path[4400];
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)))
        if (!strncmp(e->d_name, "events.out.tfevents.", 20)) snprintf(path, sizeof path, "%s/%s", dir, e->d_name), n++;
    if (d) closedir(d);
    return n == 1 ? path : NULL;
}

// Steps of the records of a file, verifying each record's framing; -1 on a bad record.
static int record_steps(const char *path, int64_t *steps, int max) {
    size_t n;
    uint8_t *d = (uint8_t *)zt_read_file(path, &n);
    if (!d) return -1;
    int k = 0;
    for (size_t i = 0; i < n && k < max;) {
        uint64_t len = le(d + i, 8);
        if ((uint32_t)le(d + i + 8, 4) != zt_tb_masked_crc(d + i, 8) ||
            (uint32_t)le(d + i + 12 + len, 4) != zt_tb_masked_crc(d + i + 12, len)) {
            free(d);
            return -1;
        }
        // step: field 2 right after the 9-byte wall_time, when present
        const uint8_t *ev = d + i + 12;
        int64_t step = 0;
        if (len > 10 && ev[9] == 0x10) {
            int s = 0;
            for (size_t j = 10; j < len; j++, s += 7) {
                step |= (int64_t)(ev[j] & 0x7f) << s;
                if (!(ev[j] & 0x80)) break;
            }
        }
        steps[k++] = step;
        i += 16 + len;
    }
    free(d);
    return k;
}

int main(void) {
    // masked CRC: TFRecord's rotate-right-15 plus constant, on the CRC-32C test vector
    const uint32_t c = zt_crc32c(0, "123456789", 9);
    CHECK(c == 0xE3069283u, "crc32c test vector");
    CHECK(zt_tb_masked_crc("123456789", 9) == ((c >> 15) | (c << 17)) + 0xa282ead8u, "masked crc");

    // one scalar event: the same bytes as TensorBoard's writer
    uint8_t want[128], ev[128];
    const size_t wn = unhex(golden_hex, want);
    const size_t en = zt_tb_encode_scalar(ev, "train/loss", 42, 1700000000.5, 2.5f);
    CHECK(en == 32 && wn == en + 16 && !memcmp(ev, want + 12, en), "scalar event bytes (%zu) equal tensorboard's", en);

    char dir[] = "/tmp/zt_tboard_XXXXXX";
    if (!mkdtemp(dir)) zt_fatal("mkdtemp");
    zt_tb *tb = zt_tb_open(dir, "host");
    if (!tb) zt_die_on_err();
    CHECK(zt_tb_scalar(tb, "train/loss", 42, 1700000000.5, 2.5f) == 0, "scalar");
    CHECK(zt_tb_flush(tb) == 0, "flush");
    zt_tb_close(tb);
    const char *path = only_file(dir);
    CHECK(path != NULL, "one event file in %s", dir);
    if (path) {
        size_t n;
        uint8_t *d = (uint8_t *)zt_read_file(path, &n);
        const uint64_t l0 = le(d, 8);  // the file_version record first
        CHECK(n == 16 + l0 + wn && !memcmp(d + 16 + l0, want, wn), "the framed record equals tensorboard's");
        CHECK(memmem(d, 16 + l0, "brain.Event:2", 13) != NULL, "file_version record first");
        free(d);
        unlink(path);
    }

    // resume: steps after the checkpoint's are dropped, the rest kept as they were
    tb = zt_tb_open(dir, "host");
    for (int s = 1; s <= 5; s++) {
        zt_tb_scalar(tb, "a", s, 1e9 + s, (float)s);
        zt_tb_scalar(tb, "b", s, 1e9 + s, (float)-s);
    }
    zt_tb_close(tb);
    CHECK(zt_tb_truncate_dir(dir, 3) == 4, "4 records of steps 4 and 5 dropped");
    int64_t steps[32];
    path = only_file(dir);
    int k = path ? record_steps(path, steps, 32) : -1;
    CHECK(k == 7, "file_version + 6 records of steps 1..3 remain (%d)", k);
    for (int i = 1; i < k; i++) CHECK(steps[i] == (i + 1) / 2, "record %d has step %lld", i, (long long)steps[i]);
    CHECK(zt_tb_truncate_dir(dir, 3) == 0, "a second truncation drops nothing");
    // a record cut short (a crash mid-write) is dropped with the rest of the file
    if (path) {
        FILE *f = fopen(path, "ab");
        fwrite("\x20\x00\x00", 1, 3, f);
        fclose(f);
        CHECK(zt_tb_truncate_dir(dir, 3) == 0 && record_steps(path, steps, 32) == 7, "a torn tail is cut off");
        unlink(path);
    }
    rmdir(dir);
    TEST_END();
}
