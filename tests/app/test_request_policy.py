"""The request policy on its own: plain Python, no Qt, no engine, no model (``app.logic.request_policy``).

Each rule is checked by sending requests through it and answering them as an engine would."""

from __future__ import annotations

import subprocess
import sys
from types import SimpleNamespace

import pytest

from app.protocol import messages as p
from app.logic.request_policy import MAX_QUICK_DEATHS, QUICK_DEATH_S, RequestPolicy, Verdict


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def sent():
    return []


@pytest.fixture
def controls():
    return {}


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture
def policy(sent, controls, clock):
    return RequestPolicy(sent.append, controls.__setitem__, clock)


def ask(policy: RequestPolicy, request: p.Request) -> p.Request:
    request = policy.number(request)
    policy.add(request)
    return request


def done(request: p.Request) -> p.Finished:
    """The engine's reply to ``request``: a result (only what the policy reads of one)."""
    return p.Finished(request.generation, SimpleNamespace(generation=request.generation, request=request))


def test_one_request_in_flight_and_a_held_step_key_queues_one_step(policy, sent):
    for _ in range(5):
        ask(policy, p.Step())
    assert [type(r) for r in sent] == [p.Step] and len(policy.waiting) == 1  # one in flight, one waiting
    assert policy.settle(done(sent[0])) is Verdict.SHOW
    assert len(sent) == 2 and sent[1].generation == 5  # the newest step only
    policy.settle(done(sent[1]))
    assert policy.idle and policy.forward_requests == 2


def test_a_restart_drops_waiting_requests_but_a_save_and_makes_older_results_stale(policy, sent, controls):
    step = ask(policy, p.Step())
    ask(policy, p.Back())
    ask(policy, p.SaveSession(path="s.npz"))
    reset = ask(policy, p.Reset())
    assert [type(r) for r in policy.waiting] == [p.SaveSession, p.Reset]  # the Back was dropped
    assert controls["latest_barrier"] == reset.generation
    assert policy.settle(done(step)) is Verdict.DROP  # older than the reset
    save = sent[-1]
    assert isinstance(save, p.SaveSession)
    assert policy.saves_pending == 1
    assert policy.settle(done(save)) is Verdict.NOTE  # stale, but the file is being written
    assert policy.settle(done(sent[-1])) is Verdict.SHOW and isinstance(sent[-1], p.Reset)
    assert policy.saves_pending == 1  # until the engine says the file is written
    assert policy.settle(done(p.SaveWritten(generation=save.generation, path="s.npz"))) is Verdict.NOTE
    assert policy.saves_pending == 0


def test_a_failed_write_is_shown_even_when_stale_and_a_death_forgets_pending_saves(policy, sent):
    save = ask(policy, p.SaveSession(path="s.npz"))
    policy.settle(done(save))
    ask(policy, p.Reset())
    written = p.SaveWritten(generation=save.generation, error="Could not write s.npz: disk full.")
    assert policy.settle(p.Failed(save.generation, written, written.error)) is Verdict.SHOW
    assert policy.saves_pending == 0
    ask(policy, p.SaveSession(path="t.npz"))
    assert policy.saves_pending == 1
    policy.engine_died()
    assert policy.saves_pending == 0  # what it was writing is gone


def test_a_newer_load_replaces_a_waiting_one(policy, sent):
    ask(policy, p.Step())
    ask(policy, p.Load(source="a"))
    ask(policy, p.Load(source="b"))
    assert [r.source for r in policy.waiting] == ["b"]


def test_any_request_but_inspect_ends_a_play_loop(policy, controls, sent):
    play = ask(policy, p.Play())
    assert controls["play_generation"] == play.generation
    for position in range(3):
        ask(policy, p.Inspect(position=position))
    assert controls["play_generation"] == play.generation and len(policy.waiting) == 1  # coalesced
    ask(policy, p.Back())
    assert controls["play_generation"] == 0


