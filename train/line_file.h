// A file of lines the run appends records to (RUN/metrics.jsonl, RUN/ranks/rank-N.metrics.jsonl):
// each record goes out in one write of the whole line at the end of the last whole line, and a
// write that fails (a full disk, an I/O error) is cut back to that end, so the file never holds
// a torn line. A record that cannot be written is lost, never silently: the first of a run of
// losses is warned at once (the file, the step, the error), the run when writing works again,
// and the count is kept for the summary, the heartbeat and complete.json (train/run_log.c).
// defines: zt_line_file, zt_line_open, zt_line_write, zt_line_lost, zt_line_lost_steps, zt_line_path,
//          zt_line_close
#ifndef ZT_TRAIN_LINE_FILE_H
#define ZT_TRAIN_LINE_FILE_H
#include <stddef.h>
#include <stdint.h>

typedef struct zt_line_file zt_line_file;

// Opens path (base/out_file.h: a link or special file there is refused) emptied, or kept and
// appended to (append = 1). NULL + zt_err.
zt_line_file *zt_line_open(const char *path, int append);
// One record, a whole line ending in '\n', of `step`. 0: written; -1: lost (counted, warned).
int zt_line_write(zt_line_file *f, const char *line, size_t n, int64_t step);
// Records lost so far (0 for NULL).
int64_t zt_line_lost(const zt_line_file *f);
// The steps whose records were lost, as ranges: "37-131, 140" (the first few, then "..."); "" when none.
const char *zt_line_lost_steps(const zt_line_file *f, char *buf, size_t n);
const char *zt_line_path(const zt_line_file *f);
void zt_line_close(zt_line_file *f);  // NULL is fine
#endif
