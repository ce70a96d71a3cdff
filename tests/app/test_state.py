"""AppState on its own: no window, no engine, no Qt (results are stand-ins with what the state reads;
the two looks are stand-in strings)."""

from __future__ import annotations

from types import SimpleNamespace

from app.logic.state import LATEST, AppState

NORMAL, PROJECTOR = "normal look", "projector look"


def fake_result(T: int = 5, layers: int = 4, heads: int = 4):
    info = SimpleNamespace()
    return SimpleNamespace(info=info, n_layer=layers, n_head=heads, context_len=T, prompt_ids=[0] * T,
                           trace=SimpleNamespace(step=0))


def test_a_result_reaches_subscribers_in_order_and_selections_wait_for_the_last():
    state, seen = AppState(NORMAL, PROJECTOR), []
    state.subscribe(lambda r: seen.append("tokens"))
    state.subscribe(lambda r: seen.append(("attention", state.head)))
    heads = []
    state.headChanged.connect(heads.append)
    deliveries = state.stage_result(fake_result())
    deliveries[0]()
    state.set_head(2)  # a click between two panels' turns
    assert state.head == 0 and heads == []  # waits: the attention panel has not seen the result yet
    for deliver in deliveries[1:]:
        deliver()
    assert seen == ["tokens", ("attention", 0)] and state.head == 2 and heads == [2]


def test_a_selection_is_clamped_and_a_new_model_resets_the_position():
    state = AppState(NORMAL, PROJECTOR)
    state.set_result(fake_result(T=5))
    state.set_layer(99)
    assert state.layer == 3
    state.set_position(2)
    assert state.selected_position == 2
    state.set_result(fake_result(T=5))  # another model (a new info object): follow the newest again
    assert state.position == LATEST and state.selected_position == 4


def test_projector_mode_restyles_one_subscriber_per_call():
    state, calls, emitted = AppState(NORMAL, PROJECTOR), [], []
    state.subscribe_theme(lambda theme: calls.append(("a", theme)))
    state.subscribe_theme(lambda theme: calls.append(("b", theme)))
    state.themeChanged.connect(emitted.append)
    restyles = state.stage_projector(True)
    assert state.theme is PROJECTOR and len(restyles) == 3 and calls == []
    restyles[0]()
    assert calls == [("a", PROJECTOR)] and emitted == []
    for restyle in restyles[1:]:
        restyle()
    assert calls == [("a", PROJECTOR), ("b", PROJECTOR)] and emitted == [PROJECTOR]
    assert state.stage_projector(True) == []  # no change, nothing to do
    state.set_projector(False)
    assert state.theme is NORMAL and calls[-1] == ("b", NORMAL)


def test_a_late_subscriber_catches_up_with_the_theme_and_the_result_and_only_it():
    class View:  # a view built the first time it is shown, after the others; its part subscribes too
        def __init__(self, state):
            self.seen = []
            state.subscribe(self.seen.append)
            state.subscribe_theme(self.seen.append)
            self.part = []
            state.subscribe(self.part.append)

    state, early = AppState(NORMAL, PROJECTOR), []
    state.subscribe(early.append)
    mark = state.subscriptions()
    View(state)
    state.catch_up(mark)  # nothing yet: nothing to catch up with
    result = fake_result()
    state.set_result(result)
    mark = state.subscriptions()
    plain = View(state)
    state.catch_up(mark)
    assert plain.seen == [result] and plain.part == [result]  # the look it was built in: no restyle
    state.set_projector(True)
    mark = state.subscriptions()
    late = View(state)
    state.catch_up(mark)
    assert late.seen == [PROJECTOR, result] and late.part == [result] and early == [result]  # the others: not again


def test_what_subscribed_since_a_mark_is_forgotten_and_nothing_before_it():
    """A view whose building failed half-way: its slots are dropped, the others' kept."""
    state, early, broken = AppState(NORMAL, PROJECTOR), [], []
    state.subscribe(early.append)
    state.subscribe_theme(early.append)
    mark = state.subscriptions()
    state.subscribe(broken.append)
    state.subscribe_theme(broken.append)
    state.forget_since(mark)
    assert state.subscriptions() == mark
    result = fake_result()
    state.set_result(result)
    state.set_projector(True)
    assert broken == [] and early == [result, PROJECTOR]


def test_the_state_runs_without_qt():
    """A fresh interpreter imports the state and drives it: no PySide6 module is loaded."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from types import SimpleNamespace as N\n"
        "from app.logic.state import AppState\n"
        "s = AppState('n', 'p'); heads = []\n"
        "s.headChanged.connect(heads.append)\n"
        "s.set_result(N(info=N(), n_layer=2, n_head=3, context_len=4, prompt_ids=[0] * 4, trace=N(step=0)))\n"
        "s.set_head(2); s.set_projector(True)\n"
        "assert heads == [2] and s.theme == 'p', (heads, s.theme)\n"
        "print(sorted(m for m in sys.modules if m.startswith(('PySide6', 'pyqtgraph', 'shiboken'))))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
