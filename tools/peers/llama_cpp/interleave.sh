#!/usr/bin/env bash
# llama.cpp and gattn-cpu run by run in turn, so that each pair sees the same host: its read
# bandwidth moves by 2x within minutes, and llama.cpp's decode follows it less than ours does, so
# only paired runs give a ratio. One JSON file per run in OUT_DIR; interleave_table.py prints them.
# Usage: tools/peers/llama_cpp/interleave.sh GGUF_DIR INT8_DIR BF16_DIR OUT_DIR
#   GGUF_DIR: model-q8_0.gguf and model-bf16.gguf (convert.sh); INT8_DIR: the same weights after
#   `gattn-cpu quantize`; BF16_DIR: the bf16 checkpoint they came from.
# Environment: GATTN (target/release/gattn-cpu), ROUNDS (4: prefill 512 + decode 32, both
#   formats), DEPTH_ROUNDS (3: decode 32 after 4096 tokens, Q8_0 FA off vs int8 and bf16 KV),
#   PD_ROUNDS (0: prefill PD_PROMPT (512) tokens after PD_DEPTH (32768) cached ones; per round and
#   FA setting in PD_FA ("0 1"), one Q8_0 llama-bench run (its fill is real and untimed, so slow),
#   then gattn-cpu int8 with each KV format in PD_KVS ("bf16 int8"), --depth-fill synthetic, -n 1;
#   PD_REPS (1) timed prefills each). Set ROUNDS=0 DEPTH_ROUNDS=0 to run only these.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/env.sh"

if [ $# -ne 4 ] || [ "$1" = -h ] || [ "$1" = --help ]; then
    sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
fi
GGUF_DIR=$1 INT8_DIR=$2 BF16_DIR=$3 OUT=$4
GATTN=${GATTN:-$HERE/../../../target/release/gattn-cpu}
require_setup
mkdir -p "$OUT"
# shellcheck disable=SC2086 # LLAMA_BENCH_ARGS is a list of flags
llama() { "$BIN_DIR/llama-bench" -t 2 -r 1 -o json $LLAMA_BENCH_ARGS "$@" 2>/dev/null; }
ours() { "$GATTN" bench -t 2 --json "$@" 2>/dev/null; }

for i in $(seq 1 "${ROUNDS:-4}"); do
    llama -m "$GGUF_DIR/model-q8_0.gguf" -fa 0,1 -p 512 -n 32 > "$OUT/llama-q8-$i.json"
    ours -m "$INT8_DIR" -p 512 -n 32 -r 1 > "$OUT/ours-int8-$i.json"
    llama -m "$GGUF_DIR/model-bf16.gguf" -fa 0,1 -p 512 -n 32 > "$OUT/llama-bf16-$i.json"
    ours -m "$BF16_DIR" --weights bf16 -p 512 -n 32 -r 1 > "$OUT/ours-bf16-$i.json"
    echo "round $i done" >&2
done
for i in $(seq 1 "${DEPTH_ROUNDS:-3}"); do
    llama -m "$GGUF_DIR/model-q8_0.gguf" -fa 0 -p 0 -n 32 -d 4096 > "$OUT/llama-d4096-$i.json"
    for kv in int8 bf16; do
        ours -m "$INT8_DIR" -p 1 -n 32 -d 4096 --depth-fill synthetic --kv $kv -r 2 \
            > "$OUT/ours-d4096-$kv-$i.json"
    done
    echo "depth round $i done" >&2
done
PD_PROMPT=${PD_PROMPT:-512} PD_DEPTH=${PD_DEPTH:-32768} PD_REPS=${PD_REPS:-1}
pd=p$PD_PROMPT-d$PD_DEPTH
for i in $(seq 1 "${PD_ROUNDS:-0}"); do
    for fa in ${PD_FA:-0 1}; do
        llama -m "$GGUF_DIR/model-q8_0.gguf" -fa "$fa" -p "$PD_PROMPT" -n 0 -d "$PD_DEPTH" -r "$PD_REPS" \
            > "$OUT/llama-$pd-fa$fa-$i.json"
        for kv in ${PD_KVS:-bf16 int8}; do
            ours -m "$INT8_DIR" -p "$PD_PROMPT" -n 1 -d "$PD_DEPTH" --depth-fill synthetic --kv "$kv" \
                -r "$PD_REPS" > "$OUT/ours-$pd-fa$fa-$kv-$i.json"
        done
        echo "prefill-at-depth round $i, fa $fa done (load average $(cut -d' ' -f1-3 /proc/loadavg))" >&2
    done
done
"$PY" "$HERE/interleave_table.py" "$OUT"
