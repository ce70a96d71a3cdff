"""``--chat --system --stop`` from the command line reach the window: its Chat turn box is ticked, the
system message and the user's text are in their editors, the stop box and the controller hold the stop
sequences, and the engine's session has the same turn and stops. A real run of ``main`` in a child
process, on a tiny random Llama with a chat template."""

from __future__ import annotations

import pytest

from engine.random_model import TINY, write_random_model

from .helpers import run_main_in_child

REPORT = """
seen.update(
    chat_box=tokens.chat_box.isChecked() and tokens.chat_box.isEnabled(), system=tokens.system_edit.text(), user=tokens.prompt(),
    stop_box=stop_text.parse(tokens.stops_edit.text()), controller_stops=window.controller.stop_sequences,
    engine_chat=result.chat and [result.chat.system, result.chat.user], engine_stops=result.stop_sequences,
    special_chips=sum(c.special for c in tokens.strip.chips),
)
"""


@pytest.mark.slow  # over 5 s (a whole app run)
def test_chat_system_and_stop_flags_reach_the_window(tmp_path):
    folder = write_random_model(tmp_path / "tiny-instruct", "llama", seed=3, **TINY["llama"])
    argv = ["--model", str(folder), "--prompt", "What is the capital of France?", "--chat", "--system", "Be brief.",
            "--stop", "Paris", "--stop", "a, b", "--engine", "thread", "--size", "1280x720",
            "--screenshot", str(tmp_path / "shot.png")]
    seen = run_main_in_child(tmp_path, argv, REPORT)
    assert seen["code"] == 0, seen
    assert seen["chat_box"] is True, seen  # ticked and enabled: before, the first load went out as a plain prompt
    assert (seen["system"], seen["user"]) == ("Be brief.", "What is the capital of France?")
    assert seen["stop_box"] == seen["controller_stops"] == seen["engine_stops"] == ["Paris", "a, b"]
    assert seen["engine_chat"] == ["Be brief.", "What is the capital of France?"]
    assert seen["special_chips"] >= 4  # <|im_start|> and <|im_end|> of the system and user turns, the assistant's opening
