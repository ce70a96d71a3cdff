"""A load warms the model up (a short prefill and one decode step, with every hook), so the first
step a person takes is not timed with torch's one-off start-up work; the warm-up leaves no trace."""

from __future__ import annotations

import numpy as np

from engine import hf_compat, loading
from engine import session as session_module
from engine.sampling import SamplingSettings
from engine.session import Session


def test_a_load_runs_two_short_passes_before_it_returns(monkeypatch):
    passes = []
    real = hf_compat.forward

    def counting(model, input_ids, *args, **kwargs):
        passes.append(tuple(input_ids.shape))
        return real(model, input_ids, *args, **kwargs)

    monkeypatch.setattr(hf_compat, "forward", counting)
    loaded = loading.load_model(None)
    n = len(loaded.tokenizer.encode(session_module.WARM_UP_PROMPT))
    assert passes == [(1, n), (1, 1)]  # the prefill, then one decode step against its cache


def test_the_warm_up_changes_nothing_a_session_computes(demo_model):
    def first_steps():
        s = Session(demo_model, SamplingSettings(temperature=0.8, top_k=10, seed=1))
        s.set_prompt("The cat sat on the")
        return [s.step() for _ in range(3)]

    before = first_steps()
    session_module.warm_up(demo_model)
    after = first_steps()
    assert [t.chosen for t in before] == [t.chosen for t in after]
    for a, b in zip(before, after):
        np.testing.assert_array_equal(a.record.logits, b.record.logits)
