// `zerotrain report RUN`: one self-contained HTML page of a run directory's curves,
// state and diagnosis (ops/report.c).
#include <stdio.h>
#include <string.h>

#include "cli/commands.h"
#include "cli/flags.h"
#include "ops/report.h"
#include "ops/triage_defaults.h"
#include "base/common.h"

static const char synopsis[] =
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
            "run without complete.json) are listed on the page. A damaged line of a JSONL file (a\n"
            "NUL byte, not JSON, not an object) is skipped, the rest drawn, and said on the page\n"
            "and on stderr. Every string from the run's files is HTML-escaped. Run it again to\n"
            "refresh a live run's page. TensorBoard reads the same run: tensorboard --logdir RUN/tb\n";
static const char epilog[] =
            "\n"
            "exit: 0 written, 1 RUN is not a run directory (the message names what is missing) or\n"
            "      the page cannot be written, 2 usage\n";

typedef struct {
    const char *output, *bands;
    double window;
    int quiet;
} report_flags;

#define T report_flags
static const zt_flag flags[] = {
    {.type = ZT_FLAG_SECTION, .help = "options:"},
    {"output", ZT_FLAG_STR, ZT_AT_STR(T, output), "FILE", .letter = 'o',
     .help = "the page (default RUN/report.html; written atomically)"},
    {"bands", ZT_FLAG_STR, ZT_AT_STR(T, bands), "FILE", .letter = 'b',
     .help = "triage band file for the power picture (default: the built-in\nB300 calibration, ops/bands-b300.json)"},
    {"window", ZT_FLAG_F64, ZT_AT_F64(T, window), "S", .fmin = 1e-3, .fmax = 3600, .def = ZT_TRIAGE_DEF_WINDOW, .letter = 'w',
     .help = "triage snapshot window in seconds (default {default})"},
    {"quiet", ZT_FLAG_SET, ZT_AT_INT(T, quiet), .letter = 'q',
     .help = "print nothing on success (the page still lists the damaged lines\nof the run's files it skipped)"},
    {0}};
#undef T

int zt_cmd_report(int argc, char **argv) {
    report_flags f;
    int first;
    const int prc = zt_flags_parse_operands("report", flags, &f, argc, argv, synopsis, epilog, &first);
    if (prc) return prc == 1 ? 0 : 2;
    const char *out = f.output, *bands_path = f.bands;
    const int quiet = f.quiet;
    zt_report_opts o = {.window = f.window, .warn = quiet ? NULL : stderr};
    if (argc - first != 1) {
        fprintf(stderr, "zerotrain report: error: %s\n\n",
                first >= argc ? "no run directory given" : "give one run directory");
        zt_flags_usage(stderr, flags, synopsis, epilog);
        return 2;
    }
    const char *run = argv[first];
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
