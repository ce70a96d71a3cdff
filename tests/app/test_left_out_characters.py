"""A prompt holding a character the model's vocabulary has no token for (SmolLM2's has none for six
control characters): the tokenizer leaves it out, and the status line says so, naming it, whenever a
load, a prompt or a chat turn holds one."""

from __future__ import annotations

import pytest

from app.protocol import messages as p
from app.logic import wording
from app.host.session_host import SessionHost
from engine.chat import ChatTurn
from engine.random_model import TINY, write_random_model
from tests.engine.test_tokens import tokenizer_without


@pytest.fixture(scope="module")
def host(tmp_path_factory):
    folder = write_random_model(tmp_path_factory.mktemp("lossy") / "lossy-llama", "llama", 1, **TINY["llama"])  # a chat template
    tokenizer_without(folder, b"\x04\x13")
    replies = []
    host = SessionHost(replies.append, lambda request: None)
    host.replies = replies
    host.handle(p.Load(generation=1, source=str(folder), prompt="The cat\x04 sat"))
    yield host
    host.close()


def answer(host, request):
    host.handle(request)
    reply = host.replies[-1]
    assert isinstance(reply, p.Finished), reply
    return reply.result


def test_a_load_names_the_characters_left_out(host):
    loaded = host.replies[0].result
    assert loaded.facts.left_out == ("\x04",) and loaded.prompt_text == "The cat sat"
    assert "U+0004" in wording.result_status(loaded) and "has no token for" in wording.result_status(loaded)


def test_a_prompt_names_them_and_a_clean_one_says_nothing_of_them(host):
    lossy = answer(host, p.SetPrompt(generation=2, text="a\x13b\x04c\x13"))
    assert lossy.facts.left_out == ("\x13", "\x04")
    message = wording.result_status(lossy)
    assert "U+0013, U+0004" in message and "reads the prompt without them" in message
    clean = answer(host, p.SetPrompt(generation=3, text="abc"))
    assert clean.facts.left_out == () and "no token" not in wording.result_status(clean)


def test_a_chat_turn_names_them(host):
    turn = answer(host, p.SetChat(generation=4, turn=ChatTurn("be\x04 brief", "hi")))
    assert turn.facts.left_out == ("\x04",) and "U+0004" in wording.result_status(turn)
