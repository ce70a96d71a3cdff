"""The attention panel's Layer and Head boxes name the layer and head its map and caption draw, also
after a model with fewer heads was current for a moment (its result superseded before it reached
the panel: the state narrowed the head without a signal, and the box kept the old number)."""

from __future__ import annotations

import pytest

from app.protocol import messages as p
from app.panels.attention_panel import AttentionPanel
from app.host.session_host import make_result
from app.window import theme as th
from app.logic.state import AppState
from engine import SamplingSettings, Session


def stepped(model, generation: int):
    session = Session(model, SamplingSettings(greedy=True))
    session.set_prompt("The cat sat on the")
    session.step()
    return make_result(session, p.Load(generation=generation))


@pytest.fixture(scope="module")
def results(demo_model, tiny_model):
    return stepped(demo_model, 1), stepped(tiny_model, 2), stepped(demo_model, 3)


def test_the_head_box_names_the_head_drawn_after_a_two_head_model_came_and_went(qtbot, results):
    four, two, four_again = results
    assert (four.n_head, two.n_head) == (4, 2)
    state = AppState(th.NORMAL, th.PROJECTOR)
    panel = AttentionPanel(state)
    qtbot.addWidget(panel)
    panel.show()
    state.set_result(four)
    state.set_layer(3)
    state.set_head(3)
    assert (panel.layer_spin.value(), panel.head_spin.value()) == (3, 3)
    state.stage_result(two)  # superseded before its delivery reached the panel
    state.set_result(four_again)
    assert (state.layer, state.head) == (1, 1)
    assert (panel.layer_spin.value(), panel.head_spin.value()) == (state.layer, state.head)
    assert panel.caption.text().startswith(f"Layer {state.layer}, head {state.head}:")
