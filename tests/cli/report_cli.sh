#!/usr/bin/env bash
# CLI tests of `zerotrain report` and `zerotrain triage --html`: real training runs made
# here (a clean 2-rank run with evaluation and checkpoints; the field deadlock with
# --no-evenfix), the page's plots counted against the run's own files, missing pieces
# and errors; then (case browser) the pages rendered by a real headless Chromium,
# screenshot pixels and the rendered DOM checked by tests/cli/report_check.py.
#   report_cli.sh ZEROTRAIN SOURCE_DIR WORK_DIR CASE
# The browser case reads the pages the other cases left in WORK_DIR (ctest fixtures).
set -u
ZT=$1 SRC=$2 WORK=$3 CASE=$4
case "$WORK" in /*) ;; *) WORK="$PWD/$WORK" ;; esac  # file:// URLs need absolute paths
W="$WORK/$CASE"
rm -rf "$W" && mkdir -p "$W"
GOLD="$SRC/tests/golden"
S="$SRC/tests/data/triage"
MPIRUN=(mpirun --oversubscribe --allow-run-as-root --bind-to none --mca btl self,vader,tcp
        --mca btl_vader_single_copy_mechanism none -x OMP_NUM_THREADS=1 -x OPENBLAS_NUM_THREADS=1)
fail() { echo "FAIL [$CASE]: $*"; exit 1; }
expect() {  # RC CMD...: run, output in $W/out.txt, check the exit code
    local want=$1; shift
    "$@" >"$W/out.txt" 2>&1
    local rc=$?
    cat "$W/out.txt"
    [ "$rc" -eq "$want" ] || fail "exit $rc, expected $want: $*"
}
has() { grep -q -- "$1" "$W/out.txt" || fail "output lacks: $1"; }
# points PAGE ID: the data-points of plot ID
points() { grep -o "<svg class=\"plot\" id=\"$2\"[^>]*" "$1" | grep -o 'data-points="[0-9]*"' | tr -dc 0-9; }
# series PAGE ID NAME: the data-points of series NAME in plot ID
series() {
    awk -v id="$2" '/<svg class="plot"/ { on = index($0, "id=\"" id "\"") > 0 } on' "$1" |
        grep -o "<g class=\"series\" data-name=\"$3\" data-points=\"[0-9]*\"" | grep -o 'points="[0-9]*"' | tr -dc 0-9
}
want_points() {  # PAGE ID N
    local got; got=$(points "$1" "$2")
    [ "$got" = "$3" ] || fail "plot $2: data-points '$got', expected $3"
}
want_series() {  # PAGE ID NAME N
    local got; got=$(series "$1" "$2" "$3")
    [ "$got" = "$4" ] || fail "plot $2 series '$3': data-points '$got', expected $4"
}
page_has() { grep -q -- "$2" "$1" || fail "$(basename "$1") lacks: $2"; }
self_contained() {  # nothing fetched, no script
    ! grep -Eiq '<script|<link|<img|<iframe|src=|href=|@import|url\((https?:|//)' "$1" ||
        fail "$1 is not self-contained: $(grep -Eio '<script|<link|<img|<iframe|src=|href=|@import|url\((https?:|//)' "$1" | head -3)"
}

case "$CASE" in
run)
    # A clean 2-rank run: evaluation every 5 steps, a checkpoint every 5 steps (all kept).
    head -c 30000 "$SRC/examples/data/python-reference.txt" >"$W/text.txt"
    "$ZT" pack --quiet --input bytes --seq-len 32 -o "$W/data" "$W/text.txt" >/dev/null || fail "pack"
    timeout 120 "${MPIRUN[@]}" -n 2 "$ZT" train --model "$SRC/examples/tiny-qwen3" --data "$W/data" --run-dir "$W/run" \
        --steps 20 --micro-batch 2 --lr 3e-3 --warmup 2 --threads 1 --log-every 0 --eval-data "$W/data" \
        --eval-every 5 --eval-batches 1 --save-every 5 --keep-last 0 >"$W/train.txt" 2>&1 || { cat "$W/train.txt"; fail "train"; }
    M="$W/run/metrics.jsonl"
    nsteps=$(grep -c '"loss"' "$M"); neval=$(grep -c '"eval_loss"' "$M")
    nr0=$(wc -l <"$W/run/ranks/rank-00000.metrics.jsonl"); nr1=$(wc -l <"$W/run/ranks/rank-00001.metrics.jsonl")
    nck=$(ls -d "$W/run/checkpoints"/step-* | wc -l)
    [ "$nsteps" -eq 20 ] && [ "$neval" -eq 4 ] && [ "$nck" -eq 4 ] || fail "run: $nsteps steps, $neval evals, $nck checkpoints"
    expect 0 "$ZT" report "$W/run"
    has "report: $W/run/report.html: state complete; 10 plots; 20 steps, 4 evaluations, 2 ranks, 4 checkpoints, 0 power samples"
    P="$W/run/report.html"
    self_contained "$P"
    want_points "$P" loss $((nsteps + neval))
    want_series "$P" loss "train loss" "$nsteps"
    want_series "$P" loss "eval loss" "$neval"
    want_points "$P" loss-tokens $((nsteps + neval))
    want_points "$P" lr "$nsteps"
    want_points "$P" grad-norm "$nsteps"
    want_points "$P" tok-per-rank $((nr0 + nr1))
    want_series "$P" tok-per-rank "rank 1" "$nr1"
    want_points "$P" comm-share $((2 * nsteps))
    want_series "$P" checkpoints "checkpoint committed (meta.json)" "$nck"
    want_points "$P" checkpoints $((nsteps + nck))
    want_points "$P" gpu-hours $((2 * nsteps))
    want_points "$P" power 0
    # eval markers in two plots, one per checkpoint, and 3 legend swatches
    [ "$(grep -c '<circle' "$P")" -eq $((2 * neval + nck + 3)) ] || fail "circles: $(grep -c '<circle' "$P")"
    run_id=$(sed -n 's/.*"run_id":[[:space:]]*"\([^"]*\)".*/\1/p' "$W/run/run.json" | head -1)
    page_has "$P" "zerotrain run $run_id"
    page_has "$P" 'data-state="complete"'
    page_has "$P" "examples/tiny-qwen3"
    page_has "$P" '<td class="k">world size</td><td>2, cpu</td>'
    page_has "$P" '<td class="k">steps</td><td>20 / 20, epoch 0</td>'
    last_loss=$(grep '"loss"' "$M" | tail -1 | sed 's/.*"loss":\([0-9.]*\).*/\1/')
    page_has "$P" "$(printf '<td>%.4f (step 20)</td>' "$last_loss")"
    page_has "$P" "no power samples"
    page_has "$P" "tensorboard --logdir $W/run/tb"
    ! grep -q "no evaluation lines" "$P" || fail "eval lines exist but the page says none"
    # -o elsewhere
    expect 0 "$ZT" report -q -o "$W/elsewhere.html" "$W/run"
    [ ! -s "$W/out.txt" ] || fail "--quiet printed something"
    cmp -s <(sed '/page written/d' "$W/elsewhere.html") <(sed '/page written/d' "$P") || fail "-o page differs"
    echo "ok [$CASE]: $nsteps steps, $neval evals, $nr0+$nr1 rank lines, $nck checkpoints"
    ;;
