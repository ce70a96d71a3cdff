"""The corrected explanations say what is right (and no longer what was wrong), and each is what the
window shows: the glossary, a panel's ? before and after the first step, and the Inside view."""

from __future__ import annotations

import html

import math

from app.logic.help import glossary_entries, texts, words

from app.protocol import messages as p

from .helpers import run
from .test_inside_view import show_inside

# what each corrected text must say (the wrong sentence it replaces must be gone)
GLOSSARY = {
    "entropy": ("describes the sampler, not the model", "log2 of their number", "bits for this model"),
    "probability": ("model probability is the softmax of the raw logits", "sampling probability is taken after the repetition "
                    "penalty, temperature, top-k and top-p"),
    "top-p": ("after temperature and top-k", "smallest set of the most likely tokens whose probabilities reach at least p"),
    "KV cache": ("still attends over every cached position", "a step still grows with the text, only much less"),
    "residual stream": ("final {norm_name}",),
}
WRONG = ("after the sampling settings; all of them add up", "costs one position's work", "add up to p,",
         "every one of them takes part in computing every token")


def shown(window) -> str:
    return window.help.dialog.browser.toPlainText()


def test_the_corrected_texts_say_what_is_right_and_not_what_was_wrong():
    every = str(texts())
    for term, phrases in GLOSSARY.items():
        entry = str(texts()["glossary"][term])
        assert [p for p in phrases if p not in entry] == [], term
    assert [w for w in WRONG if w in every] == []
    panels = texts()["panels"]
    assert "looks at itself and at the earlier ones" in panels["attention"]["before"]
    assert "still reads every cached key and value, so a step still grows with the text" in panels["kv"]["before"]
    sampling = panels["sampling"]["text"]
    assert sampling.index("repetition penalty") < sampling.index("temperature") < sampling.index("top-k") < sampling.index("top-p")
    assert "itself" in str(texts()["inside"]["block"]) and "position table only this token's row" in str(texts()["fragments"]["position_params"])


def test_each_corrected_sentence_is_what_the_window_shows(window, qtbot):
    window.help.show(window.attention)  # before the first step
    assert texts()["panels"]["attention"]["before"] in shown(window)
    window.help.show(window.kv)
    assert texts()["panels"]["kv"]["before"] in shown(window)
    result = run(qtbot, window, window.step, p.Step)
    window.help.show(None)
    glossary, entries = shown(window), glossary_entries(result)
    for term in GLOSSARY:
        assert f"{term}: {entries[term]}" in glossary
    assert f"log2 {result.info.vocab_size:,} ≈ {math.log2(result.info.vocab_size):.1f} bits for this model" in entries["entropy"]
    trace = result.trace
    window.help.show(window.logits)
    logits = shown(window)
    assert f"sampling probability {trace.sampling_prob:.1%} and model probability {trace.model_prob:.1%}" in logits
    assert f"the model's is {trace.model_entropy_bits:.2f} bits" in logits and f"is {trace.entropy_bits:.2f} bits" in logits
    window.help.show(window.sampling)
    assert "top-p 1 keeps the smallest set of the most likely tokens whose probabilities reach at least p" in shown(window)
    window.help.dialog.close()

    show_inside(window, qtbot)
    inside = window.inside
    arch = result.info.architecture
    assert inside.attention.block_text.text() == words("inside", "block", arch)
    assert html.unescape(inside.sizes.text.text()) == words("inside", "parameters", arch, dict(n_params=inside.trace.n_params))
    assert "position table only this token's row" in inside.sizes.text.text()  # the demo adds a position table
