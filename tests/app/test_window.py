"""The window over the session host on a thread engine, with the bundled demo model."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from PySide6.QtCore import QPointF, Qt

from app.window import theme as th
from app.panels.kv_panel import human_bytes

from .helpers import assert_image_shows, run
from app.protocol import messages as p


def test_launch_shows_the_demo_model_and_prompt_tokens(window):
    assert "Tiny demo model" in window.status_line.model_label.text() and "GPT-2 small" in window.status_line.model_label.text()
    assert "Loaded" in window.status_line.status_label.text()
    chips = window.tokens.strip.chips
    assert [c.piece for c in chips] == ["The", "␣cat", "␣sat", "␣on", "␣the"]
    assert all(c.kind == "prompt" for c in chips)
    assert "5</b> prompt tokens" in window.tokens.counts.text()
    assert window.logits.bar_ids().size == 0  # nothing to show before the prefill


def test_steps_run_on_the_worker_thread(window, qtbot, forward_calls):
    first = run(qtbot, window, window.step, p.Step)
    assert first.trace.step == 0 and first.trace.record.n_new == 5
    second = run(qtbot, window, window.step, p.Step)
    assert second.trace.step == 1 and second.trace.record.n_new == 1
    assert len(forward_calls) == 2
    assert threading.main_thread().name not in forward_calls  # the GUI thread never ran a forward pass
    assert window.status_line.status_label.text().startswith("Token 2 (step 1,")  # the chips count 2 generated


def test_panels_reflect_the_step_record(window, qtbot):
    lengths = []
    for _ in range(3):
        result = run(qtbot, window, window.step, p.Step)
        trace = result.trace
        T = trace.record.end
        lengths.append(T)
        # attention: the selected head's full T x T matrix, NaN above the diagonal, shown in colour
        image = window.attention.shown
        assert image.shape == (T, T)
        assert_image_shows(window.attention, image)
        assert np.isnan(image[np.triu_indices(T, 1)]).all()
        assert not np.isnan(image[np.tril_indices(T)]).any()
        rec = trace.record
        np.testing.assert_allclose(image[rec.start :, :T], rec.attn[0, 0].astype(np.float32)[:, :T][np.arange(rec.n_new)][:, :T] * np.tri(T)[rec.start :][:, :T] + np.where(np.tri(T)[rec.start :] == 0, np.nan, 0), rtol=0, atol=0)
        # logits: the bars are the record's top candidates, in order
        np.testing.assert_array_equal(window.logits.bar_ids(), trace.candidate_ids[: window.state.top_n])
        # KV: the panel says the engine's numbers
        kv = rec.kv
        assert kv.arithmetic() in window.kv.bytes_label.text()
        assert human_bytes(kv.total_bytes) in window.kv.bytes_label.text()
        assert window.kv.capacity.value() == T and window.kv.capacity.maximum() == kv.capacity
        np.testing.assert_array_equal(window.kv.key_bars.opts["height"], kv.key_positions)
        # embeddings: one point per computed position; tokens: context + the chosen next token
        assert len(window.embeddings.points.data) == T
        chips = window.tokens.strip.chips
        assert len(chips) == T + 1 and chips[-1].kind == "next" and chips[-1].token_id == trace.chosen
    assert lengths == [5, 6, 7]  # the attention matrix grew with the sequence


def test_selecting_a_head_in_the_overview_shows_it(window, qtbot):
    result = run(qtbot, window, window.step, p.Step)
    window.attention._on_mosaic_clicked(x=2 * 27 + 5, y=1 * 27 + 5)  # tile (layer 1, head 2)
    assert (window.state.layer, window.state.head) == (1, 2)
    T = result.trace.record.end
    expected = result.trace.record.attn[1, 2].astype(np.float32)
    np.testing.assert_array_equal(np.nan_to_num(window.attention.shown), np.tril(expected))
    assert_image_shows(window.attention, window.attention.shown)
    assert window.attention.layer_spin.value() == 1 and window.attention.head_spin.value() == 2
    assert window.embeddings.slider.value() == 2  # the same layer everywhere
    assert window.attention.image.image.shape == (T, T, 4)


def test_clicking_a_bar_branches(window, qtbot):
    first = run(qtbot, window, window.step, p.Step)
    ids = window.logits.bar_ids()
    row = next(r for r in range(1, len(ids)) if int(ids[r]) != first.trace.chosen)  # a token not drawn
    target = int(ids[row])
    view, bars = window.logits.logit_view, window.logits.logit_bars
    x0, width = float(bars.opts["x0"][row]), float(bars.opts["width"][row])
    scene_pos = window.logits.logit_plot.vb.mapViewToScene(QPointF(x0 + width / 2, row))  # the bar's middle
    with qtbot.waitSignal(window.resultApplied, timeout=20_000, check_params_cb=lambda r: isinstance(r.request, p.Choose)) as blocker:
        qtbot.mouseClick(view.viewport(), Qt.LeftButton, pos=view.mapFromScene(scene_pos))
    branched = blocker.args[0].trace
    assert branched.chosen == target and branched.record.chosen_by == "user"
    assert window.tokens.strip.chips[-1].token_id == target
    nxt = run(qtbot, window, window.step, p.Step)
    assert int(nxt.trace.context_ids[-1]) == target
    assert_image_shows(window.attention, window.attention.shown)  # the branched rows, coloured again


def test_back_rewinds_one_step_at_a_time(window, qtbot):
    for _ in range(3):
        run(qtbot, window, window.step, p.Step)
    back = run(qtbot, window, window.back, p.Back)
    assert back.trace.step == 1 and back.trace.record.end == 6
    assert window.attention.shown.shape == (6, 6)
    assert_image_shows(window.attention, window.attention.shown)
    run(qtbot, window, window.back, p.Back)
    gone = run(qtbot, window, window.back, p.Back)
    assert gone.trace is None and "before the prefill" in window.status_line.status_label.text()
    assert window.attention.image.image is None  # cleared, not a stale picture
    assert window.attention.history.length == 0 and window.attention.shown.shape == (0, 0)
    again = run(qtbot, window, window.step, p.Step)
    assert again.trace.step == 0


def test_settings_change_the_distribution_without_a_forward_pass(window, qtbot, forward_calls):
    before = run(qtbot, window, window.step, p.Step)
    assert len(forward_calls) == 1
    after = run(qtbot, window, lambda: window.sampling.temperature.setValue(0.3), p.Resample)
    assert len(forward_calls) == 1  # no new forward pass
    assert after.trace.record.logits is before.trace.record.logits  # the very same step record data
    assert after.trace.distribution.settings.temperature == pytest.approx(0.3)
    assert not np.allclose(after.trace.distribution.probs, before.trace.distribution.probs)
    top = run(qtbot, window, lambda: window.sampling.top_k.setValue(3), p.Resample)
    assert top.trace.distribution.kept.sum() == 3
    # bars beyond the third are greyed: removed by top-k
    brushes = window.logits.prob_bars.opts["brushes"]
    assert brushes[5].color().name().lower() == th.REMOVED.lower()  # removed by top-k
    greedy = run(qtbot, window, lambda: window.sampling.greedy.setChecked(True), p.Resample)
    assert greedy.trace.chosen == int(np.argmax(greedy.trace.distribution.after_penalty))
    assert len(forward_calls) == 1
    assert "no forward pass" in window.status_line.status_label.text()


def test_keys_step_back_and_play(window, qtbot):
    window.attention.setFocus()
    run(qtbot, window, lambda: qtbot.keyClick(window, Qt.Key_Space), p.Step)
    run(qtbot, window, lambda: qtbot.keyClick(window, Qt.Key_Right), p.Step)
    result = run(qtbot, window, lambda: qtbot.keyClick(window, Qt.Key_Left), p.Back)
    assert result.trace.step == 0
    qtbot.keyClick(window, Qt.Key_P)
    assert window.player.playing
    qtbot.keyClick(window, Qt.Key_P)
    assert not window.player.playing


def test_a_bad_model_folder_shows_an_error_and_the_old_model_still_steps(window, qtbot, tmp_path):
    bad = tmp_path / "not-a-model"
    bad.mkdir()
    with qtbot.waitSignal(window.errorShown, timeout=20_000) as blocker:
        window.load_model(str(bad))
    assert "config.json" in blocker.args[0]
    assert "config.json" in window.status_line.status_label.text()
    assert "Still using gpt2-tiny-demo" in window.status_line.status_label.text()
    assert "Tiny demo model" in window.status_line.model_label.text() and "GPT-2 small" in window.status_line.model_label.text()
    result = run(qtbot, window, window.step, p.Step)
    assert result.info.is_demo and result.trace.step == 0


def test_closing_mid_play_stops_the_worker_thread(window, qtbot):
    window.commands.speed.setValue(30)
    run(qtbot, window, window.player.play, p.Step)
    assert window.player.playing
    thread = window.controller.engine.thread
    window.close()  # a step may be running: close waits for it, then the thread quits
    assert not thread.isRunning()
    assert not window.player.playing


def test_results_of_superseded_requests_are_dropped(window, qtbot):
    kinds = []
    window.resultApplied.connect(lambda r: kinds.append(type(r.request)))
    with qtbot.waitSignal(window.resultApplied, timeout=20_000, check_params_cb=lambda r: isinstance(r.request, p.Reset)):
        window.controller.step()
        window.controller.reset()
    assert p.Step not in kinds
    assert window.state.result.trace is None


def test_held_step_key_does_not_pile_up_forward_passes(window, qtbot):
    c = window.controller
    for _ in range(50):
        c.step()
    assert c.forward_requests <= 1  # one running, one waiting: the rest were coalesced
    qtbot.waitUntil(lambda: c.idle, timeout=20_000)
    assert c.forward_requests == 2


def test_typing_a_prompt_retokenizes(window, qtbot):
    run(qtbot, window, window.step, p.Step)
    result = run(qtbot, window, lambda: window.tokens.editor.setPlainText("Hello world"), p.SetPrompt)
    assert result.trace is None
    assert [c.piece for c in window.tokens.strip.chips] == ["Hello", "␣world"]


def test_projector_mode_enlarges_fonts_and_switches_colour_map(window, qtbot):
    run(qtbot, window, window.step, p.Step)
    small = window.font().pixelSize()
    with qtbot.waitSignal(window.state.themeChanged, timeout=10_000):  # restyled one panel per turn
        window.commands.projector_action.trigger()
        assert window.state.theme.name == "projector"
    big = window.font().pixelSize()
    assert big > small
    assert window.attention.colorbar.colorMap().name == "cividis"
    with qtbot.waitSignal(window.state.themeChanged, timeout=10_000):
        window.commands.projector_action.trigger()
    assert window.state.theme.name == "normal" and window.font().pixelSize() < big


def test_generation_stops_when_the_context_is_full(make_window, qtbot, tiny_model):
    w = make_window()
    prompt = " a" * 63  # 63 tokens in a 64-position model: the prefill and one decode step fit
    run(qtbot, w, lambda: w.load_model(None, loaded=tiny_model, prompt=prompt), p.Load)
    run(qtbot, w, w.step, p.Step)
    last = run(qtbot, w, w.step, p.Step)
    assert last.stopped and last.trace.stop_reason == "context_full"
    assert "context window" in w.status_line.status_label.text()
    assert not w.commands.step_action.isEnabled()


def test_max_speed_play_loops_on_the_worker_and_pause_ends_it(window, qtbot):
    window.commands.max_speed.setChecked(True)
    assert not window.commands.speed.isEnabled()
    assert not window.painter.fast  # max speed alone, not playing: every frame drawn
    window.player.play()
    assert window.controller.looping and window.painter.fast
    qtbot.waitUntil(lambda: window.state.result.stopped or window.state.step >= 5, timeout=20_000)
    window.player.pause()
    assert not window.controller.looping and not window.player.playing and not window.painter.fast
    # a result already on its way is drawn, however long a loaded machine takes to deliver it
    qtbot.waitUntil(lambda: window.controller.idle and window.painter.settled, timeout=20_000)
    drawn, sent = window.state.result.trace.step, window.controller.forward_requests
    qtbot.wait(300)
    assert window.controller.forward_requests == sent  # no step was asked for after the pause
    assert window.state.result.trace.step == drawn and window.painter.settled


def test_a_failed_load_during_a_step_leaves_the_window_showing_the_session(window, qtbot, tmp_path):
    """A load makes the step in flight stale; when the load fails, the window catches up with the session."""
    run(qtbot, window, window.step, p.Step)
    with qtbot.waitSignal(window.resultApplied, timeout=30_000, check_params_cb=lambda r: isinstance(r.request, p.Refresh)):
        window.controller.step()  # in flight when the load arrives: its result is dropped as stale
        window.load_model(str(tmp_path / "missing"))
    session = window.controller.engine.host.session
    assert session.n_steps in (1, 2)  # the step ran, or was skipped unrun as stale
    assert window.state.result.trace.step == session.n_steps - 1
    shown = window.state.result.records
    assert len(shown) == session.n_steps and all(a is b for a, b in zip(shown, session.records))
    assert "does not exist" in window.status_line.status_label.text()


def test_a_step_reaches_the_panels_one_turn_each_and_a_click_midway_waits(window, qtbot):
    """apply_result spreads a step over event-loop turns (one per panel, then one per plot). A head
    chosen while the step is half-delivered waits for the last panel, then every panel shows it."""
    first = run(qtbot, window, window.step, p.Step)
    window.controller.resultReady.disconnect(window.painter.submit)  # this test draws it
    with qtbot.waitSignal(window.controller.resultReady, timeout=20_000) as arrived:
        window.controller.step()
    state, result = window.state, arrived.args[0]
    deliveries = len(state._subscribers) + 1
    window.painter.apply(result)  # the first panel now, the rest on later turns
    assert state.result is result and window.attention.history.length == first.context_len
    state.set_head(2)  # the attention panel has not seen the new step yet
    assert state.head == 0
    with qtbot.waitSignal(window.resultApplied, timeout=10_000):
        pass
    assert len(window.painter.turn_ms) == deliveries + len(window.painter.views)
    assert state.head == 2 and window.attention.head_spin.value() == 2
    assert window.attention.history.length == result.context_len
    np.testing.assert_array_equal(
        window.attention.shown[-1, : result.context_len],
        result.records[-1].attn[0, 2, -1].astype(np.float32),
    )


def test_every_plot_paints_once_a_step(window, qtbot):
    """Each plot view paints in its own turn and only then: the items a step moved are marked before
    that paint, not after it (which painted the view again), and no other turn paints a plot."""
    from PySide6.QtCore import QEvent, QObject

    for _ in range(2):  # the prefill draws everything from scratch; count decode steps
        run(qtbot, window, window.step, p.Step)
    qtbot.wait(50)
    views = {view.viewport(): view for view in window.painter.views}
    paints: dict = {}

    class CountPaints(QObject):
        def eventFilter(self, obj, event):
            if event.type() == QEvent.Type.Paint and obj in views:
                paints[obj] = paints.get(obj, 0) + 1
            return False

    counter = CountPaints()
    for viewport in views:
        viewport.installEventFilter(counter)
    for _ in range(3):
        paints.clear()
        run(qtbot, window, window.step, p.Step)
        qtbot.wait(50)  # anything queued for later turns
        assert len(window.painter.views) == 8  # KV 3, logits 2, embeddings 1, attention 2
        assert paints == {viewport: 1 for viewport in views}
    for viewport in views:
        viewport.removeEventFilter(counter)


def test_text_zoom_steps_through_the_sizes_and_is_kept_for_the_next_start(make_window, qtbot, qsettings):
    """Ctrl+= and Ctrl+- step through app.window.theme.TEXT_SIZES (projector mode the third, F5's check
    mark with it); the next window starts at the size chosen last."""
    from PySide6.QtGui import QKeySequence

    from app.window import theme as th

    window = make_window()
    c = window.commands
    assert QKeySequence("Ctrl+=") in c.larger_action.shortcuts() and QKeySequence("Ctrl+-") in c.smaller_action.shortcuts()
    sizes = []
    for _ in range(len(th.TEXT_SIZES)):  # one past the largest: it stays there
        with qtbot.waitSignal(window.state.themeChanged, timeout=10_000) if window.state.theme is not th.TEXT_SIZES[-1] else _nothing():
            c.larger_action.trigger()
        sizes.append((window.state.theme, window.font().pixelSize(), c.projector_action.isChecked()))
    assert [t for t, _, _ in sizes] == [*th.TEXT_SIZES[1:], th.TEXT_SIZES[-1]]
    pixels = [px for _, px, _ in sizes]
    assert pixels[:3] == sorted(set(pixels))
    assert [on for _, _, on in sizes] == [False, True, True, True]
    with qtbot.waitSignal(window.state.themeChanged, timeout=10_000):
        c.smaller_action.trigger()
    assert window.state.theme is th.PROJECTOR
    window.close()
    again = make_window(preferences=qsettings)
    assert again.state.theme is th.PROJECTOR and again.commands.projector_action.isChecked()


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False
