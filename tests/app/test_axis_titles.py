"""A plot's axes as ``theme.style_plot`` leaves them: tick values as the data has them (no hidden
SI scaling: pyqtgraph 0.14 scaled an axis of values under 1 by 1000 even with its auto SI prefix
off, so 0.2 read as 200), and each axis title centred along its axis."""

from __future__ import annotations

import numpy as np
import pytest

from app.window import theme as th


def _tick_texts(axis) -> list[str]:
    """The tick labels as the axis paints them (its values times its scale, as ``generateDrawSpecs``)."""
    texts = []
    for spacing, values in axis.tickValues(*axis.range, 200):
        texts += axis.tickStrings(values, axis.autoSIPrefixScale * axis.scale, spacing)
    return texts


@pytest.mark.parametrize("theme", [th.NORMAL, th.PROJECTOR], ids=["normal", "projector"])
def test_values_under_one_are_written_as_they_are(qtbot, theme):
    view = th.plot_widget()
    qtbot.addWidget(view)
    view.resize(420, 300)
    plot = view.getPlotItem()
    plot.plot(np.arange(5), np.array([0.0, 0.1, 0.25, 0.4, 0.5]))
    th.style_plot(plot, theme, left="probability", bottom="position")
    view.show()
    qtbot.wait(20)
    th.style_plot(plot, theme, left="probability", bottom="position")  # a theme change styles it again
    qtbot.wait(20)
    left = plot.getAxis("left")
    assert left.autoSIPrefixScale == 1.0 and "x" not in left.labelString().split(">")[1]
    values = [float(t) for t in _tick_texts(left) if t]
    assert values and max(values) <= 0.6, values


@pytest.mark.parametrize("theme", [th.NORMAL, th.PROJECTOR], ids=["normal", "projector"])
def test_axis_titles_are_centred_on_their_axes(qtbot, theme):
    view = th.plot_widget()
    qtbot.addWidget(view)
    view.resize(500, 320)
    plot = view.getPlotItem()
    plot.plot(np.arange(5), np.arange(5))
    view.show()
    qtbot.wait(20)
    th.style_plot(plot, theme, left="logit", bottom="block")
    qtbot.wait(20)
    bottom = plot.getAxis("bottom")
    centre = bottom.label.mapRectToParent(bottom.label.boundingRect()).center().x()
    assert abs(centre - bottom.boundingRect().center().x()) <= 3
    left = plot.getAxis("left")
    centre = left.label.mapRectToParent(left.label.boundingRect()).center().y()
    assert abs(centre - left.boundingRect().center().y()) <= 3


@pytest.mark.parametrize("theme", [th.NORMAL, th.PROJECTOR], ids=["normal", "projector"])
def test_a_longer_title_is_centred_again(qtbot, theme):
    """A title replaced by a longer one with no resize between ("PC 1" → "PC 1 (77% of embedding
    variance)", the Overview's embeddings at 1366 x 768) kept the short one's start: it ran past the
    plot's right edge and was cut. pyqtgraph places a title only when its axis is resized."""
    view = th.plot_widget()
    qtbot.addWidget(view)
    view.resize(430, 260)
    plot = view.getPlotItem()
    plot.plot(np.arange(5), np.arange(5))
    view.show()
    th.style_plot(plot, theme, left="PC 2", bottom="PC 1")
    qtbot.wait(20)
    th.style_plot(plot, theme, left="PC 2 (1%)", bottom="PC 1 (77% of embedding variance)")
    qtbot.wait(20)
    bottom = plot.getAxis("bottom")
    centre = bottom.label.mapRectToParent(bottom.label.boundingRect()).center().x()
    assert abs(centre - bottom.boundingRect().center().x()) <= 3, (centre, bottom.boundingRect().center().x())
    left = plot.getAxis("left")
    centre = left.label.mapRectToParent(left.label.boundingRect()).center().y()
    assert abs(centre - left.boundingRect().center().y()) <= 3, (centre, left.boundingRect().center().y())
