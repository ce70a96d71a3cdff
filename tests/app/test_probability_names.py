"""One vocabulary for probability: the *model probability* (softmax of the raw logits) and the
*sampling probability* (after penalty, temperature, top-k and top-p: what the draw used). For a step
with top-k and top-p on, the chosen token's labelled probabilities read the same in the Candidates
panel, the status line, Inside, Branches and the exported tables."""

from __future__ import annotations

import numpy as np

from app.logic import tables
from engine.sampling import SamplingSettings, entropy_bits, softmax

from app.protocol import messages as p

from .helpers import choose_settings, run
from .test_branches_view import _items
from .test_export import read_csv
from .test_inside_view import show_inside


def test_the_trace_names_both_probabilities_and_their_entropies(window, qtbot):
    choose_settings(window.sampling, SamplingSettings(temperature=1.3, top_k=12, top_p=0.8, seed=3))
    trace = run(qtbot, window, window.step, p.Step).trace
    model = softmax(trace.record.logits)
    assert np.isclose(trace.model_prob, model[trace.chosen], rtol=1e-5)
    assert trace.sampling_prob == trace.distribution.probs[trace.chosen]
    assert np.isclose(trace.model_entropy_bits, entropy_bits(model))
    assert trace.model_entropy_ceiling_bits == np.log2(trace.record.logits.shape[0])
    left = int((trace.distribution.probs > 0).sum())
    assert trace.tokens_left == left <= 12 and trace.sampling_entropy_ceiling_bits == np.log2(left)
    assert trace.sampling_entropy_bits <= trace.sampling_entropy_ceiling_bits + 1e-9


def test_the_chosen_tokens_probabilities_read_the_same_in_every_view(window, qtbot, tmp_path):
    choose_settings(window.sampling, SamplingSettings(temperature=1.3, top_k=12, top_p=0.8, seed=3))
    for _ in range(3):
        result = run(qtbot, window, window.step, p.Step)
    trace = result.trace
    sampling, model = f"{trace.sampling_prob:.1%}", f"{trace.model_prob:.1%}"
    assert sampling != model  # the filters moved it: the two are told apart

    summary = window.logits.summary.text()  # the Candidates panel
    assert f"sampling p <b>{sampling}</b>" in summary and f"model p {model}" in summary
    window.show_view("sampling")
    rest = window.sampling_view.rest.text()  # the Sampling view: both entropies, each with its ceiling
    assert f"sampling {trace.sampling_entropy_bits:.2f} of at most {trace.sampling_entropy_ceiling_bits:.2f} bits" in rest
    assert f"model {trace.model_entropy_bits:.2f} of at most {trace.model_entropy_ceiling_bits:.1f} bits" in rest
    tip = window.logits.summary.toolTip()  # both entropies, each with its ceiling
    assert f"model entropy {trace.model_entropy_bits:.2f} bits, at most {trace.model_entropy_ceiling_bits:.1f}" in tip
    assert f"Sampling entropy {trace.sampling_entropy_bits:.2f} bits, at most {trace.sampling_entropy_ceiling_bits:.2f}" in tip
    status = window.status_line.status_label.text()
    assert f"sampling p {sampling}, model p {model}" in status and f"Token {trace.step + 1} " in status

    with qtbot.waitSignal(window.exporter.saved, timeout=20_000):  # the history is written on the export thread
        assert window.exporter.export_table("history", tmp_path / "history.csv")  # the exported tables
    last = read_csv(tmp_path / "history.csv")[-1]
    assert f"{float(last['sampling_prob']):.1%}" == sampling and f"{float(last['model_prob']):.1%}" == model
    window.exporter.export_table("candidates", tmp_path / "candidates.csv")
    row = next(r for r in read_csv(tmp_path / "candidates.csv") if r["chosen"] == "1")
    assert f"{float(row['sampling_prob']):.1%}" == sampling and f"{float(row['model_prob']):.1%}" == model
    assert {"sampling_prob", "model_prob"} <= set(tables.CANDIDATE_COLUMNS)

    show_inside(window, qtbot)  # Inside: the model's own, and the sampler's beside it
    head = window.inside.head.text.text()
    assert f"model probability {model}" in head and f"sampling probability, after the settings, was {sampling}" in head
    lens = window.inside.lens.table
    assert "model p" in lens.horizontalHeaderItem(lens.columnCount() - 1).text()
    assert lens.item(lens.rowCount() - 1, lens.columnCount() - 1).text().startswith(model)

    # Branches: take another token at this step; the branch that held this step's token starts
    # there and names its model probability
    other = int(next(i for i in trace.candidate_ids if i != trace.chosen))
    run(qtbot, window, lambda: window.logits.tokenChosen.emit(other), p.Choose)
    window.show_view("branches")
    tree = window.branches_view.tree
    assert "model probability" in tree.headerItem().text(1)
    starts = [item.text(1) for item in _items(tree)]
    assert f"“{trace.chosen_piece}”  {model}" in [text[: len(trace.chosen_piece) + 4 + len(model)] for text in starts]
