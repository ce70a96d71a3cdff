"""What a person types while a model loads, and what the window draws after the engine died with an
edit pending: never lost, never a dead engine's session.

The prompt editor waits (its debounce) before it sends an edit; these tests lengthen that wait so
that the load's result is surely drawn while the edit is pending, the moment the defects happened."""

from __future__ import annotations

from PySide6.QtGui import QTextCursor

from app.protocol import messages as p

from .helpers import run

PROMPT = "The cat sat on the"


def type_at_end(qtbot, editor, text: str) -> None:
    editor.setFocus()
    editor.moveCursor(QTextCursor.End)
    qtbot.keyClicks(editor, text)


def hold_edits(window, ms: int = 60_000) -> None:
    """The editor sends its pending edit only after ``ms`` (or ``send_edits``)."""
    window.tokens._debounce.setInterval(ms)


def send_edits(window, qtbot):
    """Let the pending edit go, and wait for the engine to draw it."""
    window.tokens._debounce.setInterval(1)
    return run(qtbot, window, window.tokens._debounce.start, p.SetPrompt, timeout=60_000)


def engine_prompt(window) -> str:
    session = window.controller.engine.host.session
    return session.loaded.tokenizer.decode(session.prompt_ids)


def is_load(result) -> bool:
    return isinstance(result.request, p.Load)


def test_text_typed_while_a_load_finishes_is_kept(window, qtbot, demo_model):
    editor = window.tokens.editor
    hold_edits(window)
    with qtbot.waitSignal(window.resultApplied, timeout=60_000, check_params_cb=is_load):
        window.load_model(None, loaded=demo_model)  # Model → a model: it takes the editor's text
        type_at_end(qtbot, editor, " mat")
    assert editor.toPlainText() == PROMPT + " mat"
    assert editor.textCursor().position() == len(PROMPT + " mat")  # the cursor stays where the person typed
    send_edits(window, qtbot)
    assert engine_prompt(window) == PROMPT + " mat"


def test_text_typed_during_the_reload_after_a_death_is_kept(window, qtbot):
    editor = window.tokens.editor
    hold_edits(window)
    with qtbot.waitSignal(window.resultApplied, timeout=60_000, check_params_cb=is_load):
        window.controller.engine.died.emit(-9)  # the reload takes the editor's text as it is now
        type_at_end(qtbot, editor, " see w")
    assert editor.toPlainText() == PROMPT + " see w"
    assert editor.textCursor().position() == len(PROMPT + " see w")  # not back at the start
    qtbot.keyClicks(editor, "hy")  # goes on typing where the cursor is
    typed = PROMPT + " see why"
    assert editor.toPlainText() == typed
    send_edits(window, qtbot)
    assert engine_prompt(window) == typed


def test_a_death_with_a_too_long_edit_pending_shows_what_the_new_engine_holds(window, qtbot):
    run(qtbot, window, window.step, p.Step)
    run(qtbot, window, window.step, p.Step)
    n_positions = window.state.result.info.n_positions
    hold_edits(window)
    window.tokens.editor.setPlainText(" cat" * (n_positions + 20))  # too long: pending
    with qtbot.waitSignal(window.errorShown, timeout=60_000, check_params_cb=lambda m: "Step is off" in m):
        window.controller.engine.died.emit(-9)  # the reload cuts the prompt to fit, and runs first
        window.tokens._debounce.setInterval(1)
        window.tokens._debounce.start()  # then the edit is sent, and refused: too long
    qtbot.waitUntil(lambda: window.controller.idle, timeout=60_000)
    host = window.controller.engine.host
    qtbot.waitUntil(lambda: window.state.result.trace is None, timeout=10_000)  # what the new engine holds: no step
    shown = window.state.result
    assert host.session.n_steps == 0 and list(shown.prompt_ids) == list(host.session.prompt_ids)
    assert window.status_line.truncate_button.isVisibleTo(window)  # the refusal stays, with its offer
    assert "Step is off" in window.status_line.status_label.text()
    assert not window.commands.step_action.isEnabled()


def test_an_emptied_editor_gets_back_the_prompt_that_ran_when_the_engine_is_replaced(window, qtbot):
    """The death message promises the prompt is kept: with the editor emptied (nothing sent), the
    reload runs the prompt the window last ran, and the editor shows that prompt, not another."""
    window.tokens.editor.setPlainText("A dog ran")
    send_edits(window, qtbot)
    window.tokens.editor.setPlainText("")
    qtbot.waitUntil(lambda: not window.tokens._debounce.isActive(), timeout=5_000)  # emptied: nothing is sent
    with qtbot.waitSignal(window.resultApplied, timeout=60_000, check_params_cb=is_load):
        window.controller.engine.died.emit(-9)
    assert window.tokens.editor.toPlainText() == "A dog ran" == engine_prompt(window)
    assert window.commands.step_action.isEnabled()


def test_a_load_drawn_after_the_wait_never_overwrites_text_typed_since_it_was_sent(window, qtbot, demo_model):
    """However the timing falls (the editor's wait already over when the load is drawn), text typed
    after a load was sent stays in the editor, and it is what the engine runs (or refuses)."""
    editor = window.tokens.editor
    hold_edits(window)
    window.load_model(None, loaded=demo_model)  # sent with the editor's text, PROMPT
    type_at_end(qtbot, editor, " mat")
    window.tokens._debounce.stop()  # the wait is over, as if the load were drawn after it
    with qtbot.waitSignal(window.resultApplied, timeout=60_000, check_params_cb=is_load):
        pass
    assert editor.toPlainText() == PROMPT + " mat"
    send_edits(window, qtbot)
    assert engine_prompt(window) == PROMPT + " mat"


def send_edit_now(window) -> None:
    """The editor's wait is over: its text goes to the controller now."""
    window.tokens._debounce.stop()
    window.tokens._on_debounce_timeout()


def test_a_failed_load_while_an_edit_waits_runs_the_typed_text_on_the_model_the_engine_holds(window, qtbot, tiny_dir, tmp_path):
    """Type while a model loads (the edit waits behind the load), then open a folder that cannot be
    opened: the typed text is the one that runs, on the model the engine holds (the load made stale
    opened it), and the status line and the model label name that model."""
    broken = tmp_path / "no-config"
    broken.mkdir()
    window.load_model(str(tiny_dir))  # in flight until its reply is handled here
    window.tokens.editor.setPlainText("A dog ran")
    send_edit_now(window)  # waits behind the load
    with qtbot.waitSignal(window.resultApplied, timeout=60_000, check_params_cb=lambda r: isinstance(r.request, p.Refresh)):
        window.load_model(str(broken))
    name = window.state.result.info.name
    assert name == tiny_dir.name  # the engine holds the stale load's model
    assert window.status_line.status_label.text().endswith(f"Still using {name}.")
    assert window.status_line.model_label.text() == f"Model: {name}"
    assert window.state.result.prompt_text == window.tokens.editor.toPlainText() == "A dog ran" == engine_prompt(window)
    assert window.commands.step_action.isEnabled()
    stepped = run(qtbot, window, window.step, p.Step)
    assert stepped.prompt_text == "A dog ran"
