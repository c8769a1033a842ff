#!/usr/bin/env bash
# The CUDA backend as a module (engine/cuda_module.h): zerotrain links no CUDA library,
# what a process pays without and with the module, and the commands that must start on a
# host without the CUDA libraries (watch, triage, plan, preflight, pack, a CPU training run).
#   cuda_module.sh ZEROTRAIN MAXRSS SOURCE_DIR WORK_DIR CASE FAKE_MODULE
# Cases: link, rss, hidden, missing, build_dir, fifo, wrong_arch, relative; auto_why (the
# lines train/train.c prints: which module, why --device auto took the cpu backend).
# Exit 77: cannot be exercised here (said why).
# FAKE_MODULE: a module whose interface version is not this build's (tests/support/fake_cuda_module.c).
set -u
ZT=$1 MAXRSS=$2 SRC=$3 WORK=$4 CASE=$5 FAKE=$6
W="$WORK/$CASE"
rm -rf "$W" && mkdir -p "$W"
GOLD="$SRC/tests/golden"
MOD="$(dirname "$ZT")/libzerotrain_cuda.so"
CUDA_RE='libcuda|libcudart|libcublas|libcudnn|libnccl|libnvrtc'
fail() { echo "FAIL [$CASE]: $*"; exit 1; }
BUILD=$(cd "$(dirname "$ZT")" && pwd -P)  # the build directory (the module is built beside zerotrain)
WP=$(cd "$W" && pwd -P)                   # $W with symlinks resolved, as the loader names files

small_data() {  # 80-token-vocab ids data for the golden tiny configs
    awk 'BEGIN{srand(7); for(d=0; d<64; d++){ line=""; for(i=0;i<40;i++) line=line int(rand()*80) " "; print line }}' \
        >"$W/docs.txt"
    "$ZT" pack --quiet --input ids --vocab-size 80 --eos 2 --seq-len 12 -o "$W/data" "$W/docs.txt" >/dev/null \
        || fail "pack"
}