hang)
    # The field deadlock (as tests/cli/dist_cli.sh no_evenfix_deadlock): 31 vs 30 blocks,
    # --no-evenfix; the collective deadline (3 s) aborts the job with flight dumps.
    awk 'BEGIN{srand(11); for(d=0; d<61; d++){ line=""; for(i=0;i<16;i++) line=line int(rand()*90) " "; print line }}' >"$W/docs.txt"
    "$ZT" pack --quiet --input ids --vocab-size 96 --seq-len 16 --per-rank 2 -o "$W/data" "$W/docs.txt" >/dev/null || fail "pack"
    t_launch=$(date +%s.%N)
    timeout 90 "${MPIRUN[@]}" -n 2 "$ZT" train --init "$GOLD/tiny_untied_gqa" --data "$W/data" --run-dir "$W/run" \
        --epochs 1 --lr 1e-3 --no-evenfix --no-preflight --collective-timeout 3 --first-collective-timeout 30 \
        --log-every 10 >"$W/train.txt" 2>&1
    rc=$?
    t_end=$(date +%s.%N)
    [ $rc -ne 0 ] && [ $rc -ne 124 ] || { cat "$W/train.txt"; fail "train exited $rc: expected the deadline abort"; }
    ls "$W/run/ranks/"rank-0000[01].flight.json >/dev/null || fail "no flight dumps"
    # The watcher's verdict right after, from the files (--once): HUNG (or CRASHED on a slow host).
    "$ZT" watch --once --min-stall 1 --stall-factor 1 "$W/run" >"$W/watch.txt" 2>&1
    wrc=$?
    cat "$W/watch.txt"
    [ $wrc -eq 4 ] || [ $wrc -eq 3 ] || fail "watch --once exited $wrc"
    # NVML does not exist on this CPU host, so the power samples the trainer would write on
    # GPUs are made here on the run's own clock: busy at ~1 kW from the launch to the last
    # step's heartbeat, then the field's deadlock signature until the abort (rank 0 spinning
    # in its all-gather at ~192 W and 100%, rank 1 waiting in the barrier at 0%), 5 per second.
    hb_time=$(sed 's/.*"time": \([0-9.]*\).*/\1/' "$W/run/heartbeat.json")
    for r in 0 1; do
        awk -v r=$r -v t0="$hb_time" -v tl="$t_launch" -v t1="$t_end" 'BEGIN{
            srand(7 + r); print "time,gpu,power_w,util_pct,mem_used_mib"
            for (t = tl + 0.05 + 0.03 * r; t < t1; t += 0.2) {
                if (t < t0) { p = 990 + 40 * rand(); u = 97 + int(3 * rand()) }
                else if (r == 0) { p = 190 + 5 * rand(); u = 100 }
                else { p = 133 + 4 * rand(); u = 0 }
                printf "%.3f,%d,%.1f,%d,%d\n", t, r, p, u, 80000
            }}' >"$W/run/ranks/rank-0000$r.power.csv"
    done
    npow=$(( $(wc -l <"$W/run/ranks/rank-00000.power.csv") + $(wc -l <"$W/run/ranks/rank-00001.power.csv") - 2 ))
    expect 0 "$ZT" report "$W/run"
    has "state hung"
    has "collective mismatch"
    P="$W/run/report.html"
    self_contained "$P"
    nsteps=$(grep -c '"loss"' "$W/run/metrics.jsonl")
    [ "$nsteps" -eq 30 ] || fail "the deadlocked run should have 30 steps, has $nsteps"
    want_points "$P" loss "$nsteps"
    want_points "$P" power "$npow"
    want_series "$P" power "GPU 0" $(( $(wc -l <"$W/run/ranks/rank-00000.power.csv") - 1 ))
    page_has "$P" 'data-state="hung"'
    page_has "$P" "hit the collective deadline and aborted the job"
    page_has "$P" 'collective deadline exceeded'
    page_has "$P" 'rank 1: barrier(&quot;epoch-end save&quot;) seq [0-9]*'
    page_has "$P" 'rank 0: allgather(&quot;unit [0-9]* params&quot;)'
    page_has "$P" '<span id="diagnosis">.*collective mismatch (ranks 0-1 aborted at the collective deadline)'
    page_has "$P" '<p id="watcher"><b>watcher</b> (watch.json): \(HUNG\|CRASHED\)'
    page_has "$P" 'mismatch: the ranks are not all in the same collective'
    # the deadlock stretch in the state strip: >= 2 snapshots, rank 1 at 0%
    grep -Eq '<rect class="state" data-state="deadlock" data-snapshots="([2-9]|[1-9][0-9]+)"[^>]*data-zero="1"' "$P" ||
        fail "no deadlock stretch naming GPU 1 in the state strip: $(grep -o '<rect class="state"[^>]*' "$P")"
    grep -Eq '<rect class="state" data-state="compute"' "$P" || fail "no compute stretch before the hang"
    page_has "$P" 'class="deadlock-label"'
    # per-rank metrics: every readable line drawn; a line cut by the abort is said, not an error
    nrl=$(cat "$W/run/ranks/"rank-0000[01].metrics.jsonl | grep -c '}$')
    want_points "$P" tok-per-rank "$nrl"
    if [ "$(tail -c1 "$W/run/ranks/rank-00000.metrics.jsonl" | od -An -c | tr -d ' ')" != '\n' ]; then
        page_has "$P" "ranks/rank-00000.metrics.jsonl: 1 line could not be read (the last one is incomplete"
    fi
    echo "ok [$CASE]: $nsteps steps, $npow power samples, watcher exit $wrc"
    ;;
