#!/usr/bin/env bash
# RULER sweep over models x lengths, then one comparison table and chart.
#
#   scripts/ruler.sh [-o OUT] [-l LENGTHS] [-n SAMPLES] [-T TASKS] [-- EXTRA RULER ARGS] MODEL_DIR...
#
# Each MODEL_DIR is evaluated into OUT/<model dir name>/ (rerunning resumes), then
# `gattn-cpu ruler compare` writes OUT/compare/{compare.md,compare.csv,compare.png}.
# With no MODEL_DIR, a demo: random tiny baseline, headwise and elementwise checkpoints
# (scores are 0 for random weights; the demo only shows the pipeline).
#
# Environment: GATTN_CPU (the binary; default: cargo run --release -p gattn-cli --),
# RULER_EXTRA (extra ruler flags, e.g. "--rope-scaling yarn:4 --chat --threads 8").
set -euo pipefail

out=out/ruler
lengths=4K,8K,16K,32K
samples=20
tasks=all
while getopts "o:l:n:T:h" opt; do
    case "$opt" in
        o) out=$OPTARG ;;
        l) lengths=$OPTARG ;;
        n) samples=$OPTARG ;;
        T) tasks=$OPTARG ;;
        h) sed -n '2,13p' "$0"; exit 0 ;;
        *) exit 2 ;;
    esac
done
shift $((OPTIND - 1))
[[ "${1:-}" == "--" ]] && shift

if [[ -n "${GATTN_CPU:-}" ]]; then
    gattn=("$GATTN_CPU")
else
    cargo build --release -q -p gattn-cli
    gattn=("$(dirname "$0")/../target/release/gattn-cpu")
    [[ -n "${CARGO_TARGET_DIR:-}" ]] && gattn=("$CARGO_TARGET_DIR/release/gattn-cpu")
fi

models=("$@")
if [[ ${#models[@]} -eq 0 ]]; then
    echo "ruler.sh: no model given: demo on random tiny checkpoints" >&2
    for gate in none headwise elementwise; do
        dir="$out/models/tiny-$gate"
        [[ -f "$dir/config.json" ]] || "${gattn[@]}" init --preset tiny --gate "$gate" --out "$dir"
        models+=("$dir")
    done
    lengths=1K,2K
    samples=2
    tasks=niah_single_1,niah_multikey_2
fi

runs=()
for model in "${models[@]}"; do
    name=$(basename "$model")
    echo "ruler.sh: $name at $lengths" >&2
    # shellcheck disable=SC2086 # RULER_EXTRA is a list of flags
    "${gattn[@]}" ruler -m "$model" --tasks "$tasks" --lengths "$lengths" -n "$samples" \
        ${RULER_EXTRA:-} --out "$out/$name"
    runs+=("$out/$name")
done

# The comparison is this script's own output: a rerun replaces it.
"${gattn[@]}" ruler compare "${runs[@]}" --out "$out/compare" --force
cat "$out/compare/compare.md"
