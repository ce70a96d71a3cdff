"""Prompt pairs: a Patch request gives engine.patching's map exactly, refuses two
prompts of different lengths with both counts, stops when cancelled and changes nothing; a
Tokenize answers the second prompt's count first; the Why view's second page runs a pair, draws
the layer x position map and cancels."""

from __future__ import annotations

import numpy as np
import pytest

from app.host.session_host import SessionHost
from app.logic import wording
from app.logic.request_policy import RequestPolicy
from app.protocol import messages as p
from engine.patching import patch_resid_pre

FIRST = "The capital of France is"
SECOND = "The capital of Germany is"


def _host(demo_model, steps: int = 1):
    replies = []
    host = SessionHost(replies.append, lambda request: None)
    host.handle(p.Load(generation=1, loaded=demo_model, prompt=FIRST))
    for g in range(2, 2 + steps):
        host.handle(p.Step(generation=g))
    assert isinstance(replies[-1], p.Finished)
    replies.clear()
    return host, replies


def test_patch_gives_the_engines_map_exactly(demo_model):
    host, replies = _host(demo_model, steps=2)
    session = host.session
    assert len(demo_model.tokenizer.encode(FIRST)) == len(demo_model.tokenizer.encode(SECOND))
    host.handle(p.Patch(generation=9, text=SECOND, step=1))
    progress = [(r.done, r.total) for r in replies if isinstance(r, p.Progress)]
    L = demo_model.info.n_layer
    assert progress == [(i, L) for i in range(1, L + 1)] and {r.what for r in replies if isinstance(r, p.Progress)} == {"patch"}
    reply = replies[-1]
    assert isinstance(reply, p.Patched) and reply.generation == 9
    answer = reply.answer
    # the pair: step 1's context (the prompt, then step 0's chosen token), and the second prompt followed by that token
    first = session.token_ids()[: session.records[1].end]
    second = np.concatenate([demo_model.tokenizer.encode(SECOND), first[len(session.prompt_ids):]])
    chosen = session.records[1].chosen
    expected = patch_resid_pre(demo_model.model, first, second, chosen)
    assert answer.target == chosen and answer.versus == -1 and answer.step == 1
    np.testing.assert_array_equal(answer.patching.metric, expected.metric)
    np.testing.assert_array_equal(answer.restored, expected.restored)
    assert answer.restored.shape == (L, len(first))
    assert (answer.first_metric, answer.second_metric) == (expected.clean, expected.corrupted)
    assert answer.first_pieces[-1] == answer.second_pieces[-1] == demo_model.tokenizer.piece(int(first[-1]))
    assert answer.target_piece == demo_model.tokenizer.piece(chosen) and answer.versus_piece == ""
    top_id, _, top_prob = answer.first_top[0]
    assert top_id == int(np.argmax(expected.clean_last)) and 0 < top_prob <= 1
    assert [c[0] for c in answer.second_top][:1] == [int(np.argmax(expected.corrupted_last))]


def test_patch_with_a_versus_token_and_the_count_first(demo_model):
    host, replies = _host(demo_model)
    host.handle(p.Tokenize(generation=5, text=SECOND))
    tokens = replies[-1]
    assert isinstance(tokens, p.Tokenized) and len(tokens.answer.ids) == len(host.session.prompt_ids)
    assert tokens.answer.pieces == tuple(demo_model.tokenizer.piece(int(i)) for i in tokens.answer.ids)
    trace = host.session.trace()
    target, versus = (int(i) for i in trace.candidate_ids[1:3])
    host.handle(p.Patch(generation=6, text=SECOND, target=target, versus=versus))
    answer = replies[-1].answer
    expected = patch_resid_pre(demo_model.model, host.session.prompt_ids, demo_model.tokenizer.encode(SECOND), target, versus)
    assert (answer.target, answer.versus) == (target, versus)
    np.testing.assert_array_equal(answer.patching.metric, expected.metric)


def test_prompts_of_different_lengths_are_refused_with_both_counts(demo_model):
    host, replies = _host(demo_model)
    longer = "The capital city of the Federal Republic of Germany is"
    n_first, n_second = len(host.session.prompt_ids), len(demo_model.tokenizer.encode(longer))
    assert n_first != n_second
    host.handle(p.Patch(generation=7, text=longer))
    reply = replies[-1]
    assert type(reply) is p.Failed and reply.request.text == longer
    assert f"the first has {n_first}, the second {n_second}" in reply.error
    assert not any(isinstance(r, p.Progress) for r in replies)


