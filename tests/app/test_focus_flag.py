"""``--focus PANEL``: the Overview with one panel alone, as View → Focus shows it (screenshots of a
panel shown large, such as the attention map, from the command line)."""

from __future__ import annotations

import pytest

from app.window.main import parse_args
from app.logic.views import PANELS


def test_the_flag_takes_the_panels_by_name_and_refuses_others(capsys):
    assert parse_args(["--focus", "attention"]).focus == "attention" and parse_args([]).focus is None
    with pytest.raises(SystemExit) as exit_:
        parse_args(["--focus", "heads"])
    assert exit_.value.code == 2 and "--focus" in capsys.readouterr().err


def test_each_name_is_the_panel_of_that_number(window):
    panels = [window.panel_named(name) for name in PANELS]
    assert panels == [window.tokens, window.embeddings, window.attention, window.logits, window.sampling, window.kv]
    assert [panel.short_title.split(" ", 1)[0] for panel in panels] == ["1", "2", "3", "4", "5", "6"]
