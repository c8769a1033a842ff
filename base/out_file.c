// Output files and directories that refuse links and special files (base/out_file.h).
// Path based: O_NOFOLLOW guards the last component; the directories above it are checked
// when zerotrain makes them (zt_out_mkdirs). A link swapped in for such a directory while a
// job runs (a race with a hostile local user) is outside what this guards; a link left in a
// run or output directory, by a user or a script, is what it refuses.
#define _GNU_SOURCE
#include "base/out_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/common.h"

// "is a symbolic link (to /x/y)", "is a FIFO", ...: what st (an lstat of path) is.
static const char *what_is(const char *path, const struct stat *st, char *buf, size_t n) {
    if (S_ISLNK(st->st_mode)) {
        char to[1024];
        const ssize_t k = readlink(path, to, sizeof to - 1);
        to[k > 0 ? k : 0] = 0;
        snprintf(buf, n, "is a symbolic link (to %.1000s)", k > 0 ? to : "?");
    } else if (S_ISDIR(st->st_mode)) {
        snprintf(buf, n, "is a directory");
    } else if (S_ISFIFO(st->st_mode)) {
        snprintf(buf, n, "is a FIFO");
    } else if (S_ISSOCK(st->st_mode)) {
        snprintf(buf, n, "is a socket");
    } else if (S_ISCHR(st->st_mode) || S_ISBLK(st->st_mode)) {
        snprintf(buf, n, "is a device");
    } else if (S_ISREG(st->st_mode)) {
        snprintf(buf, n, "is a file with %llu names (hard links: writing it would change the others too)",
                 (unsigned long long)st->st_nlink);
    } else {
        snprintf(buf, n, "is not a regular file");
    }
    return buf;
}

static int refuse(const char *path, const struct stat *st, const char *want) {
    char what[1200];
    const int dir = !strcmp(want, "a directory");
    return zt_err("%s %s, not %s: refused (zerotrain never writes through a link or into anything but its own "
                  "files in an output directory, so nothing outside it is written); remove it%s",
                  path, what_is(path, st, what, sizeof what), want,
                  dir ? " (to keep the outputs on another file system, put the whole output directory there: "
                        "--run-dir, -o)" : "");
}

// A regular file of one name (what an output file must be when it is written in place).
static int is_own_file(const struct stat *st) { return S_ISREG(st->st_mode) && st->st_nlink <= 1; }

int zt_out_check(const char *path) {
    struct stat st;
    if (lstat(path, &st) != 0) return errno == ENOENT ? 0 : zt_err("%s: cannot stat: %s", path, strerror(errno));
    // a file replaced by rename may have other names: the rename gives path a new file
    return S_ISREG(st.st_mode) ? 0 : refuse(path, &st, "a regular file");
}

int zt_out_check_dir(const char *path) {
    struct stat st;
    if (lstat(path, &st) != 0) return errno == ENOENT ? 0 : zt_err("%s: cannot stat: %s", path, strerror(errno));
    return S_ISDIR(st.st_mode) ? 0 : refuse(path, &st, "a directory");
}

int zt_out_open(const char *path, zt_out_mode mode) {
    // O_NONBLOCK: a FIFO planted at the name must not block the open (it is refused below)
    const int flags = O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK | (mode == ZT_OUT_NEW ? O_EXCL : 0);
    const int fd = open(path, flags, 0644);
    struct stat st;
    if (fd < 0) {
        const int e = errno;
        if (lstat(path, &st) == 0 && (e == ELOOP || e == EISDIR || e == ENXIO || e == EEXIST || e == EWOULDBLOCK)) {
            if (mode == ZT_OUT_NEW && S_ISREG(st.st_mode))
                return zt_err("%s already exists (zerotrain creates this file new)", path);
            return refuse(path, &st, "a regular file");
        }
        return zt_err("%s: cannot create or open for writing: %s", path, strerror(e));
    }
    if (fstat(fd, &st) != 0) {
        const int e = errno;
        close(fd);
        return zt_err("%s: cannot stat: %s", path, strerror(e));
    }
    if (!is_own_file(&st)) {  // what was opened: a FIFO, a device, a file of other names
        close(fd);
        return refuse(path, &st, "a regular file of its own");
    }
    const int fl = fcntl(fd, F_GETFL);
    int rc = fl < 0 ? -1 : fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    if (rc == 0 && mode == ZT_OUT_TRUNC) rc = ftruncate(fd, 0);
    if (rc == 0 && mode == ZT_OUT_APPEND) rc = lseek(fd, 0, SEEK_END) < 0 ? -1 : 0;
    if (rc != 0) {
        const int e = errno;
        close(fd);
        return zt_err("%s: cannot prepare for writing: %s", path, strerror(e));
    }
    return fd;
}

