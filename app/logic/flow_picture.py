"""What the Flow paints, as data: every text, bar and frame of one step's picture, in paint order.

Plain Python and numpy, no Qt: ``flow_picture`` takes the step's numbers (``app.logic.flow_numbers``),
its lines in their wordings (``app.logic.flow_texts.flow_lines``), the layout's rects
(``app.logic.flow_layout``) and a ``Fitter`` (``app.logic.text_fit``: the painter's font metrics,
remembered), and returns a list of ``Painted`` items; the flow panel only draws them, and tests read
them (each text with its ``role``: which line of which box it is, so a test can check its numbers
against the step record). ``maths_picture`` does the same for the head's maths table
(``app.logic.flow_attention_numbers``) and ``tour_picture`` for the tour's frame and sentence.

Rects are (x, y, width, height) in pixels: ints, or floats where the painter draws at half pixels
(a box's rounded frame, a head's cell). Colours are named by their ``ink`` (what they mean); the
panel maps each to the theme's colour.
"""

from __future__ import annotations

import itertools
from typing import Any, NamedTuple

import numpy as np

from app.logic.flow_attention_numbers import HeadMaths, table
from app.logic.flow_layout import FlowLayout, block_numbers, table_margin
from app.logic.flow_numbers import FlowNumbers
from app.logic.flow_texts import TITLES, logit_numbers
from app.logic.text_fit import Fitter, tail_words

# kinds of item
TEXT = "text"  # ``text`` in ``rect`` (one line high unless ``wrap``), left or right aligned, centred vertically
FILL = "fill"  # ``rect`` filled with ``ink`` (``alpha``: 255 opaque)
FRAME = "frame"  # ``rect`` outlined with ``ink``, a pen ``pen`` wide (``rounded``: corners of 4 px)
BOX = "box"  # a stage's box: a rounded frame filled with the boxes' colour
VECTOR = "vector"  # ``values``: a vector's colour-map indices (uint8, 0..255, 127.5 = zero), one cell each
BARS = "bars"  # ``values``: (weights, the position in the chosen colour), one bar each
CELL = "cell"  # ``values``: a colour-map index (0..255), the cell filled with it
ARROW = "arrow"  # ``values``: the polyline's points, an arrow head of ``pen`` px at its last one

# inks: what a colour means (the panel maps each to the theme's colour)
INKS = ("dark", "grey", "white", "attention", "mlp", "stream", "keys", "chosen", "candidate", "chip", "stripe",
        "selected", "highlight", "caption")

class Painted(NamedTuple):
    """One thing the Flow paints (see the kinds above). ``role`` names what a text (or bar) is:
    ``title_<box>``, a box line of ``flow_lines`` (``tokens_1``, ``chosen_2``, ...), or one of
    ``block_value``, ``block_number``, ``kv_row`` (``index``: the layer), ``logit_piece``,
    ``logit_numbers`` (``index``: the candidate's rank), ``sampling_row`` (``index``: the stage,
    0 = vocabulary), ``appended_text``, ``appended_token``, ``maths_head``, ``maths_row``
    (``index``: the row, the keys by weight, then the rest), ``tour``. A named tuple: a step's
    picture makes a few hundred of them."""

    kind: str
    rect: tuple
    text: str = ""
    role: str = ""
    index: int = -1
    bold: bool = False
    right: bool = False  # a text aligned right in its rect
    wrap: bool = False  # a text broken at spaces over its rect's lines
    ink: str = "dark"
    alpha: int = 255
    pen: float = 1.0
    rounded: bool = False
    values: Any = None


def texts_of(items: list[Painted]) -> list[Painted]:
    """The items that are texts, in paint order (empty texts left out)."""
    return [item for item in items if item.kind == TEXT and item.text]