def test_a_refused_load_asks_for_the_session_as_the_engine_holds_it(policy, sent):
    policy.settle(done(ask(policy, p.Load())))  # the engine has a session
    load = ask(policy, p.Load(source="missing"))
    assert policy.settle(p.Failed(load.generation, load, "No such model.")) is Verdict.REFRESH
    step = ask(policy, p.Step())
    assert policy.settle(p.Failed(step.generation, step, "Stopped.")) is Verdict.SHOW


def test_replies_of_a_dead_engine_are_stale_and_nothing_waits(policy, sent):
    step = ask(policy, p.Step())
    ask(policy, p.Back())
    assert policy.engine_died()
    assert policy.idle and not policy.has_session and not policy.busy
    assert policy.settle(done(step)) is Verdict.DROP
    assert policy.settle(p.Failed(step.generation, step, "late")) is Verdict.DROP
    assert not policy.is_current(step)


def test_engines_that_keep_dying_at_start_are_not_restarted_for_ever(policy, clock, sent):
    for death in range(1, MAX_QUICK_DEATHS + 1):
        clock.now += QUICK_DEATH_S / 2
        again = policy.engine_died()
        assert again == (death < MAX_QUICK_DEATHS)
        if again:
            policy.engine_started()
    ask(policy, p.Step())
    assert sent == []  # nothing goes to a stopped engine
    policy.engine_started(by_person=True)
    clock.now += 1
    assert policy.engine_died()  # the count started over


def test_an_engine_that_lived_long_or_loaded_resets_the_count(policy, clock):
    for _ in range(MAX_QUICK_DEATHS - 1):
        policy.engine_died()
        policy.engine_started()
    clock.now += QUICK_DEATH_S + 1
    assert policy.engine_died() and policy.quick_deaths == 0
    policy.engine_started()
    for _ in range(MAX_QUICK_DEATHS - 1):
        policy.engine_died()
        policy.engine_started()
    policy.settle(done(ask(policy, p.Load())))  # this engine works
    assert policy.quick_deaths == 0


def test_the_policy_imports_no_qt():
    code = "import sys, app.logic.request_policy, app.logic.step_gate, app.logic.wording; print(any(m.startswith('PySide6') for m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_a_refused_prompt_after_a_reload_shows_what_the_new_engine_holds(policy, sent):
    """The engine dies while a too-long edit is pending; the reload's result is made stale by the edit,
    which is refused: the window must not go on drawing the dead session."""
    policy.settle(done(ask(policy, p.Load())))
    policy.settle(done(ask(policy, p.Step())))
    policy.engine_died()
    policy.engine_started()
    reload = ask(policy, p.Load())
    edit = ask(policy, p.SetPrompt(text="too long"))
    assert policy.settle(done(reload)) is Verdict.DROP  # made stale by the edit
    assert policy.settle(p.PromptTooLong(edit.generation, edit, "Too long.")) is Verdict.REFRESH


def test_a_refused_prompt_with_the_engines_session_shown_needs_no_refresh(policy, sent):
    policy.settle(done(ask(policy, p.Load())))
    edit = ask(policy, p.SetPrompt(text="too long"))
    assert policy.settle(p.PromptTooLong(edit.generation, edit, "Too long.")) is Verdict.SHOW
    step = ask(policy, p.Step())
    edit = ask(policy, p.SetPrompt(text="too long"))
    assert policy.settle(done(step)) is Verdict.DROP  # a step the window never drew
    assert policy.settle(p.PromptTooLong(edit.generation, edit, "Too long.")) is Verdict.REFRESH


@pytest.mark.parametrize("restart", [p.SetPrompt(), p.SetChat(), p.Reset(), p.Load()])
def test_stop_sequences_waiting_survive_a_restart(policy, sent, restart):
    """Stop sequences typed while a step runs are the person's: a new prompt, turn, Reset or model
    after them must not drop them (the engine would keep the old ones while the window shows these)."""
    ask(policy, p.Step())
    stops = ask(policy, p.SetStops(sequences=("\n",)))
    ask(policy, restart)
    assert stops in policy.waiting
    policy.settle(done(sent[0]))
    assert sent[1] is stops


