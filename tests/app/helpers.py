"""Helpers shared by the window tests."""

from __future__ import annotations


def run(qtbot, window, action, kind: str | None = None, timeout: int = 20_000):
    """Do ``action()`` and wait for the window to draw its result; return the SessionResult."""
    def matches(result):
        return kind is None or result.kind == kind

    with qtbot.waitSignal(window.resultApplied, timeout=timeout, check_params_cb=matches) as blocker:
        action()
    return blocker.args[0]


def assert_image_shows(panel, weights) -> None:
    """The attention panel's image is ``weights`` through the theme's colour map, masked cells
    (NaN) transparent so that the hatching behind them shows."""
    import numpy as np

    lut = panel.state.theme.cmap().getLookupTable(0.0, 1.0, 256, alpha=True)
    image = panel.image.image
    T = weights.shape[0]
    assert image.shape == (T, T, 4) and image.dtype == np.uint8
    masked = np.isnan(weights)
    assert (image[masked] == 0).all()
    index = np.clip(weights[~masked] * 255, 0, 255).astype(int)
    np.testing.assert_array_equal(image[~masked], lut[index])
