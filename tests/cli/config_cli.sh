#!/usr/bin/env bash
# A run as a file, and its efficiency as a number, end to end (tests/config.cmake): the YAML
# run config through `zerotrain train` (--print-config fed back with --config gives
# byte-identical run.json settings, the file's path and CRC-32C in run.json, the command line
# over the file, bad files refused with FILE:LINE), MFU in metrics.jsonl, the rank files and the
# report (FLOPs checked against an independent count from the blocks each rank trained on),
# run.json's backend on cpu and on the CPU execution of CUDA, and `plan --from-run` on real CPU
# runs. One case per invocation.
#   config_cli.sh ZEROTRAIN ZEROTRAIN_CUDAEMU SOURCE_DIR WORK_DIR CASE
set -u
ZT=$1 ZH=$2 SRC=$3 WORK=$4 CASE=$5
W="$WORK/$CASE"
rm -rf "$W" && mkdir -p "$W"
cd "$W" || exit 1
GOLD="$SRC/tests/golden"
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
MPIRUN=(mpirun --oversubscribe --allow-run-as-root --bind-to none --mca btl self,vader,tcp
        --mca btl_vader_single_copy_mechanism none -x OMP_NUM_THREADS -x OPENBLAS_NUM_THREADS)
fail() { echo "FAIL [$CASE]: $*"; exit 1; }
ids_data() {  # tiny id data (vocab 80, 64 blocks of 16)
    awk 'BEGIN{srand(31); for(d=0; d<64; d++){ line=""; for(i=0;i<16;i++) line=line int(rand()*78) " "; print line }}' >docs.txt
    "$ZT" pack --quiet --input ids --vocab-size 80 --seq-len 16 -o data docs.txt >/dev/null || fail "pack"
}
# py SCRIPT ARGS...: python3 with the checks' helpers (crc32c, the run's json, the FLOP formula)
py() {
    python3 - "$@" <<EOF
import json, sys
def crc32c(b):
    crc = 0xffffffff
    for x in b:
        crc ^= x
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82f63b78 if crc & 1 else 0)
    return crc ^ 0xffffffff
def run(d): return json.load(open(d + "/run.json"))
def steps(path): return [json.loads(l) for l in open(path) if '"loss"' in l]
def matmul_params(c):  # q, o, k, v, gate, up, down per layer and the lm_head (docs/plan.md)
    d, F, D, H, Hkv = c["hidden_size"], c["intermediate_size"], c["head_dim"], c["num_attention_heads"], c["num_key_value_heads"]
    return c["num_hidden_layers"] * (2 * H * D * d + 2 * Hkv * D * d + 3 * F * d) + c["vocab_size"] * d
def params(c):  # every parameter (the field convention's N)
    d, F, D, H, Hkv, L, V = (c[k] for k in ("hidden_size", "intermediate_size", "head_dim", "num_attention_heads",
                                            "num_key_value_heads", "num_hidden_layers", "vocab_size"))
    return V * d * (1 if c["tie_word_embeddings"] else 2) + d + L * (2 * d + 2 * D + 2 * H * D * d + 2 * Hkv * D * d + 3 * F * d)
def flops(c, tokens, sum_sq):  # 6 x matmul params per token + 6 L H D sum of squared document lengths
    return 6 * matmul_params(c) * tokens + 6 * c["num_hidden_layers"] * c["num_attention_heads"] * c["head_dim"] * sum_sq
$(cat)
EOF
}

