#!/usr/bin/env bash
# Create .venv in the repository root and install nexttoken with its test extras.
# torch is installed first, pinned, so that pip takes the CPU build rather than a multi-GB CUDA one.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
. .venv/bin/activate
python -m pip install -q --upgrade pip
python -m pip install -q "torch==2.13.0"
python -m pip install -q -e ".[test${EXTRAS:+,$EXTRAS}]"
