"""Prompt pairs: a Patch request gives engine.patching's map exactly (the block's input, its
attention output or its MLP output), refuses two prompts of different lengths with both counts,
stops when cancelled and changes nothing; a Tokenize answers the second prompt's count first; a
Compare runs the second prompt followed by the first's chosen tokens and splits both; the Why
view's second page runs a pair, draws the layer x position map, steps the pair with the first
prompt (both candidate lists, each block's difference) and cancels."""

from __future__ import annotations

import numpy as np
import pytest

from app.host.session_host import SessionHost
from app.logic import wording
from app.logic.request_policy import RequestPolicy
from app.protocol import messages as p
from app.logic import why_numbers as wn
from engine.attribution import attribute_tokens
from engine.patching import patch, patch_resid_pre

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


@pytest.mark.parametrize("site", ["attn_out", "mlp_out"])
def test_patch_at_an_attention_or_mlp_output(demo_model, site):
    host, replies = _host(demo_model)
    host.handle(p.Patch(generation=6, text=SECOND, site=site))
    answer = replies[-1].answer
    expected = patch(demo_model.model, host.session.prompt_ids, demo_model.tokenizer.encode(SECOND),
                     host.session.records[0].chosen, -1, site)
    assert answer.site == answer.patching.site == site
    np.testing.assert_array_equal(answer.patching.metric, expected.metric)
    assert not np.array_equal(answer.patching.metric, patch_resid_pre(demo_model.model, host.session.prompt_ids,
                              demo_model.tokenizer.encode(SECOND), host.session.records[0].chosen).metric)
    assert f"block L's {'attention' if site == 'attn_out' else 'MLP'} output at position i" in wn.patch_caption(answer)
    assert f"hook_{site}" in wn.patch_formula(answer)


def test_compare_steps_the_second_prompt_with_the_first(demo_model):
    """The second prompt (another length: a pair need not patch) is followed by the tokens the first
    chose, both are split for the same target, and the parts' differences add up to the logits'."""
    host, replies = _host(demo_model, steps=3)
    session = host.session
    other = SECOND + " a"
    host.handle(p.Compare(generation=9, text=other, step=2))
    reply = replies[-1]
    assert isinstance(reply, p.Compared) and reply.generation == 9
    c = reply.answer
    first = session.token_ids()[: session.records[2].end]
    chosen_so_far = first[len(session.prompt_ids):]
    second = np.concatenate([demo_model.tokenizer.encode(other), chosen_so_far])
    assert len(chosen_so_far) == 2 and len(second) == len(first) + 1
    assert c.second_pieces == tuple(demo_model.tokenizer.piece(int(i)) for i in second)
    target = session.records[2].chosen
    assert (c.step, c.target, c.versus, c.text) == (2, target, -1, other)
    expected, logits = attribute_tokens(demo_model.model, second, target)
    np.testing.assert_allclose(c.second.mlp, expected.mlp)
    assert c.second.logit == pytest.approx(float(logits[target]))
    assert c.first.logit == pytest.approx(float(session.records[2].logits[target]), abs=1e-4)
    assert c.first_top[0][0] == int(np.argmax(session.records[2].logits))
    assert c.second_top[0][0] == int(np.argmax(logits))
    attn, mlp = wn.pair_difference(c.first, c.second)
    rest = sum(v for k, v in c.first.parts() if not k.startswith(("attn", "mlp"))) - \
        sum(v for k, v in c.second.parts() if not k.startswith(("attn", "mlp")))
    assert float(attn.sum() + mlp.sum()) + rest == pytest.approx(c.first.logit - c.second.logit, abs=1e-4)
    named = wn.largest_differences(c.first, c.second, 3)
    diffs = {k: a - b for (k, a), (_, b) in zip(c.first.parts(), c.second.parts())}
    assert abs(named[0][1]) == pytest.approx(max(abs(v) for k, v in diffs.items() if k not in ("norm_shift", "head_bias")))
    assert wn.part_label(named[0][0])[0] in wn.compare_caption(c)
    assert session.n_steps == 3  # nothing changed
    host.handle(p.Compare(generation=10, text="  "))
    assert type(replies[-1]) is p.Failed and "empty" in replies[-1].error


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
    real = engine.patching.patch

    def waiting(*args, progress, **kw):
        def told_then_wait(done, total):
            progress(done, total)
            if done == 1:
                pressed.wait(20)  # the engine's thread: the window presses Cancel meanwhile
        return real(*args, progress=told_then_wait, **kw)

    monkeypatch.setattr(engine.patching, "patch", waiting)
    page.set_second_prompt(SECOND)
    qtbot.waitUntil(page.run_button.isEnabled, timeout=10_000)  # its count came back

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


def test_the_page_patches_the_place_chosen(window, qtbot):
    why, page = _patch_page(window, qtbot)
    page.site_box.setCurrentIndex(page.site_box.findData("attn_out"))
    page.set_second_prompt(SECOND)
    qtbot.waitUntil(page.run_button.isEnabled, timeout=10_000)
    with qtbot.waitSignal(window.controller.patchReady, timeout=60_000) as got:
        page.run_button.click()
    answer = got.args[0]
    qtbot.waitUntil(lambda: page.answer is answer, timeout=10_000)
    assert answer.site == "attn_out"
    assert "block L's attention output at position i is taken from the first prompt" in page.caption.text()


def test_the_pair_steps_with_the_first_prompt(window, qtbot):
    """Once the second prompt differs, the page shows both prompts' next tokens and each block's
    difference; a Step asks again for the new step, the second prompt followed by the new token."""
    from .helpers import run

    why, page = _patch_page(window, qtbot)
    with qtbot.waitSignal(window.controller.compareReady, timeout=30_000) as got:
        page.set_second_prompt(SECOND)
    c = got.args[0]
    qtbot.waitUntil(lambda: page.compare_answer is c, timeout=10_000)
    assert c.step == window.state.result.trace.step == 0 and c.text == SECOND
    L = window.state.result.n_layer
    attn, mlp = wn.pair_difference(c.first, c.second)
    bars = page.diff_bars.opts
    values = np.concatenate([attn, mlp])
    ends = np.where(values < 0, bars["x0"], bars["x0"] + bars["width"])  # each bar runs from 0 to its difference
    starts = np.where(values < 0, bars["x0"] + bars["width"], bars["x0"])
    np.testing.assert_allclose(ends, values, atol=1e-6)
    np.testing.assert_allclose(starts, 0.0, atol=1e-6)
    np.testing.assert_allclose(bars["y"][:L], np.arange(L) + 0.3)  # attention in the upper half of block L's row
    assert f"“{c.first_top[0][1]}”" in page.first_list.text() and f"“{c.second_top[0][1]}”" in page.second_list.text()
    assert "first − second" in page.compare_caption.text() and f"{c.first.logit:.2f}" in page.compare_caption.text()
    with qtbot.waitSignal(window.controller.compareReady, timeout=30_000) as got:
        run(qtbot, window, window.step, p.Step)
    stepped = got.args[0]
    qtbot.waitUntil(lambda: page.compare_answer is stepped, timeout=10_000)
    result = window.state.result
    assert stepped.step == 1 and stepped.target == result.trace.chosen
    assert stepped.first_pieces[:-1] == c.first_pieces and stepped.second_pieces[:-1] == c.second_pieces
    assert stepped.second_pieces[-1] == stepped.first_pieces[-1]  # the token the first prompt chose, after both
    assert len(stepped.second_pieces) == len(c.second_pieces) + 1  # the first prompt's chosen token follows the second
