"""The rule for what the person typed, checked on the request policy and the step gate with a fake
engine (plain Python, no Qt, no model): a text the person typed is either run, or still in the editor
with Step refusing and saying why. Requests made stale by a restart may be dropped; a prompt edit
only by a newer prompt edit, whatever loads, resets or files come after it, and its refusal is news
even when a restart made its reply stale."""

from __future__ import annotations

import random
from types import SimpleNamespace

import pytest

from app.protocol import messages as p
from app.logic.request_policy import RequestPolicy, Verdict
from app.logic.step_gate import StepGate

TOO_LONG = "a" * 50  # the fake model reads at most 40 characters
BROKEN = "no-config-folder"


def cut(text: str) -> str:
    """What a Load runs of a too-long prompt: its end (a SetPrompt refuses it instead)."""
    return text[-40:]


class FakeEngine:
    """Holds a model and a prompt; answers requests as the session host does (only what the window reads)."""

    def __init__(self):
        self.model, self.prompt = "tiny", "The cat sat on the"

    def answer(self, request: p.Request) -> p.Reply:
        g = request.generation
        match request:
            case p.SetPrompt(text=text) if len(text) > 40:
                return p.PromptTooLong(g, request, "The prompt is too long.")
            case p.SetPrompt(text=text):
                self.prompt = text
            case p.Load(source=source, prompt=text) if source == BROKEN:
                return p.Failed(g, request, f"{BROKEN} has no config.json.", kept=self.model)
            case p.Load(source=source, prompt=text):
                self.model, self.prompt = source, cut(text or self.prompt)
            case p.SaveSession() if self.prompt == "":
                return p.Failed(g, request, "Nothing to save yet: step at least once.")
        return p.Finished(g, self.result(request))

    def result(self, request: p.Request):
        info = SimpleNamespace(name=self.model, n_positions=40)
        return SimpleNamespace(generation=request.generation, request=request, info=info, prompt=self.prompt,
                               trace=None, stopped=False, can_step=True, why_not="")


class Window:
    """The controller's and the window's handling of replies, as in app.window.controller and app.window.window."""

    def __init__(self, engine: FakeEngine):
        self.engine, self.sent = engine, []
        self.policy = RequestPolicy(self.sent.append, lambda name, value: None, clock=lambda: 0.0)
        self.gate = StepGate()
        self.editor = engine.prompt
        self.status = ""
        self.shown = None
        self.ask(p.Load(source="tiny", prompt=self.editor))
        self.settle_all()

    def ask(self, request: p.Request) -> None:
        self.policy.add(self.policy.number(request))

    def type(self, text: str) -> None:
        self.editor = text
        self.ask(p.SetPrompt(text=text))

    def step(self) -> None:
        refusal = self.gate.why_not_step()
        if refusal is not None:
            self.status = refusal.message
        else:
            self.ask(p.Step())

    def answer_one(self) -> None:
        request = self.policy.in_flight
        reply = self.engine.answer(request)
        verdict = self.policy.settle(reply)
        if verdict is Verdict.SHOW and isinstance(reply, p.Finished):
            self.shown = reply.result
            self.gate.show(reply.result)
        elif verdict in (Verdict.SHOW, Verdict.REFRESH) and isinstance(reply, p.Failed):
            self.status = self.gate.fail(reply).message
            if verdict is Verdict.REFRESH:
                self.ask(p.Refresh())

    def settle_all(self) -> None:
        while self.policy.in_flight is not None:
            self.answer_one()


def check_typed_text(window: Window) -> None:
    """Settled: the editor's text is what the engine runs (a load may run its end), and the window
    draws that; or Step refuses and says why."""
    engine = window.engine
    assert window.shown.prompt == engine.prompt and window.shown.info.name == engine.model, "the window draws another session"
    if engine.prompt not in (window.editor, cut(window.editor)):
        refusal = window.gate.why_not_step()
        assert refusal is not None and refusal.message, f"{window.editor!r} did not run, {engine.prompt!r} did, and Step is on"
        window.step()
        assert window.status == refusal.message


ACTIONS = ["type", "type", "type_long", "load", "load_broken", "reset", "step", "save", "answer", "answer", "answer"]


@pytest.mark.parametrize("seed", range(60))
def test_a_typed_text_runs_or_step_says_why(seed):
    rng = random.Random(seed)
    window = Window(FakeEngine())
    for n in range(40):
        action = rng.choice(ACTIONS)
        if action == "type":
            window.type(f"text {seed}.{n}")
        elif action == "type_long":
            window.type(TOO_LONG + str(n))
        elif action == "load":
            window.ask(p.Load(source=f"model-{n}", prompt=window.editor))
        elif action == "load_broken":
            window.ask(p.Load(source=BROKEN, prompt=window.editor))
        elif action == "reset":
            window.ask(p.Reset())
        elif action == "step":
            window.step()
        elif action == "save":
            window.ask(p.SaveSession(path="s.npz"))
        elif window.policy.in_flight is not None:
            window.answer_one()
        if rng.random() < 0.3:
            window.settle_all()
            check_typed_text(window)
    window.settle_all()
    check_typed_text(window)


def test_the_reproduction_a_failed_load_while_an_edit_waits():
    """Type while a model loads (the edit waits behind the load), then open a folder that cannot be
    opened: the edit still runs, on the model the engine holds, and the refusal names that model."""
    window = Window(FakeEngine())
    window.ask(p.Load(source="other", prompt=window.editor))  # a model loads
    window.type("A new prompt")  # the edit waits behind it
    window.ask(p.Load(source=BROKEN, prompt=window.editor))
    window.settle_all()
    assert window.engine.prompt == "A new prompt" and window.shown.prompt == "A new prompt"
    assert window.status.endswith("Still using other.")  # the model the engine holds, which the stale load opened
    assert window.gate.can_step


@pytest.mark.parametrize("restart", [p.Load(source="b"), p.Reset(), p.OpenSession(path="s.npz")])
def test_a_waiting_prompt_edit_survives_any_restart_but_a_newer_edit(restart):
    window = Window(FakeEngine())
    window.ask(p.Step())  # in flight
    window.type("typed")
    window.ask(restart)
    assert [type(r) for r in window.policy.waiting] == [p.SetPrompt, type(restart)]
    window.type("typed more")  # newer text replaces it (and what it makes stale, but a Load)
    assert [r.text for r in window.policy.waiting if isinstance(r, p.SetPrompt)] == ["typed more"]


def test_a_refused_edit_is_shown_when_a_restart_made_it_stale_but_not_when_a_newer_edit_did():
    window = Window(FakeEngine())
    window.type(TOO_LONG)  # in flight
    window.ask(p.Reset())
    refused = window.engine.answer(window.policy.in_flight)
    assert window.policy.settle(refused) is Verdict.SHOW  # the Reset runs the old prompt: say the typed one cannot
    window.settle_all()
    window.type(TOO_LONG + "!")  # in flight
    window.type("short")  # a newer text replaces it
    assert window.policy.settle(window.engine.answer(window.policy.in_flight)) is Verdict.DROP
