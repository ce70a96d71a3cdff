"""scripts/test.sh runs the fast tests, or every test with --all, and sets .venv up again only when it
is missing or pyproject.toml changed: run here against a .venv whose python and lint-imports only
write down how they were called."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(sys.platform == "win32" or not shutil.which("bash"), reason="a bash script")

FAKE = """#!/usr/bin/env bash
echo "$(basename "$0") $*" >> "{log}"
"""


@pytest.fixture
def checkout(tmp_path) -> Path:
    """A copy of the scripts and pyproject.toml, with a .venv of fakes that log their arguments."""
    repo = tmp_path / "repo"
    (repo / "scripts").mkdir(parents=True)
    for name in ("test.sh", "setup.sh"):
        shutil.copy2(ROOT / "scripts" / name, repo / "scripts" / name)
    shutil.copy2(ROOT / "pyproject.toml", repo / "pyproject.toml")
    bin_dir = repo / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    for tool in ("python", "lint-imports"):
        (bin_dir / tool).write_text(FAKE.format(log=tmp_path / "calls.log"))
        (bin_dir / tool).chmod(0o755)
    (bin_dir / "activate").write_text(f'export PATH="{bin_dir}:$PATH"\n')
    return repo


def run(checkout: Path, *args: str) -> list[str]:
    """Run scripts/test.sh with ``args``; the commands the fakes saw, in order."""
    log = checkout.parent / "calls.log"
    log.unlink(missing_ok=True)
    env = dict(os.environ, PYTHON=sys.executable)  # setup.sh's hash: any Python does
    done = subprocess.run(["bash", "scripts/test.sh", *args], cwd=checkout, env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    return log.read_text().splitlines()


def test_fast_by_default_everything_with_all_and_setup_only_when_pyproject_changes(checkout):
    first = run(checkout)  # no record of a setup yet: set up, then the fast tests
    assert "python -m pip install -q -e .[test]" in first
    assert not any("packaging" in call for call in first)  # test.sh installs no packaging tools
    assert first[-2:] == ["lint-imports ", "python -m pytest -m not slow -n 2 --dist loadfile --no-loadscope-reorder"]

    again = run(checkout, "-x")  # .venv is current: nothing is installed
    assert again == ["lint-imports ", "python -m pytest -m not slow -n 2 --dist loadfile --no-loadscope-reorder -x"]
    assert run(checkout, "--all", "-x") == ["lint-imports ", "python -m pytest -n 2 --dist loadfile -x"]

    pyproject = checkout / "pyproject.toml"
    pyproject.write_text(pyproject.read_text() + "\n# changed\n")
    changed = run(checkout)
    assert "python -m pip install -q -e .[test]" in changed and changed[-1] == "python -m pytest -m not slow -n 2 --dist loadfile --no-loadscope-reorder"
