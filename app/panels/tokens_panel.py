"""Panel 1, the prompt and its tokens: an editable prompt above a strip of token chips.

The strip is one custom-painted widget, not a widget per chip: a step lays out only the chips it
adds, and a paint draws only the chips in view, so a 1,000-token context costs what a 10-token one
does.
"""

from __future__ import annotations

from html import escape
import bisect
import unicodedata
from dataclasses import dataclass
from functools import lru_cache

from PySide6.QtCore import QEvent, QRect, QSize, Qt, QTimer, Signal
from PySide6.QtGui import QColor, QFont, QFontMetrics, QPainter, QPen
from PySide6.QtWidgets import (
    QCheckBox,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QScrollArea,
    QSizePolicy,
    QToolTip,
    QVBoxLayout,
    QWidget,
)

from engine.chat import ChatTurn
from engine.tokens import piece_bytes

from app.logic.model_words import system_placeholder
from app.logic.text_fit import tail_words

from app.protocol import messages as p
from app.logic import stop_text
from app.window import theme as th
from app.logic.state import LATEST, AppState
from app.panels.fitted_text import PlaceholderFitEdit
from app.window.guard import guarded

@lru_cache(maxsize=4096)
def chip_text(piece: str) -> str:
    """What a chip draws for ``piece``: the piece, except that marks with nothing to sit on at its
    start (a lone accent or vowel point draws a speck, a variation selector draws nothing) are shown
    on a dotted circle ◌, and a leading variation selector as its UTF-8 bytes."""
    lead = 0
    while lead < len(piece) and unicodedata.category(piece[lead]) in ("Mn", "Mc", "Me"):
        lead += 1
    if not lead:
        return piece
    marks = "".join(
        "".join(f"\\x{b:02x}" for b in ch.encode("utf-8")) if _is_variation_selector(ch) else ch for ch in piece[:lead]
    )
    return ("" if marks.startswith("\\x") else "\u25cc") + marks + piece[lead:]


def _is_variation_selector(ch: str) -> bool:
    c = ord(ch)
    return 0xFE00 <= c <= 0xFE0F or 0xE0100 <= c <= 0xE01EF or 0x180B <= c <= 0x180F or c == 0x034F


TYPING_PAUSE_MS = 450  # a typed prompt (or stop) goes out once typing pauses this long (tests set 0)
EDITOR_LINES = 3  # the prompt editor shows at least this many lines (a scroll bar beyond)
CHIP_SHARE = 0.12  # the most of the window's height the rows of chips take (a scroll bar beyond)
MIN_ROWS = 2  # rows of chips shown whatever the window's height, when the text needs them (the Flow and
# the Overview alike: on a short projector window the Overview's panels take more pages for it)
MAX_ROWS = 3  # and the most, outside the focused panel
SHORT_WINDOW = 800  # a window shorter than this on a projector shows the text so far in one line


@dataclass(frozen=True)
class Chip:
    """One token chip. kind: "prompt", "generated" or "next" (chosen, not yet fed back); special: one of
    the tokenizer's special tokens (a chat template's turn markers, end of text), drawn apart."""

    token_id: int
    piece: str
    kind: str
    special: bool = False


