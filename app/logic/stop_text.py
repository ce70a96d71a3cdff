"""Stop sequences as a person types them in one line: ``parse`` and its inverse ``join``. Pure Python.

Sequences are separated by commas; spaces around each are dropped. ``\\n`` is a newline, ``\\t`` a
tab, ``\\s`` a space (to keep one at an end), ``\\,`` a comma and ``\\\\`` a backslash.
"""

from __future__ import annotations

import re

HELP = "separate with commas; \\n = newline, \\s = space, \\, = comma"
_ESCAPES = {"n": "\n", "t": "\t", "s": " ", ",": ",", "\\": "\\"}
_ESCAPE = re.compile(r"\\(.)", re.S)


def parse(text: str) -> tuple[str, ...]:
    """The stop sequences ``text`` names, in order, each once, empty ones left out."""
    items, current, i = [], "", 0
    while i < len(text):
        if text[i] == "\\" and i + 1 < len(text):  # an escape, kept whole until the item is cut
            current, i = current + text[i : i + 2], i + 2
            continue
        if text[i] == ",":
            items.append(current)
            current = ""
        else:
            current += text[i]
        i += 1
    out: list[str] = []
    for item in items + [current]:
        sequence = _ESCAPE.sub(lambda m: _ESCAPES.get(m.group(1), m.group(0)), item.strip(" "))
        if sequence and sequence not in out:
            out.append(sequence)
    return tuple(out)


def join(sequences: tuple[str, ...]) -> str:
    """The line that ``parse`` reads back as ``sequences``."""
    def one(sequence: str) -> str:
        body = sequence.replace("\\", "\\\\").replace(",", "\\,").replace("\n", "\\n").replace("\t", "\\t")
        if body[:1] == " ":
            body = "\\s" + body[1:]
        if body[-1:] == " ":
            body = body[:-1] + "\\s"
        return body

    return ", ".join(one(s) for s in sequences)
