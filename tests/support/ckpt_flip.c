// Single-byte-flip sweep of a checkpoint's metadata: for every offset in [LO, HI) of
// CKPT_DIR/ckpt.h5, flip all 8 bits of that byte, open the checkpoint as `zerotrain
// inspect` does (zt_ckpt_inspect: header, model config, units) in a child process, and
// restore the byte. Each flip must end in one of two ways: harmless (the checkpoint still
// reads) or detected (a clean error naming the cause) — never a crash (a signal). A damaged
// checkpoint once crashed inspect and export with a double free (146 of 2,031 flips).
//   ckpt_flip CKPT_DIR LO HI
// Prints the counts and a few of the causes; exit 1 on any crash.
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "checkpoint/ckpt.h"
#include "base/common.h"

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: ckpt_flip CKPT_DIR LO HI\n");
        return 2;
    }
    const char *dir = argv[1];
    const long lo = atol(argv[2]);
    char file[4200];
    snprintf(file, sizeof file, "%s/%s", dir, ZT_CKPT_FILE);
    struct stat st;
    if (stat(file, &st) != 0) {
        perror(file);
        return 2;
    }
    long hi = atol(argv[3]);
    if (hi > st.st_size) hi = st.st_size;
    int fd = open(file, O_RDWR);
    if (fd < 0) {
        perror(file);
        return 2;
    }
    long harmless = 0, detected = 0, crashed = 0;
    char examples[6][300];
    int nex = 0;
    for (long off = lo; off < hi; off++) {
        unsigned char b;
        if (pread(fd, &b, 1, off) != 1) break;
        const unsigned char f = (unsigned char)~b;
        if (pwrite(fd, &f, 1, off) != 1) break;
        int pfd[2];
        if (pipe(pfd) != 0) return 2;
        fflush(stdout);
        pid_t pid = fork();
        if (pid == 0) {
            close(pfd[0]);
            int dn = open("/dev/null", O_WRONLY);  // HDF5's and glibc's own noise stays out of the log
            if (dn >= 0) dup2(dn, 2);
            FILE *null = fopen("/dev/null", "w");
            int rc = zt_ckpt_inspect(dir, null);
            if (rc != 0) {
                const char *m = zt_errmsg();
                if (write(pfd[1], m, strlen(m) < 299 ? strlen(m) : 299) < 0) _exit(3);
            }
            _exit(rc == 0 ? 0 : 1);
        }
        close(pfd[1]);
        char msg[300] = "";
        ssize_t k = read(pfd[0], msg, sizeof msg - 1);
        msg[k > 0 ? k : 0] = 0;
        close(pfd[0]);
        int status = 0;
        waitpid(pid, &status, 0);
        if (WIFSIGNALED(status)) {
            crashed++;
            printf("CRASH: offset %ld: signal %d\n", off, WTERMSIG(status));
        } else if (WEXITSTATUS(status) == 0) {
            harmless++;
        } else {
            detected++;
            if (!msg[0]) {
                crashed++;  // an error without a cause counts as a failure too
                printf("FAIL: offset %ld: refused without a message\n", off);
            } else if (nex < 6 && (nex == 0 || !strstr(examples[nex - 1], strstr(msg, ".h5: ") ? strstr(msg, ".h5: ") : msg))) {
                snprintf(examples[nex++], sizeof examples[0], "offset %ld: %s", off, msg);
            }
        }
        if (pwrite(fd, &b, 1, off) != 1) break;
    }
    close(fd);
    printf("ckpt_flip %s [%ld, %ld): %ld flips: %ld harmless, %ld detected with a cause, %ld crashed\n", file, lo, hi,
           hi - lo, harmless, detected, crashed);
    for (int i = 0; i < nex; i++) printf("  e.g. %s\n", examples[i]);
    return crashed ? 1 : 0;
}
