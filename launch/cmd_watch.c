// `zerotrain watch RUN`: the external watcher. Polls the run directory, prints one
// status line per interval, and on a final state (COMPLETE, CRASHED, HUNG, FAILED)
// writes RUN/watch.json, runs the --on-hang / --on-crash command and exits with the
// state's code. The rules live in launch/watch.c.
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "launch/args.h"
#include "launch/commands.h"
#include "launch/watch.h"
#include "runtime/common.h"

static void watch_usage(FILE *out) {
    fprintf(out,
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
            "            deadlock signature (busy GPUs at hang-band power; see zerotrain triage)\n"
            "  RUNNING / STARTING otherwise\n"
            "On HUNG, CRASHED and FAILED it names who is in which collective from the flight\n"
            "recorders (RUN/ranks/rank-N.flight), writes RUN/watch.json and runs the hook.\n"
            "\n"
            "options:\n"
            "  -i, --interval S        seconds between polls (default 10)\n"
            "      --stall-factor F    stall bound in median step times (default 10)\n"
            "      --min-stall S       smallest stall bound in seconds (default 600)\n"
            "      --alive-interval S  the trainer's --alive-interval (default 5)\n"
            "      --startup-grace S   bound before the first step / first tick (default 1800)\n"
            "      --power-samples N   consecutive deadlock snapshots that mean HUNG (default 2, 0: off)\n"
            "  -b, --bands FILE        band file for the power signature (default: built-in B300)\n"
            "      --on-hang CMD       run `/bin/sh -c CMD` on HUNG\n"
            "      --on-crash CMD      run `/bin/sh -c CMD` on CRASHED or FAILED\n"
            "                          (hooks get ZT_WATCH_STATE, ZT_RUN_DIR, ZT_WATCH_JSON)\n"
            "      --once              evaluate once and exit with the state's code\n"
            "  -q, --quiet             no status lines, only the final report\n"
            "  -h, --help              this text\n"
            "\n"
            "exit: 0 COMPLETE, 1 error, 2 usage, 3 CRASHED, 4 HUNG, 5 FAILED,\n"
            "      6 still STARTING/RUNNING (--once only), 7 STOPPED\n");
}

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
    static const struct option longopts[] = {
        {"interval", required_argument, 0, 'i'},   {"stall-factor", required_argument, 0, 1},
        {"min-stall", required_argument, 0, 2},    {"alive-interval", required_argument, 0, 3},
        {"startup-grace", required_argument, 0, 4}, {"power-samples", required_argument, 0, 5},
        {"bands", required_argument, 0, 'b'},      {"on-hang", required_argument, 0, 6},
        {"on-crash", required_argument, 0, 7},     {"once", no_argument, 0, 8},
        {"quiet", no_argument, 0, 'q'},            {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0},
    };
    zt_watch_opts o;
    zt_watch_opts_default(&o);
    double interval = 10;
    const char *on_hang = NULL, *on_crash = NULL, *bands = NULL;
    int once = 0, quiet = 0, c;
    int64_t v;
    optind = 1;
    while ((c = getopt_long(argc, argv, "i:b:qh", longopts, NULL)) != -1) {
        int bad = 0;
        switch (c) {
        case 'i': bad = zt_arg_f64("--interval", optarg, 0.01, 86400, &interval); break;
        case 1: bad = zt_arg_f64("--stall-factor", optarg, 1, 1e6, &o.stall_factor); break;
        case 2: bad = zt_arg_f64("--min-stall", optarg, 0, 1e9, &o.min_stall); break;
        case 3: bad = zt_arg_f64("--alive-interval", optarg, 0.05, 3600, &o.alive_interval); break;
        case 4: bad = zt_arg_f64("--startup-grace", optarg, 0, 1e9, &o.startup_grace); break;
        case 5:
            bad = zt_arg_i64("--power-samples", optarg, 0, 1000, &v);
            o.power_samples = (int)v;
            break;
        case 'b': bands = optarg; break;
        case 6: on_hang = optarg; break;
        case 7: on_crash = optarg; break;
        case 8: once = 1; break;
        case 'q': quiet = 1; break;
        case 'h': watch_usage(stdout); return 0;
        default: watch_usage(stderr); return 2;
        }
        if (bad) {
            fprintf(stderr, "zerotrain watch: error: %s\n", zt_errmsg());
            return 2;
        }
    }
    if (optind + 1 != argc) {
        fprintf(stderr, "zerotrain watch: error: %s\n\n", optind >= argc ? "no run directory given" : "more than one run directory given");
        watch_usage(stderr);
        return 2;
    }
    const char *run = argv[optind];
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
