#!/usr/bin/env bash
# The third fault battery (issue 35), the operations tools' part, one case per invocation:
# run files whose fields cannot be true (a flight recorder header, a heartbeat's world
# size, a power file's rank) must bound the work they cause and be named; a directory
# given for a file is said to be one; plan checks every argument before printing.
#   faults3_ops.sh ZEROTRAIN SOURCE_DIR WORK_DIR CASE
set -u
ZT=$1 SRC=$2 WORK=$3 CASE=$4
. "$SRC/tests/support/fault_case.sh"  # W, GOLD, MPIRUN, fail, wait_step, hb
# expect RC CMD...: run, keep output in $W/out.txt, check the exit code (124: the timeout fired)
expect() {
    local want=$1; shift
    "$@" >"$W/out.txt" 2>&1
    local rc=$?
    cat "$W/out.txt"
    [ "$rc" -eq "$want" ] || fail "exit $rc, expected $want: $*"
}
has() { grep -Eq -- "$1" "$W/out.txt" || fail "output lacks /$1/"; }
lacks() { ! grep -Eq -- "$1" "$W/out.txt" || fail "output has /$1/"; }
# A finished 2-rank run of 4 steps in $W/run, made to look crashed: no complete.json, every
# liveness tick 100 s old (a watcher then diagnoses from the flight recorders).
crashed_run() {
    awk 'BEGIN{srand(3); for(d=0; d<16; d++){ line=""; for(i=0;i<16;i++) line=line int(rand()*90) " "; print line }}' >"$W/docs.txt"
    "$ZT" pack --quiet --input ids --vocab-size 96 --seq-len 16 -o "$W/data" "$W/docs.txt" >/dev/null || fail "pack"
    timeout 120 "${MPIRUN[@]}" -n 2 "$ZT" train --init "$GOLD/tiny_untied_gqa" --data "$W/data" --run-dir "$W/run" \
        --steps 4 --lr 1e-3 --log-every 0 --alive-interval 0.2 >"$W/train.txt" 2>&1 || { cat "$W/train.txt"; fail "train"; }
    rm -f "$W/run/complete.json"
    python3 - "$W/run" <<'PY' || fail "ageing the ticks"
import json, sys, time
for r in (0, 1):
    p = "%s/ranks/rank-%05d.alive" % (sys.argv[1], r)
    j = json.load(open(p)); j["time"] = time.time() - 100; json.dump(j, open(p, "w"))
PY
}
# set_field FILE OFFSET FORMAT VALUE: overwrite bytes of a binary file (struct format)
set_field() {
    python3 - "$@" <<'PY' || fail "editing $1"
import struct, sys
p, off, fmt, v = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
b = bytearray(open(p, "rb").read()); b[off:off + struct.calcsize(fmt)] = struct.pack(fmt, v); open(p, "wb").write(b)
PY
}
# set_json FILE KEY JSON: one member of a JSON object file
set_json() {
    python3 - "$@" <<'PY' || fail "editing $1"
import json, sys
j = json.load(open(sys.argv[1])); j[sys.argv[2]] = json.loads(sys.argv[3]); json.dump(j, open(sys.argv[1], "w"))
PY
}

case "$CASE" in
watch_flight_issued_max)
    # header field "issued" = 2^64 - 1 (offset 32, engine/flight.h): the ring walk wrapped
    # around and spun at 100% CPU with no output
    crashed_run
    set_field "$W/run/ranks/rank-00001.flight" 32 '<Q' 18446744073709551615
    expect 3 timeout 10 "$ZT" watch --once "$W/run"
    has "rank 1: flight recorder refused"
    has "run/ranks/rank-00001.flight: flight recorder header field \"issued\" is 18446744073709551615, which cannot be true: the newest record's slot [0-9]+ holds seq [0-9]+"
    has "rank 0: no collective in flight \(finalized\); last allreduce"
    # a header naming another rank than its file's
    cp "$W/run/ranks/rank-00000.flight" "$W/run/ranks/rank-00001.flight"
    expect 3 timeout 10 "$ZT" watch --once "$W/run"
    has "rank-00001.flight: flight recorder header cannot be true: it says rank 0, the file is rank 1's"
    # rank outside the world (offset 24 rank, 28 world)
    set_field "$W/run/ranks/rank-00001.flight" 28 '<i' 0
    expect 3 timeout 10 "$ZT" watch --once "$W/run"
    has "rank-00001.flight: flight recorder header cannot be true: rank 0, world 0"
    echo "ok [$CASE]"
    ;;
