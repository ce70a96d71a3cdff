"""Stop sequences (every model) and chat turns through the tokenizer's own chat template."""

from __future__ import annotations

import pytest

from engine import SamplingSettings, Session, load_model
from engine.chat import chat_prompt_ids
from engine.cli import main as cli_main
from engine.errors import GenerationStopped, PromptError
from engine.random_model import TINY, write_random_model

PROMPT = "The database stores each row of a table"


@pytest.fixture(scope="module")
def instruct(tmp_path_factory):
    """A tiny random Llama with the ChatML tokenizer (<|im_start|>, <|im_end|> as end of turn)."""
    return load_model(str(write_random_model(tmp_path_factory.mktemp("chat") / "tiny-instruct", "llama", seed=3, **TINY["llama"])))


def _free_run(loaded, steps=8) -> list[bytes]:
    session = Session(loaded, SamplingSettings(greedy=True), max_new_tokens=steps)
    session.set_prompt(PROMPT)
    return [loaded.tokenizer.token_bytes(session.step().chosen) for _ in range(steps)]


def test_a_stop_sequence_across_two_tokens_stops_at_the_second_and_is_named(demo_model):
    pieces = _free_run(demo_model, 16)
    def spanning(i):  # the last byte of one token and the first of the next, not already in the prompt
        both = pieces[i - 1][-1:] + pieces[i][:1]
        return both.decode() if len(both) == 2 and both.isascii() and both.decode() not in PROMPT else None

    k = next(i for i in range(2, len(pieces)) if spanning(i))
    sequence = spanning(k)
    session = Session(demo_model, SamplingSettings(greedy=True), max_new_tokens=16, stop_sequences=["never written ∅", sequence])
    session.set_prompt(PROMPT)
    traces = []
    with pytest.raises(GenerationStopped):
        while True:
            traces.append(session.step())
    first = next(i for i in range(len(pieces)) if sequence.encode() in PROMPT.encode() + b"".join(pieces[: i + 1]))
    assert len(traces) == first + 1 <= k + 1
    assert traces[-1].stop_reason == "stop_sequence"
    assert traces[-1].stop_message == f"Stopped: the text reached the stop sequence {sequence!r}."


def test_a_stop_sequence_in_the_prompt_alone_does_not_stop(instruct):
    session = Session(instruct, SamplingSettings(greedy=True), max_new_tokens=3, stop_sequences=["database"])
    session.set_prompt(PROMPT)
    assert session.step().stop_reason is None


def test_chat_prompt_is_the_tokenizers_template_and_stops_at_end_of_turn(instruct):
    tok = instruct.tokenizer
    ids = chat_prompt_ids(tok, "What is the capital of France?", system="Be brief.")
    expected = tok.hf.apply_chat_template(
        [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "What is the capital of France?"}],
        add_generation_prompt=True, tokenize=True)["input_ids"]
    assert ids == list(expected)
    start, end = tok.hf.convert_tokens_to_ids("<|im_start|>"), tok.hf.convert_tokens_to_ids("<|im_end|>")
    assert ids.count(start) == 3 and ids.count(end) == 2  # system, user, and the assistant's opened turn
    assert tok.piece(start) == "<|im_start|>"  # one chip for the special token, not its characters
    session = Session(instruct, SamplingSettings(greedy=True), max_new_tokens=20)
    session.set_prompt_ids(ids)
    session.step()
    trace = session.choose(end)  # the assistant ends its turn
    assert trace.stop_reason == "end_of_text" and trace.stop_message == "Stopped: the model chose <|im_end|>."
    with pytest.raises(GenerationStopped):
        session.step()


def test_chat_needs_a_template(demo_model):
    with pytest.raises(PromptError, match="no chat template"):
        chat_prompt_ids(demo_model.tokenizer, "Hello")


def test_cli_stop_flag_names_the_sequence(instruct, capsys):
    pieces = _free_run(instruct, 4)
    sequence = pieces[2].decode("utf-8", errors="ignore").strip() or pieces[2].decode("latin-1")
    code = cli_main(["--model", instruct.info.source, "--prompt", PROMPT, "--greedy", "--steps", "4", "--stop", sequence])
    assert code == 0
    assert f"Stopped: the text reached the stop sequence {sequence!r}." in capsys.readouterr().out
