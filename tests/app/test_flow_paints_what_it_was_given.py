"""The Flow's picture paints the result it was given, never one the state holds that has not reached
it yet: a new prompt (no step yet) made current while the flow still shows the last step must not
break its paint (it read the newer result's missing trace)."""

from __future__ import annotations

import pytest

from app.window import guard
from app.protocol import messages as p
from app.panels.flow_panel import FlowPanel
from app.host.session_host import make_result
from app.window import theme as th
from app.logic.state import AppState
from engine import SamplingSettings, Session


@pytest.fixture(scope="module")
def results(demo_model):
    session = Session(demo_model, SamplingSettings(temperature=0.8, top_k=40, seed=1))
    session.set_prompt("The cat sat on the")
    session.step()
    stepped = make_result(session, p.Step(generation=1))
    session.set_prompt("A new prompt")
    prompt = make_result(session, p.SetPrompt(generation=2, text="A new prompt"))
    return stepped, prompt


def test_a_result_made_current_but_not_yet_delivered_is_not_painted(qtbot, results):
    stepped, prompt = results
    state = AppState(th.NORMAL, th.PROJECTOR)
    panel = FlowPanel(state)
    qtbot.addWidget(panel)
    panel.resize(1200, 700)
    panel.show()
    state.set_result(stepped)
    errors = guard.reporter().count
    panel.grab()
    deliveries = state.stage_result(prompt)  # current in the state; the panel has not been given it yet
    panel.grab()
    assert guard.reporter().count == errors, "the paint raised"
    assert panel.numbers is not None and panel.numbers.step == stepped.trace.step  # still the step it was given
    for deliver in deliveries:
        deliver()
    panel.grab()
    assert guard.reporter().count == errors and panel.numbers is None  # now the prompt, no step yet
