// Files and directories zerotrain writes into an output directory (a run directory, pack's
// and export's outputs). A symbolic link, or anything but a regular file (a directory where a
// file goes, a FIFO, a device), at an output's name is refused, naming it: nothing is ever
// written through a link planted there, so nothing outside the directory is written. A file
// written in place must have one name (a hard link would change the other name's file too).
// Every open is O_NOFOLLOW, creation is O_EXCL where the name must be new, and what was opened
// is checked (fstat) before a byte is written. The directory given by the user (--run-dir, -o,
// export's OUT) is the user's path and is followed; the directories zerotrain makes inside it
// (RUN/ranks, RUN/tb/..., RUN/checkpoints) must be real directories.
// defines: zt_out_mode, zt_out_open, zt_out_fopen, zt_out_check, zt_out_check_dir, zt_out_create_fresh, zt_out_mkdir,
//          zt_out_mkdirs, zt_replace_file, zt_write_file_atomic
#ifndef ZT_OUT_FILE_H
#define ZT_OUT_FILE_H

#include <stddef.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    ZT_OUT_NEW,     // create; refused when anything has the name already (O_EXCL)
    ZT_OUT_TRUNC,   // create, or empty an existing regular file
    ZT_OUT_APPEND,  // create, or open an existing regular file positioned at its end
    ZT_OUT_KEEP,    // create, or open an existing regular file with its contents (a lock file)
} zt_out_mode;

// A read-write descriptor (O_CLOEXEC) of the regular file at path; -1 + zt_err naming the path
// (and what is there: "is a symbolic link (to T)", "is a FIFO", ...).
int zt_out_open(const char *path, zt_out_mode mode);
// The same as a stdio stream ("w+" / "a+" like); NULL + zt_err.
FILE *zt_out_fopen(const char *path, zt_out_mode mode);
// 0 when nothing or a regular file of one name is at path (a name zerotrain may write or
// replace); -1 + zt_err naming it otherwise.
int zt_out_check(const char *path);
// 0 when nothing or a real directory is at path; -1 + zt_err naming it otherwise (a link).
int zt_out_check_dir(const char *path);
// Creates path as a new file (O_EXCL | O_NOFOLLOW) for a write-then-rename: a stale one (an
// interrupted write) is removed first when it is a regular file; anything else there is refused.
int zt_out_create_fresh(const char *path);
// One directory: created, or an existing real directory; a link or a file there is refused.
int zt_out_mkdir(const char *path);
// mkdir -p of root (the user's path: links in it are followed), then every directory of path
// below root with zt_out_mkdir. path must start with root.
int zt_out_mkdirs(const char *root, const char *path);
// Replaces path with data (n bytes) atomically: PATH.tmp.PID (zt_out_create_fresh), written,
// fsync'd when durable, renamed over path. A link or special file at path is refused first.
int zt_replace_file(const char *path, const void *data, size_t n, int durable);
// zt_replace_file, durable: `data` at `path` atomically (tmp file + fsync + rename); a link or
// special file at path, or at the tmp name, is refused. 0 on success.
int zt_write_file_atomic(const char *path, const void *data, size_t n);

#ifdef __cplusplus
}
#endif
#endif
