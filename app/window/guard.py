"""Qt event handlers that never let an exception escape.

PySide6 turns an exception that leaves an overridden Qt handler (``event``, ``paintEvent``, a mouse
or key handler, ``sizeHint``) into a crash of the whole app, not a traceback. Every handler the app
overrides is decorated with ``guarded``: an exception is logged with its traceback, reported to the
window (``reporter().occurred``, which shows one short line) and the handler returns a harmless
value, so the app keeps running. ``tests/app/test_guard.py`` checks that every override is guarded.
"""

from __future__ import annotations

import functools
import logging

from PySide6.QtCore import QObject, Signal

log = logging.getLogger(__name__)

HANDLERS = frozenset(
    {
        "event", "eventFilter", "paintEvent", "resizeEvent", "changeEvent", "showEvent", "hideEvent",
        "closeEvent", "mousePressEvent", "mouseReleaseEvent", "mouseMoveEvent", "mouseDoubleClickEvent",
        "wheelEvent", "keyPressEvent", "keyReleaseEvent", "enterEvent", "leaveEvent", "contextMenuEvent",
        "focusInEvent", "focusOutEvent", "timerEvent", "sizeHint", "minimumSizeHint",
        # pyqtgraph's item handlers, called from its scene's Qt handlers
        "mouseClickEvent", "mouseDragEvent", "hoverEvent", "paint", "boundingRect", "tickSpacing",
        "tickStrings", "tickValues",
    }
)  # fmt: skip
"""Names of the Qt and pyqtgraph handlers an app class may override; each override must be guarded."""


class Reporter(QObject):
    """Carries each caught handler error to the window as one sentence."""

    occurred = Signal(str)

    def __init__(self):
        super().__init__()
        self.count = 0  # handler errors caught so far (tests read it)


_reporter: Reporter | None = None


def reporter() -> Reporter:
    global _reporter
    if _reporter is None:
        _reporter = Reporter()
    return _reporter


def guarded(handler=None, *, fallback=None):
    """Decorate a handler: an exception inside is logged and reported, and ``fallback`` (a value, or a
    callable taking the same arguments: ``fallback=lambda self, *a: QSize()``) is returned instead."""

    def decorate(fn):
        @functools.wraps(fn)
        def wrapper(self, *args, **kwargs):
            try:
                return fn(self, *args, **kwargs)
            except Exception as exc:  # noqa: BLE001 - the point: nothing may escape into Qt
                log.exception("error in %s", fn.__qualname__)
                r = reporter()
                r.count += 1
                try:
                    r.occurred.emit(f"Internal error in {fn.__qualname__} ({type(exc).__name__}: {exc}); the app keeps running.")
                except RuntimeError:  # the reporter's Qt object is gone (the app is closing)
                    pass
                return fallback(self, *args, **kwargs) if callable(fallback) else fallback

        wrapper.__guarded__ = True
        return wrapper

    return decorate(handler) if handler is not None else decorate
