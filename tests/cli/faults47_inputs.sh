#!/usr/bin/env bash
# Issue 47, items 1 and 3: ranks that read different files at the same path. Each rank runs in
# its own mount namespace (unshare -m) with another directory bound over one path, as two nodes'
# copies would be, started through mpirun's MPMD form. A model config, an --init weight set or a
# dataset that differs is refused at start on every rank, naming the input, the file or field and
# the ranks, before the run directory is created; copies that agree (other mtimes, another
# layout of config.json) and a per-rank dataset layout (each rank's own file, by design) train.
#   faults47_inputs.sh ZEROTRAIN SOURCE_DIR WORK_DIR CASE
set -u
ZT=$1 SRC=$2 WORK=$3 CASE=$4
case "$WORK" in /*) ;; *) WORK="$PWD/$WORK" ;; esac
W="$WORK/$CASE"
rm -rf "$W" && mkdir -p "$W"
. "$SRC/tests/support/tiny_ids_data.sh"  # GOLD, MPIRUN, fail, $W/data (48 blocks of 16, vocab 96)

# Mount namespaces are what this test needs (root here; CI runs as root): skip only without them.
mkdir -p "$W/probe/a" "$W/probe/b"
unshare -m bash -c 'mount --bind "$0" "$1"' "$W/probe/a" "$W/probe/b" 2>/dev/null ||
    { echo "SKIP [$CASE]: no mount namespaces here (unshare -m with a bind mount failed)"; exit 77; }

IN="$W/in"  # the one path both ranks read; each rank binds its own directory over it
mkdir -p "$IN"
COMMON=(--log-every 0 --threads 1 --no-save-final --steps 3)

# ns_mpmd OUT DIR0 DIR1 CMD...: rank 0 sees DIR0 at $IN, rank 1 DIR1 (in time: a mix that is not
# caught trains to the end or hangs until the timeout)
ns_mpmd() {
    local out=$1 d0=$2 d1=$3
    shift 3
    local bind='mount --bind "$0" "$1" && shift && exec "$@"'
    timeout -k 5 120 "${MPIRUN[@]}" -n 1 unshare -m bash -c "$bind" "$d0" "$IN" "$@" : \
        -n 1 unshare -m bash -c "$bind" "$d1" "$IN" "$@" >"$out" 2>&1
}
# refused RC OUT CMD PATTERN: the job failed at start, the ranks say PATTERN, RUN was not made
refused() {
    local rc=$1 out=$2 cmd=$3 pat=$4
    [ "$rc" -ne 0 ] || { cat "$out"; fail "ranks that read different inputs ran (exit 0)"; }
    [ "$rc" -ne 124 ] || { cat "$out"; fail "ranks that read different inputs hung until the timeout"; }
    local n
    n=$(grep -cE "zerotrain $cmd: error: the ranks read different inputs at the same paths $pat" "$out")
    [ "$n" -ge 1 ] || { cat "$out"; fail "no rank names /$pat/"; }
    [ "$n" -eq "$(grep -c "zerotrain $cmd: error:" "$out")" ] || { cat "$out"; fail "a rank reports another error"; }
    [ ! -e "$W/run" ] || { ls -R "$W/run"; fail "the run directory was created or written"; }
}
# trains OUT: exit 0 with a complete run
trains() {
    [ "$1" -eq 0 ] || { cat "$2"; fail "$3 (exit $1)"; }
    [ -f "$W/run/complete.json" ] || { cat "$2"; fail "$3: no complete.json"; }
    rm -rf "$W/run"
}
# a copy of the tiny model (config.json, model.safetensors) in $1
model_copy() { mkdir -p "$1" && cp "$GOLD/tiny_untied_gqa/config.json" "$GOLD/tiny_untied_gqa/model.safetensors" "$1/"; }
# pack_docs SEED DIR [pack flags]: 48 single-block documents of 16 ids below 90, another set per seed
pack_docs() {
    local seed=$1 dir=$2
    shift 2
    awk -v s="$seed" 'BEGIN{srand(s); for(d=0; d<48; d++){ l=""; for(i=0;i<16;i++) l=l int(rand()*90) " "; print l }}' \
        >"$W/docs-$seed.txt"
    "$ZT" pack --quiet --input ids --vocab-size 96 --seq-len 16 "$@" -o "$dir" "$W/docs-$seed.txt" >/dev/null ||
        fail "pack $dir"
}

case "$CASE" in
inputs_model_config)
    # rope_theta 10000 on one node, 20000 on the other: trained with mixed losses, exit 0
    model_copy "$W/a/model" && model_copy "$W/b/model"
    sed -i 's/10000\.0/20000.0/g' "$W/b/model/config.json"
    cp -r "$W/data" "$W/a/data" && cp -r "$W/data" "$W/b/data"
    ns_mpmd "$W/out.txt" "$W/a" "$W/b" "$ZT" train "${COMMON[@]}" --init "$IN/model" --data "$IN/data" --run-dir "$W/run"
    refused $? "$W/out.txt" train "\(1 difference\): model config rope_theta: 10000 on rank 0, 20000 on rank 1\. "
    # the same model copied later (other mtimes) with config.json laid out otherwise and a field the
    # model does not read dropped: the same resolved config, the same weights, so it trains
    sleep 1
    model_copy "$W/c/model" && cp -r "$W/data" "$W/c/data"
    python3 -c 'import json, sys; c = json.load(open(sys.argv[1])); c.pop("transformers_version"); json.dump(c, open(sys.argv[1], "w"), indent=4, sort_keys=True)' \
        "$W/c/model/config.json" || fail "rewriting config.json"
    cmp -s "$W/a/model/config.json" "$W/c/model/config.json" && fail "the rewritten config.json has the same bytes"
    ns_mpmd "$W/out2.txt" "$W/a" "$W/c" "$ZT" train "${COMMON[@]}" --init "$IN/model" --data "$IN/data" --run-dir "$W/run"
    rc=$?
    # run.json records what rank 0 read
    tr -d ' \t\n' <"$W/run/run.json" >"$W/run.flat" 2>/dev/null
    grep -qE '"inputs":\{"model_config_crc32c":"[0-9a-f]{8}","init_files":\[\{"file":"model.safetensors","bytes":206496,' \
        "$W/run.flat" || { cat "$W/run/run.json"; fail "run.json lacks the inputs' digests"; }
    trains $rc "$W/out2.txt" "the same model in another copy must train"
    echo "ok [$CASE]: $(grep -m1 -o "the ranks read different inputs.*rank 1\. " "$W/out.txt")"
    ;;
inputs_init_weights)
    # two weight sets with one tensor table (names, dtypes, shapes, offsets: two fine-tunes of one
    # model): each rank loaded its shards from its own, a mix of two checkpoints, exit 0
    model_copy "$W/a/model" && model_copy "$W/b/model"
    python3 - "$W/b/model/model.safetensors" <<'EOF' || fail "writing the other weights"
import json, struct, sys
p = sys.argv[1]
b = bytearray(open(p, "rb").read())
n = struct.unpack_from("<Q", b)[0]
for name, t in json.loads(b[8:8 + n]).items():
    if name == "__metadata__":
        continue
    assert t["dtype"] == "F32"
    lo, hi = (8 + n + o for o in t["data_offsets"])
    v = struct.unpack_from("<%df" % ((hi - lo) // 4), b, lo)
    struct.pack_into("<%df" % len(v), b, lo, *(x * 1.001 for x in v))
open(p, "wb").write(b)
EOF
    cp -r "$W/data" "$W/a/data" && cp -r "$W/data" "$W/b/data"
    ns_mpmd "$W/out.txt" "$W/a" "$W/b" "$ZT" train "${COMMON[@]}" --init "$IN/model" --data "$IN/data" --run-dir "$W/run"
    refused $? "$W/out.txt" train "\(1 difference\): --init model\.safetensors: 25 tensors of 203968 bytes, table crc32c ([0-9a-f]{8}), samples crc32c [0-9a-f]{8} on rank 0, 25 tensors of 203968 bytes, table crc32c \1, samples crc32c [0-9a-f]{8} on rank 1\. "
    # the same --init directory on both ranks (bound on each) trains
    ns_mpmd "$W/out2.txt" "$W/a" "$W/a" "$ZT" train "${COMMON[@]}" --init "$IN/model" --data "$IN/data" --run-dir "$W/run"
    trains $? "$W/out2.txt" "the same --init directory on both ranks must train"
    echo "ok [$CASE]: $(grep -m1 -o "the ranks read different inputs.*rank 1\. " "$W/out.txt")"
    ;;
inputs_data)
    # two datasets of one shape (48 blocks of 16, vocab 96), other documents: trained silently
    mkdir -p "$W/a" "$W/b"
    cp -r "$W/data" "$W/a/data"
    pack_docs 22 "$W/b/data"
    M=(--init "$GOLD/tiny_untied_gqa")
    ns_mpmd "$W/out.txt" "$W/a" "$W/b" "$ZT" train "${COMMON[@]}" "${M[@]}" --data "$IN/data" --run-dir "$W/run"
    refused $? "$W/out.txt" train "\(1 difference\): --data dataset\.json: crc32c [0-9a-f]{8}, single layout, 48 blocks, 1 file, seq_len 16, vocab_size 96, [^;]* on rank 0, crc32c [0-9a-f]{8}, single layout, 48 blocks, [^;]* on rank 1\. "
    # the same dataset in a second copy trains
    mkdir -p "$W/c" && cp -r "$W/data" "$W/c/data"
    ns_mpmd "$W/out2.txt" "$W/a" "$W/c" "$ZT" train "${COMMON[@]}" "${M[@]}" --data "$IN/data" --run-dir "$W/run"
    trains $? "$W/out2.txt" "the same dataset in another copy must train"
    # --eval-data is read the same way: the same training data, another evaluation set on rank 1
    cp -r "$W/data" "$W/a/eval" && cp -r "$W/b/data" "$W/c/eval"
    ns_mpmd "$W/out3.txt" "$W/a" "$W/c" "$ZT" train "${COMMON[@]}" "${M[@]}" --data "$IN/data" --eval-data "$IN/eval" \
        --run-dir "$W/run"
    refused $? "$W/out3.txt" train "\(1 difference\): --eval-data dataset\.json: crc32c [0-9a-f]{8}, [^;]* on rank 0, crc32c [0-9a-f]{8}, [^;]* on rank 1\. "
    echo "ok [$CASE]: $(grep -m1 -o "the ranks read different inputs.*rank 1\. " "$W/out.txt")"
    ;;
inputs_data_per_rank)
    # a per-rank layout: each rank trains on its own file by design, so two packs of other documents
    # (another dataset.json on each node) train; what every rank's file must share is still compared
    mkdir -p "$W/a" "$W/b" "$W/v"
    pack_docs 21 "$W/a/data" --per-rank 2
    pack_docs 22 "$W/b/data" --per-rank 2
    cmp -s "$W/a/data/dataset.json" "$W/b/data/dataset.json" && fail "the two per-rank packs have one dataset.json"
    M=(--init "$GOLD/tiny_untied_gqa")
    ns_mpmd "$W/out.txt" "$W/a" "$W/b" "$ZT" train "${COMMON[@]}" "${M[@]}" --data "$IN/data" --run-dir "$W/run"
    trains $? "$W/out.txt" "a per-rank dataset whose nodes hold other files must train"
    # ... but not with another vocabulary on one node (92: still below the model's 96, so nothing else notices)
    awk 'BEGIN{srand(23); for(d=0; d<48; d++){ l=""; for(i=0;i<16;i++) l=l int(rand()*90) " "; print l }}' >"$W/docs-v.txt"
    "$ZT" pack --quiet --input ids --vocab-size 92 --seq-len 16 --per-rank 2 -o "$W/v/data" "$W/docs-v.txt" >/dev/null ||
        fail "pack"
    ns_mpmd "$W/out2.txt" "$W/a" "$W/v" "$ZT" train "${COMMON[@]}" "${M[@]}" --data "$IN/data" --run-dir "$W/run"
    refused $? "$W/out2.txt" train "\(1 difference\): --data dataset\.json: per-rank layout, 2 files, seq_len 16, vocab_size 96, [^;]* on rank 0, per-rank layout, 2 files, seq_len 16, vocab_size 92, [^;]* on rank 1\. "
    echo "ok [$CASE]: $(grep -m1 -o "the ranks read different inputs.*rank 1\. " "$W/out2.txt")"
    ;;
inputs_preflight)
    # `zerotrain preflight` checks the job `train` would run: the same refusal (model and data here)
    model_copy "$W/a/model" && model_copy "$W/b/model"
    sed -i 's/10000\.0/20000.0/g' "$W/b/model/config.json"
    cp -r "$W/data" "$W/a/data"
    pack_docs 22 "$W/b/data"
    ns_mpmd "$W/out.txt" "$W/a" "$W/b" "$ZT" preflight --model "$IN/model" --data "$IN/data"
    refused $? "$W/out.txt" preflight "\(2 differences\): model config rope_theta: 10000 on rank 0, 20000 on rank 1; --data dataset\.json: crc32c [0-9a-f]{8}, [^;]* on rank 0, crc32c [0-9a-f]{8}, [^;]* on rank 1\. "
    # and passes where they agree
    ns_mpmd "$W/out2.txt" "$W/a" "$W/a" "$ZT" preflight --model "$IN/model" --data "$IN/data" ||
        { cat "$W/out2.txt"; fail "preflight of ranks that read the same files"; }
    echo "ok [$CASE]: $(grep -m1 -o "the ranks read different inputs.*rank 1\. " "$W/out.txt")"
    ;;
*)
    fail "unknown case"
    ;;
esac
