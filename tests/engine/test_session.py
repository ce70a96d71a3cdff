"""Session behaviour: stepping, rewind, branch, re-sample, stops and bad requests."""

import numpy as np
import pytest
import torch

from engine import GenerationStopped, PromptError, SamplingSettings, Session, SessionError

PROMPT = "The cat sat on the"


def count_forwards(model):
    calls = []
    handle = model.register_forward_pre_hook(lambda *a: calls.append(1))
    return calls, handle


def test_prefill_then_single_position_decodes(demo_model):
    session = Session(demo_model, SamplingSettings(greedy=True))
    p = len(session.set_prompt(PROMPT))
    first = session.step().record
    assert (first.step, first.start, first.n_new) == (0, 0, p)
    assert first.attn.shape == (4, 4, p, p) and first.attn.dtype == np.float16
    assert first.resid.shape == (5, p, 256) and first.token_embed.shape == (p, 256)
    second = session.step().record
    assert (second.step, second.start, second.n_new) == (1, p, 1)
    assert second.input_ids.tolist() == [first.chosen]
    assert second.attn.shape == (4, 4, 1, p + 1)


def test_attention_is_causal_and_rows_sum_to_one(demo_model):
    session = Session(demo_model)
    session.set_prompt(PROMPT)
    attn = session.step().record.attn.astype(np.float32)  # [L, H, P, P]
    upper = np.triu(np.ones(attn.shape[-2:], dtype=bool), k=1)
    assert (attn[..., upper] == 0).all()
    np.testing.assert_allclose(attn.sum(-1), 1, atol=2e-3)


def test_trace_fields_are_consistent(demo_model):
    session = Session(demo_model, SamplingSettings(temperature=0.8, top_k=20, seed=1))
    session.set_prompt(PROMPT)
    trace = session.step()
    dist = trace.distribution
    assert trace.chosen_prob == pytest.approx(float(dist.probs[trace.chosen]))
    assert dist.kept.sum() <= 20 and dist.kept[trace.chosen]
    assert trace.chosen_rank == int((trace.record.logits > trace.record.logits[trace.chosen]).sum()) + 1
    assert trace.candidate_ids[0] == int(np.argmax(trace.record.logits))
    assert len(trace.candidate_pieces) == len(trace.candidate_ids)
    assert trace.pieces == ("The", "␣cat", "␣sat", "␣on", "␣the")
    assert 0 < trace.entropy_bits < np.log2(20) + 1e-6
    assert trace.record.forward_ms > 0 and trace.record.step_ms >= trace.record.forward_ms


def test_rewind_crops_the_cache_and_replays(demo_model):
    session = Session(demo_model, SamplingSettings(temperature=1.0, seed=5))
    p = len(session.set_prompt(PROMPT))
    originals = [session.step() for _ in range(6)]
    trace = session.rewind(2)
    assert session.n_steps == 3 and session.cache_length() == p + 2
    assert trace.chosen == originals[2].chosen
    replay = [session.step() for _ in range(3)]
    for a, b in zip(replay, originals[3:]):
        assert a.chosen == b.chosen  # seed depends on (seed, step): the replay is exact
        np.testing.assert_allclose(a.record.logits, b.record.logits, atol=1e-5)
    assert session.rewind(-1) is None and session.n_steps == 0 and session.cache_length() == 0


def test_choose_branches_and_next_step_continues_from_it(demo_model):
    session = Session(demo_model, SamplingSettings(greedy=True))
    p = len(session.set_prompt(PROMPT))
    session.step()
    branch = session.choose(3290)  # " dog"
    assert branch.chosen == 3290 and branch.record.chosen_by == "user"
    assert branch.chosen_piece == "␣dog"
    nxt = session.step()
    assert nxt.record.input_ids.tolist() == [3290]
    assert nxt.context_ids.tolist()[-1] == 3290 and len(nxt.context_ids) == p + 1
    with pytest.raises(SessionError, match="not in the vocabulary"):
        session.choose(10**6)


def test_resample_runs_no_forward_pass(demo_model):
    session = Session(demo_model, SamplingSettings(greedy=True))
    session.set_prompt(PROMPT)
    before = session.step()
    calls, handle = count_forwards(demo_model.model)
    try:
        after = session.resample(SamplingSettings(temperature=2.0, top_k=5, seed=3))
    finally:
        handle.remove()
    assert calls == []
    assert after.record.logits is before.record.logits
    assert after.distribution.kept.sum() == 5
    assert after.record.settings.top_k == 5 and session.settings.top_k == 5
    assert after.distribution.kept[after.chosen]