class TokenStrip(QWidget):
    """All tokens as chips in reading order, wrapped to the width; hover for details, click to select."""

    positionClicked = Signal(int)  # a token position, or LATEST for the "next" chip
    heightChanged = Signal(int)  # the chips took more or fewer rows

    PAD_X, PAD_Y, GAP = 6, 1, 4

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setMouseTracking(True)
        self.setFocusPolicy(Qt.StrongFocus)
        self.setSizePolicy(QSizePolicy.Ignored, QSizePolicy.Fixed)
        self.chips: list[Chip] = []
        self.rects: list[QRect] = []
        self.selected = -1
        self._theme = th.NORMAL
        self._laid_width = -1
        self._set_fonts()

    def _set_fonts(self) -> None:
        self._font = self._theme.font(1)
        self._id_font = self._theme.font(-2)
        self._fm, self._id_fm = QFontMetrics(self._font), QFontMetrics(self._id_font)
        self._chip_h = self._fm.height() + self._id_fm.height() + 2 * self.PAD_Y

    def set_theme(self, theme: th.Theme) -> None:
        self._theme = theme
        self._set_fonts()
        self._relayout(0)

    def set_chips(self, chips: list[Chip], selected: int) -> None:
        same = 0
        n = min(len(chips), len(self.chips))
        while same < n and chips[same] == self.chips[same]:
            same += 1
        self.chips = chips
        self.selected = selected
        self._relayout(same)

    def set_selected(self, selected: int) -> None:
        if selected != self.selected:
            self.selected = selected
            self.update()

    def _relayout(self, first: int) -> None:
        """Lay out chips from index ``first`` on (earlier ones keep their place)."""
        width = max(self.width(), 200)
        if width != self._laid_width:
            first, self._laid_width = 0, width
        del self.rects[first:]
        x, y = (self.GAP, self.GAP) if not self.rects else (self.rects[-1].right() + 1 + self.GAP, self.rects[-1].top())
        for chip in self.chips[first:]:
            w = max(self._fm.horizontalAdvance(chip_text(chip.piece) or " "), self._id_fm.horizontalAdvance(str(chip.token_id)))
            w += 2 * self.PAD_X
            if x + w > width - self.GAP and x > self.GAP:
                x, y = self.GAP, y + self._chip_h + self.GAP
            self.rects.append(QRect(x, y, w, self._chip_h))
            x += w + self.GAP
        height = (self.rects[-1].bottom() + 1 + self.GAP) if self.rects else self._chip_h + 2 * self.GAP
        if height != self.height():
            self.setFixedHeight(height)
            self.heightChanged.emit(height)
        self.update()

    def rows_height(self, rows: int) -> int:
        """The height ``rows`` rows of chips take."""
        return rows * (self._chip_h + self.GAP) + self.GAP

    @guarded
    def resizeEvent(self, event) -> None:
        if self.width() != self._laid_width:
            self._relayout(0)
        super().resizeEvent(event)

    @guarded(fallback=lambda self, *a: QSize())
    def sizeHint(self) -> QSize:
        return QSize(400, self.height())

    def chip_at(self, pos) -> int:
        tops = [r.top() for r in self.rects]
        i = bisect.bisect_right(tops, pos.y())
        for j in range(i - 1, -1, -1):  # rows above ``pos``, nearest first (none while empty)
            r = self.rects[j]
            if r.contains(pos):
                return j
            if r.bottom() < pos.y():
                break
        return -1

    @guarded
    def paintEvent(self, event) -> None:
        p = QPainter(self)
        p.setRenderHint(QPainter.Antialiasing)
        area = event.rect()
        theme = self._theme
        fills = {"prompt": QColor(th.PROMPT_CHIP), "generated": QColor(th.GENERATED_CHIP), "next": QColor("#FFFFFF")}
        tops = [r.top() for r in self.rects]
        start = max(0, bisect.bisect_left(tops, area.top() - self._chip_h))
        for i in range(start, len(self.rects)):
            r = self.rects[i]
            if r.top() > area.bottom():
                break
            chip = self.chips[i]
            selected = i == self.selected
            edge = th.CHOSEN if chip.kind == "next" else (th.PURPLE if chip.special else "#8A8A8A")
            pen = QPen(QColor(th.SELECTED if selected else edge))
            pen.setWidthF(3 if selected else (2 if chip.kind == "next" or chip.special else 1))
            if chip.kind == "next":
                pen.setStyle(Qt.DashLine)
            p.setPen(pen)
            p.setBrush(QColor(th.SPECIAL_CHIP) if chip.special else fills[chip.kind])
            p.drawRoundedRect(r.adjusted(1, 1, -1, -1), 5, 5)
            p.setPen(QColor(theme.text))
            p.setFont(self._font)
            text_rect = QRect(r.left(), r.top() + self.PAD_Y, r.width(), self._fm.height())
            p.drawText(text_rect, Qt.AlignHCenter | Qt.AlignVCenter, chip_text(chip.piece))
            p.setPen(QColor("#555555"))
            p.setFont(self._id_font)
            id_rect = QRect(r.left(), text_rect.bottom() + 1, r.width(), self._id_fm.height())
            p.drawText(id_rect, Qt.AlignHCenter | Qt.AlignVCenter, str(chip.token_id))
        p.end()

    @guarded(fallback=False)
    def event(self, event) -> bool:
        if event.type() == QEvent.ToolTip:
            i = self.chip_at(event.pos())
            if i >= 0:
                chip = self.chips[i]
                where = "next token (chosen, not yet read)" if chip.kind == "next" else f"position {i}, {chip.kind}"
                if chip.special:
                    where += "<br>a special token: the chat template's turn markers and the end of text are single tokens"
                QToolTip.showText(
                    event.globalPos(),
                    f"<b>{escape(chip.piece, quote=False)}</b><br>token id {chip.token_id}<br>"
                    f"byte-level piece: {escape(repr(piece_bytes(chip.piece)), quote=False)}<br>{where}",
                    self,
                )
            else:
                QToolTip.hideText()
            return True
        return super().event(event)

    @guarded
    def mousePressEvent(self, event) -> None:
        i = self.chip_at(event.position().toPoint())
        if i >= 0:
            kind = self.chips[i].kind
            self.positionClicked.emit(LATEST if kind == "next" or i == self.selected else i)
        super().mousePressEvent(event)