# train_cuda OUT [ENV=VALUE...] [-- ZEROTRAIN]: one --device cuda step of the tiny model (into OUT);
# its exit status (0: it trained, which needs a GPU; 124 or 137: still running after 30 s)
train_cuda() {
    local out=$1 zt=$ZT
    shift
    local env=()
    while [ $# -gt 0 ] && [ "$1" != "--" ]; do env+=("$1"); shift; done
    [ "${1:-}" = "--" ] && zt=$2
    timeout -k 5 30 env "${env[@]}" "$zt" train --model "$GOLD/tiny_untied_gqa" --data "$W/data" --run-dir "$W/run-$RANDOM" \
        --steps 1 --threads 1 --device cuda >"$out" 2>&1
}
# opened_build_module LD_DEBUG_OUTPUT: the loader's log (LD_DEBUG=files) shows the build
# directory's module opened
opened_build_module() { cat "$1".* 2>/dev/null | grep -q "file=$BUILD/libzerotrain_cuda.so "; }
# fake_driver CMD...: run CMD where /proc/driver/nvidia/version exists (a private mount
# namespace, root), so that --device auto looks for the CUDA module as on a GPU host
fake_driver() {
    unshare -m bash -c 'mount -t tmpfs zt-fake-driver /proc/driver && mkdir /proc/driver/nvidia &&
        echo "fake NVIDIA driver (tests/cli/cuda_module.sh)" >/proc/driver/nvidia/version && exec "$@"' fake_driver "$@"
}
can_fake_driver() { [ "$(id -u)" = 0 ] && command -v unshare >/dev/null && fake_driver true 2>/dev/null; }

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
    grep -q "built for another zerotrain (module API 10[0-9][0-9]; this executable" "$W/out3.txt" && grep -q "rebuild both" "$W/out3.txt" \
        || { cat "$W/out3.txt"; fail "unclear error for another build's module"; }
    echo "ok [$CASE]: another build's module: $(grep -m1 -o 'built for another.*' "$W/out3.txt" | cut -c1-160)"
    ;;
build_dir)
    # A copy of zerotrain elsewhere (an install) looks for the module beside itself, in
    # ../lib/zerotrain/ beside it or at $ZT_CUDA_MODULE, never in the build directory it was
    # compiled in: dlopen runs a module's constructors before any version check, and --device auto
    # then fell back to the cpu backend without a word. LD_DEBUG=files logs every object the
    # dynamic loader opens.
    small_data
    mkdir -p "$WP/inst/bin" && cp "$ZT" "$WP/inst/bin/zerotrain"
    COPY="$WP/inst/bin/zerotrain"
    if [ -f "$MOD" ]; then  # the method sees a module load: the build's zerotrain opens the one beside it
        LD_DEBUG=files LD_DEBUG_OUTPUT="$W/ld.build" train_cuda "$W/build.txt"
        opened_build_module "$W/ld.build" || { cat "$W/build.txt"; fail "LD_DEBUG did not show $ZT opening $MOD"; }
        echo "ok [$CASE]: the build's zerotrain loads $BUILD/libzerotrain_cuda.so (LD_DEBUG shows it)"
    fi
    "$COPY" --help >"$W/help.txt" 2>&1
    grep -q "CUDA backend: not installed" "$W/help.txt" || { cat "$W/help.txt"; fail "--help of a copy should find no module"; }
    LD_DEBUG=files LD_DEBUG_OUTPUT="$W/ld.cuda" train_cuda "$W/cuda.txt" -- "$COPY" && fail "--device cuda succeeded"
    opened_build_module "$W/ld.cuda" && { cat "$W/cuda.txt"; fail "a copy of zerotrain opened the build directory's module"; }
    grep -q "libzerotrain_cuda.so is not installed" "$W/cuda.txt" \
        && grep -q "$WP/inst/bin/libzerotrain_cuda.so: no such file" "$W/cuda.txt" || { cat "$W/cuda.txt"; fail "unclear error"; }
    grep -q "$BUILD/libzerotrain_cuda.so" "$W/cuda.txt" && { cat "$W/cuda.txt"; fail "the build directory is among the paths looked at"; }
    echo "ok [$CASE]: a copy of zerotrain does not look in $BUILD: $(grep -c 'no such file' "$W/cuda.txt") paths looked at"
    if can_fake_driver; then  # --device auto on a host with an NVIDIA driver: the issue's case
        LD_DEBUG=files LD_DEBUG_OUTPUT="$W/ld.auto" fake_driver "$COPY" train --model "$GOLD/tiny_untied_gqa" \
            --data "$W/data" --run-dir "$W/run-auto" --steps 1 --threads 1 --device auto >"$W/auto.txt" 2>&1 \
            || { cat "$W/auto.txt"; fail "--device auto (fake driver, no module installed)"; }
        opened_build_module "$W/ld.auto" && fail "--device auto of a copy opened the build directory's module"
        grep -q "cpu backend" "$W/auto.txt" || { cat "$W/auto.txt"; fail "--device auto did not take the cpu backend"; }
        echo "ok [$CASE]: --device auto of a copy on a host with an NVIDIA driver opens nothing from $BUILD"
    fi
    # the installed layouts: beside the executable, then ../lib/zerotrain/ (a module of another build here)
    cp "$FAKE" "$WP/inst/bin/libzerotrain_cuda.so"
    train_cuda "$W/beside.txt" -- "$COPY"
    grep -q "$WP/inst/bin/libzerotrain_cuda.so: built for another zerotrain" "$W/beside.txt" \
        || { cat "$W/beside.txt"; fail "the module beside the copy was not the one tried"; }
    mkdir -p "$WP/inst/lib/zerotrain" && mv "$WP/inst/bin/libzerotrain_cuda.so" "$WP/inst/lib/zerotrain/"
    "$COPY" --help >"$W/help2.txt" 2>&1
    grep -q "CUDA backend: $WP/inst/lib/zerotrain/libzerotrain_cuda.so" "$W/help2.txt" \
        || { cat "$W/help2.txt"; fail "--help should name ../lib/zerotrain/libzerotrain_cuda.so"; }
    train_cuda "$W/lib.txt" -- "$COPY"
    grep -q "$WP/inst/lib/zerotrain/libzerotrain_cuda.so: built for another zerotrain" "$W/lib.txt" \
        || { cat "$W/lib.txt"; fail "../lib/zerotrain/ beside the copy was not tried"; }
    echo "ok [$CASE]: the copy tries the module beside it, then ../lib/zerotrain/"
    ;;