def test_cancel_after_one_layer_stops_and_changes_nothing(demo_model):
    host, replies = _host(demo_model, steps=2)
    session = host.session
    before = (session.n_steps, session.cache_length(), session.records, session.token_ids().tolist())
    emit = host.emit

    def cancel_after_the_first_layer(reply):
        emit(reply)
        if isinstance(reply, p.Progress) and reply.done == 1:  # the person pressed Cancel now
            host.set_control("cancel_patch", reply.generation)

    host.emit = cancel_after_the_first_layer
    host.handle(p.Patch(generation=8, text=SECOND))
    reply = replies[-1]
    L = demo_model.info.n_layer
    assert isinstance(reply, p.PatchCancelled) and (reply.done, reply.total) == (1, L)
    assert [r.done for r in replies if isinstance(r, p.Progress)] == [1]
    assert host.session is session
    assert (session.n_steps, session.cache_length(), session.records, session.token_ids().tolist()) == before
    assert "after layer 1 of" in wording.failure(reply)
    replies.clear()
    host.handle(p.Step(generation=9))  # the session steps on as before
    assert isinstance(replies[-1], p.Finished) and host.session.n_steps == 3


def test_a_restart_while_a_patch_runs_stops_it():
    controls = []
    policy = RequestPolicy(lambda request: None, lambda name, value: controls.append((name, value)))
    policy.add(policy.number(p.Patch(text=SECOND)))
    policy.add(policy.number(p.SetPrompt(text="another")))
    assert ("cancel_patch", 1) in controls
    controls.clear()
    policy.add(policy.number(p.Step()))  # not a restart: the patch it waits behind runs on
    assert not [c for c in controls if c[0] == "cancel_patch"]


# ------------------------------------------------------------------ the page in a window
def _patch_page(window, qtbot):
    from .helpers import run

    run(qtbot, window, lambda: window.tokens.editor.setPlainText(FIRST), p.SetPrompt)
    run(qtbot, window, window.step, p.Step)
    window.show_view("why")
    why = window.why_view
    why.show_page(1)
    page = why.patch
    qtbot.waitUntil(lambda: page.editor.text() == FIRST, timeout=10_000)
    return why, page


def test_the_page_runs_a_pair_and_draws_the_map(window, qtbot):
    why, page = _patch_page(window, qtbot)
    page.editor.setText(SECOND)
    page.editor.textEdited.emit(SECOND)
    qtbot.waitUntil(lambda: "as many tokens" in page.count_label.text(), timeout=10_000)
    assert page.run_button.isEnabled()
    with qtbot.waitSignal(window.controller.patchReady, timeout=60_000) as got:
        page.run_button.click()
    answer = got.args[0]
    qtbot.waitUntil(lambda: page.answer is answer, timeout=10_000)
    result = window.state.result
    L, P = result.n_layer, len(result.prompt_ids)
    assert page.image.image.shape == (L, P) == answer.restored.shape  # rows: layers, columns: positions
    np.testing.assert_allclose(page.image.image, answer.restored, equal_nan=True)
    assert not page.progress.isVisible() and not page.cancel_button.isVisible()
    caption = page.caption.text()
    assert f"the share of the difference in the logit of “{answer.target_piece}”" in caption
    assert "block L's input at position i is taken from the first prompt" in caption
    bottom = dict(page.plot.getAxis("bottom")._tickLevels[0])
    top = dict(page.plot.getAxis("top")._tickLevels[0])
    assert bottom[3.5] == answer.first_pieces[3] and top[3.5] == answer.second_pieces[3]  # France / Germany
    assert f"“{answer.first_top[0][1]}”" in page.first_list.text() and f"“{answer.second_top[0][1]}”" in page.second_list.text()


def test_a_pair_of_different_lengths_is_not_offered(window, qtbot):
    why, page = _patch_page(window, qtbot)
    longer = FIRST + " a city called"
    page.editor.setText(longer)
    page.editor.textEdited.emit(longer)
    qtbot.waitUntil(lambda: "needs as many" in page.count_label.text(), timeout=10_000)
    assert not page.run_button.isEnabled()


def test_cancel_stops_the_run(window, qtbot, monkeypatch):
    """Cancel appears with the first layer told; pressing it stops the run (the engine waits for the
    press, so the race is decided); the page says so and draws no map."""
    import threading

    import engine.patching

    why, page = _patch_page(window, qtbot)
    pressed = threading.Event()
    real = engine.patching.patch_resid_pre

    def waiting(*args, progress, **kw):
        def told_then_wait(done, total):
            progress(done, total)
            if done == 1:
                pressed.wait(20)  # the engine's thread: the window presses Cancel meanwhile
        return real(*args, progress=told_then_wait, **kw)

    monkeypatch.setattr(engine.patching, "patch_resid_pre", waiting)
    page.editor.setText(SECOND)

    def press(done, total):
        assert page.cancel_button.isVisible() and page.progress.value() == done and page.progress.maximum() == total
        page.cancel_button.click()
        pressed.set()

    window.controller.patchProgress.connect(press)
    with qtbot.waitSignal(window.controller.failed, timeout=30_000) as got:
        page.run_button.click()
    window.controller.patchProgress.disconnect(press)
    assert isinstance(got.args[0], p.PatchCancelled) and got.args[0].done == 1
    assert not page.cancel_button.isVisible() and page.answer is None
    assert "cancelled after layer 1 of" in page.status.text()
    assert window.state.result.trace is not None  # the step on screen stays
