// Subcommands of the zerotrain executable. Each takes the arguments after its
// name (argv[0] is the command name) and returns the process exit code.
#ifndef ZT_COMMANDS_H
#define ZT_COMMANDS_H
int zt_cmd_train(int argc, char **argv);
int zt_cmd_pack(int argc, char **argv);
int zt_cmd_tokenize(int argc, char **argv);
int zt_cmd_export(int argc, char **argv);
int zt_cmd_inspect(int argc, char **argv);
int zt_cmd_preflight(int argc, char **argv);
int zt_cmd_triage(int argc, char **argv);
int zt_cmd_calibrate(int argc, char **argv);
int zt_cmd_watch(int argc, char **argv);
int zt_cmd_plan(int argc, char **argv);
int zt_cmd_report(int argc, char **argv);
#endif
