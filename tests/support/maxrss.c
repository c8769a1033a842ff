// maxrss CMD [ARGS...]: run CMD, then print its peak resident set in KiB (getrusage of the
// child: ru_maxrss) on stderr as "maxrss_kib N"; exit with CMD's status. For the module
// tests (tests/cuda_module.cmake): what a process pays for the CUDA libraries.
#include <stdio.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: maxrss CMD [ARGS...]\n");
        return 2;
    }
    pid_t pid = fork();
    if (pid < 0) return perror("fork"), 2;
    if (pid == 0) {
        execvp(argv[1], argv + 1);
        perror(argv[1]);
        _exit(127);
    }
    int status = 0;
    struct rusage ru;
    if (wait4(pid, &status, 0, &ru) < 0) return perror("wait4"), 2;
    fprintf(stderr, "maxrss_kib %ld\n", ru.ru_maxrss);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}
