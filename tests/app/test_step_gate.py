"""The step gate on its own: what the run controls allow, and the words for a refusal. No Qt."""

from __future__ import annotations

from types import SimpleNamespace

from app.protocol import messages as p
from app.logic.step_gate import EMPTY_PROMPT, StepGate
from engine.defaults import truncation_keeps


def result(request=p.Step(), *, trace=True, stopped=False, can_step=True, name="gpt2-tiny-demo"):
    """Only what the gate reads of a SessionResult."""
    info = SimpleNamespace(name=name, n_positions=256)
    shown = SimpleNamespace(stop_message="The context window is full.") if trace else None
    return SimpleNamespace(request=request, trace=shown, stopped=stopped, can_step=can_step, why_not="Viewed only.", info=info)


def test_nothing_runs_before_a_session_is_shown():
    gate = StepGate()
    assert not gate.can_step and not gate.can_go_back and gate.can_go_on
    assert gate.why_not_step() is None  # the controller answers (no model yet)


def test_a_session_that_can_go_on_allows_everything():
    gate = StepGate()
    gate.show(result())
    assert gate.can_step and gate.can_go_back and gate.why_not_step() is None
    gate.show(result(p.Load(), trace=False))
    assert gate.can_step and not gate.can_go_back


def test_a_stopped_session_says_why_without_an_error():
    gate = StepGate()
    gate.show(result(stopped=True))
    refusal = gate.why_not_step()
    assert not gate.can_step and not gate.can_go_on
    assert refusal.message == "The context window is full." and not refusal.error


def test_a_session_viewed_without_its_model_does_not_step():
    gate = StepGate()
    gate.show(result(p.OpenSession(), can_step=False))
    assert not gate.can_step and gate.why_not_step().message == "Viewed only." and gate.why_not_step().error


def test_a_refused_prompt_turns_step_off_until_a_prompt_runs():
    gate = StepGate()
    gate.show(result())
    too_long = gate.fail(p.PromptTooLong(3, p.SetPrompt(text="x", generation=3), "The prompt has 300 tokens."))
    assert too_long.keep == truncation_keeps(256)
    assert too_long.message == "The prompt has 300 tokens. Step is off until the prompt can run."
    assert not gate.can_step and gate.why_not_step().message == too_long.message
    gate.show(result(p.Step()))  # a step of the old prompt drawn meanwhile: still off
    assert not gate.can_step
    gate.show(result(p.SetPrompt(generation=4), trace=False))  # the prompt typed next ran
    assert gate.can_step


def test_an_emptied_prompt_turns_step_off():
    gate = StepGate()
    gate.show(result())
    assert gate.prompt_emptied(sent=5) == EMPTY_PROMPT and not gate.can_step
    gate.show(result(p.SetPrompt(generation=5), trace=False))  # sent before the editor was emptied
    assert not gate.can_step and gate.why_not_step().message == EMPTY_PROMPT
    gate.show(result(p.SetPrompt(generation=6), trace=False))  # the text typed since
    assert gate.can_step
    gate.prompt_emptied(sent=7)
    gate.show(result(p.Load(generation=7), trace=False))  # a model loaded meanwhile: its prompt fills the editor
    assert gate.can_step


def test_the_words_for_each_refusal():
    gate = StepGate()
    gate.show(result(name="gpt2-tiny-demo"))
    load = p.Load(source="gpt2")
    assert gate.fail(p.Failed(1, load, "No network.", kept="gpt2-tiny-demo")).message == "No network. Still using gpt2-tiny-demo."
    assert gate.fail(p.Failed(1, load, "No network.", kept="other")).message == "No network. Still using other."  # the engine's, not the one drawn
    assert gate.fail(p.DownloadCancelled(2, load, "", kept="gpt2-tiny-demo")).message == "Download cancelled: still using gpt2-tiny-demo."
    assert gate.fail(p.Crashed(3, p.Step(), "ValueError: bad")).message == "Unexpected error: ValueError: bad"
    assert gate.fail(p.Crashed(3, p.Step(), "ValueError: bad")).keep == 0 and gate.can_step
    assert "Restart the model" in gate.fail(p.NotSent(4, p.Step())).message  # the engine is stopped
