"""The Why view: its bars and words (app.logic.why_numbers, no Qt), and the view in a window, asking the
engine for the parts only while it is on screen."""

from __future__ import annotations

import csv

import numpy as np
import pytest
from PySide6.QtCore import QRectF

from app.protocol import messages as p
from app.logic import tables
from app.logic import why_numbers as wn
from engine.attribution_trace import Attribution

from .helpers import run
from .test_screens import _ink_box


def made(**kw) -> Attribution:
    """An attribution whose every part is a distinct power of two, so a sum shows which parts it holds."""
    base = dict(step=1, position=6, target=11, versus=-1, logit=3.875, embed=1.0, pos_embed=0.5,
                heads=np.array([[2.0, -1.0], [0.25, 0.0]], np.float32), attn_bias=np.array([0.125, 0.0], np.float32),
                mlp=np.array([-3.0, 4.0], np.float32), norm_shift=0.0, head_bias=0.0,
                sources=np.zeros((2, 2, 7), np.float32), kv_head=np.array([0, 0]), norm_scale=2.0, norm_centres=True,
                logit_scale=1.0, has_pos_embed=True, has_attn_bias=True, has_norm_shift=False, has_head_bias=False)
    return Attribution(**(base | kw))


def test_the_waterfall_runs_in_the_models_order_and_ends_at_the_sum():
    a = made()
    bars = wn.waterfall(a)
    assert [b.short for b in bars] == ["emb", "pos", "A0", "M0", "A1", "M1"]  # no shift, no LM-head bias: the model has neither
    assert [b.value for b in bars] == [1.0, 0.5, 1.125, -3.0, 0.25, 4.0]
    assert [b.start for b in bars] == [0.0, 1.0, 1.5, 2.625, -0.375, -0.125]
    assert bars[-1].end == a.total == 3.875
    with_shift = wn.waterfall(made(norm_shift=0.0625, has_norm_shift=True, has_pos_embed=False))
    assert [b.short for b in with_shift][:2] == ["emb", "A0"] and with_shift[-1].short == "shift"


def test_the_largest_pushes_and_pulls_are_named():
    a = made()
    pushes, pulls = wn.largest(a, 2)
    assert [b.label for b in pushes] == ["block 1's MLP", "block 0's attention"]
    assert [b.label for b in pulls] == ["block 0's MLP"]
    assert wn.top_heads(a, 2) == [(0, 0, 2.0), (0, 1, -1.0)]
    text = wn.summary(a, "␣Paris", "␣the")
    assert "the logit of “␣Paris” minus that of “␣the” is 3.88 (position 6, step 1): 6 parts add up to 3.88" in text
    assert "Pushes: M1 +4.00, A0 +1.12, emb +1.00 · Pulls: M0 -3.00 · Heads: L0H0 +2.00, L0H1 -1.00" in text


def test_the_readout_sentence_is_true_for_the_norm_and_the_logit_scaling():
    assert "LayerNorm" in wn.scale_sentence(made()) and "mean subtracted" in wn.scale_sentence(made())
    rms = wn.scale_sentence(made(norm_centres=False, logit_scale=6.0))
    assert "RMSNorm subtracts no mean" in rms and "logit scaling 6" in rms
    assert "logit scaling" not in wn.scale_sentence(made())


def test_a_heads_sentence_names_its_largest_sources_and_its_key_value_head():
    sources = np.zeros((2, 2, 7), np.float32)
    sources[1, 1, [2, 5]] = [0.5, -1.5]
    a = made(sources=sources, heads=np.array([[2.0, -1.0], [0.25, -1.0]], np.float32), kv_head=np.array([0, 0]))
    text = wn.head_sentence(a, 1, 1, ["a", "b", "c", "d", "e", "f", "g"])
    assert text == "Head L1H1 (key/value head 0) writes -1.00, most from “f” (5: -1.50), “c” (2: +0.50)"


