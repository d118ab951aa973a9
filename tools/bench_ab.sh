#!/bin/bash
# Alternated before/after benchmark of two gattn-cpu builds (docs/performance.md):
#   tools/bench_ab.sh BASE_BIN NEW_BIN INT8_CHECKPOINT BF16_CHECKPOINT [ROUNDS] [OUT_DIR]
# Each round runs both builds on int8 weights with bf16 and int8 KV and on bf16 weights with bf16
# KV, alternating which build goes first, and prints prefill/decode tok/s and the paired roofline.
set -euo pipefail
base=$1 new=$2 int8_ckpt=$3 bf16_ckpt=$4 rounds=${5:-3} out=${6:-bench-ab}
mkdir -p "$out"
for round in $(seq 1 "$rounds"); do
  for cfg in int8-bf16 int8-int8 bf16-bf16; do
    w=${cfg%-*} kv=${cfg#*-}
    m=$bf16_ckpt; [ "$w" = int8 ] && m=$int8_ckpt
    order="base new"; [ $((round % 2)) = 0 ] && order="new base"
    for b in $order; do
      bin=$base; [ "$b" = new ] && bin=$new
      json=$out/$cfg-$b-$round.json
      "$bin" bench -m "$m" -p 512 -n 16 -r 2 -t 2 --kv "$kv" --json > "$json.tmp" 2>/dev/null
      mv "$json.tmp" "$json"
      python3 - "$json" "$cfg $b round $round" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
prefill = d["prefill"]["tokens_per_second"]["median"]
decode = d["decode"]["tokens_per_second"]["median"]
print(f"{sys.argv[2]}: prefill {prefill:.1f} tok/s, decode {decode:.2f} tok/s, "
      f"paired roofline {d['roofline']['paired_ratio']:.3f}")
PY
    done
  done
done
