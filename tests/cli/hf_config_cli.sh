#!/usr/bin/env bash
# What a Hugging Face checkpoint says, read as transformers 5 reads it, and nothing of it dropped
# without a word (issue 47). Variants of the committed fixtures (tests/cli/hf_fixture.py) trained one
# step at lr 0, where nothing moves, so RUN/final and `zerotrain export` must hold every tensor of the
# input byte for byte (fp32), and a step-1 loss equals that of the config the variant must read as.
# One case per invocation:
#   tie_vlm_untied   Qwen3_5ForConditionalGeneration, top-level tie_word_embeddings false, text_config's
#                    true (as transformers 5.25 saves it): untied, lm_head.weight loaded and kept
#   tie_vlm_tied     top-level true, text_config's false, no lm_head.weight (how transformers saves a
#                    tied VLM): tied, trained (it was refused)
#   tie_distinct     tie_word_embeddings true with an lm_head.weight of its own (Qwen3; Qwen3.5 text):
#                    untied as transformers loads it, said; a copy of the embedding stays tied, unsaid
#   tie_transformers RUN/final and export of the three load in transformers as the class they came from
#                    (tests/cli/hf_tie_check.py; skipped, 77, without torch and transformers)
#   rope_disagree    rope_scaling and rope_parameters that disagree: rope_scaling's, as transformers,
#                    said naming both; the gate holds seq_len to the range rope_scaling gives
#   nonfinite_first  a loss that is not finite at step 1, before any update, names the config and the
#                    --init weights, not --lr
#   mtp_layers       mtp_num_hidden_layers that disagrees with the mtp.* tensors is refused by name
#   hf_config_cli.sh ZEROTRAIN SOURCE_DIR WORK CASE
set -u
ZT=$1 SRC=$2 WORK=$3 CASE=$4
W="$WORK/hf_config_cli/$CASE"
rm -rf "$W" && mkdir -p "$W"
GOLD="$SRC/tests/golden"
FIX="python3 $SRC/tests/cli/hf_fixture.py"
fail() { echo "FAIL [$CASE]: $*"; exit 1; }
command -v python3 >/dev/null || { echo "SKIP [$CASE]: no python3 to write the fixtures' variants"; exit 77; }

awk 'BEGIN{srand(7); for(d=0; d<16; d++){ line=""; for(i=0;i<16;i++) line=line int(3+rand()*75) " "; print line }}' >"$W/docs.txt"
"$ZT" pack --quiet --input ids --vocab-size 80 --seq-len 16 -o "$W/data" "$W/docs.txt" >/dev/null || fail "pack"
T=(--data "$W/data" --lr 0 --warmup 0 --threads 1 --log-every 0 --save-dtype fp32)