triage_html)
    expect 4 "$ZT" triage --html "$W/smi.html" "$S/node0.smi.csv" "$S/node1.smi.csv"
    has "html: $W/smi.html"
    self_contained "$W/smi.html"
    want_points "$W/smi.html" power 480
    want_series "$W/smi.html" power "GPU 5" 60
    grep -q '<rect class="state" data-state="deadlock" data-snapshots="15" data-seconds="15.0" data-zero="5"' "$W/smi.html" ||
        fail "deadlock stretch of 15 snapshots naming GPU 5"
    grep -q '<rect class="state" data-state="checkpoint" data-snapshots="8"[^>]*data-zero="0"' "$W/smi.html" ||
        fail "checkpoint stretch of 8 snapshots with GPU 0 at 0%"
    page_has "$W/smi.html" "verdict: DEADLOCK: 1 stretch of &ge; 2 snapshots; longest 15 s"
    page_has "$W/smi.html" 'class="strip" data-stretches="5"'
    # the trainer's own power.csv format, 4 ranks
    expect 4 "$ZT" triage --html "$W/ranks.html" "$S"/ranks/rank-0000?.power.csv
    want_points "$W/ranks.html" power "$(cat "$S"/ranks/rank-0000?.power.csv | grep -vc '^time')"
    grep -q '<rect class="state" data-state="deadlock" data-snapshots="10"[^>]*data-zero="2"' "$W/ranks.html" ||
        fail "power.csv: deadlock stretch of 10 snapshots naming rank 2"
    # no deadlock: dmon, exit 0, the page still written
    expect 0 "$ZT" triage -q --html "$W/dmon.html" "$S/node.dmon.log"
    page_has "$W/dmon.html" 'data-state="starvation"'
    page_has "$W/dmon.html" "verdict: no deadlock stretch"
    expect 1 "$ZT" triage --html "$W/no/such/dir/x.html" "$S/node.dmon.log"
    has "error: --html: "
    echo "ok [$CASE]"
    ;;
