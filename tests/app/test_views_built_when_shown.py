"""The Why, Sampling, KV cache and Branches views are built the first time they are shown (half of a
new window's cost): built late, each looks and reads as if it had been there from the start."""

from __future__ import annotations

from app.logic.views import VIEWS
from app.protocol import messages as p
from app.window import theme as th

from .helpers import run

LATE = ("why", "sampling", "cache", "branches")


def test_a_new_window_builds_only_the_views_it_shows(window):
    assert all(window.views.built_page(name) is None for name in LATE)
    assert window.views.built_page("flow") is window.flow_view and window.views.built_page("inside") is window.inside


def test_a_view_built_late_has_the_projector_look_and_the_step_on_screen(window, qtbot):
    for _ in range(3):
        run(qtbot, window, window.step, p.Step)
    window.set_text_size(th.PROJECTOR)
    qtbot.waitUntil(lambda: window.painter.settled, timeout=10_000)
    step = window.state.result.trace.step
    window.show_view("sampling")
    stages = window.views.currentWidget()
    assert stages is window.sampling_view and stages.isVisible()
    assert stages.table.font().pixelSize() == th.PROJECTOR.font().pixelSize() != th.NORMAL.font().pixelSize()
    assert stages.table.rowCount() > 0 and f"step {step}" in stages.header.text().lower()
    window.show_view("branches")
    assert window.branches_view.tree.topLevelItemCount() > 0  # the steps taken before it was built


def test_a_late_view_is_joined_to_the_engine(window, qtbot):
    """The KV cache view, built when shown, asks the engine for what it draws and gets the answer."""
    run(qtbot, window, window.step, p.Step)
    window.show_view("cache")
    qtbot.waitUntil(lambda: window.cache_view.trace is not None and not window.cache_view.awaiting(), timeout=30_000)
    assert window.cache_view.trace.step == window.state.result.trace.step


def test_a_view_button_builds_its_view_and_brings_it_forward(window):
    window.commands.view_buttons.button(list(VIEWS).index("why")).click()
    assert window.views.built_page("why") is not None and window.views.currentWidget() is window.why_view
    assert window.why_view.isVisible()


def test_a_view_that_fails_to_build_leaves_nothing_behind(window, qtbot, monkeypatch):
    """A view whose building raised half-way stayed subscribed (its slots called with every later
    result) and its button checked over the view still on screen: the failure is reported, the
    window stays on its view and steps on, and the view builds once it can."""
    from app.panels import sampling_stages_panel

    run(qtbot, window, window.step, p.Step)
    called = []
    real = sampling_stages_panel.SamplingStagesPanel.__init__

    def failing(self, state, *args, **kwargs):
        real(self, state, *args, **kwargs)
        state.subscribe(called.append)
        raise RuntimeError("a broken view")

    monkeypatch.setattr(sampling_stages_panel.SamplingStagesPanel, "__init__", failing)
    mark, on_screen = window.state.subscriptions(), window.views.currentWidget()
    window.commands.view_buttons.button(list(VIEWS).index("sampling")).click()
    assert "a broken view" in window.status_line.status_label.text()
    assert window.views.built_page("sampling") is None and window.views.currentWidget() is on_screen
    assert window.commands.view_buttons.checkedId() == window.views.currentIndex()
    assert window.state.subscriptions() == mark
    run(qtbot, window, window.step, p.Step)
    assert called == []
    monkeypatch.undo()
    window.show_view("sampling")
    assert window.views.currentWidget() is window.sampling_view and window.sampling_view.table.rowCount() > 0
