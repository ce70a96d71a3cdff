"""The presenter's tour: every stage's sentence carries this step's numbers, read from the record."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from app.logic.flow_numbers import flow_numbers
from app.logic.help import texts
from app.host.session_host import make_result
from app.logic.tour import STAGES, Tour, sentence, template_key
from engine import SamplingSettings, Session

SAMPLED = SamplingSettings(temperature=0.8, top_k=40, top_p=0.9, seed=3)


@pytest.fixture(scope="module")
def results(demo_model):
    """The prefill and a sampled decode step (top-k and top-p on), and a greedy and a chosen step."""
    session = Session(demo_model, SAMPLED)
    session.set_prompt("The capital of France is")
    session.step()
    prefill = make_result(session)
    session.step()
    session.step()
    sampled = make_result(session)
    session.settings = SamplingSettings(greedy=True)
    session.step()
    greedy = make_result(session)
    session.choose(int(session.trace().candidate_ids[3]))
    chosen = make_result(session)
    return {"prefill": prefill, "sampled": sampled, "greedy": greedy, "chosen": chosen}


def numbers_in(text: str) -> list[str]:
    return re.findall(r"-?\d[\d,]*(?:\.\d+)?", text)


def has(text: str, value: str) -> bool:
    return value in text


def test_every_stage_has_a_template_and_the_tour_walks_them_in_order():
    tour = Tour()
    seen = [tour.stage]
    while tour.forward():
        seen.append(tour.stage)
    assert seen == [s for s, _box in STAGES]
    assert not tour.forward() and tour.stage == "why"
    while tour.back():
        pass
    assert tour.index == 0 and not tour.back()
    templates = texts("en")["tour"]
    for key in [s for s, _ in STAGES] + ["tokens_prefill", "draw_greedy", "draw_user", "why_wait", "why_no_model"]:
        assert key in templates and "{" in json.dumps(templates[key])  # a text or a choice by the model's facts


@pytest.mark.parametrize("which", ["sampled", "prefill"])
def test_each_sentence_carries_the_step_records_numbers(results, which):
    result = results[which]
    layer, head = result.n_layer - 1, 1
    n = flow_numbers(result, layer, head)
    rec, trace, info = result.trace.record, result.trace, result.info
    last = rec.n_new - 1
    said = {stage: sentence(stage, n) for stage, _box in STAGES}

    token = int(rec.input_ids[-1])
    assert has(said["tokens"], f"token {token} ") and has(said["tokens"], f"position {rec.end - 1}")
    if which == "prefill":
        assert has(said["tokens"], f"all {rec.n_new} prompt tokens")
    embed = np.linalg.norm(rec.token_embed[last].astype(np.float64) + rec.pos_embed[last])
    assert has(said["embedding"], f"picks row {token} of the {info.vocab_size:,} × {info.d_model} embedding table")
    assert has(said["embedding"], f"starts at length {embed:.1f}")

    row = rec.attn[layer, head, last, : rec.end].astype(np.float64)
    key = int(np.argmax(row))
    piece = trace.pieces[key]  # as every view writes it: a leading space as ␣
    assert has(said["attention"], f"head {head} gives {row[key]:.0%} of its attention to “{piece}” at position {key}")
    assert has(said["attention"], f"In block {layer},")
    assert has(said["attention"], f"length {np.linalg.norm(rec.attn_out[layer].astype(np.float64)):.1f}")
    assert has(said["mlp"], f"length {np.linalg.norm(rec.mlp_out[layer].astype(np.float64)):.1f}")

    pre = rec.resid[layer, last].astype(np.float64)
    mid = pre + rec.attn_out[layer].astype(np.float64)
    post = rec.resid[layer + 1, last].astype(np.float64)
    norms = [f"{np.linalg.norm(v):.1f}" for v in (pre, mid, post)]
    assert has(said["stream"], " → ".join(norms))
    assert has(said["stream"], f"all {info.n_layer} blocks")

    assert has(said["kv"], f"gains {rec.n_new} row") and has(said["kv"], f"holds {rec.kv.positions} positions")
    assert has(said["kv"], f"{rec.kv.total_bytes / 1024:,.0f} KiB")

    final_in = rec.resid[-1, last].astype(np.float64)
    centred = final_in - final_in.mean()  # the demo's final norm is a LayerNorm: the mean subtracted, divided by the spread
    normalised = centred / np.sqrt((centred ** 2).mean() + 1e-5)
    assert has(said["ln_final"], f"from {np.linalg.norm(final_in):.1f} to {np.linalg.norm(normalised):.1f} (about √{info.d_model}")
    assert f"{np.linalg.norm(normalised):.1f}" == f"{np.sqrt(info.d_model):.1f}"  # dividing by the spread gives √d
    assert has(said["ln_final"], f"its length is {np.linalg.norm(rec.final_hidden.astype(np.float64)):.1f}.")
    assert has(said["lm_head"], f"{info.vocab_size:,} × {info.d_model}")

    logits = rec.logits.astype(np.float64)
    model = np.exp(logits - logits.max())
    model /= model.sum()
    best = int(trace.candidate_ids[0])
    assert has(said["logits"], f"highest logit, {logits[best]:.2f}") and has(said["logits"], f"{model[best]:.1%}")

    chosen = int(rec.chosen)
    probs = trace.distribution.probs
    assert has(said["sampling"], f"keeps {int(np.count_nonzero(probs > 0)):,} of the {info.vocab_size:,}")
    assert has(said["sampling"], f"sampling probability {probs[chosen]:.1%}")
    assert has(said["sampling"], f"model probability {model[chosen]:.1%}")
    assert has(said["sampling"], "top-k 40") and has(said["sampling"], "top-p 0.9")

    order, cumulative = trace.distribution.draw_order()
    i = int(np.flatnonzero(order == chosen)[0])
    start = cumulative[i - 1] if i else 0.0
    assert start <= rec.draw_u < cumulative[i]
    assert has(said["draw"], f"u = {rec.draw_u:.3f} falls in") and has(said["draw"], f"from {start:.3f} to {cumulative[i]:.3f}")
    assert has(said["draw"], f"token {chosen} ") and has(said["draw"], f"rank {trace.chosen_rank} ")
    assert has(said["appended"], f"position {rec.end}")
    for text in said.values():
        assert "?" not in numbers_in(text) and "{" not in text


def test_greedy_and_chosen_steps_say_how_the_token_was_picked(results):
    greedy = flow_numbers(results["greedy"])
    assert template_key("draw", greedy) == "draw_greedy"
    assert f"token {greedy.chosen_id} " in sentence("draw", greedy) and "u =" not in sentence("draw", greedy)
    chosen = flow_numbers(results["chosen"])
    assert chosen.chosen_by == "user" and template_key("draw", chosen) == "draw_user"
    assert f"rank {chosen.chosen_rank} " in sentence("draw", chosen)


def test_the_why_stage_names_the_two_largest_pushes_of_the_engines_split(demo_model):
    """The why sentence says the chosen token's logit as the record holds it and names the two largest
    positive parts and the most negative one of the engine's split, each with its value."""
    from engine.attribution import attribute

    session = Session(demo_model, SAMPLED)
    session.set_prompt("The capital of France is")
    session.step()
    session.step()
    result = make_result(session)
    n = flow_numbers(result)
    rec = result.trace.record
    assert "being worked out" in sentence("why", n) and "{" not in sentence("why", n)  # no split yet: it says so
    assert "needs the model" in sentence("why", n, loaded=False)  # a saved session viewed without its model
    a = attribute(session)
    said = sentence("why", n, why=a)
    assert f"Its logit {float(rec.logits[rec.chosen]):.2f} " in said and f"sum of {len(a.parts())} parts" in said
    parts = [(value, key) for key, value in a.parts()]
    words = lambda key: (f"block {key.split()[1]}'s attention" if key.startswith("attn") else  # noqa: E731
                         f"block {key.split()[1]}'s MLP" if key.startswith("mlp") else
                         {"embed": "the token embedding", "pos_embed": "the position embedding",
                          "norm_shift": "the final norm's shift", "head_bias": "the LM head's bias"}[key])
    pushes = sorted((p for p in parts if p[0] > 0), reverse=True)[:2]
    pull = min(parts)
    assert f"Largest pushes: {words(pushes[0][1])} ({pushes[0][0]:+.2f}), {words(pushes[1][1])} ({pushes[1][0]:+.2f});" in said
    assert f"largest pull: {words(pull[1])} ({pull[0]:+.2f})" in said
    assert "{" not in said
