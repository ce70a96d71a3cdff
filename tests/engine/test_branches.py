"""Branches: nothing taken is lost, switching shows a branch as it was, the cache is reused up to the
split, and memory for branches stays within the budget."""

import numpy as np
import pytest
import torch

from engine.branches import ROOT, BranchTree
from engine.sampling import model_logprob
from engine.sampling import SamplingSettings
from engine.session import Session

PROMPT = "The cat sat on the"
GREEDY = SamplingSettings(greedy=True)


def other_token(trace) -> int:
    """A likely token other than the one chosen."""
    return int(next(i for i in trace.candidate_ids if i != trace.chosen))


def plain_logits(model, ids) -> np.ndarray:
    with torch.inference_mode():
        return model(torch.tensor([list(ids)])).logits[0, -1].float().numpy()


def test_a_different_token_keeps_the_earlier_continuation(demo_model):
    session = Session(demo_model, GREEDY)
    session.set_prompt(PROMPT)
    first = [session.step() for _ in range(5)]
    first_leaf, first_text = session.node, session.text()
    session.rewind(2)
    session.choose(other_token(first[2]))
    session.step()
    session.step()
    table = session.branches()
    assert len(table.leaves()) == 2 and first_leaf in table.leaves()
    split = table.split(first_leaf, session.node)
    assert table.steps[table.index(split)] == 1  # they share the prefill and step 1, differ from step 2

    back = session.switch(first_leaf)
    assert session.text() == first_text and back.step == 4
    assert [r for r in session.records] == [t.record for t in first]  # the very records: nothing recomputed
    assert all(a is b.record for a, b in zip(session.records, first))


def test_back_then_the_same_token_returns_to_its_node(demo_model):
    session = Session(demo_model, GREEDY)
    session.set_prompt(PROMPT)
    for _ in range(4):
        session.step()
    leaf = session.node
    session.rewind(1)
    session.step()  # greedy: the same token as before
    assert len(session.branches().leaves()) == 1
    assert session.branches().leaf_of(session.node) == leaf
    session.rewind(-1)
    assert session.node == ROOT and len(session.tree) == 4  # Back before the prefill keeps the tree
    session.switch(leaf)
    assert session.n_steps == 4


def test_continuing_a_branch_reuses_the_cache_up_to_the_split(demo_model):
    session = Session(demo_model, GREEDY)
    p = len(session.set_prompt(PROMPT))
    traces = [session.step() for _ in range(6)]
    old_leaf = session.node
    session.rewind(3)
    session.choose(other_token(traces[3]))
    session.step()
    session.step()
    assert session.cache_length() == p + 5
    session.switch(session.branches().path_to(old_leaf)[4])  # step 4 of the first branch
    # the paths share the prompt and the tokens chosen at steps 0..2: the cache keeps those positions
    assert session.cache_length() == p + 3
    calls = []
    handle = demo_model.model.register_forward_pre_hook(lambda module, args, kwargs: calls.append(kwargs["input_ids"].shape[1]), with_kwargs=True)
    try:
        trace = session.step()
    finally:
        handle.remove()
    assert calls == [1, 1]  # the position the cache lacked (a catch-up, not recorded), then the step itself
    assert session.last_catch_up[0] == 1 and trace.record.n_new == 1
    assert session.cache_length() == p + 5
    np.testing.assert_allclose(trace.record.logits, plain_logits(demo_model.model, session.token_ids()[:-1]), atol=1e-4)
    assert trace.chosen == traces[5].chosen  # greedy: the first branch's step 5 again, from the cache


def test_switching_to_a_branch_without_a_shared_cache_runs_one_prefill(demo_model):
    session = Session(demo_model, GREEDY)
    session.set_prompt(PROMPT)
    first = session.step()
    session.step()
    leaf = session.node
    session.choose(other_token(session.trace()))
    session.rewind(0)
    session.choose(other_token(first))  # another prefill token: shares only the prompt
    session.step()
    session.switch(leaf)
    trace = session.step()
    np.testing.assert_allclose(trace.record.logits, plain_logits(demo_model.model, session.token_ids()[:-1]), atol=1e-4)


def test_logprobs_are_the_models_own(demo_model):
    session = Session(demo_model, SamplingSettings(temperature=0.7, top_k=5, seed=3))
    session.set_prompt(PROMPT)
    for _ in range(3):
        session.step()
    table = session.branches()
    for node, logprob in zip(table.ids, table.logprobs):
        record = session.tree.record(int(node))
        expected = torch.log_softmax(torch.from_numpy(record.logits).double(), -1)[record.chosen].item()
        assert logprob == pytest.approx(expected, abs=1e-9)
    assert table.pieces == tuple(demo_model.tokenizer.piece(t) for t in table.tokens)
    assert model_logprob(np.array([0.0, 0.0]), 1) == pytest.approx(np.log(0.5))


def test_memory_for_branches_is_bounded(demo_model):
    session = Session(demo_model, GREEDY)
    session.set_prompt(PROMPT)
    root_trace = session.step()
    for _ in range(3):
        session.step()
    one_branch = session.tree.nbytes(exclude={session.node}) - session.tree.nbytes(exclude=set(session.tree.nodes()))
    session.tree.budget_bytes = int(one_branch * 1.5)  # room for about one other branch of three steps
    leaves = []
    for k in range(4):  # four more branches from the prefill, each three steps long
        session.rewind(0)
        session.choose(int(root_trace.candidate_ids[k + 1]))
        session.step()
        session.step()
        leaves.append(session.node)
    tree = session.tree
    assert tree.nbytes(exclude=set(session.tree.path(session.node))) <= tree.budget_bytes
    assert tree.dropped > 0 and leaves[0] not in tree  # the branch visited longest ago went first
    assert leaves[-2] in tree  # the one visited last before the current one stayed
    assert all(n in tree for n in tree.path(session.node))
    table = session.branches()
    assert table.dropped == tree.dropped
    for leaf in table.leaves():  # a dropped branch goes whole: every remaining leaf still reaches the prefill
        assert table.steps[table.index(table.path_to(leaf)[0])] == 0


def test_tree_put_reuses_a_taken_token():
    tree = BranchTree()
    rec = _record(step=0, chosen=7)
    a = tree.put(ROOT, rec)
    b = tree.put(ROOT, _record(step=0, chosen=7))
    c = tree.put(ROOT, _record(step=0, chosen=8))
    assert a == b != c and tree.children(ROOT) == [a, c]
    with pytest.raises(KeyError):
        tree.put(99, rec)


def _record(step: int, chosen: int):
    from engine.trace import KVStats, StepRecord

    z = np.zeros((1, 4), np.float32)
    kv = KVStats(np.zeros(1, np.int64), np.zeros(1, np.int64), 0, 4, 4, 8)
    return StepRecord(step, 0, np.array([1]), z, z, np.zeros((1, 1, 1, 1), np.float16), np.zeros(1, np.int64), np.zeros((2, 1, 4), np.float32),
                      np.zeros((1, 4), np.float16), np.zeros((1, 4), np.float16), np.zeros(4, np.float32),
                      np.arange(10, dtype=np.float32), kv, 1.0, 1.0, GREEDY, chosen, "greedy")