watch_flight_odd_locks)
    # 65,536 records, every seqlock odd (a writer mid-update, forever): each record waited
    # 10,000 yields, minutes for one ring; the whole ring now shares one small budget
    crashed_run
    python3 - "$W/run/ranks/rank-00001.flight" <<'PY' || fail "writing the ring"
import struct, sys
p = sys.argv[1]
h = bytearray(open(p, "rb").read()[:128])
cap = 65536
h[20:24] = struct.pack("<I", cap); h[32:40] = struct.pack("<Q", cap)
rec = bytearray(128 * cap)
for s in range(1, cap + 1):
    o = (s - 1) * 128
    rec[o:o + 8] = struct.pack("<IBBBB", 1, 1, 0, 0, 3); rec[o + 8:o + 16] = struct.pack("<Q", s)
open(p, "wb").write(bytes(h) + bytes(rec))
PY
    expect 3 timeout 10 "$ZT" watch --once "$W/run"
    has "rank 1: no collective in flight \(finalized\); last allgather\(\"\"\) seq 65536"
    echo "ok [$CASE]"
    ;;
report_crashed_issued_max)
    # report diagnoses from the flight recorders when watch.json says CRASHED: it spun too
    crashed_run
    set_field "$W/run/ranks/rank-00001.flight" 32 '<Q' 18446744073709551615
    printf '{"format": "zerotrain-watch", "version": 1, "state": "CRASHED", "exit_code": 3, "reason": "liveness ticks stopped", "diagnosis": "", "details": []}\n' >"$W/run/watch.json"
    expect 0 timeout 10 "$ZT" report "$W/run"
    has "state crashed"
    has "1 flight recorder refused: .*run/ranks/rank-00001.flight: flight recorder header field \"issued\" is 18446744073709551615, which cannot be true"
    grep -q 'rank-00001.flight: flight recorder header field &quot;issued&quot; is 18446744073709551615' "$W/run/report.html" ||
        fail "the page does not name the refused recorder"
    echo "ok [$CASE]"
    ;;
watch_world_huge)
    # heartbeat.json's world_size sized every poll: 2^31 - 1 was out of memory, 1,000,000
    # took 12 s and 1.4 GB. Now checked against RUN/ranks (2 ranks' files, rank 0's
    # recorder says 2): refused naming the file and the value, the run judged at 2 ranks.
    crashed_run
    for ws in 2147483647 1000000; do
        set_json "$W/run/heartbeat.json" world_size "$ws"
        expect 3 bash -c "ulimit -v 400000; exec timeout 10 \"\$@\"" _ "$ZT" watch --once "$W/run"
        has "warning: .*run/heartbeat.json: world_size $ws cannot be true: every rank creates its flight recorder and liveness tick in RUN/ranks before the first step, and rank 2 has neither \(.*run/ranks holds files of 2 ranks, the highest 1; rank 0's flight recorder says world 2; is RUN on storage every node shares\?\)"
        has "judging 2 ranks"
        has "liveness ticks stopped: ranks 0-1 \(2 of 2\)"
    done
    set_json "$W/run/heartbeat.json" world_size 1e300
    expect 3 timeout 10 "$ZT" watch --once "$W/run"
    has "world_size 1.0000000000000001e\+300 cannot be true: not a whole number of ranks >= 1"
    # smaller than its own job's recorder, written after it: cannot be true either
    set_json "$W/run/heartbeat.json" world_size 1
    expect 3 timeout 10 "$ZT" watch --once "$W/run"
    has "world_size 1 cannot be true: it was written after rank 0's flight recorder .*rank-00000.flight, by the same job, and that says world 2; judging 2 ranks"
    set_json "$W/run/heartbeat.json" world_size 2
    expect 3 timeout 10 "$ZT" watch --once "$W/run"
    lacks "cannot be true"
    # a rank's files missing below the claim (ranks 0 and 2 of 3): refused, judged at rank 0 only
    cp "$W/run/ranks/rank-00001.alive" "$W/run/ranks/rank-00002.alive"
    rm "$W/run/ranks/rank-00001.alive" "$W/run/ranks/rank-00001.flight"
    set_json "$W/run/heartbeat.json" world_size 3
    expect 3 timeout 10 "$ZT" watch --once "$W/run"
    has "world_size 3 cannot be true: .* and rank 1 has neither \(.*holds files of 2 ranks, the highest 2; rank 0's flight recorder says world 2; .*\); judging 1 rank"
    # report takes run.json's world_size for its diagnosis: the same check
    set_json "$W/run/run.json" world_size 2147483647
    printf '{"state": "CRASHED", "reason": "r", "diagnosis": "", "details": []}\n' >"$W/run/watch.json"
    expect 0 bash -c "ulimit -v 400000; exec timeout 10 \"\$@\"" _ "$ZT" report "$W/run"
    grep -q "run.json: world_size 2147483647 cannot be true" "$W/run/report.html" || fail "the page does not name run.json"
    echo "ok [$CASE]"
    ;;
