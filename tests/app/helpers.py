"""Helpers shared by the window tests."""

from __future__ import annotations


def run(qtbot, window, action, kind: str | None = None, timeout: int = 20_000):
    """Do ``action()`` and wait for the window to draw its result; return the SessionResult."""
    def matches(result):
        return kind is None or result.kind == kind

    with qtbot.waitSignal(window.resultApplied, timeout=timeout, check_params_cb=matches) as blocker:
        action()
    return blocker.args[0]