def test_stops_at_max_new_tokens(demo_model):
    session = Session(demo_model, SamplingSettings(greedy=True), max_new_tokens=2)
    session.set_prompt(PROMPT)
    session.step()
    assert session.step().stop_reason == "max_new_tokens"
    with pytest.raises(GenerationStopped) as stopped:
        session.step()
    assert stopped.value.reason == "max_new_tokens" and "2 new tokens" in str(stopped.value)


def test_stops_at_end_of_text(demo_model):
    session = Session(demo_model, SamplingSettings(greedy=True))
    session.set_prompt(PROMPT)
    session.step()
    trace = session.choose(demo_model.tokenizer.eos_id)
    assert trace.stop_reason == "end_of_text" and "endoftext" in trace.stop_message
    with pytest.raises(GenerationStopped):
        session.step()
    session.rewind(0)
    session.choose(13)
    session.step()  # choosing another token lifts the stop


def test_stops_when_context_is_full(tiny_model):
    capacity = tiny_model.info.n_positions  # 64
    session = Session(tiny_model, SamplingSettings(greedy=True))
    session.set_prompt(" a" * (capacity - 3))
    steps = []
    while True:
        try:
            steps.append(session.step())
        except GenerationStopped as exc:
            assert exc.reason == "context_full" and str(capacity) in str(exc)
            break
    assert steps[-1].stop_reason == "context_full"
    assert steps[-1].record.end == capacity  # the model saw a full window
    assert session.cache_length() == capacity


def test_prompt_errors(demo_model):
    session = Session(demo_model)
    with pytest.raises(PromptError, match="empty"):
        session.set_prompt("")
    with pytest.raises(SessionError, match="prompt"):
        session.step()
    long_text = " word" * 300
    with pytest.raises(PromptError, match="at most 256 tokens. .* keep only its last 192 tokens"):
        session.set_prompt(long_text)
    ids = session.set_prompt(long_text, truncate=True)
    assert len(ids) == 192  # a quarter of the window stays free to generate
    assert session.step().record.kv.positions == 192


def test_failed_step_leaves_the_session_at_its_last_good_step(demo_model):
    session = Session(demo_model, SamplingSettings(greedy=True))
    session.set_prompt(PROMPT)
    good = session.step()
    block = demo_model.model.transformer.h[2]

    def boom(*_):
        raise RuntimeError("injected fault")

    handle = block.register_forward_pre_hook(boom)
    try:
        with pytest.raises(RuntimeError, match="injected"):
            session.step()
    finally:
        handle.remove()
    assert session.n_steps == 1 and session.cache_length() == good.record.end
    retry = session.step()  # the cache is consistent: the retry equals a clean run
    clean = Session(demo_model, SamplingSettings(greedy=True))
    clean.set_prompt(PROMPT)
    clean.step()
    np.testing.assert_allclose(retry.record.logits, clean.step().record.logits, atol=1e-5)


def test_failed_prefill_leaves_no_cache(demo_model):
    session = Session(demo_model)
    session.set_prompt(PROMPT)
    handle = demo_model.model.transformer.h[0].register_forward_pre_hook(lambda *a: 1 / 0)
    try:
        with pytest.raises(ZeroDivisionError):
            session.step()
    finally:
        handle.remove()
    assert session.n_steps == 0 and session.cache_length() == 0
    assert session.step().step == 0


def test_trace_of_an_earlier_step(demo_model):
    session = Session(demo_model, SamplingSettings(greedy=True))
    session.set_prompt(PROMPT)
    first = session.step()
    session.step()
    again = session.trace(0)
    assert again.chosen == first.chosen and again.stop_reason is None
    np.testing.assert_array_equal(again.distribution.probs, first.distribution.probs)
    with pytest.raises(SessionError):
        session.trace(7)
    with pytest.raises(SessionError):
        session.rewind(5)


def test_projection_is_fixed_and_deterministic(demo_model):
    from engine.projection import fit

    session = Session(demo_model)
    proj = session.projection
    assert proj is session.projection  # fit once per model
    again = fit(demo_model.model.get_input_embeddings().weight.detach().numpy())
    np.testing.assert_allclose(again.components, proj.components, atol=1e-5)
    np.testing.assert_allclose(np.linalg.norm(proj.components, axis=1), 1, atol=1e-5)
    assert (proj.explained[:-1] >= proj.explained[1:]).all()
    session.set_prompt(PROMPT)
    resid = session.step().record.resid
    assert proj.project(resid).shape == (5, 5, 2) and proj.project(resid, dims=3).shape == (5, 5, 3)


