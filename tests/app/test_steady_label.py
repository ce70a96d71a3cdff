"""SteadyLabel: a caption that changes every step keeps its height, so the plot beside it keeps its size."""

from __future__ import annotations

from PySide6.QtWidgets import QVBoxLayout, QWidget

from app.panels.steady_label import SteadyLabel

LONG = "Chosen: “ something rather long” (sampled), probability 12.5%, rank 3 by raw logit. Entropy 5.21 bits."


def test_a_shorter_text_keeps_the_height_until_the_width_changes(qtbot):
    box = QWidget()
    layout = QVBoxLayout(box)
    label = SteadyLabel("short")
    layout.addWidget(label)
    layout.addStretch(1)
    qtbot.addWidget(box)
    box.resize(220, 400)
    box.show()
    qtbot.waitExposed(box)
    one_line = label.height()
    label.setText(LONG)
    qtbot.waitUntil(lambda: label.height() > one_line)
    wrapped = label.height()
    label.setText("short")
    qtbot.wait(20)
    assert label.height() == wrapped  # held: the layout below does not move
    box.resize(2000, 400)  # wide enough for one line: the held height is let go
    qtbot.waitUntil(lambda: label.height() == one_line)
