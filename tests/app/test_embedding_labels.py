"""The embeddings scatter's token labels: two labels side by side keep a space between them, so that
they read as two tokens and not as one."""

from __future__ import annotations

import numpy as np

from app.protocol import messages as p

from .helpers import run
from .test_screens import _ink_box


def test_two_labels_side_by_side_keep_a_space_apart(window, qtbot):
    """A chat turn at 1366 x 768: the labels "'" and "␣is" of two near points were drawn 2 px apart and
    read as one token "'␣is". Points moved apart a pixel at a time: two labels beside each other (on
    the same line) are at least a space of their font apart, else one is left out."""
    window.resize(1366, 768)
    run(qtbot, window, window.step, p.Step)
    window.show_view("overview")
    panel = window.embeddings
    window.overview.show_panel(panel)
    qtbot.wait(20)
    panel.plot.setRange(xRange=(0, 100), yRange=(0, 100), padding=0)
    qtbot.wait(20)
    view = panel.plot.getViewBox().viewRange()
    box = panel.plot.getViewBox()
    space = panel._label_fm.horizontalAdvance(" ")
    pieces = ["'", "␣is"]
    close = []
    for step in range(40):  # the second point 0 to 39 px right of the first, on the same height
        dx = step * (view[0][1] - view[0][0]) / max(box.width(), 1)
        xy = np.array([[40.0, 50.0], [40.0 + dx, 50.0]], np.float32)
        shown = panel._uncrowded([0, 1], xy, pieces, view)
        for label, i in zip(panel.labels, shown):
            label.setText(pieces[i])
            label.setPos(float(xy[i, 0]), float(xy[i, 1]))
            label.setVisible(True)
        for label in panel.labels[len(shown):]:
            label.setVisible(False)
        if len(shown) == 2:
            for label in panel.labels[:2]:
                label.updateTransform(force=True)
            a, b = (panel.view.mapFromScene(_ink_box(label)).boundingRect() for label in panel.labels[:2])
            gap = b.left() - a.right()
            if gap < space:
                close.append(f"{step} px apart: the labels {gap} px apart, a space is {space} px")
    assert close == []
