"""The flow: one step as one picture, in the order the model computes (``app.logic.flow_layout`` places
the boxes; ``app.logic.flow_numbers`` gives each box the step's own numbers).

Painted with one QPainter pass (about a hundred rects and lines of text): no plot items to lay out,
so a step costs the window little, and nothing at all while the view is hidden. A click on a box
asks to open that place in a detail view (``openRequested``); the tour lights one box up and shows
its sentence in a band at the bottom (``set_tour``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from PySide6.QtCore import QPointF, QRect, QRectF, Qt, Signal
from PySide6.QtGui import QColor, QFontMetrics, QImage, QPainter, QPen, QPolygonF
from PySide6.QtWidgets import QSizePolicy, QWidget

from app.window import theme as th
from app.logic.flow_layout import FlowLayout, block_numbers, layout
from app.logic.flow_numbers import FlowNumbers, flow_numbers
from app.logic.flow_texts import TITLES as TITLE_WORDINGS, flow_lines, flow_texts, logit_numbers
from app.logic.text_fit import fit, tail_words
from app.panels.flow_attention_strip import HeadMathsSource, paint_table
from app.panels.flow_sampling_controls import FlowSamplingControls
from app.window.guard import guarded
from app.logic.state import AppState

TITLES = {box: wordings[0] for box, wordings in TITLE_WORDINGS.items()}  # each box's title in its longest wording
ATTENTION = th.CANDIDATE  # what a block's attention adds
MLP = "#7F7F7F"  # what a block's MLP adds
STREAM = th.DARK  # the residual stream's length
HIGHLIGHT = th.VERMILION  # the tour's stage
BOX = "#FAFAFA"
TOUR_CAPTION_LINES = 3
FONT_DELTAS = (6, 5, 4, 3, 2, 1, 0, -1)  # points from the theme's base size, largest first; -1 is the floor
WIDEST = {  # a long line of each column, which a larger font must leave unclipped
    "embedding": "+ position row 1023",
    "blocks": "Block 11: |x| 00.0 → 00.0 → 00.0",
    "logits": "768 → 50,257 logits",
    "chosen": "u = 0.000 in [0.000, 0.000)",
}


@dataclass(frozen=True)
class FlowPlace:
    """Where a click on the flow leads: a view of ``app.logic.views`` and the selection to show there
    (-1: leave that selection as it is; ``newest``: select the newest position, the one the flow
    follows)."""

    view: str
    layer: int = -1
    head: int = -1
    newest: bool = False


def box_title(name: str, texts: dict[str, str] | None) -> str:
    """A box's title: the final norm's names the model's kind of norm (``texts``: ``flow_texts``)."""
    if name == "ln_final" and texts and texts.get("ln_final_title"):
        return texts["ln_final_title"]
    return TITLES[name]


