"""Cancelling a long prefill: the pass ends after the block that runs, no step is taken,
the KV cache is as it was, the next Step reads the prompt again and records what an uncancelled one
records; the window's Cancel button is shown while the blocks are told and sends the control."""

import numpy as np

from app.host.session_host import SessionHost
from app.logic import wording
from app.protocol import messages as p


def _host(demo_model, monkeypatch, cancel_at: int | None):
    from engine import session as session_module

    monkeypatch.setattr(session_module, "PROGRESS_FROM", 8)
    replies = []

    def emit(reply):
        replies.append(reply)
        if isinstance(reply, p.Progress) and reply.done == cancel_at and reply.generation == 2:  # Cancel pressed now
            host.set_control("cancel_step", reply.generation)

    host = SessionHost(emit, lambda request: None)
    host.handle(p.Load(generation=1, loaded=demo_model, prompt=" a b c" * 4))
    replies.clear()
    return host, replies


def test_a_cancelled_prefill_takes_no_step_and_the_next_one_runs_whole(demo_model, monkeypatch):
    host, replies = _host(demo_model, monkeypatch, cancel_at=1)
    host.handle(p.Step(generation=2))
    layers = demo_model.info.n_layer
    assert [(r.done, r.total) for r in replies if isinstance(r, p.Progress)] == [(1, layers)]
    cancelled = replies[-1]
    assert isinstance(cancelled, p.StepCancelled) and (cancelled.done, cancelled.total) == (2, layers)
    assert host.session.n_steps == 0 and host.session.cache_length() == 0
    message = wording.failure(cancelled)
    assert f"after block 2 of {layers}" in message and "no step was taken" in message

    replies.clear()
    host.handle(p.Step(generation=3))  # a newer Step is not the cancelled one
    assert isinstance(replies[-1], p.Finished) and host.session.n_steps == 1
    again = host.session.trace().record

    fresh, _ = _host(demo_model, monkeypatch, cancel_at=None)
    fresh.handle(p.Step(generation=2))
    whole = fresh.session.trace().record
    assert again.chosen == whole.chosen
    np.testing.assert_array_equal(again.logits, whole.logits)
    assert host.session.cache_length() == fresh.session.cache_length()


def test_cancel_after_the_last_block_keeps_the_step(demo_model, monkeypatch):
    """Cancel pressed as the second-to-last block is told: the last block finishes the pass, so the
    step is kept (nothing is left to save by stopping)."""
    host, replies = _host(demo_model, monkeypatch, cancel_at=demo_model.info.n_layer - 1)
    host.handle(p.Step(generation=2))
    assert isinstance(replies[-1], p.Finished) and host.session.n_steps == 1


def test_play_ends_when_its_prefill_is_cancelled(demo_model, monkeypatch):
    host, replies = _host(demo_model, monkeypatch, cancel_at=1)
    queued = []
    host.again = queued.append
    host.play_generation = 2
    host.handle(p.Play(generation=2))
    assert isinstance(replies[-1], p.StepCancelled) and queued == [] and host.session.n_steps == 0


def test_the_windows_cancel_button_stops_a_long_prefill(window, qtbot, monkeypatch):
    """The button appears with the first block told; pressing it ends the pass (the engine waits for
    the press here, so the race is decided); the status line says so calmly; Step runs it again."""
    import threading

    from engine import session as session_module

    from .helpers import run

    monkeypatch.setattr(session_module, "PROGRESS_FROM", 8)
    pressed = threading.Event()
    told = session_module._progress_hooks

    def waiting_hooks(model, n_layers, report):
        def report_then_wait(done, total):
            report(done, total)
            if done == 1 and not pressed.is_set():
                pressed.wait(20)  # the engine's thread: the window presses Cancel meanwhile
        return told(model, n_layers, report_then_wait)

    monkeypatch.setattr(session_module, "_progress_hooks", waiting_hooks)
    run(qtbot, window, lambda: window.tokens.editor.setPlainText(" a b c" * 4), p.SetPrompt)
    button = window.status_line.cancel_button

    def press(done, total):
        assert button.isVisible() and "block 1 of" in window.status_line.status_label.text()
        button.click()
        pressed.set()

    window.controller.prefillProgress.connect(press)
    with qtbot.waitSignal(window.controller.failed, timeout=20_000) as got:
        window.step()
    window.controller.prefillProgress.disconnect(press)
    assert isinstance(got.args[0], p.StepCancelled)
    assert not button.isVisible() and window.state.result.trace is None
    assert "Reading the prompt cancelled" in window.status_line.status_label.text()
    assert "bold" not in window.status_line.status_label.styleSheet()
    result = run(qtbot, window, window.step, p.Step)
    assert result.trace is not None and not button.isVisible()


def test_a_long_prefills_time_is_told_in_minutes():
    """An 8,192-token prefill on a laptop takes minutes: the status line says "9 min 50 s", not
    "589883 ms"."""
    assert [wording.duration(ms) for ms in (83.4, 9_999, 12_400, 589_883, 60_000)] == [
        "83 ms", "9999 ms", "12.4 s", "9 min 50 s", "1 min 0 s"]