def test_a_refused_save_is_not_pending(policy, sent):
    """A Save the engine refuses ("Nothing to save yet") writes no file: quitting must not wait for one."""
    policy.settle(done(ask(policy, p.Load())))
    save = ask(policy, p.SaveSession(path="s.npz"))
    assert policy.saves_pending == 1  # it may be written
    assert policy.settle(p.Failed(save.generation, save, "Nothing to save yet: step at least once.")) is Verdict.SHOW
    assert policy.saves_pending == 0


def test_saves_that_will_not_be_sent_are_not_pending(policy, sent):
    """Closing drops what waits: a Save still waiting then will never be written."""
    step = ask(policy, p.Step())
    ask(policy, p.SaveSession(path="s.npz"))
    assert policy.saves_pending == 1
    policy.close()
    assert policy.saves_pending == 0
    policy.settle(done(step))
    save = ask(policy, p.SaveSession(path="t.npz"))  # closed: nothing is sent
    assert sent == [step] and policy.saves_pending == 0 and save not in policy.waiting


def test_a_result_not_drawn_asks_for_the_session_now_or_after_the_refusal_on_its_way(policy, sent):
    policy.settle(done(ask(policy, p.Load())))
    policy.settle(done(ask(policy, p.Step())))  # handed on; a restart comes before its frame
    edit = ask(policy, p.SetPrompt(text="too long"))
    assert not policy.not_drawn()  # the edit is on its way: its answer decides
    assert policy.settle(p.PromptTooLong(edit.generation, edit, "Too long.")) is Verdict.REFRESH
    policy.settle(done(ask(policy, p.Step())))
    edit = ask(policy, p.SetPrompt(text="too long"))
    assert policy.settle(p.PromptTooLong(edit.generation, edit, "Too long.")) is Verdict.SHOW  # the step was drawn, so far
    assert policy.not_drawn()  # then dropped by the painter, with nothing on its way: ask now
    policy.engine_died()
    policy.engine_started()
    assert not policy.not_drawn()  # a dead engine's step: the fresh engine holds nothing to ask for


def test_a_fresh_policy_holds_nothing_and_tells_the_engine_only_of_changes(sent, clock):
    """The engine hears of the play loop only when it changes: a fresh engine has none, so a first
    Step, or a second, sends no play control; a Play and what ends it do."""
    calls = []
    policy = RequestPolicy(sent.append, lambda name, value: calls.append((name, value)), clock)
    assert policy.idle and not policy.busy and policy.saves_pending == 0 and policy.play_generation == 0
    assert policy.not_drawn() is False  # no session to ask for
    step = ask(policy, p.Step())
    assert policy.settle(done(step)) is Verdict.SHOW and policy.is_current(step)
    ask(policy, p.Step())
    assert calls == []
    play = ask(policy, p.Play())
    ask(policy, p.Step())
    ask(policy, p.Step())
    assert calls == [("play_generation", play.generation), ("play_generation", 0)]


def test_a_refused_load_on_a_fresh_engine_is_shown_without_a_refresh(policy, sent):
    """A fresh engine holds no session: there is nothing to ask for, even after other results."""
    policy.settle(done(ask(policy, p.SetStops(sequences=("\n",)))))  # a result, but no session opened
    load = ask(policy, p.Load(source="missing"))
    assert policy.settle(p.Failed(load.generation, load, "No such model.")) is Verdict.SHOW
    assert policy.not_drawn() is False


def test_a_stale_load_still_gives_the_engine_a_session(policy, sent):
    """A Load made stale by a newer restart did load: a refusal of that restart then asks for the
    session as the engine holds it."""
    load = ask(policy, p.Load(source="a"))
    reset = ask(policy, p.Reset())
    assert policy.settle(done(load)) is Verdict.DROP
    assert policy.settle(p.Failed(reset.generation, reset, "Nothing to reset.")) is Verdict.REFRESH


