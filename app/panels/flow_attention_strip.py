"""The Flow's attention maths: for the selected head, the newest query's largest weights worked out
(q · k, × the model's scale, softmax, |weight × v|), as a small table in the expanded block.

``HeadMathsSource`` asks the engine for the Inside view's answer (one recompute of the newest
position, ``Inspect``) while the Flow is on screen and Play is not running, and keeps the
``HeadMaths`` (``app.logic.flow_attention_numbers``) of the selected layer and head; ``paint_table``
draws it into the rect the flow's layout gives (``parts["maths"]``).
"""

from __future__ import annotations

from typing import Callable

from PySide6.QtCore import QObject, QRect, Qt, Signal
from PySide6.QtGui import QColor, QFont, QFontMetrics, QPainter

from app.logic.flow_attention_numbers import HeadMaths, head_maths, table
from app.logic.state import AppState
from app.logic.text_fit import fit
from app.protocol import messages as p
from app.window import theme as th

WEIGHT_BAR = th.CANDIDATE  # the softmax weight, as a pale bar behind its row


class HeadMathsSource(QObject):
    """The selected head's maths for the newest position of the step on screen. ``inspectRequested``
    asks for the answer (step, position, layer: the window hands it to the controller); ``wants`` /
    ``show_inside`` take it back; ``changed`` says ``maths`` changed. Nothing is asked while the
    Flow is hidden (``set_shown``) or Play runs (``set_playing``): each would cost the engine a
    recompute per step."""

    inspectRequested = Signal(int, int, int)
    changed = Signal()

    def __init__(self, state: AppState, parent: QObject | None = None):
        super().__init__(parent)
        self.state = state
        self.trace = None  # the last InsideTrace taken
        self.maths: HeadMaths | None = None
        self._asked: tuple[int, int, int] | None = None
        self.shown = False
        self.playing = False
        state.subscribe(self._on_state_result)
        state.layerChanged.connect(self._on_state_selection)
        state.headChanged.connect(self._on_state_selection)

    def wanted(self) -> tuple[int, int, int] | None:
        """(step, position, layer) the strip needs now: the newest position of the step on screen."""
        result = self.state.result
        if result is None or result.trace is None or not result.can_step:
            return None
        return (result.trace.step, result.trace.record.end - 1, self.state.layer)

    def refresh(self) -> None:
        """Ask for the answer the strip needs, unless it was asked already (or cannot be now)."""
        self._remake()
        wanted = self.wanted()
        if wanted is None or not self.shown or self.playing or wanted == self._asked or self._matches(wanted):
            return
        self._asked = wanted
        self.inspectRequested.emit(*wanted)

    def set_shown(self, shown: bool) -> None:
        self.shown = shown
        self.refresh()

    def set_playing(self, playing: bool) -> None:
        self.playing = playing
        self.refresh()

    def note(self, head: int) -> str:
        """What the strip says while it has no maths to show."""
        result = self.state.result
        if result is not None and not result.can_step:  # a saved session viewed without its model
            return f"head {head}: q · k needs the model loaded"
        return f"head {head}: q · k once Play pauses" if self.playing else f"head {head}: q · k being worked out"

    def awaiting(self) -> bool:
        """True while the answer asked for last has not come (a screenshot waits for it)."""
        return self._asked is not None and not self._matches(self._asked)

    def wants(self, trace) -> bool:
        return self._asked is not None and (trace.step, trace.position, trace.kv_layers[0] if trace.kv_layers else -1) == self._asked

    def show_inside(self, trace, _pieces=None) -> None:
        self.trace = trace
        self._remake()

    def _matches(self, wanted) -> bool:
        t = self.trace
        return t is not None and (t.step, t.position) == wanted[:2] and wanted[2] in t.kv_layers

    def _remake(self) -> None:
        """The maths of the selected head from the answer held, if it is the step on screen's."""
        wanted, t, maths = self.wanted(), self.trace, None
        if wanted is not None and self._matches(wanted):
            result = self.state.result
            rule = result.info.architecture.score_rule if result.info.architecture is not None else None
            maths = head_maths(t, self.state.layer, self.state.head, result.trace.pieces, rule)
        if maths != self.maths:
            self.maths = maths
            self.changed.emit()

    def _on_state_result(self, result) -> None:
        if isinstance(result.request, p.RESTARTS):
            self._asked, self.trace = None, None
        self.refresh()

    def _on_state_selection(self, _value: int) -> None:
        self.refresh()


def paint_table(p: QPainter, rect, maths: HeadMaths | None, font: QFont, bold: QFont, line: int, waiting: str,
                measure: Callable[[str, bool], int]) -> None:
    """The table in ``rect`` (x, y, w, h): a line of column heads, then a row per key while a line
    is left; ``waiting`` is written instead until ``maths`` is there. ``measure(text, bold)``: a
    text's drawn width (its ink) in ``font`` or ``bold``, as the Flow measures every text."""
    x, y, w, h = rect
    rows = h // line - 1
    p.fillRect(QRect(x - 2, y, w + 4, h), QColor("white"))  # it runs on under the KV cache's row: one panel of its own
    p.setPen(QColor(th.GREY))
    p.drawRect(QRect(x - 2, y, w + 3, h - 1))
    x, w = x + 2, w - 4
    p.setPen(QColor(th.DARK))
    if maths is None or rows < 1:
        p.setFont(font)
        short = waiting.split(":")[0]  # "head 3", where the sentence has no room
        p.drawText(QRect(x, y, w, line), int(Qt.AlignLeft | Qt.AlignVCenter), fit([waiting, short], w, lambda text: measure(text, False))[0])
        return
    head, body = table(maths, rows)
    gap = QFontMetrics(font).horizontalAdvance(" ") + 2
    plain, heads = (lambda text: measure(text, False)), (lambda text: measure(text, True))
    widths = [max(heads(head[i]), *(plain(cells[i]) for cells in body)) for i in range(1, 5)]
    numbers = sum(widths) + gap * len(widths)
    key_w = max(0, w - numbers)
    lefts, left = [], x + key_w
    for width in widths:
        left += gap
        lefts.append((left, width))
        left += width
    for i, cells in enumerate([head, *body]):
        top = y + i * line
        p.setFont(bold if i == 0 else font)
        if i > 0:
            weight = maths.rows[i - 1].weight if i - 1 < len(maths.rows) else maths.rest_weight
            p.fillRect(QRect(x, top + 1, max(1, int(key_w * weight)), line - 2), th.qcolor(WEIGHT_BAR, 70))
        p.setPen(QColor(th.DARK))
        position = cells[0].rsplit(" ", 1)[-1]
        shorter = [position] if i > 0 and position.isdigit() else []  # a key's position alone, where its token has no room
        if i > 0 and cells[0].endswith(" more"):
            shorter = ["+" + cells[0].split()[0]]  # "+12": the other keys, summed
        key = fit([cells[0], *shorter], key_w, heads if i == 0 else plain)[0]
        p.drawText(QRect(x, top, key_w, line), int(Qt.AlignLeft | Qt.AlignVCenter), key)
        for (left, width), text in zip(lefts, cells[1:]):
            p.drawText(QRect(left, top, width, line), int(Qt.AlignRight | Qt.AlignVCenter), text)
