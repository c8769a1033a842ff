#!/usr/bin/env bash
# The bundle that lets the full zerotrain (MPI, parallel HDF5, cJSON, libyaml, ...) run on the
# lent GPU machine, whose image has nvcc, PyTorch and the CUDA/cuDNN/NCCL wheels but none of
# those libraries and no package registry (tests/gpu/README.md). On this machine (Debian 12,
# glibc 2.36; a newer glibc runs what is built here, not the reverse) it
#   1. builds the normal configuration with the CUDA module for sm_90 and sm_100 in
#      build-bundle/ (zerotrain, libzerotrain_cuda.so, and bench_layer: the layer benchmark
#      without the GPU-only build there),
#   2. gathers under one prefix tree: the binaries; Open MPI's orterun/orted, the plugins a
#      world-1 run (singleton or `mpirun -n 1`) can load, its help files and config; PMIx's
#      plugins and help files; every shared library ldd names for all of them, except glibc's
#      and the CUDA/cuDNN/NCCL/driver libraries (the image has those: run.sh puts its PyTorch
#      wheels' lib/ folders on LD_LIBRARY_PATH); and env.sh, which points the loader, Open MPI
#      and PMIx at the prefix wherever it is unpacked,
#   3. packs the tree as DIR/bundle.tgz (what travels) with DIR/MANIFEST.txt (every file, its
#      size and the Debian package it came from),
#   4. downloads the pure-Python wheels the PyTorch comparison needs that the GPU image lacks
#      (fla-core and flash-linear-attention: the Gated DeltaNet kernels transformers' Qwen3.5
#      uses when `fla` imports) into DIR/wheels,
# and prints the sizes and what a device call would carry (the checkout's files that travel
# plus DIR), which must stay under the 64 MiB a call takes.
#   bash tests/gpu/bundle.sh                  build, gather, pack into ./gpu-bundle (minutes)
#   bash tests/gpu/bundle.sh --from build     gather from a build that exists (its arches)
# Options: --from BUILD (no build: gather from BUILD), --out DIR (default ROOT/gpu-bundle),
# --no-bench (leave bench_layer out: 2.2 MiB less), --no-wheels, --gzip N (level, default 9),
# --no-size-check (the 64 MiB check: for a bundle that will not travel, as the ctest's).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
FROM='' OUT=$ROOT/gpu-bundle WHEELS=1 BENCH=1 GZ=9 SIZE_CHECK=1
while [ $# -gt 0 ]; do
    case "$1" in
    --from) FROM=$(cd "$2" && pwd); shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --no-bench) BENCH=0; shift ;;
    --no-wheels) WHEELS=0; shift ;;
    --gzip) GZ=$2; shift 2 ;;
    --no-size-check) SIZE_CHECK=0; shift ;;
    *) echo "bundle.sh: unknown option '$1' (see the header of $0)" >&2; exit 2 ;;
    esac
done
say() { echo "[bundle] $*"; }
die() { echo "bundle.sh: error: $*" >&2; exit 1; }
LIBDIR=usr/lib/x86_64-linux-gnu                 # Debian's multiarch layout, kept as it is
OMPI_LIB=/usr/lib/x86_64-linux-gnu/openmpi/lib  # Open MPI's own folder (plugins under openmpi3/)
PMIX_DIR=/usr/lib/x86_64-linux-gnu/pmix2        # the external PMIx that Open MPI 4.1 uses
[ "$(uname -m)" = x86_64 ] || die "the GPU machine is x86-64: build the bundle on an x86-64 machine"
command -v orterun >/dev/null && [ -d "$OMPI_LIB/openmpi3" ] && [ -d "$PMIX_DIR/lib/pmix" ] ||
    die "no Debian Open MPI 4.1 here ($OMPI_LIB/openmpi3, $PMIX_DIR, orterun): bash scripts/install-deps.sh first"

# ---- 1. build --------------------------------------------------------------------------------
if [ -z "$FROM" ]; then
    BUILD=$ROOT/build-bundle
    command -v nvcc >/dev/null || export PATH=/usr/local/cuda/bin:$PATH
    command -v nvcc >/dev/null || die "nvcc not found: the bundle needs the CUDA module"
    say "configure $BUILD (sm_90, sm_100)"
    # ZT_TEST_FILTER=^gpu$: of the test fragments only tests/gpu.cmake (bench_layer's target)
    cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES="90;100" \
        -DZT_CUDA=ON -DZT_TEST_FILTER='^gpu$' >"$ROOT/build-bundle.log.tmp" 2>&1 ||
        { tail -30 "$ROOT/build-bundle.log.tmp"; die "configure failed (build-bundle.log.tmp)"; }
    mv "$ROOT/build-bundle.log.tmp" "$BUILD/bundle-build.log"  # inside the ignored build folder
    targets=(zerotrain)
    [ "$BENCH" = 1 ] && targets+=(bench_layer)
    say "build ${targets[*]} (the module comes with zerotrain; many minutes on 2 cores)"
    cmake --build "$BUILD" --target "${targets[@]}" >>"$BUILD/bundle-build.log" 2>&1 ||
        { tail -30 "$BUILD/bundle-build.log"; die "build failed ($BUILD/bundle-build.log)"; }
    [ -f "$BUILD/libzerotrain_cuda.so" ] || die "no libzerotrain_cuda.so: configure found no NCCL ($BUILD/bundle-build.log)"