case "$CASE" in
print_roundtrip)
    # flags -> run A; the same flags --print-config -> cfg.yaml -> run B in the same directory:
    # run.json's train object (bytes), its resolved settings and the losses are identical
    ids_data
    F=(--init "$GOLD/tiny_untied_gqa" --data data --run-dir run --lr 1e-3 --warmup 2 --micro-batch 2 --steps 3
       --threads 1 --log-every 0 --no-tensorboard --seed 99 --keep-last 1 --eval-data data --eval-batches 1)
    "$ZT" train "${F[@]}" >a.txt 2>&1 || { cat a.txt; fail "run from flags"; }
    mv run run-flags
    "$ZT" train "${F[@]}" --print-config >cfg.yaml 2>err.txt || { cat err.txt; fail "--print-config"; }
    [ -s err.txt ] && { cat err.txt; fail "--print-config wrote to stderr"; }
    grep -q '^lr: 0.001$' cfg.yaml && grep -q '^micro_batch: 2$' cfg.yaml && grep -q '^steps: 3$' cfg.yaml ||
        { cat cfg.yaml; fail "cfg.yaml lacks the flags' values"; }
    [ -d run ] && fail "--print-config must not train"
    "$ZT" train --config cfg.yaml --print-config >cfg2.yaml || fail "--print-config of the file"
    cmp cfg.yaml cfg2.yaml || fail "--print-config of the file differs from the flags'"
    "$ZT" train --config cfg.yaml >b.txt 2>&1 || { cat b.txt; fail "run from the config file"; }
    obj() { awk -v k="\"$2\":" '$1 == k && /\{$/ { on = 1 } on { print } on && /^\t}/ { exit }' "$1/run.json"; }
    for k in train data model_config memory_per_rank_bytes; do
        [ -n "$(obj run "$k")" ] || fail "run.json has no $k object"
        cmp <(obj run-flags "$k") <(obj run "$k") || fail "run.json $k differs between flags and --config"
    done
    py run-flags run <<'P' || fail "resolved settings or losses differ"
a, b = run(sys.argv[1]), run(sys.argv[2])
assert json.dumps(a["config"]["settings"]) == json.dumps(b["config"]["settings"]), "config.settings differ"
assert [s["loss"] for s in steps(sys.argv[1] + "/metrics.jsonl")] == [s["loss"] for s in steps(sys.argv[2] + "/metrics.jsonl")]
print("ok: train, data, model_config, memory and", len(a["config"]["settings"]), "resolved settings identical; same losses")
P
    echo "ok [$CASE]"
    ;;
origin)
    # run.json names where the configuration came from: the file's path and CRC-32C, the args
    ids_data
    printf 'init: %s\ndata: data\nrun_dir: run\noptimizer:\n  lr: 2e-3\nsteps: 2\nthreads: 1\nlog_every: 0\n' \
        "$GOLD/tiny_untied_gqa" >my.yaml
    "$ZT" train --config my.yaml --seed 7 >out.txt 2>&1 || { cat out.txt; fail "train --config"; }
    "$ZT" train --init "$GOLD/tiny_untied_gqa" --data data --run-dir run2 --steps 1 --threads 1 >out2.txt 2>&1 ||
        { cat out2.txt; fail "train from flags"; }
    py run run2 my.yaml <<'P' || fail "run.json's config origin"
c = run(sys.argv[1])["config"]
want = "%08x" % crc32c(open(sys.argv[3], "rb").read())
assert c["file"] == "my.yaml" and c["crc32c"] == want, (c["file"], c["crc32c"], want)
assert c["origin"] == "config file, then the command line", c["origin"]
assert c["args"] == ["--config", "my.yaml", "--seed", "7"], c["args"]
assert c["settings"]["lr"] == 0.002 and c["settings"]["seed"] == 7 and c["settings"]["steps"] == 2
f = run(sys.argv[2])["config"]
assert f["file"] is None and f["crc32c"] is None and f["origin"] == "command line", f
print("ok: file", c["file"], "crc32c", c["crc32c"], "(computed here:", want + ")")
P
    echo "ok [$CASE]"
    ;;
