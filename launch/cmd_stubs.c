// Temporary stubs so the skeleton links; each is replaced by its real command file.
#include <stdio.h>
#include "launch/commands.h"
int zt_cmd_train(int argc, char **argv) { fprintf(stderr, "zerotrain train: not built yet\n"); return 1; }
