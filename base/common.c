// Error buffer, checked allocation, clocks, RNG and small file helpers.
#define _GNU_SOURCE
#include "common.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static _Thread_local char zt_errbuf[ZT_ERR_MAX];

int zt_err(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(zt_errbuf, sizeof zt_errbuf, fmt, ap);
    va_end(ap);
    return -1;
}

int zt_err_prefix(const char *fmt, ...) {
    char pre[ZT_ERR_MAX / 2], old[ZT_ERR_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(pre, sizeof pre, fmt, ap);
    va_end(ap);
    snprintf(old, sizeof old, "%s", zt_errbuf);
    snprintf(zt_errbuf, sizeof zt_errbuf, "%.400s: %.1600s", pre, old);
    return -1;
}

const char *zt_errmsg(void) { return zt_errbuf[0] ? zt_errbuf : "unknown error"; }
void zt_err_clear(void) { zt_errbuf[0] = 0; }

void zt_fatal(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("zerotrain: error: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(1);
}

void zt_die_on_err(void) { zt_fatal("%s", zt_errmsg()); }

void *zt_xmalloc_at(size_t n, const char *file, int line) {
    void *p = malloc(n ? n : 1);
    if (!p) {
        fprintf(stderr, "zerotrain: error: out of host memory allocating %zu bytes at %s:%d\n", n, file, line);
        exit(1);
    }
    return p;
}

void zt_int_push(int **v, int *n, int *cap, int x) {
    if (*n == *cap) {
        *cap = *cap ? 2 * *cap : 8;
        int *r = zt_xmalloc((size_t)*cap * sizeof *r);
        if (*n) memcpy(r, *v, (size_t)*n * sizeof *r);
        free(*v);
        *v = r;
    }
    (*v)[(*n)++] = x;
}

void *zt_xcalloc_at(size_t n, size_t size, const char *file, int line) {
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p) {
        fprintf(stderr, "zerotrain: error: out of host memory allocating %zu x %zu bytes at %s:%d\n", n, size, file,
                line);
        exit(1);
    }
    return p;
}

double zt_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

double zt_wall_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

void zt_rng_seed(zt_rng *r, uint64_t seed) {
    uint64_t x = seed;
    for (int i = 0; i < 4; i++) r->s[i] = splitmix64(&x);
}

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t zt_rng_u64(zt_rng *r) {
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

double zt_rng_uniform(zt_rng *r) { return (double)(zt_rng_u64(r) >> 11) * 0x1.0p-53; }

double zt_rng_normal(zt_rng *r) {
    double u1 = zt_rng_uniform(r), u2 = zt_rng_uniform(r);
    if (u1 < 1e-300) u1 = 1e-300;
    return sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
}

uint64_t zt_rng_below(zt_rng *r, uint64_t n) {
    if (n <= 1) return 0;
    uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    uint64_t x;
    do x = zt_rng_u64(r);
    while (x >= limit);
    return x % n;
}

// A stream (FIFO, character device, /proc file) is read to its end, up to this much.
#define ZT_READ_STREAM_MAX ((size_t)1 << 30)

char *zt_read_fd(int fd, const char *path, size_t limit, size_t hint, size_t *len_out, int *over) {
    size_t cap = hint > 0 && hint <= limit ? hint : (limit < 65536 ? limit : 65536), len = 0;
    char *buf = zt_xmalloc(cap + 1);
    if (over) *over = 0;
    for (;;) {
        if (len == cap) {
            if (cap >= limit) {  // as much as may be kept: is there more?
                if (over) {
                    char probe;
                    ssize_t r;
                    do r = read(fd, &probe, 1);
                    while (r < 0 && errno == EINTR);
                    *over = r > 0;
                }
                break;
            }
            cap = 2 * cap < limit ? 2 * cap : limit;
            char *nb = zt_xmalloc(cap + 1);
            memcpy(nb, buf, len);
            free(buf);
            buf = nb;
        }
        const ssize_t r = read(fd, buf + len, cap - len);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            zt_err("%s: read failed after %zu bytes: %s", path, len, strerror(errno));
            free(buf);
            return NULL;
        }
        if (r == 0) break;
        len += (size_t)r;
    }
    buf[len] = 0;
    *len_out = len;
    return buf;
}

char *zt_read_file(const char *path, size_t *len_out) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        zt_err("%s: cannot open: %s", path, strerror(errno));
        return NULL;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        zt_err("%s: cannot stat: %s", path, strerror(errno));
        close(fd);
        return NULL;
    }
    // What is not a file of bytes is named as what it is (a directory used to read as a
    // file of 2^63 bytes: "out of host memory").
    const char *kind = S_ISDIR(st.st_mode) ? "a directory" : S_ISBLK(st.st_mode) ? "a block device"
                     : S_ISSOCK(st.st_mode)                  ? "a socket" : NULL;
    if (kind) {
        zt_err("%s: is %s, not a file", path, kind);
        close(fd);
        return NULL;
    }
    // A regular file is read to the size it has; a FIFO, a character device or a file that
    // reports no size (/proc) to its end, within ZT_READ_STREAM_MAX.
    const int sized = S_ISREG(st.st_mode) && st.st_size > 0;
    const size_t cap = sized ? (size_t)st.st_size : ZT_READ_STREAM_MAX;
    size_t len = 0;
    int over = 0;
    char *buf = zt_read_fd(fd, path, cap, sized ? cap : 0, &len, sized ? NULL : &over);
    close(fd);
    if (buf && over)
        zt_err("%s: more than %zu bytes from %s without an end: not a file to read whole", path, cap,
               S_ISCHR(st.st_mode) ? "a character device" : S_ISFIFO(st.st_mode) ? "a pipe" : "a stream");
    else if (buf && sized && len < cap)
        zt_err("%s: short read: %zu of %zu bytes (the file shrank while being read)", path, len, cap);
    else if (buf) {
        if (len_out) *len_out = len;
        return buf;
    }
    free(buf);
    return NULL;
}

static int remove_entry(const char *p, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb, (void)flag, (void)ftw;
    return remove(p);
}

int zt_remove_tree(const char *path) {
    struct stat st;
    if (lstat(path, &st) != 0) return 0;  // nothing to remove
    if (nftw(path, remove_entry, 16, FTW_DEPTH | FTW_PHYS) != 0)
        return zt_err("%s: cannot remove: %s", path, strerror(errno));
    return 0;
}

int zt_mkdirs(const char *path) {
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", path);
    size_t n = strlen(buf);
    for (size_t i = 1; i <= n; i++) {
        if (buf[i] == '/' || buf[i] == 0) {
            char c = buf[i];
            buf[i] = 0;
            if (mkdir(buf, 0755) != 0 && errno != EEXIST)
                return zt_err("%s: cannot create directory: %s", buf, strerror(errno));
            buf[i] = c;
        }
    }
    return 0;
}

const char *zt_human_bytes(double b, int decimals, char *buf, size_t n) {
    static const char *u[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    int i = 0;
    while (b >= 1024 && i < 5) b /= 1024, i++;
    snprintf(buf, n, "%.*f %s", i ? decimals : 0, b, u[i]);
    return buf;
}
