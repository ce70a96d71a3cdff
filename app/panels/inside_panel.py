"""Inside the model: the whole path from one token to the next token, with the model's own numbers.

For one position (the selected token chip, else the newest) of the step on screen, in the order the
model computes, one part a module: (1) the token and position embeddings and their sum
(``inside_embedding``); (2) one block's attention, the layer and head chosen in the attention panel:
the norm, the query, RoPE where the model turns q and k, the keys, the scaled scores, the causal mask,
softmax, the weighted values, W_O and the residual add (``inside_attention``); (3) the second norm and
the MLP, or the router and its chosen experts, and the second residual add (``inside_mlp``); (4) the
final norm, the LM head and softmax and (6) every matrix's shape and the parameter counts
(``inside_head``); (5) the logit lens and the residual stream through every block (``inside_lens``).
In projector mode, and whenever the one long page would scroll more than two screens, the parts are
pages with Back and Next (``inside_pages``), each holding as many consecutive parts as fit the screen
(RoPE's part only for a model that turns q and k). Every sentence is chosen by the model's facts
(``engine.architecture``, ``app.logic.model_words``), never by its family's name.

Nothing here is computed from weights in this process: the engine recomputes the path for the
position asked (``controller.inspect``, answered by an ``engine.inside_trace.InsideTrace``) and this
panel draws it. Vectors are colour strips (blue negative, white 0, yellow positive: a colour-blind-
safe diverging map), each captioned with its shape and its length (L2 norm).
"""

from __future__ import annotations

import pyqtgraph as pg
from PySide6.QtCore import QTimer, Signal
from PySide6.QtWidgets import QHBoxLayout, QLabel, QSpinBox, QVBoxLayout, QWidget

from app.protocol import messages as p
from app.window import theme as th
from app.window.guard import guarded
from app.logic.help import words
from app.logic.inside_paging import needs_pages
from app.logic.wording import percent
from app.logic.state import AppState
from app.panels.inside_attention import AttentionPart
from app.panels.inside_embedding import EmbeddingPart
from app.panels.inside_head import HeadPart, SizesPart
from app.panels.inside_lens import LensPart
from app.panels.inside_mlp import MlpPart
from app.panels.inside_pages import InsidePages
from app.panels.inside_plots import CaptionedPlot

BUSY_AFTER_MS = 500  # show "computing…" when an answer takes longer than this
PAGES = ("page_embedding", "page_norm", "page_rope", "page_keys", "page_scores", "page_values", "page_output", "page_mlp",
         "page_mlp_out", "page_head", "page_lens", "page_stream", "page_sizes")  # the parts' names, in the order the model
# computes (resources/help/en.json, "inside"); an empty name: no page for that model (RoPE's without RoPE)


