#!/usr/bin/env bash
# Make the PyTorch peer's private venv: torch, transformers, safetensors, numpy as pinned in
# requirements.txt, in ${GATTN_PEERS_DIR:-~/.cache/gattn-peers}/venv-torch-<version>.
# Usage: tools/peers/torch/setup.sh
# torch comes from the PyTorch CPU wheel index when that answers within 10 s (no CUDA wheels),
# else from PyPI (the CUDA build: about 3 GB of nvidia-* wheels that the CPU path loads but
# never calls; about 5.6 GB installed). Skipped when the venv already imports the pinned torch.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/env.sh"

if [ $# -gt 0 ]; then
    sed -n '4,7p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
fi
if "$PY" -c "import sys, torch, transformers; sys.exit(torch.__version__.split('+')[0] != '$TORCH_VERSION')" 2>/dev/null; then
    echo "already set up: $VENV_DIR ($("$PY" -c 'import torch; print(torch.__version__)'))"
    exit 0
fi
start=$(date +%s)
mkdir -p "$PEERS_DIR"
[ -x "$PY" ] || python3 -m venv "$VENV_DIR"
if "$PY" -c "import urllib.request; urllib.request.urlopen('$TORCH_CPU_INDEX/torch/', timeout=10)" 2>/dev/null; then
    echo "torch $TORCH_VERSION from the CPU wheel index"
    "$PY" -m pip install --no-cache-dir --index-url "$TORCH_CPU_INDEX" "torch==$TORCH_VERSION"
else
    echo "the CPU wheel index does not answer: torch $TORCH_VERSION from PyPI (CUDA build, ~3 GB more)"
fi
# torch==X also accepts the CPU index's X+cpu, so this installs only what is still missing.
"$PY" -m pip install --no-cache-dir -r "$HERE/requirements.txt"
"$PY" -c 'import torch, transformers; print("torch", torch.__version__, "transformers", transformers.__version__, "CPU", torch.backends.cpu.get_cpu_capability())'
echo "venv: $VENV_DIR ($(( $(date +%s) - start )) s)"
