// The datasets' bytes of a save (--save-io): by default each rank writes its slices at their file
// offsets itself, whole 4 KiB blocks with O_DIRECT and the partial blocks at the ends with
// pwrite; with mpiio through HDF5's collective write. Also the fault hooks on those writes.
// defines: zt_ckpt_set_save_io, zt_ckpt_get_save_io, zt_ckpt_last_save_io, zt_ckpt_open_raw,
//          zt_ckpt_close_raw, zt_ckpt_raw_done, zt_ckpt_write_slice
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "checkpoint/ckpt_internal.h"
#include "base/common.h"

#define ZT_IO_ALIGN 4096          // O_DIRECT's offset, length and buffer alignment (safe everywhere)
#define ZT_IO_BOUNCE (8 << 20)    // staging for O_DIRECT writes from memory that is not aligned

static int save_io_mode = ZT_SAVE_IO_DIRECT;
static int64_t last_direct_bytes, last_buffered_bytes;  // this rank's last save (any thread; one save at a time)
void zt_ckpt_set_save_io(int mode) { save_io_mode = mode; }
int zt_ckpt_get_save_io(void) { return save_io_mode; }
void zt_ckpt_last_save_io(int64_t *direct, int64_t *buffered) {
    *direct = last_direct_bytes;
    *buffered = last_buffered_bytes;
}

static int pwrite_all(int fd, const char *p, int64_t n, int64_t at) {
    while (n > 0) {
        ssize_t w = pwrite(fd, p, (size_t)n, (off_t)at);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0) return -1;
        if (w == 0) return errno = ENOSPC, -1;
        p += w, n -= w, at += w;
    }
    return 0;
}

// Every rank, after the datasets exist (their space is allocated at creation): the file
// offsets, a buffered descriptor and (direct) an O_DIRECT one. A file system that refuses
// O_DIRECT (EINVAL) gets pwrite for everything.
int zt_ckpt_open_raw(zt_ckpt_save_ctx *c) {
    const int nds = c->lay->nunits * ZT_CKPT_NDS;
    c->off = zt_xmalloc((size_t)nds * sizeof(int64_t));
    for (int i = 0; i < nds; i++) {
        haddr_t a = H5Dget_offset(c->ds[i]);
        if (a == HADDR_UNDEF)
            return zt_err("/units/%03d/%s: HDF5 gives no file offset for the dataset (its space is not allocated)",
                          i / ZT_CKPT_NDS, zt_ckpt_ds_names[i % ZT_CKPT_NDS]);
        c->off[i] = (int64_t)a;
    }
    // the file HDF5 just created in the fresh .partial directory (O_NOFOLLOW: never a link)
    c->fd = open(c->file, O_WRONLY | O_NOFOLLOW | O_CLOEXEC);
    if (c->fd < 0) return zt_err("cannot open the file for its data writes: %s", strerror(errno));
    if (c->io == ZT_SAVE_IO_DIRECT) {
        c->dfd = open(c->file, O_WRONLY | O_DIRECT | O_NOFOLLOW | O_CLOEXEC);
        void *b = NULL;
        if (c->dfd >= 0 && posix_memalign(&b, ZT_IO_ALIGN, ZT_IO_BOUNCE) != 0) close(c->dfd), c->dfd = -1;
        c->bounce = b;
    }
    return 0;
}

void zt_ckpt_close_raw(zt_ckpt_save_ctx *c) {
    if (c->fd >= 0) close(c->fd), c->fd = -1;
    if (c->dfd >= 0) close(c->dfd), c->dfd = -1;
}

void zt_ckpt_raw_done(zt_ckpt_save_ctx *c) {
    zt_ckpt_close_raw(c);
    last_direct_bytes = c->direct_bytes, last_buffered_bytes = c->buffered_bytes;
    if (c->hooks.debug_io && c->io != ZT_SAVE_IO_MPIIO)
        fprintf(stderr, "zerotrain: rank %d: checkpoint step %lld data: %lld bytes with O_DIRECT, %lld with pwrite\n",
                c->rank, (long long)c->step, (long long)c->direct_bytes, (long long)c->buffered_bytes);
}

// n bytes from src to file offset pos: the whole ZT_IO_ALIGN blocks inside [pos, pos + n)
// with O_DIRECT (from src itself where it is aligned, else through the bounce buffer),
// the partial blocks at the two ends (shared with a neighbour's slice or with HDF5's
// metadata) with pwrite. -1 with errno set.
static int write_raw(zt_ckpt_save_ctx *c, const char *src, int64_t pos, int64_t n) {
    int64_t x = pos;
    const int64_t a = (pos + ZT_IO_ALIGN - 1) / ZT_IO_ALIGN * ZT_IO_ALIGN, b = (pos + n) / ZT_IO_ALIGN * ZT_IO_ALIGN;
    if (c->dfd >= 0 && b > a) {
        if (pwrite_all(c->fd, src, a - pos, pos) != 0) return -1;
        c->buffered_bytes += a - pos;
        x = a;
        while (x < b) {
            const int64_t len = b - x < ZT_IO_BOUNCE ? b - x : ZT_IO_BOUNCE;
            const char *from = src + (x - pos);
            if ((uintptr_t)from % ZT_IO_ALIGN) from = memcpy(c->bounce, from, (size_t)len);
            ssize_t w = pwrite(c->dfd, from, (size_t)len, (off_t)x);
            if (c->hooks.no_odirect) w = -1, errno = EINVAL;  // testing: a file system without it
            if (w < 0 && errno == EINTR) continue;
            if (w < 0 && errno == EINVAL) {  // the file system takes no O_DIRECT here: pwrite from now on
                close(c->dfd), c->dfd = -1;
                break;
            }
            if (w > 0) x += w, c->direct_bytes += w;
            if (w != len) break;  // a short write or an error: the rest through pwrite, which names it
        }
    }
    if (pwrite_all(c->fd, src + (x - pos), pos + n - x, x) != 0) return -1;
    c->buffered_bytes += pos + n - x;
    return 0;
}

