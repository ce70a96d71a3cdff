"""The window's process imports no torch: checked at run time, in a fresh interpreter, because
import-linter does not see what a package's ``__init__`` imports eagerly (it missed exactly that)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

SCRIPT = r"""
import json, sys
from PySide6.QtWidgets import QApplication
import app.window.main, app.window
from app.window.window import MainWindow

qt = QApplication(sys.argv[:1])
window = MainWindow(remember=False)  # the default engine: a child process, which imports torch itself
window.show()
qt.processEvents()
window.close()
from engine.errors import ExportError
from engine.session_read import read_meta  # what --open reads before the window opens
try:
    read_meta("no-such-session.npz")
except ExportError:
    pass
heavy = ("torch", "transformers", "safetensors", "huggingface_hub")
print(json.dumps(sorted({m.split(".")[0] for m in sys.modules} & set(heavy))))
"""


def test_the_window_process_imports_no_torch(tmp_path):
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", PYTHONPATH=str(REPO), HOME=str(tmp_path),
               XDG_CONFIG_HOME=str(tmp_path), XDG_STATE_HOME=str(tmp_path))
    proc = subprocess.run([sys.executable, "-c", SCRIPT], cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == []


def test_the_engine_package_imports_nothing_heavy_until_asked():
    code = (
        "import sys, engine, engine.trace, engine.sampling, engine.info, engine.defaults, engine.tokens\n"
        "assert 'torch' not in sys.modules and 'transformers' not in sys.modules, 'eager import'\n"
        "from engine import SamplingSettings, Session\n"
        "assert 'torch' in sys.modules\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=dict(os.environ, PYTHONPATH=str(REPO)),
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
