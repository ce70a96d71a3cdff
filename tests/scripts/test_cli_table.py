"""The option tables in README.md and docs/COMMAND_LINE.md are the parsers' own (scripts/cli_table.py)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("cli_table", ROOT / "scripts" / "cli_table.py")
cli_table = importlib.util.module_from_spec(spec)
spec.loader.exec_module(cli_table)


@pytest.mark.parametrize("command", sorted(cli_table.FILES))
def test_the_table_is_current(command):
    path = cli_table.FILES[command]
    text = path.read_text(encoding="utf-8")
    assert cli_table.rewrite(text, command) == text, (
        f"{path.relative_to(ROOT)}: the {command} options table is out of date: run python scripts/cli_table.py --write"
    )


def test_every_option_has_a_row():
    for command, parser in cli_table.parsers().items():
        table = cli_table.table(parser)
        for action in parser._actions:
            for option in action.option_strings:
                if option not in ("-h", "--help"):
                    assert f"`{option}" in table, (command, option)
