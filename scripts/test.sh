#!/usr/bin/env bash
# Set up .venv (scripts/setup.sh), check the import contracts, run the whole test suite offscreen.
set -euo pipefail
cd "$(dirname "$0")/.."
EXTRAS=${EXTRAS:-packaging} ./scripts/setup.sh
. .venv/bin/activate
export QT_QPA_PLATFORM=offscreen HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
lint-imports
python -m pytest "$@"