override)
    # the command line overrides the file wherever --config stands; null is the default
    printf 'data: d\nlr: 0.5\nmicro_batch: 3\nschedule: constant\nwarmup: null\n' >c.yaml
    a=$("$ZT" train --config c.yaml --lr 0.25 --print-config) || fail "print-config (after)"
    b=$("$ZT" train --lr 0.25 --config c.yaml --print-config) || fail "print-config (before)"
    [ "$a" = "$b" ] || fail "the position of --config changes the result"
    for want in '^lr: 0.25$' '^micro_batch: 3$' '^schedule: constant$' '^warmup: 0$' '^data: d$' '^grad_accum: 1$'; do
        grep -q "$want" <<<"$a" || { echo "$a"; fail "missing $want"; }
    done
    # every command on a flag table reads one: plan's file gives plan's output for the same flags
    printf 'model: %s\ngpu: H100\nassumptions:\n  mfu: 0.35\nworld: 8\nworlds: "1,8"\n' "$SRC/examples/qwen3-0.6b" >p.yaml
    "$ZT" plan --config p.yaml >p1.txt 2>&1 || { cat p1.txt; fail "plan --config"; }
    "$ZT" plan --model "$SRC/examples/qwen3-0.6b" --gpu H100 --mfu 0.35 --world 8 --worlds 1,8 >p2.txt 2>&1 ||
        fail "plan with flags"
    cmp p1.txt p2.txt || fail "plan --config differs from the same flags"
    echo "ok [$CASE]: --lr on the command line over the file's, the file's micro_batch, schedule, defaults elsewhere; plan too"
    ;;
bad_file)
    # each bad file: exit 2, FILE:LINE and what is wrong, before anything runs
    check() {  # NAME CONTENT PATTERN
        printf '%b' "$2" >"$1"
        "$ZT" train --config "$1" >out.txt 2>&1
        rc=$?
        [ $rc -eq 2 ] || { cat out.txt; fail "$1: exit $rc, want 2"; }
        grep -qF -- "$3" out.txt || { cat out.txt; fail "$1: error lacks '$3'"; }
        echo "refused: $(cat out.txt)"
    }
    check unknown.yaml 'lr: 1e-3\nlearning_rate: 1\n' "unknown.yaml:2: unknown key 'learning_rate' (nearest valid key: lr)"
    check type.yaml 'micro_batch: two\n' "type.yaml:1: --micro-batch: 'two' is not an integer"
    "$ZT" train --micro-batch two >flag.txt 2>&1
    grep -qF -- "--micro-batch: 'two' is not an integer" flag.txt || fail "the flag's own message changed"
    check range.yaml 'optimizer:\n  beta2: 1.5\n' "range.yaml:2: --beta2: 1.5 is out of range [0, 1]"
    check dup.yaml 'micro-batch: 2\nbatch:\n  micro_batch: 4\n' \
        "dup.yaml:3: duplicate key 'micro_batch': --micro-batch is set at line 1 already"
    check list.yaml '- lr: 1\n' "list.yaml:1: the file is a list, not a mapping"
    "$ZT" train --config missing.yaml >out.txt 2>&1
    [ $? -eq 2 ] && grep -qF "missing.yaml: cannot read the config file: No such file or directory" out.txt ||
        { cat out.txt; fail "an unreadable file"; }
    echo "ok [$CASE]"
    ;;
mfu_cpu)
    # the cpu backend: run.json says so, the peak is the measured CPU GEMM probe, and every
    # step line ends with the step's model FLOPs, TFLOP/s per rank and MFU after the members
    # it always had, in their order; the report draws MFU
    ids_data
    "$ZT" train --init "$GOLD/tiny_untied_gqa" --data data --run-dir run --steps 4 --micro-batch 2 --threads 1 \
        --device cpu >out.txt 2>&1 || { cat out.txt; fail "train"; }
    grep -q "^efficiency: .* TFLOP/s per rank (model FLOPs, model/flops.h), MFU .* not a GPU peak$" out.txt ||
        { cat out.txt; fail "the summary has no MFU line naming the CPU probe"; }
    py run "$GOLD/tiny_untied_gqa/config.json" <<'P' || fail "run.json or metrics"
r = run(sys.argv[1]); c = json.load(open(sys.argv[2]))
assert r["backend"] == "cpu" and r["device"]["backend"] == "cpu", r["device"]
assert r["device"]["peak_kind"] == "cpu_gemm_probe" and "not a GPU peak" in r["device"]["peak_source"], r["device"]
peak = r["device"]["peak_tflops_per_rank"]
assert 0 < peak < 100, peak
assert "mpi" in r["libraries"] and "hdf5" in r["libraries"], r["libraries"]
old = ["step", "epoch", "loss", "lr", "grad_norm", "clip_coef", "tokens", "tok_per_s", "tok_per_s_per_rank",
       "step_time_s", "compute_s", "comm_wait_s", "bytes_gathered", "bytes_scattered", "gpu_hours",
       "gpu_hours_at_risk", "elapsed_s", "trained_tokens"]
