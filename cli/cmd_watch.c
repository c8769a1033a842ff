// `zerotrain watch RUN`: the external watcher. Polls the run directory, prints one
// status line per interval, and on a final state (COMPLETE, CRASHED, HUNG, FAILED)
// writes RUN/watch.json, runs the --on-hang / --on-crash command and exits with the
// state's code. The rules live in ops/watch.c.
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli/commands.h"
#include "cli/flags.h"
#include "ops/watch.h"
#include "base/common.h"

static const char synopsis[] =
            "usage: zerotrain watch RUN [options]\n"
            "\n"
            "Watches a run directory from outside the job (any machine that sees RUN) and tells\n"
            "the outcome apart:\n"
            "  COMPLETE  RUN/complete.json exists (rank 0 writes it after everything durable)\n"
            "  FAILED    heartbeat.json or a rank's tick says \"failed\" (the trainer reported an error)\n"
            "  STOPPED   heartbeat.json says \"stopped\": SIGUSR1/SIGTERM made the job checkpoint and exit\n"
            "            (continue with train --resume)\n"
            "  CRASHED   a rank's liveness tick (RUN/ranks/rank-N.alive) has not changed for\n"
            "            max(3 x --alive-interval, 15 s), and no complete.json\n"
            "  HUNG      every tick fresh, but heartbeat.json's step has not advanced for\n"
            "            max(--min-stall, --stall-factor x median recent step time), or the last\n"
            "            --power-samples power snapshots (RUN/ranks/*.power.csv) all show the\n"
            "            deadlock signature (busy GPUs at hang-band power; see zerotrain triage); or\n"
            "            heartbeat.json says \"aborted\": a rank's collective deadline caught the hang\n"
            "            and took the job down (exit 3), naming the ranks that had stopped ticking\n"
            "  RUNNING / STARTING otherwise\n"
            "On HUNG, CRASHED and FAILED it names who is in which collective from the flight\n"
            "recorders (RUN/ranks/rank-N.flight), writes RUN/watch.json and runs the hook.\n";
static const char epilog[] =
            "\n"
            "exit: 0 COMPLETE, 1 error, 2 usage, 3 CRASHED, 4 HUNG, 5 FAILED,\n"
            "      6 still STARTING/RUNNING (--once only), 7 STOPPED\n";

typedef struct {
    zt_watch_opts o;  // the rules' bounds, set in place
    double interval;
    const char *bands, *on_hang, *on_crash;
    int once, quiet;
} watch_flags;

#define T watch_flags
static const zt_flag flags[] = {
    {.type = ZT_FLAG_SECTION, .help = "options:"},
    {"interval", ZT_FLAG_F64, ZT_AT_F64(T, interval), "S", .fmin = 0.01, .fmax = 86400, .def = ZT_WATCH_DEF_INTERVAL,
     .letter = 'i', .help = "seconds between polls (default {default})"},
    {"stall-factor", ZT_FLAG_F64, ZT_AT_F64(T, o.stall_factor), "F", .fmin = 1, .fmax = 1e6,
     .def = ZT_WATCH_DEF_STALL_FACTOR, .help = "stall bound in median step times (default {default})"},
    {"min-stall", ZT_FLAG_F64, ZT_AT_F64(T, o.min_stall), "S", .fmin = 0, .fmax = 1e9, .def = ZT_WATCH_DEF_MIN_STALL,
     .help = "smallest stall bound in seconds (default {default})"},
    {"alive-interval", ZT_FLAG_F64, ZT_AT_F64(T, o.alive_interval), "S", .fmin = 0.05, .fmax = 3600,
     .def = ZT_DEF_ALIVE_INTERVAL, .help = "the trainer's --alive-interval (default {default})"},
    {"startup-grace", ZT_FLAG_F64, ZT_AT_F64(T, o.startup_grace), "S", .fmin = 0, .fmax = 1e9,
     .def = ZT_WATCH_DEF_STARTUP_GRACE, .help = "bound before the first step / first tick (default {default})"},
    {"power-samples", ZT_FLAG_INT, ZT_AT_INT(T, o.power_samples), "N", 0, 1000, .def = ZT_WATCH_DEF_POWER_SAMPLES,
     .help = "consecutive deadlock snapshots that mean HUNG (default {default}, 0: off)"},
    {"bands", ZT_FLAG_STR, ZT_AT_STR(T, bands), "FILE", .letter = 'b',
     .help = "band file for the power signature (default: built-in B300)"},
    {"on-hang", ZT_FLAG_STR, ZT_AT_STR(T, on_hang), "CMD", .help = "run `/bin/sh -c CMD` on HUNG"},
    {"on-crash", ZT_FLAG_STR, ZT_AT_STR(T, on_crash), "CMD",
     .help = "run `/bin/sh -c CMD` on CRASHED or FAILED\n(hooks get ZT_WATCH_STATE, ZT_RUN_DIR, ZT_WATCH_JSON)"},
    {"once", ZT_FLAG_SET, ZT_AT_INT(T, once), .help = "evaluate once and exit with the state's code"},
    {"quiet", ZT_FLAG_SET, ZT_AT_INT(T, quiet), .letter = 'q', .help = "no status lines, only the final report"},
    {0}};
