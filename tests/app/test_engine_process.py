"""The engine process (the app's default): same numbers as the in-process engine, each record sent
once, no forward pass in the window's process, and a dead or busy child never takes the window down."""

from __future__ import annotations

import multiprocessing
import os
import queue
import threading

import numpy as np
import pytest

from app.window import engine_process
from app.host import serve
from app.protocol.wire import Receiver, Sender
from app.host.session_host import PointCache, make_result
from engine import SamplingSettings, Session

from .helpers import run
from app.protocol import messages as p

PROMPT = "The cat sat on the"
SEEDED = SamplingSettings(top_k=50, seed=7)


# ------------------------------------------------------------------------------------- the wire
@pytest.fixture
def wire():
    """A Sender and a function that sends one message and returns what the Receiver got."""
    here, there = multiprocessing.Pipe(duplex=False)
    sender, receiver, got = Sender(there), Receiver(here), queue.Queue()

    def drain():
        try:
            while True:
                got.put(receiver.recv())
        except (EOFError, OSError):
            pass

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()

    def round_trip(message, prune=True):
        packet = sender.encode(message, prune=prune)
        sender.write(packet)
        return got.get(timeout=10), len(packet[0])

    yield sender, receiver, round_trip
    there.close()
    reader.join(5)


def test_wire_sends_arrays_out_of_band_and_they_arrive_writable(wire):
    """An array's bytes never enter the pickle (a long prefill's record is not copied into it): the
    pickle holds a header, the bytes travel beside it and arrive in a buffer of their own."""
    sender, receiver, round_trip = wire
    big = np.arange(250_000, dtype=np.float32)  # 1 MB
    packet = sender.encode({"a": big, "b": big[:0]})
    assert len(packet[0]) < 1_000 and [b.raw().nbytes for b in packet[1]] == [big.nbytes, 0]
    got, _ = round_trip({"c": big * 2, "empty": np.zeros(0, np.int64)})
    np.testing.assert_array_equal(got["c"], big * 2)
    assert got["c"].flags.writeable and got["empty"].shape == (0,)


def test_wire_sends_each_record_once_and_keeps_identity(wire, demo_model):
    sender, receiver, round_trip = wire
    session, points = Session(demo_model, SEEDED), PointCache()
    session.set_prompt(PROMPT)
    received, sizes = [], []
    for _ in range(6):
        session.step()
        result = make_result(session, points=points)
        reply, size = round_trip(p.Finished(1, result))
        got = reply.result
        received.append(got)
        sizes.append(size)
        assert isinstance(reply, p.Finished)
        for ours, theirs in zip(result.records, got.records):  # the numbers arrive unchanged
            np.testing.assert_array_equal(ours.logits, theirs.logits)
            np.testing.assert_array_equal(ours.attn, theirs.attn)
        np.testing.assert_array_equal(result.points, got.points)
    first, last = received[0], received[-1]
    # every earlier record arrives as the very object received the first time
    assert all(last.records[i] is received[i].records[i] for i in range(6))
    assert last.trace.record is last.records[-1] and last.info is first.info
    # so does each step's token and position embeddings on the PCA basis (the embeddings view)
    assert all(last.embed_parts[i] is received[i].embed_parts[i] for i in range(6))
    np.testing.assert_array_equal(result.embed_points, last.embed_points)
    # a decode step's message holds its own record, not the history: no bigger at step 5 than at 1
    assert sizes[5] < sizes[1] * 1.2, sizes
    assert sender.remembered == receiver.remembered

    held = sender.remembered
    session.rewind(2)  # steps 3-5 are dropped on both sides
    got = round_trip(p.Finished(1, make_result(session, points=points)))[0].result
    assert len(got.records) == 3 and got.records[2] is received[2].records[2]
    assert sender.remembered == receiver.remembered < held

    session.resample(SamplingSettings(seed=3))  # a new record holding the same attention rows
    again = round_trip(p.Finished(1, make_result(session, points=points)))[0].result
    assert again.records[2] is not got.records[2] and again.records[2].attn is got.records[2].attn


# --------------------------------------------------------------------------------- the window
@pytest.fixture
def process_window(make_window, qtbot):
    """A window whose engine is a child process, with the bundled demo model loaded there."""
    w = make_window(engine="process")
    run(qtbot, w, lambda: w.load_model(None, prompt=PROMPT), p.Load, timeout=60_000)
    return w