want = flops(c, 2 * 16, 2 * 16 * 16)
lines = steps(sys.argv[1] + "/metrics.jsonl")
for s in lines:
    assert list(s)[:len(old)] == old and list(s)[len(old):] == ["model_flops", "tflops_per_rank", "mfu"], list(s)
    assert s["model_flops"] == want, (s["model_flops"], want)
    # step_time_s is written to 0.1 ms: the rate lies between what its two ends give
    st = s["step_time_s"]
    lo, hi = want / (st + 5e-5) / 1e12, (want / (st - 5e-5) / 1e12 if st > 5e-5 else float("inf"))
    assert lo * 0.999 - 1e-6 <= s["tflops_per_rank"] <= hi * 1.001 + 1e-6, (s["tflops_per_rank"], lo, hi)
    assert abs(s["mfu"] - s["tflops_per_rank"] / peak) <= 1e-3 * s["mfu"] + 2e-6, (s["mfu"], s["tflops_per_rank"], peak)
rk = [json.loads(l) for l in open(sys.argv[1] + "/ranks/rank-00000.metrics.jsonl")]
assert all(list(x)[-3:] == ["model_flops", "tflops", "mfu"] and x["model_flops"] == want for x in rk), rk[0]
print("ok: %d steps, %d model FLOPs each (independent count), MFU %.2f%%..%.2f%% of a %.4g TFLOP/s CPU probe"
      % (len(lines), want, 100 * min(s["mfu"] for s in lines), 100 * max(s["mfu"] for s in lines), peak))
P
    "$ZT" report run >rep.txt 2>&1 || { cat rep.txt; fail "report"; }
    grep -q "10 plots; 4 steps" rep.txt || { cat rep.txt; fail "report: no MFU plot"; }
    grep -q 'id="mfu"[^>]*data-points="4"' run/report.html || fail "report: the MFU plot lacks its 4 points"
    grep -q "CPU fp32 GEMM probe measured at start, not a GPU peak" run/report.html || fail "report: the peak's source"
    echo "ok [$CASE]"
    ;;
mfu_isolated_w2)
    # packed documents kept apart, 2 ranks: every rank counts its own blocks' documents, rank 0
    # the run's; both checked against a count made here from the blocks each rank trained on
    # (--trace-blocks) and the DOC_START bits of the data file
    mkdir -p data
    perl -e 'srand(3); my @w; for my $b (0 .. 31) { my $t = 0; while ($t < 16) { my $n = 1 + int(rand(9));
        $n = 16 - $t if $t + $n > 16; for my $i (0 .. $n - 1) { push @w, (($b * 31 + $t * 7) % 78) | ($i == 0 ? 0x40000000 : 0);
        $t++ } } } print pack("V*", @w)' >data/data.u32
    cat >data/dataset.json <<JSON
{"format": "zerotrain-tokens", "version": 2, "token_flags": {"doc_start_bit": 30, "no_loss_bit": 31},
 "doc_attention": "isolated", "seq_len": 16, "vocab_size": 80,
 "files": [{"name": "data.u32", "blocks": 32, "tokens": 512, "crc32c": "0x00000000"}]}
JSON
    timeout 120 "${MPIRUN[@]}" -n 2 "$ZT" train --init "$GOLD/tiny_tied" --data data --run-dir run --steps 5 \
        --micro-batch 2 --threads 1 --no-verify-crc --trace-blocks >out.txt 2>&1 || { cat out.txt; fail "train W=2"; }
    grep -q "documents isolated" out.txt || { cat out.txt; fail "not isolated"; }
    py run "$GOLD/tiny_tied/config.json" data/data.u32 <<'P' || fail "FLOPs under isolation"
