// TensorBoard event files (train/tboard.h). The Event message, from TensorFlow's
// event.proto / summary.proto:
//   Event   { double wall_time = 1; int64 step = 2; string file_version = 3; Summary summary = 5; }
//   Summary { repeated Value value = 1; }
//   Value   { string tag = 1; float simple_value = 2; }
// Record framing (TFRecord): uint64 length, uint32 masked_crc32c(length), bytes,
// uint32 masked_crc32c(bytes), all little-endian; masked = rotr15(crc) + 0xa282ead8.
#define _GNU_SOURCE
#include "train/tboard.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/crc32c.h"
#include "base/common.h"
#include "base/out_file.h"

struct zt_tb {
    FILE *f;
    char path[4400];
    uint8_t *buf;  // framed records not yet written
    size_t n, cap;
};

uint32_t zt_tb_masked_crc(const void *data, size_t n) {
    const uint32_t c = zt_crc32c(0, data, n);
    return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

static size_t put_varint(uint8_t *p, uint64_t v) {
    size_t k = 0;
    while (v >= 0x80) {
        p[k++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    p[k++] = (uint8_t)v;
    return k;
}

static size_t put_le(uint8_t *p, uint64_t v, int bytes) {
    for (int i = 0; i < bytes; i++) p[i] = (uint8_t)(v >> (8 * i));
    return (size_t)bytes;
}

// Event header: wall_time (field 1, fixed64) and step (field 2, varint).
static size_t put_header(uint8_t *p, int64_t step, double wall_time) {
    uint64_t bits;
    memcpy(&bits, &wall_time, 8);
    size_t k = 0;
    p[k++] = 0x09;
    k += put_le(p + k, bits, 8);
    if (step != 0) {  // proto3: a zero default is not written
        p[k++] = 0x10;
        k += put_varint(p + k, (uint64_t)step);
    }
    return k;
}

// A length-delimited field (wire type 2): key, varint length, bytes.
static size_t put_bytes_field(uint8_t *p, uint8_t key, const void *data, size_t n) {
    size_t k = 0;
    p[k++] = key;
    k += put_varint(p + k, n);
    memcpy(p + k, data, n);
    return k + n;
}

size_t zt_tb_encode_scalar(uint8_t *out, const char *tag, int64_t step, double wall_time, float value) {
    uint8_t val[32 + 4096], sum[48 + 4096];
    size_t v = put_bytes_field(val, 0x0a, tag, strlen(tag));  // Value.tag
    uint32_t fb;
    memcpy(&fb, &value, 4);
    val[v++] = 0x15;  // Value.simple_value, fixed32
    v += put_le(val + v, fb, 4);
    const size_t s = put_bytes_field(sum, 0x0a, val, v);  // Summary.value
    const size_t k = put_header(out, step, wall_time);
    return k + put_bytes_field(out + k, 0x2a, sum, s);  // Event.summary
}

static void append_record(zt_tb *tb, const uint8_t *data, size_t n) {
    if (tb->n + n + 16 > tb->cap) {
        tb->cap = (tb->n + n + 16) * 2;
        uint8_t *p = realloc(tb->buf, tb->cap);
        if (!p) zt_fatal("out of host memory buffering TensorBoard events (%zu bytes)", tb->cap);
        tb->buf = p;
    }
    uint8_t len[8];
    put_le(len, n, 8);
    uint8_t *p = tb->buf + tb->n;
    memcpy(p, len, 8);
    put_le(p + 8, zt_tb_masked_crc(len, 8), 4);
    memcpy(p + 12, data, n);
    put_le(p + 12 + n, zt_tb_masked_crc(data, n), 4);
    tb->n += n + 16;
}

zt_tb *zt_tb_open(const char *dir, const char *host) {
    if (zt_mkdirs(dir)) return NULL;
    zt_tb *tb = zt_xcalloc(1, sizeof *tb);
    const double now = zt_wall_now();
    // a second file in the same second (a quick restart) must not overwrite the first
    for (int k = 0;; k++) {
        if (k == 0)
            snprintf(tb->path, sizeof tb->path, "%s/events.out.tfevents.%lld.%s", dir, (long long)now, host);
        else
            snprintf(tb->path, sizeof tb->path, "%s/events.out.tfevents.%lld.%s.%d", dir, (long long)now, host, k);
        if (access(tb->path, F_OK) != 0) break;
    }
    tb->f = zt_out_fopen(tb->path, ZT_OUT_NEW);  // a new file: a link at the name is refused
    if (!tb->f) {
        zt_err_prefix("the TensorBoard event file");
        free(tb);
        return NULL;
    }
    uint8_t ev[64];
    size_t k = put_header(ev, 0, now);
    static const char version[] = "brain.Event:2";
    k += put_bytes_field(ev + k, 0x1a, version, sizeof version - 1);  // Event.file_version
    append_record(tb, ev, k);
    if (zt_tb_flush(tb)) {
        zt_tb_close(tb);
        return NULL;
    }
    return tb;
}

int zt_tb_scalar(zt_tb *tb, const char *tag, int64_t step, double wall_time, float value) {
    if (strlen(tag) > 4000) return zt_err("TensorBoard tag of %zu bytes is too long", strlen(tag));
    uint8_t ev[64 + 4096];
    append_record(tb, ev, zt_tb_encode_scalar(ev, tag, step, wall_time, value));
    return 0;
}

int zt_tb_flush(zt_tb *tb) {
    if (tb->n && fwrite(tb->buf, 1, tb->n, tb->f) != tb->n)
        return zt_err("%s: write failed: %s", tb->path, strerror(errno));
    tb->n = 0;
    if (fflush(tb->f) != 0) return zt_err("%s: write failed: %s", tb->path, strerror(errno));
    return 0;
}

void zt_tb_close(zt_tb *tb) {
    if (!tb) return;
    if (tb->f) {
        zt_tb_flush(tb);
        fclose(tb->f);
    }
    free(tb->buf);
    free(tb);
}

// ---- reading our own records back (resume) ----

static int get_varint(const uint8_t *p, size_t n, size_t *i, uint64_t *v) {
    *v = 0;
    for (int s = 0; s < 64 && *i < n; s += 7) {
        const uint8_t b = p[(*i)++];
        *v |= (uint64_t)(b & 0x7f) << s;
        if (!(b & 0x80)) return 0;
    }
    return -1;
}

static uint64_t get_le(const uint8_t *p, int bytes) {
    uint64_t v = 0;
    for (int i = 0; i < bytes; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}

// The step of one Event (0 when absent); -1 when the bytes are not a valid message.
static int64_t event_step(const uint8_t *p, size_t n) {
    size_t i = 0;
    int64_t step = 0;
    while (i < n) {
        uint64_t key, v;
        if (get_varint(p, n, &i, &key)) return -1;
        switch (key & 7) {
        case 0:
            if (get_varint(p, n, &i, &v)) return -1;
            if (key >> 3 == 2) step = (int64_t)v;
            break;
        case 1: if (n - i < 8) return -1; i += 8; break;
        case 5: if (n - i < 4) return -1; i += 4; break;
        case 2:
            if (get_varint(p, n, &i, &v) || v > n - i) return -1;
            i += v;
            break;
        default: return -1;
        }
    }
    return step;
}

static int64_t truncate_file(const char *path, int64_t keep_step) {
    size_t n;
    if (zt_out_check(path) != 0) return -1;  // a link is refused, not read or written through
    uint8_t *d = (uint8_t *)zt_read_file(path, &n);
    if (!d) return -1;
    uint8_t *out = zt_xmalloc(n ? n : 1);
    size_t o = 0, i = 0;
    int64_t dropped = 0;
    while (i < n) {
        if (n - i < 12) goto damaged;
        const uint64_t len = get_le(d + i, 8);
        if ((uint32_t)get_le(d + i + 8, 4) != zt_tb_masked_crc(d + i, 8) || len > n - i - 16) goto damaged;
        const uint8_t *ev = d + i + 12;
        if ((uint32_t)get_le(ev + len, 4) != zt_tb_masked_crc(ev, len)) goto damaged;
        const int64_t step = event_step(ev, len);
        if (step < 0) goto damaged;
        if (step <= keep_step) {
            memcpy(out + o, d + i, len + 16);
            o += len + 16;
        } else {
            dropped++;
        }
        i += len + 16;
        continue;
    damaged:
        fprintf(stderr, "zerotrain: warning: %s: damaged record at byte %zu (a write cut short?); the file is cut "
                        "there\n", path, i);
        break;
    }
    int rc = 0;
    if (o != n) rc = zt_write_file_atomic(path, (const char *)out, o);
    free(out);
    free(d);
    return rc ? -1 : dropped;
}

int64_t zt_tb_truncate_dir(const char *dir, int64_t keep_step) {
    DIR *dp = opendir(dir);
    if (!dp) return errno == ENOENT ? 0 : zt_err("%s: cannot list: %s", dir, strerror(errno));
    int64_t dropped = 0;
    struct dirent *e;
    while ((e = readdir(dp))) {
        if (strncmp(e->d_name, "events.out.tfevents.", 20)) continue;
        char path[4400];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        const int64_t k = truncate_file(path, keep_step);
        if (k < 0) {
            closedir(dp);
            return -1;
        }
        dropped += k;
    }
    closedir(dp);
    return dropped;
}
