"""Moments a new user found confusing: token text that vanished as a tag, a prompt in the
editor that was not the one Step ran."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QTextDocument

from .helpers import run
from app.protocol import messages as p

END_OF_TEXT = 50256


def shown(label) -> str:
    """The text a label shows, as a person reads it (rich text rendered)."""
    if label.textFormat() == Qt.PlainText:
        return label.text()
    doc = QTextDocument()
    doc.setHtml(label.text())
    return doc.toPlainText()


def test_end_of_text_chosen_shows_as_its_text_everywhere(window, qtbot):
    run(qtbot, window, window.step, p.Step)
    chose = run(qtbot, window, lambda: window.logits.tokenChosen.emit(END_OF_TEXT), p.Choose)
    piece = chose.trace.chosen_piece
    assert "endoftext" in piece and "<" in piece
    assert f"“{piece}”" in shown(window.logits.summary)  # was “” : the piece read as an HTML tag
    assert piece in shown(window.status_line.status_label)


def test_an_empty_prompt_says_why_and_step_waits_for_one(window, qtbot):
    run(qtbot, window, window.step, p.Step)
    with qtbot.waitSignal(window.tokens.promptEdited, timeout=5_000):
        window.tokens.editor.setPlainText("")
    assert "The prompt is empty" in window.status_line.status_label.text()
    assert not window.commands.step_action.isEnabled() and not window.commands.play_action.isEnabled()
    window.step()  # a key press that slipped through: it says why, and runs nothing
    assert "The prompt is empty" in window.status_line.status_label.text()
    result = run(qtbot, window, lambda: window.tokens.editor.setPlainText("Hello world"), p.SetPrompt)
    assert [c.piece for c in window.tokens.strip.chips] == ["Hello", "␣world"] and result.trace is None
    assert window.commands.step_action.isEnabled()
    run(qtbot, window, window.step, p.Step)


def test_a_prompt_emptied_while_the_one_before_runs_keeps_step_off(window, qtbot):
    """The chaos test's find: a prompt sent, then the editor emptied before its answer came; the
    answer, drawn after, turned Step back on for a prompt the editor no longer held."""
    tokens = window.tokens
    tokens.editor.setPlainText("The dog ran")
    tokens._debounce.stop()
    tokens._on_debounce_timeout()  # sent now: its answer comes back after the next line
    with qtbot.waitSignal(window.resultApplied, timeout=20_000) as got:
        tokens.editor.setPlainText("\n\n")
        tokens._debounce.stop()
        tokens._on_debounce_timeout()
    assert isinstance(got.args[0].request, p.SetPrompt) and got.args[0].prompt_text == "The dog ran"
    assert not window.commands.step_action.isEnabled() and "The prompt is empty" in window.gate.why_not_step().message


def test_before_the_first_step_plots_say_what_to_do_and_then_give_way(window, qtbot):
    notes = [*window.attention.empty_notes, window.embeddings.empty_note, *window.logits.empty_notes, *window.kv.empty_notes]
    assert all(note.isVisible() for note in notes)  # no axes from -1 to 1 before anything ran
    assert "Press Space" in window.logits.empty_notes[0].text()
    view = window.kv.time_view
    assert window.kv.empty_notes[2].geometry() == view.rect()  # covers the whole plot
    run(qtbot, window, window.step, p.Step)
    assert not any(note.isVisible() for note in notes)
    run(qtbot, window, window.reset, p.Reset)
    assert all(note.isVisible() for note in notes)


def test_the_text_so_far_reads_as_a_sentence_with_the_newest_token_marked(window, qtbot):
    assert shown(window.tokens.sentence) == "The cat sat on the"
    result = run(qtbot, window, window.step, p.Step)
    newest = result.trace.chosen_piece.replace("␣", " ")
    text = shown(window.tokens.sentence)
    assert text == "The cat sat on the" + newest
    assert f"<b>{newest}</b>" in window.tokens.sentence.text()  # marked


def test_raw_logit_bars_start_at_the_lowest_shown_not_at_zero(window, qtbot):
    import numpy as np

    result = run(qtbot, window, window.step, p.Step)
    ids = window.logits.bar_ids()
    logits = result.trace.record.logits[ids]
    opts = window.logits.logit_bars.opts
    base = np.asarray(opts["x0"])
    assert (base == base[0]).all() and base[0] < logits.min() and logits.min() - base[0] <= 0.5 * (logits.max() - logits.min()) + 1
    np.testing.assert_allclose(base + np.asarray(opts["width"]), logits, rtol=1e-6)  # each bar ends at its logit
    (lo, _hi), _ = window.logits.logit_plot.getViewBox().viewRange()
    assert lo == base[0]  # the axis starts where the bars do: its numbers are the real logits


def test_the_embedding_view_can_fit_its_axes_on_this_text_and_says_which(window, qtbot):
    import numpy as np

    from app.panels.embeddings_panel import CONTEXT_BASIS

    for _ in range(3):
        result = run(qtbot, window, window.step, p.Step)
    panel = window.embeddings
    assert "fitted once on the model's embedding table" in panel.caption.text()
    model_pc2 = float(result.explained[1])
    panel.basis.setCurrentText(CONTEXT_BASIS)
    assert "fitted on these 7 vectors at this depth" in panel.caption.text()
    resid = np.concatenate([r.resid for r in result.records], axis=1)[0].astype(np.float64)  # [T, d]
    centred = resid - resid.mean(axis=0)
    shown = np.asarray(panel.points.getData()).T  # [T, 2]
    variance = np.linalg.svd(centred, compute_uv=False) ** 2
    # the two axes are the text's own principal directions: they hold its two largest variances
    np.testing.assert_allclose(np.sort(shown.var(axis=0) * len(shown))[::-1], variance[:2], rtol=1e-3)
    pc2 = variance[1] / variance.sum()
    assert f"PC 2 ({pc2:.0%})" in panel.plot.getAxis("left").labelText and pc2 > model_pc2  # a more useful basis
    run(qtbot, window, window.step, p.Step)  # the next step keeps the orientation (no flip)
    assert "fitted on these 8 vectors" in panel.caption.text()


def test_the_embedding_view_shows_the_token_and_position_embeddings_apart(window, qtbot, demo_model):
    """At the embeddings depth a selector shows the sum that enters block 0, the token embeddings
    alone or the position embeddings alone (joined in position order), each projected on the same
    basis: the points drawn are ``projection.project`` of the records' ``token_embed`` / ``pos_embed``."""
    import numpy as np

    from app.panels.embeddings_panel import POSITION, SUM, TOKEN

    for _ in range(3):
        result = run(qtbot, window, window.step, p.Step)
    panel = window.embeddings
    projection = demo_model.projection
    token = np.concatenate([r.token_embed for r in result.records])  # [T, d]
    position = np.concatenate([r.pos_embed for r in result.records])
    T = result.context_len
    resid0 = np.concatenate([r.resid[0] for r in result.records])
    np.testing.assert_allclose(resid0, token + position, atol=1e-5)  # the sum is what block 0 reads

    def shown():
        return np.asarray(panel.points.getData()).T  # [T, 2]

    assert panel.depth == 0 and panel.part.isVisible() and panel.part.currentIndex() == SUM
    np.testing.assert_allclose(shown(), result.points[0], atol=1e-6)
    panel.part.setCurrentIndex(TOKEN)
    np.testing.assert_allclose(shown(), projection.project(token), rtol=1e-5, atol=1e-5)
    assert panel.caption.text().startswith(f"{T} token embeddings alone")
    panel.part.setCurrentIndex(POSITION)
    np.testing.assert_allclose(shown(), projection.project(position), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(np.asarray(panel.path.getData()).T, shown())  # the positions joined in order
    labels = [label.toPlainText() for label in panel.labels if label.isVisible()]
    assert labels and all(text.isdigit() and int(text) < T for text in labels)  # labelled by position

    following = run(qtbot, window, window.step, p.Step)  # a step adds its own part; the older ones are the same arrays
    assert len(following.embed_parts) == len(result.embed_parts) + 1
    assert all(a is b for a, b in zip(following.embed_parts, result.embed_parts))
    position = np.concatenate([r.pos_embed for r in following.records])
    np.testing.assert_allclose(shown(), projection.project(position), rtol=1e-5, atol=1e-5)

    from app.panels.embeddings_panel import CONTEXT_BASIS

    panel.basis.setCurrentText(CONTEXT_BASIS)  # the text's own axes: the parts go on them too
    basis = panel._context_basis  # float64 [d, 2], fitted on the sums
    np.testing.assert_allclose(shown() - shown()[0], (position - position[0]) @ basis, atol=1e-4)
    panel.basis.setCurrentIndex(0)

    panel.slider.setValue(2)  # deeper than the embeddings: the residual stream, the selector gives way
    assert not panel.part.isVisible() and panel.depth_label.text() == "after block 1"
    np.testing.assert_allclose(shown(), following.points[2], atol=1e-6)


def test_attention_at_length_zooms_to_a_region_and_can_show_small_weights(window, qtbot):
    import numpy as np

    for _ in range(4):
        run(qtbot, window, window.step, p.Step)
    panel = window.attention
    vb = panel.plot.getViewBox()
    assert vb.state["mouseEnabled"] == [True, True]  # wheel zooms, drag moves
    vb.setRange(xRange=(2, 6), yRange=(2, 6), padding=0)
    vb.sigRangeChangedManually.emit(vb.state["mouseEnabled"])  # as a wheel turn does
    run(qtbot, window, window.step, p.Step)
    (x0, x1), _ = vb.viewRange()
    assert (round(x0), round(x1)) == (2, 6)  # a step keeps the region the person zoomed to
    labels = [text for _cell, text, _rect in panel.keys_axis.layout_labels()]
    assert any(text.endswith(" 3") for text in labels)  # position numbers on the bottom axis too
    assert {cell for cell, _text, _rect in panel.keys_axis.placed} <= {2, 3, 4, 5}  # the region in view
    panel.fit_button.click()
    (x0, x1), _ = vb.viewRange()
    assert (x0, x1) == (0, panel.history.length)
    panel.stretch.setChecked(True)  # √ colours: 0.04 is coloured like 0.2 was
    lut = panel.state.theme.cmap().getLookupTable(0.0, 1.0, 256, alpha=True)
    w = panel.shown
    seen = ~np.isnan(w)
    np.testing.assert_array_equal(panel.image.image[seen], lut[np.clip(np.sqrt(w[seen]) * 255, 0, 255).astype(int)])
    ticks = dict((round(p, 3), t) for p, t in panel.colorbar.axis._tickLevels[0])
    assert ticks[0.1] == "0.01" and ticks[0.5] == "0.25"  # the bar's numbers stay the real weights