import struct
c = json.load(open(sys.argv[2])); raw = open(sys.argv[3], "rb").read()
words = struct.unpack("<%dI" % (len(raw) // 4), raw)
def sq(block):  # sum of squared document lengths of one block, from its DOC_START bits
    w = words[block * 16:(block + 1) * 16]; lens = []
    for i, x in enumerate(w):
        if i == 0 or x & 0x40000000: lens.append(0)
        lens[-1] += 1
    return sum(n * n for n in lens)
per = {}
for rank in (0, 1):
    for line in open("%s/ranks/rank-%05d.blocks" % (sys.argv[1], rank)):
        f = line.split(); step = int(f[0])
        per[(step, rank)] = flops(c, 16 * (len(f) - 1), sum(sq(int(x.split(":")[1])) for x in f[1:]))
lines = steps(sys.argv[1] + "/metrics.jsonl")
ranks = [[json.loads(l) for l in open("%s/ranks/rank-%05d.metrics.jsonl" % (sys.argv[1], k))] for k in (0, 1)]
dense = flops(c, 4 * 16, 4 * 256)
for s in lines:
    st = s["step"]
    for k in (0, 1):
        assert ranks[k][st - 1]["model_flops"] == per[(st, k)], (st, k, ranks[k][st - 1]["model_flops"], per[(st, k)])
    assert s["model_flops"] == per[(st, 0)] + per[(st, 1)], (st, s["model_flops"], per[(st, 0)], per[(st, 1)])
    assert s["model_flops"] < dense
print("ok: %d steps; rank 0 logs the sum of both ranks' counts, each equal to the count from its blocks' documents "
      "(e.g. step 1: %d + %d, against %d with one document per block)" % (len(lines), per[(1, 0)], per[(1, 1)], dense))
P
    echo "ok [$CASE]"
    ;;
plan_from_run)
    # `plan --from-run` on real CPU runs of the demo model (W = 1 and 2): the planner takes the
    # run's MFU (its compute time, in the field convention) and predicts the run's step time
    "$ZT" pack --quiet --input bytes --seq-len 64 "$SRC/examples/data/python-reference.txt" -o data >/dev/null ||
        fail "pack"
    "$ZT" train --model "$SRC/examples/tiny-qwen3" --data data --run-dir w1 --steps 6 --micro-batch 4 --threads 1 \
        --no-save-final --log-every 0 >t1.txt 2>&1 || { cat t1.txt; fail "train W=1"; }
    timeout 120 "${MPIRUN[@]}" -n 2 "$ZT" train --model "$SRC/examples/tiny-qwen3" --data data --run-dir w2 \
        --steps 6 --micro-batch 2 --threads 1 --no-save-final --log-every 0 >t2.txt 2>&1 || { cat t2.txt; fail "train W=2"; }
    for run in w1 w2; do
        "$ZT" plan --from-run $run >plan-$run.txt 2>&1 || { cat plan-$run.txt; fail "plan --from-run $run"; }
        cat plan-$run.txt
        py $run "$SRC/examples/tiny-qwen3/config.json" plan-$run.txt <<'P' || fail "plan --from-run $run"
import re
r = run(sys.argv[1]); c = json.load(open(sys.argv[2])); out = open(sys.argv[3]).read()
lines = steps(sys.argv[1] + "/metrics.jsonl")[1:]  # the first step (warm-up) left out, as the planner does
S, W = r["data"]["seq_len"], r["world_size"]
tokens = r["train"]["micro_batch"] * r["train"]["grad_accum"] * S
compute = sum(s["compute_s"] for s in lines) / len(lines)
step = sum(s["step_time_s"] for s in lines) / len(lines)
field = 6 * params(c) + 12 * c["num_hidden_layers"] * S * c["hidden_size"]
mfu = tokens * field / (r["device"]["peak_tflops_per_rank"] * 1e12 * compute)
got = float(re.search(r"the planner's MFU: ([0-9.]+)%", out).group(1))
assert abs(got - 100 * mfu) <= 0.006 + 1e-3 * 100 * mfu, (got, 100 * mfu)
assert ("predicted against measured at W = %d " % W) in out
m = re.search(r"step +([0-9.e+-]+) s +measured ([0-9.e+-]+) s: ([+-][0-9.]+)%", out)
pred, meas, err = float(m.group(1)), float(m.group(2)), float(m.group(3))
assert abs(meas - step) <= 1e-6 + 1e-4 * step, (meas, step)
assert abs(err) <= 5, err
print("ok: W=%d: the planner's MFU %.2f%% (computed here %.2f%%), step predicted %.4g s, measured %.4g s (%+.1f%%)"
      % (W, got, 100 * mfu, pred, meas, err))
P
    done
    "$ZT" plan --from-run nowhere >bad.txt 2>&1 && fail "plan --from-run of no run succeeded"
    grep -q "nowhere/run.json: cannot open" bad.txt || { cat bad.txt; fail "the error does not name run.json"; }
    echo "ok [$CASE]"
    ;;
backend_cudaemu)
    # the CPU execution of CUDA (tests/cudaemu): run.json says cuda and names the device as the
    # runtime reports it; no preset matches it, so MFU is null unless --peak-tflops gives one
    [ -x "$ZH" ] || { echo "SKIPPED: no $ZH (configure with the cudaemu fragment)"; exit 77; }
    ids_data
    C=(--init "$GOLD/tiny_untied_gqa" --data data --steps 2 --threads 1 --device cuda --no-preflight --log-every 0)
    "$ZH" train "${C[@]}" --run-dir emu >e1.txt 2>&1 || { cat e1.txt; fail "cuda run"; }
    grep -q "MFU unknown" e1.txt || { cat e1.txt; fail "the summary does not say MFU is unknown"; }
    "$ZH" train "${C[@]}" --run-dir emu2 --peak-tflops 0.001 >e2.txt 2>&1 || { cat e2.txt; fail "cuda run with a peak"; }
    "$ZH" train "${C[@]}" --run-dir emu3 --peak-tflops 0.001 --recompute >e3.txt 2>&1 ||
        { cat e3.txt; fail "cuda run with --recompute"; }
    "$ZT" train --init "$GOLD/tiny_untied_gqa" --data data --steps 1 --threads 1 --run-dir cpu >c.txt 2>&1 ||
        { cat c.txt; fail "cpu run"; }
    grep -q "HFU .*(with the recomputed forward)" e3.txt || { cat e3.txt; fail "the summary has no HFU"; }
    py emu emu2 cpu emu3 "$GOLD/tiny_untied_gqa/config.json" <<'P' || fail "run.json's backend"
