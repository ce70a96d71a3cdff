"""packaging/bundle_defaults.py: the classroom build opens its bundled GPT-2 unless told otherwise."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "packaging"))
from bundle_defaults import DEFAULTS_FILE, defaults_datas, with_default_model  # noqa: E402


def test_a_classroom_bundle_opens_gpt2_unless_the_command_line_chooses(tmp_path):
    [(source, dest)] = defaults_datas(tmp_path, ["gpt2-tiny-demo", "gpt2"], "gpt2")
    assert dest == "." and json.loads(Path(source).read_text()) == {"default_model": "gpt2"}
    assert with_default_model(["nexttoken"], tmp_path) == ["nexttoken", "--model", "gpt2"]
    assert with_default_model(["nexttoken", "--projector"], tmp_path) == ["nexttoken", "--model", "gpt2", "--projector"]
    for chosen in (["--model", "x"], ["--model=x"], ["--open", "s.npz"], ["--smoke-test"]):
        assert with_default_model(["nexttoken", *chosen], tmp_path) == ["nexttoken", *chosen]


def test_a_plain_bundle_has_no_default_and_a_wrong_name_stops_the_build(tmp_path):
    assert defaults_datas(tmp_path, ["gpt2-tiny-demo"], None) == []
    assert not (tmp_path / DEFAULTS_FILE).exists()
    assert with_default_model(["nexttoken"], tmp_path) == ["nexttoken"]
    with pytest.raises(ValueError, match="no such model"):
        defaults_datas(tmp_path, ["gpt2-tiny-demo"], "gpt2")