errors)
    # not a directory, not a run directory, usage
    expect 1 "$ZT" report "$W/nonexistent"
    has "nonexistent: cannot read the run directory: No such file or directory"
    echo x >"$W/file"
    expect 1 "$ZT" report "$W/file"
    has "file: is not a directory"
    mkdir -p "$W/empty"
    expect 1 "$ZT" report "$W/empty"
    has "empty is not a run directory: it has none of run.json, heartbeat.json, metrics.jsonl"
    [ ! -e "$W/empty/report.html" ] || fail "a page was written for a non-run directory"
    expect 2 "$ZT" report
    expect 2 "$ZT" report "$W/empty" "$W/file"
    expect 0 "$ZT" report --help
    has "tensorboard --logdir RUN/tb"
    # A run that has only just started: run.json alone (with text that must be escaped).
    mkdir -p "$W/new"
    printf '{"run_id": "r<script>alert(1)</script>&\\"x", "world_size": 16, "backend": "cuda", "model": "/m/<b>Qwen3-32B</b>"}\n' >"$W/new/run.json"
    expect 0 "$ZT" report "$W/new"
    has "state starting"
    P="$W/new/report.html"
    self_contained "$P"
    page_has "$P" "r&lt;script&gt;alert(1)&lt;/script&gt;&amp;&quot;x"
    page_has "$P" "/m/&lt;b&gt;Qwen3-32B&lt;/b&gt;"
    page_has "$P" "no metrics.jsonl yet"
    page_has "$P" "no power samples"
    page_has "$P" "no heartbeat.json"
    for id in power loss loss-tokens lr grad-norm tok-per-rank comm-share checkpoints gpu-hours; do
        want_points "$P" "$id" 0
    done
    # A live run: heartbeat running, three steps, a half-written fourth line, no eval,
    # no complete.json; bad UTF-8 in the model path.
    mkdir -p "$W/live/ranks"
    now=$(date +%s)
    printf '{"run_id": "live1", "world_size": 2, "model": "/m/\xff\xfe", "train": {"total_steps": 100}}\n' >"$W/live/run.json"
    printf '{"run_id": "live1", "state": "running", "step": 3, "total_steps": 100, "time": %s, "elapsed_s": 9, "world_size": 2, "gpu_hours": 0.005, "gpu_hours_per_epoch": 0.2, "gpu_hours_at_risk": 0.005}\n' "$now" >"$W/live/heartbeat.json"
    for s in 1 2 3; do
        printf '{"step":%d,"epoch":0,"loss":%d.5,"lr":1e-4,"grad_norm":1.0,"clip_coef":1.0,"tokens":%d,"tok_per_s":1000.0,"step_time_s":3.0,"compute_s":2.0,"comm_wait_s":1.0,"gpu_hours":%s,"gpu_hours_at_risk":%s,"elapsed_s":%d}\n' \
            $s $((6 - s)) $((s * 1000)) "0.00$((s + 1))" "0.00$((s + 1))" $((s * 3)) >>"$W/live/metrics.jsonl"
    done
    printf '{"step":4,"epoch":0,"lo' >>"$W/live/metrics.jsonl"
    expect 0 "$ZT" report "$W/live"
    has "state running; 10 plots; 3 steps, 0 evaluations, 0 ranks, 0 checkpoints, 0 power samples"
    P="$W/live/report.html"
    page_has "$P" 'data-state="running"'
    page_has "$P" "no complete.json: the run is live"
    page_has "$P" "no evaluation lines in metrics.jsonl"
    page_has "$P" "metrics.jsonl: 1 line could not be read (the last one is being written)"
    page_has "$P" "$(printf '/m/\xef\xbf\xbd\xef\xbf\xbd')"
    want_points "$P" loss 3
    want_series "$P" gpu-hours "projected" 2
    want_points "$P" gpu-hours 8
    want_series "$P" comm-share "comm wait" 3
    grep -q 'points="[0-9.]*,[0-9.]* [0-9.]*,[0-9.]* [0-9.]*,[0-9.]*"' "$P" || fail "3-point polylines"
    echo "ok [$CASE]"
    ;;