# variant NAME FROM KEY=JSON...: a copy of fixture FROM (weights linked) with its config.json changed
variant() {
    local d="$W/$1" from="$GOLD/$2"
    shift 2
    mkdir -p "$d" && ln -s "$from"/*.safetensors* "$d/" && $FIX config "$from/config.json" "$d/config.json" "$@" ||
        fail "variant $d"
}
# train_one DIR RUN [ARGS]: one step from DIR; prints its step-1 loss
train_one() {
    local in=$1 run=$2
    shift 2
    "$ZT" train --init "$in" "${T[@]}" --run-dir "$run" --steps 1 "$@" >"$run.out" 2>&1 || { cat "$run.out" >&2; fail "train $in" >&2; }
    grep -o '"loss":[^,]*' "$run/metrics.jsonl" | head -1
}
# outputs IN RUN: RUN/final and an export of RUN both hold IN's tensors (config.json: the input's when
# carried, else zerotrain's)
outputs() {
    local in=$1 run=$2
    "$ZT" export --dtype fp32 "$run" "$run-hf" >"$run-hf.out" 2>&1 || { cat "$run-hf.out"; fail "export $run"; }
    for out in "$run/final" "$run-hf"; do
        $FIX same "$in" "$out" || fail "$out does not hold $in's tensors as they were"
    done
}

case "$CASE" in
tie_vlm_untied)
    variant vlm qwen3_5_vlm text_config.tie_word_embeddings=true
    want=$(train_one "$GOLD/qwen3_5_vlm" "$W/ref") || exit 1
    got=$(train_one "$W/vlm" "$W/run") || exit 1
    [ "$got" = "$want" ] || fail "step 1 $got, but the same untied model from the unchanged fixture gives $want"
    grep -q "tie_word_embeddings is false but text_config.tie_word_embeddings is true; transformers 5's Qwen3_5ForConditionalGeneration reads the top-level one" \
        "$W/run.out" || { cat "$W/run.out"; fail "the two flags disagreeing is not said"; }
    grep -q "untied" "$W/run.out" || fail "the model line does not say untied"
    outputs "$W/vlm" "$W/run"
    cmp "$W/vlm/config.json" "$W/run/final/config.json" || fail "RUN/final/config.json is not the input's"
    echo "ok [$CASE]: $got, lm_head.weight kept"
    ;;
tie_vlm_tied)
    mkdir -p "$W/vlm" "$W/both"
    $FIX drop "$GOLD/qwen3_5_vlm/model.safetensors" "$W/vlm/model.safetensors" lm_head.weight || fail "drop"
    ln -s "$W/vlm/model.safetensors" "$W/both/"
    $FIX config "$GOLD/qwen3_5_vlm/config.json" "$W/vlm/config.json" tie_word_embeddings=true \
        text_config.tie_word_embeddings=false || fail "config"
    $FIX config "$GOLD/qwen3_5_vlm/config.json" "$W/both/config.json" tie_word_embeddings=true \
        text_config.tie_word_embeddings=true || fail "config"
    want=$(train_one "$W/both" "$W/ref") || exit 1
    got=$(train_one "$W/vlm" "$W/run") || exit 1
    [ "$got" = "$want" ] || fail "step 1 $got, but the tied model (both flags true) gives $want"
    grep -q "tied" "$W/run.out" || fail "the model line does not say tied"
    outputs "$W/vlm" "$W/run"
    echo "ok [$CASE]: $got, tied"
    ;;
tie_distinct)
    # Qwen3: tiny_untied_gqa's own lm_head.weight under a tied config
    variant q3 tiny_untied_gqa tie_word_embeddings=true
    want=$(train_one "$GOLD/tiny_untied_gqa" "$W/ref") || exit 1
    got=$(train_one "$W/q3" "$W/run") || exit 1
    [ "$got" = "$want" ] || fail "step 1 $got, but the untied model gives $want (lm_head.weight was not the one stored)"
    q3=$got
    grep -q "says tie_word_embeddings true, but lm_head.weight differs from model.embed_tokens.weight, first at \[0, 0\]" \
        "$W/run.out" || { cat "$W/run.out"; fail "untying is not said, naming both tensors"; }
    outputs "$W/q3" "$W/run"
    grep -Eq '"tie_word_embeddings":[[:space:]]*false' "$W/run/final/config.json" || fail "RUN/final/config.json does not say untied"
    # a resume from the same --init reads the config the same way (the checkpoint's is untied)
    "$ZT" train --init "$W/q3" "${T[@]}" --run-dir "$W/run" --steps 2 --resume latest --allow-new-schedule \
        >"$W/resume.out" 2>&1 || { cat "$W/resume.out"; fail "resume"; }
    # Qwen3.5 text with an MTP head: carried, config.json the input's
    variant q35 qwen3_5_text_mtp tie_word_embeddings=true
    train_one "$W/q35" "$W/run35" >/dev/null || exit 1
    grep -q "but lm_head.weight differs from model.embed_tokens.weight" "$W/run35.out" || fail "Qwen3.5: not said"
    outputs "$W/q35" "$W/run35"
    # a stored copy of the embedding is the tied model's: nothing said, nothing kept apart
    mkdir -p "$W/copy"
    python3 -c "
import sys; sys.path.insert(0, '$SRC/tests/cli'); import hf_fixture as h
meta, t = h.read_st('$GOLD/tiny_yarn_params/model.safetensors'); t['lm_head.weight'] = t['model.embed_tokens.weight']
h.write_st('$W/copy/model.safetensors', meta, t)" || fail "copy"
    cp "$GOLD/tiny_yarn_params/config.json" "$W/copy/"
    want=$(train_one "$GOLD/tiny_yarn_params" "$W/ref-tied") || exit 1
    got=$(train_one "$W/copy" "$W/run-copy") || exit 1
    [ "$got" = "$want" ] || fail "a stored copy: step 1 $got, tied $want"
    grep -q "differs from" "$W/run-copy.out" && fail "a copy of the embedding called different"
    echo "ok [$CASE]: Qwen3 $q3 as the untied model; Qwen3.5 carried; a copy stays tied ($got)"
    ;;
tie_transformers)
    python3 -c "import torch, transformers" 2>/dev/null || { echo "SKIP [$CASE]: torch and transformers not installed"; exit 77; }
    variant a qwen3_5_vlm text_config.tie_word_embeddings=true
    mkdir -p "$W/b"
    $FIX drop "$GOLD/qwen3_5_vlm/model.safetensors" "$W/b/model.safetensors" lm_head.weight || fail "drop"
    $FIX config "$GOLD/qwen3_5_vlm/config.json" "$W/b/config.json" tie_word_embeddings=true \
        text_config.tie_word_embeddings=false || fail "config"
    variant c tiny_untied_gqa tie_word_embeddings=true
    variant c35 qwen3_5_text_mtp tie_word_embeddings=true
    groups=()
    for v in a b c c35; do
        train_one "$W/$v" "$W/run-$v" >/dev/null || exit 1
        "$ZT" export --dtype fp32 "$W/run-$v" "$W/run-$v-hf" >/dev/null 2>&1 || fail "export $v"
        groups+=("$W/$v" "$W/run-$v/final" "$W/run-$v-hf" --)
    done
    python3 "$SRC/tests/cli/hf_tie_check.py" "${groups[@]}" || fail "not loaded in transformers as the input is"
    echo "ok [$CASE]"
    ;;
rope_disagree)
    # tiny_yarn (rope_scaling yarn, factor 4; its loss checked against transformers by test_model_golden)
    # with a rope_parameters that says factor 2 and another rope_theta: transformers reads rope_scaling
    mkdir -p "$W/model"
    $FIX config "$GOLD/tiny_yarn/config.json" "$W/model/config.json" \
        'rope_parameters={"rope_type": "yarn", "factor": 2.0, "rope_theta": 20000.0, "original_max_position_embeddings": 4096}' ||
        fail "config"
    want=$(train_one "$GOLD/tiny_yarn" "$W/ref") || exit 1
    got=$(train_one "$GOLD/tiny_yarn" "$W/run" --model "$W/model") || exit 1
    [ "$got" = "$want" ] || fail "step 1 $got, but rope_scaling's YaRN (factor 4) gives $want"
    grep -q "rope_scaling (YaRN, rope_theta 10000, factor 4, original_max_position_embeddings 4096) and rope_parameters (YaRN, rope_theta 20000, factor 2, original_max_position_embeddings 4096) disagree; transformers 5 reads rope_scaling" \
        "$W/run.out" || { cat "$W/run.out"; fail "the disagreement is not said naming both"; }
    # rope_scaling plain, rope_parameters YaRN (range 256): the model's positions are max_position_embeddings 64
    mkdir -p "$W/plain"
    $FIX config "$GOLD/tiny_untied_gqa/config.json" "$W/plain/config.json" 'rope_scaling={"rope_type": "default"}' \
        'rope_parameters={"rope_type": "yarn", "factor": 4.0, "rope_theta": 10000.0}' || fail "config"
    "$ZT" pack --quiet --input ids --vocab-size 80 --seq-len 128 -o "$W/data128" "$W/docs.txt" >/dev/null || fail "pack 128"
    "$ZT" train --init "$GOLD/tiny_untied_gqa" --model "$W/plain" --data "$W/data128" --run-dir "$W/run128" --steps 1 \
        --threads 1 >"$W/run128.out" 2>&1 && { cat "$W/run128.out"; fail "seq_len 128 past max_position_embeddings 64 trained"; }
    grep -q "seq_len 128 exceeds the model's max_position_embeddings 64" "$W/run128.out" ||
        { cat "$W/run128.out"; fail "the gate does not hold seq_len to rope_scaling's plain RoPE"; }
    grep -q "rope_scaling (plain RoPE, rope_theta 10000) and rope_parameters (YaRN" "$W/run128.out" ||
        fail "not said naming both"
    echo "ok [$CASE]: $got as rope_scaling's; seq_len 128 refused past 64"
    ;;
nonfinite_first)
    # YaRN's attention factor from mscale 1e308 / mscale_all_dim 1 (~1e307): the first forward overflows
    mkdir -p "$W/model"
    $FIX config "$GOLD/tiny_yarn/config.json" "$W/model/config.json" \
        'rope_scaling={"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 4096, "mscale": 1e308, "mscale_all_dim": 1.0}' ||
        fail "config"
    "$ZT" train --init "$GOLD/tiny_yarn" --model "$W/model" "${T[@]}" --run-dir "$W/run" --steps 2 >"$W/run.out" 2>&1 &&
        { cat "$W/run.out"; fail "an overflowing first step trained"; }
    grep -q "step 1: the .* is not finite.*; stopping before the update, and before any update: --lr plays no part yet" "$W/run.out" ||
        { cat "$W/run.out"; fail "not said that no update was made"; }
    grep -q "Check its config ($W/model" "$W/run.out" || { cat "$W/run.out"; fail "the config is not named"; }
    grep -q "the --init weights ($GOLD/tiny_yarn" "$W/run.out" || fail "the --init weights are not named"
    grep -q "Lower --lr" "$W/run.out" && fail "blamed on --lr before any update"
    # Qwen3.5 whose A_log is 1e4: exp(A_log) overflows the decay
    mkdir -p "$W/alog"
    cp "$GOLD/qwen3_5_text_mtp/config.json" "$W/alog/"
    $FIX fill "$GOLD/qwen3_5_text_mtp/model.safetensors" "$W/alog/model.safetensors" '*A_log' 1e4 || fail "fill"
    "$ZT" train --init "$W/alog" "${T[@]}" --run-dir "$W/run2" --steps 2 >"$W/run2.out" 2>&1 &&
        { cat "$W/run2.out"; fail "A_log 1e4 trained"; }
    grep -q "before any update: --lr plays no part yet.*the --init weights ($W/alog" "$W/run2.out" ||
        { cat "$W/run2.out"; fail "A_log: the --init weights are not named"; }
    grep -q "Lower --lr" "$W/run2.out" && fail "A_log blamed on --lr"
    echo "ok [$CASE]: $(grep -m1 -o 'step 1: the [a-z ]* is not finite' "$W/run.out")"
    ;;
mtp_layers)
    for n in 2 0 -; do
        rm -rf "$W/m$n" "$W/run$n"
        variant "m$n" qwen3_5_text_mtp "mtp_num_hidden_layers=$([ "$n" = - ] && echo - || echo "$n")"
        "$ZT" train --init "$W/m$n" "${T[@]}" --run-dir "$W/run$n" --steps 1 >"$W/m$n.out" 2>&1 &&
            { cat "$W/m$n.out"; fail "mtp_num_hidden_layers $n with one MTP layer's tensors carried"; }
        case $n in
        2) grep -q "config.json: the config has mtp_num_hidden_layers = 2, but the checkpoint's MTP head .* has no tensor of layer 1 (mtp.layers.1.\*)" "$W/m$n.out" ;;
        *) grep -q "config.json: tensor mtp.layers.0.[a-z_.]* belongs to MTP layer 0, but the config has mtp_num_hidden_layers = 0" "$W/m$n.out" ;;
        esac || { cat "$W/m$n.out"; fail "mtp_num_hidden_layers $n: not refused by name"; }
        [ ! -e "$W/run$n/carry" ] || fail "a refused carry was written"
    done
    echo "ok [$CASE]: $(grep -m1 -o 'tensor mtp[^:]*' "$W/m0.out")"
    ;;
*) fail "unknown case" ;;
esac
exit 0