#undef T

static const char *clock_str(double t, char *buf, size_t n) {
    time_t s = (time_t)t;
    struct tm tm;
    localtime_r(&s, &tm);
    strftime(buf, n, "%H:%M:%S", &tm);
    return buf;
}

static int run_hook(const char *cmd, const zt_watch *w) {
    char json[4200];
    snprintf(json, sizeof json, "%s/watch.json", w->run_dir);
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "zerotrain watch: error: cannot fork for the hook: %m\n");
        return -1;
    }
    if (pid == 0) {
        setenv("ZT_WATCH_STATE", zt_watch_state_name(w->state), 1);
        setenv("ZT_RUN_DIR", w->run_dir, 1);
        setenv("ZT_WATCH_JSON", json, 1);
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    int st;
    while (waitpid(pid, &st, 0) < 0) {
    }
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

int zt_cmd_watch(int argc, char **argv) {
    watch_flags f;
    zt_watch_opts_default(&f.o);  // the bands and every field the table does not set
    int first;
    const int prc = zt_flags_parse_operands("watch", flags, &f, argc, argv, synopsis, epilog, &first);
    if (prc) return prc == 1 ? 0 : 2;
    zt_watch_opts o = f.o;
    const double interval = f.interval;
    const char *on_hang = f.on_hang, *on_crash = f.on_crash, *bands = f.bands;
    const int once = f.once, quiet = f.quiet;
    if (first + 1 != argc) {
        fprintf(stderr, "zerotrain watch: error: %s\n\n",
                first >= argc ? "no run directory given" : "more than one run directory given");
        zt_flags_usage(stderr, flags, synopsis, epilog);
        return 2;
    }
    const char *run = argv[first];
    // In a loop the run directory may not exist yet (the launcher starts the watcher
    // with the job); it is waited for like any other start.
    if (once) {
        struct stat rst;
        const char *why = NULL;
        if (stat(run, &rst) != 0) why = strerror(errno);
        else if (!S_ISDIR(rst.st_mode)) why = "is not a directory (give the run directory, not a file in it)";
        else if (access(run, R_OK | X_OK) != 0) why = strerror(errno);
        if (why) {
            fprintf(stderr, "zerotrain watch: error: %s: cannot read the run directory: %s\n", run, why);
            return 1;
        }
    }
    if (bands && zt_bands_load(&o.bands, bands) < 0) {
        fprintf(stderr, "zerotrain watch: error: %s\n", zt_errmsg());
        return 1;
    }
    zt_watch w;
    zt_watch_init(&w, run, &o);
    char line[1024], t[16], lastwarn[1024] = "";
    for (;;) {
        double now = zt_wall_now();
        zt_watch_state st = zt_watch_poll(&w, now);
        if (w.warnings[0] && strcmp(w.warnings, lastwarn) != 0) fprintf(stderr, "zerotrain watch: warning: %s\n", w.warnings);
        snprintf(lastwarn, sizeof lastwarn, "%s", w.warnings);
        if (zt_watch_state_final(st)) {
            if (st != ZT_WS_COMPLETE) zt_watch_diagnose(&w, now);
            printf("[%s] %s: %s\n", clock_str(now, t, sizeof t), zt_watch_state_name(st), w.reason);
            if (st != ZT_WS_COMPLETE) printf("  diagnosis: %s\n%s", w.diagnosis, w.details ? w.details : "");
            if (zt_watch_write_json(&w, now) < 0)
                fprintf(stderr, "zerotrain watch: warning: cannot write %s/watch.json: %s\n", w.run_dir, zt_errmsg());
            else
                printf("  wrote %s/watch.json\n", w.run_dir);
            const char *hook = st == ZT_WS_HUNG ? on_hang : (st == ZT_WS_CRASHED || st == ZT_WS_FAILED) ? on_crash : NULL;
            // A job whose own collective deadline fired is already taking itself down (MPI_Abort, exit
            // 3, after a short grace): killing it now would put the launcher's exit code in place of
            // the job's, and it needs no help to end.
            if (hook && st == ZT_WS_HUNG && w.hb.have && !strcmp(w.hb.state, "aborted")) {
                printf("  not running --on-hang: the job's own deadline is aborting it (exit code 3)\n");
                hook = NULL;
            }
            if (hook) {
                printf("  running %s: %s\n", st == ZT_WS_HUNG ? "--on-hang" : "--on-crash", hook);
                int hrc = run_hook(hook, &w);
                printf("  hook exited with %d\n", hrc);
            }
            fflush(stdout);
            int rc = zt_watch_exit_code(st);
            zt_watch_free(&w);
            return rc;
        }
        if (!quiet || once) {
            zt_watch_status_line(&w, now, line, sizeof line);
            printf("[%s] %s\n", clock_str(now, t, sizeof t), line);
            fflush(stdout);
        }
        if (once) {
            zt_watch_free(&w);
            return ZT_WATCH_EXIT_RUNNING;
        }
        double until = zt_wall_now() + interval;
        for (double left; (left = until - zt_wall_now()) > 0;) {
            struct timespec ts = {(time_t)left, (long)((left - floor(left)) * 1e9)};
            nanosleep(&ts, NULL);
        }
    }
}
