// Power/utilization triage: read GPU samples (the trainer's rank-NNNNN.power.csv,
// `nvidia-smi --query-gpu` CSV, `nvidia-smi dmon`), group them into snapshots across
// GPUs, classify each snapshot into one of the field report's states with a band
// file, merge equal neighbours into stretches, and derive bands for a new GPU model.
// defines: zt_bands, zt_gpu_state, zt_samples, zt_snapshot, zt_stretch, zt_bands_*,
//          zt_samples_*, zt_gpu_slot, zt_classify, zt_snapshots_build, zt_stretches_build, zt_calibrate
#ifndef ZT_TRIAGE_H
#define ZT_TRIAGE_H

#include <stddef.h>
#include <stdio.h>

typedef enum {
    ZT_GS_UNKNOWN = 0,
    ZT_GS_COMPUTE,
    ZT_GS_COMM,
    ZT_GS_STARVATION,
    ZT_GS_CHECKPOINT,
    ZT_GS_DEADLOCK,
    ZT_GS_IDLE,
    ZT_GS_COUNT_
} zt_gpu_state;

const char *zt_gpu_state_name(zt_gpu_state s);  // "compute", "communication", ...

// A band file (`zerotrain-bands` v1, see docs/operations.md). `levels` are the
// typical power of each state ([lo, hi], informational and the input of calibrate);
// the classifier uses only the three power edges and the three utilization limits.
typedef struct {
    char gpu[96];
    char source[256];
    double level_lo[ZT_GS_COUNT_], level_hi[ZT_GS_COUNT_];  // W; UNKNOWN/CHECKPOINT unused
    double idle_max_w;        // median power at or below: idle (when every GPU is at ~0%)
    double hang_max_w;        // busy GPUs at or below: deadlock or checkpoint
    double compute_min_w;     // median power at or above: compute
    double zero_util_max;     // util at or below: this GPU is idle (%)
    double busy_util_min;     // util at or above: this GPU is busy (%)
    double uneven_spread;     // max-min util above this: uneven (%)
} zt_bands;

// The built-in B300 calibration (identical to ops/bands-b300.json; a test holds
// the two together).
void zt_bands_b300(zt_bands *b);
// Parse and validate a band file's text; `name` is used in error messages.
int zt_bands_parse(zt_bands *b, const char *text, const char *name);
int zt_bands_load(zt_bands *b, const char *path);
int zt_bands_validate(const zt_bands *b, const char *name);
// The band file as JSON text (malloc'd).
char *zt_bands_to_json(const zt_bands *b);

// ---- samples ---------------------------------------------------------------------
typedef enum { ZT_SF_AUTO = 0, ZT_SF_POWER_CSV, ZT_SF_SMI_CSV, ZT_SF_DMON } zt_sample_format;
// What a file's times mean: Unix seconds; seconds since local midnight (dmon -o T
// without -o D); or sample index x the dmon interval (dmon without -o T).
typedef enum { ZT_TK_ABS = 0, ZT_TK_TIME_OF_DAY, ZT_TK_INDEX } zt_time_kind;

typedef struct {
    double t;        // seconds, see zt_time_kind
    int dev;         // GPU id in the job: the rank for power.csv, file offset + index otherwise
    double power_w;  // board power
    double util_pct; // GPU (SM) utilization
} zt_gpu_sample;

typedef struct {
    zt_gpu_sample *s;
    size_t n, cap;
    int ndev;               // 1 + the largest dev seen
    int nfiles;
    zt_time_kind kind;
    char first_file[256];   // the file that fixed `kind` (for the mixing error)
} zt_samples;

const char *zt_sample_format_name(zt_sample_format f);
int zt_sample_format_parse(const char *s, zt_sample_format *out);

void zt_samples_init(zt_samples *set);
void zt_samples_free(zt_samples *set);
// Read one file and append its samples. GPU ids: a file named rank-NNNNN.power.csv is
// rank NNNNN; otherwise dev = set->ndev (before this file) + the GPU index column, so
// per-node files given in node order number GPUs like ranks with 8 per node.
// `dmon_interval` is the dmon -d period in seconds (times of dmon logs without -o T).
// -1 + zt_err "FILE:LINE: rule" on any malformed line.
int zt_samples_read(zt_samples *set, const char *path, zt_sample_format fmt, double dmon_interval);
// Same, from text in memory (`name` for messages; `dev_base` < 0: as above).
int zt_samples_parse(zt_samples *set, const char *text, size_t len, const char *name, zt_sample_format fmt,
                     double dmon_interval, int dev_base);
// Order samples by time, then GPU (stable).
void zt_samples_sort(zt_samples *set);
// The distinct GPU ids of the samples, ascending, in *ids (malloc'd; free it); returns how
// many. Per-GPU arrays are sized by this count, not by 1 + the largest id: an id is a rank
// from a file name or an index from a file's column, and need not be dense.
int zt_samples_gpu_ids(const zt_samples *set, int **ids);
// Position of `id` in ids[0..n) (ascending), -1 when absent.
int zt_gpu_slot(const int *ids, int n, int id);

// ---- classification --------------------------------------------------------------
// One snapshot: the samples of distinct GPUs within `window` seconds of its first one.
typedef struct {
    double t;                  // mean sample time
    int n;                     // GPUs present
    zt_gpu_state state;
    double p_med, p_min, p_max, p_busy_med;  // W (p_busy_med: median of busy GPUs, 0 if none)
    double u_min, u_max, u_mean;
    int nzero, nbusy;
    char zero[64];             // the GPUs at ~0% as a rank list ("3", "0-2,5"); "" if none
} zt_snapshot;

// Classify the GPUs of one snapshot (arrays of n). `ndev` is the job's GPU count: the
// checkpoint rule needs GPU 0 among the samples. Fills every field but t.
void zt_classify(const zt_bands *b, const double *power, const double *util, const int *dev, int n,
                 zt_snapshot *out);

// Build snapshots from sorted samples. *out malloc'd.
int zt_snapshots_build(const zt_samples *set, const zt_bands *b, double window, zt_snapshot **out, size_t *nout);

typedef struct {
    zt_gpu_state state;
    size_t first, last;   // snapshot indices
    double t0, t1, seconds;
    char zero[64];        // the first snapshot's idle GPUs
} zt_stretch;

// Merge consecutive equal states; a gap longer than max_gap seconds also ends a
// stretch. A stretch lasts from its first snapshot to the next snapshot (or, for the
// last, one median interval). *out malloc'd.
int zt_stretches_build(const zt_snapshot *s, size_t n, double max_gap, zt_stretch **out, size_t *nout);
double zt_snapshots_median_interval(const zt_snapshot *s, size_t n);

// Format a time of the given kind ("2025-11-29 13:45:01", "13:45:01", "+12.0 s").
const char *zt_triage_fmt_time(zt_time_kind k, double t, char *buf, size_t n);

// ---- calibration ------------------------------------------------------------------
typedef struct {
    double k;  // range = median ± k·σ, σ = 1.4826·MAD
    const char *gpu;
} zt_calib_opts;

typedef struct {
    double healthy_med, healthy_sigma, idle_med, idle_sigma;
    size_t healthy_used, healthy_total, idle_used;
    int clamped;  // compute range had to be narrowed above communication
} zt_calib_info;

// Bands from healthy (mostly compute) and idle samples: see docs/operations.md.
int zt_calibrate(const zt_samples *healthy, const zt_samples *idle, const zt_calib_opts *o, zt_bands *out,
                 zt_calib_info *info);

// median of n doubles (the array is reordered); 0 for n == 0.
double zt_median(double *v, size_t n);
#endif
