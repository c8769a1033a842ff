// Defaults of the power-sample tools, shared by their flag tables: `zerotrain triage`
// (cli/cmd_triage.c) and `zerotrain calibrate` (cli/cmd_calibrate.c) read samples
// alike; `zerotrain report` classifies with the same snapshot window.
#ifndef ZT_TRIAGE_DEFAULTS_H
#define ZT_TRIAGE_DEFAULTS_H
#define ZT_TRIAGE_DEF_WINDOW 1.0         // seconds: samples within +-0.5 s form one snapshot
#define ZT_TRIAGE_DEF_DMON_INTERVAL 1.0  // nvidia-smi dmon -d period for logs without -o T
#define ZT_TRIAGE_DEF_MIN_DEADLOCK 2     // snapshots in a deadlock stretch that set exit 4
#define ZT_CALIB_DEF_K 2.0               // calibrate: range half-width in sigmas
#endif
