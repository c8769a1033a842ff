// Whole-line record files (train/line_file.h). The file is written with pwrite at the offset
// after its last whole line (not O_APPEND, so that the offset is known) and ftruncate'd back to
// it when a write fails part-way: a disk full for a moment costs whole records, counted and
// named, and what is in the file stays a sequence of whole lines.
#define _GNU_SOURCE
#include "train/line_file.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#include "base/common.h"
#include "base/out_file.h"

#define ZT_LINE_RANGES 8  // lost step ranges remembered for the messages

struct zt_line_file {
    int fd;
    off_t end;              // after the last whole line
    char path[4200];
    int64_t lost;           // records lost in all
    int64_t run_lost;       // records lost since the last one written (a run of losses in progress)
    int64_t ranges[ZT_LINE_RANGES][2];  // lost steps [first, last], in order
    int nranges, more;      // ranges kept; more: later ranges not kept
};

zt_line_file *zt_line_open(const char *path, int append) {
    const int fd = zt_out_open(path, append ? ZT_OUT_APPEND : ZT_OUT_TRUNC);
    if (fd < 0) return NULL;
    zt_line_file *f = zt_xcalloc(1, sizeof *f);
    f->fd = fd;
    f->end = lseek(fd, 0, SEEK_CUR);
    if (f->end < 0) f->end = 0;
    snprintf(f->path, sizeof f->path, "%s", path);
    return f;
}

static void note_lost(zt_line_file *f, int64_t step) {
    f->lost++;
    f->run_lost++;
    int64_t *last = f->nranges ? f->ranges[f->nranges - 1] : NULL;
    if (last && step >= last[0] && step <= last[1] + 1) {
        if (step > last[1]) last[1] = step;
    } else if (f->nranges < ZT_LINE_RANGES) {
        f->ranges[f->nranges][0] = f->ranges[f->nranges][1] = step;
        f->nranges++;
    } else {
        f->more = 1;
    }
}

int zt_line_write(zt_line_file *f, const char *line, size_t n, int64_t step) {
    if (!f) return 0;
    size_t done = 0;
    int e = 0;
    while (done < n) {
        const ssize_t w = pwrite(f->fd, line + done, n - done, f->end + (off_t)done);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            e = w < 0 ? errno : ENOSPC;
            break;
        }
        done += (size_t)w;
    }
    if (done == n) {
        f->end += (off_t)n;
        if (f->run_lost) {
            char steps[256];
            fprintf(stderr, "zerotrain: warning: %s: writing again at step %lld; %lld record%s lost before it "
                            "(steps %s so far)\n",
                    f->path, (long long)step, (long long)f->run_lost, f->run_lost == 1 ? "" : "s",
                    zt_line_lost_steps(f, steps, sizeof steps));
            f->run_lost = 0;
        }
        return 0;
    }
    // Cut back to the last whole line: a half-written record must not stay behind.
    const int cut = ftruncate(f->fd, f->end) == 0;
    if (!f->run_lost)
        fprintf(stderr, "zerotrain: warning: %s: the record of step %lld is lost (%s)%s; the records lost are "
                        "counted and reported at the end of the run\n",
                f->path, (long long)step, strerror(e),
                cut ? "" : " and the part written could not be cut off (the file may hold a torn line there)");
    note_lost(f, step);
    return -1;
}

int64_t zt_line_lost(const zt_line_file *f) { return f ? f->lost : 0; }

const char *zt_line_lost_steps(const zt_line_file *f, char *buf, size_t n) {
    size_t o = 0;
    buf[0] = 0;
    for (int i = 0; f && i < f->nranges && o < n; i++) {
        const int64_t *r = f->ranges[i];
        if (r[0] == r[1]) o += (size_t)snprintf(buf + o, n - o, "%s%lld", i ? ", " : "", (long long)r[0]);
        else o += (size_t)snprintf(buf + o, n - o, "%s%lld-%lld", i ? ", " : "", (long long)r[0], (long long)r[1]);
    }
    if (f && f->more && o < n) snprintf(buf + o, n - o, ", ...");
    return buf;
}

const char *zt_line_path(const zt_line_file *f) { return f ? f->path : ""; }

void zt_line_close(zt_line_file *f) {
    if (!f) return;
    close(f->fd);
    free(f);
}