hostile)
    # Every string of every file the report reads made into markup that runs script if it
    # reaches the page unescaped (tests/cli/report_hostile.py). The run: the field deadlock
    # of the hang case (flight dumps and recorders, power samples, the watcher's watch.json)
    # with the checkpoints' meta.json and latest of the run case, a power file with a value
    # that is not a number (the page quotes the parse error), and complete.json or not (the
    # badge's state then comes from watch.json). Each hostile page against the clean page
    # of the same run: raw, then as headless Chromium rendered it.
    hang_dir="$WORK/hang/run" run_dir="$WORK/run/run"
    [ -s "$hang_dir/ranks/rank-00000.flight.json" ] && [ -s "$run_dir/complete.json" ] ||
        fail "the run and hang cases must run first"
    B="$W/clean-live"
    cp -r "$hang_dir" "$B" && rm -f "$B/report.html" || fail "copy $hang_dir"
    for d in "$run_dir"/checkpoints/step-*; do
        mkdir -p "$B/checkpoints/${d##*/}" && cp "$d/meta.json" "$B/checkpoints/${d##*/}/" || fail "copy $d/meta.json"
    done
    cp "$run_dir/checkpoints/latest" "$B/checkpoints/" || fail "copy latest"
    t=$(sed -n 's/^\([0-9.]*\),.*/\1/p' "$B/ranks/rank-00000.power.csv" | head -1)
    printf 'time,gpu,power_w,util_pct,mem_used_mib\n%s,2,100.0,50,1000\n%s,2,n/a,50,1000\n' "$t" "$t" \
        >"$B/ranks/rank-00002.power.csv"
    cp -r "$B" "$W/clean-done" && cp "$run_dir/complete.json" "$W/clean-done/" || fail "copy complete.json"
    shown=(--show 'run.json:run_id' --show 'run.json:model' --show 'run.json:init' --show 'run.json:backend'
           --show 'watch.json:state' --show 'watch.json:reason' --show 'watch.json:diagnosis'
           --show 'watch.json:details\[[0-9]+\]' --show 'ranks/rank-0000[01].flight.json:status'
           --show 'ranks/rank-0000[01].flight.json:reason' --show 'ranks/rank-0000[01].flight.json:written'
           --show 'ranks/rank-0000[01].flight:label' --show 'checkpoints/latest'
           --show 'ranks/rank-00002.power.csv')
    for v in live done; do
        python3 "$SRC/tests/cli/report_hostile.py" make "$W/clean-$v" "$W/hostile-$v" "$W/fields-$v.json" ||
            fail "report_hostile.py make"
        for k in clean hostile; do
            expect 0 "$ZT" report "$W/$k-$v"
        done
        self_contained "$W/clean-$v/report.html"  # the hostile page holds "src=" and the like as text
    done
    has "state complete"
    ! grep -q 'pwned' "$W/clean-live/report.html" || fail "the clean page holds a payload"
    compare() {  # CLEAN HOSTILE VARIANT STATE
        python3 "$SRC/tests/cli/report_hostile.py" compare "$1" "$2" "$W/fields-$3.json" --state "$4" "${shown[@]}" \
            $([ "$3" = done ] && echo "--show complete.json:final") || fail "hostile page $2"
    }
    compare "$W/clean-live/report.html" "$W/hostile-live/report.html" live unknown
    compare "$W/clean-done/report.html" "$W/hostile-done/report.html" done complete
    CHROME=""
    for c in chromium chromium-browser google-chrome; do command -v "$c" >/dev/null && CHROME=$c && break; done
    if [ -z "$CHROME" ]; then
        echo "SKIPPED [$CASE]: the raw pages passed; no chromium for the rendered ones (Debian: apt-get install chromium)"
        exit 77
    fi
    for v in live done; do
        for k in clean hostile; do
            # a payload that ran would have changed the DOM; an alert() would block: the timeout fails it
            timeout 30 "$CHROME" --headless --no-sandbox --disable-gpu --no-first-run --disable-extensions \
                --disable-background-networking --user-data-dir="$W/profile" --host-resolver-rules="MAP * ~NOTFOUND" \
                --dump-dom "file://$W/$k-$v/report.html" >"$W/$k-$v.dom.html" 2>"$W/$k-$v.dom.log" ||
                { cat "$W/$k-$v.dom.log"; fail "chromium --dump-dom of the $k-$v page"; }
        done
    done
    compare "$W/clean-live.dom.html" "$W/hostile-live.dom.html" live unknown
    compare "$W/clean-done.dom.html" "$W/hostile-done.dom.html" done complete
    echo "ok [$CASE]: $(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))))' "$W/fields-done.json") hostile strings, raw and rendered pages as the clean ones"
    ;;
