# Shared settings for the PyTorch peer scripts (sourced, not run).
# The venv lives outside the repository, under $PEERS_DIR (as the llama.cpp peer's does).

# Pinned versions: requirements.txt beside this file; the venv is named after the torch pin.
TORCH_VERSION=2.15.0
# Tried first when reachable: CPU-only torch wheels, without the CUDA runtime wheels.
TORCH_CPU_INDEX=https://download.pytorch.org/whl/cpu

PEERS_DIR=${GATTN_PEERS_DIR:-$HOME/.cache/gattn-peers}
VENV_DIR=$PEERS_DIR/venv-torch-$TORCH_VERSION
PY=$VENV_DIR/bin/python

require_setup() {
    if ! "$PY" -c 'import torch, transformers' 2>/dev/null; then
        echo "error: no torch/transformers in $VENV_DIR; run tools/peers/torch/setup.sh first" >&2
        exit 1
    fi
}
