"""Chat turns and stop sequences in the window: the tokens panel's "Chat turn" renders a system and a
user message with the model's own chat template (its special tokens drawn as their own chips),
stepping stops at the end-of-turn token or at a stop sequence and the status line says which, chat
is off with a tooltip saying why for a model without a template, and a saved session reopens with
its chat turn and stop sequences."""

from __future__ import annotations

import pytest

from app.protocol import messages as p
from app.logic import stop_text
from app.window.main import parse_args
from engine import load_model
from engine.chat import ChatTurn, chat_prompt_ids
from engine.random_model import TINY, write_random_model

from .helpers import run, save

TURN = ChatTurn("Be brief.", "What is the capital of France?")


@pytest.fixture(scope="module")
def instruct(tmp_path_factory):
    """A tiny random Llama with grouped heads and the ChatML template (<|im_end|> ends a turn)."""
    return load_model(str(write_random_model(tmp_path_factory.mktemp("chat") / "tiny-instruct", "llama", seed=3, **TINY["llama"])))


@pytest.fixture
def chat_window(make_window, qtbot, instruct):
    """A window on the instruct model, switched to a chat turn as a person does it."""
    window = make_window()
    run(qtbot, window, lambda: window.load_model(None, loaded=instruct, prompt=TURN.user), p.Load)
    tokens = window.tokens
    assert tokens.chat_box.isEnabled() and not tokens.system_edit.isVisible()
    tokens.system_edit.blockSignals(True)  # typed before the box is ticked: ticking sends both at once
    tokens.system_edit.setText(TURN.system)
    tokens.system_edit.blockSignals(False)
    result = run(qtbot, window, lambda: tokens.chat_box.setChecked(True), p.SetChat)
    return window, result


def _end_of_turn(loaded) -> int:
    return loaded.tokenizer.hf.convert_tokens_to_ids("<|im_end|>")


def test_chat_turn_is_the_templates_tokens_with_special_chips(chat_window, instruct):
    window, result = chat_window
    assert result.chat == TURN and window.tokens.system_edit.isVisible()
    ids = chat_prompt_ids(instruct.tokenizer, TURN.user, TURN.system)
    assert result.prompt_ids.tolist() == ids
    chips = window.tokens.strip.chips
    assert [c.token_id for c in chips] == ids
    special = {c.piece for c in chips if c.special}
    assert special == {"<|im_start|>", "<|im_end|>"}
    assert not any(c.special for c in chips if c.piece not in special)
    assert "chat template" in window.status_line.status_label.text()


