"""The controller on its own, over a fake engine: no window, no model, no torch.

The fake engine records what it was sent and lets the test answer as an engine would, so each
rule of the protocol (coalescing, stale results, settings carried to fresh engines, restarts and
their back-off) is checked directly."""

from __future__ import annotations

import pytest
from app.window import controller as controller_mod
from app.protocol import messages as p
from app.window.controller import MAX_QUICK_DEATHS, SessionController
from app.window.engine_link import Engine
from engine.defaults import DEFAULT_SETTINGS
from engine.sampling import SamplingSettings


class FakeEngine(Engine):
    """Has the engines' interface; ``sent`` lists what it was given, ``controls`` what was set."""

    started: list["FakeEngine"] = []

    def __init__(self, parent=None):
        super().__init__(parent)
        self.sent: list[p.Request] = []
        self.controls: dict[str, int] = {}
        self.closed = False
        FakeEngine.started.append(self)

    def submit(self, request):
        self.sent.append(request)

    def set_control(self, name, value):
        assert name in p.CONTROLS
        self.controls[name] = value

    def shutdown(self):
        self.closed = True


class FakeResult:
    """Just what the controller reads of a SessionResult."""

    def __init__(self, request: p.Request):
        self.generation, self.request, self.info = request.generation, request, object()
        self.settings = request.settings if getattr(request, "settings", None) is not None else DEFAULT_SETTINGS
        self.can_step = True


@pytest.fixture
def controller(qapp, monkeypatch):
    FakeEngine.started = []
    monkeypatch.setattr(controller_mod, "start_engine", lambda kind, parent: FakeEngine(parent))
    c = SessionController(engine="fake")
    yield c
    c.shutdown()


def answer(engine: FakeEngine, index: int = -1):
    """The engine finishes request ``index`` of those it was sent."""
    request = engine.sent[index]
    engine.replied.emit(p.Finished(request.generation, FakeResult(request)))


def test_one_request_in_flight_and_a_held_step_key_queues_one_step(controller):
    engine = controller.engine
    for _ in range(5):
        controller.step()
    assert [type(r) for r in engine.sent] == [p.Step]  # one in flight, one waiting
    answer(engine)
    assert [type(r) for r in engine.sent] == [p.Step, p.Step]
    answer(engine)
    assert len(engine.sent) == 2 and controller.idle


def test_a_reset_drops_waiting_requests_and_makes_older_results_stale(controller, qtbot):
    engine = controller.engine
    controller.step()
    controller.back()
    controller.reset()
    assert [type(r) for r in engine.sent] == [p.Step]  # the waiting Back was dropped
    assert engine.controls["latest_barrier"] == engine.sent[0].generation + 2
    shown = []
    controller.resultReady.connect(shown.append)
    answer(engine)  # the step's result is older than the reset: dropped
    assert shown == [] and isinstance(engine.sent[-1], p.Reset)
    answer(engine)
    assert [type(r.request) for r in shown] == [p.Reset]


@pytest.mark.parametrize(
    "restart",
    [lambda c: c.reset(), lambda c: c.set_prompt("A new prompt"), lambda c: c.load(None)],
    ids=["reset", "prompt", "load"],
)
def test_settings_chosen_while_busy_reach_the_engine_even_when_the_resample_is_dropped(controller, restart):
    """A step is running, the penalty is set (a Resample waits), then a restart drops the waiting
    Resample. The restart itself carries the new settings."""
    engine = controller.engine
    controller.step()
    chosen = SamplingSettings(repetition_penalty=2.0, seed=0)
    controller.set_settings(chosen)
    restart(controller)
    answer(engine, 0)
    assert not any(isinstance(r, p.Resample) for r in engine.sent)
    assert engine.sent[-1].settings == chosen == controller.settings


