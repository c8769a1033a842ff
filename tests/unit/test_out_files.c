// Output files that refuse links and special files (base/out_file.h) and whole-line record
// files (train/line_file.h): every kind of thing that can sit at an output's name (a link to a
// file, a dangling link, a directory, a FIFO, a second hard link, a stale temporary file), each
// refused naming the path with nothing written through it; and a record a full file system
// refuses (RLIMIT_FSIZE: EFBIG part-way through the line) cut back, counted and named.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <ftw.h>
#include <signal.h>
#include <stdarg.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/common.h"
#include "base/out_file.h"
#include "train/line_file.h"
#include "tests/support/test_util.h"

static char root[256];

static const char *P(const char *rel) {
    static char ring[8][1024];
    static int k;
    char *out = ring[k++ % 8];
    snprintf(out, 1024, "%s/%s", root, rel);
    return out;
}

static void put(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    if (!f || fputs(text, f) < 0 || fclose(f) != 0) {
        fprintf(stderr, "test setup: cannot write %s\n", path);
        exit(2);
    }
}

// The whole file as a string ("" when absent).
static const char *slurp(const char *path) {
    static char buf[4096];
    buf[0] = 0;
    FILE *f = fopen(path, "r");
    if (!f) return buf;
    const size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = 0;
    fclose(f);
    return buf;
}

// The last call failed with a message holding both substrings.
#define REFUSED(rc, a, b)                                                                                   \
    CHECK((rc) < 0 && strstr(zt_errmsg(), a) && strstr(zt_errmsg(), b), "rc %d, message '%s' lacks '%s' / '%s'", \
          (int)(rc), zt_errmsg(), a, b)

static int rm_cb(const char *p, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb, (void)flag, (void)ftw;
    return remove(p);
}

static void test_open_modes(void) {
    int fd = zt_out_open(P("new"), ZT_OUT_NEW);
    CHECK(fd >= 0, "NEW: %s", zt_errmsg());
    CHECK(write(fd, "abc", 3) == 3, "write");
    close(fd);
    REFUSED(zt_out_open(P("new"), ZT_OUT_NEW), P("new"), "already exists");
    fd = zt_out_open(P("new"), ZT_OUT_APPEND);
    CHECK(fd >= 0 && lseek(fd, 0, SEEK_CUR) == 3, "APPEND is positioned at the end");
    close(fd);
    fd = zt_out_open(P("new"), ZT_OUT_KEEP);
    struct stat st;
    CHECK(fd >= 0 && fstat(fd, &st) == 0 && st.st_size == 3, "KEEP keeps the contents");
    close(fd);
    fd = zt_out_open(P("new"), ZT_OUT_TRUNC);
    CHECK(fd >= 0 && fstat(fd, &st) == 0 && st.st_size == 0, "TRUNC empties");
    close(fd);
}

static void test_refusals(void) {
    put(P("target"), "outside\n");
    CHECK(symlink(P("target"), P("link")) == 0, "symlink");
    CHECK(symlink(P("nothing"), P("dangling")) == 0, "symlink");
    const zt_out_mode modes[] = {ZT_OUT_NEW, ZT_OUT_TRUNC, ZT_OUT_APPEND, ZT_OUT_KEEP};
    for (int m = 0; m < 4; m++) {
        REFUSED(zt_out_open(P("link"), modes[m]), P("link"), "is a symbolic link (to ");
        REFUSED(zt_out_open(P("dangling"), modes[m]), P("dangling"), "is a symbolic link (to ");
    }
    REFUSED(zt_out_check(P("link")), P("link"), "is a symbolic link");
    REFUSED(zt_replace_file(P("link"), "x", 1, 1), P("link"), "is a symbolic link");
    REFUSED(zt_write_file_atomic(P("dangling"), "x", 1), P("dangling"), "is a symbolic link");
    CHECK(!strcmp(slurp(P("target")), "outside\n"), "the link's target changed: '%s'", slurp(P("target")));
    CHECK(access(P("nothing"), F_OK) != 0, "a dangling link's target was created");

    // a FIFO (never blocks the open), a directory, a second hard link (written in place only)
    CHECK(mkfifo(P("fifo"), 0644) == 0, "mkfifo");
    REFUSED(zt_out_open(P("fifo"), ZT_OUT_TRUNC), P("fifo"), "is a FIFO");
    REFUSED(zt_replace_file(P("fifo"), "x", 1, 0), P("fifo"), "is a FIFO");
    CHECK(mkdir(P("dir"), 0755) == 0, "mkdir");
    REFUSED(zt_out_open(P("dir"), ZT_OUT_APPEND), P("dir"), "is a directory");
    CHECK(link(P("target"), P("hard")) == 0, "link");
    REFUSED(zt_out_open(P("hard"), ZT_OUT_APPEND), P("hard"), "2 names");
    CHECK(zt_out_check(P("hard")) == 0, "a hard link may be replaced by rename: %s", zt_errmsg());
    CHECK(!strcmp(slurp(P("target")), "outside\n"), "the hard link's other name changed");

    // a stale temporary file: a regular one is removed, a link refused
    put(P("stale"), "old");
    int fd = zt_out_create_fresh(P("stale"));
    CHECK(fd >= 0, "stale regular temp: %s", zt_errmsg());
    close(fd);
    REFUSED(zt_out_create_fresh(P("link")), P("link"), "a stale temporary file");
    char tmp[1100];
    snprintf(tmp, sizeof tmp, "%s.tmp.%d", P("out.json"), (int)getpid());
    CHECK(symlink(P("target"), tmp) == 0, "symlink");
    REFUSED(zt_write_file_atomic(P("out.json"), "{}", 2), tmp, "is a symbolic link");
    CHECK(!strcmp(slurp(P("target")), "outside\n"), "written through a stale temporary link");
    unlink(tmp);
    CHECK(zt_write_file_atomic(P("out.json"), "{}", 2) == 0 && !strcmp(slurp(P("out.json")), "{}"), "plain write");
}