def test_torch_threads_untouched(demo_model):
    before = torch.get_num_threads()
    torch.set_num_threads(3)  # a count nothing in the engine would choose (the tests run with one)
    try:
        session = Session(demo_model)
        session.set_prompt(PROMPT)
        session.step()
        assert torch.get_num_threads() == 3
    finally:
        torch.set_num_threads(before)


def test_draw_u_is_recorded_and_selects_the_token(demo_model):
    from engine.sampling import random_u

    session = Session(demo_model, SamplingSettings(temperature=1.2, top_p=0.95, seed=21))
    session.set_prompt(PROMPT)
    for step in range(3):
        trace = session.step()
        record = trace.record
        assert record.draw_u == random_u(record.settings, step) and 0 <= record.draw_u < 1
        st = trace.distribution.stages(np.array([record.chosen]))
        assert st.draw_start[0] <= record.draw_u < st.draw_end[0]
    user = session.choose(13).record
    assert user.chosen_by == "user" and np.isnan(user.draw_u)
    again = session.resample(SamplingSettings(temperature=1.2, seed=22)).record  # a re-sample draws a new u
    assert again.draw_u == random_u(again.settings, 2) != record.draw_u and again.chosen_by == "sampled"
    assert np.isnan(session.resample(SamplingSettings(greedy=True)).record.draw_u)


def test_penalised_tokens_are_marked(demo_model):
    session = Session(demo_model, SamplingSettings(repetition_penalty=2.0, seed=1))
    session.set_prompt("The cat sat. The dog sat.")
    trace = session.step()
    context = np.unique(trace.context_ids)
    ids = np.concatenate([context, trace.candidate_ids[:20]])
    ids = ids[np.sort(np.unique(ids, return_index=True)[1])]  # distinct, context first
    st = trace.distribution.stages(ids)
    assert st.penalised.tolist() == [int(i) in set(context.tolist()) for i in ids]
    assert st.penalised.sum() == len(context) and st.rest_penalised == 0
    raw = trace.record.logits[ids]
    np.testing.assert_allclose(st.after_penalty[st.penalised], np.where(raw > 0, raw / 2, raw * 2)[st.penalised])
    np.testing.assert_array_equal(st.after_penalty[~st.penalised], raw[~st.penalised])
    assert trace.distribution.stages(trace.candidate_ids[:5]).rest_penalised == len(context) - np.isin(trace.candidate_ids[:5], context).sum()
    off = Session(demo_model, SamplingSettings(seed=1))
    off.set_prompt("The cat sat. The dog sat.")
    st_off = off.step().distribution.stages(ids)
    assert not st_off.penalised.any() and st_off.in_context.tolist() == st.penalised.tolist()


def test_a_prompt_too_big_for_the_free_memory_is_refused_or_cut_to_what_fits(demo_model, monkeypatch):
    """Before a pass the engine estimates what it needs (engine.memory): a prompt that would not fit
    in the machine's free memory is refused in words, or cut to the last tokens that fit."""
    from engine import memory
    from engine.errors import PromptError, SessionError

    per = memory.bytes_per_position(demo_model.info, 4 * demo_model.info.d_model)
    monkeypatch.setattr(memory, "available_bytes", lambda: int(10 * per / memory.MARGIN) + 1)  # 10 positions fit
    session = Session(demo_model)
    text = " x" * 40
    with pytest.raises(PromptError, match=r"memory free: about 10 tokens fit.*keep only its last 10 tokens") as refused:
        session.set_prompt(text)
    assert (refused.value.tokens, refused.value.keep) == (40, 10)  # what the window's offer says (PromptTooLong)
    assert len(session.set_prompt(text, truncate=True)) == 10
    session.step()
    session.set_prompt_ids(list(range(30)))  # no tokenizer check: the pass itself refuses
    with pytest.raises(SessionError, match="The next step reads a text 30 tokens long"):
        session.step()
    monkeypatch.setattr(memory, "available_bytes", lambda: None)  # unknown: no limit but the context
    assert session.positions_that_fit() == demo_model.info.n_positions
