"""The menu bar and the view buttons in its corner never overlap, with room for one more view button
between them, at every classroom size: where the menus do not fit they fold into one "☰ Menu"
(on a 1024 x 768 projector the Help menu slid behind the bar's » and ran into "View:")."""

from __future__ import annotations

import pytest
from PySide6.QtWidgets import QToolButton

from app.window.menu_fold import menus_fit

CASES = [((1024, 768), True), ((1280, 720), True), ((1366, 768), True), ((1024, 768), False), ((1920, 1080), True)]
IDS = ["1024x768-projector", "1280x720-projector", "1366x768-projector", "1024x768-normal", "1920x1080-projector"]
MENUS = ["File", "Edit", "Model", "View", "Run", "Help"]


@pytest.fixture(scope="module")
def shared(module_window):
    return module_window()


def bar_problems(window) -> list[str]:
    """What the menu bar hides or draws over its corner."""
    bar, corner = window.menuBar(), window.commands.view_switcher
    problems = []
    shown = [a for a in bar.actions() if a.isVisible()]
    right = max(bar.actionGeometry(a).right() for a in shown)
    room = corner.geometry().left() - right - 1
    spare = window.commands.view_button_width()
    if room < spare:
        problems.append(f"{room} px between the menus and the view buttons, less than one more view's {spare} px")
    chevrons = [b for b in bar.findChildren(QToolButton) if b.objectName() == "qt_menubar_ext_button" and b.isVisible()]
    if chevrons:
        problems.append("the bar's » hides a menu")
    if corner.geometry().right() >= bar.width():
        problems.append(f"the view buttons end at {corner.geometry().right()}, the bar is {bar.width()} px wide")
    reachable = [a.text().replace("&", "") for a in shown]
    if reachable != MENUS:  # folded: one menu holding them all
        reachable = [a.text().replace("&", "") for top in shown if top.menu() is not None for a in top.menu().actions()]
    if reachable != MENUS:
        problems.append(f"the menus reachable: {reachable}")
    return problems


@pytest.mark.parametrize(("size", "projector"), CASES, ids=IDS)
def test_the_menus_and_the_view_buttons_never_overlap(shared, qtbot, size, projector):
    window = shared
    window.state.set_projector(projector)
    window.resize(*size)
    qtbot.waitUntil(lambda: window.menuBar().width() == size[0])
    qtbot.wait(20)
    assert bar_problems(window) == []
    assert window.size().toTuple() == size  # no minimum width forced a larger window


def test_the_menus_fold_only_where_they_do_not_fit(shared, qtbot):
    window = shared
    window.state.set_projector(True)
    window.resize(1024, 768)
    qtbot.waitUntil(lambda: window.menu_fold.folded)
    window.resize(1366, 768)
    qtbot.waitUntil(lambda: not window.menu_fold.folded)
    window.state.set_projector(False)
    window.resize(1024, 768)
    qtbot.wait(20)
    assert not window.menu_fold.folded  # normal mode: the six menus beside the buttons


def test_the_rule():
    assert menus_fit(300, 600, 100, 1000) and not menus_fit(300, 600, 101, 1000)
