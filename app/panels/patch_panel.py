"""The Why view's second page: what if the prompt were different? A prompt pair, and activation patching.

A second prompt (prefilled with the first, nothing changed) is typed beside the first. Once it
differs, the pair is set: for the step on screen (and each step after, while the page is on screen)
the engine runs the second prompt followed by the first prompt's chosen tokens, so the two texts stay
aligned (``controller.compare``), and answers both runs' most likely next tokens and their direct
attributions of the target chosen above; the page shows the candidates side by side and each block's
attention and MLP difference, the largest named. When the two prompts have as many tokens (a Tokenize
request says so before anything runs), Run asks for the patching map of the step on screen at the
place chosen (the block's input, its attention output or its MLP output: ``controller.patch``,
``engine.patching``, one batch per layer, told layer by layer and cancellable). The map: layers down,
positions across, both prompts' tokens on the axes, a colour bar; under it a caption saying what a
cell is. Words come from ``app.logic.why_numbers``.
"""

from __future__ import annotations

from html import escape
from typing import Callable

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtWidgets import (QComboBox, QGridLayout, QHBoxLayout, QLabel, QLineEdit, QProgressBar, QPushButton,
                               QSizePolicy, QVBoxLayout, QWidget)

from engine.tokens import clip

from app.logic import why_numbers as wn
from app.logic.state import AppState
from app.panels.heatmap import DIVERGING, tick_every
from app.window import theme as th
from app.window.guard import guarded

TITLE = "What if: a second prompt (activation patching)"
INTRO = ("Type a second prompt (France → Germany): it steps with the first, followed by the same chosen tokens, and "
         "both are split below. With as many tokens in each, Run patches one place at a time: the second prompt runs "
         "again with that block's input, attention output or MLP output at one position taken from the first, and "
         "the map shows how much of the difference in the logit chosen above that place brings back. That measures "
         "what a place causes through the later layers, which direct attribution does not.")
SHORT_INTRO = ("Change a word: the second prompt steps with the first (the same chosen tokens follow it). Run patches "
               "one place at a time.")
ATTN, MLP = th.BLUE, th.VERMILION
LISTED = 6  # each prompt's most likely next tokens listed  # the difference bars: each block's attention, each block's MLP


