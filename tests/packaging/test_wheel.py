"""The wheel (pip install ., not editable) carries the app, the engine, the demo model and the help
texts: built here, installed into an empty venv, it passes its own ``--smoke-test``.

The build and install are slow (torch, transformers and PySide6 go into the new venv: about a minute
or two from pip's local wheels and cache); the check of the package list is not.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest
from setuptools import find_packages

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    tomllib = pytest.importorskip("tomli")

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def test_the_wheel_lists_every_package_of_app_and_engine():
    # pyproject.toml names the packages one by one (find cannot map resources/ to nexttoken_resources),
    # so a new subpackage must be added there or the installed app misses it.
    setuptools = PYPROJECT["tool"]["setuptools"]
    found = find_packages(str(ROOT), include=["app", "app.*", "engine", "engine.*"])
    assert sorted(setuptools["packages"]) == sorted(found + ["nexttoken_resources"])
    assert setuptools["package-dir"] == {"nexttoken_resources": "resources"}


def test_the_license_is_an_spdx_expression_with_its_file():
    project = PYPROJECT["project"]
    assert project["license"] == "MIT" and project["license-files"] == ["LICENSE"]
    assert "MIT License" in (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert PYPROJECT["build-system"]["requires"] == ["setuptools>=77"]  # the first to take both


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    build = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(ROOT)],
                           capture_output=True, text=True, timeout=600)
    assert build.returncode == 0, build.stdout + build.stderr
    (found,) = out.glob("nexttoken-*.whl")
    return found


@pytest.mark.slow
def test_the_wheel_holds_the_demo_model_the_help_and_both_commands(wheel):
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        entry_points = z.read(next(n for n in names if n.endswith(".dist-info/entry_points.txt"))).decode()
    assert "nexttoken_resources/help/en.json" in names
    assert "nexttoken_resources/icons/nexttoken.png" in names
    assert "nexttoken_resources/models/gpt2-tiny-demo/config.json" in names
    assert not any(n.startswith("resources/") for n in names)  # no top-level "resources" in site-packages
    assert "nexttoken = app.window.main:main" in entry_points
    assert "nexttoken-engine = engine.cli:main" in entry_points


@pytest.mark.slow
def test_the_installed_wheel_opens_the_demo_model_in_an_empty_venv(wheel, tmp_path):
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    bin_dir = env_dir / ("Scripts" if sys.platform == "win32" else "bin")
    python = bin_dir / ("python.exe" if sys.platform == "win32" else "python")
    # torch first, as scripts/setup.sh does (the CPU build: pip's find-links here, PyTorch's CPU index elsewhere).
    torch = subprocess.run([str(python), str(ROOT / "scripts" / "torch_install.py")],
                           capture_output=True, text=True, timeout=900)
    assert torch.returncode == 0, torch.stdout + torch.stderr
    install = subprocess.run([str(python), "-m", "pip", "install", "-q", str(wheel)],
                             capture_output=True, text=True, timeout=900)
    assert install.returncode == 0, install.stdout + install.stderr

    # Run from an empty folder, with nothing of the checkout on the path: only the wheel can answer.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env |= {"QT_QPA_PLATFORM": "offscreen", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    where = subprocess.run([str(python), "-c", "from engine import paths; print(paths.resources_dir())"],
                           cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert where.returncode == 0, where.stderr
    assert Path(where.stdout.strip()).name == "nexttoken_resources"
    smoke = subprocess.run([str(bin_dir / "nexttoken"), "--smoke-test"], cwd=tmp_path, env=env,
                           capture_output=True, text=True, timeout=300)
    assert smoke.returncode == 0, smoke.stdout[-3000:] + smoke.stderr[-3000:]
    report = json.loads(smoke.stdout.strip().splitlines()[-1])
    assert report["ok"], report
    engine = subprocess.run([str(bin_dir / "nexttoken-engine"), "--prompt", "The cat sat on the", "--steps", "2", "--json"],
                            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert engine.returncode == 0, engine.stderr[-3000:]
    assert len(engine.stdout.strip().splitlines()) >= 2
    help_text = subprocess.run([str(python), "-c", "from app.logic import help; print(len(help.texts()))"],
                               cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert help_text.returncode == 0 and int(help_text.stdout) > 0, help_text.stderr
