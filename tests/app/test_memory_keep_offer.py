"""A prompt refused because the machine's free memory is too small for its prefill: the window's
"Keep only the last N tokens" offers the N the engine computed from memory (``engine.memory``), carried
by the PromptTooLong reply, not the context window's figure; pressing it keeps exactly those N.
Run on the session host and the step gate (no window)."""

from __future__ import annotations

from app.host.session_host import SessionHost
from app.logic.step_gate import StepGate
from app.protocol import messages as p
from engine import memory
from engine.defaults import truncation_keeps
from engine.session import _mlp_width


def test_the_keep_offer_is_the_engines_memory_figure(demo_model, monkeypatch):
    replies = []
    host = SessionHost(replies.append, lambda request: None)
    host.handle(p.Load(generation=1, loaded=demo_model, prompt="Hello"))
    gate = StepGate()
    gate.show(replies.pop().result)
    per = memory.bytes_per_position(demo_model.info, _mlp_width(demo_model.model, demo_model.info.d_model))
    monkeypatch.setattr(memory, "available_bytes", lambda: int(12 * per / memory.MARGIN) + 1)  # 12 positions fit
    assert truncation_keeps(demo_model.info.n_positions) > 12  # memory, not the context, is the limit
    text = " x" * 40
    host.handle(p.SetPrompt(generation=2, text=text))
    (refused,) = replies
    assert isinstance(refused, p.PromptTooLong) and refused.keep == 12, refused
    assert gate.fail(refused).keep == 12 and "last 12 tokens" in refused.error  # the offer says what the message says
    replies.clear()
    host.handle(p.SetPrompt(generation=3, text=text, truncate=True))  # the button: the same N kept
    (cut,) = replies
    assert isinstance(cut, p.Finished) and len(cut.result.prompt_ids) == 12


def test_a_prompt_longer_than_the_context_offers_the_context_less_room_to_generate(demo_model):
    replies = []
    host = SessionHost(replies.append, lambda request: None)
    host.handle(p.Load(generation=1, loaded=demo_model, prompt="Hello"))
    replies.clear()
    n = demo_model.info.n_positions
    host.handle(p.SetPrompt(generation=2, text=" x" * (n + 5)))
    (refused,) = replies
    assert isinstance(refused, p.PromptTooLong) and refused.keep == truncation_keeps(n)


def test_the_gate_uses_the_replys_figure_and_falls_back_to_the_context():
    gate = StepGate()
    assert gate.fail(p.PromptTooLong(3, p.SetPrompt(text="x"), "Too long.", keep=77)).keep == 77
    assert gate.fail(p.PromptTooLong(4, p.SetPrompt(text="x"), "Too long.")).keep == 0  # nothing shown, no figure


def test_a_long_prefill_tells_its_progress_block_by_block(demo_model, monkeypatch):
    """A pass over PROGRESS_FROM positions or more sends Progress(what="prefill") as each block
    finishes, before its result; a decode step sends none; the status line's words name the block."""
    from app.logic import wording
    from engine import session as session_module

    monkeypatch.setattr(session_module, "PROGRESS_FROM", 8)
    replies = []
    host = SessionHost(replies.append, lambda request: None)
    host.handle(p.Load(generation=1, loaded=demo_model, prompt=" a" * 10))
    replies.clear()
    host.handle(p.Step(generation=2))
    layers = demo_model.info.n_layer
    told = [(r.done, r.total) for r in replies if isinstance(r, p.Progress)]
    assert told == [(i, layers) for i in range(1, layers + 1)]
    assert all(r.what == "prefill" and r.generation == 2 for r in replies[:-1]) and isinstance(replies[-1], p.Finished)
    replies.clear()
    host.handle(p.Step(generation=3))  # one position: nothing to tell
    assert [type(r) for r in replies] == [p.Finished]
    assert host.session.progress is None
    assert wording.prefill_progress(12, 30) == "Reading the prompt: block 12 of 30…"
