"""The sampling panel always shows the settings the engine uses, whatever the order of
steps, Back, Reset, loads, prompt edits, settings changes and engine deaths; and the step on screen
is labelled with the settings it was really drawn with.

A seeded random sequence over the real window and a real engine (a thread engine, so that the
session can be read in place; an engine death is its ``died`` signal, which makes the controller
replace it exactly as it replaces a dead engine process). The seed is printed on failure."""

from __future__ import annotations

import random

import pytest

from engine import sampling
from engine.sampling import SamplingSettings

from .helpers import choose_settings, run
from app.protocol import messages as p

SEEDS = (1, 2, 3)
ACTIONS_PER_SEED = 40


def random_settings(rng: random.Random) -> SamplingSettings:
    return SamplingSettings(
        greedy=rng.random() < 0.3,
        temperature=rng.choice([0.3, 0.7, 1.0, 1.5]),
        top_k=rng.choice([0, 5, 50]),
        top_p=rng.choice([0.5, 0.9, 1.0]),
        repetition_penalty=rng.choice([1.0, 1.3, 2.0, 3.0]),
        seed=rng.choice([0, 7, 12345]),
    )


def settle(qtbot, window) -> None:
    """Wait until nothing is in flight, nothing waits to be drawn and the drawing has finished."""
    qtbot.waitUntil(lambda: window.controller.idle and window.controller.engine is not None, timeout=60_000)
    qtbot.wait(60)
    qtbot.waitUntil(lambda: window.controller.idle and window.painter.settled,
                    timeout=60_000)


def check(window) -> None:
    shown = window.sampling.settings()
    session = window.controller.engine.host.session
    assert shown == window.controller.settings
    if session is None:  # a load still failed or never ran: nothing to compare
        return
    assert session.settings == shown, "the engine would use settings the panel does not show"
    result = window.state.result
    if result is None or result.trace is None:
        assert not window.sampling.drawn_with.isVisible()
        return
    record = result.trace.record
    if record.chosen_by != "user":  # the label says what the step was drawn with: re-draw it so
        context = result.trace.context_ids
        dist = sampling.distribution(record.logits, context, record.settings)
        assert sampling.draw(dist, record.step).token == record.chosen
    differs = record.settings != shown and record.chosen_by != "user"
    assert window.sampling.drawn_with.isVisible() == differs
    if differs:
        assert record.settings.describe() in window.sampling.drawn_with.text()


@pytest.mark.slow
@pytest.mark.parametrize("seed", SEEDS)
def test_the_panel_shows_what_the_engine_uses(make_window, qtbot, demo_model, seed):
    rng = random.Random(seed)
    window = make_window()
    run(qtbot, window, lambda: window.load_model(None, loaded=demo_model, prompt="The cat sat on the"), p.Load)
    prompts = ["The cat sat on the", "Once upon a time", "A B A B A B", "Hello"]
    try:
        for i in range(ACTIONS_PER_SEED):
            action = rng.choice(["step", "step", "step", "back", "reset", "load", "settings", "settings", "prompt", "die"])
            if action == "step":
                window.step()
            elif action == "back":
                window.back()
            elif action == "reset":
                window.reset()
            elif action == "load":
                window.load_model(None, loaded=demo_model)
            elif action == "settings":
                choose_settings(window.sampling, random_settings(rng))
            elif action == "prompt":
                window.tokens.promptEdited.emit(rng.choice(prompts))
            elif action == "die":
                window.controller.engine.died.emit(-9)
                # a death right after another would count towards the back-off; let the new engine load
                qtbot.waitUntil(lambda: window.controller.idle, timeout=60_000)
            if rng.random() < 0.5:  # sometimes act again before the last action finished
                continue
            settle(qtbot, window)
            check(window)
        settle(qtbot, window)
        check(window)
    except AssertionError as exc:
        raise AssertionError(f"seed {seed}, action {i} ({action}): {exc}") from exc


def test_a_refused_prompt_or_a_failed_load_still_takes_the_settings(window, qtbot, tmp_path):
    """Found by the chaos test: a penalty chosen while a step ran waited as a Resample; a prompt edit
    (a restart) dropped it and carried the settings itself, but the prompt was refused as too long
    before the settings were applied, so the engine kept the old ones. A failed load did the same."""
    session = lambda: window.controller.engine.host.session  # noqa: E731
    for chosen, restart in (
        (SamplingSettings(repetition_penalty=2.0, seed=0), lambda: window.tokens.promptEdited.emit("a" * 2000)),
        (SamplingSettings(greedy=True, seed=0), lambda: window.load_model(str(tmp_path / "missing"))),
    ):
        with qtbot.waitSignal(window.errorShown, timeout=30_000):
            window.controller.step()
            choose_settings(window.sampling, chosen)  # waits behind the step as a Resample
            restart()  # drops the waiting Resample; refused
        qtbot.waitUntil(lambda: window.controller.idle, timeout=30_000)
        assert window.controller.settings == chosen == session().settings
