#!/usr/bin/env bash
# Strong scaling of the real trainer: `zerotrain train` under mpirun at several rank
# counts on the same global batch (grad-accum = global batch / (ranks x micro-batch)),
# a fixed number of measured steps after warm-up, read back from RUN/metrics.jsonl.
# Prints the field report's table (tok/s, tok/s per rank, projected epoch hours and
# core-h or GPU-h, scaling efficiency, compute vs exposed communication) plus per-rank
# work and communication volume, which stay meaningful on oversubscribed CPU ranks.
# `--check` re-derives the table from the raw metrics and fails on any inconsistency.
# Two-node mode (--hostfile, or ZT_SCALING_HOSTFILE): the ranks are spread evenly over
# the hostfile's nodes, and with --link-bytes CMD (ZT_SCALING_LINK_BYTES) the bytes that
# crossed the node link during each run (CMD prints a cumulative byte counter, e.g. the
# sum of the nodes' tx_bytes) become two more columns: MB per step over the link and the
# link's share of all the bytes the ranks moved. Without them the table is as before.
# --shard-group G|node runs every rank count with hybrid sharding (train's flag of that name);
# the volume check then expects (G-1)/G instead of (W-1)/W.
# Needs only bash, awk and mpirun. See benchmarks/README.md and docs/benchmarks.md.
set -euo pipefail

SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
ZT="$SRC/build/zerotrain"
MODEL="$SRC/examples/tiny-qwen3/config.json"
CORPUS="$SRC/examples/data/python-reference.txt"
DATA="" WORK="" OUT="" TSV=""
RANKS="1 2 4 8 16"
GLOBAL=16 MB=1 SEQ=256 STEPS=8 WARMUP=2 THREADS=1 EPOCH_TOKENS=1.01e9 DEVICE=cpu CHECK=0 TIMEOUT=1800
MPIRUN_CMD="mpirun --oversubscribe --allow-run-as-root --bind-to none"
HOSTFILE=${ZT_SCALING_HOSTFILE:-} LINK_CMD=${ZT_SCALING_LINK_BYTES:-} SHARD=""
EXTRA=()

