"""The fitting rule of app.logic.text_fit, with a measure of one unit per character."""

from __future__ import annotations

from app.logic.text_fit import Fitter, cut_lines, fit, number_forms, tail_words, variants, wrap


def measure(text: str) -> float:
    return len(text)


def test_counts_get_shorter_forms_and_never_lose_digits_to_a_cut():
    assert number_forms("576 → 49,152 logits") == ["576 → 49,152 logits", "576 → 49.2k logits", "576 → 49k logits"]
    assert number_forms("1,234,567 params") == ["1,234,567 params", "1.2M params", "1M params"]
    assert number_forms("50,000 tokens") == ["50,000 tokens", "50k tokens"]
    assert number_forms("id 35204, position 12") == ["id 35204, position 12"]  # ids and small numbers stay
    assert number_forms("|x| 1,234.5") == ["|x| 1,234.5"]  # not a count


def test_the_first_wording_that_fits_is_taken_and_a_second_line_used_where_there_is_one():
    wordings = ["temperature 1: 49,152", "temp 1: 49,152"]
    assert variants(wordings)[:4] == ("temperature 1: 49,152", "temperature 1: 49.2k", "temperature 1: 49k", "temp 1: 49,152")
    assert fit(wordings, 30, measure) == ["temperature 1: 49,152"]
    assert fit(wordings, 20, measure) == ["temperature 1: 49.2k"]
    assert fit(wordings, 18, measure) == ["temperature 1: 49k"]
    assert fit(wordings, 14, measure) == ["temp 1: 49,152"]
    assert fit(wordings, 14, measure, max_lines=2) == ["temperature 1:", "49,152"]
    assert fit(wordings, 3, measure) == ["temp 1: 49k"]  # none fits: the shortest, whole
    assert wrap("a verylongword", 5, measure, 3) is None  # a word is never split


def test_the_tail_of_a_text_is_whole_words():
    tail = "al of France is"
    assert tail_words(tail, 9, measure, end_width=0) == ["France is"]
    assert tail_words(tail, 9, measure, end_width=0, cut_start=True) == ["France is"]
    assert tail_words(tail, 11, measure, max_lines=2, cut_start=True) == ["of", "France is"]
    assert tail_words(tail, 11, measure, max_lines=2) == ["al of", "France is"]
    assert tail_words(tail, 9, measure, end_width=9, max_lines=2) == ["France is", ""]  # the last line left to what follows
    assert tail_words("The cat", 3, measure, end_width=3) == [""]


def test_a_special_token_is_a_word_of_its_own():
    tail = "France?<|im_end|>↵<|im_start|>assistant↵"
    assert tail_words(tail, 12, measure, max_lines=2) == ["<|im_start|>", "assistant↵"]
    assert tail_words(tail, 22, measure) == ["<|im_start|>assistant↵"]


def test_a_fitter_measures_each_text_once_per_font_and_remembers_its_choices(monkeypatch):
    import app.logic.text_fit as text_fit

    asked, chosen = [], []
    monkeypatch.setattr(text_fit, "fit", lambda *args: chosen.append(args[1]) or fit(*args))  # each choice made

    def measure(text, bold):
        asked.append((text, bold))
        return 7 * len(text) + (len(text) if bold else 0)

    fitter = Fitter(measure)
    wordings = ("temperature 0.8: 49,152", "temp. 0.8: 49,152")
    first = fitter.fit(wordings, 100)
    assert first == fit(wordings, 100, lambda text: 7 * len(text))  # the same choice as fit's
    measured = len(asked)
    assert fitter.fit(wordings, 100) == first and len(asked) == measured and chosen == [100]  # remembered
    fitter.fit(wordings, 101)  # another width: chosen again, with the widths known already
    assert chosen == [100, 101] and len(asked) == measured and fitter.measured == measured
    assert fitter.width("abc", True) == 24 and fitter.width("abc") == 21  # each font measured apart
    assert asked[-2:] == [("abc", True), ("abc", False)]
    small = Fitter(measure, limit=2)
    for text in ("a", "b", "c", "a"):
        small.width(text)
    assert small.measured == 4  # a full table forgets what it held


def test_a_text_too_long_for_its_lines_says_how_much_it_leaves_out():
    text = "The capital of France is Paris and the capital of Italy is Rome"  # 63 characters
    assert cut_lines(text, 30, measure, 3) == ["The capital of France is Paris", "and the capital of Italy is", "Rome"]  # fits: whole
    assert cut_lines(text, 30, measure, 1) == ["The (59 characters more)"]  # "The capital (51 …)" is 32 wide
    assert cut_lines(text, 30, measure, 1, keep_end=True) == ["(55 characters before) is Rome"]
    assert cut_lines(text, 24, measure, 2) == ["The capital of France is", "(38 characters more)"]
    assert cut_lines("averyveryverylongword and more", 16, measure, 2) == ["(30 characters)"]  # no word fits beside the count
