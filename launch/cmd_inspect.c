// `zerotrain inspect CKPT`: what a checkpoint holds (step, epoch, data cursor, world
// size, run id, model config, every unit's tensors and datasets) and a full crc32c
// pass over every dataset. Exit 0 when every checksum matches, 1 otherwise.
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "checkpoint/ckpt.h"
#include "launch/commands.h"
#include "runtime/common.h"

static void inspect_usage(FILE *out) {
    fprintf(out,
            "usage: zerotrain inspect CKPT\n"
            "\n"
            "Prints a checkpoint's step, epoch and data cursor, world size at save, run id, model\n"
            "config, training settings, and per unit its tensors (Hugging Face names, shapes,\n"
            "offsets) and datasets (master, adam_m, adam_v: file byte range and crc32c status).\n"
            "Every crc32c chunk of every dataset is verified; the exit status is 1 if any fails.\n"
            "\n"
            "CKPT is a run directory (uses RUN/checkpoints/latest), a checkpoints directory, or a\n"
            "step directory (RUN/checkpoints/step-NNNNNNNN). A .partial directory is refused.\n");
}

int zt_cmd_inspect(int argc, char **argv) {
    static const struct option longopts[] = {{"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        if (c == 'h') {
            inspect_usage(stdout);
            return 0;
        }
        fprintf(stderr, "(see zerotrain inspect --help)\n");
        return 1;
    }
    if (argc - optind != 1) {
        fprintf(stderr, "zerotrain: error: inspect needs exactly one CKPT (see zerotrain inspect --help)\n");
        return 1;
    }
    if (zt_ckpt_inspect(argv[optind], stdout) != 0) {
        fflush(stdout);
        fprintf(stderr, "zerotrain: error: %s\n", zt_errmsg());
        return 1;
    }
    return 0;
}