class _Canvas:
    """Collects the items of one picture; the helpers place a text on a box's lines as the Flow
    always has (a box's inner margin ``pad``, 2 px more for text, lines of ``line`` px)."""

    def __init__(self, lay: FlowLayout, fitter: Fitter):
        self.lay, self.fitter = lay, fitter
        self.line, self.pad = lay.line, lay.pad
        self.items: list[Painted] = []

    def add(self, kind: str, rect, **kw) -> None:
        self.items.append(Painted(kind, tuple(rect), **kw))

    def fit(self, rect, wordings, role: str, *, bold: bool = False, right: bool = False, lines: int = 1, index: int = -1,
            ink: str = "dark") -> list[str]:
        """The first of ``wordings`` that fits ``rect``'s width on at most ``lines`` lines, from
        ``rect``'s top, one item per line; returns its lines."""
        x, y, w, _h = rect
        chosen = self.fitter.fit(wordings, w, bold, max(1, lines))
        for i, text in enumerate(chosen):
            self.add(TEXT, (x, y + i * self.line, w, self.line), text=text, role=role, index=index, bold=bold, right=right, ink=ink)
        return chosen

    def line_at(self, box, index: int, wordings, role: str, *, bold: bool = False, lines: int = 1, idx: int = -1,
                shift: int = 0) -> list[str]:
        """Content line ``index`` (0: the title line) of ``box``, ``shift`` pixels lower."""
        x, y, w, _h = box
        rect = (x + self.pad + 2, y + self.pad + index * self.line + shift, w - 2 * self.pad - 4, self.line)
        return self.fit(rect, wordings, role, bold=bold, lines=lines, index=idx)

    def room(self, box, index: int) -> int:
        """How many lines ``box`` has from content line ``index`` down."""
        return max(0, (box[3] - self.pad) // self.line - index)

    def text(self, box, index: int, wordings, role: str, *, bold: bool = False, lines: int = 1, idx: int = -1,
             shift: int = 0) -> list[str]:
        """Content line ``index`` of ``box`` (``shift`` pixels lower) when the box has room for it."""
        room = self.room((*box[:3], box[3] - shift), index)
        if room < 1:
            return []
        return self.line_at(box, index, wordings, role, bold=bold, lines=min(lines, room), idx=idx, shift=shift)

    def strip(self, box, index: int, vector: np.ndarray) -> None:
        """A vector as one line of coloured cells (symmetric about 0)."""
        x, y, w, h = box
        if (index + 1) * self.line + self.pad > h:
            return
        v = np.asarray(vector, dtype=np.float32)
        scale = float(np.max(np.abs(v))) or 1.0
        cells = np.clip(((v / scale + 1) * 127.5).astype(np.int32), 0, 255).astype(np.uint8)
        self.add(VECTOR, (x + self.pad + 2, y + self.pad + index * self.line + 2, w - 2 * self.pad - 4, self.line - 4), values=cells)


def heads_geometry(lay: FlowLayout, n_head: int, wordings, fitter: Fitter) -> tuple[str, int, float]:
    """The expanded block's heads strip as the paint draws it and a click reads it: its label (the
    first of ``wordings`` that leaves the cells 6 px each, or half the strip), the x where the
    heads' cells start and a cell's width."""
    hx, _hy, hw, _hh = lay.parts["heads"]
    space = fitter.width(" ")
    room = hw - space - min(hw // 2, 6 * n_head)
    label = fitter.fit(wordings or (f"{n_head} heads",), room)[0]
    left = hx + fitter.width(label) + space
    return label, left, (hx + hw - left) / max(1, n_head)


def flow_picture(n: FlowNumbers | None, lines: dict[str, tuple], lay: FlowLayout, fitter: Fitter,
                 n_layer: int | None = None) -> list[Painted]:
    """Everything the Flow paints for the step ``n`` (None: no step yet; ``n_layer``: the model's
    blocks, when a model is loaded) at layout ``lay``, but the head's maths table and the tour:
    the arrows, each box and its title, and the step's numbers in the first wording that fits."""
    c = _Canvas(lay, fitter)
    for points in lay.arrows:
        c.add(ARROW, (), values=tuple(points), pen=max(5, lay.line // 3))
    for name in ("tokens", "embedding", "ln_final", "lm_head", "logits", "sampling", "chosen", "appended", "blocks", "kv"):
        x, y, w, h = lay.boxes[name]
        c.add(BOX, (x + 0.5, y + 0.5, w - 1.0, h - 1.0), rounded=True, ink="grey")
        title = lines.get(f"title_{name}")
        if title is None:  # no step yet
            title = TITLES[name]
            if name == "blocks" and n_layer is not None:
                title = (f"{title[0]} × {n_layer}", *title)
        c.line_at(lay.boxes[name], 0, title, f"title_{name}", bold=True)
    if n is None:
        c.text(lay.boxes["tokens"], 1, "Step once: every box then shows that step's numbers.", "hint", lines=99)
        return c.items
    _numbers(c, lay, n, lines)
    return c.items


def _numbers(c: _Canvas, lay: FlowLayout, n: FlowNumbers, t: dict[str, tuple]) -> None:
    b = lay.boxes
    # 1 · the token fed
    c.text(b["tokens"], 1, t["tokens_1"], "tokens_1", bold=len(n.input_ids) == 1)
    c.text(b["tokens"], 2, t["tokens_2"], "tokens_2", bold=len(n.input_ids) > 1)
    c.text(b["tokens"], 3, t["tokens_3"], "tokens_3")
    # 2 · embedding
    e = b["embedding"]
    c.text(e, 1, t["embedding_1"], "embedding_1")
    c.text(e, 2, t.get("embedding_position", ""), "embedding_position")
    c.text(e, 3, t.get("embedding_length", ""), "embedding_length")
    c.strip(e, 4, n.embed_vector)
    # 3 · the blocks and their KV cache
    _blocks(c, lay, n, t)
    # 4 · 5 · 6
    f = b["ln_final"]
    c.text(f, 1, t.get("ln_final_lengths", ""), "ln_final_lengths")
    c.strip(f, 2, n.final_vector)
    c.text(f, 3, t.get("ln_final_rule", ""), "ln_final_rule", lines=2)
    c.text(b["lm_head"], 1, t.get("lm_head_size", ""), "lm_head_size")
    c.text(b["lm_head"], 2, t.get("lm_head_matrix", ""), "lm_head_matrix")
    _logits(c, b["logits"], n)
    # 7 · 8 · 9
    rows = t["sampling_rows"]
    room = lay.lines.get("sampling", 0) - 1  # under the line of the temperature and top-k controls
    first = max(0, len(rows) - room) if room > 0 else 0  # short of room: the last stages
    for i, wordings in enumerate(rows[first:], start=2):
        c.text(b["sampling"], i, wordings, "sampling_row", idx=first + i - 2, shift=lay.pad)  # the controls: a line and a pad
    ch = b["chosen"]
    _chip(c, ch, 1, t["chosen_1"])
    c.text(ch, 2, t["chosen_2"], "chosen_2")
    c.text(ch, 3, t["chosen_3"], "chosen_3")
    c.text(ch, 4, t["chosen_4"], "chosen_4")
    _appended(c, lay, n, t)


def _chip(c: _Canvas, box, index: int, wordings) -> None:
    """The chosen token on a chip of the generated tokens' colour."""
    x, y, w, _h = box
    text = c.fitter.fit(wordings, w - 2 * c.pad - 4, bold=True)[0]
    width = min(w - 2 * c.pad, c.fitter.width(text, True) + 8)
    c.add(FILL, (x + c.pad, y + c.pad + index * c.line, width, c.line), ink="chip")
    c.text(box, index, text, "chosen_1", bold=True)


def _appended(c: _Canvas, lay: FlowLayout, n: FlowNumbers, t: dict[str, tuple]) -> None:
    """The text's last whole words (two lines where the box has room), the chosen token after
    them in the chosen colour, and the next position."""
    a = lay.boxes["appended"]
    x, y, w, _h = a
    room = c.room(a, 1)
    if room < 1:
        return
    tail_lines = max(1, min(2, room - 1))
    inner = w - 2 * c.pad - 4
    chosen = n.chosen_piece.replace("␣", " ")
    tail = n.text_tail.replace("\r", "").replace("\n", "↵")  # a line break as the token strip shows it
    words = tail_words(tail, inner, c.fitter.measurer(False), tail_lines, c.fitter.width(chosen, True),
                       cut_start=len(n.text_tail) >= 60)  # flow_numbers' tail_chars: its first word may be cut
    for i, text in enumerate(words):
        c.line_at(a, 1 + i, text, "appended_text")
    left = x + c.pad + 2 + c.fitter.width(words[-1])
    top = y + c.pad + len(words) * c.line
    c.add(TEXT, (left, top, min(c.fitter.width(chosen, True), x + w - c.pad - 2 - left), c.line), text=chosen,
          role="appended_token", bold=True, ink="highlight")
    c.text(a, 1 + len(words), t["appended_2"], "appended_2")


def _logits(c: _Canvas, box, n: FlowNumbers) -> None:
    """The candidates, best first: each piece (or its id) and its logit and model probability, on a
    pale bar as long as that probability. Every row's numbers in one form (a row without its
    logit beside one with it reads as another kind of number): the longest with which each row
    keeps its piece, or else its id, whole (a box titled Logits keeps its logits where it can)."""
    x, y, w, _h = box
    pad, line = c.pad, c.line
    shown = min(len(n.top_ids), c.lay.lines.get("logits", 0))
    inner = w - 2 * pad - 4
    gap = c.fitter.width("  ")
    rows = [(n.top_ids[i] == n.chosen_id, (n.top_pieces[i], f"id {n.top_ids[i]}"), logit_numbers(n.top_logits[i], n.top_model_probs[i]))
            for i in range(shown)]

    def piece_room(numbers: str) -> int:
        return inner - 2 - c.fitter.width(numbers) - gap

    def fits(piece: str, chosen: bool, numbers: str) -> bool:
        return c.fitter.width(piece, chosen) <= piece_room(numbers)

    n_forms = min((len(forms) for _c, _p, forms in rows), default=1)
    form = next((k for k in range(n_forms) if all(any(fits(p, chosen, forms[k]) for p in pieces) for chosen, pieces, forms in rows)),
                n_forms - 1)
    for i, (chosen, pieces, forms) in enumerate(rows):
        top = y + pad + (i + 1) * line
        prob = n.top_model_probs[i]
        c.add(FILL, (x + pad + 2, top + 1, max(1, int(inner * prob)), line - 2), ink="chosen" if chosen else "candidate",
              alpha=150 if chosen else 90, role="logit_bar", index=i)
        numbers = forms[form]
        piece = next((p for p in pieces if fits(p, chosen, numbers)), pieces[-1])  # the piece itself before its id
        numbers_w = c.fitter.width(numbers)
        c.fit((x + pad + 4, top, max(1, piece_room(numbers)), line), piece, "logit_piece", bold=chosen, index=i)
        c.fit((x + w - pad - 2 - numbers_w, top, numbers_w, line), numbers, "logit_numbers", right=True, index=i)


def _blocks(c: _Canvas, lay: FlowLayout, n: FlowNumbers, t: dict[str, tuple]) -> None:
    """A row per block (its attention's and MLP's additions as two bars, the stream's length after
    it), the selected block expanded, and each layer's KV cache beside its block."""
    pad, line, fitter = lay.pad, lay.line, c.fitter
    top_a = max(float(n.attn_norms.max()), float(n.mlp_norms.max()), 1e-9)
    top_x = max(float(n.resid_norms.max()), 1e-9)
    label_w = fitter.width(f"{len(lay.block_rows) - 1} ")  # the widest layer number and a space
    value_w = fitter.width("0000.0")
    kv_top = max(int(n.kv_positions.max()) if len(n.kv_positions) else 0, 1)
    numbers = block_numbers(lay.block_rows, lay.expanded, line)  # a teacher can say "look at block 17"
    gutter = label_w if numbers else 0
    text_w = fitter.width(f"{kv_top} (+{n.kv_added})") + 4
    for layer, (r, k) in enumerate(zip(lay.block_rows, lay.kv_rows)):
        x, y, w, h = r
        if layer % 2:
            c.add(FILL, (x + 1, y, w - 2, h), ink="stripe")
            c.add(FILL, (k[0] + 1, y, k[2] - 2, h), ink="stripe")
        if layer == lay.expanded:
            _expanded(c, lay, n, t)
        else:
            bar_h = max(1, (h - 2) // 2)
            left = x + pad + gutter
            room = w - 2 * pad - gutter - (value_w if lay.row_text else 0)
            c.add(FILL, (left, y + 1, max(1, int(room * n.attn_norms[layer] / top_a)), bar_h), ink="attention",
                  role="attn_bar", index=layer)
            c.add(FILL, (left, y + 1 + bar_h, max(1, int(room * n.mlp_norms[layer] / top_a)), bar_h), ink="mlp",
                  role="mlp_bar", index=layer)
            value = float(n.resid_norms[layer + 1])  # the stream after this block
            if lay.row_text:
                c.fit((x + w - pad - value_w, y + (h - line) // 2, value_w, line), (f"{value:.1f}", f"{value:.0f}"),
                      "block_value", right=True, index=layer)
            else:  # no room for a number: the stream's length as a thin line under the bars
                c.add(FILL, (left, y + h - 1, max(1, int(room * value / top_x)), 1), ink="stream", role="stream_bar", index=layer)
        # the KV cache of this layer: its cached positions, the rows this step added in orange
        kx, ky, kw, kh = k
        cached = int(n.kv_positions[layer]) if layer < len(n.kv_positions) else 0
        labelled = (layer == lay.expanded or lay.row_text) and text_w <= kw - 2 * pad
        room = kw - 2 * pad - (text_w if labelled else 0)
        cells_h = min(kh - 2, line - 4)
        full = int(room * cached / kv_top)
        new = int(room * n.kv_added / kv_top) if cached else 0
        if cached:
            c.add(FILL, (kx + pad, ky + 1, max(1, full - new), cells_h), ink="keys", role="kv_bar", index=layer)
            c.add(FILL, (kx + pad + full - new, ky + 1, max(1, new), cells_h), ink="chosen", role="kv_new_bar", index=layer)
        if labelled:
            text = f"{cached} (+{n.kv_added})" if cached else "off"
            c.fit((kx + kw - pad - text_w, ky + (min(kh, line) - line) // 2, text_w, line),
                  (text, str(cached)) if cached else text, "kv_row", right=True, index=layer)
        if layer == lay.expanded and kh >= 2 * line:
            c.fit((kx + pad, ky + line, kw - 2 * pad, line), ("keys, values", "k, v"), "kv_label")
    for layer, (x, y, _w, h) in numbers:
        c.fit((x + pad, y, label_w, h), str(layer), "block_number", index=layer)
    if lay.legend is not None:  # what the bars of a collapsed block mean
        x, y, w, _h = lay.legend
        end = x + w
        swatch = line // 2 + 3
        for items in ((("attn adds", "attention"), ("MLP adds", "mlp"), ("|x| after", None)),
                      (("attn", "attention"), ("MLP", "mlp"), ("|x|", None))):
            need = sum(fitter.width(text) + (swatch if ink else 0) for text, ink in items) + 2 * (line // 2)
            if need <= w:
                break
        else:
            items = ()  # no room for a legend
        for text, ink in items:
            if ink is not None:
                c.add(FILL, (x, y + 4, line // 2, line - 8), ink=ink)
                x += swatch
            c.fit((x, y, end - x, line), text, "legend")
            x += fitter.width(text) + line // 2


def _expanded(c: _Canvas, lay: FlowLayout, n: FlowNumbers, t: dict[str, tuple]) -> None:
    """The selected block: its stream's lengths, its heads (each head's largest weight as a colour,
    the selected one outlined), the selected head's weights over the positions, its MLP."""
    x, y, w, h = lay.block_rows[lay.expanded]
    pad, line = lay.pad, lay.line
    c.add(FRAME, (x + 1, y, w - 3, h - 1), pen=1.5)
    c.text((x, y - pad, w, h), 0, t["block"], "block", bold=True)
    hx, hy, _hw, _hh = lay.parts["heads"]
    label, left, cell = heads_geometry(lay, n.n_head, t.get("heads"), c.fitter)
    c.fit((hx, hy, left - hx, line), label, "heads")
    for i, top in enumerate(n.head_top):  # each head's sharpest weight; the selected one outlined
        r = (left + i * cell, float(hy + 2), max(1.0, cell - 1), float(line - 4))
        c.add(CELL, r, values=int(np.clip(top, 0, 1) * 255), role="head_cell", index=i)
        if i == n.head:
            c.add(FRAME, r, ink="selected", pen=2)
    ax, ay, aw, _ah = lay.parts["attention"]
    c.fit((ax, ay, aw, line), t["attention"], "attention")
    if len(n.attention):  # the head's weights over the positions, one bar each
        c.add(BARS, (ax, ay + line + 2, aw, line - 4), values=(n.attention, n.top_key), role="attention_bars")
    mx, my, mw, _mh = lay.parts["mlp"]
    if my + line <= y + h:
        c.fit((mx, my, mw, line), t.get("mlp", ""), "mlp")  # 8 experts: their shorter wordings


WEIGHT_HEADS = (("softmax", False), ("weight", True))  # the maths table's softmax column head, and the scale's without its space


def maths_picture(rect, maths: HeadMaths | None, waiting: str, line: int, fitter: Fitter, gap: int,
                  pad: int = 0) -> list[Painted]:
    """The head's maths table in its box ``rect`` (x, y, w, h; ``pad``: the box's inner margin): a
    line of column heads, then a row per key while a line is left; ``waiting`` is written instead
    until ``maths`` is there. ``gap``: the space between columns (a space's advance and 2 px)."""
    x, y, w, h = rect
    out: list[Painted] = [Painted(BOX, (x + 0.5, y + 0.5, w - 1.0, h - 1.0), rounded=True, ink="grey", role="maths_box")]
    m = table_margin(pad)
    x, y, w, h = x + pad + 2, y + m, w - 2 * pad - 4, h - 2 * m
    rows = h // line - 1
    if maths is None or rows < 1:
        short = waiting.split(":")[0]  # "head 3", where the sentence has no room
        out.append(Painted(TEXT, (x, y, w, line), fitter.fit([waiting, short], w)[0], role="maths_waiting"))
        return out
    head, body = table(maths, rows)
    head = (f"head {maths.head} · {head[0]}", *head[1:])  # which head's keys: the block above names its layer
    keys = [cells[0] for cells in body if not cells[0].endswith(" more")]
    whole = max((fitter.width(key) for key in keys), default=0)  # each key's token and position
    tokens = max((fitter.width(key.rsplit(" ", 1)[0]) for key in keys), default=0)  # each key's token, whole
    scale = head[2]
    for (weight, tight), need in itertools.product(WEIGHT_HEADS, (whole, tokens)):
        # "softmax", else "weight" and "÷√64" where the keys' tokens need the room; their positions too where they fit
        head = (*head[:2], scale.replace(" ", "") if tight else scale, weight, head[4])
        widths = [max(fitter.width(head[i], True), *(fitter.width(cells[i]) for cells in body)) for i in range(1, 5)]
        numbers = sum(widths) + gap * len(widths)
        key_w = max(0, w - numbers)
        if key_w >= need:
            break
    positions = key_w >= whole  # one way for the whole column: every key with its position, or none
    lefts, left = [], x + key_w
    for width in widths:
        left += gap
        lefts.append((left, width))
        left += width
    for i, cells in enumerate([head, *body]):
        top = y + i * line
        bold = i == 0
        role, index = ("maths_head", -1) if i == 0 else ("maths_row", i - 1)
        if i > 0:
            weight = maths.rows[i - 1].weight if i - 1 < len(maths.rows) else maths.rest_weight
            out.append(Painted(FILL, (x, top + 1, max(1, int(key_w * weight)), line - 2), ink="candidate", alpha=70,
                               role="maths_bar", index=i - 1))
        position = cells[0].rsplit(" ", 1)[-1]
        token = cells[0].rsplit(" ", 1)[0]
        if i == 0:
            wordings = [cells[0], cells[0].split(" · ")[-1]]  # "key"
        elif cells[0].endswith(" more"):
            wordings = [cells[0], "+" + cells[0].split()[0]]  # "+12": the other keys, summed
        elif token and position.isdigit():  # with its position where the column has them; its token alone, its position
            wordings = [cells[0], token, position] if positions else [token, position]
        else:
            wordings = [cells[0], position]
        key = fitter.fit(wordings, key_w, bold)[0]
        out.append(Painted(TEXT, (x, top, key_w, line), key, role=role, index=index, bold=bold))
        for (left, width), text in zip(lefts, cells[1:]):
            out.append(Painted(TEXT, (left, top, width, line), text, role=role, index=index, bold=bold, right=True))
    return out


def tour_picture(lay: FlowLayout, box: str | None, text: str, pen: float) -> list[Painted]:
    """The tour's frame around ``box`` (a theme line ``pen`` wide, doubled) and its sentence in the
    band under the flow."""
    out: list[Painted] = []
    if box is None:
        return out
    r = lay.parts.get(box) or lay.boxes.get(box)
    if r is not None:
        if box == "kv":
            r = lay.kv_rows[lay.expanded]
        out.append(Painted(FRAME, (r[0] + 1.0, r[1] + 1.0, r[2] - 2.0, r[3] - 2.0), ink="highlight", pen=2 * pen, rounded=True))
    if lay.caption is not None:
        x, y, w, h = lay.caption
        out += [Painted(FILL, (x, y, w, h), ink="caption"),
                Painted(FRAME, (x + 1, y + 1, w - 2, h - 2), ink="highlight", pen=2),
                Painted(TEXT, (x + 8, y + lay.pad, w - 16, h - 2 * lay.pad), text, role="tour", bold=True, wrap=True)]
    return out
