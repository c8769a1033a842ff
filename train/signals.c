// Stop signals (train/signals.h).
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "train/signals.h"

// SIGUSR1 / SIGTERM: checkpoint at the next step boundary and exit 0. The handler only
// sets a flag; the ranks agree on it with the step's all-reduce, so a signal to any one
// rank stops all of them at the same step.
static volatile sig_atomic_t g_stop_signal = 0;
// Outside the training loop (start-up: loading the module, checking the data, reading the
// checkpoint) there is nothing to save, so a stop request ends the process at once, even
// from inside a blocking call.
static volatile sig_atomic_t g_stop_exits = 0;
static void on_stop_signal(int sig) {
    g_stop_signal = sig;
    if (g_stop_exits) {
        static const char msg[] = "zerotrain: a stop signal (SIGUSR1/SIGTERM) arrived before training started; "
                                  "exiting, nothing to save\n";
        (void)!write(STDERR_FILENO, msg, sizeof msg - 1);
        _exit(128 + sig);
    }
}

int zt_signals_stop(void) { return g_stop_signal; }
void zt_signals_exit_on_stop(int on) { g_stop_exits = on; }

void zt_signals_install(void) {
    g_stop_signal = 0;
    g_stop_exits = 1;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGUSR1, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}