bad_lines)
    # Damaged lines in the JSONL files: a NUL byte in line 3 of metrics.jsonl, a line that
    # is not JSON, one that is not an object; a NUL byte in a rank's file. Each is skipped
    # and counted, the lines after it drawn, and said on the page and on stderr.
    mkdir -p "$W/r/ranks"
    printf '{"run_id": "bad1", "world_size": 2, "train": {"total_steps": 6}}\n' >"$W/r/run.json"
    step_line() {  # STEP
        printf '{"step":%d,"epoch":0,"loss":%d.25,"lr":1e-4,"grad_norm":1.0,"clip_coef":1.0,"tokens":%d,"tok_per_s":1000.0,"step_time_s":3.0,"compute_s":2.0,"comm_wait_s":1.0,"gpu_hours":0.00%d,"gpu_hours_at_risk":0.00%d,"elapsed_s":%d}\n' \
            "$1" $((9 - $1)) $(($1 * 1000)) "$1" "$1" $(($1 * 3))
    }
    { step_line 1; step_line 2; step_line 3 | sed 's/"lr"/"l\x00r"/'; step_line 4; echo 'this is not JSON {'
      step_line 5; echo '[1, 2, 3]'; step_line 6; } >"$W/r/metrics.jsonl"
    [ "$(wc -l <"$W/r/metrics.jsonl")" -eq 8 ] && [ "$(tr -cd '\000' <"$W/r/metrics.jsonl" | wc -c)" -eq 1 ] ||
        fail "metrics.jsonl should have 8 lines and 1 NUL byte"
    for s in 1 2 3 4; do
        printf '{"step":%d,"rank":0,"tok_per_s":500.0,"step_time_s":3.0}\n' "$s"
    done | sed '2s/"rank"/"ra\x00nk"/' >"$W/r/ranks/rank-00000.metrics.jsonl"
    ZT_ERR="$W/stderr.txt"
    "$ZT" report "$W/r" >"$W/out.txt" 2>"$ZT_ERR" || { cat "$W/out.txt" "$ZT_ERR"; fail "report exited $?"; }
    cat "$W/out.txt" "$ZT_ERR"
    has "state running; 10 plots; 5 steps, 0 evaluations, 1 ranks"
    grep -qF "zerotrain report: warning: $W/r/metrics.jsonl: skipped 3 lines that could not be read: line 3 (a NUL byte), line 5 (not JSON), line 7 (not a JSON object)" "$ZT_ERR" ||
        fail "stderr lacks the skipped lines of metrics.jsonl"
    grep -qF "zerotrain report: warning: $W/r/ranks/rank-00000.metrics.jsonl: skipped 1 line that could not be read: line 2 (a NUL byte)" "$ZT_ERR" ||
        fail "stderr lacks the skipped line of ranks/rank-00000.metrics.jsonl"
    P="$W/r/report.html"
    want_points "$P" loss 5
    want_points "$P" lr 5
    want_points "$P" tok-per-rank 3
    page_has "$P" "metrics.jsonl: 3 lines could not be read; skipped, the rest is drawn: line 3 (a NUL byte), line 5 (not JSON), line 7 (not a JSON object)"
    page_has "$P" "ranks/rank-00000.metrics.jsonl: 1 line could not be read; skipped, the rest is drawn: line 2 (a NUL byte)"
    page_has "$P" '<td class="k">steps</td><td>6 / 6, epoch 0</td>'
    page_has "$P" '<td>3.2500 (step 6)</td>'
    # --quiet: nothing printed, the page still says it
    expect 0 "$ZT" report -q "$W/r"
    [ ! -s "$W/out.txt" ] || fail "--quiet printed something"
    page_has "$P" "line 3 (a NUL byte)"
    echo "ok [$CASE]"
    ;;
