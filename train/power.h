// Power sampling of this rank's GPU (train/power.c).
// defines: zt_power_sampler, zt_power_start, zt_power_stop, zt_power_last
#ifndef ZT_TRAIN_POWER_H
#define ZT_TRAIN_POWER_H

// Board power and utilization of GPU `gpu` (NVML) appended every interval_s to
// RUN/ranks/rank-NNNNN.power.csv (time,gpu,power_w,util_pct,mem_used_mib).
// NULL (with zt_err) when NVML or the GPU is unavailable.
typedef struct zt_power_sampler zt_power_sampler;
zt_power_sampler *zt_power_start(const char *run_dir, int rank, int gpu, double interval_s);
void zt_power_stop(zt_power_sampler *p);
// The latest sample (watts, utilisation %); -1 when none has been taken yet.
double zt_power_last(zt_power_sampler *p, double *util_pct);
#endif
