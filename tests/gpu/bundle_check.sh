#!/usr/bin/env bash
# Proves the GPU bundle (tests/gpu/bundle.sh) on this CPU machine before a lease is spent on it:
# gathers a bundle from BUILD (the normal build: the bundle's code path, not its sm_90/sm_100
# build), unpacks bundle.tgz (what travels) into WORK, and inside a mount namespace where this
# machine's Open MPI, PMIx, HDF5 and every other library the bundle holds are hidden (tmpfs over
# their folders, /dev/null bound over each library file, orterun and orted) checks that
#   - ldd resolves every bundled binary and plugin to the bundle, glibc or (the module only) the
#     CUDA libraries, nothing else and nothing missing,
#   - the bundled zerotrain packs, trains a tiny model as a singleton, stops on SIGUSR1 with a
#     checkpoint, resumes under the bundle's `mpirun -n 1` to the same losses as an
#     uninterrupted run, and exports the checkpoint (parallel HDF5, cJSON, libyaml, Open MPI),
#   - `train --device cuda` loads the CUDA module from the bundle and stops at "no GPU", not
#     at the loader.
# Exit 0 pass, 1 fail, 77 skip (no mount namespaces here).
#   bundle_check.sh BUILD SOURCE_DIR WORK      gather from BUILD first (the ctest)
#   bundle_check.sh BUNDLE.tgz SOURCE_DIR WORK the bundle that will travel (gpu-bundle/bundle.tgz)
set -u
if [ "${1:-}" = --inside ]; then INSIDE=1; shift; else INSIDE=0; fi
SRC=$(cd "$2" && pwd) WORK=$3
case "$1" in
*.tgz) TGZ=$(readlink -f "$1") BUILD='' ;;
*) BUILD=$(cd "$1" && pwd) TGZ='' ;;
esac
mkdir -p "$WORK" && WORK=$(cd "$WORK" && pwd)
[ "$INSIDE" = 1 ] && [ -z "$TGZ" ] && TGZ=$WORK/out/bundle.tgz  # gathered from BUILD before the re-exec
PFX=$WORK/prefix/zt
fail() { echo "FAIL: $*"; exit 1; }
SYS=/usr/lib/x86_64-linux-gnu

if [ "$INSIDE" = 0 ]; then
    if ! unshare -m sh -c 'mount --make-rprivate / && mount -t tmpfs none /mnt' 2>/dev/null; then
        echo "SKIP: no mount namespace here (unshare -m and mount need root or user namespaces)"
        exit 77
    fi
    rm -rf "$WORK" && mkdir -p "$WORK/prefix"
    t0=$(date +%s)
    if [ -z "$TGZ" ]; then
        bash "$SRC/tests/gpu/bundle.sh" --from "$BUILD" --out "$WORK/out" --no-wheels --gzip 1 --no-size-check \
            >"$WORK/bundle.log" 2>&1 || { cat "$WORK/bundle.log"; fail "bundle.sh --from $BUILD"; }
        grep '^\[bundle\] prefix tree' "$WORK/bundle.log"
        TGZ=$WORK/out/bundle.tgz
    fi
    tar -xzf "$TGZ" -C "$WORK/prefix" || fail "$TGZ does not unpack"
    echo "bundle $TGZ ready in $(($(date +%s) - t0)) s"
    exec unshare -m bash "$0" --inside "$1" "$SRC" "$WORK"
fi

# ---- inside the namespace: hide this machine's copies ---------------------------------------------
mount --make-rprivate / || fail "mount --make-rprivate /"
for d in $SYS/openmpi $SYS/pmix2 $SYS/hdf5 $SYS/hwloc /usr/share/openmpi /etc/openmpi; do
    [ -d "$d" ] && { mount -t tmpfs none "$d" || fail "tmpfs over $d"; }
done
# The base system's own tools keep their libraries: the GPU image has a base system (awk, sed, tar,
# python3, ...) that run.sh uses; it lacks MPI, HDF5 and their kin. Hiding gawk's libgmp (which the
# bundle also carries, for libhogweed) broke awk here, so run.sh's data went missing.
declare -A keep=()
for t in awk sed grep tar gzip sort python3 bash; do
    p=$(command -v "$t") || continue
    while read -r lib; do keep[$(readlink -f "$lib")]=1; done < <(ldd "$p" 2>/dev/null | awk '/=> \//{print $3}')
