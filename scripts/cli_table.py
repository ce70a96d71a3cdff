"""The tables of command-line options, written from the argparse parsers themselves: the window's
(``nexttoken``) in README.md, the engine's (``nexttoken-engine``) in docs/COMMAND_LINE.md.

    python scripts/cli_table.py           print both tables
    python scripts/cli_table.py --write   replace them in those files (between the cli markers)

tests/scripts/test_cli_table.py fails when a file's table differs from what this prints.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def parsers() -> dict[str, argparse.ArgumentParser]:
    from app.window.main import build_parser as window_parser
    from engine.cli import build_parser as engine_parser

    return {"nexttoken": window_parser(), "nexttoken-engine": engine_parser()}


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def table(parser: argparse.ArgumentParser) -> str:
    rows = ["| option | what it does |", "|---|---|"]
    for action in parser._actions:
        if not action.option_strings or isinstance(action, argparse._HelpAction):
            continue
        name = ", ".join(action.option_strings)
        if action.choices:
            name += " {" + ",".join(str(c) for c in action.choices) + "}"
        elif action.nargs != 0:
            name += " " + (action.metavar or action.dest.upper())
        help_text = (action.help or "") % {"default": action.default} if action.help else ""
        rows.append(f"| `{_cell(name)}` | {_cell(help_text)} |")
    return "\n".join(rows)


def marker(command: str) -> tuple[str, str]:
    return f"<!-- cli:{command} (scripts/cli_table.py --write) -->", f"<!-- /cli:{command} -->"


FILES = {"nexttoken": ROOT / "README.md", "nexttoken-engine": ROOT / "docs" / "COMMAND_LINE.md"}


def rewrite(text: str, command: str) -> str:
    """``text`` with ``command``'s table between its markers written anew."""
    start, end = marker(command)
    pattern = re.compile(re.escape(start) + r".*?" + re.escape(end), re.S)
    if not pattern.search(text):
        raise SystemExit(f"{FILES[command].name} has no {start} ... {end} block")
    return pattern.sub(lambda _m: f"{start}\n{table(parsers()[command])}\n{end}", text)


def main() -> int:
    if "--write" in sys.argv[1:]:
        for command, path in FILES.items():
            path.write_text(rewrite(path.read_text(encoding="utf-8"), command), encoding="utf-8")
        return 0
    for command, parser in parsers().items():
        print(f"{command}\n\n{table(parser)}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
