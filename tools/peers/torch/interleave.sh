#!/usr/bin/env bash
# PyTorch and gattn-cpu run by run in turn on the same weights, so that each comparison sees the
# same host (a shared machine's speed moves within minutes: only paired runs give a ratio).
# Usage: tools/peers/torch/interleave.sh BF16_DIR INT8_DIR OUT_DIR
#   BF16_DIR: a `gattn-cpu init` checkpoint (PyTorch runs it in bf16, sdpa); INT8_DIR: the same
#   weights after `gattn-cpu quantize` (gattn-cpu runs it with --kv bf16 and --kv int8).
#   Each round, for each prompt length N: bench.py -p N, then gattn-cpu bench -p N per KV format,
#   each one warm-up prefill, REPS timed prefills and N_GEN decoded tokens. One JSON file per run
#   in OUT_DIR; interleave_table.py prints the runs, the per-round ratios and their medians.
# Environment: GATTN (target/release/gattn-cpu), ROUNDS (2), PROMPTS ("512 8192"), N_GEN (32),
#   REPS (1), KVS ("bf16 int8"), THREADS (2), NO_WARMUP (set: both engines skip the warm-up),
#   TORCH_DTYPE (bf16; f32 is PyTorch's faster path on CPUs without AVX-512 BF16, see README).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/env.sh"

if [ $# -ne 3 ] || [ "$1" = -h ] || [ "$1" = --help ]; then
    sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
fi
BF16_DIR=$1 INT8_DIR=$2 OUT=$3
GATTN=${GATTN:-$HERE/../../../target/release/gattn-cpu}
THREADS=${THREADS:-2} N_GEN=${N_GEN:-32} REPS=${REPS:-1}
warmup=()
[ -z "${NO_WARMUP:-}" ] || warmup=(--no-warmup)
require_setup
mkdir -p "$OUT"
loadavg() { cut -d' ' -f1-3 /proc/loadavg; }

for i in $(seq 1 "${ROUNDS:-2}"); do
    for n in ${PROMPTS:-512 8192}; do
        echo "round $i, prompt $n: load average $(loadavg)" >&2
        "$PY" "$HERE/bench.py" -m "$BF16_DIR" --dtype "${TORCH_DTYPE:-bf16}" -t "$THREADS" -p "$n" -n "$N_GEN" -r "$REPS" "${warmup[@]}" \
            > "$OUT/torch-p$n-$i.json"
        for kv in ${KVS:-bf16 int8}; do
            "$GATTN" bench -m "$INT8_DIR" -t "$THREADS" --kv "$kv" -p "$n" -n "$N_GEN" -r "$REPS" "${warmup[@]}" --json \
                > "$OUT/gattn-$kv-p$n-$i.json" 2>/dev/null
        done
    done
done
echo "load average at the end: $(loadavg)" >&2
"$PY" "$HERE/interleave_table.py" "$OUT"
