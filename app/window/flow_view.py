"""The Flow view: the prompt and its tokens above the flow picture, and the presenter's tour.

``FlowView`` is the page and ``TourMode`` the tour; the window joins them to the rest (a box's
click to its detail view, the toolbar's "◀ Flow" button, the tour's keys). While the tour runs, → and Page Down move its
highlight forward and ← and Page Up back (outside it those keys step, as always; Space steps in
both); Esc or the Tour button leaves it. The tour's stages and sentences are ``app.logic.tour``; its
last stage, why, asks the engine to split the chosen token's logit (the Why view's Attribute request)
only while it is lit.
"""

from __future__ import annotations

from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QBoxLayout, QHBoxLayout, QPushButton, QVBoxLayout, QWidget

from app.window.guard import guarded
from app.logic.model_words import architecture_line
from app.panels.fitted_text import FittedLabel
from app.panels.flow_panel import FlowPanel
from app.logic.state import AppState
from app.logic.tour import STAGES, Tour, sentence
from app.protocol import messages as p


class FlowView(QWidget):
    """The view a new user meets first: the tokens panel (lent by the Overview while this view is
    shown, so the prompt stays on screen) above the flow of the step. Here the prompt panel is always
    shown, with its usual rows, whatever the Overview's focus hides; ``tokensReturned`` says when it
    is back in the Overview (the focus then shows it there as it wants)."""

    tokensReturned = Signal()

    def __init__(self, state: AppState, tokens: QWidget, home: QBoxLayout, parent: QWidget | None = None):
        super().__init__(parent)
        self.state = state
        self.tokens, self._home = tokens, home
        self.flow = FlowPanel(state)
        self.tour_button = QPushButton("Tour (T)")
        self.tour_button.setCheckable(True)
        self.tour_button.setToolTip("Presenter mode: → / Page Down lights up the next stage with one sentence, "
                                    "← / Page Up the one before; Esc or T leaves it")
        self.hint = FittedLabel(HINTS)
        self.model_line = FittedLabel(())  # the model in one line (app.logic.model_words.architecture_line)
        self.model_line.setToolTip("What the loaded model is made of (Model → About this model, Ctrl+I, for the whole table)")
        self.model_button = QPushButton("Model…")
        self.model_button.setToolTip("About this model (Ctrl+I): what it is made of, as a table")
        self._info = None  # the ModelInfo model_line describes
        row = QHBoxLayout()
        row.setContentsMargins(4, 0, 4, 0)
        row.addWidget(self.hint, 1)
        row.addWidget(self.model_button)
        row.addWidget(self.tour_button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 2, 6, 2)
        layout.setSpacing(4)
        layout.addLayout(row)
        layout.addWidget(self.model_line)
        layout.addWidget(self.flow, 1)
        self._layout = layout
        state.subscribe(self._on_state_result)
        state.subscribe_theme(self._on_state_theme)

    def _on_state_result(self, result) -> None:
        if result.info is not self._info:  # another model: say what it is made of
            self._info = result.info
            line = architecture_line(result.info.architecture)
            facts = line.split(" · ") if line else []
            name = result.info.name
            # narrower: the last facts left out (the Model… button has them all), never a cut word
            self.model_line.set_wordings([f"{name}: {' · '.join(facts[:k])}" for k in range(len(facts), 0, -1)]
                                         + [" · ".join(facts[:k]) for k in range(len(facts), 0, -1)] + [name])

    def _on_state_theme(self, theme) -> None:
        self.hint.setFont(theme.font(-1))
        self.model_line.setFont(theme.font(-1))
        self.tour_button.setFont(theme.font(-1, bold=True))

    def awaiting(self) -> bool:
        """True while the selected head's maths is on its way from the engine."""
        return self.flow.maths.awaiting()

    @guarded
    def showEvent(self, event) -> None:  # noqa: N802 - Qt's name
        self._layout.insertWidget(0, self.tokens)  # borrowed from the Overview while this view is shown
        self.tokens.set_expanded(False)
        self.tokens.set_in_flow(True)
        self.tokens.show()  # a focused panel may have hidden it in the Overview
        super().showEvent(event)
        self.flow.maths.set_shown(True)  # the head's maths is asked for only while the Flow is on screen

    @guarded
    def hideEvent(self, event) -> None:  # noqa: N802 - Qt's name
        if self.tokens.parentWidget() is self:
            self._home.insertWidget(0, self.tokens)
            self.tokens.set_in_flow(False)
            self.tokensReturned.emit()
        self.flow.maths.set_shown(False)
        super().hideEvent(event)


HINTS = ("The step in the order the model computes. Click a box to open it; Alt+1 or F comes back.",
         "Click a box to open it; Alt+1 or F comes back.", "Click a box to open it.")


