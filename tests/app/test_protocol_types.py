"""Requests and replies are types: nothing in app/ or engine/ dispatches on a string kind, and the
engine host writes no words a person reads about the window (its shortcuts, views or menus)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from app.protocol import messages as p

ROOT = Path(__file__).resolve().parents[2]

MESSAGE_NAMES = "|".join(sorted({cls.kind for cls in p.REQUESTS} | {"finished", "failed", "skipped", "inspected", "progress", "prompt_too_long"}))
STRING_DISPATCH = [
    (re.compile(r"getattr\([^)]*\)\s*\.\s*emit\b"), "a signal looked up by name"),
    (re.compile(r"\.emit\(\s*[\"']"), "a signal given a name as its first argument"),
    (re.compile(r"\.kind\s*(==|!=)\s*[\"']|[\"']\s*(==|!=)\s*[\w.]*\.kind\b"), "a kind compared to a string"),
    (re.compile(r"\.kind\s+(not\s+)?in\s*[(\[{]\s*[\"']"), "a kind looked up among strings"),
    (re.compile(rf"\bkind\s*(==|!=)\s*[\"']({MESSAGE_NAMES})[\"']"), "a kind compared to a message's name"),
    (re.compile(rf"\bkind\s+(not\s+)?in\s*[(\[{{][^)\]}}]*[\"']({MESSAGE_NAMES})[\"']"), "a kind looked up among messages' names"),
    (re.compile(r"\.kind\s+(not\s+)?in\s+[A-Za-z_][\w.]*"), "a kind looked up in a named collection"),
    (re.compile(r"[\"']prompt_too_long[\"']"), "the fake request kind"),
    (re.compile(r"getattr\(\s*self\s*,\s*f[\"']_"), "a handler looked up by name"),
]
NOT_A_MESSAGE_KIND = re.compile(r"dtype\.kind|chip\.kind|chips\[\w+\]\.kind")  # numpy dtypes, token chips


def offending_lines(text: str) -> list[str]:
    found = []
    for number, line in enumerate(text.splitlines(), start=1):
        if NOT_A_MESSAGE_KIND.search(line):
            continue
        found += [f"{number}: {why}: {line.strip()}" for pattern, why in STRING_DISPATCH if pattern.search(line)]
    return found


def test_nothing_dispatches_on_a_string_kind():
    sources = sorted((ROOT / "app").rglob("*.py")) + sorted((ROOT / "engine").rglob("*.py"))
    assert len(sources) > 40
    found = [f"{path.relative_to(ROOT)}:{line}" for path in sources for line in offending_lines(path.read_text(encoding="utf-8"))]
    assert not found, "dispatch on a string, not a type:\n" + "\n".join(found)


@pytest.mark.parametrize(
    "line",
    [
        'getattr(self, name).emit(*args)',
        'self.emit("finished", result)',
        'if result.kind == "load":',
        'if "open" != result.kind:',
        'if kind in ("prompt_too_long", "prompt"):',
        'if kind in ("load", "open") and current:',
        'if panel.isVisible() or result.kind in self.START_OVER:',
        'if self.chips_kind == 1 or reply.kind != "save":',
        'kind = "prompt_too_long" if too_long else request.kind',
        'result = getattr(self, f"_do_{kind}")(request)',
    ],
)
def test_the_check_catches_each_way_of_dispatching_on_a_string(line):
    assert offending_lines(line)


def test_the_check_lets_numpy_and_token_chips_be():
    assert not offending_lines('if a.dtype.kind == "f" and chip.kind == "next":')


def test_the_host_names_no_shortcut_view_or_menu():
    text = (ROOT / "app" / "host" / "session_host.py").read_text(encoding="utf-8")
    assert not re.search(r"Alt\+|Ctrl\+|Space\)|the Branches view|Model →", text)


def test_every_reply_is_a_frozen_dataclass_with_a_generation():
    for cls in p.REPLIES:
        reply = cls(generation=7)
        assert reply.generation == 7 and issubclass(cls, p.Reply)
        with pytest.raises(Exception):
            reply.generation = 8  # frozen
    assert issubclass(p.PromptTooLong, p.Failed) and issubclass(p.Crashed, p.Failed)


def test_a_result_and_a_load_are_named_in_a_line(window, qtbot, demo_model):
    """pytest-qt builds the repr of every result a test waits for (and a log line would): the
    dataclass' own repr wrote out every array of every record (82 kB after four steps of the demo
    model, 10 s of a test run) and a Load's whole model and tokenizer."""
    from tests.app.helpers import run

    for _ in range(4):
        result = run(qtbot, window, window.step, p.Step)
    said = repr(result)
    assert len(said) < 300 and "request=Step," in said and "'gpt2-tiny-demo'" in said and "steps=4" in said, said[:400]
    said = repr(p.Load(loaded=demo_model, prompt="The cat"))
    assert len(said) < 600 and "'The cat'" in said, said[:400]
