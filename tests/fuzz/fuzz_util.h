// Shared by the libFuzzer harnesses: the fuzzed bytes as a file the parser under test
// opens by path (in a per-process directory on tmpfs), and a property check that
// aborts (a finding) with what was expected.
#ifndef ZT_FUZZ_UTIL_H
#define ZT_FUZZ_UTIL_H
#define _GNU_SOURCE
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/common.h"  // zt_errmsg

// A property of the parser's output that must hold for every input: a violation is a
// finding like a crash (libFuzzer saves the input as crash-*).
#define FUZZ_ASSERT(cond, ...)                                                           \
    do {                                                                                 \
        if (!(cond)) {                                                                   \
            fprintf(stderr, "fuzz property violated at %s:%d: %s\n  ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                                \
            fprintf(stderr, "\n");                                                       \
            abort();                                                                     \
        }                                                                                \
    } while (0)

static char fuzz_dir_path[512];

// The files of a directory, then the directory; `depth` levels of subdirectories.
static void fuzz_remove_tree(const char *dir, int depth) {
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    char p[1024];
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
            snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
            if (unlink(p) != 0 && depth > 0) fuzz_remove_tree(p, depth - 1);
        }
    closedir(d);
    rmdir(dir);
}

// At exit: the scratch directory and the files in it (harnesses make one level of
// subdirectories at most: a run directory's ranks/).
static void fuzz_dir_remove(void) { fuzz_remove_tree(fuzz_dir_path, 1); }

// The process's scratch directory: $ZT_FUZZ_TMP or /dev/shm (else /tmp), one per pid,
// removed at exit.
static inline const char *fuzz_dir(void) {
    char *dir = fuzz_dir_path;
    if (!dir[0]) {
        const char *base = getenv("ZT_FUZZ_TMP");
        struct stat st;
        if (!base) base = stat("/dev/shm", &st) == 0 ? "/dev/shm" : "/tmp";
        snprintf(dir, sizeof fuzz_dir_path, "%s/zt-fuzz-%d", base, (int)getpid());
        mkdir(dir, 0700);
        atexit(fuzz_dir_remove);
    }
    return dir;
}

// Write bytes to fuzz_dir()/name (replacing it; "sub/name" makes the subdirectory);
// returns the path (static buffer per slot).
static inline const char *fuzz_write(const char *name, const void *data, size_t n) {
    static char paths[8][640];
    static int slot;
    char *p = paths[slot++ & 7];
    const char *sl = strchr(name, '/');
    if (sl) {
        snprintf(p, sizeof paths[0], "%s/%.*s", fuzz_dir(), (int)(sl - name), name);
        mkdir(p, 0700);
    }
    snprintf(p, sizeof paths[0], "%s/%s", fuzz_dir(), name);
    FILE *f = fopen(p, "wb");
    if (!f || (n && fwrite(data, 1, n, f) != n) || fclose(f) != 0) {
        perror(p);
        abort();  // the harness's own failure, not a finding in the code under test
    }
    return p;
}

static inline void fuzz_unlink(const char *name) {
    char p[640];
    snprintf(p, sizeof p, "%s/%s", fuzz_dir(), name);
    unlink(p);
}

// A NUL-terminated copy (the caller frees).
static inline char *fuzz_cstr(const uint8_t *data, size_t n) {
    char *s = malloc(n + 1);
    if (!s) abort();
    memcpy(s, data, n);
    s[n] = 0;
    return s;
}

#ifdef ZT_TOKENIZER_H
// The shipped Qwen3 tokenizer ($ZT_FUZZ_TOKENIZER_JSON to use another), loaded once in
// LLVMFuzzerInitialize; exit 2 (not a finding) when it cannot be read.
static inline zt_tokenizer *fuzz_load_tokenizer(const char *who) {
    const char *path = getenv("ZT_FUZZ_TOKENIZER_JSON") ? getenv("ZT_FUZZ_TOKENIZER_JSON") : ZT_FUZZ_TOKENIZER;
    zt_tokenizer *tk = zt_tokenizer_load(path);
    if (!tk) {
        fprintf(stderr, "%s: %s\n", who, zt_errmsg());
        exit(2);
    }
    return tk;
}
#endif
#endif
