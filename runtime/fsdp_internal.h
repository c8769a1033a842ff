// Between the two FSDP engines (fsdp.c and fsdp_cuda.c); not for callers.
// defines: zt_fsdp_init_host, zt_fsdp_count_targets, zt_fsdp_cuda_step, zt_fsdp_cuda_eval, zt_fsdp_cuda_memory, zt_fsdp_cuda_free
#ifndef ZT_FSDP_INTERNAL_H
#define ZT_FSDP_INTERNAL_H
#include "runtime/fsdp.h"

enum { ZT_FSDP_HOST_MODEL = 1, ZT_FSDP_NO_INIT = 2 };
int zt_fsdp_init_host(zt_fsdp *f, zt_comm *comm, const zt_qwen3_config *cfg, const zt_ops *ops, int micro_batch,
                      int grad_accum, int64_t seq_len, const zt_hparams *hp, uint64_t seed, int flags);
// The trained targets of `nblocks` blocks of this rank, summed over all ranks (one
// all-reduce, tagged `what`) when f->token_flags; W * nblocks * (S - 1) without one otherwise.
int zt_fsdp_count_targets(zt_fsdp *f, const uint32_t *const *blocks, int nblocks, const char *what, int64_t *global);
#ifdef ZT_HAVE_CUDA_FSDP
// -1 + zt_err when the GPU engine cannot isolate documents with its attention (cuDNN).
int zt_fsdp_cuda_check_data(zt_fsdp *f, int isolated);
int zt_fsdp_cuda_eval(zt_fsdp *f, const uint32_t *const *blocks, int nmicro, double *loss_sum, int64_t *targets);
int zt_fsdp_cuda_step(zt_fsdp *f, const uint32_t *const *blocks, int stop_request, zt_fsdp_stats *out);
void zt_fsdp_cuda_memory(const zt_fsdp *f, zt_fsdp_memory *m);
void zt_fsdp_cuda_free(zt_fsdp *f);
#endif
#endif
