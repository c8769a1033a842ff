// zerotrain: one executable, one subcommand per job (train, pack, ...).
#include <stdio.h>
#include <string.h>

#include "cli/args.h"
#include "cli/commands.h"
#include "engine/cuda_module.h"

#ifndef ZT_VERSION
#define ZT_VERSION "dev"
#endif

typedef struct {
    const char *name;
    int (*fn)(int, char **);
    const char *help;
} zt_command;

static const zt_command commands[] = {
    {"train", zt_cmd_train, "train or fine-tune a Qwen3 model on a token dataset"},
    {"pack", zt_cmd_pack, "turn text or token ids into a dataset directory of uint32 blocks"},
    {"tokenize", zt_cmd_tokenize, "encode text to Qwen3 token ids, decode ids, time the tokenizer"},
    {"export", zt_cmd_export, "write a checkpoint's weights as a Hugging Face model (safetensors)"},
    {"inspect", zt_cmd_inspect, "show a checkpoint's step, config, tensors and verify its checksums"},
    {"preflight", zt_cmd_preflight, "the six-check gate before launch (data balance, disk, devices, network)"},
    {"triage", zt_cmd_triage, "classify GPU power/utilization logs: compute, comm, starvation, checkpoint, deadlock, idle"},
    {"calibrate", zt_cmd_calibrate, "derive triage power bands for another GPU model from healthy and idle samples"},
    {"watch", zt_cmd_watch, "watch a run directory from outside the job: complete, crashed or hung, and who is stuck"},
    {"plan", zt_cmd_plan, "predict per-GPU memory and step time of FSDP sharding choices on GPUs"},
    {"report", zt_cmd_report, "one self-contained HTML page of a run: curves, power picture, state, diagnosis"},
};

static void usage(FILE *out) {
    char fam[160];
    fprintf(out,
            "zerotrain %s: native FSDP/ZeRO-3 trainer for %s models\n\n"
            "usage: zerotrain <command> [options]\n       zerotrain <command> --help\n\ncommands:\n",
            ZT_VERSION, zt_family_titles(fam, sizeof fam, " and "));
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(out, "  %-12s %s\n", commands[i].name, commands[i].help);
    char mod[4200];
    if (zt_cuda_module_find(mod, sizeof mod))
        fprintf(out, "\nCUDA backend: %s (loaded for --device cuda, or auto on a host with an NVIDIA driver)\n", mod);
    else
        fprintf(out, "\nCUDA backend: not installed (no libzerotrain_cuda.so; CPU backend only; docs/cuda.md)\n");
}

int main(int argc, char **argv) {
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return argc < 2 ? 2 : 0;
    }
    if (!strcmp(argv[1], "--version")) {
        printf("zerotrain %s\n", ZT_VERSION);
        return 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(argv[1], commands[i].name)) return commands[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "zerotrain: error: unknown command '%s'\n\n", argv[1]);
    usage(stderr);
    return 2;
}
