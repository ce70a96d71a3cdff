"""PySide6 must not lose references to None, True or False in the calls pyqtgraph makes every step.

PySide6-Essentials 6.12.0 lost about 13 references to None per setRange + setPos on CPython 3.11,
which aborts the interpreter ("Fatal Python error: none_dealloc") after a long session; 6.11.3 loses
none. This test keeps a future upgrade from bringing the bug back. The plot is driven in a fresh
interpreter of its own: a pytest-xdist worker's own thread moves None's refcount, and the suite runs
on workers (./scripts/test.sh, --all included).
"""

import json
import os
import subprocess
import sys

PLOT_UPDATES = """
import json, sys
import pyqtgraph as pg
from PySide6.QtWidgets import QApplication
app = QApplication([])
widget = pg.PlotWidget()
scatter = pg.ScatterPlotItem()
widget.addItem(scatter)
singletons = (None, True, False)
before = [sys.getrefcount(obj) for obj in singletons]
for i in range(200):
    widget.getPlotItem().setRange(xRange=(0, i + 1), yRange=(0, 1))
    scatter.setPos(i, 0)
    scatter.setData([0, i], [1, 0])
after = [sys.getrefcount(obj) for obj in singletons]
print(json.dumps([b - a for b, a in zip(before, after)]))
"""


def lost_references(script: str = PLOT_UPDATES) -> list[int]:
    """References to None, True and False that ``script`` lost, as it prints them."""
    env = os.environ | {"QT_QPA_PLATFORM": "offscreen"}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_plot_updates_keep_singleton_refcounts():
    lost = lost_references()
    assert max(lost) < 50, f"PySide6 lost references to None/True/False: {lost} over 200 updates"


def test_the_check_sees_lost_references():
    """The measure itself: a script that drops 300 references to None (a ctypes decref) is caught."""
    dropping = PLOT_UPDATES.replace(
        "after =", "import ctypes\nfor _ in range(300): ctypes.pythonapi.Py_IncRef(ctypes.py_object(None)); ctypes.pythonapi.Py_DecRef(ctypes.py_object(None)); ctypes.pythonapi.Py_DecRef(ctypes.py_object(None))\nafter =", 1)
    assert lost_references(dropping)[0] >= 250  # well past the limit of 50 (the loop itself holds a few)
