// Test helper: holds a TCP port (bound and listening) while it runs a command,
// so the preflight rendezvous check can be shown a busy port.
//   hold_port PORT COMMAND [ARGS...]   -> exit status of COMMAND
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: hold_port PORT COMMAND [ARGS...]\n");
        return 2;
    }
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[1])),
                            .sin_addr.s_addr = htonl(INADDR_ANY)};
    if (s < 0 || bind(s, (struct sockaddr *)&a, sizeof a) != 0 || listen(s, 1) != 0) {
        perror("hold_port: bind");
        return 2;
    }
    pid_t pid = fork();
    if (pid == 0) {
        close(s);
        execvp(argv[2], argv + 2);
        perror("hold_port: exec");
        _exit(127);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    close(s);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
}
