"""The test workflow (.github/workflows/tests.yml) passes actionlint and runs the fast tests on the
three systems the installers target, with torch's CPU build and Qt offscreen."""

from __future__ import annotations

from pathlib import Path

from tests.packaging.test_workflow import lint

ROOT = Path(__file__).resolve().parents[2]
WORKFLOW = ROOT / ".github" / "workflows" / "tests.yml"


def test_tests_workflow_passes_actionlint():
    run = lint(WORKFLOW)
    assert run.returncode == 0, run.stdout + run.stderr


def test_actionlint_fails_a_broken_tests_workflow(tmp_path):
    # The check above can fail: an unknown property of the matrix is an error.
    broken = tmp_path / "broken.yml"
    broken.write_text(WORKFLOW.read_text(encoding="utf-8").replace("${{ matrix.os }}", "${{ matrix.system }}"))
    run = lint(broken)
    assert run.returncode != 0 and "system" in run.stdout


def test_the_fast_tests_run_on_linux_windows_and_macos_as_the_setup_script_installs():
    text = WORKFLOW.read_text(encoding="utf-8")
    assert "os: [ubuntu-latest, windows-latest, macos-15]" in text
    assert "runs-on: ${{ matrix.os }}" in text
    assert "python scripts/torch_install.py\n" in text and "torch_install.py --check" in text
    assert 'python -m pytest -m "not slow"' in text and "lint-imports" in text
    assert "QT_QPA_PLATFORM: offscreen" in text
    for library in ("libegl1", "libgl1", "libxkbcommon0", "libxkbcommon-x11-0", "libfontconfig1", "libxcb-cursor0", "libdbus-1-3"):
        assert library in text
