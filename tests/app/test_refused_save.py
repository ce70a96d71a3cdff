"""A save the engine refuses (File → Save session before the first step) writes no file, so closing
the window never waits for it: the counter of saves to be written stays at 0 and the engine is
stopped with the ordinary grace, not the one for a file being written."""

from __future__ import annotations

from app.window import controller as ctl

from .helpers import painted_status_lines


def test_a_save_before_the_first_step_is_refused_and_quitting_does_not_wait(window, qtbot, tmp_path):
    with qtbot.waitSignal(window.errorShown, timeout=20_000) as refused:
        window.save_session(str(tmp_path / "s.npz"))
    assert refused.args[0].startswith("Nothing to save yet")
    assert window.controller.saves_pending == 0
    graces = []
    engine = window.controller.engine
    real = engine.shutdown
    engine.shutdown = lambda *grace: (graces.append(grace), real(*grace))
    shown = painted_status_lines(window)
    window.close()
    assert graces == [()]  # the engine's own grace, not ctl.SAVE_GRACE_S
    assert ctl.SAVE_GRACE_S not in [g for grace in graces for g in grace]
    assert not any("Waiting for the session file" in line for line in shown)
