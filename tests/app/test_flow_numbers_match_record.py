"""Every number the Flow paints is the step record's: the panel's picture (``app.logic.flow_picture``,
the list of items it draws) is read text by text, and each number in each text is checked against
the value worked out here from the record itself (``StepRecord``: the residual stream, the attention
pattern, the logits, the sampling stages, the draw), not from the Flow's own numbers.

For the demo model (GPT-2's kind: LayerNorm, a position table) and a Llama at SmolLM2-135M's shape
with random weights (30 layers, RMSNorm, RoPE, grouped heads, a tied head), at a prefill, a sampled
step (top-k and top-p on), a greedy one and a token chosen by hand; with the first, a middle and the
last block expanded, at a projector's 1280 x 720 and at 1600 x 1000. A number is matched with the
precision it is printed with (12.3 within 0.05, 49.2k within 50, 3.1% within 0.05 %); each text's
numbers must be, in order, some of those its line can say (a shorter wording drops some, never
says another). A text whose line this test does not know fails it.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from PySide6.QtCore import QRect, QRectF
from PySide6.QtGui import QPainter

from app.host.session_host import make_result
from app.logic.flow_picture import BARS, FILL, VECTOR, texts_of
from app.logic.state import AppState
from app.panels.flow_panel import FlowPanel
from app.protocol import messages as p
from app.window import theme as th
from engine import SamplingSettings, Session

SAMPLED = SamplingSettings(temperature=0.8, top_k=40, top_p=0.9, seed=3)
SIZES = [((1280, 720), True), ((1600, 1000), False)]  # (size, projector)

_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?(?:e[-+]?\d+)?(?:[kMB](?![A-Za-z]))?%?")


def printed(text: str) -> list[tuple[float, float, str]]:
    """Each number in ``text`` as (value, how far from it the value it stands for may be, as written):
    the half of its last digit, times its unit (k, M, B; % is a hundredth)."""
    out = []
    for token in _NUMBER.findall(text):
        raw, scale = token, 1.0
        if raw.endswith("%"):
            raw, scale = raw[:-1], 0.01
        if raw[-1] in "kMB":
            raw, scale = raw[:-1], scale * {"k": 1e3, "M": 1e6, "B": 1e9}[raw[-1]]
        mantissa, _, exponent = raw.replace(",", "").partition("e")
        decimals = len(mantissa.partition(".")[2])
        tolerance = 0.5 * 10.0 ** (-decimals) * 10.0 ** int(exponent or 0)
        out.append((float(raw.replace(",", "")) * scale, tolerance * scale * 1.0001 + 1e-12, token))
    return out


def said_in_order(text: str, expected: list[float]) -> str | None:
    """None if every number in ``text`` is, in order, one of ``expected`` (some may be left out); else
    what is wrong."""
    found = printed(text)
    i = 0
    for value, tolerance, token in found:
        while i < len(expected) and abs(expected[i] - value) > tolerance:
            i += 1
        if i == len(expected):
            return f"{text!r}: {token} is none of {expected} (in order)"
        i += 1
    return None


class Record:
    """The values a step's Flow may print, worked out from its record (``rec``) and trace alone."""

    def __init__(self, result, layer: int, head: int):
        trace = result.trace
        rec, dist, info = trace.record, trace.distribution, result.info
        self.result, self.trace, self.rec, self.info, self.arch = result, trace, rec, info, info.architecture
        self.layer, self.head = layer, head
        last = self.last = rec.n_new - 1
        f64 = np.float64
        self.resid = np.linalg.norm(rec.resid[:, last, :].astype(f64), axis=1)  # |x| before block 0, after each block
        self.mid = np.linalg.norm(rec.resid[:-1, last, :].astype(f64) + rec.attn_out.astype(f64), axis=1)
        self.attn_added = np.linalg.norm(rec.attn_out.astype(f64), axis=1)
        self.mlp_added = np.linalg.norm(rec.mlp_out.astype(f64), axis=1)
        self.embed = np.linalg.norm(rec.token_embed[last].astype(f64) + rec.pos_embed[last].astype(f64))
        x = rec.resid[-1, last].astype(f64)
        centred = x - x.mean() if self.arch.norm == "LayerNorm" else x
        self.ln = (np.linalg.norm(x), np.linalg.norm(centred / np.sqrt((centred ** 2).mean() + self.arch.norm_eps)),
                   np.linalg.norm(rec.final_hidden.astype(f64)))
        self.row = rec.attn[layer, head, last, : rec.end].astype(f64)
        self.top_key = int(np.argmax(self.row))
        logits = rec.logits.astype(f64)
        model = np.exp(logits - logits.max())
        self.model_p = model / model.sum()
        self.logits = logits
        self.probs = dist.probs
        penalised = dist.after_penalty.astype(f64)
        self.candidates = [int(t) for t in trace.candidate_ids]
        # by penalised logit, the lower id first among equals (a sort in Python over the vocabulary took 3 s of a run)
        ranked = [int(t) for t in np.lexsort((np.arange(len(penalised)), -penalised))[: len(self.candidates)]]
        assert ranked == self.candidates  # the candidates are the record's best by penalised logit
        self.kept = [len(penalised), int(np.isfinite(dist.after_penalty).sum()), int(np.isfinite(dist.after_temperature).sum()),
                     int(np.isfinite(dist.after_top_k).sum()), int((dist.probs > 0).sum())]
        self.chosen = int(rec.chosen)
        order, cumulative = dist.draw_order()
        where = np.flatnonzero(order == self.chosen)
        i = int(where[0]) if len(where) else -1
        self.interval = ((cumulative[i - 1] if i > 0 else 0.0), cumulative[i]) if i >= 0 else (np.nan, np.nan)
        self.rank = 1 + int((logits > logits[self.chosen]).sum()) + int(((logits == logits[self.chosen])
                                                                         & (np.arange(len(logits)) < self.chosen)).sum())
        self.kv_positions = [int(k) for k in rec.kv.key_positions]
        self.kv_added = rec.n_new if rec.kv.positions else 0

    def piece(self, position: int) -> str:
        return self.trace.pieces[position]

    def expected(self, role: str, index: int, n_layer: int) -> tuple[list[str], list[float]]:
        """(the token pieces the line may show, the numbers it may say, in order) for a text of
        ``role`` (``index``: its layer, rank or stage)."""
        rec, info, arch, s = self.rec, self.info, self.arch, self.rec.settings
        newest = rec.end - 1
        prefill = rec.n_new > 1
        stage_numbers = {"tokens": 1, "embedding": 2, "ln_final": 4, "lm_head": 5, "logits": 6, "sampling": 7,
                         "chosen": 8, "appended": 9, "kv": None}
        if role.startswith("title_"):
            box = role[len("title_"):]
            return [], [3, n_layer] if box == "blocks" else [n for n in [stage_numbers[box]] if n]
        k = s.top_k or None
        table = {  # role -> its (pieces, numbers), worked out when asked
            "tokens_1": lambda: ([], [rec.n_new]) if prefill else ([self.piece(newest)], [int(rec.input_ids[-1])]),
            "tokens_2": lambda: ([self.piece(newest)], [int(rec.input_ids[-1])]) if prefill else ([], [rec.step]),
            "tokens_3": lambda: ([], [newest]),
            "embedding_1": lambda: ([], [int(rec.input_ids[-1])]),
            "embedding_position": lambda: ([], [newest]),
            "embedding_length": lambda: ([], [arch.embedding_multiplier, self.embed] if arch.embedding_multiplier != 1 else [self.embed, info.d_model]),
            "block": lambda: ([], [self.layer, self.resid[self.layer], self.mid[self.layer], self.resid[self.layer + 1]]),
            "block_value": lambda: ([], [self.resid[index + 1]]),  # the stream after block ``index``
            "block_number": lambda: ([], [index]),
            "kv_row": lambda: ([], [self.kv_positions[index], self.kv_added]),
            "kv_label": lambda: ([], []),
            "legend": lambda: ([], []),
            "heads": lambda: ([], [info.n_head, arch.n_kv_heads]),
            "attention": lambda: ([self.piece(self.top_key)], [self.head, self.row[self.top_key], self.top_key, self.attn_added[self.layer]]),
            "mlp": lambda: ([], [self.mlp_added[self.layer]]),
            "ln_final_lengths": lambda: ([], list(self.ln)),
            "ln_final_rule": lambda: ([], []),
            "lm_head_size": lambda: ([], [info.d_model, info.vocab_size] + ([arch.logits_divisor] if arch.logits_divisor != 1 else [])),
            "lm_head_matrix": lambda: ([], []),
            "logit_piece": lambda: ([self.trace.candidate_pieces[index]], [self.candidates[index]]),
            "logit_numbers": lambda: ([], [self.logits[self.candidates[index]], self.model_p[self.candidates[index]]]),
            "sampling_row": lambda: ([], [[self.kept[0]], [s.repetition_penalty, self.kept[1]],
                                  [] if s.is_greedy else [s.temperature, self.kept[2]],
                                  [k, self.kept[3]] if k else [self.kept[3]],
                                  [s.top_p, self.kept[4]] if s.top_p < 1 else [self.kept[4]]][index]),
            "chosen_1": lambda: ([self.trace.chosen_piece], [self.chosen]),
            "chosen_2": lambda: ([], [] if rec.chosen_by == "user" else [self.rank] if s.is_greedy or np.isnan(rec.draw_u)
                         else [rec.draw_u, *self.interval]),
            "chosen_3": lambda: ([], [self.probs[self.chosen]]),
            "chosen_4": lambda: ([], [self.model_p[self.chosen]]),
            "appended_2": lambda: ([], [rec.end]),
            "maths_waiting": lambda: ([], [self.head]),
        }
        return table[role]()


