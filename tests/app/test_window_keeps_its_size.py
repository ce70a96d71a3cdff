"""The window keeps the size it was given: a change of focus or of page never grows it past its
screen (found by the chaos test: focusing the prompt on a 1280 x 720 projector, then picturing a
panel, left the window 20-50 px taller than the screen)."""

from __future__ import annotations

from app.protocol import messages as p

from .helpers import run


def test_focusing_the_prompt_and_picturing_a_panel_on_a_projector_keeps_the_window_on_its_screen(window, qtbot, tmp_path):
    window.resize(1280, 720)
    window.commands.projector_action.trigger()
    for text in ("The dog sat on the mat", "🐈" * 40):
        run(qtbot, window, lambda: window.tokens.editor.setPlainText(text), p.SetPrompt)
        run(qtbot, window, window.step, p.Step)
        for target in (window.tokens, *window.overview.panels()):
            window.resize(1280, 720)
            qtbot.wait(50)
            window.focus.toggle(window.tokens)
            qtbot.wait(10)
            window.exporter.export_picture(target, tmp_path / "panel.png")
            qtbot.waitUntil(lambda: window.exporter.writer.pending == (), timeout=20_000)
            window.focus.toggle(None)
            qtbot.wait(100)
            assert (window.width(), window.height()) == (1280, 720), (text[:8], target.title())