def test_a_heads_sentence_says_a_part_that_rounds_to_zero_plainly_and_names_whole_tokens():
    """"+0.00" reads as a number that was worked out to be zero: a part under half a hundredth is
    "about 0"; a token longer than 12 characters is named whole ("␣internation…" is another word)."""
    sources = np.zeros((2, 2, 7), np.float32)
    sources[0, 1, [3, 4]] = [0.003, -0.001]
    a = made(sources=sources, heads=np.array([[2.0, 0.002], [0.25, -1.0]], np.float32))
    pieces = ["a", "b", "c", "␣international", "e", "f", "g"]
    text = wn.head_sentence(a, 0, 1, pieces)
    assert text == "Head L0H1 (key/value head 0) writes about 0, most from “␣international” (3: about 0), “e” (4: about 0)"
    assert "+0.00" not in text and "-0.00" not in text


# ------------------------------------------------------------------ the view in a window
def show_why(window, qtbot):
    with qtbot.waitSignal(window.controller.attributionReady, timeout=30_000) as answer:
        window.show_view("why")
    qtbot.waitUntil(lambda: not window.why_view.awaiting(), timeout=30_000)
    return answer.args[0]


def test_the_why_table_has_every_part_once_in_the_models_order():
    answer = p.AttributionResult(made(), "␣Paris", "", ())
    rows = tables.why_rows(answer)
    assert [(r["part"], r["layer"] if r["layer"] == r["layer"] else None) for r in rows] == [
        ("embed", None), ("pos_embed", None), ("head", 0), ("head", 0), ("attn_bias", 0), ("mlp", 0),
        ("head", 1), ("head", 1), ("attn_bias", 1), ("mlp", 1), ("logit", None)]  # no shift, no LM-head bias: not rows
    parts = sum(float(r["value"]) for r in rows if r["part"] != "logit")
    assert parts == rows[-1]["value"] == 3.875  # powers of two: a part dropped or counted twice shows
    shifted = tables.why_rows(p.AttributionResult(made(norm_shift=0.0625, logit=3.9375, has_norm_shift=True), "␣Paris", "", ()))
    assert [r["part"] for r in shifted][-2:] == ["norm_shift", "logit"]
    assert sum(float(r["value"]) for r in shifted if r["part"] != "logit") == shifted[-1]["value"]
    assert {(r["step"], r["position"], r["target"], r["versus"]) for r in rows} == {(1, 6, "␣Paris", "")}


def test_file_export_writes_the_why_table_of_the_step_on_screen(window, qtbot, tmp_path):
    window.show_view("overview")  # the Why view closed: it asks for nothing
    result = run(qtbot, window, window.step, p.Step)
    path = tmp_path / "why.csv"
    assert not window.exporter.export_table("why", path) and not path.exists()  # this step's logit not split yet
    answer = show_why(window, qtbot)
    assert window.exporter.export_table("why", path)
    with open(path, encoding="utf-8-sig", newline="") as f:
        rows = list(csv.DictReader(f))
    a = answer.attribution
    assert {int(r["step"]) for r in rows} == {result.trace.step}
    assert sum(r["part"] == "head" for r in rows) == a.heads.size
    logit = float(rows[-1]["value"])
    assert rows[-1]["part"] == "logit" and logit == pytest.approx(a.logit, rel=1e-6)
    assert sum(float(r["value"]) for r in rows[:-1]) == pytest.approx(logit, abs=1e-3)


def test_the_view_splits_the_chosen_tokens_logit_and_follows_a_click(window, qtbot):
    run(qtbot, window, window.step, p.Step)
    result = run(qtbot, window, window.step, p.Step)
    answer = show_why(window, qtbot)
    a, record = answer.attribution, result.records[-1]
    assert a.step == result.trace.step and a.target == record.chosen and a.versus == -1
    assert a.logit == pytest.approx(float(record.logits[record.chosen]), abs=1e-4)
    why = window.why_view
    assert f"“{result.trace.chosen_piece}”" in why.header.text() and f"{a.logit:.2f}" in why.header.text()
    assert why.heads_image.image.shape == a.heads.shape
    top_layer, top_head, _ = wn.top_heads(a, 1)[0]
    assert (window.state.layer, window.state.head) == (top_layer, top_head)  # the first answer selects the top head
    why._on_heads_clicked(2.5, 1.5)  # head 2 of layer 1
    assert (window.state.layer, window.state.head) == (1, 2)
    heights = why.source_bars.opts["height"]
    assert np.asarray(heights).sum() == pytest.approx(float(a.heads[1, 2]), abs=1e-5)
    assert "Head L1H2" in why.source_caption.text()


