"""Small things a teacher hits: ``--view overview``; ``--layer``/``--head`` out of
range refused with status 2 even without ``--steps``; page buttons and panel titles with the same
names; a status line that stays one line at 1280 x 720 in projector mode and counts as the chips do."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from app.protocol import messages as p
from app.window.main import parse_args
from app.logic.views import VIEW_BUTTONS, VIEWS

from .helpers import run

ROOT = Path(__file__).resolve().parents[2]


def test_the_flow_comes_first_then_the_overview(window):
    assert parse_args(["--view", "overview"]).view == "overview" and parse_args([]).view == "flow"
    assert list(VIEWS)[:2] == ["flow", "overview"] and VIEW_BUTTONS["overview"] == "Overview"
    window.show_view("inside")
    window.show_view("overview")
    assert window.views.currentIndex() == 1 and window.commands.view_buttons.button(1).text() == "Overview"
    assert window.commands.view_buttons.button(1).isChecked()


@pytest.mark.slow  # a whole app run in a child process
@pytest.mark.parametrize("extra", [[], ["--screenshot", "never.png"]], ids=["no-steps", "screenshot"])
def test_a_layer_or_head_out_of_range_is_refused_with_status_2(tmp_path, extra):
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", PYTHONPATH=str(ROOT), HOME=str(tmp_path), XDG_CONFIG_HOME=str(tmp_path))
    extra = [str(tmp_path / e) if e.endswith(".png") else e for e in extra]
    done = subprocess.run(
        [sys.executable, "-m", "app", "--model", str(ROOT / "resources/models/gpt2-tiny-demo"), "--head", "9", *extra],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=180,
    )
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert done.returncode == 2, done.stderr
    assert errors == ["error: --layer 0 --head 9 is not in gpt2-tiny-demo: it has layers 0 to 3 and heads 0 to 3."]
    assert not (tmp_path / "never.png").exists()


def test_page_buttons_and_panel_titles_use_the_same_names(window, qtbot):
    window.state.set_projector(True)  # several pages: their buttons show
    window.resize(1280, 720)
    qtbot.waitUntil(lambda: len(window.overview.pages) > 1, timeout=5_000)
    buttons = " · ".join(b.text() for b in window.overview.page_buttons.buttons())
    for panel in window.overview.panels():
        number, name = panel.short_title.split(" ", 1)
        assert panel.title().startswith(f"{number} · {name}"), (panel.short_title, panel.title())
        assert panel.short_title in buttons


def test_the_status_line_is_one_line_and_counts_as_the_chips_do(window, qtbot):
    window.state.set_projector(True)
    window.resize(1280, 720)
    for _ in range(3):
        result = run(qtbot, window, window.step, p.Step)
        qtbot.wait(10)
        label = window.status_line.status_label
        assert label.heightForWidth(label.width()) <= label.fontMetrics().height() + 2, label.text()
        generated = int(re.search(r"(\d+)</b> generated", window.tokens.counts.text()).group(1))
        assert label.text().startswith(f"Token {generated} ") and generated == result.trace.step + 1


def test_a_steps_status_line_is_whole_at_1024x768_projector(window, qtbot):
    """A step's line drops its details (the prefill's positions, the time) rather than end in " …":
    "Token 1 (prefill, 5 positions, 24 ms): “␣of”, sampling p 3.8%, model p 2.2%, …" cut the rank
    at 1024 x 768 projector. The whole sentence stays in the tooltip."""
    window.state.set_projector(True)
    window.resize(1024, 768)
    label = window.status_line.status_label
    for _ in range(3):
        result = run(qtbot, window, window.step, p.Step)
        qtbot.wait(20)
        shown = label.shown()
        assert "…" not in shown and shown.startswith(f"Token {result.trace.step + 1}") and "rank" in shown, shown
        assert label.fontMetrics().horizontalAdvance(shown) <= label.contentsRect().width()
        assert label.toolTip() == label.text() and "ms)" in label.text()


def test_a_stopped_steps_status_line_keeps_why_it_stopped_at_1280x720_projector(window, qtbot):
    """The step that reaches a stop sequence: its line keeps the stop's sentence whole and drops the
    numbers first (the chat picture at 1280 x 720 projector read "… rank 1. Stopped: the text
    reached the stop …"). The whole sentence stays in the tooltip."""
    window.state.set_projector(True)
    window.resize(1280, 720)
    window.tokens.set_stops(("the",))
    window.controller.set_stops(("the",))
    label = window.status_line.status_label
    for _ in range(40):
        result = run(qtbot, window, window.step, p.Step)
        if result.trace.stop_reason:
            break
    assert result.trace.stop_reason == "stop_sequence", result.trace.stop_reason
    qtbot.wait(20)
    shown = label.shown()
    assert "…" not in shown and shown.endswith(result.trace.stop_message), shown
    assert label.fontMetrics().horizontalAdvance(shown) <= label.contentsRect().width()
    assert label.toolTip() == label.text() and "rank" in label.text()


def test_a_long_message_keeps_the_status_line_one_line_and_is_whole_in_its_tooltip(window, qtbot):
    """A message longer than the line (an error naming a file, say) shows its first whole words and
    " …" on one line; the whole message is the tooltip. Wrapped, it made the line two or three lines
    tall and took the height from the views above."""
    window.state.set_projector(True)
    window.resize(1280, 720)
    label = window.status_line.status_label
    message = ("The session file /home/teacher/Documents/lessons/week 3/the capital of France.npz could not be "
               "read: it was written by a newer nexttoken, which stores the attention of every layer and head.")
    window.status_line.say(message, error=True)
    qtbot.wait(20)
    assert label.height() <= label.fontMetrics().height() + 4
    assert label.toolTip() == message == label.text()
    shown = label.shown()
    assert shown.endswith(" …") and message.startswith(shown[:-2] + " ")  # whole words, then the mark
    assert label.fontMetrics().horizontalAdvance(shown) <= label.contentsRect().width()
    window.status_line.say("Stepped.")
    assert label.shown() == "Stepped." and label.toolTip() == "Stepped."


LONG_PROMPT = ("Once upon a time, in a small village at the edge of a great forest, there lived an old clockmaker "
               "who repaired every clock in the valley, and each morning the children gathered at his window")


def test_a_long_prompt_in_projector_mode_shows_three_lines_and_reaches_its_first_token(window, qtbot):
    window.state.set_projector(True)
    window.resize(1280, 720)
    window.tokens.editor.setPlainText(LONG_PROMPT)
    run(qtbot, window, window.tokens._debounce.start, p.SetPrompt, timeout=60_000)
    run(qtbot, window, window.step, p.Step)
    qtbot.wait(50)
    assert window.height() <= 720  # the room comes from beside the chips, not from a taller window
    editor = window.tokens.editor
    assert editor.viewport().height() >= 3 * editor.fontMetrics().lineSpacing()
    sentence = window.tokens.sentence.text()
    assert sentence.startswith("… ") and sentence[2] != " "  # its end after the marker, cut at a word
    cut = sentence[2:].split(" ")[0]
    assert f" {cut} " in f" {LONG_PROMPT} "
    scroll, first = window.tokens.scroll, window.tokens.strip.rects[0]
    scroll.verticalScrollBar().setValue(scroll.verticalScrollBar().minimum())
    scroll.ensureVisible(first.center().x(), first.center().y())
    qtbot.wait(10)
    assert scroll.viewport().rect().contains(window.tokens.strip.mapTo(scroll.viewport(), first.center()))


@pytest.mark.parametrize(("size", "projector"), [((1024, 768), False), ((1366, 768), False), ((1280, 720), True)])
def test_the_chips_of_a_longer_prompt_never_squeeze_the_panels_below_them(window, qtbot, size, projector):
    """Sixteen tokens wrap into a second row of chips beside the editor: the rows the chips take must
    leave every panel under them the height it needs (else its text runs over its plot)."""
    window.state.set_projector(projector)
    window.resize(*size)
    window.tokens.editor.setPlainText("The quick brown fox jumps over the lazy dog because it")
    run(qtbot, window, window.tokens._debounce.start, p.SetPrompt, timeout=60_000)
    for _ in range(5):
        run(qtbot, window, window.step, p.Step)
    qtbot.wait(50)
    assert window.height() <= size[1]
    for panel in window.overview.panels():
        if panel.isVisible():
            assert panel.height() >= panel.minimumSizeHint().height(), type(panel).__name__


@pytest.mark.parametrize("view", ["flow", "overview"])
@pytest.mark.parametrize(("size", "projector"), [((1280, 720), True), ((1024, 768), True), ((1024, 768), False)])
def test_two_rows_of_chips_the_newest_in_view_whole_rows_only(window, qtbot, size, projector, view):
    """In the Flow and the Overview, the chips of a long prompt take two rows at least (the Overview
    of a short projector window showed one), the newest chip wholly in view and every row in view
    whole (no sliver of a row above them, under the sentence), and scroll back to the first."""
    window.show_view(view)
    window.state.set_projector(projector)
    window.resize(*size)
    window.tokens.editor.setPlainText(LONG_PROMPT)
    run(qtbot, window, window.tokens._debounce.start, p.SetPrompt, timeout=60_000)
    run(qtbot, window, window.step, p.Step)
    qtbot.wait(50)
    tokens = window.tokens
    scroll, strip = tokens.scroll, tokens.strip
    view = scroll.viewport()
    assert view.isVisible()
    rows = sorted({r.top() for r in strip.rects})
    assert len(rows) > 2  # more rows than are shown: the test is about scrolling
    assert view.height() >= strip.rows_height(2)
    newest = strip.rects[-1]
    assert view.rect().contains(strip.mapTo(view, newest.topLeft())) and view.rect().contains(strip.mapTo(view, newest.bottomRight()))
    bar = scroll.verticalScrollBar()
    for value in (bar.maximum(), bar.maximum() - 7, 0):  # a wheel's page stops between rows: it goes on to a row's edge
        bar.setValue(value)
        top = bar.value()
        assert any(r - strip.GAP == top for r in rows) or top == 0, top
    assert view.rect().contains(strip.mapTo(view, strip.rects[0].center()))
