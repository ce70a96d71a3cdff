"""The sampling panel starts at the engine's defaults (no number of its own) and its ranges are
RANGES: top-p 0 cannot be typed."""

from __future__ import annotations

from engine.defaults import DEFAULT_SETTINGS
from engine.sampling import RANGES


def test_the_panel_starts_at_the_defaults_and_ranges(qtbot):
    from app.panels.sampling_panel import SamplingPanel
    from app.state import AppState
    from app.theme import NORMAL, PROJECTOR

    panel = SamplingPanel(AppState(NORMAL, PROJECTOR))
    qtbot.addWidget(panel)
    assert panel.settings() == DEFAULT_SETTINGS
    assert (panel.top_p.minimum(), panel.top_p.maximum()) == RANGES["top_p"]
    assert (panel.top_k.minimum(), panel.top_k.maximum()) == RANGES["top_k"]
    panel.top_p.setValue(0.0)
    assert panel.top_p.value() == RANGES["top_p"][0]
