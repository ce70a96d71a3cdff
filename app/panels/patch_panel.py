"""The Why view's second page: what if the prompt were different? Activation patching of a pair.

A second prompt (prefilled with the first, nothing changed) is typed beside the first; when the two
have as many tokens (a Tokenize request says so before anything runs), Run asks the engine for the
resid_pre patching map of the step on screen (``controller.patch``: ``engine.patching``, one batch
per layer, told layer by layer and cancellable). The map: layers down, positions across, both
prompts' tokens on the axes, a colour bar; under it a caption saying what a cell is; beside it both
prompts' most likely next tokens. Words come from ``app.logic.why_numbers``.
"""

from __future__ import annotations

from typing import Callable

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (QGridLayout, QHBoxLayout, QLabel, QLineEdit, QProgressBar, QPushButton, QSizePolicy,
                               QVBoxLayout, QWidget)

from engine.tokens import clip

from app.logic import why_numbers as wn
from app.logic.state import AppState
from app.panels.heatmap import DIVERGING, tick_every
from app.window import theme as th

TITLE = "What if: a second prompt (activation patching)"
INTRO = ("Type a second prompt with as many tokens as the first (France → Germany) and press Run. For every "
         "block and position, the second prompt runs once more with that block's input at that position taken "
         "from the first prompt; the map shows how much of the two prompts' difference in the logit chosen above "
         "(Why … rather than …) that one place brings back. This measures what a place causes through the later layers, which direct "
         "attribution (the first page) does not.")