def _steps(qtbot, window, n):
    run(qtbot, window, lambda: window.controller.set_settings(SEEDED), p.Resample)
    return [run(qtbot, window, window.step, p.Step) for _ in range(n)]


@pytest.mark.slow  # over 5 s (a child process or a whole app run)
def test_process_engine_computes_what_the_thread_engine_computes(make_window, process_window, qtbot, demo_model):
    threaded = make_window()
    run(qtbot, threaded, lambda: threaded.load_model(None, loaded=demo_model, prompt=PROMPT), p.Load)
    a, b = _steps(qtbot, process_window, 5), _steps(qtbot, threaded, 5)
    assert [r.trace.chosen for r in a] == [r.trace.chosen for r in b]
    for x, y in zip(a[-1].records, b[-1].records):
        for field in ("input_ids", "attn", "resid", "logits", "final_hidden"):
            np.testing.assert_array_equal(getattr(x, field), getattr(y, field))
    np.testing.assert_array_equal(a[-1].points, b[-1].points)
    np.testing.assert_array_equal(a[-1].trace.distribution.probs, b[-1].trace.distribution.probs)
    # what the panels show is the same too
    np.testing.assert_array_equal(process_window.logits.bar_ids(), threaded.logits.bar_ids())
    np.testing.assert_array_equal(process_window.attention.shown, threaded.attention.shown)


@pytest.mark.slow  # over 5 s (a child process or a whole app run)
def test_the_window_process_runs_no_forward_pass(process_window, qtbot, forward_calls):
    results = _steps(qtbot, process_window, 3)
    assert [r.trace.step for r in results] == [0, 1, 2]
    assert forward_calls == []  # all three ran in the child
    assert results[-1].records[0] is results[0].records[0]  # and arrived once each
    if hasattr(os, "getpriority"):  # the child yields a core to the window's painting
        child = process_window.controller.engine.process.pid
        assert os.getpriority(os.PRIO_PROCESS, child) == os.getpriority(os.PRIO_PROCESS, 0) + serve.ENGINE_NICENESS


@pytest.mark.slow  # over 5 s (a child process or a whole app run)
def test_max_speed_play_and_pause(process_window, qtbot):
    w = process_window
    w.commands.max_speed.setChecked(True)
    steps = []
    w.controller.resultReady.connect(lambda r: steps.append(r.trace.step) if r.trace is not None else None)
    w.player.play()
    qtbot.waitUntil(lambda: len(steps) >= 8, timeout=30_000)
    w.player.pause()
    qtbot.waitUntil(lambda: w.controller.idle, timeout=10_000)
    assert not w.controller.looping
    paused_at = len(steps)
    qtbot.wait(300)
    settled = len(steps)
    # still to come after the pause: the step the child was running when the pause reached it, and
    # the steps it had finished whose results were still in its outbox or the pipe (a step is about
    # 10 ms here; a loaded CI machine delivered 2 in one run)
    assert settled <= paused_at + 3
    qtbot.wait(500)
    assert len(steps) == settled  # the loop ended in the child too
    assert steps == list(range(len(steps)))  # in order, none lost


@pytest.mark.slow  # over 5 s (a child process or a whole app run)
def test_a_killed_engine_is_replaced_and_the_model_reloaded(process_window, qtbot):
    w = process_window
    _steps(qtbot, w, 2)
    child = w.controller.engine.process
    with qtbot.waitSignal(w.errorShown, timeout=20_000) as error:
        child.kill()  # as the out-of-memory killer would
    assert "stopped unexpectedly" in error.args[0] and "the prompt and your sampling settings are kept" in error.args[0]
    qtbot.waitUntil(lambda: w.state.result is not None and isinstance(w.state.result.request, p.Load), timeout=60_000)
    assert w.controller.engine.process is not child and w.controller.engine.process.is_alive()
    assert w.tokens.prompt() == PROMPT and w.state.result.trace is None
    after = run(qtbot, w, w.step, p.Step)  # the window goes on with the new process
    assert after.trace.step == 0


@pytest.mark.slow  # over 5 s (a child process or a whole app run)
def test_closing_mid_play_ends_the_child_promptly(process_window, qtbot):
    w = process_window
    child = w.controller.engine.process
    w.commands.max_speed.setChecked(True)
    with qtbot.waitSignal(w.controller.resultReady, timeout=20_000):
        w.player.play()
    w.close()
    assert not child.is_alive()
    assert child.exitcode == 0  # it quit when asked: one stopped by force (after QUIT_GRACE_S) ends by a signal
