#!/bin/sh
# A host wait outside the comm layer that never ends: rank 1 opens a watched region
# (zt_comm_watch_begin) and blocks in it, either sleeping (a d2h copy behind a hung
# collective) or in an MPI_Barrier nobody else enters (HDF5's barrier inside a
# collective checkpoint write). Rank 1's watchdog thread must report it and abort the
# job with code 3 about TIMEOUT s after the region began, plus the 1 s grace.
# usage: comm_watchdog.sh WORK MODE(sleep|mpi) LAUNCHER... TEST_COMM_WATCHDOG
set -u
work=$1
mode=$2
shift 2
rm -rf "$work"
mkdir -p "$work"
run=$work/run
timeout=2

fail() {
    echo "comm_watchdog: FAIL: $*"
    exit 1
}

if [ "$mode" = mpi ]; then label='checkpoint save (HDF5 collective write)'; else label='simulated hang in a d2h copy'; fi

start=$(date +%s)
timeout -k 5 60 "$@" --mpi-hang "$mode" --run-dir "$run" --timeout "$timeout" >"$work/stdout" 2>"$work/stderr"
rc=$?
elapsed=$(($(date +%s) - start))
cat "$work/stdout" "$work/stderr"
echo "comm_watchdog: exit $rc after $elapsed s"

[ "$rc" -eq 124 ] || [ "$rc" -eq 137 ] && fail "the job hung until the outer timeout (60 s): the watchdog did not fire"
grep -q "did not fire" "$work/stdout" && fail "the watched region ended: rank 1 was not stopped"
[ "$rc" -ne 0 ] || fail "the job exited 0; the watchdog must abort it"
[ "$rc" -eq 3 ] || fail "exit code $rc, expected the abort code 3 (MPI_Abort(MPI_COMM_WORLD, 3))"
# launch (~1 s) + 2 s deadline + 0.1 s period + 1 s grace; the peers' own deadline is 6 s
[ "$elapsed" -le 12 ] || fail "abort took $elapsed s, expected about 2 s deadline + 1 s grace + launch"

err=$work/stderr
line=$(grep "^zerotrain: rank 1: collective deadline exceeded after $timeout s: stuck in \"$label\" (host wait outside the comm layer), started " "$err") ||
    fail "no watchdog report from rank 1 naming \"$label\" and the host wait"
echo "$line" | grep -Eq "started [0-9.]+ s ago at 20[0-9-]+T[0-9:.]+Z; step 12 epoch 0 micro 1\$" ||
    fail "the report line lacks the start time or the step context: $line"
# Fired on time: the region was between the deadline and the deadline + a few periods old.
ago=$(echo "$line" | sed -n 's/.*started \([0-9.]*\) s ago.*/\1/p')
awk -v a="$ago" -v t="$timeout" 'BEGIN { exit !(a >= t && a <= t + 0.8) }' ||
    fail "the watchdog fired $ago s after the region began, expected $timeout..$timeout+0.8 s"
grep -q "^zerotrain: rank 1: a host wait between zt_comm_watch_begin and zt_comm_watch_end gets the collective deadline (timeout_s, $timeout s)" "$err" ||
    fail "the report does not name the rule (timeout_s)"
grep -q '^zerotrain: rank 1: recently done: allgather("unit 3 params")' "$err" || fail "no recently-done collectives"
grep -q "^zerotrain: rank 1: what every rank's flight recorder says:" "$err" || fail "no peers' flight-recorder summary"
grep -q '^zerotrain: rank 1: rank 0: in barrier("after the d2h copy")' "$err" ||
    fail "the summary does not show rank 0 waiting in barrier(\"after the d2h copy\")"
grep -q "^zerotrain: rank 1: aborting the job in 1 s (code 3)" "$err" || fail "no abort line"
grep -q "^zerotrain: rank 0: collective deadline exceeded" "$err" &&
    fail "rank 0's own deadline fired first: the report checked must be rank 1's watchdog"

dump=$run/ranks/rank-00001.flight.json
[ -s "$dump" ] || fail "no flight dump $dump"
if command -v python3 >/dev/null 2>&1; then
    python3 -m json.tool "$dump" >/dev/null || fail "$dump is not valid JSON"
fi
grep -q '"status": "aborted"' "$dump" || fail "$dump does not say aborted"
grep -q "in host wait \\\\\"$label\\\\\" (outside the comm layer)" "$dump" || fail "$dump gives no host-wait reason"
grep -q '^zerotrain: rank 1: rank 1: no collective in flight (aborted)' "$err" ||
    fail "rank 1's ring is not marked aborted in the summary"
echo "comm_watchdog: ok (mode $mode, fired ${ago} s into the region, exit $rc after $elapsed s)"
