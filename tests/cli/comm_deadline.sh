#!/bin/sh
# The field deadlock, reproduced: rank N-1 skips a reduce-scatter and waits in a
# barrier. Every rank must abort (non-zero exit) within the deadline, name the
# collective it was stuck in, and leave its flight recorder in RUN/ranks/.
# usage: comm_deadline.sh WORK NPROCS LAUNCHER... TEST_COMM   (e.g. mpirun ... -n 3 test_comm)
set -u
work=$1
np=$2
shift 2
for exe; do :; done  # the last argument is the test program
last=$((np - 1))
rm -rf "$work"
mkdir -p "$work"
run=$work/run

fail() {
    echo "comm_deadline: FAIL: $*"
    exit 1
}

start=$(date +%s)
# timeout 2 s once warm; the warm-up barrier waits 3 s on rank N-1, inside the 30 s
# first-step allowance. The outer timeout catches a real hang.
timeout -k 5 60 "$@" --deadline --run-dir "$run" --timeout 2 --first-timeout 30 --warmup-sleep 3 \
    >"$work/stdout" 2>"$work/stderr"
rc=$?
elapsed=$(($(date +%s) - start))
cat "$work/stdout" "$work/stderr"
echo "comm_deadline: exit $rc after $elapsed s"

[ "$rc" -eq 124 ] || [ "$rc" -eq 137 ] && fail "the job hung until the outer timeout (60 s)"
[ "$rc" -ne 0 ] || fail "the job exited 0; the deadline must abort it"
[ "$elapsed" -le 20 ] || fail "abort took $elapsed s, expected about 3 s warm-up + 2 s deadline + 1 s grace"

err=$work/stderr
# The report's exact shape, from at least one rank (the first to abort takes the others
# down, so a slow rank may not get to print its own).
ts='seq [0-9]*, [0-9.]* [KMG]*i*B, started [0-9.]* s ago at 20[0-9-]*T[0-9:.]*Z; step 3850 epoch 0 micro 3$'
grep -Eq "^zerotrain: rank [0-9]+: collective deadline exceeded after 2 s: stuck in (reduce_scatter\(\"unit 17 grads\"\)|barrier\(\"epoch-end save\"\)) $ts" "$err" ||
    fail "no deadline report in the expected format"
# Both sides of the mismatch are named: by the stuck rank itself or, from the flight
# recorders, by whichever rank reported.
grep -Eq "^zerotrain: rank $last: collective deadline exceeded after 2 s: stuck in barrier\(\"epoch-end save\"\)|^zerotrain: rank [0-9]+: rank $last: in barrier\(\"epoch-end save\"\)" "$err" ||
    fail "rank $last is not reported stuck in barrier(\"epoch-end save\")"
grep -Eq "^zerotrain: rank [0-9]+: (collective deadline exceeded after 2 s: stuck in|rank [0-9]+: in) reduce_scatter\(\"unit 17 grads\"\)" "$err" ||
    fail "no rank is reported stuck in reduce_scatter(\"unit 17 grads\")"
grep -q 'stuck in barrier("warm-up")' "$err" && fail "the first-step allowance did not hold for the warm-up barrier"
grep -q "mismatch: the ranks are not all in the same collective" "$err" || fail "no mismatch line from the peers' flight recorders"
grep -q "1 rank in barrier(\"epoch-end save\") seq [0-9]*: $last\$" "$err" || fail "the summary does not single out rank $last"

r=0
while [ "$r" -lt "$np" ]; do
    f=$(printf '%s/ranks/rank-%05d.flight' "$run" "$r")
    [ -s "$f" ] || fail "missing flight recorder $f"
    r=$((r + 1))
done
njson=0
for j in "$run"/ranks/rank-*.flight.json; do
    [ -s "$j" ] || continue
    njson=$((njson + 1))
    if command -v python3 >/dev/null 2>&1; then
        python3 -m json.tool "$j" >/dev/null || fail "$j is not valid JSON"
    fi
    grep -q '"status": "aborted"' "$j" || fail "$j does not say aborted"
    grep -q '"state": "timed_out"' "$j" || fail "$j has no timed-out collective"
done
[ "$njson" -ge 1 ] || fail "no rank-*.flight.json dump in $run/ranks"

# The binary rings decode after the job is gone, as the watcher will read them.
"$exe" --summarize "$run" "$np" >"$work/summary" 2>&1 || fail "cannot decode the flight recorders: $(cat "$work/summary")"
cat "$work/summary"
grep -q "in barrier(\"epoch-end save\")" "$work/summary" && grep -q "in reduce_scatter(\"unit 17 grads\")" "$work/summary" ||
    fail "the decoded flight recorders do not show both collectives"
echo "comm_deadline: ok ($njson JSON dumps, abort after $elapsed s)"
