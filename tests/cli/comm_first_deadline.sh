#!/usr/bin/env bash
# The start-up deadline as given, also when shorter than the steady-state one (issue 35: it
# was raised to --collective-timeout, so --first-collective-timeout could not shorten it).
# Rank N-1 sleeps 6 s before the first (warm-up) barrier; the first-step deadline is 2 s and
# the steady-state one 30 s: every rank must abort inside the warm-up barrier after ~2 s.
#   comm_first_deadline.sh WORK LAUNCHER... TEST_COMM
set -u
work=$1
shift
rm -rf "$work" && mkdir -p "$work"
fail() { echo "comm_first_deadline: FAIL: $*"; exit 1; }
start=$(date +%s)
timeout -k 5 90 "$@" --deadline --run-dir "$work/run" --timeout 30 --first-timeout 2 --warmup-sleep 6 \
    >"$work/stdout" 2>"$work/stderr"
rc=$?
elapsed=$(($(date +%s) - start))
cat "$work/stdout" "$work/stderr"
echo "comm_first_deadline: exit $rc after $elapsed s"
[ "$rc" -ne 0 ] || fail "the job exited 0; the first-step deadline must abort it"
[ "$rc" -ne 124 ] || fail "the job hung"
grep -Eq "collective deadline exceeded after 2 s: stuck in barrier\(\"warm-up\"\)" "$work/stderr" ||
    fail "no rank names the warm-up barrier with the 2 s first-step deadline"
[ "$elapsed" -le 15 ] || fail "abort took $elapsed s: the 30 s steady-state deadline was applied before the first step"
echo "comm_first_deadline: ok (abort after $elapsed s inside the warm-up barrier)"
