"""The repository reads as a product, not a work log: no tracked file names an issue of this project's
tracker (by number), a work session (a "pass" of work) or a former state of the main branch, and no
module or page is named after a number. Citations of other projects' trackers stay: they say where
a workaround comes from (see CITATION)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# Work-log phrases, each with the words a reader would use instead.
PHRASES = {
    "an issue number (say what the thing does)": re.compile(r"\bissues?[ _-]?#?\d+", re.IGNORECASE),
    "a work session's pass (say 'this change', 'before the change')": re.compile(
        r"\b(this|earlier|previous|second|third|fourth|fifth)\s+pass(es|'s|es')?\b", re.IGNORECASE),
    "a former main branch (say 'before' / 'after', with the commit)": re.compile(
        r"\b(previous|this)\s+main\b(?!\s+(window|thread|process|menu|loop))", re.IGNORECASE),
}
# Another project's tracker, cited by name: "pyqtgraph issue #3485", "PySide6 issue 1234".
OTHER_PROJECTS = ("pyqtgraph", "pyside6", "pyside", "qt", "qtbug", "transformers", "torch", "pytorch", "numpy",
                  "setuptools", "pyinstaller", "actionlint", "transformerlens", "huggingface", "pytest-qt", "cpython")
CITATION = re.compile(r"\b(" + "|".join(map(re.escape, OTHER_PROJECTS)) + r")\s+issues?\s+#?\d+", re.IGNORECASE)
NUMBERED_NAME = re.compile(r"[_-]\d+\.(py|md)$")  # test_reliability_26.py: a name that says which issue, not what


def work_log_words(text: str) -> list[tuple[int, str, str]]:
    """(line number, phrase kind, the line) for each work-log phrase in ``text``, citations excepted."""
    found = []
    for number, line in enumerate(text.splitlines(), start=1):
        cited = {m.span() for m in CITATION.finditer(line)}
        for kind, pattern in PHRASES.items():
            for match in pattern.finditer(line):
                if not any(start <= match.start() < end for start, end in cited):
                    found.append((number, kind, line.strip()))
    return found


def tracked_names() -> list[str]:
    """Every tracked path, relative to the repository's root."""
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    return [name for name in listed.decode().split("\0") if name]


def tracked_texts():
    """(path, text) of every tracked text file (files with NUL bytes or not UTF-8 are skipped)."""
    for name in tracked_names():
        path = ROOT / name
        if not path.is_file() or path.stat().st_size > 1_000_000:  # model weights, pictures: not prose
            continue
        data = path.read_bytes()
        if b"\0" in data:
            continue
        try:
            yield name, data.decode("utf-8")
        except UnicodeDecodeError:
            continue


@pytest.mark.parametrize("line, expected", [
    ("minutes of random use (issue " "26)", 1),
    ("## Issu" "es 14 and 15 (2026-11-30)", 1),
    ("the issue-" "12 comparison", 1),
    ("before this pa" "ss (6cc5bf4)", 1),
    ("| previous ma" "in | this ma" "in | target |", 2),
    ("SVG Qt 6.10 writes (pyqtgraph issue #3485), so it is not used.", 0),
    ("one forward pass per step; layout passes between turns; the main window", 0),
])
def test_the_checker_finds_work_log_words_and_spares_citations(line, expected):
    assert len(work_log_words(line)) == expected


@pytest.mark.parametrize("name, numbered", [
    ("tests/app/test_reliability_" "26.py", True), ("docs/notes-" "14.md", True),
    ("tests/app/test_exports_and_layout.py", False), ("packaging/licenses/GPL-3", False),
])
def test_the_checker_finds_names_that_end_in_a_number(name, numbered):
    assert bool(NUMBERED_NAME.search(name)) == numbered


def test_no_tracked_module_or_page_is_named_after_a_number():
    assert [name for name in tracked_names() if NUMBERED_NAME.search(name)] == []


def test_no_tracked_file_speaks_of_issue_numbers_passes_or_previous_mains():
    texts = dict(tracked_texts())
    assert "README.md" in texts and "app/window/window.py" in texts  # the listing reached the tree
    found = [f"{path}:{number}: {kind}: {line[:160]}"
             for path, text in texts.items() for number, kind, line in work_log_words(text)]
    assert not found, "work-log words in tracked files:\n" + "\n".join(found)