class TourMode(QObject):
    """The tour's keys and state. While it runs, the window's step and back actions keep only
    Space (step) and lose ← → Page Up Page Down to the tour; "show every panel" gives up Esc.
    ``attributeRequested`` (step, position, target, versus) asks for the why stage's split of the
    step on screen; ``wants`` / ``show_attribution`` take the answer back."""

    attributeRequested = Signal(int, int, int, int)

    def __init__(self, view: FlowView, step_action: QAction, back_action: QAction, unfocus_action: QAction,
                 show_flow, parent: QObject | None = None):
        super().__init__(parent)
        self.view, self.state = view, view.state
        self._actions = (step_action, back_action, unfocus_action)
        self._saved = [a.shortcuts() for a in self._actions]
        self._show_flow = show_flow
        self.tour = Tour()
        self.running = False
        self.why = None  # the Attribution of the chosen token of the step the why stage asked for
        self._asked: tuple[int, int] | None = None  # (step, position) asked for
        window = view.window()
        self.toggle_action = self._action("Tour of the step (presenter mode)", self.toggle, [Qt.Key_T], window)
        self.forward_action = self._action("Tour: next stage", self.forward, [], window)
        self.back_action = self._action("Tour: previous stage", self.back, [], window)
        self.leave_action = self._action("Leave the tour", self.stop, [], window)
        view.tour_button.toggled.connect(self._on_tour_button_toggled)
        self.state.subscribe(self._on_state_result)
        self.state.layerChanged.connect(self._on_state_selection)
        self.state.headChanged.connect(self._on_state_selection)

    def _action(self, text, slot, keys, window) -> QAction:
        a = QAction(text, window)
        a.setShortcuts([QKeySequence(k) for k in keys])
        a.setShortcutContext(Qt.WindowShortcut)
        a.triggered.connect(slot)
        window.addAction(a)
        return a

    def toggle(self) -> None:
        self.stop() if self.running else self.start()

    def start(self, index: int = 0) -> None:
        """Show the flow and light up its stage ``index`` (0: the first; ``app.logic.tour.stage_index``)."""
        self._show_flow()
        self.running = True
        self.tour.index = index
        step, back, unfocus = self._actions
        step.setShortcuts([QKeySequence(Qt.Key_Space)])
        back.setShortcuts([])
        unfocus.setShortcuts([QKeySequence("Ctrl+0")])
        self.forward_action.setShortcuts([QKeySequence(Qt.Key_Right), QKeySequence(Qt.Key_PageDown)])
        self.back_action.setShortcuts([QKeySequence(Qt.Key_Left), QKeySequence(Qt.Key_PageUp)])
        self.leave_action.setShortcuts([QKeySequence(Qt.Key_Escape)])
        self._sync()

    def stop(self) -> None:
        """Leave the tour: the keys step again."""
        if not self.running:
            return
        self.running = False
        for action, keys in zip(self._actions, self._saved):
            action.setShortcuts(keys)
        for a in (self.forward_action, self.back_action, self.leave_action):
            a.setShortcuts([])
        self._sync()

    def forward(self) -> None:
        if self.tour.forward():
            self._sync()

    def back(self) -> None:
        if self.tour.back():
            self._sync()

    def text(self) -> str:
        """The sentence on screen for the present stage (empty before the first step)."""
        n = self.view.flow.current()  # the step the flow was given: the tour reads what it shows
        if n is None:
            return "Step once: the tour reads out that step's numbers."
        index, result = self.tour.index, self.state.result
        loaded = result is not None and result.can_step
        return f"{index + 1}/{len(STAGES)} · " + sentence(self.tour.stage, n, why=self._why_for(n), loaded=loaded)

    def awaiting(self) -> bool:
        """The why stage's split was asked for and has not come (a screenshot waits for it)."""
        return self.running and self.tour.stage == "why" and self._asked is not None and self.why is None

    def wants(self, answer) -> bool:
        a = answer.attribution
        return self._asked is not None and (a.step, a.position, a.versus) == (*self._asked, -1)

    def show_attribution(self, answer) -> None:
        self.why = answer.attribution
        if self.running:
            self._sync()

    def _why_for(self, n):
        """The split held, if it is of the step on screen (its newest position)."""
        a = self.why
        return a if a is not None and (a.step, a.position) == (n.step, n.position) else None

    def _ask_why(self) -> None:
        """On the why stage, ask once for the split of the step on screen's chosen token."""
        result, n = self.state.result, self.view.flow.current()
        if self.tour.stage != "why" or n is None or result is None or not result.can_step:
            return
        wanted = (n.step, n.position)
        if wanted != self._asked and self._why_for(n) is None:
            self._asked, self.why = wanted, None
            self.attributeRequested.emit(n.step, n.position, -1, -1)

    def _sync(self) -> None:
        self.view.tour_button.blockSignals(True)
        self.view.tour_button.setChecked(self.running)
        self.view.tour_button.blockSignals(False)
        if self.running:
            self._ask_why()
            self.view.flow.set_tour(self.tour.box, self.text())
        else:
            self.view.flow.set_tour(None)

    def _on_tour_button_toggled(self, on: bool) -> None:
        self.start() if on else self.stop()

    def _on_state_result(self, result) -> None:
        if isinstance(result.request, p.RESTARTS):  # another model or text: a split held is of neither
            self._asked, self.why = None, None
        if self.running:  # the same stage, this step's numbers
            self._sync()

    def _on_state_selection(self, _value: int) -> None:
        if self.running:
            self._sync()
