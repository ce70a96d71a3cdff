"""A model loaded with a chat turn longer than its context: the start of the user's message is cut (the
template's special tokens and the system message stay) and the status line says so, as for a plain
prompt; a template and system message that alone leave no room are refused in one line, and the
model still loads, on the user's text as a plain prompt. Run on the session host (no window)."""

from __future__ import annotations

import pytest

from app.protocol import messages as p
from app.logic import wording
from app.host.session_host import SessionHost
from engine import load_model
from engine.chat import ChatTurn, chat_prompt_ids
from engine.defaults import truncation_keeps
from engine.random_model import TINY, write_random_model

N_POSITIONS = 64
LONG_USER = " ".join(f"word{i}" for i in range(60))  # far more than 64 tokens


@pytest.fixture(scope="module")
def short_instruct(tmp_path_factory):
    """A tiny random Llama with the ChatML template that reads 64 positions."""
    config = TINY["llama"] | dict(max_position_embeddings=N_POSITIONS)
    return load_model(str(write_random_model(tmp_path_factory.mktemp("short") / "short-instruct", "llama", seed=3, **config)))


def _load(loaded, turn: ChatTurn):
    replies = []
    host = SessionHost(replies.append, lambda request: None)
    host.handle(p.Load(loaded=loaded, prompt=turn.user, chat=turn))
    (reply,) = replies
    return host, reply


def test_a_long_users_message_is_cut_so_the_turn_fits(short_instruct):
    turn = ChatTurn("Be brief.", LONG_USER)
    whole = chat_prompt_ids(short_instruct.tokenizer, turn.user, turn.system)
    assert len(whole) > N_POSITIONS
    host, reply = _load(short_instruct, turn)
    assert isinstance(reply, p.Finished), reply
    result = reply.result
    kept = result.chat
    assert kept.system == turn.system and kept.user and LONG_USER.endswith(kept.user) and kept.user != LONG_USER
    ids = result.prompt_ids.tolist()
    assert ids == chat_prompt_ids(short_instruct.tokenizer, kept.user, kept.system)  # the template's own rendering
    assert len(ids) <= truncation_keeps(N_POSITIONS)
    longer = LONG_USER[-len(kept.user) - 8:]  # a few more words of the message would not have fitted
    assert len(chat_prompt_ids(short_instruct.tokenizer, longer, turn.system)) > truncation_keeps(N_POSITIONS)
    assert (result.facts.kept, result.facts.whole) == (len(ids), len(whole))
    status = wording.result_status(result)
    assert f"cut to {len(ids)} of its {len(whole)} tokens" in status and "user's message" in status
    assert host.session.step() is not None  # the turn runs


def test_a_template_that_alone_does_not_fit_is_refused_and_the_model_loads_plain(short_instruct):
    turn = ChatTurn("You are a careful assistant. " * 8, "What is the capital of France?")
    assert len(chat_prompt_ids(short_instruct.tokenizer, "x", turn.system)) > truncation_keeps(N_POSITIONS)
    host, reply = _load(short_instruct, turn)
    assert isinstance(reply, p.Finished), reply
    result = reply.result
    assert result.chat is None and result.prompt_ids.tolist() == short_instruct.tokenizer.encode(turn.user)
    status = wording.result_status(result)
    assert "\n" not in status
    assert status.startswith("The chat turn does not fit") and "plain prompt" in status and "Loaded" in status
    assert host.session.step() is not None  # usable: it steps


def test_the_window_shows_the_cut_turn_and_says_so(make_window, qtbot, short_instruct):
    window = make_window()
    turn = ChatTurn("Be brief.", LONG_USER)
    with qtbot.waitSignal(window.resultApplied, timeout=30_000) as applied:
        window.tokens.set_chat(turn)
        window.load_model(None, loaded=short_instruct, prompt=turn.user, chat=turn)
    result = applied.args[0]
    assert isinstance(result.request, p.Load) and result.chat.user != LONG_USER
    tokens = window.tokens
    assert tokens.chat_box.isChecked() and tokens.system_edit.text() == "Be brief." and tokens.prompt() == result.chat.user
    assert window.status_line.status_label.text().startswith(f"The chat turn was cut to {len(result.prompt_ids)} of its")