fifo)
    # $ZT_CUDA_MODULE naming a FIFO (or a symlink to one, or a directory) is refused before
    # dlopen, whose open() would block until something writes to the FIFO.
    small_data
    mkfifo "$W/module.fifo" || { echo "mkfifo failed: skipped"; exit 77; }
    ln -s module.fifo "$W/link.so"
    mkdir "$W/dir.so"
    for m in module.fifo link.so dir.so; do
        train_cuda "$W/$m.txt" ZT_CUDA_MODULE="$W/$m"; rc=$?
        # (train catches SIGTERM to stop cleanly, and open() restarts: KILL after 5 s more)
        [ $rc = 124 ] || [ $rc = 137 ] && fail "ZT_CUDA_MODULE=$W/$m: zerotrain blocked (killed after 30 s)"
        [ $rc = 0 ] && fail "ZT_CUDA_MODULE=$W/$m: --device cuda succeeded"
    done
    grep -q "$W/module.fifo: is a FIFO (named pipe), not a regular file" "$W/module.fifo.txt" \
        || { cat "$W/module.fifo.txt"; fail "unclear error for a FIFO"; }
    grep -q "$W/link.so: is a FIFO (named pipe), not a regular file" "$W/link.so.txt" \
        || { cat "$W/link.so.txt"; fail "unclear error for a symlink to a FIFO"; }
    grep -q "$W/dir.so: is a directory, not a regular file" "$W/dir.so.txt" || { cat "$W/dir.so.txt"; fail "a directory"; }
    echo "ok [$CASE]: $(grep -m1 'FIFO' "$W/module.fifo.txt" | sed 's/^ *//')"
    # a symlink to a regular file is the file
    ln -s "$FAKE" "$W/fake-link.so"
    train_cuda "$W/link2.txt" ZT_CUDA_MODULE="$W/fake-link.so"
    grep -q "built for another zerotrain (module API 10[0-9][0-9]" "$W/link2.txt" || { cat "$W/link2.txt"; fail "a symlink to a module"; }
    echo "ok [$CASE]: a symlink to a module file is followed"
    ;;
wrong_arch)
    # A module for another machine: glibc's dlopen says "No such file or directory" (it skips
    # such a file on a search path); the loader reads the ELF header and says what it is.
    small_data
    case "$(uname -m)" in
    x86_64) other=183 name=AArch64 ;;
    aarch64) other=62 name=x86-64 ;;
    *) echo "no wrong-machine case for $(uname -m): skipped"; exit 77 ;;
    esac
    cp "$FAKE" "$W/other.so"  # e_machine: 2 bytes little-endian at offset 18, high byte 0 for both
    printf "$(printf '\\%03o' "$other")" | dd of="$W/other.so" bs=1 seek=18 conv=notrunc 2>/dev/null  # < 256
    train_cuda "$W/out.txt" ZT_CUDA_MODULE="$W/other.so" && fail "--device cuda succeeded with another machine's module"
    grep -q "$W/other.so: an ELF file built for $name (e_machine $other); this zerotrain runs on" "$W/out.txt" \
        || { cat "$W/out.txt"; fail "unclear error for a module of another machine"; }
    grep -q "No such file or directory" "$W/out.txt" && { cat "$W/out.txt"; fail "the module exists: not 'No such file'"; }
    echo "ok [$CASE]: $(grep -m1 -o 'an ELF file built for.*' "$W/out.txt")"
    cp "$FAKE" "$W/class32.so"  # EI_CLASS at offset 4: ELFCLASS32
    printf '\x01' | dd of="$W/class32.so" bs=1 seek=4 conv=notrunc 2>/dev/null
    train_cuda "$W/out32.txt" ZT_CUDA_MODULE="$W/class32.so" && fail "--device cuda succeeded with a 32-bit module"
    grep -q "$W/class32.so: .*ELFCLASS32" "$W/out32.txt" || { cat "$W/out32.txt"; fail "unclear error for a 32-bit module"; }
    echo "ok [$CASE]: $(grep -m1 -o 'class32.so: .*' "$W/out32.txt")"
    ;;