class TokensPanel(QGroupBox):
    """The prompt editor, token and character counts, and the chip strip.

    Typing re-tokenizes after a short pause (``promptEdited``); the chips show the prompt (blue),
    generated tokens (orange), special tokens (purple) and the token just chosen (dashed), each with its id.
    With "Chat turn" checked the editor holds the user's message and a system message may come before
    it (``chatEdited``: the model's chat template renders both); "stop at" names stop sequences
    (``stopsEdited``). Chat turns are off, with a tooltip saying why, for a model without a template.
    """

    promptEdited = Signal(str)
    chatEdited = Signal(object)  # ChatTurn
    stopsEdited = Signal(object)  # tuple[str, ...]

    def __init__(self, state: AppState, parent: QWidget | None = None):
        super().__init__("1 · Prompt and tokens", parent)
        self.short_title = "1 Tokens"
        self.state = state
        self.expanded = False  # focused: the chips take all the height there is
        self.in_flow = False  # borrowed by the Flow (set_in_flow), which always shows MIN_ROWS rows
        self.editor = QPlainTextEdit()
        self.editor.setPlaceholderText("Type a prompt; it is split into tokens as you type.")
        self.editor.setTabChangesFocus(True)
        self.counts = QLabel("0 tokens · 0 characters")
        self.counts.setAlignment(Qt.AlignRight | Qt.AlignVCenter)
        self.counts.setTextFormat(Qt.RichText)
        self.counts.setToolTip(COUNTS_TIP)
        self._counts_short = False  # the count of characters is in the tooltip (``_update_counts``)
        self.strip = TokenStrip()
        self.scroll = QScrollArea()
        self.scroll.setWidget(self.strip)
        self.scroll.setWidgetResizable(True)
        self.scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarAlwaysOff)
        self.strip.heightChanged.connect(self.fit_chips)
        self._follow_newest = True  # the chips' scroll bar keeps the newest row in view while it grows
        self.scroll.verticalScrollBar().rangeChanged.connect(self._on_chips_range_changed)
        self.scroll.verticalScrollBar().valueChanged.connect(self._on_chips_scrolled)
        self.setSizePolicy(QSizePolicy.Preferred, QSizePolicy.Maximum)  # no empty space below the chips

        # the whole text so far as a sentence, the newest token marked
        self.sentence = QLabel()
        self.sentence.setWordWrap(True)
        self.sentence.setTextFormat(Qt.RichText)
        self.sentence.setToolTip("The text so far: the prompt and every generated token; the newest one is marked")
        self.sentence.setSizePolicy(QSizePolicy.Ignored, QSizePolicy.Preferred)
        self._sentence = ("", "")  # the text before the newest token, the newest token

        self.chat_box = QCheckBox("Chat turn")
        self.system_edit = PlaceholderFitEdit(("System message (optional)",))
        self.system_edit.hide()
        self.stops_edit = QLineEdit()
        self.stops_edit.setPlaceholderText("stop at…")
        self.stops_edit.setToolTip(f"Stop sequences: generation stops once the text reaches one ({stop_text.HELP})")
        self._chat_sent: ChatTurn | None = None  # the chat turn sent last (None: a plain prompt)
        self._stops_sent: tuple[str, ...] = ()
        self._chat_why_not = ""

        # the editor (under the system message in a chat turn) on the left, as tall as the sentence
        # and the chips beside it together, so a long prompt shows in several lines at no cost in
        # height (``EDITOR_LINES`` at the least)
        self.editor.setSizePolicy(QSizePolicy.Preferred, QSizePolicy.Ignored)
        left = QVBoxLayout()
        left.setSpacing(2)
        left.addWidget(self.system_edit)
        left.addWidget(self.editor, 1)
        top = QHBoxLayout()
        top.addWidget(self.sentence, 3)
        side = QVBoxLayout()
        side.addWidget(self.counts)
        side.addStretch(1)
        top.addLayout(side)
        controls = QVBoxLayout()  # beside the chips: as tall as one row of them, so the panel takes no more height
        controls.setSpacing(0)
        controls.addWidget(self.chat_box)
        controls.addWidget(self.stops_edit)
        controls.addStretch(1)
        chips = QHBoxLayout()
        chips.addWidget(self.scroll, 1)
        chips.addLayout(controls)
        right = QVBoxLayout()
        right.setSpacing(2)  # the sentence right over the chips: the panels below keep the height (two rows of chips, projector)
        right.addLayout(top)
        right.addLayout(chips, 1)
        layout = QHBoxLayout(self)
        layout.addLayout(left, 2)
        layout.addLayout(right, 5)
        layout.setContentsMargins(6, 2, 6, 2)

        self._debounce = QTimer(self, singleShot=True, interval=TYPING_PAUSE_MS)
        self._debounce.timeout.connect(self._on_debounce_timeout)
        self.editor.textChanged.connect(self._on_editor_text_changed)
        self.system_edit.textChanged.connect(self._on_editor_text_changed)
        self.chat_box.toggled.connect(self._on_chat_box_toggled)
        self._stops_wait = QTimer(self, singleShot=True, interval=TYPING_PAUSE_MS)  # typed stops go out as the prompt does:
        self._stops_wait.timeout.connect(self._send_stops)  # a toolbar click takes no focus, so no editingFinished
        self.stops_edit.textEdited.connect(self._stops_wait.start)
        self.stops_edit.editingFinished.connect(self._send_stops)
        self.strip.positionClicked.connect(state.set_position)
        state.subscribe(self._on_state_result)
        state.positionChanged.connect(self._on_state_position)
        state.subscribe_theme(self._on_state_theme)
        self._on_state_theme(state.theme)
        self._prompt_text = ""
        self._show_chat_enabled(False, "Chat turns need a model with a chat template: none is loaded yet.")

    def plot_needs(self) -> list:
        return []  # no plots

    # ------------------------------------------------------------- editing
    def prompt(self) -> str:
        return self.editor.toPlainText()

    def set_prompt_text(self, text: str) -> None:
        """Show ``text`` in the editor without re-submitting it."""
        self._prompt_text = text
        if self.editor.toPlainText() != text:
            self.editor.blockSignals(True)
            self.editor.setPlainText(text)
            self.editor.blockSignals(False)
        self._update_counts()

    def _on_editor_text_changed(self) -> None:
        self._update_counts()
        self._debounce.start()

    def chat_turn(self) -> ChatTurn | None:
        """The chat turn the editors hold, or None when "Chat turn" is off (or shown off: a session
        opened to view only shows its turn, and the loaded model may have no template)."""
        if not (self.chat_box.isChecked() and self.chat_box.isEnabled()):
            return None
        return ChatTurn(self.system_edit.text(), self.editor.toPlainText())

    def set_chat(self, turn: ChatTurn | None) -> None:
        """Show ``turn`` (None: a plain prompt, chat off) without re-submitting it."""
        self.chat_box.blockSignals(True)
        self.chat_box.setChecked(turn is not None)
        self.chat_box.blockSignals(False)
        self._show_chat_mode(turn is not None)
        self._chat_sent = turn
        if turn is not None:
            self.system_edit.blockSignals(True)
            self.system_edit.setText(turn.system)
            self.system_edit.blockSignals(False)
            self.set_prompt_text(turn.user)

    def set_stops(self, sequences: tuple[str, ...]) -> None:
        """Show ``sequences`` in "stop at" without re-submitting them."""
        self._stops_sent = tuple(sequences)
        if stop_text.parse(self.stops_edit.text()) != self._stops_sent:
            self.stops_edit.setText(stop_text.join(self._stops_sent))

    def _on_debounce_timeout(self) -> None:
        text, turn = self.editor.toPlainText(), self.chat_turn()
        if turn is not None:
            if turn != self._chat_sent:  # an empty user message too: the window says why it does not run
                self._chat_sent, self._prompt_text = turn, text
                self.chatEdited.emit(turn)
        elif text != self._prompt_text or self._chat_sent is not None:  # empty too: the window says why it does not run
            self._prompt_text, self._chat_sent = text, None
            self.promptEdited.emit(text)

    def _typed_since(self, result) -> bool:
        """A model's load drawn while the editor holds text (not blank) that is neither what the load
        was sent with nor what it ran: the person typed it after the load was sent."""
        text = self.editor.toPlainText()
        return (isinstance(result.request, p.Load) and bool(text.strip()) and self.chat_turn() is None
                and text not in (result.request.prompt, result.prompt_text))

    def _show_chat_mode(self, on: bool) -> None:
        self.system_edit.setVisible(on)
        self.editor.setPlaceholderText("The user's message; the model's chat template adds the rest." if on
                                       else "Type a prompt; it is split into tokens as you type.")

    def _on_chat_box_toggled(self, on: bool) -> None:
        self._show_chat_mode(on)
        self._debounce.stop()
        self._on_debounce_timeout()  # at once: the chips change to the template's tokens, or back

    def _send_stops(self) -> None:
        self._stops_wait.stop()
        sequences = stop_text.parse(self.stops_edit.text())
        if sequences != self._stops_sent:
            self._stops_sent = sequences
            self.stopsEdited.emit(sequences)

    def _show_chat_enabled(self, enabled: bool, why_not: str) -> None:
        if (enabled, why_not) == (self.chat_box.isEnabled(), self._chat_why_not):
            return
        self._chat_why_not = why_not
        self.chat_box.setEnabled(enabled)
        if not enabled and self.chat_box.isChecked():  # greyed out it could not be unticked: the text is a plain prompt
            self.chat_box.blockSignals(True)
            self.chat_box.setChecked(False)
            self.chat_box.blockSignals(False)
            self._show_chat_mode(False)
        self.chat_box.setToolTip(
            "Write a system message and a user message; the model's own chat template turns them into tokens "
            "(its special tokens are the purple chips), and generation stops at the end of the assistant's turn"
            if enabled else why_not)

    def _update_counts(self) -> None:
        result = self.state.result
        n_prompt = len(result.prompt_ids) if result is not None else 0
        n_gen = len(result.records) if result is not None else 0
        chars = len(self.editor.toPlainText())
        gen = f" + {n_gen} generated" if n_gen else ""
        gen = f" + <span style='background:{th.GENERATED_CHIP}'>&nbsp;<b>{n_gen}</b> generated&nbsp;</span>" if n_gen else ""
        self._counts_short = short = self.sentence_lines() == 1  # the text so far in one line: the characters' count leaves it the room
        self.counts.setText(  # one line: "␣ = space, ↵ = newline" is its tooltip
            f"<span style='background:{th.PROMPT_CHIP}'>&nbsp;<b>{n_prompt}</b> prompt{'' if short else ' tokens'}&nbsp;</span>{gen}"
            + ("" if short else f" · <b>{chars}</b> characters")
        )
        told = f"{n_prompt} prompt tokens{f' + {n_gen} generated' if n_gen else ''}, {chars} characters in the editor. "
        self.counts.setToolTip((told if short else "") + COUNTS_TIP)

    # -------------------------------------------------------------- state
    def _on_state_result(self, result) -> None:
        trace = result.trace
        if trace is None:
            ids, pieces = result.prompt_ids, result.prompt_pieces
        else:
            ids, pieces = trace.context_ids, trace.pieces
        prompt_len = len(result.prompt_ids)
        special = set(result.info.special_ids)
        chips = [Chip(int(t), p, "prompt" if i < prompt_len else "generated", int(t) in special)
                 for i, (t, p) in enumerate(zip(ids, pieces))]
        if trace is not None:
            chips.append(Chip(int(trace.chosen), trace.chosen_piece, "next", int(trace.chosen) in special))
        info = result.info
        if not info.chat_template:
            why = f"{info.name} has no chat template: chat turns need an instruction model (SmolLM2-135M-Instruct, Qwen2.5-Instruct)."
        else:
            why = result.why_not
        self._show_chat_enabled(info.chat_template and result.can_step, why)
        self.system_edit.set_placeholders(system_placeholder(info.architecture))
        if isinstance(result.request, (p.Load, p.OpenSession)):
            self.set_stops(result.stop_sequences)
        if self._debounce.isActive():
            pass  # an edit not sent yet: the editor keeps it and its cursor; it is sent when the wait ends
        elif self._typed_since(result):  # the person's text stays; sent again, it runs or is refused as typed
            self._prompt_text = ""
            self._debounce.start()
        elif isinstance(result.request, (p.Load, p.OpenSession)):
            self.set_chat(result.chat)
            if result.chat is None:
                self.set_prompt_text(result.prompt_text)
        elif not self._prompt_text:
            self.set_prompt_text(self.prompt())
        self.strip.set_chips(chips, self._selected_index())
        self._update_counts()
        before = b"".join(piece_bytes(c.piece) for c in chips[:-1]).decode("utf-8", "replace")
        newest = b"".join(piece_bytes(c.piece) for c in chips[-1:]).decode("utf-8", "replace") if trace is not None else ""
        if trace is None:
            before = b"".join(piece_bytes(c.piece) for c in chips).decode("utf-8", "replace")
        self._sentence = (before, newest)
        self._show_sentence()
        self._follow_newest = self.state.position == LATEST
        if self._follow_newest:
            self.show_newest_chips()

    def show_newest_chips(self) -> None:
        """Scroll the chips to their last rows (the newest token), whole rows in view: the range the
        scroll bar has may still grow once the strip's new height is laid out (``_on_chips_range_changed``)."""
        bar = self.scroll.verticalScrollBar()
        bar.setValue(bar.maximum())

    def _on_chips_range_changed(self, _low: int, _high: int) -> None:
        if self._follow_newest:
            self.show_newest_chips()

    def _on_chips_scrolled(self, value: int) -> None:
        """Whole rows in view: a scroll that stops part way through a row (the wheel moves by a
        page, which is a few pixels more than whole rows) goes on to the row's edge, so no sliver of
        a row is drawn at the strip's top, under the sentence."""
        bar, step = self.scroll.verticalScrollBar(), self.strip.rows_height(1) - TokenStrip.GAP
        snapped = min(bar.maximum(), round(value / step) * step)
        if snapped != value:
            bar.setValue(snapped)

    def _selected_index(self) -> int:
        return self.state.selected_position

    def _on_state_position(self, position: int) -> None:
        self.strip.set_selected(self._selected_index())
        self._follow_newest = position == LATEST

    def _on_state_theme(self, theme: th.Theme) -> None:
        self.editor.setFont(theme.font(1))
        self.system_edit.setFont(theme.font())
        for widget in (self.stops_edit, self.chat_box):  # one size down: the two fit beside one row of chips
            widget.setFont(theme.font(-1))
        self.stops_edit.setFixedWidth(QFontMetrics(theme.font(-1)).horizontalAdvance("x" * 14))
        self.sentence.setFont(theme.font(1))
        self._fit_sentence_lines()
        frame = 2 * (self.editor.frameWidth() + int(self.editor.document().documentMargin()))
        self.editor.setMinimumHeight(EDITOR_LINES * QFontMetrics(theme.font(1)).lineSpacing() + frame)
        self.setFont(theme.font())
        self.strip.set_theme(theme)
        self.fit_chips()

    def _short_projector(self) -> bool:
        return th.is_projector(self.state.theme) and self.window().height() < SHORT_WINDOW

    def set_in_flow(self, in_flow: bool) -> None:
        """The Flow borrows this panel (True) or gives it back to the Overview (False)."""
        self.in_flow = in_flow
        self.fit_chips()

    def sentence_lines(self) -> int:
        """The lines the text so far takes: one in a short window on a projector (the rows of chips
        need the height), else two."""
        return 1 if self._short_projector() else 2

    def _fit_sentence_lines(self) -> None:
        lines = self.sentence_lines()
        if (lines == 1) != self._counts_short:
            self._update_counts()
        self.sentence.setMaximumHeight(lines * QFontMetrics(self.sentence.font()).lineSpacing() + 6)
        self.sentence.setWordWrap(lines > 1)

    def _show_sentence(self) -> None:
        """The text so far in ``sentence_lines()`` lines: its end, the newest token marked."""
        before, newest = self._sentence
        fm = QFontMetrics(self.sentence.font())
        bold = QFont(self.sentence.font())
        bold.setBold(True)
        newest_w = QFontMetrics(bold).horizontalAdvance(newest) + fm.horizontalAdvance("…") + 8  # drawn bold
        if self.sentence_lines() > 1:  # wrapped lines leave room at their ends
            room = max(40, int(self.sentence.width() * 1.6) - fm.horizontalAdvance(newest))
        else:
            room = max(0, self.sentence.width() - newest_w)
        shown = sentence_end(" ".join(before.split("\n")), room, fm.horizontalAdvance)
        mark = (
            f"<span style='background:{th.GENERATED_CHIP}; text-decoration: underline'><b>{escape(newest, quote=False)}</b></span>"
            if newest else ""
        )
        self.sentence.setText(f"{escape(shown, quote=False)}{mark}" if before or newest else "")

    @guarded
    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        self._fit_sentence_lines()
        self._show_sentence()

    def set_expanded(self, expanded: bool) -> None:
        """Focused (True): the chips take all the height there is; else as many rows as they need,
        up to ``MAX_ROWS`` (``CHIP_SHARE`` of a short window's height, but ``MIN_ROWS`` at the least),
        and a scroll bar beyond."""
        self.expanded = expanded
        self.setSizePolicy(QSizePolicy.Preferred, QSizePolicy.Preferred if expanded else QSizePolicy.Maximum)
        self.fit_chips()

    def fit_chips(self, *_args) -> None:
        """Give the chips the rows they need, as many as there is room for (called on a resize too)."""
        self._fit_sentence_lines()
        frame = 2 * self.scroll.frameWidth()
        if self.expanded:
            self.scroll.setMinimumHeight(self.strip.rows_height(1) + frame)
            self.scroll.setMaximumHeight(16777215)
            return
        one = self.strip.rows_height(1)
        most = chip_rows(self.window().height(), one)  # a long prompt never pushes the window past its size
        rows = min(max(self.strip.height(), one), self.strip.rows_height(most))
        self.scroll.setFixedHeight(rows + frame)
        bar = self.scroll.verticalScrollBar()
        bar.setSingleStep(one - TokenStrip.GAP)  # the wheel and the arrows move by whole rows


COUNTS_TIP = "Blue chips: the prompt; orange: generated; dashed: the token just chosen, not yet read. ␣ = space, ↵ = newline"
ELIDED = "… "  # in front of the end of a text too long for its line


def sentence_end(text: str, room: float, measure) -> str:
    """``text`` if it fits ``room`` (``measure`` gives a text's width), else its end in whole words
    after ``ELIDED`` ("… France is", never "…ance is"); ``ELIDED`` alone when not even its last word
    fits. A chat template's special tokens (``<|im_start|>``) count as words."""
    if measure(text) <= room:
        return text
    end = tail_words(text, room - measure(ELIDED), measure)
    return ELIDED + end[0] if end and end[0] else ELIDED.rstrip()


def chip_rows(window_height: int, row_height: int, least: int = MIN_ROWS) -> int:
    """How many rows of chips the strip shows at most in a window ``window_height`` pixels tall
    (``least`` at the least)."""
    return max(least, min(MAX_ROWS, int(CHIP_SHARE * window_height / max(row_height, 1))))