def test_a_refused_request_that_is_no_restart_needs_no_refresh(policy, sent):
    """Even when the window shows an older session than the engine's, only a refused restart asks
    for a Refresh (a refused Step changed nothing and its own refusal is shown)."""
    policy.settle(done(ask(policy, p.Load())))
    policy.settle(done(ask(policy, p.Step())))
    assert policy.not_drawn()  # the window shows an older session; a Refresh is asked for now
    step = ask(policy, p.Step())
    assert policy.settle(p.Failed(step.generation, step, "Stopped.")) is Verdict.SHOW
    fresh = RequestPolicy(sent.append, lambda name, value: None)
    fresh.not_drawn()  # dropped, but no session: a refused Step is still just shown
    step = ask(fresh, p.Step())
    assert fresh.settle(p.Failed(step.generation, step, "No model.")) is Verdict.SHOW


def test_replies_without_a_request_settle_too(policy, sent):
    """A Skipped step and an Inspect's answer carry no request: they free the engine all the same."""
    step = ask(policy, p.Step())
    inspect = ask(policy, p.Inspect(position=0))
    assert policy.settle(p.Skipped(step.generation)) is Verdict.SHOW and sent[-1] is inspect
    assert policy.settle(p.Inspected(inspect.generation)) is Verdict.SHOW and policy.idle


def test_each_written_file_ends_one_pending_save(policy, sent):
    policy.settle(done(ask(policy, p.Load())))
    saves = [ask(policy, p.SaveSession(path=f"{name}.npz")) for name in "st"]
    for save in saves:
        policy.settle(done(save))
    assert policy.saves_pending == 2  # both accepted, neither written
    policy.settle(done(p.SaveWritten(generation=saves[0].generation, path="s.npz")))
    assert policy.saves_pending == 1
    policy.settle(done(p.SaveWritten(generation=saves[1].generation, path="t.npz")))
    assert policy.saves_pending == 0


def test_a_dead_engine_leaves_no_play_loop_and_no_session(sent, clock):
    calls = []
    policy = RequestPolicy(sent.append, lambda name, value: calls.append((name, value)), clock)
    policy.settle(done(ask(policy, p.Load())))
    ask(policy, p.Play())
    policy.engine_died()
    assert policy.play_generation == 0 and policy.not_drawn() is False  # the controller reads both
    policy.engine_started()
    calls.clear()
    step = ask(policy, p.Step())
    assert calls == [] and sent[-1] is step  # the fresh engine runs no play loop: nothing to end


def test_an_engine_that_lived_exactly_the_quick_death_time_did_not_die_quickly(policy, clock):
    for _ in range(MAX_QUICK_DEATHS):
        clock.now += QUICK_DEATH_S
        assert policy.engine_died() and policy.quick_deaths == 0
        policy.engine_started()


def test_trying_again_starts_the_count_over_and_sends_again(policy, clock, sent):
    for _ in range(MAX_QUICK_DEATHS):
        policy.engine_died()
    assert not policy.running
    policy.engine_started(by_person=True)
    assert policy.quick_deaths == 0
    load = ask(policy, p.Load())
    assert sent == [load]  # a running engine again
    for death in range(1, MAX_QUICK_DEATHS):
        assert policy.engine_died()  # the count started from zero, not one
        policy.engine_started()


def test_closing_ends_the_play_loop_and_sends_nothing_more(policy, sent):
    policy.settle(done(ask(policy, p.Load())))
    play = ask(policy, p.Play())
    ask(policy, p.Step())
    policy.close()
    assert policy.play_generation == 0  # the controller reads it: not playing
    assert policy.settle(done(play)) is Verdict.SHOW
    assert sent[-1] is play and policy.idle and policy.not_drawn() is False


