#!/usr/bin/env bash
# The CUDA backend as a module (runtime/cuda_module.h): zerotrain links no CUDA library,
# what a process pays without and with the module, and the commands that must start on a
# host without the CUDA libraries (watch, triage, plan, preflight, pack, a CPU training run).
#   cuda_module.sh ZEROTRAIN MAXRSS SOURCE_DIR WORK_DIR CASE FAKE_MODULE
# Cases: link, rss, hidden, missing. Exit 77: cannot be exercised here (said why).
# FAKE_MODULE: a module whose ABI number is not this build's (tests/fake_cuda_module.c).
set -u
ZT=$1 MAXRSS=$2 SRC=$3 WORK=$4 CASE=$5 FAKE=$6
W="$WORK/$CASE"
rm -rf "$W" && mkdir -p "$W"
GOLD="$SRC/tests/golden"
MOD="$(dirname "$ZT")/libzerotrain_cuda.so"
CUDA_RE='libcuda|libcudart|libcublas|libcudnn|libnccl|libnvrtc'
fail() { echo "FAIL [$CASE]: $*"; exit 1; }

small_data() {  # 80-token-vocab ids data for the golden tiny configs
    awk 'BEGIN{srand(7); for(d=0; d<64; d++){ line=""; for(i=0;i<40;i++) line=line int(rand()*80) " "; print line }}' \
        >"$W/docs.txt"
    "$ZT" pack --quiet --input ids --vocab-size 80 --eos 2 --seq-len 12 -o "$W/data" "$W/docs.txt" >/dev/null \
        || fail "pack"
}

rss_of() {  # rss_of OUTFILE CMD...: run CMD under maxrss, print its peak RSS in KiB
    local out=$1
    shift
    "$MAXRSS" "$@" >"$out" 2>&1
    local rc=$?
    sed -n 's/^maxrss_kib //p' "$out" | tail -1
    return $rc
}

case "$CASE" in
link)
    # The executable's dynamic dependencies hold no CUDA library; the module's hold them.
    ldd "$ZT" >"$W/ldd.txt" 2>&1 || fail "ldd $ZT"
    if grep -E "$CUDA_RE" "$W/ldd.txt"; then fail "zerotrain links a CUDA library (above)"; fi
    echo "ok [$CASE]: zerotrain links no CUDA, cuBLASLt, cuDNN, NCCL or NVRTC library ($(wc -l <"$W/ldd.txt") libraries)"
    "$ZT" --help >"$W/help.txt" 2>&1
    if [ -f "$MOD" ]; then
        grep -q "CUDA backend: .*libzerotrain_cuda.so (loaded for --device cuda" "$W/help.txt" \
            || { cat "$W/help.txt"; fail "--help should name the module it would load"; }
    else
        grep -q "CUDA backend: not installed" "$W/help.txt" || { cat "$W/help.txt"; fail "--help should say no module"; }
    fi
    echo "ok [$CASE]: --help says: $(grep 'CUDA backend' "$W/help.txt")"
    [ -f "$MOD" ] || { echo "no $MOD in this build (CPU-only or no NCCL): the module half is not exercised"; exit 77; }
    ldd "$MOD" >"$W/ldd_mod.txt" 2>&1 || fail "ldd $MOD"
    grep -q libcublasLt "$W/ldd_mod.txt" && grep -q libnccl "$W/ldd_mod.txt" \
        || { cat "$W/ldd_mod.txt"; fail "the module should link cuBLASLt and NCCL"; }
    echo "ok [$CASE]: the module links $(grep -cE "$CUDA_RE" "$W/ldd_mod.txt") CUDA libraries: $(grep -oE "($CUDA_RE)[A-Za-z]*\.so[.0-9]*" "$W/ldd_mod.txt" | sort -u | tr '\n' ' ')"
    ;;
