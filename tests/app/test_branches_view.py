"""The Branches view: every continuation taken is listed, a double-click shows it as it was, and two
branches are compared with the model's own probabilities."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

from engine.branches import ROOT

from .helpers import run
from app.protocol import messages as p


def _branch_twice(qtbot, window):
    """Four steps, back two (to step 1), another candidate there, one more step: two branches. Returns (first leaf,
    first branch's records)."""
    for _ in range(4):
        first = run(qtbot, window, window.step, p.Step)
    run(qtbot, window, window.back, p.Back)
    back = run(qtbot, window, window.back, p.Back)
    other = int(next(i for i in back.trace.candidate_ids if i != back.trace.chosen))
    run(qtbot, window, lambda: window.logits.tokenChosen.emit(other), p.Choose)
    run(qtbot, window, window.step, p.Step)
    return first.branches.current, first.records


def _shown(tree, item, column: int) -> str:
    """The text ``tree``'s delegate paints in ``item``'s ``column``."""
    from PySide6.QtWidgets import QStyleOptionViewItem

    index = tree.indexFromItem(item, column)
    option = QStyleOptionViewItem()
    option.font = tree.font()
    tree.itemDelegateForIndex(index).initStyleOption(option, index)
    return option.text


def _items(tree):
    out = []
    stack = [tree.topLevelItem(i) for i in range(tree.topLevelItemCount())]
    while stack:
        item = stack.pop(0)
        out.append(item)
        stack.extend(item.child(i) for i in range(item.childCount()))
    return out


def test_the_tree_lists_both_branches_and_a_double_click_shows_one_as_it_was(window, qtbot):
    first_leaf, first_records = _branch_twice(qtbot, window)
    window.show_view("branches")
    view = window.branches_view
    table = window.state.result.branches
    assert len(table.leaves()) == 2 and first_leaf in table.leaves()
    items = _items(view.tree)
    # the prompt, the prefill, then the two ways on from step 1
    assert len(items) == 4 and items[0].text(0) == "prompt" and items[1].childCount() == 2
    assert items[0].text(2) == window.state.result.prompt_text
    assert items[1].text(0) == "▶ prefill"
    starts = sorted(item.text(0).lstrip("▶ ") for item in items[2:])
    assert starts == ["step 1", "step 1"]
    marked = [item for item in items if item.text(0).startswith("▶")]
    assert len(marked) == 2 and marked[1].font(0).bold()  # the stretch to the split and the branch on screen
    old = next(item for item in items[2:] if not item.text(0).startswith("▶"))
    i = table.index(table.path_to(first_leaf)[1])
    assert old.text(1).startswith(f"“{table.pieces[i]}”  {math.exp(table.logprobs[i]):.1%}")

    result = run(qtbot, window, lambda: view._on_tree_item_double_clicked(old), p.Switch)
    assert result.branches.current == first_leaf
    assert [r.chosen for r in result.records] == [r.chosen for r in first_records]
    for shown, kept in zip(result.records, first_records):  # the values it had, nothing recomputed
        np.testing.assert_array_equal(shown.logits, kept.logits)
        assert shown.forward_ms == kept.forward_ms
    session = window.controller.engine.host.session
    assert session.node == first_leaf
    chips = window.tokens.strip.chips  # the token panel shows the first branch's tokens
    assert [c.token_id for c in chips[len(result.prompt_ids):]] == [r.chosen for r in first_records]


def test_the_comparison_shows_the_models_probabilities_from_the_split(window, qtbot):
    _branch_twice(qtbot, window)
    window.show_view("branches")
    view = window.branches_view
    session = window.controller.engine.host.session
    c = view.comparison()
    assert c is not None and c["first_step"] == 1
    for side in (c["a"], c["b"]):
        records = [session.tree.record(n) for n in session.tree.path(side["leaf"])[1:]]
        assert side["tokens"] == [r.chosen for r in records]
        for p, r in zip(side["probs"], records):
            logits = r.logits.astype(np.float64)
            expected = np.exp(logits[r.chosen] - logits.max()) / np.exp(logits - logits.max()).sum()
            assert p == pytest.approx(expected, rel=1e-9)
        assert side["logprob"] == pytest.approx(sum(math.log(p) for p in side["probs"]), abs=1e-9)
    assert c["a"]["leaf"] == session.node  # A: the branch on screen
    lines = view.summary.text().splitlines()
    assert lines[1].startswith("A (") and f": {c['a']['logprob']:.2f} over" in lines[1]
    assert lines[2].startswith("B (") and f": {c['b']['logprob']:.2f} over" in lines[2]
    assert view.steps_table.rowCount() == max(len(c["a"]["tokens"]), len(c["b"]["tokens"]))
    xs, ys = view.a_line.getData()
    np.testing.assert_allclose(ys, np.array(c["a"]["probs"]) * 100)
    assert list(xs) == list(range(1, 1 + len(c["a"]["probs"])))


def test_before_any_branch_the_view_says_what_to_do(window, qtbot):
    window.show_view("branches")
    assert "No step yet" in window.branches_view.header.text()
    run(qtbot, window, window.step, p.Step)
    assert window.state.result.branches.current != ROOT
    assert "Two branches are needed" in window.branches_view.summary.text()


def test_one_step_is_one_step_and_a_long_prompt_is_whole_in_its_tooltip(window, qtbot):
    """"1 branch, 1 steps in all" read wrong; a prompt longer than its cell is in full in the cell's
    tooltip (it was cut at 160 characters with nothing to read the rest)."""
    prompt = "The capital of France is Paris, and " * 20 + "the capital of Italy is"
    run(qtbot, window, lambda: window.tokens.promptEdited.emit(prompt), p.SetPrompt)
    run(qtbot, window, window.step, p.Step)
    window.show_view("branches")
    view = window.branches_view
    assert "1 step in all" in view.header.text(), view.header.text()
    top = view.tree.topLevelItem(0)
    shown = re.sub("[\n\u2028]", " ", _shown(view.tree, top, 2))
    found = re.fullmatch(r"\(([\d,]+) characters before\) (.+)", shown)
    assert found, shown  # its end, in whole words, and how much is left out
    left, end = int(found.group(1).replace(",", "")), found.group(2)
    assert top.toolTip(2) == prompt and prompt.endswith(" " + end) and left == len(prompt) - len(end) - 1


def test_a_branchs_ending_is_whole_words():
    from app.panels.branches_panel import last_words

    assert last_words("The capital of France is Paris, the city of light", 24) == "Paris, the city of light"
    assert last_words("Paris", 24) == "Paris"
    assert last_words("a verylongwordthatfillseverything", 10) == "verylongwordthatfillseverything"  # longer than the room: whole


def test_a_long_prompt_and_branch_text_fit_their_cells_whole_on_a_1024_projector(window, qtbot):
    """A chat turn's prompt (the template's tokens and the system message) is longer than the "Text
    from there" column at 1024 x 768 in projector mode: it was cut with "…" there, the whole only in
    the tooltip. Each cell now shows whole words on the lines it has, and says how much it leaves out."""
    from app.window import theme as th

    from .helpers import show_text_size
    from .test_text_size import tree_problems

    prompt = "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n" \
             "<|im_start|>user\nThe capital of France is<|im_end|>\n<|im_start|>assistant\n" * 2
    run(qtbot, window, lambda: window.tokens.promptEdited.emit(prompt), p.SetPrompt)
    for _ in range(12):
        run(qtbot, window, window.step, p.Step)
    show_text_size(window, (1024, 768), th.PROJECTOR)
    window.show_view("branches")
    qtbot.wait(20)
    tree = window.branches_view.tree
    assert tree_problems(tree) == []
    top = tree.topLevelItem(0)
    assert top.toolTip(2) == prompt


def test_with_one_branch_nothing_is_compared_with_itself(window, qtbot):
    """With one branch the two boxes read "Compare branch 1: … with branch 1: …" (B's box fell back to
    its first row): B's box is empty until there is a second branch, and then holds another one."""
    run(qtbot, window, window.step, p.Step)
    window.show_view("branches")
    view = window.branches_view
    assert view.a_box.currentText().startswith("branch 1") and view.b_box.currentText() == ""
    run(qtbot, window, window.step, p.Step)
    back = run(qtbot, window, window.back, p.Back)
    other = int(next(i for i in back.trace.candidate_ids if i != back.trace.chosen))
    run(qtbot, window, lambda: window.logits.tokenChosen.emit(other), p.Choose)
    assert {view.a_box.currentText()[:8], view.b_box.currentText()[:8]} == {"branch 1", "branch 2"}
