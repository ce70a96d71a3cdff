"""The KV cache view's lower half: the times plot says in words that it has nothing to show yet (a
blank grid read as a broken plot), and the cache's rows are named by their whole tokens."""

from __future__ import annotations

from app.panels.cache_panel import row_ticks
from app.protocol import messages as p

from .helpers import run


def test_the_times_plot_has_a_note_until_a_decode_step_is_timed(window, qtbot):
    run(qtbot, window, window.step, p.Step)  # the prefill: no decode step timed yet
    window.show_view("cache")
    cache = window.cache_view
    qtbot.wait(20)
    note = cache.time_note
    assert note.isVisible() and "step" in note.text() and note.geometry() == cache.time_view.rect()
    run(qtbot, window, window.step, p.Step)
    qtbot.wait(20)
    assert not note.isVisible()


def test_a_cache_view_opened_late_plots_the_steps_timed_before(window, qtbot):
    """The KV cache view is built the first time it is shown: the steps timed before are on its plot."""
    for _ in range(4):  # the prefill, then 3 decode steps, the view never shown
        run(qtbot, window, window.step, p.Step)
    assert window.views.built_page("cache") is None  # not built by the steps
    window.show_view("cache")
    qtbot.wait(20)
    xs, _ys = window.cache_view.cached_points.getData()
    assert len(xs) == 3 and not window.cache_view.time_note.isVisible()


def test_the_rows_are_named_by_their_whole_tokens():
    pieces = ["The", "␣capital", "␣international", "␣is"]
    ticks = row_ticks(4, pieces, 400, 12)
    assert [text for _y, text in ticks] == ["The 0", "␣capital 1", "␣international 2", "␣is 3"]


def test_the_times_plot_counts_positions_in_whole_numbers(window, qtbot):
    """At 1366 x 768 the times plot of a 7-position context ticked 0.5, 1, 1.5 … 6.5, 7: a context has
    no half positions. Its axis ticks whole numbers only."""
    window.resize(1366, 768)
    for _ in range(3):
        run(qtbot, window, window.step, p.Step)
    window.show_view("cache")
    qtbot.waitUntil(lambda: not window.cache_view.awaiting(), timeout=30_000)
    qtbot.wait(20)
    plot = window.cache_view.time_view.getPlotItem()
    (low, high), axis = plot.getViewBox().viewRange()[0], plot.getAxis("bottom")
    ticks = [value for _spacing, values in axis.tickValues(low, high, axis.width()) for value in values]
    assert ticks and all(float(value).is_integer() for value in ticks), ticks
