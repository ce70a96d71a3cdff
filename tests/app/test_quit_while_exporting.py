"""Quitting while a picture or table is being written waits a few seconds at most (``export_writer``):
an export that never ends is left behind, the person is told, and neither the window nor the process
hangs on it."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

from app.window import export_writer
from app.protocol import messages as p
from app.window.export_writer import ExportWriter, Written

from .helpers import hold_png_encoding, painted_status_lines, run

BLOCKED_PROCESS = """
import logging, sys, threading, time
from pathlib import Path
logging.basicConfig()  # warnings to stderr, as a terminal gets them
from app.window.export_writer import ExportWriter, Written
started = threading.Event()
def never_ends():
    started.set()
    threading.Event().wait()  # a picture whose encoding never finishes
    return Written("a picture of the window", Path("x.png"))
writer = ExportWriter()
writer.submit(never_ends, "a picture of the window")
assert started.wait(20)
t0 = time.monotonic()
left = writer.close(timeout=0.5)
print(repr(left), round(time.monotonic() - t0, 1), flush=True)
"""


def test_a_process_quits_although_an_export_never_ends():
    # the process ends (subprocess.run's timeout fails the test otherwise): its exit does not join the blocked thread
    done = subprocess.run([sys.executable, "-c", BLOCKED_PROCESS], capture_output=True, text=True, timeout=60,
                          cwd=Path(__file__).parents[2])
    assert done.returncode == 0, done.stderr
    left, waited = done.stdout.split()[:-1], float(done.stdout.split()[-1])
    assert " ".join(left) == "('a picture of the window',)"  # close gave up on it
    assert waited >= 0.4  # after its timeout, not before
    assert "a picture of the window was still being written" in done.stderr  # logged: the log file and a terminal


def test_close_returns_at_once_when_nothing_is_pending():
    writer = ExportWriter()
    assert writer.close(timeout=0.5) == ()
    ended = threading.Event()
    writer.submit(lambda: (ended.set(), Written("the history table", Path("t.csv")))[1], "the history table")
    assert writer.close(timeout=10) == () and ended.is_set()  # a job that ends in time is waited for


def test_quitting_a_window_whose_picture_never_finishes(window, qtbot, tmp_path, monkeypatch):
    run(qtbot, window, window.step, p.Step)
    started, release = hold_png_encoding(monkeypatch)
    monkeypatch.setattr(export_writer, "CLOSE_WAIT_S", 0.5)
    path = tmp_path / "window.png"
    assert window.exporter.export_picture(window, path)
    assert started.wait(20)
    shown = painted_status_lines(window)
    try:
        window.close()  # gives up after CLOSE_WAIT_S (the picture is still held: it cannot have been written)
    finally:
        release.set()  # let the thread end, so that no test after this one shares it
    assert shown[0] == "Waiting for a picture of the window to be written before quitting…"
    assert shown[1] == ("Quitting without a picture of the window: it was still being written after 0.5 s "
                        "(a file already at that path is left as it was).")
    assert not path.exists()
