"""Every text the Flow paints fits its box, whole: at 1024 x 768 and 1280 x 720 in projector mode, at
1024 x 768 in normal mode and at 1920 x 1080 at the largest step of text zoom (Ctrl+=), for the demo
model (GPT-2 small's shape, 12 layers) and a 30-layer Llama at SmolLM2-135M's shape with random
weights. Each ``QPainter.drawText`` the panel makes is
recorded with its box and font: a text wider or taller than its box, one drawn outside the panel,
two drawn over each other, or one with "…" in it (an elided number or label) is a failure; so is a
cut line of the two above the picture (the hint and the model's line), and two painted boxes or
frames (a stage's box, the expanded block's frame, the head's maths table) that cross: each lies
inside the other or apart from it; and the logits' rows in two formats (some with their logit,
some without)."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QRect, QRectF
from PySide6.QtGui import QFontMetrics, QPainter

from app.protocol import messages as p
from app.window import theme as th

from .helpers import run_outside_a_test, show_text_size, text_size_id

CASES = [((1024, 768), th.PROJECTOR), ((1280, 720), th.PROJECTOR), ((1024, 768), th.NORMAL),
         ((1920, 1080), th.TEXT_SIZES[-1])]  # (size, text size)
IDS = [text_size_id(case) for case in CASES]


def painted_texts(panel, monkeypatch) -> list[tuple[str, QRect, int, object]]:
    """(text, box, flags, font) of every text ``panel`` draws in one paint."""
    drawn = []
    real = QPainter.drawText

    def recording(painter, *args):
        if len(args) == 3 and isinstance(args[0], (QRect, QRectF)):
            drawn.append((args[2], args[0].toRect() if isinstance(args[0], QRectF) else QRect(args[0]), int(args[1]), painter.font()))
        else:  # a text drawn at a point: no box to fit
            drawn.append((str(args[-1]), None, 0, painter.font()))
        return real(painter, *args)

    with monkeypatch.context() as m:
        m.setattr(QPainter, "drawText", recording)
        panel.grab()
    return drawn


def text_problems(panel, drawn) -> list[str]:
    problems, inks = [], []
    for text, box, flags, font in drawn:
        if not text:
            continue
        if "…" in text:
            problems.append(f"elided: {text!r}")
        if box is None:
            problems.append(f"drawn at a point, no box: {text!r}")
            continue
        fm = QFontMetrics(font)
        ink = fm.boundingRect(box, flags, text)
        lines = max(1, round(ink.height() / fm.lineSpacing()))  # a wrapped text's lines
        if ink.width() > box.width() or lines * fm.height() > box.height():
            problems.append(f"{text!r} needs {ink.width()} x {lines * fm.height()} px, its box is {box.width()} x {box.height()}")
        ink = QRect(ink.x(), max(ink.y(), box.y()), ink.width(), min(ink.height(), box.height()))  # a line's rounding: its box's height
        if not panel.rect().contains(ink):
            problems.append(f"{text!r} drawn outside the panel: {ink}")
        inks.append((text, ink))
    for i, (a, ink_a) in enumerate(inks):
        for b, ink_b in inks[i + 1:]:
            if ink_a.intersects(ink_b):
                problems.append(f"{a!r} runs into {b!r}")
    return problems


def _crossing(a, b) -> bool:
    """Whether rects ``a`` and ``b`` (x, y, w, h) overlap without one holding the other."""
    ax, ay, aw, ah = a
    bx, by, bw, bh = b
    apart = ax + aw <= bx or bx + bw <= ax or ay + ah <= by or by + bh <= ay
    holds = lambda p, q: p[0] <= q[0] and p[1] <= q[1] and q[0] + q[2] <= p[0] + p[2] and q[1] + q[3] <= p[1] + p[3]  # noqa: E731
    return not apart and not holds(a, b) and not holds(b, a)


def box_problems(panel) -> list[str]:
    """The boxes and frames the Flow paints that cross one another (a table drawn over a column)."""
    from app.logic.flow_picture import BOX, FRAME

    frames = [(item.role or item.kind, tuple(float(v) for v in item.rect)) for item in panel.picture()
              if item.kind in (BOX, FRAME) and item.ink != "selected"]  # a head's outline sits inside its cell
    return [f"{a} {ra} crosses {b} {rb}" for i, (a, ra) in enumerate(frames) for b, rb in frames[i + 1:] if _crossing(ra, rb)]


def logit_problems(panel) -> list[str]:
    """The logits box's rows in more than one format (one with its logit, one without)."""
    from app.logic.flow_picture import texts_of

    numbers = [item.text for item in texts_of(panel.picture()) if item.role == "logit_numbers"]
    return [f"logits in two formats: {numbers}"] if len({"·" in text for text in numbers}) > 1 else []


