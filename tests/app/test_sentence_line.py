"""The sentence line above the chips (the text so far): a text longer than the line shows its END in
whole words after a "… " marker, never a word cut in two; on a short projector window the token counts
leave it the room ("· N characters" goes to their tooltip)."""

from __future__ import annotations

from app.panels.tokens_panel import ELIDED, sentence_end
from app.protocol import messages as p

from .helpers import run

LONG_PROMPT = "Once upon a time, in a small village at the edge of a great forest, there lived an old clockmaker"


def width(text: str) -> int:
    return len(text)  # one unit a character: what fits is plain to see


def test_a_text_that_fits_is_shown_whole():
    assert sentence_end("The capital of France is", 40, width) == "The capital of France is"


def test_a_longer_text_shows_its_end_in_whole_words_after_the_marker():
    text = "The capital of France is"
    assert sentence_end(text, 13, width) == "… France is"  # "… of France is" is 14 wide
    assert sentence_end(text, 14, width) == "… of France is"
    for room in range(4, 24):
        shown = sentence_end(text, room, width)
        assert width(shown) <= room and shown.startswith(ELIDED)
        assert text.endswith(" " + shown[len(ELIDED):])  # whole words: the cut is at a space


def test_no_word_fits_then_only_the_marker():
    assert sentence_end("Antidisestablishmentarianism", 10, width) == "…"


def test_the_template_tokens_count_as_words():
    text = "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant"
    shown = sentence_end(" ".join(text.split("\n")), 24, width)
    assert shown == "… <|im_start|>assistant"


def test_on_a_1024_x_768_projector_the_line_keeps_its_words(window, qtbot):
    """The counts drop "· N characters" to their tooltip, so the text so far gets the room; its end
    shows, marked "… " and cut at a word."""
    window.state.set_projector(True)
    window.resize(1024, 768)
    window.tokens.editor.setPlainText(LONG_PROMPT)
    run(qtbot, window, window.tokens._debounce.start, p.SetPrompt, timeout=60_000)
    for _ in range(3):
        run(qtbot, window, window.step, p.Step)
    qtbot.wait(20)
    tokens = window.tokens
    assert tokens.sentence_lines() == 1
    assert "characters" not in tokens.counts.text() and "characters" in tokens.counts.toolTip()
    before, _newest = tokens._sentence
    shown = tokens.sentence.text()
    assert shown.startswith(ELIDED)
    words = shown[len(ELIDED):].split("<span")[0]
    assert " ".join(before.split("\n")).endswith(" " + words)  # whole words
    assert len(words) >= 30, words  # about 20 characters before: now the room the counts left
    window.resize(1366, 768)  # not a projector's short window: the count of characters is back
    window.state.set_projector(False)
    qtbot.wait(20)
    assert "characters" in tokens.counts.text()