static void test_dirs(void) {
    CHECK(zt_out_mkdirs(P("run"), P("run/tb/ranks/rank-00001")) == 0, "mkdirs: %s", zt_errmsg());
    CHECK(zt_out_mkdirs(P("run"), P("run/tb/ranks/rank-00001")) == 0, "mkdirs again: %s", zt_errmsg());
    CHECK(mkdir(P("elsewhere"), 0755) == 0 && symlink(P("elsewhere"), P("run/ranks")) == 0, "setup");
    REFUSED(zt_out_mkdirs(P("run"), P("run/ranks")), P("run/ranks"), "not a directory");
    REFUSED(zt_out_check_dir(P("run/ranks")), P("run/ranks"), "is a symbolic link");
    CHECK(zt_out_check_dir(P("run/tb")) == 0 && zt_out_check_dir(P("run/none")) == 0, "real or absent: ok");
    // the root itself (the user's path) may be a link
    CHECK(symlink(P("run"), P("run-link")) == 0, "symlink");
    CHECK(zt_out_mkdirs(P("run-link"), P("run-link/checkpoints")) == 0, "a linked root: %s", zt_errmsg());
}

// 60-byte records under a 1000-byte file size limit: 16 fit, the 17th is cut part-way (EFBIG)
// and cut back; 18 and 19 fail whole; the limit lifted, 20 is written after the 16.
static void test_line_file(void) {
    char line[61];
    zt_line_file *f = zt_line_open(P("metrics.jsonl"), 0);
    CHECK(f != NULL, "open: %s", zt_errmsg());
    if (!f) return;
    signal(SIGXFSZ, SIG_IGN);
    struct rlimit old, lim;
    getrlimit(RLIMIT_FSIZE, &old);
    lim = old;
    lim.rlim_cur = 1000;
    CHECK(setrlimit(RLIMIT_FSIZE, &lim) == 0, "setrlimit");
    char want[2048] = "";
    for (int s = 1; s <= 19; s++) {
        snprintf(line, sizeof line, "{\"step\":%02d,\"pad\":\"%*s\"}\n", s, 39, "");
        const int rc = zt_line_write(f, line, 60, s);
        CHECK(rc == (s <= 16 ? 0 : -1), "step %d: rc %d", s, rc);
        if (s <= 16) strcat(want, line);
    }
    setrlimit(RLIMIT_FSIZE, &old);
    snprintf(line, sizeof line, "{\"step\":%02d,\"pad\":\"%*s\"}\n", 20, 39, "");
    CHECK(zt_line_write(f, line, 60, 20) == 0, "step 20 after the limit is lifted");
    strcat(want, line);
    char steps[64];
    CHECK(zt_line_lost(f) == 3, "lost %lld", (long long)zt_line_lost(f));
    CHECK(!strcmp(zt_line_lost_steps(f, steps, sizeof steps), "17-19"), "lost steps '%s'", steps);
    zt_line_close(f);
    CHECK(!strcmp(slurp(P("metrics.jsonl")), want), "the file is not the 16 whole lines and step 20:\n%s",
          slurp(P("metrics.jsonl")));
    // appending continues after the last whole line
    f = zt_line_open(P("metrics.jsonl"), 1);
    CHECK(f && zt_line_write(f, line, 60, 21) == 0, "append");
    zt_line_close(f);
    struct stat st;
    CHECK(stat(P("metrics.jsonl"), &st) == 0 && st.st_size == 18 * 60, "size %lld", (long long)st.st_size);
}

int main(void) {
    snprintf(root, sizeof root, "test_out_files_XXXXXX");
    char abs[PATH_MAX];
    if (!mkdtemp(root) || !realpath(root, abs) || strlen(abs) >= sizeof root) {
        perror("mkdtemp");
        return 2;
    }
    snprintf(root, sizeof root, "%s", abs);  // absolute: the links planted point at real files
    test_open_modes();
    test_refusals();
    test_dirs();
    test_line_file();
    if (zt_test_failures == 0 && !getenv("ZT_TEST_KEEP")) nftw(root, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
    else printf("scratch files kept in %s\n", root);
    TEST_END();
}