def test_a_stale_refusal_is_handed_on_only_for_the_newest_text(policy, sent):
    """A refusal made stale by a restart is dropped, unless it refuses the newest prompt edit
    (the text in the editor cannot run: Step must say so)."""
    step = ask(policy, p.Step())
    ask(policy, p.Reset())
    assert policy.settle(p.Failed(step.generation, step, "Stopped.")) is Verdict.DROP  # not an edit
    first_reset = sent[-1]
    edit = ask(policy, p.SetPrompt(text="too long"))
    reset = ask(policy, p.Reset())
    assert policy.settle(done(first_reset)) is Verdict.DROP  # older than the edit
    assert policy.settle(p.PromptTooLong(edit.generation, edit, "Too long.")) is Verdict.SHOW  # stale, yet the newest text
    assert policy.settle(done(reset)) is Verdict.SHOW
    older = ask(policy, p.SetPrompt(text="long"))
    newer = ask(policy, p.SetChat())
    assert policy.settle(p.PromptTooLong(older.generation, older, "Too long.")) is Verdict.DROP  # the person typed again
    assert policy.settle(p.Failed(newer.generation, newer, "Too long.")) is Verdict.SHOW


def test_a_waiting_edit_survives_any_restart_but_a_newer_edit(policy, sent):
    ask(policy, p.Step())
    edit = ask(policy, p.SetPrompt(text="a"))
    ask(policy, p.Reset())
    assert edit in policy.waiting
    newer = ask(policy, p.SetChat())
    assert edit not in policy.waiting and newer in policy.waiting


def test_a_play_loop_is_not_idle_until_the_engine_ends_it(policy, sent):
    """The engine answers each step of a play loop with the Play's number, and a pause reaches it
    while it runs one: that step's result still comes, then the loop's next turn is Skipped. Until
    then the engine is not idle (a window that thought so drew one step less than the engine held:
    the chaos run, seed 20261130)."""
    policy.settle(done(ask(policy, p.Load())))
    play = ask(policy, p.Play())
    policy.settle(done(play))  # the first step: the loop goes on in the engine
    assert not policy.idle
    policy.set_play(0)  # paused while the engine runs the next step
    assert not policy.idle
    assert policy.settle(done(play)) is Verdict.SHOW and not policy.idle  # that step's result
    assert policy.settle(p.Skipped(play.generation)) is Verdict.SHOW and policy.idle  # its next turn, skipped


def test_a_play_loop_ends_with_its_last_step_when_generation_stops(policy, sent):
    policy.settle(done(ask(policy, p.Load())))
    play = ask(policy, p.Play())
    stopped = p.Finished(play.generation, SimpleNamespace(generation=play.generation, request=p.Step(play.generation), stopped=True))
    assert policy.settle(stopped) is Verdict.SHOW and policy.idle  # the engine queues no next turn
    play = ask(policy, p.Play())
    assert policy.settle(p.Failed(play.generation, play, "No model.")) is Verdict.SHOW and policy.idle
    play = ask(policy, p.Play())
    policy.engine_died()
    assert policy.idle


def test_a_restart_stops_a_running_patch_at_its_next_layer(policy, controls, sent):
    """A Patch's map is of the session a restart is about to change: the engine is told to stop it
    (``cancel_patch`` names that Patch); a restart while anything else runs cancels no patch."""
    policy.settle(done(ask(policy, p.Load())))
    patch = ask(policy, p.Patch(text="The capital of Germany is"))
    assert sent[-1] is patch and "cancel_patch" not in controls
    ask(policy, p.SetPrompt(text="A new prompt"))
    assert controls["cancel_patch"] == patch.generation
    del controls["cancel_patch"]
    policy.settle(p.PatchCancelled(patch.generation, patch, "stopped", done=1, total=2))
    ask(policy, p.Reset())  # the SetPrompt runs now: nothing to cancel
    assert "cancel_patch" not in controls