done
declare -A hide=()
for f in "$PFX/$SYS"/*; do
    n=$(basename "$f")
    for d in $SYS /usr/local/lib; do
        [ -e "$d/$n" ] && [ -z "${keep[$(readlink -f "$d/$n")]:-}" ] && hide[$(readlink -f "$d/$n")]=1
    done
done
for b in orterun orted mpirun mpiexec; do
    p=$(command -v "$b") && hide[$(readlink -f "$p")]=1
done
for f in "${!hide[@]}"; do
    [ -f "$f" ] && { mount --bind /dev/null "$f" || fail "hide $f"; }
done
echo "hidden: ${#hide[@]} files of this machine (Open MPI, PMIx, HDF5 and every bundled library but the ${#keep[@]} the base tools use) and 6 folders"
[ "$(stat -c %s "$(readlink -f $SYS/libmpi.so.40)")" = 0 ] || fail "the system's libmpi is still visible"
! /usr/bin/orterun --version >/dev/null 2>&1 || fail "the system's orterun still runs"

# ---- the bundle alone -----------------------------------------------------------------------------
. "$PFX/env.sh"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
ZT=$PFX/usr/bin/zerotrain
[ "$(command -v zerotrain)" = "$ZT" ] || fail "env.sh did not put the bundle's bin/ first on PATH"
glibc='^(ld-linux-x86-64\.so\.2|libc\.so\.6|libm\.so\.6|libmvec\.so\.1|libpthread\.so\.0|libdl\.so\.2|librt\.so\.1|libresolv\.so\.2|libutil\.so\.1|linux-vdso\.so\.1)$'
cuda='^lib(cuda|cudart|cublas|cublasLt|cudnn.*|nccl|nvrtc.*|nvJitLink)\.so'
mapfile -t elves < <(find "$PFX/usr" -type f \( -name '*.so*' -o -perm -u+x \) -exec sh -c \
    '[ "$(head -c 4 "$1" | od -An -c | tr -d " ")" = 177ELF ] && echo "$1"' _ {} \;)
ldd "${elves[@]}" >"$WORK/ldd.txt" 2>&1
bad=$(G=$glibc C=$cuda awk -v pfx="$PFX/" '
    /:$/ { obj = $1; next }
    $2 == "=>" && $3 == "not" { print obj " " $1 " not found"; next }
    $2 == "=>" && index($3, pfx) != 1 && $1 !~ ENVIRON["G"] && !($1 ~ ENVIRON["C"] && obj ~ /libzerotrain_cuda|bench_layer/) {
        print obj " " $1 " => " $3 }
    /file too short|not a dynamic/ { print obj " " $0 }' "$WORK/ldd.txt")
[ -z "$bad" ] || { echo "$bad" | head -20; fail "resolved outside the bundle or missing (above)"; }
echo "ok: ldd resolves ${#elves[@]} bundled binaries and plugins to the bundle and glibc (the module and bench_layer: CUDA too)"

W=$WORK/run
mkdir -p "$W"
cd "$W" || fail "cd $W"
awk 'BEGIN{srand(5); for(d=0; d<48; d++){ l=""; for(i=0;i<16;i++) l=l int(rand()*90) " "; print l }}' >docs.txt
zerotrain pack --quiet --input ids --vocab-size 96 --seq-len 16 -o data docs.txt >/dev/null || fail "pack"
t=(train --init "$SRC/tests/golden/tiny_untied_gqa" --data data --device cpu --lr 1e-3 --threads 1
   --log-every 0 --steps 6 --grad-accum 2 --no-preflight)
zerotrain "${t[@]}" --run-dir a >a.txt 2>&1 || { cat a.txt; fail "uninterrupted run"; }
zerotrain "${t[@]}" --run-dir b --debug-signal-at-step 3 >b1.txt 2>&1 || { cat b1.txt; fail "interrupted run"; }
grep -q "stopped" b1.txt || { cat b1.txt; fail "SIGUSR1 did not stop the run"; }
[ -d b/checkpoints/step-00000003 ] || { ls -R b; fail "no checkpoint at step 3"; }
timeout 120 mpirun -n 1 --bind-to none -x LD_LIBRARY_PATH -x OPAL_PREFIX -x OPAL_SYSCONFDIR -x PMIX_PREFIX \
    -x PMIX_LIBDIR -x PMIX_DATADIR -x OMP_NUM_THREADS zerotrain "${t[@]}" --run-dir b --resume latest >b2.txt 2>&1 ||
    { cat b2.txt; fail "the resume under the bundle's mpirun -n 1"; }
grep -q "resume: .*step 3" b2.txt || { cat b2.txt; fail "did not resume from step 3"; }
losses() { sed 's/.*"loss":\([0-9.]*\).*/\1/' "$1"; }
diff <(losses a/metrics.jsonl) <(losses b/metrics.jsonl) || fail "the resumed losses differ from the uninterrupted run's"
[ "$(losses a/metrics.jsonl | wc -l)" = 6 ] || fail "expected 6 steps"
zerotrain export b export >export.txt 2>&1 || { cat export.txt; fail "export"; }
[ -s export/model.safetensors ] && [ -s export/config.json ] || { ls export; fail "export wrote no model"; }
[ -s b/final/model.safetensors ] || fail "no RUN/final after the resume"
echo "ok: the bundled zerotrain trained, stopped on SIGUSR1, resumed under mpirun -n 1 to the same 6 losses, exported"