def steps(model) -> dict:
    """The prefill, a sampled decode step, a greedy one and one chosen by hand (the 4th candidate)."""
    session = Session(model, SAMPLED)
    session.set_prompt("The capital of France is")
    session.step()
    out = {"prefill": make_result(session, p.Step(generation=1))}
    session.step()
    out["sampled"] = make_result(session, p.Step(generation=2))
    session.settings = SamplingSettings(greedy=True)
    session.step()
    out["greedy"] = make_result(session, p.Step(generation=3))
    session.choose(int(session.trace().candidate_ids[3]))
    out["chosen"] = make_result(session, p.Step(generation=4))
    return out


@pytest.fixture(scope="module")
def results(demo_model, smollm_loaded):
    return {"demo": steps(demo_model), "smollm": steps(smollm_loaded)}


@pytest.fixture
def panel(qtbot):
    state = AppState(th.NORMAL, th.PROJECTOR)
    flow = FlowPanel(state)
    qtbot.addWidget(flow)
    flow.show()
    return flow


def problems_in(panel: FlowPanel, result) -> list[str]:
    """What the Flow's picture says that the record does not."""
    state = panel.state
    numbers = panel.current()
    layer, head = numbers.layer, numbers.head
    record = Record(result, layer, head)
    items = panel.picture()
    out = []
    seen = set()
    for item in texts_of(items):
        if item.role in ("appended_text", "appended_token"):  # words of the text: checked below
            continue
        try:
            pieces, expected = record.expected(item.role, item.index, result.n_layer)
        except KeyError:
            out.append(f"a text this test does not know: {item.role!r} {item.text!r}")
            continue
        text = item.text
        for piece in pieces:
            text = text.replace(piece, " ")
        wrong = said_in_order(text, [float(x) for x in expected])
        if wrong:
            out.append(f"{item.role}[{item.index}] {wrong}")
        seen.add(item.role)
    # the text before the chosen token is the context's end, whole words; then the chosen token
    context = "".join(record.trace.pieces[: record.rec.end]).replace("␣", " ").replace("\n", "↵")
    tail = " ".join(item.text for item in texts_of(items) if item.role == "appended_text")
    if tail.split() and " ".join(context.split()[-len(tail.split()):]) != tail:
        out.append(f"appended text {tail!r} is not the end of the context {context[-80:]!r}")
    token = [item.text for item in texts_of(items) if item.role == "appended_token"]
    if token != [record.trace.chosen_piece.replace("␣", " ")]:
        out.append(f"appended token {token} is not the chosen {record.trace.chosen_piece!r}")
    # the bars: each candidate's model probability, the selected head's weights and its top key, the vectors
    inner = panel.flow_layout().boxes["logits"][2] - 2 * panel.flow_layout().pad - 4
    for item in items:
        if item.kind == FILL and item.role == "logit_bar":
            want = max(1, int(inner * record.model_p[record.candidates[item.index]]))
            if item.rect[2] != want:
                out.append(f"candidate {item.index}'s bar is {item.rect[2]} px, its model probability makes it {want}")
        if item.kind == BARS:
            weights, top = item.values
            if not np.allclose(weights, record.row, atol=1e-6) or top != record.top_key:
                out.append("the attention bars are not the selected head's weights and its top key")
    vectors = [item.values for item in items if item.kind == VECTOR]
    for name, vector in zip(("embedding", "final norm"), (record.rec.token_embed[record.last] + record.rec.pos_embed[record.last],
                                                          record.rec.final_hidden)):
        v = np.asarray(vector, dtype=np.float32)
        cells = np.clip(((v / float(np.max(np.abs(v))) + 1) * 127.5).astype(np.int32), 0, 255)
        if not any(len(got) == len(cells) and np.array_equal(got, cells) for got in vectors):
            out.append(f"no strip shows the {name}'s vector")
    if record.rec.chosen_by != "user" and not np.isnan(record.rec.draw_u):
        start, end = record.interval
        assert start <= record.rec.draw_u < end
    must = {"tokens_1", "tokens_3", "embedding_1", "block", "attention", "ln_final_lengths", "logit_numbers", "sampling_row",
            "chosen_1", "chosen_2", "chosen_3", "chosen_4", "appended_2", "lm_head_size"}
    if result.n_layer > 1 and panel.flow_layout().row_text:
        must.add("block_value")
    out += [f"no {role} line painted" for role in sorted(must - seen)]
    assert state.layer == layer
    return out