rss)
    # Peak RSS (KiB) of --help, of a CPU training run, and of --device cuda loading the module
    # (then refused: no GPU here): recorded in docs/cuda.md. --help must stay small.
    small_data
    help_kib=$(rss_of "$W/help.txt" "$ZT" --help) || { cat "$W/help.txt"; fail "--help"; }
    cpu_kib=$(rss_of "$W/cpu.txt" "$ZT" train --model "$GOLD/tiny_untied_gqa" --data "$W/data" --run-dir "$W/run" \
        --steps 2 --threads 1 --device cpu --no-save-final) || { cat "$W/cpu.txt"; fail "cpu train"; }
    echo "RSS zerotrain --help: $help_kib KiB"
    echo "RSS zerotrain train --device cpu (tiny model, 2 steps): $cpu_kib KiB"
    [ "$help_kib" -lt 65536 ] || fail "--help used $help_kib KiB (>= 64 MiB): is a CUDA library loaded?"
    if [ -f "$MOD" ] && ! { command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; }; then
        mod_kib=$(rss_of "$W/cuda.txt" "$ZT" train --model "$GOLD/tiny_untied_gqa" --data "$W/data" \
            --run-dir "$W/run2" --steps 1 --device cuda)
        grep -q "sees no CUDA device" "$W/cuda.txt" || { cat "$W/cuda.txt"; fail "--device cuda should load the module and find no GPU"; }
        echo "RSS zerotrain train --device cuda (module loaded, no GPU): $mod_kib KiB"
        [ "$mod_kib" -gt "$help_kib" ] || fail "loading the module should cost memory ($mod_kib vs $help_kib KiB)"
    fi
    echo "ok [$CASE]"
    ;;
