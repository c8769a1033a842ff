// `zerotrain report RUN`: one self-contained HTML page of a run directory's curves,
// state and diagnosis (launch/report.c).
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "launch/args.h"
#include "launch/commands.h"
#include "launch/report.h"
#include "runtime/common.h"

static void report_usage(FILE *out) {
    fprintf(out,
            "usage: zerotrain report [options] RUN\n"
            "\n"
            "Writes one self-contained HTML page (inline SVG and CSS: no script, nothing fetched\n"
            "from the network; open it in any browser, mail it, attach it to a ticket) for the run\n"
            "directory RUN, live or finished, from what the trainer writes there:\n"
            "  header    run id, model, world size, state (complete / running / hung / crashed /\n"
            "            failed / stopped, from complete.json, heartbeat.json, ranks/*.flight.json\n"
            "            and the watcher's watch.json), steps done / total, last loss and eval loss,\n"
            "            GPU-hours; for a hung or failed run the watcher's verdict and the flight\n"
            "            recorders' diagnosis (who is in which collective)\n"
            "  power     board power per GPU against time (ranks/rank-N.power.csv) over the triage\n"
            "            bands, the classified state (compute, communication, starvation,\n"
            "            checkpoint, deadlock, idle) as a coloured strip under it, checkpoint saves\n"
            "            marked: the same classifier as `zerotrain triage`\n"
            "  curves    train and eval loss against step and against tokens; learning rate; grad\n"
            "            norm; tok/s per rank; compute vs comm-wait share per step; progress with\n"
            "            the checkpoint saves on the elapsed-time axis; GPU-hours spent, at risk and\n"
            "            (while running) projected to the last step\n"
            "Pieces that are not there yet (no power samples on the CPU, no --eval-data, a live\n"
            "run without complete.json) are listed on the page. Run it again to refresh a live\n"
            "run's page. TensorBoard reads the same run: tensorboard --logdir RUN/tb\n"
            "\n"
            "options:\n"
            "  -o, --output FILE   the page (default RUN/report.html; written atomically)\n"
            "  -b, --bands FILE    triage band file for the power picture (default: the built-in\n"
            "                      B300 calibration, launch/bands-b300.json)\n"
            "  -w, --window S      triage snapshot window in seconds (default 1.0)\n"
            "  -q, --quiet         print nothing on success\n"
            "  -h, --help          this text\n"
            "\n"
            "exit: 0 written, 1 RUN is not a run directory (the message names what is missing) or\n"
            "      the page cannot be written, 2 usage\n");
}

int zt_cmd_report(int argc, char **argv) {
    static const struct option longopts[] = {
        {"output", required_argument, 0, 'o'}, {"bands", required_argument, 0, 'b'},
        {"window", required_argument, 0, 'w'}, {"quiet", no_argument, 0, 'q'},
        {"help", no_argument, 0, 'h'},         {0, 0, 0, 0},
    };
    const char *out = NULL, *bands_path = NULL;
    int quiet = 0, c;
    zt_report_opts o = {.window = 1.0};
    optind = 1;
    while ((c = getopt_long(argc, argv, "o:b:w:qh", longopts, NULL)) != -1) {
        switch (c) {
        case 'o': out = optarg; break;
        case 'b': bands_path = optarg; break;
        case 'w':
            if (zt_arg_f64("--window", optarg, 1e-3, 3600, &o.window)) {
                fprintf(stderr, "zerotrain report: error: %s\n", zt_errmsg());
                return 2;
            }
            break;
        case 'q': quiet = 1; break;
        case 'h': report_usage(stdout); return 0;
        default: report_usage(stderr); return 2;
        }
    }
    if (argc - optind != 1) {
        fprintf(stderr, "zerotrain report: error: %s\n\n",
                optind >= argc ? "no run directory given" : "give one run directory");
        report_usage(stderr);
        return 2;
    }
    const char *run = argv[optind];
    if (bands_path ? zt_bands_load(&o.bands, bands_path) : (zt_bands_b300(&o.bands), 0)) {
        fprintf(stderr, "zerotrain report: error: %s\n", zt_errmsg());
        return 1;
    }
    o.bands_name = bands_path ? bands_path : "built in";
    char path[4200];
    if (!out) {
        snprintf(path, sizeof path, "%s/report.html", run);
        out = path;
    }
    char summary[2600];
    if (zt_report_write(run, out, &o, summary, sizeof summary) != 0) {
        fprintf(stderr, "zerotrain report: error: %s\n", zt_errmsg());
        return 1;
    }
    if (!quiet) printf("report: %s: %s\n", out, summary);
    return 0;
}
