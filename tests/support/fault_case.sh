# Sourced by the fault batteries' one-case-per-invocation scripts (tests/cli/faults_cli.sh,
# faults3_rundir.sh, faults3_data.sh, faults3_ops.sh) once ZT, SRC, WORK and CASE are set:
#   W        this case's directory under WORK (absolute), made empty
#   GOLD     the golden models; MPIRUN 1-thread ranks over shared memory and TCP
#   fail MSG, expect_error PATTERN... -- CMD..., wait_step RUN N [POLLS] (default
#   ${WAIT_POLLS:-600} polls of 0.1 s), hb RUN KEY
case "$WORK" in /*) ;; *) WORK="$PWD/$WORK" ;; esac
W="$WORK/$CASE"
rm -rf "$W" && mkdir -p "$W"
GOLD="$SRC/tests/golden"
MPIRUN=(mpirun --oversubscribe --allow-run-as-root --bind-to none --mca btl self,vader,tcp
        --mca btl_vader_single_copy_mechanism none -x OMP_NUM_THREADS=1 -x OPENBLAS_NUM_THREADS=1)
fail() { echo "FAIL [$CASE]: $*"; exit 1; }
# expect_error PATTERN... -- CMD...: CMD must fail, its output must match every PATTERN (grep -E)
expect_error() {
    local pats=()
    while [ "$1" != "--" ]; do pats+=("$1"); shift; done
    shift
    "$@" >"$W/out.txt" 2>&1 && { cat "$W/out.txt"; fail "command succeeded but should have failed: $*"; }
    for p in "${pats[@]}"; do
        grep -Eq -- "$p" "$W/out.txt" || { cat "$W/out.txt"; fail "output lacks /$p/"; }
    done
}
# wait_step RUN N [POLLS]: until RUN/metrics.jsonl has a line of step >= N (the job runs)
wait_step() {
    local t=0 polls=${3:-${WAIT_POLLS:-600}}
    while [ "$t" -lt "$polls" ]; do
        [ -f "$1/metrics.jsonl" ] &&
            awk -v n="$2" -F'"step":' 'NF > 1 { split($2, a, ","); if (a[1] + 0 >= n) f = 1 } END { exit !f }' \
                "$1/metrics.jsonl" && return 0
        sleep 0.1
        t=$((t + 1))
    done
    fail "no step $2 in $1/metrics.jsonl after $polls polls"
}
# hb RUN KEY: a value of RUN's heartbeat.json
hb() { sed -E "s/.*\"$2\": (\"[^\"]*\"|[^,}]*).*/\1/" "$1/heartbeat.json" | tr -d '"'; }
