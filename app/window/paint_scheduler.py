"""When a result is drawn: at most one per frame, spread over event-loop turns, never a stale one.

A result from the controller waits here until its frame (``frame_ms``: 16 ms, or 500 ms while Play
runs at max speed: drawing every step would take the window's whole core). Then the panels
receive it one per event-loop turn (``AppState.stage_result``), then the plot views paint one per
turn: all at once stalled the loop for 50-100 ms. A newer result replaces a waiting one; a result
that became stale while it waited (``is_current``: a newer restart, or its engine died) is dropped
and ``resultDropped`` says so (the window then shows an older session than the one handed on).
``turn_ms`` keeps how long each turn of the latest result took (benchmarks read it).
"""

from __future__ import annotations

from functools import partial
from time import perf_counter
from typing import Callable

import pyqtgraph as pg
from PySide6.QtCore import QCoreApplication, QEvent, QObject, QTimer, Signal
from PySide6.QtWidgets import QGraphicsItem, QWidget

from app.protocol import messages as p
from app.window.guard import guarded
from app.logic.state import AppState

FRAME_MS = 16  # draw at most one result per frame
MAX_SPEED_FRAME_MS = 500  # at max speed, draw at most 2 steps a second (see RESULTS_GUI.md)
TURN_MS = 1  # from the end of one turn to the start of the next (tests set it and FRAME_MS to 0)


class PaintScheduler(QObject):
    """Draws results into ``state``'s panels and then paints ``views``, one per event-loop turn."""

    resultStarted = Signal(object)  # SessionResult: its first panel has it (status, actions follow it)
    resultApplied = Signal(object)  # SessionResult: every panel has drawn it
    resultDropped = Signal(object)  # SessionResult: handed on, but stale by its frame: not drawn

    def __init__(self, state: AppState, views: list[pg.GraphicsView], is_current: Callable[[p.SessionResult], bool], parent=None):
        super().__init__(parent)
        self._state, self.views, self._is_current = state, views, is_current
        for view in views:  # an axis is text: keep it as a pixmap until its range changes
            for item in view.scene().items():
                if isinstance(item, pg.AxisItem):
                    item.setCacheMode(QGraphicsItem.CacheMode.DeviceCoordinateCache)
        self.fast = False  # Play at max speed: draw at most MAX_SPEED_FRAME_MS apart
        self._pending: p.SessionResult | None = None
        self._last_draw = 0.0
        self._draw_timer = QTimer(self, singleShot=True)
        self._draw_timer.timeout.connect(self._on_draw_timer_timeout)
        # one panel or plot per event-loop turn, each started 1 ms after the last one ended: a
        # repeating timer is due again before its turn ends, and ran turns back to back ahead of
        # other due timers (stalls of 50 ms and more)
        self._turn_timer = QTimer(self, interval=TURN_MS, singleShot=True)
        self._turn_timer.timeout.connect(self._on_turn_timer_timeout)
        self._turns: tuple[p.SessionResult | None, list] | None = None  # the result being drawn, its turns left
        self.turn_ms: list[float] = []

    def deliver_when_shown(self, panel: QWidget) -> None:
        """From now on a step reaches ``panel``'s own result slots only while it is on screen; hidden
        (another view, another page), it gets the newest step when it is shown, so a view not on
        screen costs a step nothing. Results that start over (a load, a new prompt, a reset, a file
        opened) reach it at once."""
        self._state.wrap_subscribers(panel, _ShowGate(panel).wrap)

    @property
    def settled(self) -> bool:
        """No result is waiting for its frame or being drawn (tests wait for it before reading what is drawn)."""
        return self._pending is None and self._turns is None

    # ------------------------------------------------------------ results in
    def submit(self, result: p.SessionResult) -> None:
        """Draw ``result`` at its frame (replacing one still waiting)."""
        self._pending = result
        if not self._draw_timer.isActive():
            frame = MAX_SPEED_FRAME_MS if self.fast else FRAME_MS
            wait = frame - (perf_counter() - self._last_draw) * 1e3
            self._draw_timer.start(max(0, int(wait)))

    def flush(self) -> None:
        """Draw the waiting result at the next turn instead of at its frame (after a pause)."""
        if self._draw_timer.isActive():
            self._draw_timer.start(0)

    def drop_stale(self) -> None:
        """Forget a waiting result that is no longer current (its engine died)."""
        if self._pending is not None and not self._is_current(self._pending):
            dropped, self._pending = self._pending, None
            self._draw_timer.stop()
            self.resultDropped.emit(dropped)

    def stop(self) -> None:
        self._pending = None
        self._draw_timer.stop()
        self._turn_timer.stop()

    def _on_draw_timer_timeout(self) -> None:
        result, self._pending = self._pending, None
        if result is None:
            return
        if not self._is_current(result):
            self.resultDropped.emit(result)
            return
        self._last_draw = perf_counter()
        self.apply(result)

    def restyle(self, restyles: list[Callable[[], None]]) -> None:
        """Run ``restyles`` (``AppState.stage_projector``) one per event-loop turn, then paint each
        plot view once, one per turn. All at once, and painting every view after each layout pass
        its new font sizes set off (about 6 paints a view), stalled the loop for 150-300 ms."""
        if self._turns is not None:  # a result half-delivered: its panels first, then the restyle
            result, turns = self._turns
            self._turns = (result, [t for t in turns if not _is_paint(t)] + list(restyles))
            self._add_paints()
            return
        self._turns = (None, list(restyles))
        self._add_paints()
        self._turn_timer.start()

    def repaint_later(self) -> None:
        """The window was resized or restyled: paint the plot views one per event-loop turn once the
        layouts have settled, instead of each view after every layout pass (3 paints a view on a
        resize). A result being drawn paints them in its own turns anyway."""
        if self._turns is not None:
            return
        self._turns = (None, [])
        self._add_paints()
        self._turn_timer.start()

    def _add_paints(self) -> None:
        """Hold every plot view and add its paint turn (after the layouts settle) to the turns."""
        for view in self.views:
            view.setUpdatesEnabled(False)
        self._turns[1].extend([_settle_layouts] + [partial(self._paint, view) for view in self.views])

    # -------------------------------------------------------------- drawing
    def apply(self, result: p.SessionResult) -> None:
        """Draw ``result`` now: the first panel at once, then one more per event-loop turn, then the
        plots one per turn; ``resultApplied`` follows the last."""
        self._finish_turns()  # a previous result still being drawn: its held-back plots paint with this one
        for view in self.views:  # held back until their turn
            view.setUpdatesEnabled(False)
        deliveries = self._state.stage_result(result)
        paints = [partial(self._paint, view) for view in self.views]
        self._turns = (result, deliveries + paints)
        self.turn_ms = []
        self.resultStarted.emit(result)
        self._on_turn_timer_timeout()

    def _on_turn_timer_timeout(self) -> None:
        if self._turns is None:
            return
        started = perf_counter()
        turn = self._turns[1].pop(0)
        turn()
        self.turn_ms.append((perf_counter() - started) * 1e3)
        if not self._turns[1]:
            self._finish_turns()
        else:
            self._turn_timer.start()

    @staticmethod
    def _paint(view: pg.GraphicsView) -> None:
        scene = view.scene()
        scene.prepareForPaint()  # pyqtgraph applies new ranges while painting and then paints again
        # the items that moved are marked for repainting by a call Qt queues to the scene: made
        # now, before the paint, instead of in a later turn that would paint the view a second time
        QCoreApplication.sendPostedEvents(scene, QEvent.Type.MetaCall)
        view.setUpdatesEnabled(True)
        view.repaint()

    def _finish_turns(self) -> None:
        """End the result being drawn: its plots paint at the next paint and ``resultApplied`` goes
        out. Called early (a newer result arrived), the panels it had not reached get the newer one."""
        if self._turns is None:
            return
        result = self._turns[0]
        self._turns = None
        self._turn_timer.stop()
        for view in self.views:
            view.setUpdatesEnabled(True)
        if result is not None:  # None: a repaint after ``held``
            self.resultApplied.emit(result)