class InsidePanel(QWidget):
    """The six parts of the path for one position of one step (see the module docstring)."""

    inspectRequested = Signal(int, int, int)  # step, position, layer: the window asks the engine
    pagedChanged = Signal(bool)  # the parts became pages (True) or one long page again

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
        self.pages = InsidePages()
        self.pages.pagedChanged.connect(self.pagedChanged)
        self._built = False  # the parts are built the first time the view is shown (half a window's build)
        self._paging_later = QTimer(self, singleShot=True, interval=0)  # pages or not, once a layout pass is done
        self._paging_later.timeout.connect(self._choose_paging)
        top = QHBoxLayout()
        top.addWidget(self.header, 1)
        top.addWidget(self.busy)
        top.addWidget(QLabel("step"))
        top.addWidget(self.step_spin)
        layout = QVBoxLayout(self)
        layout.addLayout(top)
        layout.addWidget(self.pages, 1)

        state.subscribe(self._on_state_result)
        state.layerChanged.connect(self._on_state_selection)
        state.headChanged.connect(self._on_state_selection)
        state.positionChanged.connect(self._on_state_selection)
        state.subscribe_theme(self._on_state_theme)

    def _build(self) -> None:
        """Build the parts (once, when the view is first shown: a window that never opens it does not pay for them)."""
        if self._built:
            return
        self._built = True
        self.embedding = EmbeddingPart()
        self.attention = AttentionPart()
        self.mlp = MlpPart()
        self.head = HeadPart()
        self.lens = LensPart()
        self.sizes = SizesPart()
        boxes = (self.embedding.box, *self.attention.boxes, *self.mlp.boxes, self.head.box, self.lens.box, self.lens.stream_box,
                 self.sizes.box)
        for box in boxes:  # in the order the model computes; the lens table scrolls itself on its page
            self.pages.add(box, box.title().split(" · ", 1)[-1], fills=box is self.lens.box)
        self.pages.set_blank(True)
        self._on_state_theme(self.state.theme)

    @property
    def paged(self) -> bool:
        """True while the parts are pages (projector mode, or a long page)."""
        return self.pages.paged

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
                self.pages.set_blank(True)
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
        self.pages.restyle(theme)
        if self._built:
            self.attention.restyle(theme)
            self.lens.restyle(theme)
            self._paging_later.start()


    @guarded
    def resizeEvent(self, event) -> None:  # noqa: N802 - Qt's name
        super().resizeEvent(event)
        self._paging_later.start()  # a smaller window may need pages, a larger one not

    def _choose_paging(self) -> None:
        """Pages in projector mode or when the long page would scroll more than two screens, grouped
        for the parts' heights and the room there is now."""
        if not self._built:
            return
        paged = needs_pages(th.is_projector(self.state.theme), self.pages.content_height(), self.pages.screen_height())
        self.lens.set_paged(paged)
        self.pages.set_paged(paged)

    # ------------------------------------------------------------ drawing
    def show_inside(self, trace, pieces: dict[int, str]) -> None:
        """Draw ``trace`` (an InsideTrace); ``pieces`` gives the readable text of the ids it names."""
        self._build()
        self._busy_timer.stop()
        self.busy.setText("")
        self.trace, self.pieces = trace, dict(pieces)
        self._shown = (trace.step, trace.position, trace.kv_layers[0] if trace.kv_layers else -1)
        t = trace
        self.header.setText(
            f"Inside the model at position {t.position} (token “{self._piece(t.token_id)}”, id {t.token_id:,}) of step {t.step}; "
            f"it predicts the next token, here “{self._piece(t.next_id)}”. Recomputed in {t.compute_ms:.0f} ms."
        )
        self.embedding.draw(t, self._says)
        self._draw_block()
        self.head.draw(t, self._says, self._piece, self._vocab(), self._sampling_prob(t))
        self.lens.draw(t, self._says, self._piece)
        self.sizes.draw(t, self._says)
        self.pages.set_blank(False)
        self._name_pages()
        self._paging_later.start()

    def _arch(self):
        """The facts of the model on screen (engine.architecture.Architecture; None: not known)."""
        result = self.state.result
        return result.info.architecture if result is not None else None

    def _says(self, key: str, **numbers) -> str:
        """The Inside sentence ``key`` for the model on screen (resources/help/en.json, "inside")."""
        return words("inside", key, self._arch(), numbers)

    def _layer_head(self) -> tuple[int, int]:
        t = self.trace
        return min(self.state.layer, t.n_layer - 1), min(self.state.head, t.n_head - 1)

    def _draw_block(self) -> None:
        L, H = self._layer_head()
        has_kv = self.attention.draw(self.trace, L, H, self._says, self._context_piece)
        self.mlp.draw(self.trace, L, self._says)
        self._name_pages()
        self._paging_later.start()  # another block's texts: other heights, perhaps other pages
        if not has_kv:
            self.refresh()

    def _name_pages(self) -> None:
        """The pages' names on the page bar, for the block and head shown."""
        L, H = self._layer_head()
        self.pages.set_names([self._says(key, layer=L, head=H, last=self.trace.n_layer - 1) for key in PAGES])

    def _sampling_prob(self, t) -> str:
        """The chosen token's sampling probability, when the step shown is the one on screen elsewhere."""
        result = self.state.result
        shown = result.trace if result is not None else None
        if shown is None or shown.step != t.step or shown.chosen != t.next_id:
            return " (the sampling settings make the sampling probability: Sampling view)"
        return f"; its sampling probability, after the settings, was {percent(shown.sampling_prob)}"

    # ------------------------------------------------------------ helpers
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
