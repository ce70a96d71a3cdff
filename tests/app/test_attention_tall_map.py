"""The attention map among the other panels (not focused) names every query row and key column of
32 positions once it is at least 400 px tall (2560 x 1440): the colour bar then goes under the
overview of every head, so that the map is as wide as it is tall; smaller maps keep the bar beside
them and name a subset."""

from __future__ import annotations

from .test_attention_labels import THIRTY_TWO, _assert_every_cell_named, _labels, _prompt, _settle


def test_a_tall_map_among_the_panels_names_every_row_and_key(window, qtbot):
    window.resize(2560, 1440)
    _prompt(qtbot, window, THIRTY_TWO, 3)
    panel = window.attention
    window.overview.show_panel(panel)
    _settle(window, qtbot)
    assert window.focus.focused is None and panel.side.isVisible()  # every head's overview beside the map
    assert panel.history.length == 32
    area = panel.plot.getViewBox().sceneBoundingRect()
    assert area.height() >= 400, area
    _assert_every_cell_named(panel, window.state.result.trace.pieces, False)
    assert panel.colorbar.scene() is panel.bar_view.scene() and panel.bar_view.isVisible()  # under the overview
    bar = panel.bar_view.mapTo(panel, panel.colorbar.mapRectToScene(panel.colorbar.boundingRect()).toRect().topLeft())
    assert panel.side.geometry().contains(bar)
    window.focus.toggle(panel)  # alone: the overview hides, the bar comes back beside the map
    _settle(window, qtbot)
    assert panel.colorbar.scene() is panel.view.scene() and not panel.bar_view.isVisible()
    _assert_every_cell_named(panel, window.state.result.trace.pieces, False)


def test_a_small_map_keeps_the_colour_bar_beside_it(window, qtbot):
    window.resize(1366, 768)
    _prompt(qtbot, window, THIRTY_TWO, 3)
    panel = window.attention
    _settle(window, qtbot)
    assert panel.plot.getViewBox().sceneBoundingRect().height() < 400
    assert panel.colorbar.scene() is panel.view.scene() and not panel.bar_view.isVisible()
    assert len(_labels(panel)["keys"]) < panel.history.length  # a readable subset
