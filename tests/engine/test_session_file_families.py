"""Session files of models other than GPT-2 (a Llama with grouped key/value heads, a GraniteMoe): every
branch and every recorded value round-trips exactly, with the model and without it, and so do the
model's family and shape, the KV cache's widths, a chat turn and the stop sequences."""

from __future__ import annotations

from dataclasses import replace

import pytest

from engine import SamplingSettings, Session, load_model
from engine.chat import ChatTurn
from engine.random_model import TINY, write_random_model
from engine.session_read import open_session, read_session
from engine.session_write import save_session

from .test_session_file import assert_same_session, branchy_session


@pytest.fixture(scope="module", params=("llama", "granitemoe"))
def family_model(request, tmp_path_factory):
    folder = tmp_path_factory.mktemp(request.param) / f"tiny-{request.param}"
    return load_model(str(write_random_model(folder, request.param, seed=4, **TINY[request.param])))


@pytest.fixture(scope="module")
def original(family_model):
    session = branchy_session(family_model)
    session.stop_sequences = ("never written ∅", "\n\n")
    return session


@pytest.fixture(scope="module")
def saved(original, tmp_path_factory):
    return read_session(save_session(original, tmp_path_factory.mktemp("saved") / "family"))


def test_the_model_is_not_gpt2_and_has_grouped_heads(family_model):
    info = family_model.info
    assert info.family in ("Llama", "GraniteMoe") and info.kv_heads == 2 < info.n_head == 4
    assert info.chat_template and family_model.tokenizer.eos_id in info.special_ids


def test_round_trip_with_the_same_model(saved, original, family_model):
    session, note = open_session(saved, family_model)
    assert "stepping can go on" in note and session.loaded is family_model
    assert_same_session(original, session)
    assert session.stop_sequences == original.stop_sequences and session.chat is None


def test_view_only_keeps_the_family_the_heads_and_the_kv_widths(saved, original):
    session, note = open_session(saved, None)
    assert "not loaded" in note and session.loaded.model is None
    assert saved.info == original.info  # family, key/value heads, head width, active parameters, chat template
    assert session.info == original.info
    assert_same_session(original, session)  # the records' KVStats too: grouped widths, not d_model
    kv = session.tree.record(session.node).kv
    assert kv.width == original.info.kv_heads * original.info.head_dim == original.info.d_model // 2
    assert kv.bytes_per_position == original.tree.record(original.node).kv.bytes_per_position == kv.full_heads_bytes_per_position // 2
    assert session.loaded.tokenizer.eos_id == original.loaded.tokenizer.eos_id


def test_a_chat_turn_and_stop_sequences_round_trip(family_model, tmp_path):
    session = Session(family_model, SamplingSettings(temperature=0.9, seed=5))
    turn = ChatTurn(system="Be brief.", user="What is the capital of France?")
    session.set_chat(turn)
    session.stop_sequences = ("Paris", "\n")
    for _ in range(3):
        session.step()
    session.rewind(1)
    session.choose(int(session.trace().candidate_ids[1]))
    reopened, _ = open_session(read_session(save_session(session, tmp_path / "chat.npz")), family_model)
    assert reopened.chat == turn and reopened.stop_sequences == ("Paris", "\n")
    assert_same_session(session, reopened)
    viewed, _ = open_session(read_session(tmp_path / "chat.npz"), None)
    assert viewed.chat == turn and viewed.stop_sequences == ("Paris", "\n")
    assert replace(viewed.info, source="") == replace(session.info, source="")
