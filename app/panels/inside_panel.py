"""Inside the model: the whole path from one token to the next token, with the model's own numbers.

For one position (the selected token chip, else the newest) of the step on screen, read top to
bottom in the order the model computes: (1) the token and position embeddings and their sum;
(2) one block, the layer and head chosen in the attention panel: the norm, query, keys, the
scaled scores, the causal mask, softmax, the weighted values, the output projection and the
residual add, then the norm, the MLP (or the router and its experts) and the second residual add,
each part only some designs have where the model computes it (RoPE after the query, before the
scores; grouped heads beside the keys; the gate or the router with the MLP); (3) the
residual stream across all layers; (4) the logit lens; (5) the final norm and the LM head, logits
and softmax; (6) every matrix's shape and the parameter counts. Every sentence is chosen by the
model's facts (``engine.architecture``, ``app.logic.model_words``), never by its family's name.

Nothing here is computed from weights in this process: the engine recomputes the path for the
position asked (``controller.inspect``, answered by an ``engine.inside_trace.InsideTrace``) and this
panel draws it. Vectors are colour strips (blue negative, white 0, yellow positive: a colour-blind-
safe diverging map), each captioned with its shape and its length (L2 norm).
"""

from __future__ import annotations

from html import escape

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtWidgets import (
    QGroupBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QScrollArea,
    QSpinBox,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from engine.tokens import clip

from app.protocol import messages as p
from app.window import theme as th
from app.window.guard import guarded
from app.logic.help import words
from app.logic.wording import percent
from app.logic.state import AppState
from app.panels.heatmap import DIVERGING, heatmap_view, show_heat

STRIP_H = 46  # pixels of a vector strip's plot
TOP_UNITS = 5  # strongest MLP units listed
LENS_SHOWN = 5  # lens candidates per depth in the table
BUSY_AFTER_MS = 500  # show "computing…" when an answer takes longer than this


def _norm(x: np.ndarray) -> float:
    return float(np.linalg.norm(np.asarray(x, dtype=np.float64)))


class CaptionedPlot(QWidget):
    """A caption above a plot of fixed height that zooms and pans along x only (long vectors and
    contexts: 3,072 MLP units, 1,000 positions)."""

    def __init__(self, title: str, height: int, parent: QWidget | None = None):
        super().__init__(parent)
        self.title = title
        self.caption = QLabel(title)
        self.caption.setWordWrap(True)
        self.view = th.plot_widget()
        self.view.setFixedHeight(height)
        self.plot = self.view.getPlotItem()
        th.fix_plot(self.plot)
        self.plot.setMouseEnabled(x=True, y=False)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 2, 0, 2)
        layout.setSpacing(1)
        layout.addWidget(self.caption)
        layout.addWidget(self.view)
        self.values = np.zeros(0, np.float32)

    def restyle(self, theme: th.Theme) -> None:
        """Room for the axes' text in ``theme``'s font."""


class VectorStrip(CaptionedPlot):
    """One vector as a strip of colours (one column per dimension), with a caption above it."""

    def __init__(self, title: str, parent: QWidget | None = None):
        super().__init__(title, STRIP_H, parent)
        self.plot.hideAxis("left")
        self.plot.getAxis("bottom").setHeight(18)
        self.image = pg.ImageItem()
        self.image.setColorMap(pg.colormap.get(DIVERGING))
        self.plot.addItem(self.image)

    def restyle(self, theme: th.Theme) -> None:
        """Room for the dimension numbers under the strip in ``theme``'s font (a projector's too)."""
        axis = theme.text_px(-1) + 8
        self.plot.getAxis("bottom").setHeight(axis)
        self.view.setFixedHeight(STRIP_H - 18 + axis)

    def show_vector(self, values: np.ndarray, note: str = "") -> None:
        values = np.asarray(values, dtype=np.float32).ravel()
        self.values = values
        scale = float(np.max(np.abs(values))) or 1.0
        self.image.setImage(values[None, :], autoLevels=False, levels=(-scale, scale))
        self.image.setRect(0, 0, len(values), 1)
        self.plot.setRange(xRange=(0, len(values)), yRange=(0, 1), padding=0)
        self.caption.setText(
            f"<b>{self.title}</b> · {len(values):,} numbers · length {_norm(values):.2f} · "
            f"colour scale ±{scale:.2f}{(' · ' + note) if note else ''}"
        )


