// The flag tables of `train` and `preflight`, visible to each other (a --config file may hold
// both commands' keys: each reads its own and leaves the other's, cli/flags.h config_also) and
// to the tests that walk them (tests/unit/test_flags_config.c).
// defines: zt_train_flags, zt_preflight_flags
#ifndef ZT_CLI_TABLES_H
#define ZT_CLI_TABLES_H
#include "cli/flags.h"

extern const zt_flag zt_train_flags[];      // cli/cmd_train.c
extern const zt_flag zt_preflight_flags[];  // cli/cmd_preflight.c
#endif
