"""Real weights, offline: SmolLM2-135M-Instruct as scripts/fetch_smollm2.py converts it (scripts/setup.sh
runs it, in CI too). Skipped where the folder is missing (a set-up without network)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from transformers import AutoModelForCausalLM

from engine import SamplingSettings, Session, load_model, paths

pytestmark = pytest.mark.skipif(
    paths.offline_model() is None,
    reason=f"{paths.offline_model_dir()} is missing: run scripts/fetch_smollm2.py (scripts/setup.sh does) to fetch it",
)


@pytest.fixture(scope="module")
def smollm2():
    return load_model(str(paths.offline_model()))


def test_it_loads_as_a_llama_with_grouped_heads(smollm2):
    info = smollm2.info
    assert (info.family, info.n_layer, info.n_head, info.kv_heads, info.d_model, info.vocab_size) == ("Llama", 30, 9, 3, 576, 49152)
    assert "dequantized" in (paths.offline_model() / "MODEL_CARD.md").read_text(encoding="utf-8")


def test_greedy_capital_of_france_is_paris(smollm2):
    session = Session(smollm2, SamplingSettings(greedy=True))
    session.set_prompt("The capital of France is")
    assert session.step().chosen_piece == "␣Paris"


def test_engine_logits_equal_the_plain_model(smollm2):
    session = Session(smollm2, SamplingSettings(greedy=True))
    ids = session.set_prompt("Once upon a time, there was a little")
    traces = [session.step() for _ in range(3)]
    plain = AutoModelForCausalLM.from_pretrained(paths.offline_model(), dtype=torch.float32, local_files_only=True).eval()
    with torch.no_grad():
        logits = plain(torch.tensor([ids + [t.chosen for t in traces]])).logits[0]
    for k, trace in enumerate(traces):
        np.testing.assert_allclose(trace.record.logits, logits[len(ids) - 1 + k].numpy(), atol=1e-4, rtol=0)


def test_chat_template_answer_names_paris_and_stops_at_end_of_turn(smollm2):
    hf = smollm2.tokenizer.hf
    ids = hf.apply_chat_template([{"role": "user", "content": "What is the capital of France?"}],
                                 add_generation_prompt=True, tokenize=True)
    ids = ids["input_ids"] if isinstance(ids, dict) or hasattr(ids, "keys") else ids
    session = Session(smollm2, SamplingSettings(greedy=True), max_new_tokens=30)
    session.set_prompt_ids(ids)
    while session.stop_reason()[0] is None:
        session.step()
    answer = smollm2.tokenizer.decode([r.chosen for r in session.records])
    assert "Paris" in answer
    assert session.stop_reason()[0] == "end_of_text" and session.records[-1].chosen == hf.convert_tokens_to_ids("<|im_end|>")