def test_one_candidate_rather_than_another(window, qtbot):
    result = run(qtbot, window, window.step, p.Step)
    show_why(window, qtbot)
    first, second = (int(i) for i in result.trace.candidate_ids[:2])
    with qtbot.waitSignal(window.controller.attributionReady, timeout=30_000) as answer:
        window.why_view.choose(second, first)
    a = answer.args[0].attribution
    assert (a.target, a.versus) == (second, first)
    logits = result.records[-1].logits
    assert a.total == pytest.approx(float(logits[second] - logits[first]), abs=1e-4)
    qtbot.waitUntil(lambda: not window.why_view.awaiting(), timeout=30_000)
    assert "rather" not in window.why_view.header.text() and "minus that of" in window.why_view.header.text()


def test_a_closed_view_adds_nothing_to_a_step(window, qtbot, monkeypatch):
    import engine.attribution

    calls = []
    real = engine.attribution.attribute
    monkeypatch.setattr(engine.attribution, "attribute", lambda *a, **kw: calls.append(1) or real(*a, **kw))
    window.show_view("overview")
    for _ in range(2):
        run(qtbot, window, window.step, p.Step)
    assert calls == []
    show_why(window, qtbot)
    assert calls == [1]


def test_why_on_a_candidate_opens_the_view_with_that_target(window, qtbot):
    """The Candidates panel's "why?" splits the chosen token's logit; a right-click on a bar, that
    candidate's (one beyond the ten the boxes offer too)."""
    window.show_view("overview")
    result = run(qtbot, window, window.step, p.Step)
    logits = window.logits
    assert logits.why_button.isEnabled()
    with qtbot.waitSignal(window.controller.attributionReady, timeout=30_000) as answer:
        logits.why_button.click()
    assert window.views.currentWidget() is window.why_view or window.why_view.isVisible()
    assert window.why_view.pages.currentIndex() == 0
    assert answer.args[0].attribution.target == result.trace.chosen
    window.state.set_top_n(14)
    row = 12  # beyond the boxes' ten
    token = int(result.trace.candidate_ids[row])
    assert window.why_view.target_box.findData(token) < 0
    window.show_view("overview")
    from PySide6.QtCore import QPointF, Qt

    class RightClick:  # what pyqtgraph hands the bars on a right-click at that row
        button = staticmethod(lambda: Qt.RightButton)
        pos = staticmethod(lambda: QPointF(1.0, row))
        accept = staticmethod(lambda: None)

    with qtbot.waitSignal(window.controller.attributionReady, timeout=30_000) as answer:
        logits.prob_bars.mouseClickEvent(RightClick())
    assert answer.args[0].attribution.target == token
    assert window.why_view.target_box.currentData() == token


