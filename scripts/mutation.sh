#!/usr/bin/env bash
# Mutation testing with mutmut (PyPI): how many small changes to a module (a flipped comparison, a
# changed constant, a dropped call) its tests catch. docs/TESTING.md has the figures and names every
# surviving mutant.
#     ./scripts/mutation.sh            engine/sampling.py and app/logic/request_policy.py with their unit tests
#     ./scripts/mutation.sh engine     engine/hooks.py, engine/session.py and the session-file modules (session_write, session_read, session_validate)
#                                      with the engine tests that load a model, every family's included (much longer)
#     ./scripts/mutation.sh core "engine.sampling.x_top_ids*"    only the mutants named (mutmut's globs)
# MUTMUT_TIMEOUT_MULTIPLIER (mutmut's, default 15) sets when a mutant counts as timed out (killed): at
# 2 x multiplier x (its tests' own time + 1 s) of CPU.
# MUTMUT_CHILDREN (default 2) runs that many mutants at once; MUTMUT_TIME_LIMIT (seconds) stops the
# run there, leaving the mutants not reached "not checked" (a partial run: say so with its figures).
# It runs in a scratch copy of the tracked files (mutmut writes a mutants/ folder beside the code),
# prints mutmut's summary and the surviving mutants, and leaves the copy's path for `mutmut show`.
set -euo pipefail
cd "$(dirname "$0")/.."
set_name=${1:-core}
shift || true
case "$set_name" in
    core)
        mutate='["engine/sampling.py", "app/logic/request_policy.py"]'
        tests='["tests/engine/test_sampling.py", "tests/app/test_request_policy.py"]' ;;
    engine)
        mutate='["engine/hooks.py", "engine/session.py", "engine/session_write.py", "engine/session_read.py", "engine/session_validate.py"]'
        tests='["tests/engine/test_inside.py", "tests/engine/test_session.py", "tests/engine/test_session_file.py",
               "tests/engine/test_families.py",
               "--deselect", "tests/engine/test_session.py::test_torch_threads_untouched"]' ;;
    *) echo "usage: $0 [core|engine]" >&2; exit 2 ;;
esac
[ -x .venv/bin/python ] || ./scripts/setup.sh
. .venv/bin/activate
python -c "import mutmut" 2>/dev/null || python -m pip install -q "mutmut==3.8.1"
work=$(mktemp -d "${TMPDIR:-/tmp}/nexttoken-mutation.XXXXXX")
git ls-files -z | xargs -0 cp --parents -t "$work"
ln -s "$PWD/models" "$work/models" 2>/dev/null || true
cd "$work"
cat >> pyproject.toml <<TOML

[tool.mutmut]
source_paths = ["engine", "app"]
only_mutate = $mutate
pytest_add_cli_args_test_selection = $tests
pytest_add_cli_args = ["-p", "no:xdist", "-q", "-x"]
also_copy = ["resources", "scripts"]
timeout_multiplier = ${MUTMUT_TIMEOUT_MULTIPLIER:-15}
TOML
# one thread per library: a child forked from a parent with an OpenMP pool can hang in it for ever;
# for the same reason the engine set leaves out the test that sets torch to 3 threads (a mutant's
# child hung in its first layer norm, py-spy showed, and every mutant it ran timed out)
export QT_QPA_PLATFORM=offscreen HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONPATH="$work" OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
start=$(date +%s)
limit=()
[ -n "${MUTMUT_TIME_LIMIT:-}" ] && limit=(timeout "$MUTMUT_TIME_LIMIT")
"${limit[@]}" mutmut run --max-children "${MUTMUT_CHILDREN:-2}" "$@" || true
echo "mutmut ran for $(( $(date +%s) - start )) s in $work"
mutmut results --all true > results.txt || true
python - <<'PY'
import collections, re
counts = collections.Counter()
survivors = []
for line in open("results.txt"):
    m = re.match(r"\s*(\S+): (\S.*)", line)
    if m:
        counts[m.group(2)] += 1
        if m.group(2) == "survived":
            survivors.append(m.group(1))
total = sum(counts.values())
killed = counts["killed"] + counts["timeout"]
print(f"mutants: {total}; killed {killed} ({100 * killed / max(total, 1):.1f} %); " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
for name in survivors:
    print("survived:", name)
PY
