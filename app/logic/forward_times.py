"""How long each decode step's forward pass took this session, with and without the KV cache.

Kept from the window's start, Qt-free, so that the KV cache view, built the first time it is shown,
still plots every step timed before (a result carries only its own step's time).
"""

from __future__ import annotations

from app.logic.state import AppState
from app.protocol.messages import SessionResult


class ForwardTimes:
    """(cached, context length) → forward ms of the decode steps of the model on screen."""

    def __init__(self, state: AppState):
        self.times: dict[tuple[bool, int], float] = {}
        self._model = None
        state.subscribe(self._on_state_result)

    def _on_state_result(self, result: SessionResult) -> None:
        if self._model is not result.info:  # another model: its times are another story
            self._model, self.times = result.info, {}
        for record in result.records[-1:]:
            if record.step > 0:  # decode steps: one new position each (the prefill ran the prompt)
                self.times[(record.kv.positions > 0, record.end)] = record.forward_ms
