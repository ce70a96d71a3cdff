"""packaging/bundle_defaults.py: every bundle carries a defaults.conf; the classroom one opens its GPT-2."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from app.logic.site_defaults import SiteDefaults, read_site_defaults

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "packaging"))
from bundle_defaults import defaults_datas  # noqa: E402


def test_a_classroom_bundle_opens_gpt2_and_a_plain_one_sets_nothing(tmp_path):
    [(source, dest)] = defaults_datas(tmp_path / "classroom", ["gpt2-tiny-demo", "SmolLM2-135M-Instruct", "gpt2"], "gpt2")
    assert dest == "." and Path(source).name == "defaults.conf"
    assert read_site_defaults([Path(source)]) == SiteDefaults(model="gpt2")
    [(source, dest)] = defaults_datas(tmp_path / "plain", ["gpt2-tiny-demo", "SmolLM2-135M-Instruct"], None)
    assert read_site_defaults([Path(source)]) == SiteDefaults()


def test_a_default_the_bundle_does_not_hold_stops_the_build(tmp_path):
    with pytest.raises(ValueError, match="no such model"):
        defaults_datas(tmp_path, ["gpt2-tiny-demo"], "gpt2")
