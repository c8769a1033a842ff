// `zerotrain inspect CKPT`: what a checkpoint holds (step, epoch, data cursor, world
// size, run id, model config, every unit's tensors and datasets) and a full crc32c
// pass over every dataset. Exit 0 when every checksum matches, 1 otherwise.
#include <stdio.h>
#include <string.h>

#include "checkpoint/ckpt.h"
#include "cli/commands.h"
#include "cli/flags.h"
#include "base/common.h"

static const char synopsis[] =
            "usage: zerotrain inspect CKPT\n"
            "\n"
            "Prints a checkpoint's step, epoch and data cursor, world size at save, run id, model\n"
            "config, training settings, and per unit its tensors (Hugging Face names, shapes,\n"
            "offsets) and datasets (master, adam_m, adam_v: file byte range and crc32c status).\n"
            "Every crc32c chunk of every dataset is verified; the exit status is 1 if any fails.\n"
            "\n"
            "CKPT is a run directory (uses RUN/checkpoints/latest), a checkpoints directory, or a\n"
            "step directory (RUN/checkpoints/step-NNNNNNNN). A .partial directory is refused.\n";

// No flags but --help; the table keeps the parsing and the usage text like the other commands'.
static const zt_flag flags[] = {{.type = ZT_FLAG_SECTION, .help = "options:"}, {0}};

int zt_cmd_inspect(int argc, char **argv) {
    int first;
    // exit 1 on a usage error as before (not the table's 2): 1 is "not verified" here
    const int prc = zt_flags_parse_operands("inspect", flags, NULL, argc, argv, synopsis, NULL, &first);
    if (prc) return prc == 1 ? 0 : 1;
    if (argc - first != 1) {
        fprintf(stderr, "zerotrain: error: inspect needs exactly one CKPT (see zerotrain inspect --help)\n");
        return 1;
    }
    if (zt_ckpt_inspect(argv[first], stdout) != 0) {
        fflush(stdout);
        fprintf(stderr, "zerotrain: error: %s\n", zt_errmsg());
        return 1;
    }
    return 0;
}
