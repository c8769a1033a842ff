// Subcommands of the zerotrain executable. Each takes the arguments after its
// name (argv[0] is the command name) and returns the process exit code.
#ifndef ZT_COMMANDS_H
#define ZT_COMMANDS_H
int zt_cmd_train(int argc, char **argv);
int zt_cmd_pack(int argc, char **argv);
int zt_cmd_tokenize(int argc, char **argv);
int zt_cmd_export(int argc, char **argv);
int zt_cmd_inspect(int argc, char **argv);
int zt_cmd_preflight(int argc, char **argv);
int zt_cmd_triage(int argc, char **argv);
int zt_cmd_calibrate(int argc, char **argv);
int zt_cmd_watch(int argc, char **argv);
int zt_cmd_plan(int argc, char **argv);
int zt_cmd_report(int argc, char **argv);

#include <stddef.h>
#include <stdint.h>

#include "model/config.h"
// The planner's memory per rank (ops/plan.c) for the preflight gate (train/preflight.h's
// zt_preflight_mem_fn): fp32 gathers on the cpu backend, bf16 on cuda.
double zt_cli_plan_memory(const zt_model_config *cfg, int world, int shard_group, int keep_gathered, int micro_batch,
                          int64_t seq_len, int cuda, char *what, size_t n);
#endif