def test_a_right_click_on_the_flows_chosen_token_asks_why(window, qtbot):
    from PySide6.QtCore import QPoint, Qt

    result = run(qtbot, window, window.step, p.Step)
    window.show_view("flow")
    window.resize(1366, 768)
    qtbot.wait(50)
    panel = window.flow_view.flow
    x, y, w, h = panel.flow_layout().boxes["chosen"]
    with qtbot.waitSignal(window.controller.attributionReady, timeout=30_000) as answer:
        qtbot.mouseClick(panel, Qt.RightButton, pos=QPoint(x + w // 2, y + h // 2))
    assert window.views.currentWidget() is window.why_view
    assert answer.args[0].attribution.target == result.trace.chosen
    window.show_view("flow")
    x, y, w, h = panel.flow_layout().boxes["sampling"]
    qtbot.mouseClick(panel, Qt.RightButton, pos=QPoint(x + w // 2, y + h // 2))  # another box: nothing
    assert window.views.currentWidget() is not window.why_view


def show_smollm_like_waterfall(window, qtbot, size, projector: bool, head_0: dict[int, float]):
    """The Why view at ``size`` showing the parts of SmolLM2's step on "The capital of France is"
    (30 blocks: its largest MLP pushes and pulls), head 0 of the blocks in ``head_0`` adding those
    values; returns the view."""
    window.state.set_projector(projector)
    window.resize(*size)
    run(qtbot, window, window.step, p.Step)
    show_why(window, qtbot)
    L = 30
    mlp = np.zeros(L, np.float32)
    mlp[[8, 22, 27, 28, 29]] = [1.5, 1.9, -1.3, -1.6, 7.4]
    heads = np.zeros((L, 2), np.float32)
    heads[list(head_0), 0] = list(head_0.values())
    a = made(heads=heads, attn_bias=np.zeros(L, np.float32), mlp=mlp, sources=np.zeros((L, 2, 7), np.float32),
             logit=float(1.5 + mlp.sum() + heads.sum()))
    why = window.why_view
    why.show_attribution(p.AttributionResult(a, "x", "", tuple("abcdefg")))
    painted_for_its_size(qtbot, why)
    return why


def painted_for_its_size(qtbot, why) -> None:
    """Wait until the waterfall is drawn for its plot's size (a resize draws it again), then paint it:
    pyqtgraph moves a name to its place in the scene when the plot is painted. A fixed 20 ms wait
    measured the names before that paint on a loaded machine (M29 outside the plot, in a full run)."""
    box = why.fall_plot.getViewBox()
    qtbot.wait(20)
    drawn = lambda: max(abs(box.width() - why._fall_size[0]), abs(box.height() - why._fall_size[1])) <= 1  # noqa: E731
    qtbot.waitUntil(drawn, timeout=10_000)  # within the pixel the view draws again past
    why.fall_view.grab()


@pytest.mark.parametrize("size", [(1280, 720), (1024, 768)])
def test_the_waterfalls_names_keep_apart(window, qtbot, size):
    """Two of the largest parts two bars apart at the same height (SmolLM2's M27 and M28) were
    named over each other ("M2M28"): each name keeps clear of the others."""
    why = show_smollm_like_waterfall(window, qtbot, size, True, {24: -1.7})
    rects = [(item.toPlainText(), item.sceneBoundingRect()) for item in why.fall_labels]
    assert len(rects) >= 5
    crossing = [(a, b) for i, (a, ra) in enumerate(rects) for b, rb in rects[i + 1:] if ra.intersects(rb)]
    view = why.fall_plot.getViewBox().sceneBoundingRect()
    outside = [text for text, r in rects if not view.contains(r)]
    assert crossing == [] and outside == [], (crossing, outside)


@pytest.mark.parametrize(("size", "projector"), [((1920, 1080), False), ((1366, 768), False), ((1024, 768), True)])
def test_the_waterfalls_names_keep_off_the_bars(window, qtbot, size, projector):
    """SmolLM2's step on "The capital of France is": the name "M28", under its pull, ran into the bar of
    A29 beside it (a pull that goes on down from where M28 ends) at 1920 x 1080. A name keeps off every
    bar: a line further out, else left out (the sentence above names it)."""
    why = show_smollm_like_waterfall(window, qtbot, size, projector, {24: -1.7, 29: -0.8})
    box = why.fall_plot.getViewBox()
    opts = why.fall_bars.opts
    bars = [box.mapViewToScene(QRectF(x - opts["width"] / 2, y0, opts["width"], h)).boundingRect()
            for x, y0, h in zip(opts["x"], opts["y0"], opts["height"])]
    names = [(item.toPlainText(), _ink_box(item)) for item in why.fall_labels]
    assert len(names) >= 4  # most are named
    hit = [f"{text} at {r.getRect()} runs into bar {k} at {bar.getRect()}"
           for text, r in names for k, bar in enumerate(bars) if r.intersects(bar.normalized())]
    assert hit == []


def test_the_header_says_working_out_while_the_split_is_on_its_way(window, qtbot):
    """Between a step and its split the header showed the last step's sentence (or nothing new):
    it says the split is being worked out, then the answer replaces it."""
    run(qtbot, window, window.step, p.Step)
    show_why(window, qtbot)
    why, said = window.why_view, []
    why.attributeRequested.connect(lambda *args: said.append(why.header.text()))
    with qtbot.waitSignal(window.controller.attributionReady, timeout=30_000):
        run(qtbot, window, window.step, p.Step)
    assert said and all(text.startswith("Working out") for text in said), said
    qtbot.waitUntil(lambda: not why.awaiting(), timeout=30_000)
    assert not why.header.text().startswith("Working out")


@pytest.mark.parametrize("size", [(1280, 720), (1024, 768)])
def test_the_sources_axis_names_whole_tokens_apart_and_inside_the_plot(window, qtbot, size):
    """The positions the selected head read from are named by their whole tokens ("␣capital", not
    "␣capit…"), no two names running into each other and the last one's end inside the plot."""
    from PySide6.QtGui import QFontMetrics

    window.state.set_projector(True)
    window.resize(*size)
    run(qtbot, window, window.step, p.Step)
    show_why(window, qtbot)
    pieces = ("The", "␣capital", "␣of", "␣international", "␣relations", "␣is", "␣Washington")
    sources = np.zeros((2, 2, 7), np.float32)
    sources[0, 0] = [0.5, -0.2, 0.1, 0.3, -0.4, 0.2, 0.6]
    why = window.why_view
    why.show_attribution(p.AttributionResult(made(sources=sources), "x", "", pieces))
    window.state.set_layer(0)
    window.state.set_head(0)
    qtbot.wait(20)
    axis = why.source_plot.getAxis("bottom")
    ticks = axis._tickLevels[0]
    assert ticks and all(text in pieces for _x, text in ticks), ticks
    vb = why.source_plot.getViewBox()
    (x0, x1), _ = vb.viewRange()
    fm = QFontMetrics(axis.style["tickFont"] or why.state.theme.font(-1))
    spans = []
    for x, text in ticks:
        centre = (x - x0) * vb.width() / (x1 - x0)
        half = fm.horizontalAdvance(text) / 2
        spans.append((text, centre - half, centre + half))
    assert all(right <= vb.width() + 1 for _t, _l, right in spans), spans
    assert all(a[2] + 4 <= b[1] for a, b in zip(spans, spans[1:])), spans


def shown_text(label) -> str:
    """The words ``label`` shows: its text, or the text its rich text renders to."""
    from PySide6.QtCore import Qt
    from PySide6.QtGui import QTextDocument
    from PySide6.QtGui import Qt as GuiQt  # mightBeRichText lives in QtGui's Qt

    rich = label.textFormat() == Qt.RichText or (label.textFormat() == Qt.AutoText and GuiQt.mightBeRichText(label.text()))
    if not rich:
        return label.text()
    document = QTextDocument()
    document.setHtml(label.text())
    return document.toPlainText()


def test_tokens_that_look_like_tags_are_shown_as_text(window, qtbot):
    """A chat turn's "<|im_start|>" is a token, not a tag: the head's sentence said “” (the rich text
    dropped it as an unknown tag) where the axis under it named <|im_start|>."""
    run(qtbot, window, window.step, p.Step)
    show_why(window, qtbot)
    pieces = ("<|im_start|>", "user", "↵", "<b>", "␣is", "<|im_end|>", "␣x")
    sources = np.zeros((2, 2, 7), np.float32)
    sources[0, 0] = [0.9, 0.0, 0.0, 0.6, 0.0, 0.1, 0.0]
    why = window.why_view
    why.show_attribution(p.AttributionResult(made(sources=sources), "<|im_end|>", "<b>", pieces))
    window.state.set_layer(0)
    window.state.set_head(0)
    qtbot.wait(20)
    said = shown_text(why.source_caption)
    assert "“<|im_start|>” (0: +0.90)" in said and "“<b>” (3: +0.60)" in said, said
    assert "“<|im_end|>”" in shown_text(why.header) and "“<b>”" in shown_text(why.header), shown_text(why.header)
