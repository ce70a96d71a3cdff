"""PySide6 must not lose references to None, True or False in the calls pyqtgraph makes every step.

PySide6-Essentials 6.12.0 lost about 13 references to None per setRange + setPos on CPython 3.11,
which aborts the interpreter ("Fatal Python error: none_dealloc") after a long session; 6.11.3 loses
none. This test keeps a future upgrade from bringing the bug back.
"""

import os
import sys

import pyqtgraph as pg
import pytest


@pytest.mark.skipif(
    "PYTEST_XDIST_WORKER" in os.environ,
    reason="a pytest-xdist worker's own thread moves None's refcount; runs in the one-process run (--all, CI)",
)
def test_plot_updates_keep_singleton_refcounts(qtbot):
    widget = pg.PlotWidget()
    qtbot.addWidget(widget)
    scatter = pg.ScatterPlotItem()
    widget.addItem(scatter)
    singletons = (None, True, False)
    before = [sys.getrefcount(obj) for obj in singletons]
    for i in range(200):
        widget.getPlotItem().setRange(xRange=(0, i + 1), yRange=(0, 1))
        scatter.setPos(i, 0)
        scatter.setData([0, i], [1, 0])
    after = [sys.getrefcount(obj) for obj in singletons]
    lost = [b - a for b, a in zip(before, after)]
    assert max(lost) < 50, f"PySide6 lost references to None/True/False: {lost} over 200 updates"