power_file_rank_huge)
    # a power file named for rank 100,000,000 sized per-GPU arrays by it (report: 17 GB);
    # they are sized by the GPUs present
    mkdir -p "$W/run/ranks"
    printf '{"run_id": "r", "world_size": 1}\n' >"$W/run/run.json"
    printf 'time,gpu,power_w,util_pct,mem_used_mib\n1.0,0,900,100,1\n2.0,0,900,100,1\n' \
        >"$W/run/ranks/rank-100000000.power.csv"
    expect 0 bash -c "ulimit -v 600000; exec timeout 10 \"\$@\"" _ "$ZT" report "$W/run"
    has "2 power samples"
    grep -q ">GPU 100000000<" "$W/run/report.html" || fail "the legend does not name GPU 100000000"
    expect 0 bash -c "ulimit -v 600000; exec timeout 10 \"\$@\"" _ "$ZT" triage "$W/run/ranks/rank-100000000.power.csv"
    has "triage: 1 GPU in 1 file, 2 snapshots \(0 partial\)"
    echo "ok [$CASE]"
    ;;
read_directory)
    # a directory read as a file of 2^63 bytes: "out of host memory allocating 9223372036854775808 bytes"
    mkdir -p "$W/d"
    S="$SRC/tests/data/triage"
    expect 1 "$ZT" triage "$W/d"
    has "zerotrain triage: error: .*/d: is a directory, not a file"
    expect 1 "$ZT" triage --bands "$W/d" "$S/node.dmon.log"
    has "band file: .*/d: is a directory, not a file"
    expect 1 "$ZT" calibrate --healthy "$W/d" --idle "$S/idle.dmon-dt.log" -o "$W/b.json"
    has "zerotrain calibrate: error: .*/d: is a directory, not a file"
    expect 1 "$ZT" tokenize "$W/d"
    has "error: .*/d: is a directory, not a file"
    expect 2 "$ZT" plan --field --gpu-file "$W/d"
    has "error: --gpu-file: .*/d: is a directory, not a file"
    lacks "out of host memory"
    # a pipe is read to its end (it used to be refused: "cannot seek")
    expect 0 bash -c "\"\$1\" triage <(cat \"\$2\")" _ "$ZT" "$S/node.dmon.log"
    has "verdict: no deadlock"
    echo "ok [$CASE]"
    ;;
plan_args_first)
    # a usage error after 58 lines of plan: every argument is checked before the first line
    for args in "--field --shard-group 5 --world 16" \
                "--model $SRC/examples/qwen3-0.6b --shard-group 5 --world 16" \
                "--field --world 12"; do
        # shellcheck disable=SC2086
        "$ZT" plan $args >"$W/stdout.txt" 2>"$W/out.txt"
        rc=$?
        cat "$W/out.txt"
        [ "$rc" -eq 2 ] || fail "plan $args: exit $rc, expected 2"
        [ ! -s "$W/stdout.txt" ] || { head -3 "$W/stdout.txt"; fail "plan $args printed $(wc -l <"$W/stdout.txt") lines before its error"; }
    done
    has "world size 12 spans nodes of 8 GPUs"
    "$ZT" plan --field --shard-group 5 --world 16 >/dev/null 2>"$W/out.txt"
    has "--shard-group 5 must divide the world size 16"
    # --field's own table (4, 8, 16 GPUs) is checked too: a group that divides --world 24 but not 16
    "$ZT" plan --field --shard-group 12 --world 24 >"$W/stdout.txt" 2>"$W/out.txt"
    rc=$?
    cat "$W/out.txt"
    [ "$rc" -eq 2 ] && [ ! -s "$W/stdout.txt" ] || fail "--field --shard-group 12 --world 24: exit $rc, $(wc -l <"$W/stdout.txt") lines"
    has "--field predicts the field table's 16 GPUs \(hsdp\): --shard-group 12 must divide the world size 16"
    # and a valid one still prints the whole plan
    "$ZT" plan --field --shard-group 8 --world 16 >"$W/out.txt" 2>&1 || { cat "$W/out.txt"; fail "a valid plan failed"; }
    has "consistent with the field table"
    echo "ok [$CASE]"
    ;;
*)
    fail "unknown case $CASE"
    ;;
esac
