#!/usr/bin/env bash
# Run the tests offscreen after checking the import contracts:
#     ./scripts/test.sh               the fast tests (all but those marked slow), on two workers
#                                     (pytest-xdist; a module's tests stay on one worker, so they share its window)
#     ./scripts/test.sh --all         every test (.ci/run; the packaging tests want the packaging extra), also on
#                                     two workers: the slow packaging builds (single-threaded for the most part:
#                                     PyInstaller's analysis, gzip, lintian) overlap the other tests; two that
#                                     ask for the same build wait for each other (packaging/build.py's lock)
#     ./scripts/test.sh -k attention  more arguments go to pytest
# .venv is set up (scripts/setup.sh) only when it is missing or pyproject.toml changed since its last
# setup (setup.sh writes pyproject.toml's hash to .venv/nexttoken-setup.sha256): nothing is installed here
# otherwise, and never the packaging tools.
set -euo pipefail
cd "$(dirname "$0")/.."
# a module's tests on one worker; the fast run takes the modules in the order pytest collects them
# (tests/app's window tests first, the quick checks last): xdist's own order, most tests first, left
# single slow tests to the end, and one worker ran them alone (13 s of a 3 min run). CI's --all
# keeps xdist's order, the one its times (the packaging builds the longest path) were measured with.
select=(-m "not slow" -n 2 --dist loadfile --no-loadscope-reorder)
if [ "${1:-}" = "--all" ]; then
    select=(-n 2 --dist loadfile)
    shift
fi
if [ ! -x .venv/bin/python ] || [ "$(cat .venv/nexttoken-setup.sha256 2>/dev/null)" != "$(./scripts/setup.sh --hash)" ]; then
    ./scripts/setup.sh
fi
. .venv/bin/activate
export QT_QPA_PLATFORM=offscreen HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
# compiled modules and pytest's rewritten tests are kept (__pycache__, ignored by git): without them
# every worker and every app or engine process a test starts compiles them again
unset PYTHONDONTWRITEBYTECODE
lint-imports
python -m pytest "${select[@]}" "$@"