class PositionBars(CaptionedPlot):
    """One value per visible position (scores, attention weights), token labels under the bars."""

    def __init__(self, title: str, parent: QWidget | None = None):
        super().__init__(title, 150, parent)
        self.plot.showGrid(y=True, alpha=0.25)
        self.bars = pg.BarGraphItem(x=[], height=[], width=0.8)
        self.plot.addItem(self.bars)

    def restyle(self, theme: th.Theme) -> None:
        """Two lines of tick text under the bars (each position's token, then its number) and a y
        axis with room for its numbers, in ``theme``'s font."""
        axis = 2 * theme.text_px(-1) + 10
        self.plot.getAxis("bottom").setHeight(axis)
        th.fix_axis_width(self.plot, theme, 5)  # "-12.5", "0.25"
        self.view.setFixedHeight(110 + axis)

    def show_values(self, values: np.ndarray, pieces: list[str], note: str, color: str) -> None:
        values = np.asarray(values, dtype=np.float32)
        self.values = values
        x = np.arange(len(values))
        self.bars.setOpts(x=x, height=values, width=0.8, brush=pg.mkBrush(color), brushes=None, pen=None)
        plot = self.view.getPlotItem()
        step = max(1, len(values) // 24)  # at most ~24 labels: long contexts label every n-th position
        plot.getAxis("bottom").setTicks([[(i, f"{clip(pieces[i], 6)}\n{i}") for i in range(0, len(values), step)]])
        low, high = min(0.0, float(values.min(initial=0))), max(0.0, float(values.max(initial=0)))
        if high == low:
            high = low + 1.0
        plot.setRange(xRange=(-0.5, max(len(values), 1) - 0.5), yRange=(low, high), padding=0.05)
        self.caption.setText(f"<b>{self.title}</b> · {note}")

    def mark(self, indices, color: str) -> None:
        """Draw the bars at ``indices`` in ``color`` (the router's chosen experts), the rest as they are."""
        chosen = {int(i) for i in indices}
        base = self.bars.opts["brush"]
        self.bars.setOpts(brushes=[pg.mkBrush(color) if i in chosen else base for i in range(len(self.values))])
        self.marked = sorted(chosen)


class InsidePanel(QWidget):
    """The six parts of the path for one position of one step (see the module docstring)."""

    inspectRequested = Signal(int, int, int)  # step, position, layer: the window asks the engine

    def __init__(self, state: AppState, parent: QWidget | None = None):
        super().__init__(parent)
        self.state = state
        self.trace = None  # the InsideTrace drawn
        self.pieces: dict[int, str] = {}
        self._asked: tuple[int, int, int] | None = None  # (step, position, layer) asked last
        self._shown: tuple[int, int, int] | None = None  # ... and drawn
        self.header = QLabel("Step once, then open this view: it shows what happens inside the model for one token.")
        self.header.setWordWrap(True)
        self.step_spin = QSpinBox()  # which step of the history: the one on screen unless another is chosen
        self.step_spin.setSpecialValueText("the step on screen")
        self.step_spin.setMinimum(-1)
        self.step_spin.setValue(-1)
        self.step_spin.setToolTip("Look inside an earlier step of the history (the engine recomputes it)")
        self.step_spin.valueChanged.connect(lambda _v: self.refresh())
        self.busy = QLabel("")
        self._busy_timer = QTimer(self, singleShot=True, interval=BUSY_AFTER_MS)
        self._busy_timer.timeout.connect(lambda: self.busy.setText("computing the path in the model's process…"))

        self.scroll = QScrollArea()
        self.scroll.setWidgetResizable(True)
        self._built = False  # the sections are built the first time the view is shown (half a window's build)
        top = QHBoxLayout()
        top.addWidget(self.header, 1)
        top.addWidget(self.busy)
        top.addWidget(QLabel("step"))
        top.addWidget(self.step_spin)
        layout = QVBoxLayout(self)
        layout.addLayout(top)
        layout.addWidget(self.scroll, 1)

        state.subscribe(self._on_state_result)
        state.layerChanged.connect(self._on_state_selection)
        state.headChanged.connect(self._on_state_selection)
        state.positionChanged.connect(self._on_state_selection)
        state.subscribe_theme(self._on_state_theme)

    def _build(self) -> None:
        """Build the sections (once, when the view is first shown: a window that never opens it does not pay for them)."""
        if self._built:
            return
        self._built = True
        body = QWidget()
        column = QVBoxLayout(body)
        # 1. token and position
        self.embed_box = QGroupBox("1 · Token and position")
        self.token_strip = VectorStrip("token embedding")
        self.pos_strip = VectorStrip("position embedding")
        self.sum_strip = VectorStrip("sum: the residual stream's start")
        self.embed_text = QLabel()
        self.embed_text.setWordWrap(True)
        _stack(self.embed_box, [self.embed_text, self.token_strip, self.pos_strip, self.sum_strip])
        # 2. one block
        self.block_box = QGroupBox("2 · One block")
        self.ln1_in = VectorStrip("into the block (residual stream)")
        self.ln1_norm = VectorStrip("norm 1")
        self.ln1_out = VectorStrip("norm 1 output")
        self.q_strip = VectorStrip("query q of this position (this head)")
        self.keys_view, self.keys_image, self.keys_caption = _heatmap("keys k of every visible position (this head)")
        self.scores = PositionBars("scores")
        self.pattern = PositionBars("attention weights")
        self.values_view, self.values_image, self.values_caption = _heatmap("values v of every visible position (this head)")
        self.z_strip = VectorStrip("head output z: the weighted sum of the values")
        self.attn_out = VectorStrip("attention output")
        self.resid_mid = VectorStrip("residual stream after the attention: input + attention output")
        self.ln2_out = VectorStrip("norm 2 output")
        self.mlp_pre = VectorStrip("MLP hidden units")
        self.mlp_post = VectorStrip("MLP hidden units, activated")
        self.mlp_top = QLabel()
        self.mlp_out = VectorStrip("MLP output")
        self.resid_post = VectorStrip("residual stream after the block: + MLP output")
        self.block_text = QLabel()
        self.block_text.setWordWrap(True)
        # the parts only some designs have (RoPE, grouped heads, a gated MLP, experts), each shown where the model has it
        self.rope_text = _label()
        self.rot_q = VectorStrip("query after RoPE (this head)")
        self.rot_k = VectorStrip("key after RoPE (the key/value head this head reads)")
        self.angles = PositionBars("angle per pair of dimensions")
        self.gqa_text = _label()
        self.gate_text = _label()
        self.mlp_up = VectorStrip("up projection x · W_up")
        self.router = PositionBars("router probabilities over every expert")
        self.experts_text = _label()
        _stack(self.block_box, [  # in the order the model computes
            self.block_text, self.ln1_in, self.ln1_norm, self.ln1_out,
            self.q_strip, self.rope_text, self.rot_q, self.rot_k, self.angles, self.gqa_text,
            self.keys_caption, self.keys_view, self.scores, self.pattern, self.values_caption, self.values_view,
            self.z_strip, self.attn_out, self.resid_mid,
            self.ln2_out, self.gate_text, self.router, self.experts_text, self.mlp_pre, self.mlp_up, self.mlp_post,
            self.mlp_top, self.mlp_out, self.resid_post,
        ])  # fmt: skip
        # 3. the residual stream across layers
        self.stream_box = QGroupBox("3 · The residual stream through every block")
        self.stream_view = th.plot_widget()
        self.stream_view.setFixedHeight(210)
        sp = self.stream_view.getPlotItem()
        th.fix_plot(sp)
        sp.addLegend(offset=(8, 4))  # top left, above the bars (the y range leaves room for it)
        sp.showGrid(y=True, alpha=0.25)
        self.attn_norm_bars = pg.BarGraphItem(x=[], height=[], width=0.38, brush=th.BLUE, name="attention adds (length)")
        self.mlp_norm_bars = pg.BarGraphItem(x=[], height=[], width=0.38, brush=th.ORANGE, name="MLP adds (length)")
        sp.addItem(self.attn_norm_bars)
        sp.addItem(self.mlp_norm_bars)
        self.resid_line = sp.plot([], [], pen=pg.mkPen(th.DARK, width=2), symbol="o", symbolSize=6, name="residual stream length")
        self.stream_text = QLabel()
        self.stream_text.setWordWrap(True)
        _stack(self.stream_box, [self.stream_text, self.stream_view])
        # 4. logit lens
        self.lens_box = QGroupBox("4 · Logit lens: what the model would predict if it stopped here")
        self.lens_table = _table()
        self.lens_text = _label()
        _stack(self.lens_box, [self.lens_text, self.lens_table])
        # 5. final layer norm and LM head
        self.head_box = QGroupBox("5 · Final norm, the LM head and softmax")
        self.final_strip = VectorStrip("final hidden state h")
        self.head_text = QLabel()
        self.head_text.setWordWrap(True)
        self.head_text.setTextFormat(Qt.RichText)
        _stack(self.head_box, [self.final_strip, self.head_text])
        # 6. sizes and parameters
        self.size_box = QGroupBox("6 · Sizes and parameters")
        self.size_table = _table()
        self.size_text = _label()
        _stack(self.size_box, [self.size_table, self.size_text])
        for box in (self.embed_box, self.block_box, self.stream_box, self.lens_box, self.head_box, self.size_box):
            column.addWidget(box)
        column.addStretch(1)
        self.scroll.setWidget(body)
        self._boxes_hidden(True)
        self._on_state_theme(self.state.theme)

    def plot_views(self) -> list[pg.GraphicsView]:
        """Not painted by the step's turns: this view changes only when its answer arrives."""
        return []

    # ------------------------------------------------------------ asking
    def refresh(self) -> None:
        """Ask for the path at the selected position of the step on screen (if not already shown)."""
        result = self.state.result
        if result is None or result.trace is None or not self.isVisible():
            return
        step = result.trace.step if self.step_spin.value() < 0 else min(self.step_spin.value(), result.trace.step)
        end = result.records[step].end  # the positions that step's context held
        wanted = (step, min(self.state.selected_position, end - 1), self.state.layer)  # the chosen token: the newest
        if wanted == self._asked:
            return
        self._asked = wanted
        self._busy_timer.start()
        self.inspectRequested.emit(*wanted)

    def wants(self, trace) -> bool:
        """True if ``trace`` answers this view's last question."""
        return self._asked is not None and (trace.step, trace.position, trace.kv_layers[0] if trace.kv_layers else -1) == self._asked

    def awaiting(self) -> bool:
        """True while the answer to the last question has not been drawn."""
        return self._asked is not None and self._asked != self._shown

    @guarded
    def showEvent(self, event) -> None:  # noqa: N802 - Qt's name
        self._build()
        super().showEvent(event)
        QTimer.singleShot(0, self.refresh)

    def _on_state_result(self, result) -> None:
        if result.trace is None:
            self._asked, self.trace = None, None
            if self._built:
                self._boxes_hidden(True)
            self.header.setText("Step once: this view shows what happens inside the model for one token of a step.")
            return
        if isinstance(result.request, (p.Load, p.SetPrompt, p.SetChat, p.Reset)):
            self._asked = None
        self.step_spin.setMaximum(result.trace.step)
        self.refresh()

    def _on_state_selection(self, _value: int) -> None:
        self.refresh()  # another position, or another layer (keys and values come per layer)
        if self.trace is not None:
            self._draw_block()

    def _on_state_theme(self, theme: th.Theme) -> None:
        self.setFont(theme.font())
        self.header.setFont(theme.font(1, bold=True))
        for view in self.findChildren(pg.PlotWidget):  # tick labels large enough to read in projector mode
            th.style_plot(view.getPlotItem(), theme)
        for plot in self.findChildren(CaptionedPlot):  # and the room to show them
            plot.restyle(theme)

    # ------------------------------------------------------------ drawing
    def show_inside(self, trace, pieces: dict[int, str]) -> None:
        """Draw ``trace`` (an InsideTrace); ``pieces`` gives the readable text of the ids it names."""
        self._build()
        self._busy_timer.stop()
        self.busy.setText("")
        self.trace, self.pieces = trace, dict(pieces)
        self._shown = (trace.step, trace.position, trace.kv_layers[0] if trace.kv_layers else -1)
        self._boxes_hidden(False)
        t = trace
        piece = self._piece(t.token_id)
        self.header.setText(
            f"Inside the model at position {t.position} (token “{piece}”, id {t.token_id:,}) of step {t.step}; "
            f"it predicts the next token, here “{self._piece(t.next_id)}”. Recomputed in {t.compute_ms:.0f} ms."
        )
        at = dict(token_id=t.token_id, position=t.position)
        self.embed_text.setText(self._says("embed", **at))
        self.token_strip.show_vector(t.token_embed, self._says("token_row", **at))
        table = self._has_position_table()
        self.pos_strip.setHidden(not table)  # no position table: no position vector to draw
        if table:
            self.pos_strip.show_vector(t.pos_embed, f"row {t.position} of the position embeddings")
        self.sum_strip.show_vector(t.resid_pre[0], self._says("stream_start"))
        self._draw_block()
        self._draw_stream()
        self._draw_lens()
        self._draw_head()
        self._draw_sizes()

    def _arch(self):
        """The facts of the model on screen (engine.architecture.Architecture; None: not known)."""
        result = self.state.result
        return result.info.architecture if result is not None else None

    def _says(self, key: str, **numbers) -> str:
        """The Inside sentence ``key`` for the model on screen (resources/help/en.json, "inside")."""
        return words("inside", key, self._arch(), numbers)

    def _has_position_table(self) -> bool:
        arch = self._arch()
        return arch is not None and not arch.rotary

    def _draw_block(self) -> None:
        t = self.trace
        arch = self._arch()
        L = min(self.state.layer, t.n_layer - 1)
        H = min(self.state.head, t.n_head - 1)
        T = t.position + 1
        dh = t.q.shape[-1]
        self._titles()
        self.block_box.setTitle(f"2 · Block {L} (layer {L} of 0-{t.n_layer - 1}), head {H}: choose both in the attention panel")
        x = t.resid_pre[L]
        self.block_text.setText(self._says("block"))
        self.ln1_in.show_vector(x, f"mean {x.mean():+.3f}, spread {x.std():.3f}")
        n = t.ln1_normalized[L]
        self.ln1_norm.show_vector(n, self._says("ln_normalized_note", mean=float(n.mean()), spread=float(n.std()),
                                                rms=float(np.sqrt((n ** 2).mean())), scale=float(t.ln1_scale[L])))
        self.ln1_out.show_vector(t.ln1_out[L])
        self.q_strip.show_vector(t.q[L, H], f"{dh} numbers per head")
        has_kv = L in t.kv_layers
        if has_kv:
            i = t.kv_layers.index(L)
            keys, values = t.keys[i, t.kv_of(H), :T], t.values[i, t.kv_of(H), :T]
            _show_heat(self.keys_image, self.keys_view, keys)
            _show_heat(self.values_image, self.values_view, values)
            self.keys_caption.setText(self._says("keys_caption", T=T))
            self.values_caption.setText(f"<b>values v</b> of the {T} visible positions ({T} × {dh}): what the weights mix")
        else:
            self.keys_caption.setText("keys: computing for this layer…")
            self.values_caption.setText("values: computing for this layer…")
        pieces = [self._context_piece(j) for j in range(T)]
        self.scores.show_values(t.scores[L, H, :T], pieces, self._says("scores_note", position=t.position), th.BLUE)
        self.pattern.show_values(
            t.pattern[L, H, :T], pieces,
            f"softmax turns the scores into weights that are all positive and add up to 1 (sum "
            f"{float(t.pattern[L, H, :T].sum()):.4f}): the same row the attention panel draws for this position.",
            th.ORANGE,
        )
        self.z_strip.show_vector(t.z[L, H], f"Σ weight × value, {dh} numbers")
        self.attn_out.show_vector(t.attn_out[L], self._says("attn_out_note", hd=t.n_head * dh))
        self.resid_mid.show_vector(t.resid_mid[L], f"the attention added a vector of length {_norm(t.attn_out[L]):.2f}")
        self.ln2_out.show_vector(t.ln2_out[L], self._says("ln_out_note", scale=float(t.ln2_scale[L])))
        dense = t.mlp_pre.shape[-1] > 0  # an MoE block has no single MLP (its strips are hidden)
        for strip in (self.mlp_pre, self.mlp_post, self.mlp_top):
            strip.setHidden(not dense)
        self.mlp_up.setHidden(not (dense and arch is not None and arch.mlp == "gated"))
        if dense:
            self.mlp_pre.show_vector(t.mlp_pre[L], self._says("mlp_pre_note"))
            self.mlp_post.show_vector(t.mlp_post[L], self._says("mlp_post_note"))
            if not self.mlp_up.isHidden():  # the up projection: a gated MLP's second one
                self.mlp_up.show_vector(t.mlp_pre_linear[L], f"{t.attn_out.shape[-1]} → {t.mlp_pre_linear.shape[-1]}")
            units, values = t.top_units(L, TOP_UNITS)
            self.mlp_top.setText("Strongest units: " + ", ".join(f"unit {int(u):,} = {float(v):+.2f}" for u, v in zip(units, values)))
        self.mlp_out.show_vector(t.mlp_out[L], self._says("mlp_out_note"))
        self.resid_post.show_vector(t.resid_post[L], f"the MLP added a vector of length {_norm(t.mlp_out[L]):.2f}")
        self._draw_details(L, H)
        if not has_kv:
            self.refresh()

    def _titles(self) -> None:
        """Strip titles for the model on screen (its norm, its MLP, its position encoding)."""
        for strip, key, numbers in ((self.ln1_norm, "ln_normalized_title", {"index": 1}), (self.ln1_out, "ln_out_title", {"index": 1}),
                                    (self.ln2_out, "ln_out_title", {"index": 2}), (self.q_strip, "q_title", {}),
                                    (self.attn_out, "attn_out_title", {}), (self.mlp_pre, "mlp_pre_title", {}),
                                    (self.mlp_post, "mlp_post_title", {}), (self.mlp_out, "mlp_out_title", {}),
                                    (self.final_strip, "final_title", {})):
            strip.title = self._says(key, **numbers)

    def _draw_details(self, L: int, H: int) -> None:
        """The parts of block L, head H that only some designs have, each shown for the model that has it:
        RoPE, grouped heads, a gated MLP, experts."""
        t, arch = self.trace, self._arch()
        rotary, grouped, gated, experts = (False,) * 4 if arch is None else (
            arch.rotary, arch.grouped, arch.mlp == "gated", arch.experts)
        for widget in (self.rope_text, self.rot_q, self.rot_k, self.angles):
            widget.setHidden(not rotary)
        self.gqa_text.setHidden(not grouped)
        self.gate_text.setHidden(not (gated or experts))
        for widget in (self.router, self.experts_text):
            widget.setHidden(not experts)
        if arch is None:
            return
        dh, kv = t.q.shape[-1], t.kv_of(H)
        if rotary:
            angles = t.angles
            half = len(angles)
            self.rope_text.setText(
                f"<b>RoPE</b>: the model turns each pair of dimensions (i, i + {half}) of the query and the key by "
                f"position × its frequency ({2 * half} of the {dh} dimensions, frequencies from base {arch.rope_base:,.0f}): "
                f"at position {t.position} pair 0 turns {float(angles[0]):.2f} rad, pair {half - 1} only "
                f"{float(angles[-1]):.4f}. The lengths stay the same. A key at position j was turned by j × the same "
                f"frequencies, so RoPE(q) · RoPE(k) depends on the angle between them, (position − j) × frequency: "
                f"the score depends on how far apart the two tokens are, not on where they are." + self._says("qk_norm")
            )
            self.rot_q.show_vector(t.rot_q[L, H], f"q turned by position {t.position}; length {_norm(t.q[L, H]):.2f} before")
            self.rot_k.show_vector(t.rot_k[L, kv], f"key/value head {kv}; the KV cache keeps this rotated key")
            turned = np.mod(angles, 2 * np.pi)
            self.angles.show_values(turned, [str(i) for i in range(len(turned))],
                                    f"radians (modulo a full turn, 2π) each pair is turned at position {t.position}", th.BLUE)
            _one_line_ticks(self.angles, [str(i) for i in range(len(turned))])
        if grouped:
            heads, kvs = t.n_head, t.kv_heads
            runs = "; ".join(f"kv head {j}: query heads {', '.join(str(h) for h in np.flatnonzero(t.kv_head == j))}" for j in range(kvs))
            self.gqa_text.setText(
                f"<b>Grouped heads</b>: {heads} query heads share {kvs} key/value heads ({heads // kvs} each): {runs}. "
                f"Head {H} reads kv head {kv}. The KV cache stores {kvs} keys and values per layer, not {heads}: "
                f"{heads / kvs:.0f}× smaller."
            )
        if gated:
            act = self._says("mlp_activation")
            units, values = t.top_units(L, TOP_UNITS)
            self.gate_text.setText(
                f"<b>Gated MLP</b>: two projections of the same input, gate and up ({arch.d_model} → {arch.d_mlp} each); "
                f"{act}(gate) × up, then the down projection ({arch.d_mlp} → {arch.d_model}). Strongest units: " + ", ".join(
                    f"unit {int(u):,} = {act}({float(t.mlp_pre[L, u]):+.2f}) × {float(t.mlp_pre_linear[L, u]):+.2f} = {float(v):+.2f}"
                    for u, v in zip(units, values)))
        if not experts:
            return
        probs = t.router_probs[L]
        chosen = t.experts[L]
        self.gate_text.setText(f"<b>Mixture of experts</b>: block {L} has {len(probs)} experts (each a gated MLP); "
                               f"a router picks {len(chosen)} of them for this token.")
        self.router.show_values(probs, [f"e{i}" for i in range(len(probs))],
                                "softmax of the router's logits over every expert; the chosen experts in orange", th.BLUE)
        self.router.mark(chosen, th.ORANGE)
        _one_line_ticks(self.router, [f"e{i}" + ("*" if i in set(int(e) for e in chosen) else "") for i in range(len(probs))])
        picks = ", ".join(f"expert {int(e)} × {float(w):.3f}" for e, w in zip(chosen, t.expert_weights[L]))
        self.experts_text.setText(
            f"Chosen for this token (marked *): {picks} (their outputs, times these weights, are added). {t.router_rule} "
            f"Parameters active for this token: {t.active_params:,} of {t.n_params:,} "
            f"({t.active_params / t.n_params:.0%}): the other experts' weights sat idle."
        )

    def _draw_stream(self) -> None:
        t = self.trace
        layers = np.arange(t.n_layer)
        attn = np.linalg.norm(t.attn_out, axis=-1)
        mlp = np.linalg.norm(t.mlp_out, axis=-1)
        resid = np.linalg.norm(t.resid, axis=-1)
        self.attn_norm_bars.setOpts(x=layers - 0.2, height=attn, width=0.38)
        self.mlp_norm_bars.setOpts(x=layers + 0.2, height=mlp, width=0.38)
        self.resid_line.setData(np.arange(t.n_layer + 1) - 0.5, resid)
        r = t.resid.astype(np.float64)
        cos = (r[:-1] * r[1:]).sum(-1) / np.maximum(np.linalg.norm(r[:-1], axis=-1) * np.linalg.norm(r[1:], axis=-1), 1e-12)
        turn = np.degrees(np.arccos(np.clip(cos, -1, 1)))
        plot = self.stream_view.getPlotItem()
        plot.getAxis("bottom").setTicks([[(int(i), f"block {i}") for i in layers]])
        top = float(max(resid.max(), attn.max(), mlp.max()))
        plot.setRange(xRange=(-0.8, t.n_layer - 0.2), yRange=(0, top * 1.45), padding=0)  # room for the legend
        self.stream_text.setText(
            "Bars: how long a vector each block's attention (blue) and MLP (orange) adds; line: the residual stream's "
            "length before block 0 and after each block. Direction: the stream turns by "
            + ", ".join(f"{a:.0f}°" for a in turn) + " through blocks 0 to " + f"{t.n_layer - 1}."
        )

    def _draw_lens(self) -> None:
        t = self.trace
        depths = ["embeddings (before block 0)"] + [f"after block {i}" for i in range(t.n_layer)]
        self.lens_table.setRowCount(len(depths))
        self.lens_table.setColumnCount(LENS_SHOWN + 2)
        self.lens_table.setHorizontalHeaderLabels(
            ["depth"] + [f"#{i + 1} (logit)" for i in range(LENS_SHOWN)] + [f"“{clip(self._piece(t.next_id), 12)}”: model p, rank"]
        )
        for row, name in enumerate(depths):
            self.lens_table.setItem(row, 0, QTableWidgetItem(name))
            for col in range(LENS_SHOWN):
                i = int(t.lens_ids[row, col])
                self.lens_table.setItem(row, col + 1, QTableWidgetItem(f"{clip(self._piece(i), 12)} ({float(t.lens_logits[row, col]):.2f})"))
            self.lens_table.setItem(
                row, LENS_SHOWN + 1,
                QTableWidgetItem(f"{percent(float(t.lens_next_prob[row]))}, {int(t.lens_next_rank[row]):,}"),
            )  # fmt: skip
        _fit_rows(self.lens_table)
        decided = next((row for row in range(len(depths)) if int(t.lens_next_rank[row]) == 1), None)
        where = "never ranks first" if decided is None else f"ranks first from “{depths[decided]}” on"
        self.lens_text.setText(self._says("lens", next=self._piece(t.next_id), where=where, ms=t.lens_ms))

    def _draw_head(self) -> None:
        t = self.trace
        self.final_strip.show_vector(t.final_hidden, self._says("final_note", scale=float(t.ln_final_scale)))
        lines = [self._says("logit_line", piece=f"“{escape(self._piece(int(i)), quote=False)}”", id=int(i), logit=float(logit))
                 for i, logit in zip(t.lens_ids[-1][:LENS_SHOWN], t.lens_logits[-1][:LENS_SHOWN])]
        self.head_text.setText(
            f"Logits: {self._says('lm_head')}. The highest:<br>" + "<br>".join(lines)
            + f"<br><b>softmax</b> turns the {self._vocab():,} logits into probabilities that add up to 1 "
            f"(p = e<sup>logit</sup> / Σ e<sup>logit</sup>): the token that came next had <b>model probability "
            f"{percent(float(t.lens_next_prob[-1]))}</b>, before any sampling setting{self._sampling_prob(t)}."
        )

    def _sampling_prob(self, t) -> str:
        """The chosen token's sampling probability, when the step shown is the one on screen elsewhere."""
        result = self.state.result
        shown = result.trace if result is not None else None
        if shown is None or shown.step != t.step or shown.chosen != t.next_id:
            return " (the sampling settings make the sampling probability: Sampling view)"
        return f"; its sampling probability, after the settings, was {percent(shown.sampling_prob)}"

    def _draw_sizes(self) -> None:
        t = self.trace
        groups: dict[str, tuple[int, list[str]]] = {}
        for part in t.params:
            key = f"{part.part.split(' ', 2)[2]}, all {t.n_layer} blocks" if part.part.startswith("block ") else part.part
            count, shapes = groups.get(key, (0, []))
            shape = " × ".join(f"{n:,}" for n in part.shape)
            if shape not in shapes and len(shapes) < 4:
                shapes.append(shape)
            groups[key] = (count + part.count, shapes)
        self.size_table.setRowCount(len(groups))
        self.size_table.setColumnCount(3)
        self.size_table.setHorizontalHeaderLabels(["part", "matrices and biases (shapes, one block)", "parameters"])
        for row, (name, (count, shapes)) in enumerate(groups.items()):
            self.size_table.setItem(row, 0, QTableWidgetItem(name))
            self.size_table.setItem(row, 1, QTableWidgetItem(", ".join(shapes)))
            item = QTableWidgetItem(f"{count:,}")
            item.setTextAlignment(Qt.AlignRight | Qt.AlignVCenter)
            self.size_table.setItem(row, 2, item)
        _fit_rows(self.size_table)
        self.size_text.setText(self._says("parameters", n_params=t.n_params, active_params=t.active_params,
                                          active_now=t.active_params / t.n_params if t.n_params else 1.0))

    # ------------------------------------------------------------ helpers
    def _boxes_hidden(self, hidden: bool) -> None:
        for box in (self.embed_box, self.block_box, self.stream_box, self.lens_box, self.head_box, self.size_box):
            box.setHidden(hidden)

    def _piece(self, token_id: int) -> str:
        return self.pieces.get(int(token_id), f"id {int(token_id)}")

    def _context_piece(self, position: int) -> str:
        result = self.state.result
        if result is not None and result.trace is not None and position < len(result.trace.pieces):
            return result.trace.pieces[position]
        return str(position)

    def _vocab(self) -> int:
        result = self.state.result
        return int(result.info.vocab_size) if result is not None else 0

    def _n_ctx(self) -> int:
        result = self.state.result
        return int(result.info.n_positions) if result is not None else 0


def _one_line_ticks(bars: PositionBars, labels: list[str]) -> None:
    """Label the bars with ``labels`` alone (PositionBars writes a token over its position: two lines)."""
    step = max(1, len(labels) // 32)
    bars.plot.getAxis("bottom").setTicks([[(i, labels[i]) for i in range(0, len(labels), step)]])


def _table() -> QTableWidget:
    """A read-only table whose columns fit their text."""
    table = QTableWidget()
    table.setEditTriggers(QTableWidget.NoEditTriggers)
    table.verticalHeader().setVisible(False)
    table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeToContents)
    return table


def _fit_rows(table: QTableWidget) -> None:
    """Make ``table`` exactly as tall as its rows: the view scrolls, not the table."""
    table.resizeRowsToContents()
    rows = sum(table.rowHeight(r) for r in range(table.rowCount()))
    table.setFixedHeight(table.horizontalHeader().height() + rows + 4)


def _label(text: str = "") -> QLabel:
    label = QLabel(text)
    label.setWordWrap(True)
    return label


def _stack(box: QGroupBox, widgets: list[QWidget]) -> None:
    layout = QVBoxLayout(box)
    layout.setSpacing(4)
    for widget in widgets:
        layout.addWidget(widget)


def _heatmap(title: str) -> tuple[pg.PlotWidget, pg.ImageItem, QLabel]:
    view, image = heatmap_view()
    view.setFixedHeight(160)
    view.getPlotItem().setLabel("left", "position")
    view.getPlotItem().setLabel("bottom", "dimension")
    return view, image, _label(title)


def _show_heat(image: pg.ImageItem, view: pg.PlotWidget, values: np.ndarray) -> None:
    show_heat(image, values)
    view.getPlotItem().setRange(xRange=(0, values.shape[1]), yRange=(0, values.shape[0]), padding=0)


