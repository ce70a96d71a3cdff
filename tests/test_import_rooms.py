"""Each room of app/ is guarded by where a module lives, not by a list of names: a new module
dropped into a room with a forbidden import breaks that room's contract (pyproject.toml).

The probes go into a copy of app/ and engine/, so the tree the other tests import is never touched.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# room -> what a new module there must not import
PROBES = {
    "app/window": "torch",
    "app/panels": "torch",
    "app/logic": "PySide6",
    "app/protocol": "torch",
    "app/host": "PySide6",
    "engine": "app.window.theme",
}


def lint(tree: Path) -> subprocess.CompletedProcess:
    linter = Path(sys.executable).with_name("lint-imports")
    env = dict(os.environ, PYTHONPATH=str(tree))
    return subprocess.run([str(linter), "--no-cache"], cwd=tree, env=env, capture_output=True, text=True, timeout=300)


def copy_tree(tmp_path: Path) -> Path:
    tree = tmp_path / "tree"
    for folder in ("app", "engine"):
        shutil.copytree(ROOT / folder, tree / folder, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tree / "pyproject.toml")
    return tree


def test_the_copied_tree_keeps_every_contract(tmp_path):
    done = lint(copy_tree(tmp_path))
    assert done.returncode == 0, done.stdout[-3000:]


def test_a_new_module_in_any_room_with_a_forbidden_import_breaks_its_contract(tmp_path):
    tree = copy_tree(tmp_path)
    for room, forbidden in PROBES.items():
        (tree / room / "new_probe.py").write_text(f"import {forbidden}\n")
    done = lint(tree)
    assert done.returncode != 0
    for room, forbidden in PROBES.items():
        module = room.replace("/", ".") + ".new_probe"
        assert f"{module} -> {forbidden}" in done.stdout, (module, done.stdout[-3000:])
