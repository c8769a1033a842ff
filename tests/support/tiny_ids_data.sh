# Sourced by tests/cli/resume_cli.sh and tests/cli/async_cli.sh once ZT, SRC, W and CASE are
# set (W existing and empty): GOLD, MPIRUN (1-thread ranks over shared memory and TCP), fail,
# and the dataset $W/data: 48 single-block documents of 16 ids below 90 (vocab 96, seq 16).
GOLD="$SRC/tests/golden"
MPIRUN=(mpirun --oversubscribe --allow-run-as-root --bind-to none --mca btl self,vader,tcp
        --mca btl_vader_single_copy_mechanism none -x OMP_NUM_THREADS=1 -x OPENBLAS_NUM_THREADS=1)
fail() { echo "FAIL [$CASE]: $*"; exit 1; }
awk 'BEGIN{srand(21); for(d=0; d<48; d++){ line=""; for(i=0;i<16;i++) line=line int(rand()*90) " "; print line }}' >"$W/docs.txt"
"$ZT" pack --quiet --input ids --vocab-size 96 --seq-len 16 -o "$W/data" "$W/docs.txt" >/dev/null || fail "pack"