zerotrain "${t[@]}" --device cuda --run-dir c >c.txt 2>&1
rc=$?
if grep -Eq "error while loading shared|cannot open shared object|file too short|undefined symbol|version .* not found" c.txt; then
    cat c.txt
    fail "the CUDA module did not load from the bundle"
fi
if [ -f "$PFX/usr/bin/libzerotrain_cuda.so" ]; then
    [ "$rc" != 0 ] || { cat c.txt; fail "train --device cuda ran without a GPU?"; }
    echo "ok: train --device cuda loaded the bundle's module and stopped (exit $rc): $(grep -m1 -i 'error' c.txt)"
fi
# run.sh's own use of the bundle (unpack under its build folder, the in-bundle wrapper, the module's
# libraries): its `trainer` step must get as far as this machine allows, "no CUDA device", and its
# `bench` step must take the bundle's bench_layer (no GPU-only build), which skips (77) here
env -u LD_LIBRARY_PATH -u OPAL_PREFIX -u OPAL_SYSCONFDIR -u PMIX_PREFIX -u PMIX_LIBDIR -u PMIX_DATADIR \
    PATH="${PATH#"$PFX/usr/bin:"}" ZT_BUILD_DIR="$WORK/runsh" ZT_BUNDLE_DIR="$(dirname "$TGZ")" ZT_STEPS=trainer,bench \
    ZT_BUDGET_S=120 bash "$SRC/tests/gpu/run.sh" >runsh.txt 2>&1
grep -q "no GPU-only build" runsh.txt && grep -q "bundle: $(dirname "$TGZ")/bundle.tgz, zerotrain " runsh.txt &&
    grep -q "sees no CUDA device" "$WORK/runsh/logs/trainer.log" &&
    { [ ! -x "$PFX/usr/bin/bench_layer" ] || grep -q "bench: .*in-bundle .*bench_layer --seq 2048" runsh.txt &&
      grep -q "SKIPPED: no CUDA device" "$WORK/runsh/logs/bench.log"; } ||
    { tail -30 runsh.txt; fail "run.sh did not run the bundle's zerotrain up to the missing GPU"; }
echo "ok: run.sh unpacked the bundle and ran its zerotrain --device cuda up to: $(grep -m1 -o 'rank 0 sees no CUDA device' "$WORK/runsh/logs/trainer.log")"
# a plugin or help file looked for where this machine keeps it: Open MPI and PMIx print this and go on
if grep -l "couldn't open the help file\|Sorry!  You were supposed to get help\|unable to be opened\|unable to open" ./*.txt; then
    grep -h -A4 "Sorry\|unable to open" ./*.txt | head -20
    fail "Open MPI or PMIx looked outside the bundle (above)"
fi
echo "ok: the bundle works with this machine's copies hidden (no plugin or help file looked for outside it)"