a, b, c = run(sys.argv[1]), run(sys.argv[2]), run(sys.argv[3])
assert a["backend"] == "cuda" and a["device"]["backend"] == "cuda", a["device"]
# the CUDA runtime's device name (tests/cudaemu/runtime.cpp's, which holds ", sm_90 limits" itself)
assert a["device"]["name"] == "cudaemu 0 (CPU execution of the CUDA model, sm_90 limits)", a["device"]["name"]
assert a["device"]["peak_kind"] == "unknown" and a["device"]["peak_tflops_per_rank"] is None, a["device"]
s = steps(sys.argv[1] + "/metrics.jsonl")
assert all(x["mfu"] is None and x["tflops_per_rank"] > 0 and x["model_flops"] > 0 for x in s), s
assert not any(k in a["libraries"] for k in ("cublaslt", "nccl", "cudnn")), a["libraries"]  # emulated: no library loaded
assert b["device"]["peak_kind"] == "given" and b["device"]["peak_tflops_per_rank"] == 0.001, b["device"]
for x in steps(sys.argv[2] + "/metrics.jsonl"):
    assert abs(x["mfu"] - x["tflops_per_rank"] / 0.001) <= 1e-3 * x["mfu"] + 2e-6, x
assert c["backend"] == "cpu" and c["device"]["backend"] == "cpu"
# --recompute: hfu (hardware FLOPs: one more forward of every layer, a third of its FLOPs) after mfu
cfg = json.load(open(sys.argv[5]))
tokens, sq = 16, 16 * 16
layers = flops(cfg, tokens, sq) - 6 * cfg["vocab_size"] * cfg["hidden_size"] * tokens
for x in steps(sys.argv[4] + "/metrics.jsonl"):
    assert list(x)[-4:] == ["model_flops", "tflops_per_rank", "mfu", "hfu"], list(x)
    want = 1 + layers / 3 / x["model_flops"]
    assert abs(x["hfu"] / x["mfu"] - want) <= 1e-6, (x["hfu"] / x["mfu"], want)
