// NVML loaded at run time with dlopen (no build-time dependency): GPU identity,
// memory, other processes on the device, board power and utilization.
// defines: zt_nvml_open, zt_nvml_device_count, zt_nvml_device_info, zt_nvml_sample
#ifndef ZT_NVML_H
#define ZT_NVML_H
#include <stdint.h>

// 0 when libnvidia-ml could be loaded and initialised; -1 + zt_err otherwise
// (no driver: the caller reports the check as skipped or failed).
int zt_nvml_open(void);
int zt_nvml_device_count(void);

typedef struct {
    char name[96];
    char driver[32];
    uint64_t mem_total, mem_used;
    int other_processes;  // compute processes currently on the device
} zt_nvml_info;
int zt_nvml_device_info(int index, zt_nvml_info *out);

// Board power in watts and SM utilization in percent, now.
int zt_nvml_sample(int index, double *power_w, double *util_pct, double *mem_used_mib);
#endif
