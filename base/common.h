// Shared plumbing for every zerotrain module: error reporting, checked
// allocation, timing and a small deterministic RNG.
// defines: zt_err, zt_errmsg, zt_fatal, zt_xmalloc, zt_xcalloc, zt_int_push, zt_now, zt_rng_*
#ifndef ZT_COMMON_H
#define ZT_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ZT_ERR_MAX 2048

// Library functions report failure by returning -1 (or NULL) after formatting a
// message with zt_err(); the caller (CLI, test) decides whether to print and exit.
// The message names the file, the position and the rule that was broken.
int zt_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
// Prefix the current error message with more context ("loading X: <old msg>").
int zt_err_prefix(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
const char *zt_errmsg(void);
void zt_err_clear(void);

// Print "zerotrain: error: <msg>" (and optional hint) to stderr and exit(1).
void zt_fatal(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
// Print the pending zt_err message and exit(1).
void zt_die_on_err(void) __attribute__((noreturn));

void *zt_xmalloc_at(size_t n, const char *file, int line);
void *zt_xcalloc_at(size_t n, size_t size, const char *file, int line);
#define zt_xmalloc(n) zt_xmalloc_at((n), __FILE__, __LINE__)
#define zt_xcalloc(n, s) zt_xcalloc_at((n), (s), __FILE__, __LINE__)
// Appends x to the growing int array *v of *n elements and *cap capacity (doubling).
void zt_int_push(int **v, int *n, int *cap, int x);

double zt_now(void);       // monotonic seconds
double zt_wall_now(void);  // wall-clock (unix) seconds

// "713.38 MiB": b bytes in B, KiB ... PiB with `decimals` digits (whole bytes below 1 KiB). Returns buf.
const char *zt_human_bytes(double b, int decimals, char *buf, size_t n);

// splitmix64-seeded xoshiro256** generator: reproducible across machines.
typedef struct { uint64_t s[4]; } zt_rng;
void zt_rng_seed(zt_rng *r, uint64_t seed);
uint64_t zt_rng_u64(zt_rng *r);
double zt_rng_uniform(zt_rng *r);  // [0, 1)
double zt_rng_normal(zt_rng *r);   // N(0, 1), Box-Muller
uint64_t zt_rng_below(zt_rng *r, uint64_t n);  // uniform in [0, n), unbiased

// Read a whole file into a malloc'd, NUL-terminated buffer. NULL + zt_err on failure,
// naming the path: a directory, block device or socket is refused as what it is; a FIFO,
// character device or /proc file is read to its end (at most 1 GiB).
char *zt_read_file(const char *path, size_t *len_out);
// The reading itself, from an open fd to its end or `limit` bytes (`hint`: the expected size,
// 0 if unknown). *over (may be NULL: not checked) is set when the fd holds more than limit
// bytes; the first limit bytes are returned then. Malloc'd and NUL-terminated; NULL + zt_err
// naming `path` when a read fails.
char *zt_read_fd(int fd, const char *path, size_t limit, size_t hint, size_t *len_out, int *over);
// mkdir -p. 0 on success.
int zt_mkdirs(const char *path);
// rm -r of path (files, directories, symlinks themselves; never followed). 0 when it is gone
// or was never there; -1 + zt_err naming it.
int zt_remove_tree(const char *path);

#ifdef __cplusplus
}
#endif
#endif