hidden)
    # Every CUDA library made unreadable (bind-mounted /dev/null, in a private mount
    # namespace): the monitoring and CPU commands start and work; --device cuda says which
    # library the module could not load; --device auto takes the cpu backend.
    [ "$(id -u)" = 0 ] && command -v unshare >/dev/null || { echo "needs root and unshare (util-linux): skipped"; exit 77; }
    unshare -m true 2>/dev/null || { echo "unshare -m not permitted here: skipped"; exit 77; }
    libs=()
    for d in /usr/local/cuda*/lib* /usr/local/cuda*/targets/*/lib /usr/lib/x86_64-linux-gnu /usr/lib64 /usr/lib; do
        [ -d "$d" ] || continue
        for f in "$d"/libcudart.so* "$d"/libcublas*.so* "$d"/libcudnn*.so* "$d"/libnccl*.so* "$d"/libnvrtc*.so* \
                 "$d"/libcuda.so*; do
            [ -f "$f" ] && libs+=("$(readlink -f "$f")")
        done
    done
    [ -f "$MOD" ] && while read -r p; do [ -f "$p" ] && libs+=("$(readlink -f "$p")"); done \
        < <(ldd "$MOD" 2>/dev/null | awk -v re="$CUDA_RE" '$1 ~ re && $3 ~ /^\// {print $3}')
    mapfile -t libs < <(printf '%s\n' "${libs[@]}" | sort -u)
    [ ${#libs[@]} -gt 0 ] || { echo "no CUDA library installed here: nothing to hide (the start is trivially fine): skipped"; exit 77; }
    echo "hiding ${#libs[@]} CUDA library files"
    small_data
    cat >"$W/inner.sh" <<'INNER'
set -u
ZT=$1 SRC=$2 W=$3 GOLD=$4 MOD=$5
shift 5
for f in "$@"; do mount --bind /dev/null "$f" || { echo "FAIL: could not hide $f"; exit 1; }; done
fail() { echo "FAIL [hidden]: $*"; exit 1; }
[ -s "$1" ] && fail "$1 is still readable"
"$ZT" --help >"$W/h.txt" 2>&1 || { cat "$W/h.txt"; fail "zerotrain --help"; }
echo "ok: --help"
"$ZT" plan --model "$SRC/examples/qwen3-0.6b" --gpu H100 --world 8 --worlds 1,2,4,8 >"$W/plan.txt" 2>&1 \
    && grep -q "tok/s per GPU" "$W/plan.txt" || { cat "$W/plan.txt"; fail "plan"; }
echo "ok: plan"
"$ZT" pack --quiet --input ids --vocab-size 80 --eos 2 --seq-len 12 -o "$W/data2" "$W/docs.txt" >/dev/null \
    || fail "pack"
echo "ok: pack"
"$ZT" preflight --data "$W/data" --model "$GOLD/tiny_untied_gqa" --run-dir "$W/pre" >"$W/pre.txt" 2>&1 \
    || { cat "$W/pre.txt"; fail "preflight"; }
echo "ok: preflight"
"$ZT" train --model "$GOLD/tiny_untied_gqa" --data "$W/data" --run-dir "$W/run" --steps 2 --threads 1 \
    --device auto >"$W/train.txt" 2>&1 || { cat "$W/train.txt"; fail "train --device auto (cpu)"; }
grep -q "cpu backend" "$W/train.txt" || { cat "$W/train.txt"; fail "--device auto did not take the cpu backend"; }
echo "ok: train --device auto took the cpu backend"
"$ZT" watch "$W/run" --once >"$W/watch.txt" 2>&1; rc=$?
[ $rc = 0 ] && grep -q COMPLETE "$W/watch.txt" || { cat "$W/watch.txt"; fail "watch --once: rc $rc, not COMPLETE"; }
echo "ok: watch says COMPLETE"
"$ZT" triage "$SRC/tests/data/triage/node0.smi.csv" >"$W/triage.txt" 2>&1  # exit code = the verdict
grep -q "^verdict: DEADLOCK" "$W/triage.txt" || { cat "$W/triage.txt"; fail "triage"; }
echo "ok: triage (verdict DEADLOCK on the shipped sample)"
if [ -f "$MOD" ]; then
    "$ZT" train --model "$GOLD/tiny_untied_gqa" --data "$W/data" --run-dir "$W/run3" --steps 1 --device cuda \
        >"$W/cuda.txt" 2>&1 && { cat "$W/cuda.txt"; fail "--device cuda succeeded without the CUDA libraries"; }
    grep -q "libzerotrain_cuda.so was found but did not load" "$W/cuda.txt" \
        && grep -qE "libcu|libnccl|libnvrtc" "$W/cuda.txt" || { cat "$W/cuda.txt"; fail "--device cuda: unclear error"; }
    echo "ok: --device cuda: $(grep -m1 -oE '(libcu|libnccl|libnvrtc)[^:]*: [^ ].*' "$W/cuda.txt")"
fi
INNER
    unshare -m bash "$W/inner.sh" "$ZT" "$SRC" "$W" "$GOLD" "$MOD" "${libs[@]}" || fail "see above"
    echo "ok [$CASE]: all commands started with ${#libs[@]} CUDA library files hidden"
    ;;
missing)
    # No module where it is looked for: --device cuda names every path tried; cpu runs.
    small_data
    ZT_CUDA_MODULE="$W/nowhere/libzerotrain_cuda.so" "$ZT" train --model "$GOLD/tiny_untied_gqa" --data "$W/data" \
        --run-dir "$W/run" --steps 1 --device cuda >"$W/out.txt" 2>&1 && fail "--device cuda succeeded without a module"
    grep -q "built without the GPU engine, or its module libzerotrain_cuda.so is not installed" "$W/out.txt" \
        && grep -q "$W/nowhere/libzerotrain_cuda.so: no such file" "$W/out.txt" || { cat "$W/out.txt"; fail "unclear error"; }
    [ -e "$W/run/checkpoints" ] && fail "a refused run created checkpoints"
    echo "ok [$CASE]: $(grep -m1 error "$W/out.txt" | cut -c1-160)"
    printf 'not a module\n' >"$W/bad.so"
    ZT_CUDA_MODULE="$W/bad.so" "$ZT" train --model "$GOLD/tiny_untied_gqa" --data "$W/data" --run-dir "$W/run2" \
        --steps 1 --device cuda >"$W/out2.txt" 2>&1 && fail "--device cuda succeeded with a broken module"
    grep -q "was found but did not load" "$W/out2.txt" && grep -q "$W/bad.so:" "$W/out2.txt" \
        || { cat "$W/out2.txt"; fail "unclear error for a broken module"; }
    echo "ok [$CASE]: a broken module: $(grep -m1 -A1 'did not load' "$W/out2.txt" | tail -1 | cut -c1-160)"
    ZT_CUDA_MODULE="$FAKE" "$ZT" train --model "$GOLD/tiny_untied_gqa" --data "$W/data" --run-dir "$W/run3" \
        --steps 1 --device cuda >"$W/out3.txt" 2>&1 && fail "--device cuda succeeded with another build's module"
    grep -q "built for another zerotrain (module 0.0.0-other, ABI 1001" "$W/out3.txt" && grep -q "rebuild both" "$W/out3.txt" \
        || { cat "$W/out3.txt"; fail "unclear error for another build's module"; }
    echo "ok [$CASE]: another build's module: $(grep -m1 -o 'built for another.*' "$W/out3.txt" | cut -c1-160)"
    ;;
*) fail "unknown case $CASE" ;;
esac