@pytest.mark.parametrize("view", ["overview", "flow"])
def test_on_a_1280_x_720_projector_every_chip_of_the_turn_is_reachable(chat_window, qtbot, view):
    """The template's tokens are the lesson of a chat turn: at 1280 x 720 in projector mode the chips
    take two rows, the newest in view, and the first (<|im_start|>) a scroll away."""
    window, _ = chat_window
    window.show_view(view)
    window.state.set_projector(True)
    window.resize(1280, 720)
    run(qtbot, window, window.step, p.Step)
    qtbot.wait(30)
    tokens = window.tokens
    scroll, strip = tokens.scroll, tokens.strip
    viewport = scroll.viewport()
    assert len({r.top() for r in strip.rects}) > 2 and viewport.height() >= strip.rows_height(2)
    assert viewport.rect().contains(strip.mapTo(viewport, strip.rects[-1].bottomRight()))  # the newest
    assert strip.chips[0].piece == "<|im_start|>"
    for i, rect in enumerate(strip.rects):  # every chip, the template's included, scrolls into view
        scroll.ensureVisible(rect.center().x(), rect.center().y(), 0, rect.height() // 2)
        assert viewport.rect().contains(strip.mapTo(viewport, rect.center())), (i, strip.chips[i].piece)


def test_stepping_stops_at_the_end_of_turn_and_says_so(chat_window, qtbot, instruct):
    window, _ = chat_window
    run(qtbot, window, window.step, p.Step)
    result = run(qtbot, window, lambda: window.controller.choose(_end_of_turn(instruct)), p.Choose)
    assert result.stopped and result.trace.stop_reason == "end_of_text"
    assert not window.commands.step_action.isEnabled()
    window.step()  # refused by the window: it says why
    assert window.status_line.status_label.text() == "Stopped: the model chose <|im_end|>."
    assert window.tokens.strip.chips[-1].special  # the end of turn, drawn as the special token it is


def test_a_stop_sequence_stops_play_and_is_named(chat_window, qtbot, instruct):
    window, _ = chat_window
    first = run(qtbot, window, window.step, p.Step).trace
    second = run(qtbot, window, window.step, p.Step).trace
    piece = instruct.tokenizer.token_bytes(second.chosen).decode("utf-8", "replace").strip()
    assert piece and piece not in instruct.tokenizer.decode(first.context_ids.tolist() + [first.chosen])
    run(qtbot, window, window.back, p.Back)
    window.tokens.stops_edit.setText(f"never written ∅, {piece}")
    result = run(qtbot, window, window.tokens.stops_edit.editingFinished.emit, p.SetStops)
    assert result.stop_sequences == ("never written ∅", piece) and not result.stopped
    result = run(qtbot, window, window.player.toggle, p.Step)  # Play: it stops by itself at the sequence
    assert result.trace.step == 1 and result.trace.stop_reason == "stop_sequence"
    qtbot.waitUntil(lambda: not window.player.playing)
    assert f"Stopped: the text reached the stop sequence {piece!r}." in window.status_line.status_label.text()


def test_unticking_chat_goes_back_to_the_plain_prompt(chat_window, qtbot, instruct):
    window, _ = chat_window
    result = run(qtbot, window, lambda: window.tokens.chat_box.setChecked(False), p.SetPrompt)
    assert result.chat is None and result.prompt_ids.tolist() == instruct.tokenizer.encode(TURN.user)
    assert not window.tokens.system_edit.isVisible()


def test_chat_is_off_with_a_reason_for_a_model_without_a_template(window, qtbot):
    box = window.tokens.chat_box
    assert not box.isEnabled() and "has no chat template" in box.toolTip()


def test_a_saved_chat_session_reopens_with_its_turn_and_stops(chat_window, qtbot, make_window, instruct, tmp_path):
    window, _ = chat_window
    window.tokens.stops_edit.setText("Paris, \\n")
    run(qtbot, window, window.tokens.stops_edit.editingFinished.emit, p.SetStops)
    run(qtbot, window, window.step, p.Step)
    save(qtbot, window, tmp_path / "chat.npz")

    other = make_window()
    run(qtbot, other, lambda: other.load_model(None, loaded=instruct, prompt="Something else"), p.Load)
    assert not other.tokens.chat_box.isChecked()
    result = run(qtbot, other, lambda: other.open_session(str(tmp_path / "chat.npz")), p.OpenSession)
    assert result.chat == TURN and result.stop_sequences == ("Paris", "\n") and result.can_step
    tokens = other.tokens
    assert tokens.chat_box.isChecked() and tokens.system_edit.text() == TURN.system and tokens.prompt() == TURN.user
    assert stop_text.parse(tokens.stops_edit.text()) == ("Paris", "\n")
    assert other.controller.stop_sequences == ("Paris", "\n")


def test_stop_text_reads_what_a_person_types():
    assert stop_text.parse("Paris, \\n,, \\sx\\s , a\\,b, Paris") == ("Paris", "\n", " x ", "a,b")
    for sequences in [("Paris", "\n"), (" x ", "a,b", "back\\slash", "\t")]:
        assert stop_text.parse(stop_text.join(sequences)) == sequences


def test_the_command_line_takes_chat_system_and_stops():
    args = parse_args(["--chat", "--system", "Be brief.", "--prompt", "Hi", "--stop", "Paris", "--stop", "\n"])
    assert (args.chat, args.system, args.prompt, args.stop) == (True, "Be brief.", "Hi", ["Paris", "\n"])


def test_a_model_without_a_template_unticks_chat_and_the_prompt_runs_plain(chat_window, qtbot, demo_model):
    """Chat turn cannot stay ticked on a model that has no template (greyed out, it could not be
    unticked), also when the person types while that model loads: the edit then runs as a plain
    prompt."""
    window, _ = chat_window
    tokens = window.tokens
    tokens._debounce.setInterval(60_000)  # the edit waits until the load has been drawn
    with qtbot.waitSignal(window.resultApplied, timeout=60_000, check_params_cb=lambda r: isinstance(r.request, p.Load)):
        window.load_model(None, loaded=demo_model)
        qtbot.keyClicks(tokens.editor, " Answer")
    assert not tokens.chat_box.isEnabled() and not tokens.chat_box.isChecked()
    assert tokens.chat_turn() is None and not tokens.system_edit.isVisible()
    tokens._debounce.setInterval(1)
    result = run(qtbot, window, tokens._debounce.start, p.SetPrompt, timeout=60_000)
    assert result.chat is None and result.prompt_text == tokens.editor.toPlainText()
    assert run(qtbot, window, window.step, p.Step).trace is not None


def test_stop_sequences_typed_go_out_without_enter(chat_window, qtbot):
    """Clicking Step in the toolbar takes no focus from "stop at…": the typed sequences are sent after
    the same short wait as the prompt, not only on Enter."""
    window, _ = chat_window
    window.tokens.stops_edit.setFocus()
    result = run(qtbot, window, lambda: qtbot.keyClicks(window.tokens.stops_edit, "Paris"), p.SetStops, timeout=5_000)
    assert result.stop_sequences == ("Paris",) and window.controller.engine.host.session.stop_sequences == ("Paris",)
