"""Prompt pairs (issue 33, part 2): a Patch request gives engine.patching's map exactly, refuses two
prompts of different lengths with both counts, stops when cancelled and changes nothing; a
Tokenize answers the second prompt's count first; the Why view's second page runs a pair, draws
the layer x position map and cancels."""

from __future__ import annotations

import numpy as np
import pytest

from app.host.session_host import SessionHost
from app.logic import wording
from app.logic.request_policy import RequestPolicy
from app.protocol import messages as p
from engine.patching import patch_resid_pre

FIRST = "The capital of France is"
SECOND = "The capital of Germany is"


def _host(demo_model, steps: int = 1):
    replies = []
    host = SessionHost(replies.append, lambda request: None)
    host.handle(p.Load(generation=1, loaded=demo_model, prompt=FIRST))
    for g in range(2, 2 + steps):
        host.handle(p.Step(generation=g))
    assert isinstance(replies[-1], p.Finished)
    replies.clear()
    return host, replies


def test_patch_gives_the_engines_map_exactly(demo_model):
    host, replies = _host(demo_model, steps=2)
    session = host.session
    assert len(demo_model.tokenizer.encode(FIRST)) == len(demo_model.tokenizer.encode(SECOND))
    host.handle(p.Patch(generation=9, text=SECOND, step=1))
    progress = [(r.done, r.total) for r in replies if isinstance(r, p.Progress)]
    L = demo_model.info.n_layer
    assert progress == [(i, L) for i in range(1, L + 1)] and {r.what for r in replies if isinstance(r, p.Progress)} == {"patch"}
    reply = replies[-1]
    assert isinstance(reply, p.Patched) and reply.generation == 9
    answer = reply.answer
    # the pair: step 1's context (the prompt, then step 0's chosen token), and the second prompt followed by that token
    first = session.token_ids()[: session.records[1].end]
    second = np.concatenate([demo_model.tokenizer.encode(SECOND), first[len(session.prompt_ids):]])
    chosen = session.records[1].chosen
    expected = patch_resid_pre(demo_model.model, first, second, chosen)
    assert answer.target == chosen and answer.versus == -1 and answer.step == 1
    np.testing.assert_array_equal(answer.patching.metric, expected.metric)
    np.testing.assert_array_equal(answer.restored, expected.restored)
    assert answer.restored.shape == (L, len(first))
    assert (answer.first_metric, answer.second_metric) == (expected.clean, expected.corrupted)
    assert answer.first_pieces[-1] == answer.second_pieces[-1] == demo_model.tokenizer.piece(int(first[-1]))
    assert answer.target_piece == demo_model.tokenizer.piece(chosen) and answer.versus_piece == ""
    top_id, _, top_prob = answer.first_top[0]
    assert top_id == int(np.argmax(expected.clean_last)) and 0 < top_prob <= 1
    assert [c[0] for c in answer.second_top][:1] == [int(np.argmax(expected.corrupted_last))]


def test_patch_with_a_versus_token_and_the_count_first(demo_model):
    host, replies = _host(demo_model)
    host.handle(p.Tokenize(generation=5, text=SECOND))
    tokens = replies[-1]
    assert isinstance(tokens, p.Tokenized) and len(tokens.answer.ids) == len(host.session.prompt_ids)
    assert tokens.answer.pieces == tuple(demo_model.tokenizer.piece(int(i)) for i in tokens.answer.ids)
    trace = host.session.trace()
    target, versus = (int(i) for i in trace.candidate_ids[1:3])
    host.handle(p.Patch(generation=6, text=SECOND, target=target, versus=versus))
    answer = replies[-1].answer
    expected = patch_resid_pre(demo_model.model, host.session.prompt_ids, demo_model.tokenizer.encode(SECOND), target, versus)
    assert (answer.target, answer.versus) == (target, versus)
    np.testing.assert_array_equal(answer.patching.metric, expected.metric)


def test_prompts_of_different_lengths_are_refused_with_both_counts(demo_model):
    host, replies = _host(demo_model)
    longer = "The capital city of the Federal Republic of Germany is"
    n_first, n_second = len(host.session.prompt_ids), len(demo_model.tokenizer.encode(longer))
    assert n_first != n_second
    host.handle(p.Patch(generation=7, text=longer))
    reply = replies[-1]
    assert type(reply) is p.Failed and reply.request.text == longer
    assert f"the first has {n_first}, the second {n_second}" in reply.error
    assert not any(isinstance(r, p.Progress) for r in replies)


def test_cancel_after_one_layer_stops_and_changes_nothing(demo_model):
    host, replies = _host(demo_model, steps=2)
    session = host.session
    before = (session.n_steps, session.cache_length(), session.records, session.token_ids().tolist())
    emit = host.emit

    def cancel_after_the_first_layer(reply):
        emit(reply)
        if isinstance(reply, p.Progress) and reply.done == 1:  # the person pressed Cancel now
            host.set_control("cancel_patch", reply.generation)

    host.emit = cancel_after_the_first_layer
    host.handle(p.Patch(generation=8, text=SECOND))
    reply = replies[-1]
    L = demo_model.info.n_layer
    assert isinstance(reply, p.PatchCancelled) and (reply.done, reply.total) == (1, L)
    assert [r.done for r in replies if isinstance(r, p.Progress)] == [1]
    assert host.session is session
    assert (session.n_steps, session.cache_length(), session.records, session.token_ids().tolist()) == before
    assert "after layer 1 of" in wording.failure(reply)
    replies.clear()
    host.handle(p.Step(generation=9))  # the session steps on as before
    assert isinstance(replies[-1], p.Finished) and host.session.n_steps == 3


def test_a_restart_while_a_patch_runs_stops_it():
    controls = []
    policy = RequestPolicy(lambda request: None, lambda name, value: controls.append((name, value)))
    policy.add(policy.number(p.Patch(text=SECOND)))
    policy.add(policy.number(p.SetPrompt(text="another")))
    assert ("cancel_patch", 1) in controls
    controls.clear()
    policy.add(policy.number(p.Step()))  # not a restart: the patch it waits behind runs on
    assert not [c for c in controls if c[0] == "cancel_patch"]