class FlowPanel(QWidget):
    """The flow view's picture; draws the step ``state`` gave it (``result``: the newest may be
    current in the state before it reaches this panel, and is not painted until it has) and asks for
    a detail view on a click."""

    openRequested = Signal(object)  # FlowPlace

    def __init__(self, state: AppState, parent: QWidget | None = None):
        super().__init__(parent)
        self.state = state
        self.result = None  # the SessionResult this panel was given last (None: none yet)
        self.numbers: FlowNumbers | None = None
        self.texts: dict[str, str] = {}  # flow_texts(numbers): the lines naming the model's parts
        self.lines: dict[str, tuple] = {}  # flow_lines(numbers): every line's wordings, longest first
        self._widths: tuple[dict[str, int], dict[str, int]] = ({}, {})  # text -> width in the body and the title font
        self.tour_box: str | None = None  # the box the tour lights up, or None outside the tour
        self.tour_text = ""
        self._layout: FlowLayout | None = None
        self._layout_key: tuple = ()
        self._dirty = True  # the numbers wait for the view to be shown
        self.maths = HeadMathsSource(state, self)  # the selected head's maths, asked of the engine
        self.maths.changed.connect(self._on_maths_changed)
        self.sampling_controls = FlowSamplingControls(self)  # temperature and top-k, in the sampling box's title line
        self.setSizePolicy(QSizePolicy.Expanding, QSizePolicy.Expanding)
        self.setMouseTracking(True)
        self.setToolTip("Click a box to open it in its detail view (Alt+1 or F comes back here)")
        state.subscribe(self._on_state_result)
        state.layerChanged.connect(self._on_state_selection)
        state.headChanged.connect(self._on_state_selection)
        state.subscribe_theme(self._on_state_theme)
        self._on_state_theme(state.theme)

    # ------------------------------------------------------------ state in
    def _on_state_result(self, result) -> None:
        previous, self.result = self.result, result
        if previous is None or result.n_layer != previous.n_layer:
            self._fit_fonts()  # another model: other rows
        self._dirty = True
        if self.isVisible():  # hidden, a step costs this view nothing: it reads the numbers when shown
            self.update()

    def _on_state_selection(self, _value: int) -> None:
        self._dirty = True
        self._layout = None  # another block expanded
        if self.isVisible():
            self.update()

    def _on_state_theme(self, theme: th.Theme) -> None:
        self.pen_width = theme.line
        self._fit_fonts()
        self.update()

    def _fit_fonts(self) -> None:
        """The largest of the theme's fonts (its base size - 1 to + 3 points) with which every box
        gets all the lines it can use: large on a big screen, never below the theme's size - 1."""
        theme = self.state.theme
        n_layer = self.result.n_layer if self.result is not None else 1
        for delta in FONT_DELTAS:
            metrics = QFontMetrics(theme.font(delta, bold=True))
            lay = layout(max(1, self.width()), max(1, self.height()), n_layer, metrics.height(), 0, TOUR_CAPTION_LINES)
            wide_enough = all(metrics.horizontalAdvance(text) + 4 * lay.pad <= lay.boxes[box][2] for box, text in WIDEST.items())
            if lay.fits_all() and wide_enough:
                break
        self.font_delta = delta
        self.body_font = theme.font(delta)
        self.title_font = theme.font(delta, bold=True)
        self.line = max(QFontMetrics(self.body_font).height(), QFontMetrics(self.title_font).height())
        self._widths = ({}, {})
        self._metrics = (QFontMetrics(self.body_font), QFontMetrics(self.title_font))
        self._layout = None
        self._place_controls()

    def measure(self, text: str, bold: bool = False) -> int:
        """``text``'s width in the body (or title) font, measured once per font."""
        widths = self._widths[bold]
        width = widths.get(text)
        if width is None:
            if len(widths) > 4096:  # a long session's old numbers
                widths.clear()
            width = widths[text] = self._metrics[bold].boundingRect(QRect(0, 0, 1 << 20, self.line), int(Qt.AlignLeft | Qt.AlignVCenter), text).width()
        return width

    def _measurer(self, bold: bool):
        return lambda text: self.measure(text, bold)

    @guarded
    def resizeEvent(self, event) -> None:  # noqa: N802 - Qt's name
        super().resizeEvent(event)
        self._fit_fonts()

    def set_tour(self, box: str | None, text: str = "") -> None:
        """Light up ``box`` and show ``text`` under the flow (None: the tour is off)."""
        if (box is None) != (self.tour_box is None):
            self._layout = None  # the caption band comes or goes
        self.tour_box, self.tour_text = box, text
        self._place_controls()
        self.update()

    def _place_controls(self) -> None:
        lay = self.flow_layout()
        title = QFontMetrics(self.title_font).horizontalAdvance(TITLES["sampling"]) + 2 * lay.pad + 6
        self.sampling_controls.place(lay.boxes["sampling"], self.line, lay.pad, self.body_font, title)

    # ------------------------------------------------------------ geometry
    def flow_layout(self) -> FlowLayout:
        """The rects at the widget's present size (tests read them)."""
        n_layer = self.result.n_layer if self.result is not None else 1
        key = (self.width(), self.height(), n_layer, self.line, self.state.layer, self.tour_box is not None)
        if self._layout is None or self._layout_key != key:
            self._layout_key = key
            self._layout = layout(self.width(), self.height(), n_layer, self.line, self.state.layer,
                                  TOUR_CAPTION_LINES if self.tour_box is not None else 0)
        return self._layout

    def place_at(self, x: int, y: int) -> FlowPlace | None:
        """Where a click at (x, y) leads, or None (between the boxes)."""
        hit = self.flow_layout().box_at(x, y)
        if hit is None:
            return None
        box, layer = hit
        n = self.current()
        last = n.n_layer - 1 if n is not None else 0
        if box == "blocks":
            return FlowPlace("inside", layer if layer >= 0 else self.state.layer, self.state.head, newest=True)
        if box == "kv":
            return FlowPlace("cache", layer if layer >= 0 else self.state.layer)
        return {
            "tokens": FlowPlace("overview", newest=True),
            "embedding": FlowPlace("inside", 0, newest=True),
            "ln_final": FlowPlace("inside", last, newest=True),
            "lm_head": FlowPlace("inside", last, newest=True),
            "logits": FlowPlace("overview"),
            "sampling": FlowPlace("sampling"),
            "chosen": FlowPlace("sampling"),
            "appended": FlowPlace("overview"),
        }[box]

    @guarded
    def mousePressEvent(self, event) -> None:  # noqa: N802 - Qt's name
        pos = event.position().toPoint()
        if event.button() == Qt.RightButton:  # "why?" on the chosen token: the Why view splits its logit
            if self.result is not None and (self.flow_layout().box_at(pos.x(), pos.y()) or ("",))[0] == "chosen":
                self.openRequested.emit(FlowPlace("why"))
            return
        if event.button() != Qt.LeftButton:
            return
        lay = self.flow_layout()
        hx, hy, hw, hh = lay.parts["heads"]
        if hy <= pos.y() < hy + hh and hx <= pos.x() < hx + hw and self.result is not None:
            _label, left, cell = self.heads_geometry(lay)
            if pos.x() >= left:  # a head: select it here
                self.state.set_head(min(self.result.n_head - 1, int((pos.x() - left) // cell)))
            return
        hit = lay.box_at(pos.x(), pos.y())
        if hit is not None and hit[0] in ("blocks", "kv") and hit[1] >= 0 and hit[1] != self.state.layer:
            self.state.set_layer(hit[1])  # a collapsed block: expand it here first; a click on it opens it
            return
        place = self.place_at(pos.x(), pos.y())
        if place is not None:
            self.openRequested.emit(place)

    def heads_geometry(self, lay: FlowLayout) -> tuple[str, int, float]:
        """The expanded block's heads strip as the paint draws it and a click reads it: its label,
        the x where the heads' cells start and a cell's width."""
        hx, hy, hw, hh = lay.parts["heads"]
        n_head = self.result.n_head if self.result is not None else 1
        self.current()
        space = self.measure(" ")
        room = hw - space - min(hw // 2, 6 * n_head)  # the cells keep 6 px each (or half the strip)
        label = fit(self.lines.get("heads") or (f"{n_head} heads",), room, self._measurer(False))[0]
        left = hx + self.measure(label) + space
        return label, left, (hx + hw - left) / max(1, n_head)

    def current(self) -> FlowNumbers | None:
        """The numbers of the step this panel was given, at the selected layer and head (None: no
        step yet); the tour reads the same."""
        if self._dirty:
            result = self.result
            self.numbers = None if result is None else flow_numbers(result, self.state.layer, self.state.head)
            self.texts = {} if self.numbers is None else flow_texts(self.numbers)
            self.lines = {} if self.numbers is None else flow_lines(self.numbers)
            self._dirty = False
        return self.numbers

    # ------------------------------------------------------------ painting
    @guarded
    def paintEvent(self, event) -> None:  # noqa: N802 - Qt's name
        p = QPainter(self)
        p.setRenderHint(QPainter.Antialiasing, False)
        lay = self.flow_layout()
        if self._maths_rect(lay).contains(event.rect()) and not self._dirty and self.numbers is not None:
            self._draw_maths(p, lay, self.numbers)  # the engine's answer came: only the table changed
            p.end()
            return
        p.fillRect(self.rect(), QColor("white"))
        n = self.current()
        p.setPen(QPen(QColor(th.DARK), 1.5))
        for points in lay.arrows:
            _arrow(p, points, max(5, self.line // 3))
        for name in ("tokens", "embedding", "ln_final", "lm_head", "logits", "sampling", "chosen", "appended", "blocks", "kv"):
            self._box(p, name, lay.boxes[name])
        if n is None:
            self._text(p, lay.boxes["tokens"], 1, "Step once: every box then shows that step's numbers.", lines=99)
        else:
            self._draw_numbers(p, lay, n)
        if self.tour_box is not None:
            self._draw_tour(p, lay)
        p.end()

    def _box(self, p: QPainter, name: str, r) -> None:
        x, y, w, h = r
        p.setPen(QPen(QColor(th.GREY), 1))
        p.setBrush(QColor(BOX))
        p.drawRoundedRect(QRectF(x + 0.5, y + 0.5, w - 1, h - 1), 4, 4)
        p.setPen(QColor(th.DARK))
        self.current()
        title = self.lines.get(f"title_{name}")
        if title is None:  # no step yet
            title = TITLE_WORDINGS[name]
            if name == "ln_final" and self.texts.get("ln_final_title"):
                title = (self.texts["ln_final_title"], *title[1:])
            if name == "blocks" and self.result is not None:
                title = (f"{title[0]} × {self.result.n_layer}", *title)
        self._line(p, x, y, w, 0, title, bold=True)

    def _fit(self, p: QPainter, rect: QRect, wordings, *, bold: bool = False, align=Qt.AlignLeft, lines: int = 1) -> list[str]:
        """The first of ``wordings`` (a text, or texts longest first) that fits ``rect``'s width on
        at most ``lines`` lines of the panel's line height, drawn from ``rect``'s top; returns its lines."""
        if isinstance(wordings, str):
            wordings = (wordings,)
        chosen = fit(wordings, rect.width(), self._measurer(bold), max(1, lines))
        p.setFont(self.title_font if bold else self.body_font)
        for i, text in enumerate(chosen):
            p.drawText(QRect(rect.x(), rect.y() + i * self.line, rect.width(), self.line), int(align | Qt.AlignVCenter), text)
        return chosen

    def _line(self, p: QPainter, x: int, y: int, w: int, index: int, wordings, align=Qt.AlignLeft, *, bold: bool = False,
              lines: int = 1) -> list[str]:
        """Text on content line ``index`` (0: the title line) of a box at (x, y), in the first of its
        wordings that fits the box's width (``lines``: how many lines it may take)."""
        pad = self._layout.pad if self._layout else 2
        rect = QRect(x + pad + 2, y + pad + index * self.line, w - 2 * pad - 4, self.line)
        return self._fit(p, rect, wordings, bold=bold, align=align, lines=lines)

    def _room(self, r, index: int) -> int:
        """How many lines box ``r`` has from content line ``index`` down."""
        pad = self._layout.pad if self._layout else 2
        return max(0, (r[3] - pad) // self.line - index)

    def _text(self, p: QPainter, r, index: int, wordings, *, bold: bool = False, lines: int = 1, color: str = th.DARK) -> list[str]:
        x, y, w, h = r
        room = self._room(r, index)
        if room < 1:  # no room for this line
            return []
        p.setPen(QColor(color))
        return self._line(p, x, y, w, index, wordings, bold=bold, lines=min(lines, room))

    def _lines_of(self, name: str) -> int:
        return self._layout.lines.get(name, 0)

    def _draw_numbers(self, p: QPainter, lay: FlowLayout, n: FlowNumbers) -> None:
        b = lay.boxes
        t = self.lines
        # 1 · the token fed
        self._text(p, b["tokens"], 1, t["tokens_1"], bold=len(n.input_ids) == 1)
        self._text(p, b["tokens"], 2, t["tokens_2"], bold=len(n.input_ids) > 1)
        self._text(p, b["tokens"], 3, t["tokens_3"])
        # 2 · embedding
        e = b["embedding"]
        self._text(p, e, 1, t["embedding_1"])
        self._text(p, e, 2, t.get("embedding_position", ""))
        self._text(p, e, 3, t.get("embedding_length", ""))
        self._strip(p, e, 4, n.embed_vector)
        # 3 · the blocks and their KV cache
        self._draw_blocks(p, lay, n)
        # 4 · 5 · 6
        f = b["ln_final"]
        self._text(p, f, 1, t.get("ln_final_lengths", ""))
        self._strip(p, f, 2, n.final_vector)
        self._text(p, f, 3, t.get("ln_final_rule", ""), lines=2)
        self._text(p, b["lm_head"], 1, t.get("lm_head_size", ""))
        self._text(p, b["lm_head"], 2, t.get("lm_head_matrix", ""))
        self._draw_logits(p, b["logits"], n)
        # 7 · 8 · 9
        s = b["sampling"]
        rows = t["sampling_rows"]
        for i, wordings in enumerate(rows[-self._lines_of("sampling"):], start=1):  # short of room: the last stages
            self._text(p, s, i, wordings)
        c = b["chosen"]
        self._chip(p, c, 1, t["chosen_1"])
        self._text(p, c, 2, t["chosen_2"])
        self._text(p, c, 3, t["chosen_3"])
        self._text(p, c, 4, t["chosen_4"])
        self._draw_appended(p, lay, n)

    def _draw_appended(self, p: QPainter, lay: FlowLayout, n: FlowNumbers) -> None:
        """The text's last whole words (two lines where the box has room), the chosen token after
        them in the chosen colour, and the next position."""
        a = lay.boxes["appended"]
        x, y, w, h = a
        room = self._room(a, 1)
        if room < 1:
            return
        tail_lines = max(1, min(2, room - 1))
        inner = w - 2 * lay.pad - 4
        chosen = n.chosen_piece.replace("␣", " ")
        tail = n.text_tail.replace("\r", "").replace("\n", "↵")  # a line break as the token strip shows it
        lines = tail_words(tail, inner, self._measurer(False), tail_lines, self.measure(chosen, True),
                           cut_start=len(n.text_tail) >= 60)  # flow_numbers' tail_chars: its first word may be cut
        p.setPen(QColor(th.DARK))
        for i, text in enumerate(lines):
            self._line(p, x, y, w, 1 + i, text)
        p.setFont(self.title_font)
        p.setPen(QColor(th.VERMILION))
        left = x + lay.pad + 2 + self.measure(lines[-1])
        top = y + lay.pad + len(lines) * self.line
        p.drawText(QRect(left, top, min(self.measure(chosen, True), x + w - lay.pad - 2 - left), self.line),
                   int(Qt.AlignLeft | Qt.AlignVCenter), chosen)
        self._text(p, a, 1 + len(lines), self.lines["appended_2"])

    def _chip(self, p: QPainter, r, index: int, wordings) -> None:
        x, y, w, h = r
        pad = self._layout.pad
        text = fit(wordings, w - 2 * pad - 4, self._measurer(True))[0]
        width = min(w - 2 * pad, self.measure(text, True) + 8)
        p.setPen(Qt.NoPen)
        p.setBrush(QColor(th.GENERATED_CHIP))
        p.drawRect(QRect(x + pad, y + pad + index * self.line, width, self.line))
        self._text(p, r, index, text, bold=True)

    def _strip(self, p: QPainter, r, index: int, vector: np.ndarray) -> None:
        """A vector as one line of coloured cells (the theme's colour map, symmetric about 0)."""
        x, y, w, h = r
        pad = self._layout.pad
        if (index + 1) * self.line + pad > h:
            return
        v = np.asarray(vector, dtype=np.float32)
        scale = float(np.max(np.abs(v))) or 1.0
        lut = self.state.theme.cmap().getLookupTable(nPts=256, alpha=False)
        idx = np.clip(((v / scale + 1) * 127.5).astype(np.int32), 0, 255)
        rgb = np.ascontiguousarray(lut[idx][None, :, :3].astype(np.uint8))
        image = QImage(rgb.data, rgb.shape[1], 1, 3 * rgb.shape[1], QImage.Format_RGB888)
        target = QRect(x + pad + 2, y + pad + index * self.line + 2, w - 2 * pad - 4, self.line - 4)
        p.drawImage(target, image)

    def _draw_logits(self, p: QPainter, r, n: FlowNumbers) -> None:
        x, y, w, h = r
        pad = self._layout.pad
        shown = min(len(n.top_ids), self._lines_of("logits"))
        inner = w - 2 * pad - 4
        gap = self.measure("  ")
        for i in range(shown):
            top = y + pad + (i + 1) * self.line
            chosen = n.top_ids[i] == n.chosen_id
            prob = n.top_model_probs[i]
            # the model probability as a pale bar behind the row, the numbers on top of it
            p.fillRect(QRect(x + pad + 2, top + 1, max(1, int(inner * prob)), self.line - 2),
                       th.qcolor(th.CHOSEN if chosen else th.CANDIDATE, 150 if chosen else 90))
            pieces = (n.top_pieces[i], f"id {n.top_ids[i]}")
            forms = [(piece, numbers) for piece in pieces for numbers in logit_numbers(n.top_logits[i], prob)]
            for piece, numbers in forms:  # the piece itself before its id, the numbers shorter where the piece needs the room
                numbers_w = self.measure(numbers) + gap
                piece_room = inner - 2 - numbers_w
                if self.measure(piece, chosen) <= piece_room:
                    break
            p.setPen(QColor(th.DARK))
            self._fit(p, QRect(x + pad + 4, top, max(1, piece_room), self.line), piece, bold=chosen)
            self._fit(p, QRect(x + w - pad - 2 - (numbers_w - gap), top, numbers_w - gap, self.line), numbers, align=Qt.AlignRight)

    def _draw_blocks(self, p: QPainter, lay: FlowLayout, n: FlowNumbers) -> None:
        pad = lay.pad
        top_a = max(float(n.attn_norms.max()), float(n.mlp_norms.max()), 1e-9)
        top_x = max(float(n.resid_norms.max()), 1e-9)
        label_w = self.measure(f"{len(lay.block_rows) - 1} ")  # the widest layer number and a space
        value_w = self.measure("0000.0")
        kv_top = max(int(n.kv_positions.max()) if len(n.kv_positions) else 0, 1)
        numbers = block_numbers(lay.block_rows, lay.expanded, self.line)  # a teacher can say "look at block 17"
        gutter = label_w if numbers else 0
        text_w = self.measure(f"{kv_top} (+{n.kv_added})") + 4
        for layer, (r, k) in enumerate(zip(lay.block_rows, lay.kv_rows)):
            x, y, w, h = r
            if layer % 2:
                p.fillRect(QRect(x + 1, y, w - 2, h), QColor("#F0F0F0"))
                p.fillRect(QRect(k[0] + 1, y, k[2] - 2, h), QColor("#F0F0F0"))
            if layer == lay.expanded:
                self._draw_expanded(p, lay, n)
            else:
                bar_h = max(1, (h - 2) // 2)
                left = x + pad + gutter
                room = w - 2 * pad - gutter - (value_w if lay.row_text else 0)
                p.fillRect(QRect(left, y + 1, max(1, int(room * n.attn_norms[layer] / top_a)), bar_h), QColor(ATTENTION))
                p.fillRect(QRect(left, y + 1 + bar_h, max(1, int(room * n.mlp_norms[layer] / top_a)), bar_h), QColor(MLP))
                if lay.row_text:
                    p.setPen(QColor(th.DARK))
                    value = float(n.resid_norms[layer + 1])
                    self._fit(p, QRect(x + w - pad - value_w, y + (h - self.line) // 2, value_w, self.line),
                              (f"{value:.1f}", f"{value:.0f}"), align=Qt.AlignRight)
                else:  # no room for a number: the stream's length as a thin line under the bars
                    p.fillRect(QRect(left, y + h - 1, max(1, int(room * n.resid_norms[layer + 1] / top_x)), 1), QColor(STREAM))
            # the KV cache of this layer: its cached positions, the rows this step added in orange
            kx, ky, kw, kh = k
            cached = int(n.kv_positions[layer]) if layer < len(n.kv_positions) else 0
            labelled = (layer == lay.expanded or lay.row_text) and text_w <= kw - 2 * pad
            room = kw - 2 * pad - (text_w if labelled else 0)
            cells_h = min(kh - 2, self.line - 4)
            full = int(room * cached / kv_top)
            new = int(room * n.kv_added / kv_top) if cached else 0
            if cached:
                p.fillRect(QRect(kx + pad, ky + 1, max(1, full - new), cells_h), QColor(th.KEYS))
                p.fillRect(QRect(kx + pad + full - new, ky + 1, max(1, new), cells_h), QColor(th.CHOSEN))
            if labelled:
                p.setPen(QColor(th.DARK))
                text = f"{cached} (+{n.kv_added})" if cached else "off"
                self._fit(p, QRect(kx + kw - pad - text_w, ky + (min(kh, self.line) - self.line) // 2, text_w, self.line),
                          (text, str(cached)) if cached else text, align=Qt.AlignRight)
            if layer == lay.expanded and kh >= 2 * self.line:
                p.setPen(QColor(th.DARK))
                self._fit(p, QRect(kx + pad, ky + self.line, kw - 2 * pad, self.line), ("keys, values", "k, v"))
        p.setPen(QColor(th.DARK))
        for layer, (x, y, w, h) in numbers:
            self._fit(p, QRect(x + pad, y, label_w, h), str(layer))
        if lay.legend is not None:  # what the bars of a collapsed block mean
            x, y, w, h = lay.legend
            end = x + w
            swatch = self.line // 2 + 3
            for items in ((("attn adds", ATTENTION), ("MLP adds", MLP), ("|x| after", None)),
                          (("attn", ATTENTION), ("MLP", MLP), ("|x|", None))):
                need = sum(self.measure(text) + (swatch if color else 0) for text, color in items) + 2 * (self.line // 2)
                if need <= w:
                    break
            else:
                items = ()  # no room for a legend
            for text, color in items:
                if color is not None:
                    p.fillRect(QRect(x, y + 4, self.line // 2, self.line - 8), QColor(color))
                    x += swatch
                p.setPen(QColor(th.DARK))
                self._fit(p, QRect(x, y, end - x, self.line), text)
                x += self.measure(text) + self.line // 2

    def _draw_expanded(self, p: QPainter, lay: FlowLayout, n: FlowNumbers) -> None:
        x, y, w, h = lay.block_rows[lay.expanded]
        pad = lay.pad
        p.setPen(QPen(QColor(th.DARK), 1.5))
        p.setBrush(Qt.NoBrush)
        p.drawRect(QRect(x + 1, y, w - 3, h - 1))
        self._text(p, (x, y - pad, w, h), 0, self.lines["block"], bold=True)
        hx, hy, hw, hh = lay.parts["heads"]
        p.setPen(QColor(th.DARK))
        label, left, cell = self.heads_geometry(lay)
        self._fit(p, QRect(hx, hy, left - hx, self.line), label)
        lut = self.state.theme.cmap().getLookupTable(nPts=256, alpha=False)
        for i, top in enumerate(n.head_top):  # each head's sharpest weight; the selected one outlined
            c = lut[int(np.clip(top, 0, 1) * 255)]
            r = QRectF(left + i * cell, hy + 2, max(1.0, cell - 1), self.line - 4)
            p.fillRect(r, QColor(int(c[0]), int(c[1]), int(c[2])))
            if i == n.head:
                p.setPen(QPen(QColor(th.SELECTED), 2))
                p.setBrush(Qt.NoBrush)
                p.drawRect(r)
        ax, ay, aw, ah = lay.parts["attention"]
        p.setPen(QColor(th.DARK))
        self._fit(p, QRect(ax, ay, aw, self.line), self.lines["attention"])
        if len(n.attention):  # the head's weights over the positions, one bar each (one image: 1,000 bars stay cheap)
            height = self.line - 4
            p.drawImage(QRect(ax, ay + self.line + 2, aw, height), _bars_image(n.attention, n.top_key, height, aw))
        mx, my, mw, mh = lay.parts["mlp"]
        if my + self.line <= y + h:
            p.setPen(QColor(th.DARK))
            self._fit(p, QRect(mx, my, mw, self.line), self.lines.get("mlp", ""))  # 8 experts: their shorter wordings
        self._draw_maths(p, lay, n)

    def _maths_rect(self, lay: FlowLayout) -> QRect:
        """The head maths' table and its frame (empty: none, or the tour draws over it)."""
        part = lay.parts.get("maths")
        if part is None or self.tour_box is not None:
            return QRect()
        return QRect(*part).adjusted(-3, -1, 3, 1)

    def _on_maths_changed(self) -> None:
        rect = self._maths_rect(self.flow_layout())
        if self.isVisible() and not rect.isEmpty():
            self.update(rect)
        elif self.isVisible():
            self.update()

    def _draw_maths(self, p: QPainter, lay: FlowLayout, n: FlowNumbers) -> None:
        if "maths" in lay.parts:  # the head's maths for the newest query, once the engine's answer is this step's
            m = self.maths.maths
            m = m if m is not None and (m.step, m.layer, m.head) == (n.step, n.layer, n.head) else None
            paint_table(p, lay.parts["maths"], m, self.body_font, self.title_font, self.line, self.maths.note(n.head),
                        self.measure)

    def _draw_tour(self, p: QPainter, lay: FlowLayout) -> None:
        r = lay.parts.get(self.tour_box) or lay.boxes.get(self.tour_box)
        if r is not None:
            if self.tour_box == "kv":
                r = lay.kv_rows[lay.expanded]
            p.setPen(QPen(QColor(HIGHLIGHT), 2 * self.pen_width))
            p.setBrush(Qt.NoBrush)
            p.drawRoundedRect(QRectF(r[0] + 1, r[1] + 1, r[2] - 2, r[3] - 2), 4, 4)
        if lay.caption is not None:
            x, y, w, h = lay.caption
            p.fillRect(QRect(x, y, w, h), QColor("#FFF4E0"))
            p.setPen(QPen(QColor(HIGHLIGHT), 2))
            p.drawRect(QRect(x + 1, y + 1, w - 2, h - 2))
            p.setFont(self.title_font)
            p.setPen(QColor(th.DARK))
            p.drawText(QRect(x + 8, y + lay.pad, w - 16, h - 2 * lay.pad), int(Qt.TextWordWrap | Qt.AlignLeft | Qt.AlignVCenter),
                       self.tour_text)


def _rgb(hex_color: str) -> np.ndarray:
    c = QColor(hex_color)
    return np.array([c.red(), c.green(), c.blue()], dtype=np.uint8)


def _bars_image(weights: np.ndarray, top: int, height: int, width: int) -> QImage:
    """A bar chart of ``weights`` as an image ``height`` pixels high, one column per bar (at most
    ``width``: more bars share a column, which shows their largest), bar ``top`` in the chosen
    colour and a 1-pixel gap between bars when there is room for one."""
    n = len(weights)
    columns = min(n, max(1, width))
    starts = (np.arange(columns) * n) // columns
    heights = np.maximum.reduceat(np.asarray(weights, dtype=np.float32), starts)
    heights = np.maximum(1, (height * heights / max(float(heights.max()), 1e-9)).astype(np.int32))
    rows = np.arange(height)[:, None]
    filled = rows >= height - heights[None, :]  # [height, columns]
    image = np.full((height, columns, 3), 255, dtype=np.uint8)
    image[filled] = _rgb(ATTENTION)
    column = np.searchsorted(starts, top, side="right") - 1
    image[filled[:, column], column] = _rgb(th.CHOSEN)
    scale = max(1, width // columns)  # whole pixels per bar, the last of them a gap
    if scale >= 3:
        image = np.repeat(image, scale, axis=1)
        image[:, scale - 1 :: scale] = 255
    image = np.ascontiguousarray(image)
    return QImage(image.data, image.shape[1], height, 3 * image.shape[1], QImage.Format_RGB888).copy()


def _arrow(p: QPainter, points, head: int) -> None:
    """A polyline with an arrow head at its last point."""
    qpoints = [QPointF(x, y) for x, y in points]
    for a, b in zip(qpoints, qpoints[1:]):
        p.drawLine(a, b)
    (x1, y1), (x2, y2) = points[-2], points[-1]
    dx, dy = x2 - x1, y2 - y1
    length = math.hypot(dx, dy) or 1.0
    ux, uy = dx / length, dy / length
    tip = QPointF(x2, y2)
    left = QPointF(x2 - head * ux + head * 0.6 * uy, y2 - head * uy - head * 0.6 * ux)
    right = QPointF(x2 - head * ux - head * 0.6 * uy, y2 - head * uy + head * 0.6 * ux)
    p.save()
    p.setBrush(QColor(th.DARK))
    p.drawPolygon(QPolygonF([tip, left, right]))
    p.restore()
