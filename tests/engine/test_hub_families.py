"""Downloading the model families by the names the README recommends, from the stand-in hub
(tests/hub_server.py): a tiny random model of each family is served under the real repository's
name, with its chat template in ``chat_template.jinja`` as newer instruct repositories keep it, and
with files a download must not fetch. The download takes what the family needs, and the folder it
makes loads as that family, with the chat template, and steps a chat turn."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.chat import ChatTurn
from engine.loading import load_model
from engine.random_model import TINY, write_random_model
from engine.session import Session
from tests.hub_server import FakeHub, point_client_at

REPOS = {  # repository name: (model_type, the family's name in the engine)
    "HuggingFaceTB/SmolLM2-135M-Instruct": ("llama", "Llama"),
    "Qwen/Qwen2.5-0.5B-Instruct": ("qwen2", "Qwen2"),
    "Qwen/Qwen3-0.6B": ("qwen3", "Qwen3"),
    "ibm-granite/granite-3.1-1b-a400m-instruct": ("granitemoe", "GraniteMoe"),
}
NEEDED = {"config.json", "generation_config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json",
          "chat_template.jinja"}
NOT_NEEDED = {"onnx/model.onnx": b"\x03" * 1000, "pytorch_model.bin": b"\x01" * 3000, "README.md": b"# random\n"}


def served_folder(folder: Path, model_type: str) -> Path:
    """A tiny random model of ``model_type`` with its chat template moved to chat_template.jinja."""
    write_random_model(folder, model_type, **TINY[model_type])
    config = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))
    (folder / "chat_template.jinja").write_text(config.pop("chat_template"), encoding="utf-8")
    (folder / "tokenizer_config.json").write_text(json.dumps(config, indent=2), encoding="utf-8")
    return folder


@pytest.mark.parametrize("repo", list(REPOS))
def test_a_family_downloads_by_its_name_and_steps_a_chat_turn(repo, tmp_path, monkeypatch):
    model_type, family = REPOS[repo]
    source = served_folder(tmp_path / "source", model_type)
    with FakeHub.from_folder(repo, source, extra=NOT_NEEDED) as hub:
        point_client_at(monkeypatch, hub.endpoint, tmp_path / "hf-home" / "hub")
        loaded = load_model(repo)
        asked = {r.path.split("/resolve/", 1)[1].split("/", 1)[1] for r in hub.requests if "/resolve/" in r.path}
    assert asked == NEEDED
    info = loaded.info
    assert (info.name, info.family, info.chat_template, info.is_demo) == (repo, family, True, False)
    assert info.n_kv_heads == TINY[model_type]["num_key_value_heads"]
    session = Session(loaded)
    ids = session.set_chat(ChatTurn("Be brief.", "What is the capital of France?"))
    assert ids[0] in info.special_ids and loaded.tokenizer.decode(ids).startswith("<|im_start|>system\nBe brief.")
    record = session.step().record
    assert record.logits.shape == (TINY[model_type]["vocab_size"],)