no_heartbeat)
    # No heartbeat.json: the GPU-hours come from metrics.jsonl's last line, and no number
    # on the page is "nan" or "inf" (also with run.json alone, an eval line without its
    # perplexity, a model_config without its sizes, a complete.json without its step).
    nan_free() {  # PAGE: no nan / inf printed as a number
        ! grep -Eiqo '(^|[^a-z])[-+]?(nan|inf|infinity)([^a-z]|$)' "$1" ||
            fail "$1 prints nan or inf: $(grep -Eio '.{40}(^|[^a-z])[-+]?(nan|inf|infinity)([^a-z]|$).{10}' "$1" | head -3)"
    }
    mkdir -p "$W/a" "$W/b" "$W/c"
    printf '{"run_id": "nohb", "world_size": 2, "model": "m", "model_config": {"hidden_size": 64}, "train": {"total_steps": 10}}\n' >"$W/a/run.json"
    for s in 1 2 3; do
        printf '{"step":%d,"epoch":0,"loss":%d.5,"lr":1e-4,"grad_norm":1.0,"clip_coef":1.0,"tokens":%d,"tok_per_s":1000.0,"step_time_s":3.0,"compute_s":2.0,"comm_wait_s":1.0,"gpu_hours":0.00%d,"gpu_hours_at_risk":0.00%d,"elapsed_s":%d}\n' \
            $s $((6 - s)) $((s * 1000)) $((s + 1)) $s $((s * 3)) >>"$W/a/metrics.jsonl"
    done
    printf '{"step":3,"eval_loss":2.5}\n' >>"$W/a/metrics.jsonl"
    cp "$W/a/run.json" "$W/b/"
    cp "$W/a/run.json" "$W/a/metrics.jsonl" "$W/c/"
    printf '{"run_id": "nohb"}\n' >"$W/c/complete.json"
    expect 0 "$ZT" report "$W/a"
    has "state running; 10 plots; 3 steps, 1 evaluations"
    page_has "$W/a/report.html" '<td class="k">GPU-hours</td><td>0.0040 spent, 0.0030 at risk</td>'
    page_has "$W/a/report.html" "no heartbeat.json"
    want_points "$W/a/report.html" gpu-hours 8  # spent, at risk, the projection to step 10
    nan_free "$W/a/report.html"
    expect 0 "$ZT" report "$W/b"
    has "state starting"
    page_has "$W/b/report.html" '<td class="k">GPU-hours</td><td>-</td>'
    nan_free "$W/b/report.html"
    expect 0 "$ZT" report "$W/c"
    has "state complete"
    page_has "$W/c/report.html" "complete.json: step ? committed"
    nan_free "$W/c/report.html"
    # numbers no scale holds (1e308 spans overflow, 1e999 parses as inf): not drawn, not printed
    mkdir -p "$W/d"
    cp "$W/a/run.json" "$W/d/"
    for s in 1 2 3; do
        big=$([ $s = 2 ] && echo 1e308 || echo -1e308)
        printf '{"step":%d,"epoch":0,"loss":%s,"lr":1e-4,"grad_norm":%s,"clip_coef":1.0,"tokens":%s,"tok_per_s":1e999,"step_time_s":3.0,"compute_s":2.0,"comm_wait_s":1.0,"gpu_hours":%s,"gpu_hours_at_risk":0.001,"elapsed_s":%d}\n' \
            $s "$big" $([ $s = 2 ] && echo 1e999 || echo 1) $([ $s = 3 ] && echo 1e308 || echo 5) \
            $([ $s = 3 ] && echo 1e300 || echo 0.1) $((s * 3)) >>"$W/d/metrics.jsonl"
    done
    printf '{"step":3,"eval_loss":1e308,"eval_ppl":1e999}\n' >>"$W/d/metrics.jsonl"
    expect 0 "$ZT" report "$W/d"
    want_points "$W/d/report.html" loss 0
    want_points "$W/d/report.html" lr 3
    nan_free "$W/d/report.html"
    echo "ok [$CASE]"
    ;;
