"""The Flow's attention maths: for the selected head, the newest query's largest weights worked out
(q · k, × the model's scale, softmax, |weight × v|), as a small table in the expanded block.

``HeadMathsSource`` asks the engine for the Inside view's answer (one recompute of the newest
position, ``Inspect``) while the Flow is on screen and Play is not running, and keeps the
``HeadMaths`` (``app.logic.flow_attention_numbers``) of the selected layer and head;
``app.logic.flow_picture.maths_picture`` lays it out as the table the Flow paints in the rect its
layout gives (``parts["maths"]``).
"""

from __future__ import annotations

from PySide6.QtCore import QObject, Signal

from app.logic.flow_attention_numbers import HeadMaths, head_maths
from app.logic.state import AppState
from app.protocol import messages as p


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
