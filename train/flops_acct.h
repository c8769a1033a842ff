// FLOP and MFU accounting (train/flops_acct.c; the device and its peak: train/device_info.c):
// the model FLOPs of each step (model/flops.h, over the real document lengths), this rank's and
// on rank 0 every rank's, their sums over the job, and the peak they are measured against.
// defines: zt_peak_kind, flops_acct, zt_flops_step, zt_flops_account, zt_flops_free
#ifndef ZT_TRAIN_FLOPS_ACCT_H
#define ZT_TRAIN_FLOPS_ACCT_H
#include <stdint.h>

#include "model/hf_config.h"
#include "train/data_cursor.h"

// Where the peak FLOP/s MFU is measured against comes from (train/device_info.c).
typedef enum { ZT_PEAK_UNKNOWN = 0, ZT_PEAK_PRESET, ZT_PEAK_GIVEN, ZT_PEAK_CPU_PROBE } zt_peak_kind;

typedef struct {
    char device_name[160];     // the GPU (CUDA runtime's name) or the CPU (/proc/cpuinfo)
    double peak_flops;         // dense peak per rank (NAN: unknown): rank 0's is the run's
    zt_peak_kind peak_kind;
    char peak_source[400];
    double flops_rank;         // model FLOPs of this rank's blocks in the last step
    double flops_all;          // rank 0: of every rank's blocks (NAN: unknown)
    double hw_extra_rank, hw_extra_all;  // what --recompute adds (0 without it)
    double flops_sum, hw_extra_sum, t_step_sum;  // over the steps of this job (rank 0: every rank's)
    uint32_t *fl_words, *fl_ids;  // one block's words and ids, and its document positions
    int32_t *fl_tg, *fl_pos;
} flops_acct;

// The model FLOPs of `step`'s blocks (c->blocks: this rank's, read already; rank 0 also reads
// every other rank's), plus what recompute adds. Outside the timed step.
// world: the data-parallel ranks (W / C); C: ranks sharing each block (this rank's FLOPs are 1 / C of its blocks').
void zt_flops_step(flops_acct *fa, data_cursor *c, const zt_model_config *cfg, uint64_t seed, int recompute,
                   int rank, int world, int C, int64_t step);
// The job's sums after a step that took t_step seconds (rank 0: the run's FLOPs).
void zt_flops_account(flops_acct *fa, int rank, double t_step);
void zt_flops_free(flops_acct *fa);
#endif