// Why a data write failed: errno, or (a short write without one) the file system's free space.
static void write_cause(const zt_ckpt_save_ctx *c, int e, int64_t bytes, char *cause, size_t n) {
    struct statvfs vs;
    if (e == ENOSPC || e == EDQUOT || e == EIO)
        snprintf(cause, n, "%s", strerror(e));
    else if (statvfs(c->partial, &vs) == 0 && (int64_t)vs.f_bavail * (int64_t)vs.f_frsize < bytes)
        snprintf(cause, n, "%s (%lld bytes free on the file system)", strerror(ENOSPC),
                 (long long)vs.f_bavail * (long long)vs.f_frsize);
    else
        snprintf(cause, n, "%s", e ? strerror(e) : "I/O error (short write)");
}

// This rank writes elements [lo, lo + valid) (or nothing). With --save-io mpiio a
// collective (every rank calls it, with nothing selected when it holds nothing).
int zt_ckpt_write_slice(zt_ckpt_save_ctx *c, int u, int k) {
    const zt_ckpt_slice *s = &c->sh->unit[u];
    hid_t d = c->ds[u * ZT_CKPT_NDS + k];
    const int64_t bytes = s->valid * (int64_t)sizeof(float);
    const int64_t budget = c->hooks.fail_after_bytes;  // testing: an injected ENOSPC
    int inject = budget >= 0 && s->valid > 0 && c->bytes_written + bytes > budget;
    char cause[256];
    if (c->io != ZT_SAVE_IO_MPIIO && !inject) {
        if (s->valid == 0) return 0;
        const int64_t at = c->off[u * ZT_CKPT_NDS + k] + s->lo * (int64_t)sizeof(float);
        errno = 0;
        if (write_raw(c, (const char *)zt_ckpt_slice_ptr(s, k), at, bytes) != 0) {
            write_cause(c, errno, bytes, cause, sizeof cause);
            return zt_err("/units/%03d/%s: write of elements [%lld, %lld) (file bytes [%lld, %lld)) failed: %s", u,
                          zt_ckpt_ds_names[k], (long long)s->lo, (long long)(s->lo + s->valid), (long long)at,
                          (long long)(at + bytes), cause);
        }
        c->bytes_written += bytes;
        return 0;
    }
    hid_t fs = H5Dget_space(d);
    hsize_t one = 1;
    hid_t ms;
    if (s->valid > 0 && !inject) {
        hsize_t start = (hsize_t)s->lo, count = (hsize_t)s->valid;
        H5Sselect_hyperslab(fs, H5S_SELECT_SET, &start, NULL, &count, NULL);
        ms = H5Screate_simple(1, &count, NULL);
    } else {  // still take part in the collective write, with nothing selected
        H5Sselect_none(fs);
        ms = H5Screate_simple(1, &one, NULL);
        H5Sselect_none(ms);
    }
    static const float dummy = 0;
    const float *p = s->valid > 0 ? zt_ckpt_slice_ptr(s, k) : &dummy;
    herr_t rc = 0;
    int e = 0;
    char why[1024] = "";
    if (c->io == ZT_SAVE_IO_MPIIO) {
        errno = 0;
        rc = H5Dwrite(d, H5T_NATIVE_FLOAT, ms, fs, c->dxpl, p);
        e = errno;  // MPI-IO's write(2) error; HDF5's stack does not carry it
        if (rc < 0 && c->hooks.debug_h5) H5Eprint2(H5E_DEFAULT, stderr);
        if (rc < 0) snprintf(why, sizeof why, "%s", zt_h5_why());  // before any other HDF5 call clears the stack
    }
    H5Sclose(ms);
    H5Sclose(fs);
    if (inject)
        return zt_err("/units/%03d/%s: write failed after %lld bytes: No space left on device (injected by "
                      "ZT_CKPT_FAIL_AFTER_BYTES=%lld)",
                      u, zt_ckpt_ds_names[k], (long long)c->bytes_written, (long long)budget);
    if (rc < 0) {
        // MPI-IO reports a full disk as a short write without errno; ask the file system.
        write_cause(c, e, bytes, cause, sizeof cause);
        return zt_err("/units/%03d/%s: write of elements [%lld, %lld) failed: %s (HDF5: %s)", u, zt_ckpt_ds_names[k],
                      (long long)s->lo, (long long)(s->lo + s->valid), cause, why);
    }
    c->bytes_written += bytes;
    return 0;
}
