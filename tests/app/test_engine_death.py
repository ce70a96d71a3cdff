"""What the window shows when the engine dies (a thread engine's ``died`` signal makes the
controller replace it exactly as it replaces a dead engine process)."""

from __future__ import annotations

from app.window.controller import MAX_QUICK_DEATHS

from .helpers import run
from app.protocol import messages as p


def test_a_dead_engines_step_waiting_to_be_drawn_is_dropped(window, qtbot):
    """Found: at max speed a finished step waited in the window's draw timer; after the death it was
    drawn anyway, replacing the restart message, and shown until the new engine answered."""
    run(qtbot, window, window.step, p.Step)
    window.painter.fast = True  # max speed's frame: the next result waits up to 500 ms to be drawn
    drawn = []
    window.resultApplied.connect(drawn.append)
    with qtbot.waitSignal(window.controller.resultReady, timeout=20_000) as arrived:
        window.controller.step()
    assert window.painter._pending is arrived.args[0]  # waiting for its frame
    window.controller.engine.died.emit(-9)
    qtbot.wait(700)  # past the frame it was waiting for
    assert all(r is not arrived.args[0] for r in drawn)
    assert all(isinstance(r.request, p.Load) for r in drawn)  # only the new engine's load, if it is ready
    if not isinstance(window.state.result.request, p.Load):  # the new engine's load has not started drawing yet
        assert "stopped unexpectedly" in window.status_line.status_label.text()  # the message stays until then
    qtbot.waitUntil(lambda: isinstance(window.state.result.request, p.Load), timeout=60_000)
    assert window.state.result.trace is None


def test_after_quick_deaths_the_window_offers_a_restart(window, qtbot):
    for _ in range(MAX_QUICK_DEATHS):
        window.controller.engine.died.emit(1)
    assert window.controller.stopped
    assert window.status_line.restart_button.isVisibleTo(window) and window.commands.restart_action.isEnabled()
    assert "Restart the model" in window.status_line.status_label.text()
    window.step()  # refused in words
    assert "Restart the model" in window.status_line.status_label.text()
    window.status_line.restart_button.click()
    assert not window.status_line.restart_button.isVisibleTo(window)
    result = run(qtbot, window, lambda: None, p.Load, timeout=60_000)
    assert result.info.is_demo
    assert run(qtbot, window, window.step, p.Step).trace.step == 0