relative)
    # A relative $ZT_CUDA_MODULE is a file relative to the current directory: dlopen of a
    # name without a slash would search the library path instead (and find nothing, or
    # another file of that name).
    small_data
    mkdir -p "$WP/mods" && cp "$FAKE" "$WP/mods/fake.so"
    (cd "$WP/mods" && train_cuda "$W/out.txt" ZT_CUDA_MODULE=fake.so) && fail "--device cuda succeeded"
    grep -q "fake.so ($WP/mods/fake.so): built for another zerotrain (module API 10[0-9][0-9]" "$W/out.txt" \
        || { cat "$W/out.txt"; fail "ZT_CUDA_MODULE=fake.so (in its directory) was not the file opened"; }
    (cd "$WP" && train_cuda "$W/out2.txt" ZT_CUDA_MODULE=mods/fake.so)
    grep -q "($WP/mods/fake.so): built for another zerotrain" "$W/out2.txt" || { cat "$W/out2.txt"; fail "mods/fake.so"; }
    echo "ok [$CASE]: $(grep -m1 -o 'fake.so (.*): built for another zerotrain' "$W/out.txt")"
    ;;
auto_why)
    # train says which module it loaded (rank 0, stdout) and why --device auto took the cpu
    # backend on a host with an NVIDIA driver (train/train.c choose_device).
    small_data
    if [ -f "$MOD" ]; then
        train_cuda "$W/cuda.txt" && { echo "a GPU is present: skipped"; exit 77; }
        grep -q "^cuda module: $BUILD/libzerotrain_cuda.so (zerotrain [0-9.]*, API [0-9]*)" "$W/cuda.txt" \
            || { cat "$W/cuda.txt"; fail "--device cuda should name the module it loaded"; }
        echo "ok [$CASE]: $(grep -m1 '^cuda module' "$W/cuda.txt")"
    fi
    can_fake_driver || { echo "needs root and unshare -m to fake an NVIDIA driver: skipped"; exit 77; }
    mkdir -p "$WP/inst/bin" && cp "$ZT" "$WP/inst/bin/zerotrain"
    fake_driver "$WP/inst/bin/zerotrain" train --model "$GOLD/tiny_untied_gqa" --data "$W/data" --run-dir "$W/run1" \
        --steps 1 --threads 1 --device auto >"$W/none.txt" 2>&1 || { cat "$W/none.txt"; fail "--device auto, no module"; }
    grep -q "warning: rank 0: --device auto takes the cpu backend: .*libzerotrain_cuda.so is not installed" "$W/none.txt" \
        || { cat "$W/none.txt"; fail "--device auto should say why it took the cpu backend (no module)"; }
    echo "ok [$CASE]: $(grep -m1 'device auto takes' "$W/none.txt" | cut -c1-200)"
    if [ -f "$MOD" ]; then
        fake_driver "$ZT" train --model "$GOLD/tiny_untied_gqa" --data "$W/data" --run-dir "$W/run2" --steps 1 \
            --threads 1 --device auto >"$W/nodev.txt" 2>&1 || { cat "$W/nodev.txt"; fail "--device auto, module, no GPU"; }
        grep -q "^cuda module: $BUILD/libzerotrain_cuda.so" "$W/nodev.txt" \
            && grep -q "takes the cpu backend: the CUDA module $BUILD/libzerotrain_cuda.so .* loaded but sees no CUDA device: cudaGetDeviceCount" "$W/nodev.txt" \
            || { cat "$W/nodev.txt"; fail "--device auto should name the module and say it sees no device"; }
        echo "ok [$CASE]: $(grep -m1 'device auto takes' "$W/nodev.txt" | cut -c1-240)"
    fi
    ;;
*) fail "unknown case $CASE" ;;
esac
