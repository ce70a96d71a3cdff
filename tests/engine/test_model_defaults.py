"""A model folder's own sampling settings: its generation_config.json, read by ``generate``'s rules
(sampling only with do_sample true, an unset top-k meaning 50), for the terminal and the window."""

from __future__ import annotations

import json

import pytest

from engine.cli import main
from engine.defaults import DEFAULT_SETTINGS, model_settings, read_generation_config
from engine.random_model import set_generation_values, write_random_gpt2
from engine.sampling import SamplingSettings

TINY_GPT2 = dict(n_layer=1, n_head=2, n_embd=16, n_positions=64)


def test_do_sample_true_takes_the_files_values_and_generates_defaults_for_the_rest():
    own = model_settings((("do_sample", True), ("temperature", 0.2), ("top_p", 0.9)))
    assert own == SamplingSettings(temperature=0.2, top_k=50, top_p=0.9, repetition_penalty=1.0, seed=DEFAULT_SETTINGS.seed)
    assert model_settings((("do_sample", True), ("top_k", None), ("repetition_penalty", 1.3))).top_k == 50
    assert model_settings((("do_sample", True), ("top_k", 0))).top_k == 0  # 0: off, as generate reads it


def test_without_do_sample_the_windows_defaults_and_with_false_greedy():
    assert model_settings((("temperature", 0.2),)) == DEFAULT_SETTINGS  # generate would ignore the 0.2
    assert model_settings(()) == DEFAULT_SETTINGS
    greedy = model_settings((("do_sample", False), ("temperature", 0.2), ("repetition_penalty", 1.2)))
    assert greedy.is_greedy and greedy.repetition_penalty == 1.2
    assert model_settings((("do_sample", True), ("temperature", -3.0))) == DEFAULT_SETTINGS  # out of range: ignored


@pytest.fixture(scope="module")
def own_folder(tmp_path_factory):
    folder = write_random_gpt2(tmp_path_factory.mktemp("own") / "own-defaults", seed=1, **TINY_GPT2)
    return set_generation_values(folder, do_sample=True, temperature=0.2, top_p=0.9, repetition_penalty=1.1)


def test_the_folder_is_read_as_written(own_folder):
    values = dict(read_generation_config(own_folder))
    assert values == {"do_sample": True, "temperature": 0.2, "top_p": 0.9, "repetition_penalty": 1.1}


def test_the_terminal_runs_with_the_models_own_settings_and_says_so(own_folder, capsys):
    assert main(["--model", str(own_folder), "--steps", "2", "--json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    settings = rows[0]["settings"]
    assert settings["from"] == "generation_config.json"
    assert (settings["temperature"], settings["top_k"], settings["top_p"], settings["repetition_penalty"]) == (0.2, 50, 0.9, 1.1)
    assert main(["--model", str(own_folder), "--steps", "1", "--json", "--temperature", "0.7"]) == 0  # a flag wins
    settings = json.loads(capsys.readouterr().out.splitlines()[0])["settings"]
    assert settings["from"] == "command line" and settings["temperature"] == 0.7 and settings["top_p"] == 0.9
    assert main(["--steps", "1", "--json"]) == 0  # the demo model's file sets no do_sample
    settings = json.loads(capsys.readouterr().out.splitlines()[0])["settings"]
    assert settings["from"] == "defaults" and settings["temperature"] == DEFAULT_SETTINGS.temperature
