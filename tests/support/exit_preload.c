// A program that has printed everything and then exits otherwise: LD_PRELOAD'ed by
// tests/support/mutate_exit.sh (through expect.cmake's ZT_EXPECT_PRELOAD) to show that each
// zt_expect_test fails when its program does. ZT_EXIT_PRELOAD_AS=N: the process exits with
// code N after its own exit handlers; =segv: it is killed by SIGSEGV there. Tests only.
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void exit_otherwise(void) {
    const char *as = getenv("ZT_EXIT_PRELOAD_AS");
    fflush(NULL);
    if (!as || !*as) return;
    if (!strcmp(as, "segv")) {
        signal(SIGSEGV, SIG_DFL);
        raise(SIGSEGV);
    }
    _exit(atoi(as));
}

// Registered first, so it runs last: after the program's own atexit handlers have printed.
__attribute__((constructor)) static void arm(void) { atexit(exit_otherwise); }
