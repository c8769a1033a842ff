// Seeing a run: `zerotrain report RUN` writes one self-contained HTML page (inline SVG
// and CSS, no script, nothing fetched) from a run directory, live or finished; its power
// picture is ops/power_view.h's.
// defines: zt_report_opts, zt_report_write
#ifndef ZT_REPORT_H
#define ZT_REPORT_H

#include <stddef.h>
#include <stdio.h>

#include "ops/power_view.h"
#include "ops/triage.h"

typedef struct {
    zt_bands bands;          // for the power picture (B300 unless --bands)
    const char *bands_name;  // "built in" or the file
    double window;           // triage snapshot window (1 s)
    FILE *warn;              // where to say what was skipped of damaged run files (NULL: the page only)
} zt_report_opts;

// Write the report of run_dir to out_path (atomically). 0, or -1 + zt_err: not a
// directory, not a run directory (names the files it looked for), cannot write.
// `summary` (may be NULL) gets one line: the state and what was drawn.
int zt_report_write(const char *run_dir, const char *out_path, const zt_report_opts *o, char *summary, size_t n);
#endif
