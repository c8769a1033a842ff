// What a run ran on, for run.json and its MFU (train/device_info.c): the device's name, the
// dense peak FLOP/s per rank MFU is measured against and where that number comes from (a GPU
// preset matched by name, --peak-tflops, or on the cpu backend a GEMM probe measured at start),
// and the versions of the libraries this process has loaded.
// defines: zt_run_device, zt_cpu_gemm_probe, zt_library_versions
#ifndef ZT_TRAIN_DEVICE_INFO_H
#define ZT_TRAIN_DEVICE_INFO_H
#include <cjson/cJSON.h>

#include "train/flops_acct.h"
#include "train/train.h"

// Fills fa->device_name, fa->peak_flops (NAN: unknown), peak_kind and peak_source, after the
// engine is built (backend: its description, which on cuda names the GPU). On the cpu backend every rank probes
// at once, as the ranks will compute: each rank's MFU is against its own probe, the run's
// against rank 0's. Never fails: an unknown peak leaves MFU null (a warning says so).
void zt_run_device(const zt_train_opts *o, flops_acct *fa, int cuda, int rank, int threads, const char *backend);
// The best rate, FLOP/s, of an n x n x n fp32 matmul through the CPU op table
// (zt_cpu_ops.matmul_fwd: OpenBLAS, this process's threads) over about budget_s seconds.
double zt_cpu_gemm_probe(int n, double budget_s);
// {"mpi": ..., "hdf5": ..., "cpu_gemm": ..., and where loaded "cublaslt", "cudnn", "nccl": {"version",
// "file"}}: what this process runs on. A new object.
cJSON *zt_library_versions(void);
#endif