assert "hfu" not in steps(sys.argv[2] + "/metrics.jsonl")[0], "hfu without --recompute"
print("ok: cudaemu run.json backend cuda, device %r, MFU null without a peak; cpu run backend cpu" % a["device"]["name"])
P
    echo "ok [$CASE]"
    ;;
examples)
    # every shipped config reads (train's keys and preflight's: one file serves both), and the
    # demo's is the run scripts/demo.sh launches with flags
    for f in "$SRC"/examples/*.yaml; do
        "$ZT" train --config "$f" --print-config >t.yaml 2>err.txt || { cat err.txt; fail "train --config $f"; }
        "$ZT" preflight --config "$f" --print-config >p.yaml 2>err.txt || { cat err.txt; fail "preflight --config $f"; }
    done
    "$ZT" train --config "$SRC/examples/demo.yaml" --print-config >a.yaml || fail "demo.yaml"
    "$ZT" train --model examples/tiny-qwen3 --data runs/demo-data --run-dir runs/demo --overwrite \
        --epochs 1 --micro-batch 8 --grad-accum 2 --lr 3e-3 --warmup 20 --log-every 10 --print-config >b.yaml
    cmp a.yaml b.yaml || fail "examples/demo.yaml is not scripts/demo.sh's run"
    grep -q '^expect_tokens: 1010000000$' <("$ZT" preflight --config "$SRC/examples/qwen3-32b-2x8-b300.yaml" --print-config) ||
        fail "the 32B config's preflight keys"
    [ -f "$SRC/examples/qwen3.5-27b-64k.yaml" ] || fail "no examples/qwen3.5-27b-64k.yaml"
    for tool in train preflight; do
        grep -q '^context_parallel: 8$' <("$ZT" "$tool" --config "$SRC/examples/qwen3.5-27b-64k.yaml" --print-config) ||
            fail "the Qwen3.5 64k config's context_parallel through $tool"
    done
    echo "ok [$CASE]: $(ls "$SRC"/examples/*.yaml | wc -l) example configs read by train and preflight"
    ;;
sbatch_config)
    # launch/zerotrain.sbatch with --config (mpirun inside a fake allocation of 2 tasks): the
    # preflight step gets the file, the run directory comes from it, a flag after it overrides it
    ids_data
    printf 'init: %s\ndata: %s/data\nrun_dir: %s/run\nsteps: 2\nthreads: 1\nlr: 0.5\ngate:\n  expect_tokens: 1024\n' \
        "$GOLD/tiny_untied_gqa" "$W" "$W" >job.yaml
    ZT_BIN="$ZT" ZT_LAUNCHER=mpirun SLURM_NTASKS=2 SLURM_NTASKS_PER_NODE=2 ZT_BIND=none ZT_NO_WATCH=1 \
        NCCL_SOCKET_IFNAME=lo OMPI_MCA_rmaps_base_oversubscribe=1 \
        timeout 120 bash "$SRC/launch/zerotrain.sbatch" --config job.yaml --lr 1e-3 >job.txt 2>&1 ||
        { cat job.txt; fail "the batch script"; }
    grep -q "run directory $W/run" job.txt || { cat job.txt; fail "the run directory was not taken from the file"; }
    grep -q "\[PASS\] 2 token total" job.txt || { cat job.txt; fail "preflight did not read expect_tokens from the file"; }
    py run job.yaml <<'P' || fail "run.json of the batch job"
r = run(sys.argv[1]); c = r["config"]
# the job's own flags, then --no-preflight: the gate ran as its own step before
assert c["file"] == sys.argv[2] and c["args"] == ["--config", "job.yaml", "--lr", "1e-3", "--no-preflight"], c
assert r["train"]["lr"] == 0.001, r["train"]
assert r["world_size"] == 2, r["world_size"]
print("ok: 2 ranks from", c["file"], "with --lr", r["train"]["lr"])
P
    echo "ok [$CASE]"
    ;;
*) fail "unknown case" ;;
esac
