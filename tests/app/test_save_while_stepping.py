"""In the window (``--engine thread``): Step stays live while a session file is written, and quitting
waits for the write and says so in the status line."""

from __future__ import annotations

import threading

from app.protocol import messages as p
from app.logic import wording
from engine.session_read import read_session
from engine.session_write import write_snapshot

from .helpers import run


def test_step_is_live_during_a_save_and_quitting_waits_for_it(window, qtbot, tmp_path):
    run(qtbot, window, window.step, p.Step)
    started, release = threading.Event(), threading.Event()

    def slow_write(snap, path):
        started.set()
        assert release.wait(60)
        return write_snapshot(snap, path)

    window.controller.engine.host.saver._write = slow_write
    path = tmp_path / "s.npz"
    saving = run(qtbot, window, lambda: window.save_session(str(path)), p.SaveSession)
    assert f"Saving 1 step on 1 branch to {path}" in wording.result_status(saving)
    assert started.wait(20)
    stepped = run(qtbot, window, window.step, p.Step)  # the write is held, the step completes
    assert stepped.trace.step == 1 and not path.exists() and window.controller.saves_pending == 1
    shown = []
    threading.Timer(1.0, release.set).start()  # the write ends a second into quitting
    window.status_line.status_label.setText("")
    real_repaint = window.status_line.status_label.repaint
    window.status_line.status_label.repaint = lambda: (shown.append(window.status_line.status_label.text()), real_repaint())
    window.close()  # blocks until the file is written
    assert path.is_file() and read_session(path).n_nodes == 1
    assert shown and "Waiting for the session file" in shown[0]