class PatchPage(QWidget):
    """The second prompt, Run and Cancel, the patching map and both prompts' candidates.

    ``target_of()`` says (step, target, versus) of the step on screen, as the first page's boxes chose
    them (None before a step); Run sends them with the second prompt (``patchRequested``)."""

    patchRequested = Signal(str, int, int, int, str)  # second prompt, step, target, versus (-1: none), site
    compareRequested = Signal(str, int, int, int)  # second prompt, step, target, versus (-1: none)
    tokenizeRequested = Signal(str)  # the second prompt, to count its tokens
    cancelRequested = Signal()

    def __init__(self, state: AppState, target_of: Callable[[], tuple[int, int, int] | None], parent: QWidget | None = None):
        super().__init__(parent)
        self.state, self.target_of = state, target_of
        self.intro = QLabel(SHORT_INTRO)  # one line: the page's plots need the height (the whole text: its tooltip)
        self.intro.setWordWrap(True)
        self.intro.setToolTip(INTRO)
        self.editor = QLineEdit()
        self.editor.setToolTip("The second prompt: the first with a word changed. Both are followed by the tokens "
                               "chosen so far, so both end where the step on screen reads.")
        self.editor.textEdited.connect(self._on_editor_edited)
        self.editor.returnPressed.connect(self.run)
        self.site_box = QComboBox()
        for site, (words, _, helper) in wn.SITE_WORDS.items():
            self.site_box.addItem(words, site)
            self.site_box.setItemData(self.site_box.count() - 1, f"blocks.L.hook_{site} (TransformerLens's {helper})",
                                      Qt.ToolTipRole)
        self.site_box.setToolTip("What Run patches at each block and position: the block's input (the residual stream), "
                                 "what its attention adds, or what its MLP adds")
        self.run_button = QPushButton("Run")
        self.run_button.setToolTip("Patch the place chosen at every block and position of the second prompt with the first's")
        self.run_button.clicked.connect(self.run)
        self.count_label = QLabel()
        self.count_label.setWordWrap(True)
        row = QHBoxLayout()
        row.addWidget(QLabel("Second prompt:"))
        row.addWidget(self.editor, 1)
        row.addWidget(QLabel("Patch:"))
        row.addWidget(self.site_box)
        row.addWidget(self.run_button)
        self.progress = QProgressBar()
        self.progress.setFormat("layer %v of %m")
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.clicked.connect(self._on_cancel_clicked)
        self.status = QLabel()
        self.status.setWordWrap(True)
        self.status.hide()
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
        for label in (self.first_title, self.second_title, self.first_list, self.second_list):
            label.setToolTip("Each prompt's most likely next tokens, followed by the same chosen tokens; model "
                             "probability: the softmax of the logits")
        side = QWidget()
        side.setLayout(lists)
        side.setSizePolicy(QSizePolicy.Maximum, QSizePolicy.Preferred)
        # each block's attention and MLP part, first prompt minus second (direct attribution): rows are the map's blocks
        self.diff_view = th.plot_widget()
        self.diff_plot = th.fix_plot(self.diff_view.getPlotItem())
        self.diff_plot.invertY(True)
        self.diff_plot.showAxis("top")
        self.diff_plot.getAxis("top").setStyle(showValues=False)
        self.diff_bars = pg.BarGraphItem(x0=[], y=[], width=[], height=0.4)
        self.diff_plot.addItem(self.diff_bars)
        self.diff_plot.addItem(pg.InfiniteLine(0, angle=90, pen=pg.mkPen(th.NEUTRAL, width=1)))
        self.compare_caption = QLabel()
        self.compare_caption.setWordWrap(True)
        self.compare_caption.setTextFormat(Qt.RichText)
        self.compare_answer: object = None  # the pair's split shown
        self._compare_asked: tuple[str, int, int, int] | None = None
        body = QHBoxLayout()
        body.addWidget(self.view, 3)
        body.addWidget(self.diff_view, 2)
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
        layout.addWidget(self.compare_caption)
        self.answer: object = None  # the map shown
        self._asked: tuple[str, int, int, int] | None = None  # the Patch sent and not yet answered
        self._prefilled = ""  # the first prompt's text the editor was filled with
        self._tokens: object = None  # the newest count of the second prompt
        self._show_running(False)
        self._show_empty()
        self._show_compare_empty()
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
            self._say("Step once first: patching explains a step's chosen token." if where is None
                                else "Type the second prompt first.")
            return
        site = self.site_box.currentData()
        self._asked = (text, *where, site)
        self._say("")
        self.progress.setRange(0, max(1, self.state.result.n_layer))
        self.progress.setValue(0)
        self._show_running(True)
        self.patchRequested.emit(text, *where, site)

    def awaiting(self) -> bool:
        """A pair was sent and its map (or its refusal) or its split has not come back."""
        shown = self.compare_answer
        split = self._compare_asked is not None and (
            shown is None or (shown.text, shown.step, shown.target, shown.versus) != self._compare_asked)
        return self._asked is not None or split

    def wants(self, answer) -> bool:
        return self._asked is not None and (answer.text, answer.step, answer.target, answer.site) == (*self._asked[:3], self._asked[4])

    def pair_set(self) -> bool:
        """The second prompt differs from the first: the two step together."""
        result, text = self.state.result, self.editor.text()
        return result is not None and bool(text.strip()) and text != result.prompt_text

    def compare_wanted(self) -> tuple[str, int, int, int] | None:
        """(second prompt, step, target, versus) this page wants split for the step on screen, or None."""
        where = self.target_of()
        return None if where is None or not self.pair_set() else (self.editor.text(), *where)

    def refresh_compare(self) -> None:
        """Ask for the pair at the step on screen, if the page is on screen and has not asked yet."""
        wanted = self.compare_wanted()
        if wanted is None or not self.isVisible() or wanted == self._compare_asked:
            return
        self._compare_asked = wanted
        self.compareRequested.emit(*wanted)

    def wants_compare(self, answer) -> bool:
        return self._compare_asked is not None and (answer.text, answer.step, answer.target, answer.versus) == self._compare_asked

    def show_compare(self, answer) -> None:
        """Draw ``answer`` (the pair's split this page asked for): both candidate lists, the differences."""
        self.compare_answer = answer
        self._draw_compare()

    def show_compare_failed(self, message: str) -> None:
        """The Compare sent was refused: ``message`` says why (the window's words)."""
        self._compare_asked = None
        self.compare_caption.setText(escape(message))

    @guarded
    def showEvent(self, event) -> None:  # noqa: N802 - Qt's name
        super().showEvent(event)
        QTimer.singleShot(0, self.refresh_compare)

    def _on_editor_edited(self, text: str) -> None:
        self._show_count()
        if text.strip():
            self.tokenizeRequested.emit(text)

    def _say(self, text: str) -> None:
        """The line under the counts: shown only when it says something (the plots need the height)."""
        self.status.setText(text)
        self.status.setVisible(bool(text))

    def _on_cancel_clicked(self) -> None:
        self.cancel_button.setEnabled(False)
        self._say("Cancelling after the layer that runs…")
        self.cancelRequested.emit()

    # ------------------------------------------------------------ answers
    def show_tokens(self, answer) -> None:
        """The second prompt's count came back (used only while the editor still holds that text)."""
        if answer.text == self.editor.text():
            self._tokens = answer
            self._show_count()
            self.refresh_compare()

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
        self._say(message)

    def show_patch(self, answer) -> None:
        """Draw ``answer`` (the map this page asked for)."""
        self._asked = None
        self._show_running(False)
        self.answer = answer
        self._say("")
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
                             "restored when block L's input (or attention or MLP output) at position i is taken from "
                             "the first prompt.")
        if self.compare_answer is None:
            self.first_list.setText("")
            self.second_list.setText("")

    def _show_compare_empty(self) -> None:
        self.compare_answer = None
        self.diff_bars.setOpts(x0=[], y=[], width=[], height=0.4)
        for name in ("left", "bottom"):
            self.diff_plot.getAxis(name).setTicks(None)
        self.compare_caption.setText("Change a word in the second prompt: both prompts' next tokens and each block's "
                                     "difference in direct attribution are shown here, step by step.")
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
        pair = self.compare_answer
        if pair is not None and (result.trace is None or tuple(result.prompt_pieces) != pair.first_pieces[: len(result.prompt_pieces)]):
            self._show_compare_empty()  # another prompt: the split was of the old one
            self._compare_asked = None
        if result.trace is None:
            self._compare_asked = None
        self._show_count()  # the pair's split is asked by the Why view once its boxes hold the new step's target

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
        differ = {i for i in range(P) if a.first_pieces[i] != a.second_pieces[i]}
        named = [i for i in range(P) if i % every == 0 or i == P - 1 or i in differ]  # where the prompts differ: always
        for name, pieces in (("bottom", a.first_pieces), ("top", a.second_pieces)):
            self.plot.getAxis(name).setTicks([[(i + 0.5, clip(pieces[i], 8)) for i in named]])
        rows = tick_every(L, self.view.height() - 4 * theme.text_px(), int(theme.text_px(-1) * 1.4))
        self.plot.getAxis("left").setTicks([[(layer + 0.5, str(layer)) for layer in range(0, L, rows)]])
        th.style_plot(self.plot, theme, left="block L", bottom="position i: the first prompt's tokens")
        self.plot.setLabel("top", "the second prompt's tokens", **{"color": theme.text, "font-size": theme.css_size()})
        self.caption.setText(wn.patch_caption(a))
        if self.compare_answer is not None:
            self._draw_compare()  # its rows line up with the map's
        self.caption.setToolTip(wn.patch_formula(a))
        if self.compare_answer is None or self.compare_answer.step != a.step:
            self.first_list.setText(wn.candidates_html(a.first_top[:LISTED]))
            self.second_list.setText(wn.candidates_html(a.second_top[:LISTED]))

    def _draw_compare(self) -> None:
        c, theme = self.compare_answer, self.state.theme
        attn, mlp = wn.pair_difference(c.first, c.second)
        L = len(attn)
        values = np.concatenate([attn, mlp])
        y = np.concatenate([np.arange(L) + 0.3, np.arange(L) + 0.7])  # in block L's row: attention above, MLP below
        self.diff_bars.setOpts(x0=np.minimum(values, 0.0), y=y, width=np.abs(values), height=0.4,
                               brushes=[ATTN] * L + [MLP] * L, pen=pg.mkPen(None))
        reach = max(1e-6, float(np.abs(values).max(initial=0.0))) * 1.08
        self.diff_plot.setRange(xRange=(-reach, reach), yRange=(0, L), padding=0)
        rows = tick_every(L, self.diff_view.height() - 4 * theme.text_px(), int(theme.text_px(-1) * 1.4))
        self.diff_plot.getAxis("left").setTicks([[(layer + 0.5, str(layer)) for layer in range(0, L, rows)]])
        self.diff_plot.getAxis("bottom").setTicks(None)
        th.style_plot(self.diff_plot, theme, left="block L", bottom="first − second (logit)")
        self.diff_plot.setLabel("top", f"<span style='color:{ATTN}'>■</span> attention "
                                       f"<span style='color:{MLP}'>■</span> MLP",
                                **{"color": theme.text, "font-size": theme.css_size()})
        if self.answer is not None:  # the map's rows and these line up: the same room above and below
            self.diff_plot.getAxis("top").setHeight(self.plot.getAxis("top").height())
            self.diff_plot.getAxis("bottom").setHeight(self.plot.getAxis("bottom").height())
        self.compare_caption.setText(wn.compare_caption(c))
        self.compare_caption.setToolTip("Each block's direct attribution (what it writes straight into the logit through "
                                        "the final norm, that run's scale held fixed) after the first prompt, minus "
                                        "after the second. The parts' differences add up to the difference of the logits.")
        self.first_list.setText(wn.candidates_html(c.first_top[:LISTED]))
        self.second_list.setText(wn.candidates_html(c.second_top[:LISTED]))

    def _on_state_theme(self, theme: th.Theme) -> None:
        self.setFont(theme.font())
        self.view.setMinimumHeight(8 * theme.text_px())
        self.diff_view.setMinimumHeight(8 * theme.text_px())
        th.style_plot(self.plot, theme)
        th.style_plot(self.diff_plot, theme)
        self.bar.axis.setTickFont(theme.font(-1))
        self.bar.axis.setTextPen(pg.mkPen(theme.text))
        if self.answer is not None:
            self._draw()
        if self.compare_answer is not None:
            self._draw_compare()