def test_a_fresh_engine_after_a_death_gets_the_chosen_settings(controller):
    """Greedy chosen, the engine dies, the prompt is edited before the new engine has loaded: every
    request the new engine gets carries Greedy."""
    greedy = SamplingSettings(greedy=True)
    controller.set_settings(greedy)
    controller.engine.died.emit(-9)
    fresh = controller.engine
    assert fresh is not FakeEngine.started[0] and FakeEngine.started[0].closed
    controller.load(None)
    controller.set_prompt("Edited before the load finished")
    answer(fresh, 0)
    assert [type(r) for r in fresh.sent] == [p.Load, p.SetPrompt]
    assert all(r.settings == greedy for r in fresh.sent)


def test_results_of_a_dead_engine_are_dropped(controller):
    old = controller.engine
    controller.step()
    request = old.sent[-1]
    shown = []
    controller.resultReady.connect(shown.append)
    old.died.emit(-9)
    old.replied.emit(p.Finished(request.generation, FakeResult(request)))  # queued before the death was known
    old.replied.emit(p.Failed(request.generation, request, "late"))
    assert shown == [] and controller.idle
    assert not controller.is_current(FakeResult(request))


def test_engines_that_keep_dying_at_start_are_not_restarted_for_ever(controller, qtbot):
    stopped = []
    controller.engineStopped.connect(stopped.append)
    for _ in range(MAX_QUICK_DEATHS):
        controller.engine.died.emit(-9)
    assert len(FakeEngine.started) == MAX_QUICK_DEATHS  # the first, then one restart per death but the last
    assert controller.engine is None and controller.stopped
    assert stopped == [-9]
    errors = []
    controller.failed.connect(errors.append)
    controller.step()  # refused, not lost silently
    assert [type(e) for e in errors] == [p.NotSent] and isinstance(errors[0].request, p.Step)
    controller.restart_engine()
    assert controller.engine is FakeEngine.started[-1] and len(FakeEngine.started) == MAX_QUICK_DEATHS + 1


def test_an_engine_that_loaded_resets_the_quick_death_count(controller):
    for _ in range(MAX_QUICK_DEATHS - 1):
        controller.engine.died.emit(-9)
    controller.load(None)
    answer(controller.engine)  # this engine works
    for _ in range(MAX_QUICK_DEATHS - 1):
        controller.engine.died.emit(-9)
    assert controller.engine is not None


def test_requests_are_typed_and_numbered(controller):
    assert {cls.kind for cls in p.REQUESTS} == {"load", "prompt", "chat", "stops", "step", "play", "back", "choose", "resample", "reset", "cache", "inspect", "map", "attribute", "tokenize", "patch", "compare", "switch", "save", "open", "refresh"}
    controller.load("gpt2", prompt="Hi")
    sent = controller.engine.sent[0]
    assert isinstance(sent, p.Load) and sent.source == "gpt2" and sent.prompt == "Hi" and sent.generation == 1
    assert sent.settings is None  # none chosen yet: the model's own (engine.defaults.model_settings)
    with pytest.raises(Exception):
        sent.generation = 5  # frozen


def test_the_host_sets_only_its_control_values():
    from app.host.session_host import SessionHost

    sent = []
    host = SessionHost(sent.append, lambda r: None)
    host.set_control("play_generation", 4)
    assert host.play_generation == 4
    with pytest.raises(ValueError):
        host.set_control("session", 0)
    host.latest_barrier = 10
    host.handle(p.Step(generation=9))  # older than the barrier: skipped unrun, on its own channel
    host.handle(p.Play(generation=3))  # not the play loop wanted
    assert sent == [p.Skipped(9), p.Skipped(3)]


def test_inspecting_neither_ends_play_nor_piles_up(controller):
    engine = controller.engine
    controller.play()
    loop = engine.sent[-1]
    assert engine.controls["play_generation"] == loop.generation
    for position in range(5):
        controller.inspect(step=-1, position=position, layer=1)
    assert engine.controls["play_generation"] == loop.generation  # the loop goes on
    answer(engine)  # the first step of the loop: the waiting Inspect goes out, only the newest
    inspects = [r for r in engine.sent if isinstance(r, p.Inspect)]
    assert len(inspects) == 1 and inspects[0].position == 4 and inspects[0].layer == 1
    shown = []
    controller.insideReady.connect(shown.append)
    engine.replied.emit(p.Inspected(inspects[0].generation, "trace"))
    assert shown == ["trace"]
