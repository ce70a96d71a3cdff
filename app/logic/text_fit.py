"""Choosing the wording of a text that fits its box: plain Python, given a width-measuring callable
(a Qt panel passes its font metrics' ``horizontalAdvance``), so it is tested without Qt.

A text comes as its wordings, longest first; each wording may also be said with shorter numbers
(49,152 → 49.2k → 49k: digits are rounded, never cut). The first that fits the box's width on the
lines it has (wrapped at spaces, a word never split) is the one drawn. Nothing is ever elided with
"…".
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence

Measure = Callable[[str], float]

_GROUPED = re.compile(r"(?<![\d.])\d{1,3}(?:,\d{3})+(?![\d,]|\.\d)")  # 49,152 or 1,234,567: a count written with commas


_CHUNK = re.compile(r"\s*(?:<\|[^|\s]*\|>|[^\s<]+|<)|\s+$")


def _short(match: re.Match, decimals: int) -> str:
    value = int(match.group(0).replace(",", ""))
    for size, unit in ((1e9, "B"), (1e6, "M"), (1e3, "k")):
        if value >= size:
            text = f"{value / size:.{decimals}f}"
            if "." in text:
                text = text.rstrip("0").rstrip(".")
            return text + unit
    return match.group(0)


def number_forms(text: str) -> list[str]:
    """``text``, then with its comma-grouped counts to one decimal (49.2k), then to none (49k)."""
    forms = [text]
    if _GROUPED.search(text):
        forms += [_GROUPED.sub(lambda m: _short(m, 1), text), _GROUPED.sub(lambda m: _short(m, 0), text)]
    return list(dict.fromkeys(forms))


def variants(wordings: Iterable[str]) -> tuple[str, ...]:
    """Every way to say a text, longest first: each wording with its numbers in their forms, in turn
    (empty wordings left out)."""
    out: list[str] = []
    for wording in wordings:
        if wording:
            out += number_forms(wording)
    return tuple(dict.fromkeys(out))


def wrap(text: str, width: float, measure: Measure, max_lines: int = 1) -> list[str] | None:
    """``text`` in at most ``max_lines`` lines no wider than ``width``, broken at spaces; None if it
    does not fit so (a word wider than the box never fits)."""
    if measure(text) <= width:
        return [text]
    if max_lines <= 1:
        return None
    words = text.split(" ")
    lines: list[str] = []
    current = ""
    for word in words:
        candidate = f"{current} {word}" if current else word
        if measure(candidate) <= width:
            current = candidate
            continue
        if not current or measure(word) > width:
            return None
        lines.append(current)
        current = word
        if len(lines) >= max_lines:
            return None
    lines.append(current)
    return lines if len(lines) <= max_lines else None


def fit(wordings: Sequence[str], width: float, measure: Measure, max_lines: int = 1) -> list[str]:
    """The lines of the first of ``wordings`` (each with its shorter numbers, ``variants``) that fits
    ``width`` on at most ``max_lines`` lines (a wording fills a second line before a shorter one is
    taken). Where none fits, the shortest on one line, as it is (the cut-text test then says so)."""
    options = variants(wordings)
    for option in options:
        found = wrap(option, width, measure, max_lines)
        if found is not None:
            return found
    return [options[-1]] if options else []


def tail_words(text: str, width: float, measure: Measure, max_lines: int = 1, end_width: float = 0.0,
               cut_start: bool = False) -> list[str]:
    """The end of ``text`` as whole words in at most ``max_lines`` lines no wider than ``width``, the
    last line keeping ``end_width`` free (for what is drawn after it: it may be left empty); a word
    that does not fit is left out with all before it, never cut (a line may also break before and
    after a special token such as ``<|im_start|>``, adding no space). ``cut_start``: the first word may
    be the end of a longer one (``text`` is the tail of something longer) and is never shown."""
    words = _CHUNK.findall(text)  # each word with the spaces before it; a special token is a word of its own
    if cut_start and words and not words[0][:1].isspace():
        words = words[1:]
    lines: list[str] = []
    current, room = "", width - end_width
    for word in reversed(words):
        if measure((word + current).lstrip()) <= room:
            current = word + current
            continue
        if len(lines) + 1 >= max_lines:
            break
        lines.insert(0, current.lstrip())
        current, room = "", width
        if measure(word.lstrip()) > room:
            break
        current = word
    if current or not lines:
        lines.insert(0, current.lstrip())
    return lines


def cut_lines(text: str, width: float, measure: Measure, max_lines: int, keep_end: bool = False) -> list[str]:
    """``text`` wrapped at spaces in at most ``max_lines`` lines no wider than ``width``; where it needs
    more, only as many of its first whole words as fit, followed by how many characters are left out
    ("… (152 characters more)", without the "…"), or with ``keep_end`` its last words after
    "(152 characters before)". Where not even one word fits with that: "(300 characters)"."""
    lines = wrap(text, width, measure, max_lines)
    if lines is not None:
        return lines
    words = text.split(" ")

    def shown(k: int) -> str:  # the first (or last) k words and the count of what is left out
        if k == 0:
            return f"({len(text):,} characters)"
        part = " ".join(words[len(words) - k:] if keep_end else words[:k])
        left = len(text) - len(part) - 1  # and the space between
        return f"({left:,} characters before) {part}" if keep_end else f"{part} ({left:,} characters more)"

    low, high = 0, len(words) - 1  # the most words that fit lie in [low, high]
    while low < high:
        k = (low + high + 1) // 2
        if wrap(shown(k), width, measure, max_lines) is not None:
            low = k
        else:
            high = k - 1
    return wrap(shown(low), width, measure, max_lines) or [shown(0)]


class Fitter:
    """``fit`` and the widths it needs, remembered for one pair of fonts (a body and a bold one):
    ``measure(text, bold)`` (the painter's font metrics) is asked once per text and font, and a
    wording's choice once per (wordings, width, lines, font), so a step's paint measures only the
    texts it has not drawn before. A new font needs a new Fitter. Each table forgets all it holds
    at ``limit`` entries (a long session's old numbers)."""

    def __init__(self, measure: Callable[[str, bool], float], limit: int = 4096):
        self._measure = measure
        self._limit = limit
        self._widths: tuple[dict[str, float], dict[str, float]] = ({}, {})
        self._fits: dict[tuple, list[str]] = {}
        self.measured = 0  # texts measured with the fonts (tests and benchmarks read it)

    def width(self, text: str, bold: bool = False) -> float:
        """``text``'s drawn width in the body (or bold) font."""
        widths = self._widths[bool(bold)]
        found = widths.get(text)
        if found is None:
            if len(widths) >= self._limit:
                widths.clear()
            found = widths[text] = self._measure(text, bool(bold))
            self.measured += 1
        return found

    def measurer(self, bold: bool = False) -> Measure:
        """``width`` in one font, as ``fit`` and ``tail_words`` take it."""
        return lambda text: self.width(text, bold)

    def fit(self, wordings: str | Sequence[str], width: float, bold: bool = False, max_lines: int = 1) -> list[str]:
        """``fit(wordings, width, ..., max_lines)`` in the body (or bold) font; ``wordings`` may be one text."""
        if isinstance(wordings, str):
            wordings = (wordings,)
        key = (tuple(wordings), width, bool(bold), max(1, max_lines))
        found = self._fits.get(key)
        if found is None:
            if len(self._fits) >= self._limit:
                self._fits.clear()
            found = self._fits[key] = fit(key[0], width, self.measurer(bold), key[3])
        return list(found)