def flow_problems(window, qtbot, monkeypatch, size, theme) -> list[str]:
    """Every cut text of the Flow at ``size`` in text size ``theme``, with the first, a middle and the
    last block expanded, its first and last head selected."""
    show_text_size(window, size, theme)
    window.show_view("flow")
    qtbot.wait(50)
    panel = window.flow_view.flow
    n_layer, n_head = window.state.result.n_layer, window.state.result.n_head
    problems = []
    for layer in (0, n_layer // 2, n_layer - 1):
        for head in (0, n_head - 1):
            window.state.set_layer(layer)
            window.state.set_head(head)
            qtbot.waitUntil(lambda: not panel.maths.awaiting())  # the head's maths table drawn, not its waiting line
            problems += [f"block {layer} head {head}: {x}" for x in text_problems(panel, painted_texts(panel, monkeypatch))]
            problems += [f"block {layer} head {head}: {x}" for x in box_problems(panel)]
    problems += logit_problems(panel)
    for label in (window.flow_view.hint, window.flow_view.model_line):  # the lines above the picture
        need = label.fontMetrics().horizontalAdvance(label.text())
        if not label.text() or need > label.contentsRect().width():
            problems.append(f"label {label.text()!r} needs {need} px, it has {label.contentsRect().width()}")
    return list(dict.fromkeys(problems))  # each once


def stepped(window):
    window.sampling.top_k.setValue(20)
    window.sampling.top_p.setValue(0.9)
    window.sampling.sample.setChecked(True)
    for _ in range(3):
        run_outside_a_test(window, window.step, p.Step)
    return window


# One window per model for the whole module, restyled and resized for each case (a build per case
# cost more than the case).
@pytest.fixture(scope="module")
def demo_window(module_window, demo_model):
    window = module_window()
    run_outside_a_test(window, lambda: window.load_model(None, loaded=demo_model, prompt="The cat sat on the"), p.Load)
    return stepped(window)


@pytest.fixture(scope="module")
def smollm_window(module_window, smollm_loaded):
    """A Llama with random weights at SmolLM2-135M's shape: 30 layers, 9 heads / 3 kv, d = 576, 49,152 tokens."""
    window = module_window()
    run_outside_a_test(window, lambda: window.load_model(None, loaded=smollm_loaded, prompt="The capital of France is"),
                       p.Load, 60_000)
    return stepped(window)


@pytest.mark.parametrize(("size", "theme"), CASES, ids=IDS)
def test_the_flow_cuts_no_text_for_the_demo_model(demo_window, qtbot, monkeypatch, size, theme):
    problems = flow_problems(demo_window, qtbot, monkeypatch, size, theme)
    assert problems == [], "\n".join(problems)


@pytest.mark.parametrize(("size", "theme"), CASES, ids=IDS)
def test_the_flow_cuts_no_text_for_a_30_layer_llama(smollm_window, qtbot, monkeypatch, size, theme):
    problems = flow_problems(smollm_window, qtbot, monkeypatch, size, theme)
    assert problems == [], "\n".join(problems)


def test_a_click_on_a_painted_head_selects_that_head(smollm_window, qtbot, monkeypatch):
    """The heads strip is hit-tested with the geometry it is painted with: a click in the middle of
    the cell painted for head k selects head k (a grouped model's label, "9 heads / 3 kv", is wider
    than "9 heads ")."""
    from PySide6.QtCore import QPoint, Qt

    window = smollm_window
    show_text_size(window, (1280, 720), th.PROJECTOR)
    window.show_view("flow")
    qtbot.wait(50)
    panel = window.flow_view.flow
    window.state.set_layer(3)
    hx, hy, hw, hh = panel.flow_layout().parts["heads"]
    labels = [(text, box) for text, box, _flags, _font in painted_texts(panel, monkeypatch) if box is not None
              and box.x() == hx and box.y() == hy]
    assert len(labels) == 1 and "kv" in labels[0][0], labels  # the grouped heads' label, as painted
    n_head = window.state.result.n_head
    left = labels[0][1].x() + labels[0][1].width()  # the painted cells start where the label's box ends
    cell = (hx + hw - left) / n_head
    for head in range(n_head):
        qtbot.mouseClick(panel, Qt.LeftButton, pos=QPoint(int(left + (head + 0.5) * cell), hy + hh // 2))
        assert window.state.head == head
