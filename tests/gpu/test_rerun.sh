#!/usr/bin/env bash
# Unit test of tests/gpu/rerun.sh: the cases where run.sh localises a failure with a
# ZT_CUDA_SYNC=1 rerun. (The rerun used to happen only for exit codes other than 0/1/77,
# and every fatal CUDA path exited 1, so it never happened.)
set -u
. "$(dirname "$0")/rerun.sh"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
printf 'RESULT op=x ok=1\n12 passed, 0 failed\n' >"$T/full.log"
printf 'RESULT op=x ok=0\n11 passed, 1 failed\n' >"$T/failed.log"
printf 'RESULT op=x ok=1\nzerotrain: error: kernel rmsnorm failed\n' >"$T/died.log"
bad=0
expect() {  # expect yes|no RC LOG
    local want=$1 got=no
    needs_sync_rerun "$2" "$3" '^[0-9]+ passed, [0-9]+ failed' && got=yes
    if [ "$got" != "$want" ]; then echo "FAIL: rc $2, $(basename "$3"): rerun $got, want $want"; bad=1; else echo "ok: rc $2, $(basename "$3"): rerun $got"; fi
}
expect yes 4 "$T/died.log"     # fatal CUDA error (ZT_EXIT_CUDA)
expect yes 4 "$T/full.log"     # even if a summary was printed before the fatal call
expect yes 1 "$T/died.log"     # exit 1 without the summary: died inside
expect yes 134 "$T/died.log"   # abort
expect yes 2 "$T/missing.log"  # no log at all
expect no 1 "$T/failed.log"    # ran to the end and reported its own failures
expect no 0 "$T/full.log"
expect no 77 "$T/died.log"     # skipped
expect no 124 "$T/died.log"    # timed out
exit $bad