browser)
    # The pages of the cases above in a real headless browser.
    CHROME=""
    for c in chromium chromium-browser google-chrome; do command -v "$c" >/dev/null && CHROME=$c && break; done
    if [ -z "$CHROME" ]; then
        echo "SKIPPED [$CASE]: no chromium on this machine (Debian: apt-get install chromium; scripts/install-deps.sh)"
        exit 77
    fi
    command -v python3 >/dev/null || { echo "SKIPPED [$CASE]: no python3 for the PNG/DOM checks"; exit 77; }
    "$CHROME" --version
    run_dir="$WORK/run/run" hang_dir="$WORK/hang/run"
    for f in "$run_dir/report.html" "$hang_dir/report.html" "$WORK/triage_html/smi.html"; do
        [ -s "$f" ] || fail "$f missing: the run, hang and triage_html cases must run first"
    done
    render() {  # PAGE NAME: screenshot at the page's own size + the DOM after rendering
        local page=$1 name=$2 w h
        w=$(grep -o '<body data-width="[0-9]*"' "$page" | tr -dc 0-9)
        h=$(grep -o 'data-height="[0-9]*"' "$page" | head -1 | tr -dc 0-9)
        local flags=(--headless --no-sandbox --disable-gpu --hide-scrollbars --force-device-scale-factor=1
                     --no-first-run --disable-extensions --disable-background-networking
                     --user-data-dir="$W/profile-$name" --host-resolver-rules="MAP * ~NOTFOUND")
        timeout 60 "$CHROME" "${flags[@]}" --window-size="$w,$h" --screenshot="$W/$name.png" "file://$page" \
            >"$W/$name.shot.log" 2>&1 || { cat "$W/$name.shot.log"; fail "chromium --screenshot of $page"; }
        timeout 60 "$CHROME" "${flags[@]}" --dump-dom "file://$page" >"$W/$name.dom.html" 2>"$W/$name.dom.log" ||
            { cat "$W/$name.dom.log"; fail "chromium --dump-dom of $page"; }
        [ -s "$W/$name.png" ] && [ -s "$W/$name.dom.html" ] || fail "chromium wrote no screenshot or DOM for $page"
    }
    check() { python3 "$SRC/tests/cli/report_check.py" "$@" || fail "rendered page check: $1"; }
    M="$run_dir/metrics.jsonl"
    nsteps=$(grep -c '"loss"' "$M"); neval=$(grep -c '"eval_loss"' "$M")
    nck=$(ls -d "$run_dir/checkpoints"/step-* | wc -l)
    nr=$(cat "$run_dir"/ranks/rank-*.metrics.jsonl | wc -l)
    render "$run_dir/report.html" run
    check "$run_dir/report.html" "$W/run.dom.html" "$W/run.png" --expect loss=$((nsteps + neval)) \
        --expect-series "loss/eval loss=$neval" --expect loss-tokens=$((nsteps + neval)) --expect lr=$nsteps \
        --expect grad-norm=$nsteps --expect tok-per-rank=$nr --expect comm-share=$((2 * nsteps)) \
        --expect-series "checkpoints/checkpoint committed (meta.json)=$nck" --expect gpu-hours=$((2 * nsteps)) \
        --expect power=0
    render "$hang_dir/report.html" hang
    npow=$(cat "$hang_dir"/ranks/rank-*.power.csv | grep -vc '^time')
    check "$hang_dir/report.html" "$W/hang.dom.html" "$W/hang.png" --expect power=$npow --state-strip deadlock=2 \
        --state-strip compute=1 --expect loss=$(grep -c '"loss"' "$hang_dir/metrics.jsonl")
    grep -q 'collective mismatch' "$W/hang.dom.html" || fail "the rendered hang page lacks the diagnosis"
    render "$WORK/triage_html/smi.html" triage
    check "$WORK/triage_html/smi.html" "$W/triage.dom.html" "$W/triage.png" --expect power=480 \
        --state-strip deadlock=15 --state-strip checkpoint=8 --state-strip idle=7
    echo "ok [$CASE]: $("$CHROME" --version 2>/dev/null)"
    ;;
*)
    fail "unknown case"
    ;;
esac