usage() {
    cat <<EOF
usage: benchmarks/strong_scaling.sh [options] [-- extra zerotrain train flags]

Runs \`zerotrain train\` under mpirun at each rank count on the same global batch and
prints the strong-scaling table.

  --zerotrain PATH     the trainer (default: build/zerotrain)
  --model CONFIG       Qwen3 config.json (default: examples/tiny-qwen3/config.json)
  --data DIR           a packed dataset (default: pack examples/data/python-reference.txt as bytes)
  --seq-len S          block length when packing the default data (default $SEQ)
  --ranks "LIST"       rank counts (default "$RANKS"); the first is the efficiency baseline
  --global-batch G     blocks per optimizer step for every rank count (default $GLOBAL); must be a
                       multiple of ranks x micro-batch for each rank count
  --micro-batch B      blocks per forward/backward (default $MB)
  --steps N            measured steps (default $STEPS)
  --warmup N           steps run first and not measured (default $WARMUP)
  --threads T          threads per rank (default $THREADS)
  --epoch-tokens T     tokens per epoch for the projection (default $EPOCH_TOKENS, the field's ~1.01B)
  --device D           cpu (default) or cuda: passed to train; cuda labels the cost GPU-h
  --mpirun "CMD"       launcher prefix (default: "$MPIRUN_CMD"); add --hostfile etc. here
  --timeout S          per-run wall-clock limit in seconds (default $TIMEOUT)
  --hostfile FILE      two-node (multi-node) mode: mpirun --hostfile FILE, ranks spread evenly
                       over its nodes (--map-by ppr:RANKS/NODES:node); env ZT_SCALING_HOSTFILE
  --link-bytes "CMD"   a command printing the bytes that have crossed the node link so far
                       (a counter); adds the MB per step over the link and its share of all the
                       bytes the ranks moved; env ZT_SCALING_LINK_BYTES
  --shard-group G      hybrid sharding: shards over groups of G ranks (or \`node\`: the ranks of one node),
                       replicated across the groups (train --shard-group); default: full shard
  --work DIR           run directories and default data (default: a new directory under /tmp)
  --out FILE           also write the table and the machine description as markdown
  --tsv FILE           also write the table as tab-separated values
  --check              verify the table against the raw metrics (tokens add up, cost = ranks x hours, ...)
  -h, --help           this text
EOF
}

die() { echo "strong_scaling: error: $*" >&2; exit 1; }
while [ $# -gt 0 ]; do
    case "$1" in
    --zerotrain) ZT=$2; shift 2 ;;
    --model) MODEL=$2; shift 2 ;;
    --data) DATA=$2; shift 2 ;;
    --seq-len) SEQ=$2; shift 2 ;;
    --ranks) RANKS=$2; shift 2 ;;
    --global-batch) GLOBAL=$2; shift 2 ;;
    --micro-batch) MB=$2; shift 2 ;;
    --steps) STEPS=$2; shift 2 ;;
    --warmup) WARMUP=$2; shift 2 ;;
    --threads) THREADS=$2; shift 2 ;;
    --epoch-tokens) EPOCH_TOKENS=$2; shift 2 ;;
    --device) DEVICE=$2; shift 2 ;;
    --mpirun) MPIRUN_CMD=$2; shift 2 ;;
    --timeout) TIMEOUT=$2; shift 2 ;;
    --hostfile) HOSTFILE=$2; shift 2 ;;
    --link-bytes) LINK_CMD=$2; shift 2 ;;
    --shard-group) SHARD=$2; shift 2 ;;
    --work) WORK=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --tsv) TSV=$2; shift 2 ;;
    --check) CHECK=1; shift ;;
    -h|--help) usage; exit 0 ;;
    --) shift; EXTRA=("$@"); break ;;
    *) usage >&2; die "unknown option '$1'" ;;
    esac
done

isint() { [[ $2 =~ ^[0-9]+$ ]] && [ "$2" -ge 1 ] || die "$1 must be a positive integer, got '$2'"; }
isint --global-batch "$GLOBAL"; isint --micro-batch "$MB"; isint --steps "$STEPS"; isint --threads "$THREADS"
isint --seq-len "$SEQ"; isint --timeout "$TIMEOUT"
[[ $WARMUP =~ ^[0-9]+$ ]] || die "--warmup must be an integer >= 0, got '$WARMUP'"
[ -x "$ZT" ] || die "$ZT is not an executable (build first: bash scripts/build.sh, or pass --zerotrain)"
[ -f "$MODEL" ] || [ -d "$MODEL" ] || die "--model $MODEL: no such file or directory"
read -r -a RANK_LIST <<<"$RANKS"
[ ${#RANK_LIST[@]} -ge 1 ] || die "--ranks is empty"
for w in "${RANK_LIST[@]}"; do
    isint "--ranks entry" "$w"
    [ $((GLOBAL % (w * MB))) -eq 0 ] ||
        die "--global-batch $GLOBAL blocks is not a multiple of $w ranks x micro-batch $MB: the global batch must be the same at every rank count"
done
NODES=1
if [ -n "$HOSTFILE" ]; then
    [ -r "$HOSTFILE" ] || die "--hostfile $HOSTFILE is not readable"
    NODES=$(grep -c -v -E '^[[:space:]]*(#|$)' "$HOSTFILE")
    [ "$NODES" -ge 1 ] || die "--hostfile $HOSTFILE lists no node"
    for w in "${RANK_LIST[@]}"; do
        [ $((w % NODES)) -eq 0 ] || die "--ranks entry $w does not spread evenly over the $NODES nodes of $HOSTFILE"
    done
fi
[ -z "$SHARD" ] || [ "$SHARD" = node ] || isint --shard-group "$SHARD"
# the shard group at W ranks (W itself at full shard)
group_of() { if [ -z "$SHARD" ]; then echo "$1"; elif [ "$SHARD" = node ]; then echo $(($1 / NODES)); else echo "$SHARD"; fi; }
link_bytes() { bash -c "$LINK_CMD" | awk 'NF { s += $1 } END { printf "%.0f\n", s }'; }
if [ -n "$LINK_CMD" ]; then link_bytes >/dev/null || die "--link-bytes command failed: $LINK_CMD"; fi
case "$DEVICE" in cpu) COST="core-h" ;; *) COST="GPU-h" ;; esac
[ -n "$WORK" ] || WORK=$(mktemp -d /tmp/zt-strong-scaling.XXXXXX)
mkdir -p "$WORK"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo unknown)

if [ -z "$DATA" ]; then
    DATA="$WORK/data"
    rm -rf "$DATA"
    "$ZT" pack --quiet --input bytes --seq-len "$SEQ" "$CORPUS" -o "$DATA" >"$WORK/pack.txt" 2>&1 ||
        { cat "$WORK/pack.txt" >&2; die "packing $CORPUS failed"; }
fi
[ -f "$DATA/dataset.json" ] || die "--data $DATA: no dataset.json (make one with zerotrain pack)"
BLOCKS=$(awk -F'"blocks"[[:space:]]*:[[:space:]]*' 'NF > 1 { split($2, a, /[,}]/); s += a[1] } END { print s + 0 }' "$DATA/dataset.json")
NEED=$(( (WARMUP + STEPS) * GLOBAL ))
# (dataset.json lists "blocks" per file; the trainer checks again, this only fails early and clearly)
[ "$BLOCKS" -ge "$NEED" ] || die "$DATA holds $BLOCKS blocks but $((WARMUP + STEPS)) steps x $GLOBAL blocks need $NEED"

machine() {
    echo "- date: $(date -u +%Y-%m-%dT%H:%MZ)"
    echo "- zerotrain: $(cd "$SRC" && git rev-parse --short HEAD 2>/dev/null || echo unknown) ($ZT)"
    echo "- cpu: $(awk -F': ' '/model name/ { print $2; exit }' /proc/cpuinfo 2>/dev/null || echo unknown), $(nproc) cores visible"
    echo "- memory: $(awk '/MemTotal/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo 2>/dev/null)"
    echo "- os: $(uname -sr)"
    echo "- load average (1/5/15 min): $LOAD_BEFORE before the runs, $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null) after"
    echo "- mpi: $(${MPIRUN_CMD%% *} --version 2>/dev/null | head -1)"
    if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
        echo "- gpus: $(nvidia-smi -L | sed 's/ (UUID.*//' | sort | uniq -c | sed 's/^ *//' | paste -sd';' -)"
    else
        echo "- gpus: none"
    fi
}

# ---- run every rank count ------------------------------------------------------------
for w in "${RANK_LIST[@]}"; do
    ga=$((GLOBAL / (w * MB)))
    run="$WORK/ranks-$w"
    rm -rf "$run"
    echo "strong_scaling: $w rank(s) x micro-batch $MB x grad-accum $ga = $GLOBAL blocks per step, $((WARMUP + STEPS)) steps ..." >&2
    place=()
    [ -z "$HOSTFILE" ] || place=(--hostfile "$HOSTFILE" --map-by "ppr:$((w / NODES)):node")
    [ -z "$LINK_CMD" ] || link0=$(link_bytes)
    shard=()
    [ -z "$SHARD" ] || shard=(--shard-group "$SHARD")
    # shellcheck disable=SC2086 # MPIRUN_CMD is a command line by design
    if ! timeout "$TIMEOUT" $MPIRUN_CMD -n "$w" ${place[@]+"${place[@]}"} -x OMP_NUM_THREADS="$THREADS" -x OPENBLAS_NUM_THREADS="$THREADS" \
        "$ZT" train --model "$MODEL" --data "$DATA" --run-dir "$run" --steps $((WARMUP + STEPS)) \
        --micro-batch "$MB" --grad-accum "$ga" --threads "$THREADS" --device "$DEVICE" --schedule constant \
        --no-save-final --no-preflight --log-every 0 ${shard[@]+"${shard[@]}"} ${EXTRA[@]+"${EXTRA[@]}"} \
        >"$WORK/ranks-$w.log" 2>&1; then
        tail -20 "$WORK/ranks-$w.log" >&2
        die "the $w-rank run failed (log: $WORK/ranks-$w.log)"
    fi
    [ -z "$LINK_CMD" ] || echo $(( $(link_bytes) - link0 )) >"$WORK/ranks-$w.link"
done

# ---- the table ---------------------------------------------------------------------------
# One row per rank count from rank 0's metrics.jsonl (steps after the warm-up) and run.json.
num() {  # num FIELD: the number after "FIELD": on each line (cJSON or the trainer's compact writer)
    awk -v f="\"$1\"" '{ i = index($0, f); if (!i) next; s = substr($0, i + length(f)); sub(/^[[:space:]]*:[[:space:]]*/, "", s);
        match(s, /^-?[0-9.eE+-]+/); print substr(s, RSTART, RLENGTH) }'
}
TABLE="$WORK/table.tsv"
{
    printf 'ranks\tthreads\tmicro_batch\tgrad_accum\tseq_len\ttokens_per_step\tsteps\ttokens\tseconds\ttok_s\ttok_s_per_rank\tepoch_hours\tcost_hours\tefficiency\tcompute_frac\tcomm_frac\tstep_time_s\ttokens_per_rank_step\tgflop_per_rank_step\tgathered_mb_per_rank_step\tscattered_mb_per_rank_step\n'
    for w in "${RANK_LIST[@]}"; do
        run="$WORK/ranks-$w"
        params=$(num param_count <"$run/run.json" | head -1)
        layers=$(num num_hidden_layers <"$run/run.json" | head -1)
        hidden=$(num hidden_size <"$run/run.json" | head -1)
        seq=$(num seq_len <"$run/run.json" | head -1)
        awk -v w="$w" -v th="$THREADS" -v mb="$MB" -v ga=$((GLOBAL / (w * MB))) -v seq="$seq" -v warm="$WARMUP" \
            -v et="$EPOCH_TOKENS" -v P="$params" -v L="$layers" -v d="$hidden" '
        function get(f,   i, s) { i = index($0, "\"" f "\":"); if (!i) return ""; s = substr($0, i + length(f) + 3);
                                  match(s, /^-?[0-9.eE+-]+/); return substr(s, RSTART, RLENGTH) + 0 }
        { n++; tok = get("tokens"); if (n <= warm) { tok0 = tok; next }
          k++; t += get("step_time_s"); c += get("compute_s"); q += get("comm_wait_s");
          g += get("bytes_gathered"); sc += get("bytes_scattered"); last = tok }
        END {
            if (k < 1) { print "no measured steps for " w " ranks" > "/dev/stderr"; exit 1 }
            tokens = last - tok0; tps = tokens / t; per = tps / w; hours = et / tps / 3600
            fpt = 6 * P + 12 * L * seq * d  # FLOPs per token, the field convention (docs/plan.md)
            rtok = mb * ga * seq
            printf "%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%.4f\t%.2f\t%.3f\t%.6g\t%.6g\t%s\t%.4f\t%.4f\t%.5f\t%d\t%.6g\t%.6g\t%.6g\n",
                w, th, mb, ga, seq, tokens / k, k, tokens, t, tps, per, hours, w * th * hours, "-", c / t, q / t, t / k,
                rtok, rtok * fpt / 1e9, g / k / 1e6, sc / k / 1e6
        }' "$run/metrics.jsonl"
    done
} >"$TABLE.raw"
# efficiency = tok/s per rank against the first rank count's
awk -F'\t' 'BEGIN { OFS = "\t" } NR == 1 { print; next } NR == 2 { base = $11 } { $14 = sprintf("%.4f", $11 / base); print }' \
    "$TABLE.raw" >"$TABLE"
rm -f "$TABLE.raw"
if [ -n "$LINK_CMD" ]; then
    # link bytes over the whole run (warm-up, start-up and the launcher's own traffic
    # included) per step; share = link bytes / all bytes the W ranks gathered + scattered
    for w in "${RANK_LIST[@]}"; do echo "$w $(cat "$WORK/ranks-$w.link")"; done >"$WORK/link.txt"
    awk -F'\t' -v OFS='\t' -v nsteps=$((WARMUP + STEPS)) 'FNR == NR { split($0, a, " "); lb[a[1]] = a[2]; next }
        FNR == 1 { print $0, "link_mb_per_step", "link_share"; next }
        { moved = $1 * ($20 + $21) * 1e6 * nsteps; print $0, sprintf("%.6g", lb[$1] / nsteps / 1e6), sprintf("%.4f", moved > 0 ? lb[$1] / moved : 0) }' \
        "$WORK/link.txt" "$TABLE" >"$TABLE.link" && mv "$TABLE.link" "$TABLE"
fi

render() {
    local model_desc
    model_desc=$(awk -F'\t' 'NR == 2 { printf "seq %d, global batch %d tokens per step", $5, $6 }' "$TABLE")
    local lh="" ls=""
    [ -z "$LINK_CMD" ] || { lh=" MB over the node link / step | node link share |"; ls="---:|---:|"; }
    echo "| ranks | grad-accum | tok/s | tok/s per rank | epoch hours | $COST per epoch | efficiency | compute | exposed comm | step s | tokens / rank / step | GFLOP / rank / step | MB gathered / rank / step | MB scattered / rank / step |$lh"
    echo "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|$ls"
    awk -F'\t' -v link="${LINK_CMD:+1}" 'NR > 1 { printf "| %d | %d | %.0f | %.1f | %.1f | %.1f | %.0f%% | %.0f%% | %.0f%% | %.3f | %d | %.3g | %.3g | %.3g |",
        $1, $4, $10, $11, $12, $13, 100 * $14, 100 * $15, 100 * $16, $17, $18, $19, $20, $21
        if (link) printf " %.3g | %.0f%% |", $22, 100 * $23; printf "\n" }' "$TABLE"
    echo
    echo "$model_desc; $STEPS measured steps after $WARMUP warm-up; projection for $EPOCH_TOKENS tokens per epoch;"
    echo "$COST = ranks x $THREADS thread(s) per rank x epoch hours; efficiency = tok/s per rank / that at ${RANK_LIST[0]} rank(s);"
    echo "compute and exposed comm are rank 0's shares of its step time; bytes are rank 0's (fp32 on the CPU backend)."
    [ -z "$SHARD" ] || echo "hybrid sharding: --shard-group $SHARD (gathers and reduce-scatters inside a group; the replica all-reduce is not in the gathered/scattered columns)."
    [ -z "$HOSTFILE" ] || echo "ranks spread over the $NODES nodes of $HOSTFILE (--map-by ppr:ranks/$NODES:node)."
    [ -z "$LINK_CMD" ] || echo "node link: bytes on the wire (frames, headers included) from \`$LINK_CMD\` over each whole run / its $((WARMUP + STEPS)) steps; share = those / all the bytes the ranks gathered + scattered."
}

echo
echo "strong scaling: ${MODEL#"$SRC"/} ($(num param_count <"$WORK/ranks-${RANK_LIST[0]}/run.json" | head -1) parameters), data $DATA"
render
echo
machine
if [ -n "$OUT" ]; then
    {
        echo "### Strong scaling: ${MODEL#"$SRC"/}, ranks ${RANK_LIST[*]}"
        echo
        render
        echo
        echo "Machine:"
        echo
        machine
        echo
        echo "Command: \`benchmarks/strong_scaling.sh --ranks \"$RANKS\" --global-batch $GLOBAL --micro-batch $MB --steps $STEPS --warmup $WARMUP --threads $THREADS --seq-len $SEQ${SHARD:+ --shard-group $SHARD}\`"
    } >"$OUT"
fi
[ -z "$TSV" ] || cp "$TABLE" "$TSV"

# ---- consistency check ------------------------------------------------------------------
if [ "$CHECK" = 1 ]; then
    fail=0
    bad() { echo "strong_scaling: check FAILED: $*" >&2; fail=1; }
    rows=$(($(wc -l <"$TABLE") - 1))
    [ "$rows" -eq ${#RANK_LIST[@]} ] || bad "$rows rows for ${#RANK_LIST[@]} rank counts"
    for w in "${RANK_LIST[@]}"; do
        run="$WORK/ranks-$w"
        n=$(wc -l <"$run/metrics.jsonl")
        [ "$n" -eq $((WARMUP + STEPS)) ] || bad "$w ranks: $n steps in metrics.jsonl, expected $((WARMUP + STEPS))"
        # the trainer's own record of the batch: run.json tokens_per_step, cumulative tokens in metrics
        tps=$(num tokens_per_step <"$run/run.json" | head -1)
        lasttok=$(tail -1 "$run/metrics.jsonl" | num tokens | head -1)
        awk -F'\t' -v w="$w" -v tps="$tps" -v last="$lasttok" -v steps="$STEPS" -v warm="$WARMUP" -v G="$GLOBAL" \
            -v et="$EPOCH_TOKENS" '
            function off(a, b) { return (a > b ? a - b : b - a) > 1e-3 * (b > 0 ? b : 1) }
            NR > 1 && $1 == w {
                found = 1
                if ($6 != G * $5) { print w " ranks: " $6 " tokens per step, expected " G " blocks x " $5; e = 1 }
                if ($6 != tps) { print w " ranks: table says " $6 " tokens per step, run.json " tps; e = 1 }
                if ($8 != steps * $6) { print w " ranks: " $8 " measured tokens != " steps " steps x " $6; e = 1 }
                if (last != (steps + warm) * $6) { print w " ranks: metrics.jsonl counts " last " tokens"; e = 1 }
                if ($18 * $1 != $6) { print w " ranks: tokens per rank " $18 " x " $1 " != " $6; e = 1 }
                if ($1 * $3 * $4 != G) { print w " ranks: ranks x micro-batch x grad-accum != " G; e = 1 }
                if (off($10, $8 / $9)) { print w " ranks: tok/s " $10 " != tokens / seconds"; e = 1 }
                if (off($11 * $1, $10)) { print w " ranks: tok/s per rank x ranks != tok/s"; e = 1 }
                if (off($12, et / $10 / 3600)) { print w " ranks: epoch hours " $12 " != epoch tokens / tok/s"; e = 1 }
                if (off($13, $1 * $2 * $12)) { print w " ranks: cost " $13 " != ranks x threads x hours"; e = 1 }
                # compute_s + comm_wait_s = step_time_s per step, each written to 1e-4 s: allow that
                # rounding (1.5e-4 s a step) on top of 1%, or short steps fail on the digits alone
                tol = 0.01 + 1.5e-4 / $17
                if ($15 + $16 > 1 + tol || $15 + $16 < 1 - tol) { print w " ranks: compute + comm = " $15 + $16 " (tolerance " tol ")"; e = 1 }
            }
            END { if (!found) { print "no row for " w " ranks"; e = 1 } exit e }' "$TABLE" >&2 || fail=1
    done
    # efficiency against the first row, and communication volume: per micro-batch each rank moves
    # (G-1)/G of the same unit sizes (G: the shard group, W at full shard; up to the padding), none at G = 1
    for w in "${RANK_LIST[@]}"; do echo "$w $(group_of "$w")"; done >"$WORK/groups.txt"
    awk -F'\t' 'FNR == NR { split($0, a, " "); grp[a[1]] = a[2]; next }
        FNR == 2 { base = $11 }
        FNR > 1 {
            d = $14 - $11 / base; if (d > 1e-3 || d < -1e-3) { print $1 " ranks: efficiency " $14 " != " $11 / base; e = 1 }
            g = grp[$1]
            if (g == 1 && ($20 != 0 || $21 != 0)) { print $1 " rank(s), groups of 1: moved bytes"; e = 1 }
            if (g > 1) { v = $20 / $4 / ((g - 1) / g); s = $21 / $4 / ((g - 1) / g)
                if (!ref) { ref = v; refs = s }
                if (v < 0.97 * ref || v > 1.03 * ref || s < 0.97 * refs || s > 1.03 * refs) {
                    print $1 " ranks: bytes per micro-batch / ((G-1)/G) = " v ", " s " vs " ref ", " refs; e = 1 } }
        }
        END { exit e }' "$WORK/groups.txt" "$TABLE" >&2 || fail=1
    [ "$fail" = 0 ] || die "the table is inconsistent (work directory: $WORK)"
    echo "strong_scaling: check passed: ${#RANK_LIST[@]} rank counts, the same $((GLOBAL)) blocks per step, tokens, hours and $COST consistent"
fi
