"""The sampling panel starts at the engine's defaults (no number of its own) and its ranges are
RANGES: top-p 0 cannot be typed."""

from __future__ import annotations

from engine.defaults import DEFAULT_SETTINGS
from engine.sampling import RANGES


def test_the_panel_starts_at_the_defaults_and_ranges(qtbot):
    from app.panels.sampling_panel import SamplingPanel
    from app.logic.state import AppState
    from app.window.theme import NORMAL, PROJECTOR

    panel = SamplingPanel(AppState(NORMAL, PROJECTOR))
    qtbot.addWidget(panel)
    assert panel.settings() == DEFAULT_SETTINGS
    assert (panel.top_p.minimum(), panel.top_p.maximum()) == RANGES["top_p"]
    assert (panel.top_k.minimum(), panel.top_k.maximum()) == RANGES["top_k"]
    panel.top_p.setValue(0.0)
    assert panel.top_p.value() == RANGES["top_p"][0]


def test_a_folder_with_its_own_sampling_values_starts_with_them_until_the_person_changes_one(make_window, qtbot, tmp_path):
    """A generation_config.json with do_sample true: the window starts with its temperature, top-k
    (unset: 50), top-p and penalty, the sampling view says so; a person's change still wins, also
    over the next model's own."""
    from app.protocol import messages as p
    from engine.random_model import set_generation_values, write_random_gpt2

    from .helpers import run

    folder = write_random_gpt2(tmp_path / "own-defaults", seed=1, n_layer=1, n_head=2, n_embd=16, n_positions=64)
    set_generation_values(folder, do_sample=True, temperature=0.2, top_p=0.9)
    window = make_window()
    with qtbot.waitSignal(window.resultApplied, timeout=60_000):
        window.load_model(str(folder), prompt="The cat sat on the")
    panel = window.sampling
    assert (panel.sample.isChecked(), panel.temperature.value(), panel.top_k.value(), panel.top_p.value()) == (True, 0.2, 50, 0.9)
    result = run(qtbot, window, window.step, p.Step)
    assert result.trace.record.settings.temperature == 0.2  # the engine drew with them too
    window.show_view("sampling")
    assert "the model's own: its generation_config.json" in window.sampling_view.header.text()
    run(qtbot, window, lambda: panel.temperature.setValue(0.7), p.Resample)
    assert "chosen in the sampling panel" in window.sampling_view.header.text()
    with qtbot.waitSignal(window.resultApplied, timeout=60_000):
        window.load_model(str(folder), prompt="The cat sat on the")
    assert panel.temperature.value() == 0.7 and window.controller.settings.temperature == 0.7
