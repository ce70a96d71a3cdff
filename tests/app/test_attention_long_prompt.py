"""A prefill longer than the engine keeps every attention row of (engine.trace.ALL_ROWS_UP_TO, made
small here) keeps a sample: the attention panel asks the engine for the selected head's other rows
and draws the very map a short prefill records, head by head."""

from __future__ import annotations

import numpy as np

from app.protocol import messages as p
from engine import SamplingSettings, Session, trace

from .helpers import run

PROMPT = "The cat sat on the mat and looked at the dog"


def test_a_sampled_prefills_map_comes_from_the_engine_head_by_head(window, qtbot, demo_model, monkeypatch):
    whole = Session(demo_model, SamplingSettings(greedy=True))
    whole.set_prompt(PROMPT)
    expected = whole.step().record.attn.astype(np.float32)  # [L, H, P, P]: every row kept
    P = expected.shape[2]
    monkeypatch.setattr(trace, "ALL_ROWS_UP_TO", 4)
    monkeypatch.setattr(trace, "SAMPLED_ROWS", 3)
    run(qtbot, window, lambda: window.tokens.editor.setPlainText(PROMPT), p.SetPrompt)
    window.state.set_layer(1)
    window.state.set_head(2)
    panel, controller = window.attention, window.controller
    with qtbot.waitSignal(controller.mapReady, timeout=20_000) as got:
        result = run(qtbot, window, window.step, p.Step)
    assert len(result.records[0].attn_rows) == 3 < P
    assert (got.args[0].layer, got.args[0].head) == (1, 2)
    np.testing.assert_allclose(panel.shown, np.where(np.tril(np.ones((P, P))) > 0, expected[1, 2], np.nan), atol=1e-3)
    assert "computing" not in panel.caption.text()
    with qtbot.waitSignal(controller.mapReady, timeout=20_000) as got:
        window.state.set_head(0)  # another head: its rows are asked for
    assert (got.args[0].layer, got.args[0].head) == (1, 0)
    np.testing.assert_allclose(panel.shown[np.tril_indices(P)], expected[1, 0][np.tril_indices(P)], atol=1e-3)
