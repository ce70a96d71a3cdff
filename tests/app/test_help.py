"""'What am I looking at?': each panel explains itself with its current numbers; one glossary; the
texts in one resource file."""

from __future__ import annotations

from PySide6.QtCore import QPoint, Qt, QUrl
from PySide6.QtGui import QCursor

from app.logic.help import texts

from .helpers import run
from app.protocol import messages as p

ISSUE_TERMS = [
    "token", "token id", "embedding", "position", "attention head", "query / key / value", "residual stream",
    "layer norm", "MLP", "logit", "softmax", "probability", "temperature", "top-k", "top-p",
    "repetition penalty", "entropy", "KV cache", "prefill", "decode", "PCA",
]


def test_the_glossary_defines_every_term_the_panels_use():
    glossary = texts()["glossary"]
    assert [t for t in ISSUE_TERMS if not glossary.get(t)] == []


def test_every_panel_has_a_question_mark_that_explains_it_with_current_numbers(window, qtbot):
    before = window.help.buttons[window.embeddings]
    before.click()
    assert "Press Space" in window.help.dialog.browser.toPlainText()  # before the first step: what will come
    result = run(qtbot, window, window.step, p.Step)
    info, trace = result.info, result.trace
    for panel, button in window.help.buttons.items():
        assert button.isVisible() and button.geometry().right() <= panel.width()
        button.click()
        shown = window.help.dialog.browser.toPlainText()
        assert window.help.dialog.isVisible() and "?" not in shown.replace("What am I looking at?", ""), (panel.short_title, shown)
    window.help.buttons[window.logits].click()
    shown = window.help.dialog.browser.toPlainText()
    assert f"{info.vocab_size:,} tokens" in shown and f"{trace.chosen_prob:.1%}" in shown and f"{trace.entropy_bits:.2f} bits" in shown
    window.help.buttons[window.tokens].click()
    assert f"became {len(result.prompt_ids)} tokens" in window.help.dialog.browser.toPlainText()


def test_f1_explains_the_panel_with_the_keyboard_focus_and_links_to_the_glossary(window, qtbot):
    run(qtbot, window, window.step, p.Step)
    QCursor.setPos(window.mapToGlobal(QPoint(-200, -200)))  # the mouse away: the keyboard focus decides
    window.sampling.temperature.setFocus()
    qtbot.keyClick(window, Qt.Key_F1)
    assert "temperature 1 divides the scores" in window.help.dialog.browser.toPlainText()
    panel = window.embeddings  # top left: on the offscreen platform's 800 x 800 screen
    window.help.dialog.close()  # it may lie over the panel
    QCursor.setPos(panel.mapToGlobal(panel.rect().center()))  # the mouse over a panel: that panel
    qtbot.keyClick(window, Qt.Key_F1)
    assert "Slide Depth" in window.help.dialog.browser.toPlainText()
    window.help.dialog.browser.anchorClicked.emit(QUrl("glossary"))  # the link under every explanation
    assert "residual stream" in window.help.dialog.browser.toPlainText()
