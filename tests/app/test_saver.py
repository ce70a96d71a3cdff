"""Saving never blocks stepping: the host snapshots the session and a saver thread writes it; a Step
completes while a (slowed) write runs; a second Save waits behind the first; closing waits for the
write. Plain Python: no QApplication."""

from __future__ import annotations

import threading

import pytest

from app.protocol import messages as p
from app.logic import wording
from app.host.saver import SaveJob, Saver
from app.host.session_host import SessionHost
from engine.errors import ExportError
from engine.sampling import SamplingSettings
from engine.session_read import read_session
from engine.session_write import write_snapshot


class Gate:
    """A write_snapshot that waits until ``open()``: a save as slow as a test needs."""

    def __init__(self):
        self.started, self._open, self.order = threading.Event(), threading.Event(), []

    def __call__(self, snap, path):
        self.started.set()
        assert self._open.wait(30), "the test never let the write finish"
        self.order.append(path)
        return write_snapshot(snap, path)

    def open(self):
        self._open.set()


@pytest.fixture
def host(demo_model):
    sent, again = [], []
    h = SessionHost(sent.append, again.append)
    h.sent, h.queued = sent, again
    h.handle(p.Load(generation=1, loaded=demo_model, prompt="The cat sat on the", settings=SamplingSettings(greedy=True)))
    assert isinstance(sent.pop(), p.Finished)
    yield h
    h.close()


def test_a_step_completes_while_a_save_is_written(host, tmp_path):
    gate = Gate()
    host.saver._write = gate
    for g in (2, 3):
        host.handle(p.Step(generation=g))
    path = tmp_path / "s.npz"
    host.handle(p.SaveSession(generation=4, path=str(path)))
    saving = host.sent.pop()
    assert isinstance(saving, p.Finished) and isinstance(saving.result.request, p.SaveSession)
    assert "Saving 2 steps" in wording.result_status(saving.result)
    assert gate.started.wait(30)  # the write runs on the saver's thread ...
    host.handle(p.Step(generation=5))  # ... and a step completes meanwhile
    stepped = host.sent.pop()
    assert isinstance(stepped.result.request, p.Step) and stepped.result.trace.step == 2
    assert not path.exists() and host.saver.pending == 1
    gate.open()
    host.saver.close()  # waits for the write
    (written,) = host.queued  # the saver queued its report behind the host's requests
    assert isinstance(written, p.SaveWritten) and written.generation == 4
    host.handle(written)
    saved = host.sent.pop()
    assert isinstance(saved, p.Finished) and isinstance(saved.result.request, p.SaveWritten)
    assert f"Saved 2 steps on 1 branch to {path}" in wording.result_status(saved.result)
    assert read_session(path).n_nodes == 2  # the snapshot, not the step taken during the write


def test_a_second_save_waits_behind_the_first_and_close_waits_for_both(host, tmp_path):
    gate = Gate()
    host.saver._write = gate
    host.handle(p.Step(generation=2))
    first, second = tmp_path / "a.npz", tmp_path / "b.npz"
    host.handle(p.SaveSession(generation=3, path=str(first)))
    host.handle(p.SaveSession(generation=4, path=str(second)))
    assert "after 1 other save" in wording.result_status(host.sent[-1].result) and host.saver.pending == 2
    closing = threading.Thread(target=host.close)
    closing.start()
    closing.join(0.5)
    assert closing.is_alive()  # close waits while a write is held
    gate.open()
    closing.join(30)
    assert not closing.is_alive() and gate.order == [str(first), str(second)]
    assert first.is_file() and second.is_file() and host.saver.pending == 0


def test_a_failed_write_is_reported_with_one_line(host, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    host.handle(p.Step(generation=2))
    host.handle(p.SaveSession(generation=3, path=str(blocker / "sub" / "s.npz")))
    host.saver.close()
    host.handle(host.queued.pop())
    failed = host.sent.pop()
    assert isinstance(failed, p.Failed) and failed.generation == 3 and isinstance(failed.request, p.SaveWritten)
    assert failed.error.startswith("Could not write") and "\n" not in failed.error


def test_nothing_to_save_fails_at_once(host, tmp_path):
    host.handle(p.SaveSession(generation=2, path=str(tmp_path / "s.npz")))
    failed = host.sent.pop()
    assert isinstance(failed, p.Failed) and isinstance(failed.request, p.SaveSession) and host.saver.pending == 0


def test_the_saver_survives_a_bug_in_a_write():
    reports = []

    def broken(snap, path):
        raise ZeroDivisionError("oops")

    saver = Saver(lambda job, path, error: reports.append((path, error)), write=broken)
    saver.submit(SaveJob(None, "x.npz", 1))
    saver.submit(SaveJob(None, "y.npz", 2))
    saver.close()
    assert [type(e) for _, e in reports] == [ExportError, ExportError] and "ZeroDivisionError" in str(reports[0][1])