FILE *zt_out_fopen(const char *path, zt_out_mode mode) {
    const int fd = zt_out_open(path, mode);
    if (fd < 0) return NULL;
    FILE *f = fdopen(fd, mode == ZT_OUT_APPEND ? "a+" : "w+");  // "a": writes go to the end (O_APPEND)
    if (!f) {
        const int e = errno;
        close(fd);
        zt_err("%s: cannot open a stream: %s", path, strerror(e));
    }
    return f;
}

int zt_out_create_fresh(const char *path) {
    struct stat st;
    if (lstat(path, &st) == 0) {
        if (!S_ISREG(st.st_mode)) return refuse(path, &st, "a regular file (a stale temporary file)");
        if (unlink(path) != 0 && errno != ENOENT)
            return zt_err("%s: cannot remove the stale temporary file: %s", path, strerror(errno));
    }
    return zt_out_open(path, ZT_OUT_NEW);
}

int zt_out_mkdir(const char *path) {
    if (mkdir(path, 0755) == 0) return 0;
    const int e = errno;
    struct stat st;
    if (e == EEXIST && lstat(path, &st) == 0) return S_ISDIR(st.st_mode) ? 0 : refuse(path, &st, "a directory");
    return zt_err("%s: cannot create directory: %s", path, strerror(e));
}

int zt_out_mkdirs(const char *root, const char *path) {
    const size_t rn = strlen(root);
    if (strncmp(path, root, rn) != 0 || (path[rn] && path[rn] != '/'))
        return zt_err("%s: not inside %s (internal error)", path, root);
    if (zt_mkdirs(root) != 0) return -1;
    char buf[4400];
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf) return zt_err("%.200s...: path too long", path);
    for (size_t i = rn + 1; i <= strlen(path); i++) {
        if (buf[i] != '/' && buf[i] != 0) continue;
        if (buf[i - 1] == '/') continue;  // "a//b"
        const char c = buf[i];
        buf[i] = 0;
        const int rc = zt_out_mkdir(buf);
        buf[i] = c;
        if (rc != 0) return -1;
    }
    return 0;
}

int zt_replace_file(const char *path, const void *data, size_t n, int durable) {
    // rename() over a link would replace the link itself (never its target), so a link at
    // path could not make this write outside the directory; it is refused all the same, so
    // that one planted there is reported rather than silently dropped.
    if (zt_out_check(path) != 0) return -1;
    char tmp[4200];
    if (snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid()) >= (int)sizeof tmp)
        return zt_err("%.200s...: path too long", path);
    const int fd = zt_out_create_fresh(tmp);
    if (fd < 0) return -1;
    const char *p = data;
    size_t left = n;
    while (left) {
        ssize_t w = write(fd, p, left);
        if (w < 0) {
            if (errno == EINTR) continue;
            int e = errno;
            close(fd);
            unlink(tmp);
            return zt_err("%s: write failed after %zu of %zu bytes: %s", tmp, n - left, n, strerror(e));
        }
        p += w;
        left -= (size_t)w;
    }
    if ((durable && fsync(fd) != 0) || close(fd) != 0) {
        int e = errno;
        unlink(tmp);
        return zt_err("%s: flush failed: %s", tmp, strerror(e));
    }
    if (rename(tmp, path) != 0) {
        int e = errno;
        unlink(tmp);
        return zt_err("%s: rename to %s failed: %s", tmp, path, strerror(e));
    }
    return 0;
}

int zt_write_file_atomic(const char *path, const void *data, size_t n) { return zt_replace_file(path, data, n, 1); }
