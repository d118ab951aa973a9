#!/usr/bin/env bash
# Check the peer's Qwen3 (stock and gated) against gattn-cpu's f32 reference on the same weights.
# Usage: tools/peers/torch/check_logits.sh [GATTN_CPU]   (default: gattn-cpu on PATH)
# For each gate (none, headwise, elementwise) and preset (tiny, small): `gattn-cpu init` writes a
# random f32 checkpoint, `gattn-cpu logits --weights f32` and `bench.py --check-logits --dtype f32`
# write the logits of the same prompt, and compare_logits.py prints max |diff| / std(logits).
# Fails when a ratio exceeds TOLERANCE (1e-4; f32 against f32, the two differ by rounding only).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/env.sh"
GATTN=${1:-gattn-cpu}
TOLERANCE=${TOLERANCE:-1e-4}
PROMPT=${PROMPT:-1,2,3,50,77,100,5,9,200,31,64,17}
require_setup

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
status=0
for preset in tiny small; do
    for gate in none headwise elementwise; do
        dir=$tmp/$preset-$gate
        "$GATTN" init --preset "$preset" --gate "$gate" --dtype f32 -s 7 -o "$dir" >/dev/null
        "$GATTN" logits -m "$dir" --weights f32 --prompt-ids "$PROMPT" --out "$dir/gattn.npy" >/dev/null
        "$PY" "$HERE/bench.py" -m "$dir" --dtype f32 -t 2 --check-logits "$dir/torch.npy" \
            --prompt-ids "$PROMPT" 2>"$dir/torch.err" || { cat "$dir/torch.err" >&2; exit 1; }
        "$PY" "$HERE/compare_logits.py" --label "$preset $gate" --tolerance "$TOLERANCE" \
            "$dir/gattn.npy" "$dir/torch.npy" || status=1
    done
done
exit $status
