"""The Overview's least sizes cost a drawn step little: planning the pages asks each panel's least
size once, and the KV cache panel, which the layouts ask about 40 times a step, works its least size
out again only when what it reads changed (benchmarks/RESULTS_GUI.md, 2026-12-07)."""

from __future__ import annotations

from PySide6.QtCore import QSize
from PySide6.QtWidgets import QWidget

from app.protocol import messages as p
from app.window import overview_pages
from app.window.overview_pages import OverviewPages, plan_pages

from .helpers import run


class Asked(QWidget):
    """A panel that counts how often its least size is asked."""

    def __init__(self, width: int, height: int):
        super().__init__()
        self.least, self.asked = QSize(width, height), 0
        self.short_title = "asked"

    def minimumSizeHint(self) -> QSize:  # noqa: N802 - Qt's name; not guarded: a test's stand-in
        self.asked += 1
        return QSize(self.least)


def test_planning_the_pages_asks_each_panel_once():
    a, b, c = Asked(300, 200), Asked(300, 200), Asked(300, 200)
    assert plan_pages([[a, b], [c]], 700, 300) == [[[a], [b]], [[c]]]  # a and b need 406 px one above the other
    assert (a.asked, b.asked, c.asked) == (1, 1, 1)


def test_the_overviews_least_size_asks_each_panel_once(qapp):
    a, b = Asked(300, 200), Asked(250, 260)
    pages = OverviewPages([[a], [b]], {})
    asked = a.asked, b.asked
    least = pages.minimumSizeHint()
    assert (least.width(), least.height() - pages._bar_height()) == (300, 260)
    assert (a.asked - asked[0], b.asked - asked[1]) == (1, 1)


def test_a_relayout_asks_each_panel_once_for_its_plan(qapp, monkeypatch):
    a, b = Asked(300, 200), Asked(300, 200)
    pages = OverviewPages([[a, b]], {})
    pages.resize(700, 500)
    least = overview_pages._least
    calls = []
    monkeypatch.setattr(overview_pages, "_least", lambda panel: calls.append(panel) or least(panel))
    pages.relayout()
    assert sorted(map(id, calls)) == sorted(map(id, [a, b]))


def test_the_kv_panels_least_size_is_worked_out_again_only_when_what_it_reads_changed(window, qtbot, monkeypatch):
    kv = window.kv
    worked = []  # each reckoning measures the panel's height once (``_height``)
    height = type(kv)._height
    monkeypatch.setattr(type(kv), "_height", lambda self, *a, **k: worked.append(1) or height(self, *a, **k))
    run(qtbot, window, window.step, p.Step)  # the layouts ask while it is drawn
    drawn = len(worked)
    first = kv.minimumSizeHint()
    for _ in range(5):
        assert kv.minimumSizeHint() == first
    assert len(worked) == drawn
    # each thing it reads, changed: the answer a fresh reckoning gives, once the layouts have settled
    changes = (
        lambda: run(qtbot, window, window.step, p.Step),  # a new bytes sentence
        lambda: kv.resize(kv.width() + 40, kv.height()),
        lambda: kv.time_view.setMinimumHeight(kv.time_view.minimumHeight() + 30),
        lambda: window.state.set_projector(True),  # a larger font
    )
    for change in changes:
        before = len(worked)
        change()
        qtbot.waitUntil(lambda: kv.minimumSizeHint() == kv._least_size(), timeout=2_000)  # once its layout has settled
        assert len(worked) > before
    assert kv.minimumSizeHint().height() > first.height()



def test_a_step_drawn_behind_the_flow_plans_the_overviews_pages_once_they_are_shown(window, qtbot, monkeypatch):
    """Behind the Flow a drawn step planned the Overview's pages for no one (about 1 ms a step);
    they are planned when the Overview is shown again, for the room it has then."""
    run(qtbot, window, window.step, p.Step)
    window.show_view("flow")
    planned = []
    relayout = OverviewPages.relayout
    monkeypatch.setattr(OverviewPages, "relayout", lambda self, **kw: planned.append(1) or relayout(self, **kw))
    for _ in range(2):
        run(qtbot, window, window.step, p.Step)
    assert planned == []
    window.show_view("overview")
    qtbot.waitUntil(lambda: bool(planned), timeout=2_000)
    pages = window.overview
    expected = plan_pages(pages.columns, pages.width(), pages.height())
    if len(expected) > 1:  # under the row of page buttons
        expected = plan_pages(pages.columns, pages.width(), pages.height() - pages._bar_height())
    assert pages.pages == expected