else
    BUILD=$FROM
fi
[ -x "$BUILD/zerotrain" ] || die "$BUILD/zerotrain not found"
# the GPU code the CUDA sources were compiled for (nvcc's --generate-code flags in the build)
ARCHES=$(grep -o -- '--generate-code=arch=[^ ]*' "$BUILD/build.ninja" 2>/dev/null | sed 's/.*code=\[//; s/\]//' |
         sort -u | tr '\n' ' ' || true)

# ---- 2. gather --------------------------------------------------------------------------------
STAGE=$(mktemp -d "${TMPDIR:-/tmp}/zt-bundle.XXXXXX")
trap 'rm -rf "$STAGE"' EXIT
P=$STAGE/zt
mkdir -p "$P/usr/bin" "$P/$LIBDIR/openmpi/lib/openmpi3" "$P/$LIBDIR/pmix2/lib/pmix" \
    "$P/$LIBDIR/pmix2/share" "$P/usr/share" "$P/etc"
declare -A SRC=()  # file in the prefix -> the file it was copied from (MANIFEST.txt)
take() {  # FILE DEST_IN_PREFIX [strip]: a copy (links followed); binaries lose their debug sections
    local src dest=$P/$2
    src=$(readlink -f "$1")
    [ -d "$dest" ] && dest=$dest/$(basename "$1")
    cp -L "$1" "$dest"
    if [ "${3:-}" = strip ]; then strip --strip-debug "$dest" 2>/dev/null || true; fi
    SRC[${dest#"$P"/}]=$src
}
take "$BUILD/zerotrain" usr/bin/zerotrain strip
# the module beside the executable: where engine/cuda_module.c looks first
if [ -f "$BUILD/libzerotrain_cuda.so" ]; then
    take "$BUILD/libzerotrain_cuda.so" usr/bin/libzerotrain_cuda.so strip
else
    say "warning: $BUILD has no libzerotrain_cuda.so: this bundle cannot train on a GPU"
fi
if [ "$BENCH" = 1 ] && [ -x "$BUILD/tests/bench_layer" ]; then
    take "$BUILD/tests/bench_layer" usr/bin/bench_layer strip
elif [ "$BENCH" = 1 ] && [ -z "$FROM" ]; then
    die "$BUILD/tests/bench_layer was not built"
fi
take "$(command -v orterun)" usr/bin/orterun strip
take "$(command -v orted)" usr/bin/orted strip
ln -s orterun "$P/usr/bin/mpirun"  # a link inside the archive (a link in a carried folder would not travel)
# Open MPI's plugins, less those a world-1 run on one machine never loads and that would bring
# libraries of their own: UCX, libfabric (ofi), verbs/openib, PSM, the MTLs and the cm PML that
# drives them, OpenSHMEM (atomic, memheap, scoll, spml, sshmem), the monitoring wrappers,
# netlink reachability (libnl), the debugger's message-queue library.
skip_plugin='(ucx|ofi|openib|psm|_mtl_|pml_cm|monitoring|atomic_|memheap_|scoll_|spml_|sshmem_|reachable_netlink|dbg_msgq)'
nplug=0
for f in "$OMPI_LIB"/openmpi3/*.so; do
    [[ $(basename "$f") =~ $skip_plugin ]] && continue
    take "$f" "$LIBDIR/openmpi/lib/openmpi3"
    nplug=$((nplug + 1))
done
for f in "$PMIX_DIR"/lib/pmix/*.so; do take "$f" "$LIBDIR/pmix2/lib/pmix"; done
cp -rL "$PMIX_DIR/share/pmix" "$P/$LIBDIR/pmix2/share/"
cp -rL /usr/share/openmpi "$P/usr/share/"
rm -f "$P"/usr/share/openmpi/*wrapper-data.txt  # the compiler wrappers' data: nothing compiles there
cp -rL /etc/openmpi "$P/etc/"

# Every library the binaries and plugins need, by ldd, less glibc, the CUDA stack and the driver.
glibc='^(ld-linux-x86-64\.so\.2|libc\.so\.6|libm\.so\.6|libmvec\.so\.1|libpthread\.so\.0|libdl\.so\.2|librt\.so\.1|libresolv\.so\.2|libutil\.so\.1|libanl\.so\.1|libnsl\.so\.1|libBrokenLocale\.so\.1|libnss_.*|linux-vdso\.so\.1)$'
cuda='^lib(cuda|cudart|cublas|cublasLt|cudnn.*|nccl|nvrtc.*|nvJitLink|nvidia-.*|cufft.*|curand|cusparse.*|cusolver.*|nvToolsExt|cupti)\.so'
declare -A seen=()
missing=()
elves=()
for rel in "${!SRC[@]}"; do
    [ "$(head -c 4 "$P/$rel" | od -An -c | tr -d ' ')" = '177ELF' ] && elves+=("$P/$rel")
done
# one ldd for all of them (each object's whole closure; "FILE:" lines separate them)
while read -r name arrow path _; do
    [ "$arrow" = "=>" ] || continue
    [[ $name =~ $glibc || $name =~ $cuda ]] && continue
    [ -n "${seen[$name]:-}" ] && continue
    seen[$name]=1
    if [ "$path" = "not" ]; then missing+=("$name"); continue; fi
    take "$path" "$LIBDIR/$name"
done < <(ldd "${elves[@]}" 2>/dev/null)
[ ${#missing[@]} -eq 0 ] || die "ldd found no ${missing[*]} on this machine"
# (hwloc's optional plugins, which it would load by itself, stay behind: it runs without them.)

cp "$ROOT/tests/gpu/bundle_env.sh" "$P/env.sh"
# The Debian package of every copied file, in one dpkg query (merged /usr: a file may be known
# to dpkg under /lib instead).
declare -A PKG=()
while IFS= read -r line; do
    key=${line#*: }
    [ -n "$key" ] && [ "$key" != "$line" ] && PKG[$key]=${line%%: *}
done < <(for s in "${SRC[@]}"; do echo "$s"; echo "${s#/usr}"; done | sort -u | xargs dpkg -S 2>/dev/null || true)
{
    echo "zerotrain GPU bundle: $(git -C "$ROOT" describe --always --dirty 2>/dev/null || echo unknown)," \
        "built $(date -u +%Y-%m-%dT%H:%MZ) on $(. /etc/os-release && echo "$PRETTY_NAME")," \
        "glibc $(ldd --version | head -1 | awk '{print $NF}')"
    echo "build: $BUILD; the module's GPU code: ${ARCHES:-unknown}; Open MPI plugins: $nplug"
    echo "bytes  file  (from)"
    (cd "$P" && find . \( -type f -o -type l \) -printf '%s %P\n' | sort -k2) | while read -r size rel; do
        s=${SRC[$rel]:-} from=''
        if [ -n "$s" ]; then
            from=${PKG[$s]:-${PKG[${s#/usr}]:-}}
            [ -z "$from" ] && [[ $s == "$BUILD"/* ]] && from="built here"
        fi
        echo "$size  $rel  ${from:-${s:-(a copied folder)}}"
    done
} >"$STAGE/MANIFEST.txt"

# ---- 3. pack ---------------------------------------------------------------------------------
mkdir -p "$OUT"
rm -f "$OUT/bundle.tgz" "$OUT/MANIFEST.txt"
tar -C "$STAGE" -cf - zt | gzip -"$GZ" >"$OUT/bundle.tgz.tmp"
mv "$OUT/bundle.tgz.tmp" "$OUT/bundle.tgz"
cp "$STAGE/MANIFEST.txt" "$OUT/MANIFEST.txt"
tree_kib=$(du -sk --apparent-size "$P" | cut -f1)
say "prefix tree $((tree_kib / 1024)) MiB: $(find "$P" -type f | wc -l) files, $nplug Open MPI plugins," \
    "$(find "$P/$LIBDIR" -maxdepth 1 -type f | wc -l) libraries; bundle.tgz $(($(stat -c %s "$OUT/bundle.tgz") / 1024)) KiB"

# ---- 4. wheels --------------------------------------------------------------------------------
# fla: pure Python over Triton (which the image has). Pinned: the versions run.sh's steps were proven with.
FLA_WHEELS=("fla-core==0.6.0" "flash-linear-attention==0.6.0")
if [ "$WHEELS" = 1 ]; then
    mkdir -p "$OUT/wheels"
    for w in "${FLA_WHEELS[@]}"; do
        n=${w%%==*}
        v=${w#*==}
        ls "$OUT/wheels/${n//-/_}-$v-"*.whl >/dev/null 2>&1 && continue
        python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 -d "$OUT/wheels" "$w" ||
            die "pip download $w failed"
    done
    say "wheels: $(cd "$OUT/wheels" && ls | tr '\n' ' ')($(du -sk --apparent-size "$OUT/wheels" | cut -f1) KiB)"
fi

# ---- what a device call would carry --------------------------------------------------------------
if [ "$SIZE_CHECK" = 1 ] && git -C "$ROOT" rev-parse --git-dir >/dev/null 2>&1; then
    tree=$(cd "$ROOT" && git ls-files -z --cached --others --exclude-standard |
           xargs -0 du -cb --apparent-size 2>/dev/null | awk '$2 == "total" { t += $1 } END { print t + 0 }')
    carried=$(du -sb --apparent-size "$OUT" | cut -f1)
    total=$((tree + carried))
    say "a device call carries the checkout's files ($((tree / 1048576)) MiB) + $(basename "$OUT")" \
        "($((carried / 1048576)) MiB) = $((total / 1048576)) MiB of its 64 MiB"
    [ "$total" -lt $((62 * 1048576)) ] || die "too large to travel: trim the bundle (tests/gpu/README.md)"
fi
say "done: $OUT (there: tar -xzf bundle.tgz -C DIR && . DIR/zt/env.sh)"
