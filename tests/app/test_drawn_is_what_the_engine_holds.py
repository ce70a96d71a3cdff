"""What the window draws is the session the engine holds, also when a step's result was handed to
the painter and became stale before its frame (a prompt typed meanwhile) and the prompt was then
refused: the painter dropped the step, the engine kept it (the chaos test's rare "drawn session
differs")."""

from __future__ import annotations

from time import perf_counter

from app.protocol import messages as p


def drawn(result) -> tuple:
    step = None if result.trace is None else result.trace.step
    return tuple(result.prompt_ids.tolist()), step, tuple(int(r.chosen) for r in result.records)


def test_a_step_dropped_by_the_painter_before_a_refused_prompt_is_drawn_after_all(window, qtbot):
    window.painter.fast = True  # as Play at max speed: a result waits up to 500 ms for its frame
    window.painter._last_draw = perf_counter() + 60  # its frame is a minute off: the step waits in the painter
    window.controller.step()
    qtbot.waitUntil(lambda: window.controller.idle and window.painter._pending is not None, timeout=20_000)
    too_long = " cat" * (window.state.result.info.n_positions + 20)
    with qtbot.waitSignal(window.errorShown, timeout=20_000, check_params_cb=lambda m: "Step is off" in m):
        window.controller.set_prompt(too_long)  # a restart: the waiting step is stale now, and then refused
    window.painter._last_draw = 0.0
    window.painter.fast = False
    window.painter.flush()
    qtbot.waitUntil(lambda: window.controller.idle and window.painter.settled, timeout=20_000)
    host = window.controller.engine.host
    assert host.session.n_steps == 1  # the engine kept the step
    shown = drawn(window.state.result)
    with qtbot.waitSignal(window.resultApplied, timeout=20_000, check_params_cb=lambda r: isinstance(r.request, p.Refresh)) as refreshed:
        window.controller.refresh()
    assert shown == drawn(refreshed.args[0]) and shown[1] == 0
