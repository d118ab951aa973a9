#!/usr/bin/env bash
# Convert a gattn-cpu baseline (gate none) Qwen3 checkpoint to GGUF BF16 and Q8_0 for llama.cpp.
# Usage: tools/peers/llama_cpp/convert.sh [--tokenizer DIR] MODEL_DIR OUT_DIR
#   writes OUT_DIR/model-bf16.gguf (write_gguf.py) and OUT_DIR/model-q8_0.gguf (llama-quantize).
#   --tokenizer DIR: take tokenizer.json/tokenizer_config.json from DIR (e.g. the real Qwen3 one in
#   /work/shared/data/qwen3-tokenizer) instead of the checkpoint's own.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/env.sh"

usage() { sed -n '3,6p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
tok_args=()
while [ $# -gt 0 ]; do
    case "$1" in
        --tokenizer) [ $# -ge 2 ] || usage; tok_args=(--tokenizer "$2"); shift 2 ;;
        -h|--help) usage ;;
        -*) echo "error: unknown option $1" >&2; usage ;;
        *) break ;;
    esac
done
[ $# -eq 2 ] || usage
MODEL_DIR=$1
OUT_DIR=$2
require_setup
mkdir -p "$OUT_DIR"

start=$(date +%s)
"$PY" "$HERE/write_gguf.py" "${tok_args[@]}" "$MODEL_DIR" "$OUT_DIR/model-bf16.gguf"
echo "bf16: $OUT_DIR/model-bf16.gguf ($(( $(date +%s) - start )) s)"
start=$(date +%s)
"$BIN_DIR/llama-quantize" "$OUT_DIR/model-bf16.gguf" "$OUT_DIR/model-q8_0.gguf" Q8_0 \
    >"$OUT_DIR/quantize.log" 2>&1 || { tail -20 "$OUT_DIR/quantize.log"; exit 1; }
echo "q8_0: $OUT_DIR/model-q8_0.gguf ($(( $(date +%s) - start )) s)"
