// The stop signals (train/signals.c): SIGUSR1 and SIGTERM checkpoint at the next step
// boundary once training runs; before that there is nothing to save and the process exits.
// defines: zt_signals_install, zt_signals_stop, zt_signals_exit_on_stop
#ifndef ZT_TRAIN_SIGNALS_H
#define ZT_TRAIN_SIGNALS_H

void zt_signals_install(void);       // clears any earlier one; a stop signal then exits the process
int zt_signals_stop(void);           // the stop signal that arrived (0: none)
void zt_signals_exit_on_stop(int on);  // 1: a stop signal ends the process at once; 0: it is only noted
#endif