def _settle_layouts() -> None:
    """Run the layout passes waiting now, so that the paints after this see the final sizes."""
    QCoreApplication.sendPostedEvents(None, QEvent.Type.LayoutRequest)


def _is_paint(turn) -> bool:
    return turn is _settle_layouts or (isinstance(turn, partial) and turn.func is PaintScheduler._paint)


class _ShowGate(QObject):
    """Holds the newest step for a hidden panel's result slots and delivers it when the panel shows
    (``PaintScheduler.deliver_when_shown``)."""

    def __init__(self, panel: QWidget):
        super().__init__(panel)
        self._panel = panel
        self._pending: dict[Callable, p.SessionResult] = {}
        panel.installEventFilter(self)

    def wrap(self, slot: Callable[[p.SessionResult], None]) -> Callable[[p.SessionResult], None]:
        def gated(result: p.SessionResult) -> None:
            if self._panel.isVisible() or isinstance(result.request, p.RESTARTS):  # a new session: at once
                self._pending.pop(slot, None)
                slot(result)
            else:
                self._pending[slot] = result
        return gated

    @guarded(fallback=False)
    def eventFilter(self, watched, event) -> bool:  # noqa: N802 - Qt's name
        if event.type() == QEvent.Type.Show and self._pending:
            pending, self._pending = self._pending, {}
            for slot, result in pending.items():
                slot(result)
        return False
