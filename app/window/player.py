"""Play: step again and again at a chosen speed, or as fast as the model runs. The one owner of play state.

At a set speed a timer asks for one step per tick, and only when the engine is idle (a slow step
never piles up requests). At max speed the engine loops by itself (``SessionController.play``): it
queues each next step without waiting for the window, and the timer only restarts a loop that a
request ended. Any other request ends the engine's loop; ``pause`` ends both.
"""

from __future__ import annotations

from typing import Callable

from PySide6.QtCore import QObject, QTimer, Signal

from app.window.controller import SessionController

MAX_SPEED_POLL_MS = 100  # at max speed results drive Play; this timer only restarts a stalled one


class Player(QObject):
    """Plays and pauses. ``step`` runs one step (the window's, which refuses after a stop);
    ``can_go_on`` says whether generation can continue at all."""

    playingChanged = Signal(bool)
    fastChanged = Signal(bool)  # ``fast`` changed: the window's paint scheduler follows it

    def __init__(self, controller: SessionController, step: Callable[[], None], can_go_on: Callable[[], bool], parent=None):
        super().__init__(parent)
        self._controller, self._step, self._can_go_on = controller, step, can_go_on
        self.speed = 3.0  # tokens per second
        self.max_speed = False
        self._timer = QTimer(self)
        self._timer.timeout.connect(self._on_timer_timeout)

    @property
    def playing(self) -> bool:
        return self._timer.isActive()

    @property
    def fast(self) -> bool:
        """Playing at max speed: the one rule for drawing at the slower max-speed frame rate."""
        return self.playing and self.max_speed

    def play(self) -> None:
        if self.playing:
            return
        self._timer.start(self._interval_ms())
        self.playingChanged.emit(True)
        if self.fast:
            self.fastChanged.emit(True)
        self._on_timer_timeout()

    def pause(self) -> None:
        was, was_fast = self.playing, self.fast
        self._timer.stop()
        self._controller.stop_play()
        if was_fast:
            self.fastChanged.emit(False)
        if was:
            self.playingChanged.emit(False)

    def toggle(self) -> None:
        self.pause() if self.playing else self.play()

    def set_speed(self, tokens_per_second: float) -> None:
        self.speed = float(tokens_per_second)
        if self.playing:
            self._timer.setInterval(self._interval_ms())

    def set_max_speed(self, on: bool) -> None:
        was_fast = self.fast
        self.max_speed = bool(on)
        if self.fast != was_fast:
            self.fastChanged.emit(self.fast)
        if self.playing:
            self._timer.setInterval(self._interval_ms())
        if not on:
            self._controller.stop_play()
        elif self.playing:
            self._on_timer_timeout()

    def _interval_ms(self) -> int:
        return MAX_SPEED_POLL_MS if self.max_speed else int(1000 / self.speed)

    def _on_timer_timeout(self) -> None:
        if not self._controller.idle:  # never queue a forward pass behind another: no pile-up
            return
        if not self.max_speed:
            self._step()
        elif not self._controller.looping and self._can_go_on():
            self._controller.play()  # the engine loops on its own; this restarts a loop a request ended
