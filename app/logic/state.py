"""The one application state every panel subscribes to. Panels never call each other.

Selections (step, layer, head, token position, how many candidates to show, projector mode) live
here, together with the newest SessionResult. A panel changes a selection through a setter; every
panel interested hears the event and redraws itself.

Plain Python with psygnal events (as napari's and ndv's models): no Qt, so it is tested without a
display; the window's Qt objects connect their slots to its events.
"""

from __future__ import annotations

from functools import partial
from typing import Any, Callable

from psygnal import Signal

from app.protocol.messages import SessionResult

LATEST = -1  # position: follow the newest query position

Slot = Callable[[SessionResult], None]


class AppState:
    """Selections shared by all panels, plus the newest result (``subscribe`` to hear of each).

    ``normal`` and ``projector`` are the two looks (``app.window.theme.NORMAL`` and ``PROJECTOR`` in the
    window); the state only says which one is on and hands it to its theme subscribers.
    """

    layerChanged = Signal(int)
    headChanged = Signal(int)
    positionChanged = Signal(int)  # a token position, or LATEST
    topNChanged = Signal(int)
    themeChanged = Signal(object)  # the theme, after every ``subscribe_theme`` slot has restyled

    def __init__(self, normal: Any, projector: Any):
        self.result: SessionResult | None = None
        self.step = -1
        self.layer = 0
        self.head = 0
        self.position = LATEST
        self.top_n = 10
        self._themes = {False: normal, True: projector}
        self.theme = normal
        self._subscribers: list[Slot] = []
        self._theme_subscribers: list[Callable[[Any], None]] = []
        self._delivering = False  # a result has reached some subscribers but not all yet
        self._deferred: list[Callable[[], None]] = []

    # ------------------------------------------------------------- the data
    def subscribe(self, slot: Slot) -> None:
        """Call ``slot(result)`` with every new result, subscribers in the order they subscribed."""
        self._subscribers.append(slot)

    def wrap_subscribers(self, owner: object, wrap: Callable[[Slot], Slot]) -> None:
        """Replace each subscribed method of ``owner`` by ``wrap(method)``, in its place in the order
        (the paint scheduler gates a hidden panel's slots this way)."""
        self._subscribers = [wrap(s) if getattr(s, "__self__", None) is owner else s for s in self._subscribers]

    def subscriptions(self) -> tuple[int, int]:
        """A mark of who has subscribed so far, for ``catch_up``."""
        return len(self._subscribers), len(self._theme_subscribers)

    def catch_up(self, mark: tuple[int, int]) -> None:
        """Give the slots subscribed since ``mark`` (late: a view built the first time it is shown, and
        its parts) what the others have had: the theme, if it is not the one they were built in, then
        the current result."""
        results, themes = mark
        if self.theme is not self._themes[False]:
            for slot in self._theme_subscribers[themes:]:
                slot(self.theme)
        if self.result is not None:
            for slot in self._subscribers[results:]:
                slot(self.result)

    def forget_since(self, mark: tuple[int, int]) -> None:
        """Drop the slots subscribed since ``mark``: a view whose building failed half-way leaves none
        behind to be called with every later result."""
        results, themes = mark
        del self._subscribers[results:]
        del self._theme_subscribers[themes:]

    def set_result(self, result: SessionResult) -> None:
        """Show ``result`` in every panel now."""
        for deliver in self.stage_result(result):
            deliver()

    def stage_result(self, result: SessionResult) -> list[Callable[[], None]]:
        """Make ``result`` the current one and return its delivery to each subscriber, to be called
        in order (the window calls one per event-loop turn, so that no turn holds the loop long).

        Until the last delivery has run, selection changes wait and then run in order: a click on a
        head half-way would otherwise draw a panel that has not yet seen the new step. A newer
        ``stage_result`` replaces the deliveries of an older one that did not finish.
        """
        previous = self.result
        self.result = result
        if previous is None or previous.info is not result.info:
            self.layer = min(self.layer, result.n_layer - 1)
            self.head = min(self.head, result.n_head - 1)
            self.position = LATEST
        if self.position >= max(result.context_len, len(result.prompt_ids)):
            self.position = LATEST
        self.step = -1 if result.trace is None else result.trace.step
        self._delivering = True
        return [partial(slot, result) for slot in self._subscribers] + [self._delivered]

    def _delivered(self) -> None:
        self._delivering = False
        deferred, self._deferred = self._deferred, []
        for change in deferred:
            change()

    def _later(self, change: Callable[[], None]) -> bool:
        """True if ``change`` must wait for a result's delivery to finish (it is then queued)."""
        if self._delivering:
            self._deferred.append(change)
        return self._delivering

    @property
    def selected_position(self) -> int:
        """The token position the panels highlight: the chosen one, else the newest query."""
        if self.position != LATEST:
            return self.position
        if self.result is None:
            return -1
        return max(self.result.context_len, len(self.result.prompt_ids)) - 1

    # ------------------------------------------------------------ selections
    def set_layer(self, layer: int) -> None:
        if self._later(partial(self.set_layer, layer)):
            return
        layer = self._clamp(layer, self.result.n_layer if self.result else 1)
        if layer != self.layer:
            self.layer = layer
            self.layerChanged.emit(layer)

    def set_head(self, head: int) -> None:
        if self._later(partial(self.set_head, head)):
            return
        head = self._clamp(head, self.result.n_head if self.result else 1)
        if head != self.head:
            self.head = head
            self.headChanged.emit(head)

    def set_position(self, position: int) -> None:
        if self._later(partial(self.set_position, position)):
            return
        if position != self.position:
            self.position = position
            self.positionChanged.emit(position)

    def set_top_n(self, n: int) -> None:
        if self._later(partial(self.set_top_n, n)):
            return
        n = max(1, int(n))
        if n != self.top_n:
            self.top_n = n
            self.topNChanged.emit(n)

    def subscribe_theme(self, slot: Callable[[Any], None]) -> None:
        """Call ``slot(theme)`` whenever the theme changes (normal or projector mode)."""
        self._theme_subscribers.append(slot)

    def set_projector(self, on: bool) -> None:
        """Switch projector mode now, every subscriber at once."""
        for restyle in self.stage_projector(on):
            restyle()

    def stage_projector(self, on: bool) -> list[Callable[[], None]]:
        """Switch projector mode: the restyle of each subscriber, to be called in order (the window
        calls one per event-loop turn: all at once held the loop for 100-200 ms). Empty if the
        theme does not change."""
        return self.stage_theme(self._themes[bool(on)])

    def stage_theme(self, theme) -> list[Callable[[], None]]:
        """Switch to ``theme`` (a step of text zoom: ``app.window.theme.TEXT_SIZES``), as ``stage_projector``."""
        if theme is self.theme:
            return []
        self.theme = theme
        return [partial(slot, theme) for slot in self._theme_subscribers] + [partial(self.themeChanged.emit, theme)]

    @staticmethod
    def _clamp(value: int, count: int) -> int:
        return max(0, min(int(value), count - 1))
