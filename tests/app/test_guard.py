"""No exception may leave a Qt handler (PySide6 turns one into a crash of the whole app), so every
handler the app overrides is guarded, and every panel's handlers are exercised in the states a
class sees: empty (the model still loading), just loaded, and after a failed load."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest
from PySide6.QtCore import QEvent, QPoint, QPointF, QSize, Qt
from PySide6.QtGui import QHelpEvent, QResizeEvent
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication, QWidget

import app
from app.window import guard
from app.window.guard import HANDLERS, guarded
from app.panels.tokens_panel import TokenStrip

from .helpers import run
from app.protocol import messages as p


def _app_classes():
    for info in pkgutil.walk_packages(app.__path__, "app."):
        if info.name in ("app.window.engine_thread", "app.__main__"):
            continue  # imports torch (no handlers) / runs the app
        module = importlib.import_module(info.name)
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if cls.__module__ == module.__name__:
                yield cls


def test_every_overridden_handler_is_guarded():
    unguarded = [
        f"{cls.__qualname__}.{name}"
        for cls in _app_classes()
        for name, member in vars(cls).items()
        if name in HANDLERS and callable(member) and not getattr(member, "__guarded__", False)
    ]
    checked = [f"{cls.__qualname__}.{n}" for cls in _app_classes() for n in vars(cls) if n in HANDLERS]
    assert "TokenStrip.event" in checked and "MainWindow.closeEvent" in checked  # the scan sees them
    assert unguarded == []


def test_a_guarded_handler_reports_and_the_app_keeps_running(qtbot):
    class Broken(QWidget):
        @guarded
        def paintEvent(self, event):
            raise ValueError("boom")

        @guarded(fallback=lambda self, *a: QSize(7, 7))
        def sizeHint(self):
            raise ValueError("boom")

    widget = Broken()
    qtbot.addWidget(widget)
    before = guard.reporter().count
    with qtbot.waitSignal(guard.reporter().occurred) as blocker:
        widget.grab()
    assert "ValueError: boom" in blocker.args[0] and "keeps running" in blocker.args[0]
    assert widget.sizeHint() == QSize(7, 7)
    assert guard.reporter().count >= before + 2


def test_clicking_or_hovering_the_empty_token_strip_is_harmless(qtbot):
    """A click or a tooltip on the strip before the first result read rects[0] of an empty list, and
    the IndexError leaving ``event`` killed the app."""
    strip = TokenStrip()
    qtbot.addWidget(strip)
    strip.show()
    before = guard.reporter().count
    clicked = []
    strip.positionClicked.connect(clicked.append)
    QTest.mouseClick(strip, Qt.LeftButton, pos=QPoint(5, 5))
    QApplication.sendEvent(strip, QHelpEvent(QEvent.ToolTip, QPoint(5, 5), strip.mapToGlobal(QPoint(5, 5))))
    assert strip.chip_at(QPointF(5, 5).toPoint()) == -1 and clicked == []
    assert guard.reporter().count == before


def _poke(widget: QWidget) -> None:
    """Every kind of event a person can send a widget: clicks, moves, wheel, keys, hover, resize, paint."""
    if not widget.isVisible() or widget.width() < 2 or widget.height() < 2:
        return
    points = [QPoint(2, 2), QPoint(widget.width() // 2, widget.height() // 2), QPoint(widget.width() - 3, widget.height() - 3)]
    target = widget.viewport() if hasattr(widget, "viewport") else widget
    for point in points:
        QTest.mouseMove(target, point)
        QTest.mouseClick(target, Qt.LeftButton, pos=point)
        QTest.mouseDClick(target, Qt.LeftButton, pos=point)
        QApplication.sendEvent(target, QHelpEvent(QEvent.ToolTip, point, target.mapToGlobal(point)))
    QApplication.sendEvent(widget, QResizeEvent(widget.size(), widget.size()))
    widget.grab()


def _poke_panels(window) -> None:
    for panel in (window.tokens, window.embeddings, window.attention, window.logits, window.sampling, window.kv):
        for widget in [panel, *panel.findChildren(QWidget)]:
            if widget.isWindow():
                continue
            if not hasattr(widget, "setValue") and not hasattr(widget, "setText"):  # no editing: keys are harmless
                _poke(widget)
            elif widget.width() > 1:
                widget.grab()


def test_every_panel_survives_input_while_empty_loaded_and_after_a_failed_load(make_window, qtbot, demo_model, tmp_path):
    before = guard.reporter().count
    empty = make_window()  # no model yet: what a class sees while it loads
    _poke_panels(empty)
    run(qtbot, empty, lambda: empty.load_model(None, loaded=demo_model, prompt="The cat sat on the"), p.Load)
    _poke_panels(empty)  # just loaded, before any step
    run(qtbot, empty, empty.step, p.Step)
    _poke_panels(empty)
    failed = make_window()
    with qtbot.waitSignal(failed.errorShown, timeout=20_000):
        failed.load_model(str(tmp_path / "missing"))  # a failed load with nothing loaded before
    _poke_panels(failed)
    assert guard.reporter().count == before