class PatchPage(QWidget):
    """The second prompt, Run and Cancel, the patching map and both prompts' candidates.

    ``target_of()`` says (step, target, versus) of the step on screen, as the first page's boxes chose
    them (None before a step); Run sends them with the second prompt (``patchRequested``)."""

    patchRequested = Signal(str, int, int, int)  # second prompt, step, target, versus (-1: none)
    tokenizeRequested = Signal(str)  # the second prompt, to count its tokens
    cancelRequested = Signal()

    def __init__(self, state: AppState, target_of: Callable[[], tuple[int, int, int] | None], parent: QWidget | None = None):
        super().__init__(parent)
        self.state, self.target_of = state, target_of
        self.intro = QLabel(INTRO)
        self.intro.setWordWrap(True)
        self.editor = QLineEdit()
        self.editor.setToolTip("The second prompt: the first with a word changed. Both are followed by the tokens "
                               "chosen so far, so both end where the step on screen reads.")
        self.editor.textEdited.connect(self._on_editor_edited)
        self.editor.returnPressed.connect(self.run)
        self.run_button = QPushButton("Run")
        self.run_button.setToolTip("Patch every block's input at every position of the second prompt with the first's")
        self.run_button.clicked.connect(self.run)
        self.count_label = QLabel()
        self.count_label.setWordWrap(True)
        row = QHBoxLayout()
        row.addWidget(QLabel("Second prompt:"))
        row.addWidget(self.editor, 1)
        row.addWidget(self.run_button)
        self.progress = QProgressBar()
        self.progress.setFormat("layer %v of %m")
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.clicked.connect(self._on_cancel_clicked)
        self.status = QLabel()
        self.status.setWordWrap(True)
        running = QHBoxLayout()
        running.addWidget(self.progress, 1)
        running.addWidget(self.cancel_button)
        # the map: layers down, positions across
        self.view = th.plot_widget()
        self.plot = th.fix_plot(self.view.getPlotItem())
        self.plot.invertY(True)
        self.plot.showAxis("top")
        self.image = pg.ImageItem()
        self.image.setColorMap(pg.colormap.get(DIVERGING))
        self.plot.addItem(self.image)
        self.bar = pg.ColorBarItem(values=(-1, 1), colorMap=pg.colormap.get(DIVERGING), interactive=False, width=14)
        self.bar.setImageItem(self.image, insert_in=self.plot)
        self.caption = QLabel()
        self.caption.setWordWrap(True)
        self.caption.setTextFormat(Qt.RichText)
        # both prompts' candidates, side by side
        self.first_title, self.second_title = QLabel("<b>First prompt</b> next:"), QLabel("<b>Second prompt</b> next:")
        self.first_list, self.second_list = QLabel(), QLabel()
        for label in (self.first_list, self.second_list):
            label.setTextFormat(Qt.RichText)
            label.setAlignment(Qt.AlignTop | Qt.AlignLeft)
        lists = QGridLayout()
        lists.addWidget(self.first_title, 0, 0)
        lists.addWidget(self.second_title, 0, 1)
        lists.addWidget(self.first_list, 1, 0)
        lists.addWidget(self.second_list, 1, 1)
        lists.setRowStretch(2, 1)
        self.lists_note = QLabel("model probability: the softmax of the logits")
        self.lists_note.setWordWrap(True)
        lists.addWidget(self.lists_note, 3, 0, 1, 2)
        side = QWidget()
        side.setLayout(lists)
        side.setSizePolicy(QSizePolicy.Maximum, QSizePolicy.Preferred)
        body = QHBoxLayout()
        body.addWidget(self.view, 1)
        body.addWidget(side)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.intro)
        layout.addLayout(row)
        layout.addWidget(self.count_label)
        layout.addLayout(running)
        layout.addWidget(self.status)
        layout.addLayout(body, 1)
        layout.addWidget(self.caption)
        self.answer: object = None  # the map shown
        self._asked: tuple[str, int, int, int] | None = None  # the Patch sent and not yet answered
        self._prefilled = ""  # the first prompt's text the editor was filled with
        self._tokens: object = None  # the newest count of the second prompt
        self._show_running(False)
        self._show_empty()
        state.subscribe(self._on_state_result)
        state.subscribe_theme(self._on_state_theme)
        self._on_state_theme(state.theme)

    # ------------------------------------------------------------ asking
    def set_second_prompt(self, text: str) -> None:
        """Put ``text`` in the editor and count its tokens (as typing it does)."""
        self.editor.setText(text)
        self._on_editor_edited(text)

    def run(self) -> None:
        """Send the pair (the engine refuses two prompts of different lengths, with both counts)."""
        where = self.target_of()
        text = self.editor.text()
        if where is None or not text.strip():
            self.status.setText("Step once first: patching explains a step's chosen token." if where is None
                                else "Type the second prompt first.")
            return
        self._asked = (text, *where)
        self.status.setText("")
        self.progress.setRange(0, max(1, self.state.result.n_layer))
        self.progress.setValue(0)
        self._show_running(True)
        self.patchRequested.emit(text, *where)

    def awaiting(self) -> bool:
        """A pair was sent and its map (or its refusal) has not come back."""
        return self._asked is not None

    def wants(self, answer) -> bool:
        return self._asked is not None and (answer.text, answer.step, answer.target) == self._asked[:3]

    def _on_editor_edited(self, text: str) -> None:
        self._show_count()
        if text.strip():
            self.tokenizeRequested.emit(text)

    def _on_cancel_clicked(self) -> None:
        self.cancel_button.setEnabled(False)
        self.status.setText("Cancelling after the layer that runs…")
        self.cancelRequested.emit()

    # ------------------------------------------------------------ answers
    def show_tokens(self, answer) -> None:
        """The second prompt's count came back (used only while the editor still holds that text)."""
        if answer.text == self.editor.text():
            self._tokens = answer
            self._show_count()

    def show_progress(self, done: int, total: int) -> None:
        if self._asked is None:
            return
        self._show_running(True)
        self.progress.setRange(0, total)
        self.progress.setValue(done)

    def show_failed(self, message: str) -> None:
        """The Patch sent was refused or cancelled: ``message`` says why (the window's words)."""
        self._asked = None
        self._show_running(False)
        self.status.setText(message)

    def show_patch(self, answer) -> None:
        """Draw ``answer`` (the map this page asked for)."""
        self._asked = None
        self._show_running(False)
        self.answer = answer
        self.status.setText("")
        self._draw()

    # ------------------------------------------------------------ drawing
    def _show_running(self, running: bool) -> None:
        self.progress.setVisible(running)
        self.cancel_button.setVisible(running)
        self.cancel_button.setEnabled(True)
        self._sync_run()

    def _sync_run(self) -> None:
        result = self.state.result
        known = self._tokens is not None and self._tokens.text == self.editor.text()
        same = known and result is not None and len(self._tokens.ids) == len(result.prompt_ids)
        self.run_button.setEnabled(bool(same and result.trace is not None and self._asked is None))

    def _show_count(self) -> None:
        result, tokens = self.state.result, self._tokens
        if result is None or tokens is None or tokens.text != self.editor.text():
            self.count_label.setText("Counting the second prompt's tokens…" if self.editor.text().strip() else "")
        else:
            self.count_label.setText(wn.pair_count(result.prompt_pieces, tokens.pieces, self._chosen_so_far()))
        self._sync_run()

    def _chosen_so_far(self) -> int:
        result = self.state.result
        return 0 if result is None or result.trace is None else result.trace.record.end - len(result.prompt_ids)

    def _show_empty(self) -> None:
        self.image.clear()
        for name in ("bottom", "top", "left"):
            self.plot.getAxis(name).setTicks([[]])
        self.caption.setText("Each cell will be the share of the two prompts' difference in the target's logit "
                             "restored when block L's input at position i is taken from the first prompt.")
        self.first_list.setText("")
        self.second_list.setText("")

    def _on_state_result(self, result) -> None:
        text = result.prompt_text
        if text != self._prefilled and self.editor.text() in ("", self._prefilled):  # untouched: follow the first prompt
            self.editor.setText(text)
            self._on_editor_edited(text)
        self._prefilled = text
        shown = self.answer
        if result.trace is None or (shown is not None and tuple(result.prompt_pieces) != shown.first_pieces[: len(result.prompt_pieces)]):
            self.answer = None  # another prompt: the map was of the old one
            self._show_empty()
        self._show_count()

    def _draw(self) -> None:
        a, theme = self.answer, self.state.theme
        restored = np.asarray(a.restored, np.float32)
        L, P = restored.shape
        shown = np.nan_to_num(restored, nan=0.0)
        scale = max(1.0, float(np.abs(shown).max(initial=0.0)))
        self.image.setImage(shown, autoLevels=False, levels=(-scale, scale))
        self.bar.setLevels((-scale, scale))
        self.image.setRect(0, 0, P, L)
        self.plot.setRange(xRange=(0, P), yRange=(0, L), padding=0)
        every = tick_every(P, self.view.width() - 6 * theme.text_px(), theme.text_px(-1) * 5)
        for name, pieces in (("bottom", a.first_pieces), ("top", a.second_pieces)):
            self.plot.getAxis(name).setTicks([[(i + 0.5, clip(pieces[i], 8)) for i in range(P) if i % every == 0 or i == P - 1]])
        rows = tick_every(L, self.view.height() - 4 * theme.text_px(), int(theme.text_px(-1) * 1.4))
        self.plot.getAxis("left").setTicks([[(layer + 0.5, str(layer)) for layer in range(0, L, rows)]])
        th.style_plot(self.plot, theme, left="block L", bottom="position i: the first prompt's tokens")
        self.plot.setLabel("top", "the second prompt's tokens", **{"color": theme.text, "font-size": theme.css_size()})
        self.caption.setText(wn.patch_caption(a))
        self.caption.setToolTip(wn.patch_formula(a))
        self.first_list.setText(wn.candidates_html(a.first_top))
        self.second_list.setText(wn.candidates_html(a.second_top))

    def _on_state_theme(self, theme: th.Theme) -> None:
        self.setFont(theme.font())
        self.view.setMinimumHeight(8 * theme.text_px())
        th.style_plot(self.plot, theme)
        self.bar.axis.setTickFont(theme.font(-1))
        self.bar.axis.setTextPen(pg.mkPen(theme.text))
        if self.answer is not None:
            self._draw()