@pytest.mark.parametrize("model", ["demo", "smollm"])
@pytest.mark.parametrize("which", ["prefill", "sampled", "greedy", "chosen"])
def test_every_number_the_flow_paints_is_the_records(panel, results, model, which):
    result = results[model][which]
    panel.state.set_result(result)
    problems = []
    for (w, h), projector in SIZES:
        panel.state.set_projector(projector)
        panel.resize(w, h)
        panel.grab()
        for layer in (0, result.n_layer // 2, result.n_layer - 1):
            panel.state.set_layer(layer)
            panel.state.set_head(result.n_head - 1 if layer else 1)
            problems += [f"{w}x{h} block {layer}: {x}" for x in problems_in(panel, result)]
    assert problems == [], "\n".join(dict.fromkeys(problems))


def test_the_collapsed_blocks_read_the_stream_after_each_block(panel, results):
    """The number beside a collapsed block is |x| after that block (its resid_post), for every block."""
    result = results["smollm"]["sampled"]
    panel.state.set_result(result)
    panel.resize(1600, 1000)
    panel.grab()
    record = Record(result, 0, 0)
    values = {item.index: item.text for item in texts_of(panel.picture()) if item.role == "block_value"}
    assert sorted(values) == list(range(1, result.n_layer))  # every block but the expanded one
    for layer, text in values.items():
        assert said_in_order(text, [record.resid[layer + 1]]) is None, (layer, text, record.resid[layer: layer + 2])
    assert len({text for text in values.values()}) > 1


def test_the_painter_draws_the_pictures_texts_and_nothing_else(panel, results, monkeypatch):
    """Each drawText of a paint is a text item of ``picture()``, in its rect, in the same order."""
    result = results["smollm"]["sampled"]
    panel.state.set_result(result)
    panel.resize(1280, 720)
    panel.state.set_layer(7)
    panel.grab()
    drawn = []
    real = QPainter.drawText

    def recording(painter, *args):
        rect = args[0].toRect() if isinstance(args[0], QRectF) else QRect(args[0])
        drawn.append((args[2], (rect.x(), rect.y(), rect.width(), rect.height())))
        return real(painter, *args)

    monkeypatch.setattr(QPainter, "drawText", recording)
    panel.grab()
    monkeypatch.undo()
    wanted = [(item.text, tuple(int(v) for v in item.rect)) for item in texts_of(panel.picture())]
    assert drawn == wanted


def test_a_steps_paint_measures_only_texts_it_has_not_drawn_before(panel, results):
    """The texts' widths are measured once per font: painting the same step again measures nothing,
    and a new step measures only its new texts (not the titles, labels and wordings it shares)."""
    panel.resize(1280, 720)
    panel.state.set_result(results["demo"]["sampled"])
    panel.grab()
    fitter = panel.fitter
    before = fitter.measured
    panel.update()
    panel.grab()
    assert fitter.measured == before
    panel.state.set_result(results["demo"]["greedy"])
    panel.grab()
    texts = {item.text for item in texts_of(panel.picture())}
    assert 0 < fitter.measured - before < len(texts)
