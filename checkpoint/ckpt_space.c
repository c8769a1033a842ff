// Room for a checkpoint: the file's estimated size, the free-space check before a save, the
// reservation of its blocks, and their release after a failure.
// defines: zt_ckpt_estimate_bytes, zt_ckpt_space_check, zt_ckpt_reserve_space, zt_ckpt_release_space
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "checkpoint/ckpt_internal.h"
#include "base/common.h"

int64_t zt_ckpt_estimate_bytes(const zt_model_layout *lay) {
    int64_t b = 64 * 1024;  // superblock, root and config attributes, meta.json
    for (int u = 0; u < lay->nunits; u++) {
        int64_t ds = lay->units[u].numel * (int64_t)sizeof(float);
        b += ZT_CKPT_NDS * (ds + 4096 + (ds >= (16 << 20) ? (1 << 20) : 0));  // header + alignment padding
    }
    return b;
}

// Whether dir's file system has `need` bytes free (a save under ZT_CKPT_NO_SPACE_CHECK=1 skips it).
int zt_ckpt_space_check(const char *dir, int64_t need) {
    struct statvfs vs;
    if (statvfs(dir, &vs) != 0) return 0;  // unknown: let the writes tell
    int64_t avail = (int64_t)vs.f_bavail * (int64_t)vs.f_frsize;
    if (avail < need)
        return zt_err("not enough space: the checkpoint needs about %.1f MiB and %s has %.1f MiB free (No space left "
                      "on device); free space or lower --keep-last",
                      need / 1048576.0, dir, avail / 1048576.0);
    return 0;
}

// Reserve the file's blocks up front (fallocate, KEEP_SIZE) so that neither the data
// writes nor HDF5's metadata flush in H5Fclose can meet a full disk: HDF5 1.10 does
// not agree on a metadata write error across ranks, and ranks can then wait in
// different barriers inside H5Fclose for ever. File systems without fallocate are
// left to the free-space check. A save under ZT_CKPT_NO_RESERVE=1 skips it (tests).
int zt_ckpt_reserve_space(const char *file, int64_t bytes) {
    int fd = open(file, O_WRONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return zt_err("cannot open to reserve space: %s", strerror(errno));
    int rc = fallocate(fd, FALLOC_FL_KEEP_SIZE, 0, (off_t)bytes);
    int e = errno;
    close(fd);
    if (rc != 0 && e != EOPNOTSUPP && e != ENOSYS)
        return zt_err("reserving %.1f MiB for the file failed: %s", bytes / 1048576.0, strerror(e));
    return 0;
}

// After a failure, give HDF5's metadata flush in H5Fclose room to complete on every
// rank (the file is discarded anyway): drop the data and any reservation.
void zt_ckpt_release_space(const char *file) {
    if (truncate(file, 0) != 0 && errno != ENOENT)
        fprintf(stderr, "zerotrain: warning: %s: cannot truncate after a failed save: %s\n", file, strerror(errno));
}
