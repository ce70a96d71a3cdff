"""One colour means one thing, and the colours that share a view stay apart for colour-blind viewers
and on a washed-out projector (simulated: Machado et al. 2009 at full severity; a 45 % white haze)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from app.window import theme as th

# pairs of meanings shown together in one view: they must be told apart
TOGETHER = [
    ("PROMPT", "GENERATED"), ("PROMPT", "SELECTED"), ("GENERATED", "SELECTED"),  # chips, embeddings
    ("CHOSEN", "CANDIDATE"), ("CHOSEN", "REMOVED"), ("CANDIDATE", "REMOVED"),  # candidates
    ("KEYS", "VALUES"), ("PREFILL", "DECODE"), ("NEUTRAL", "DECODE"), ("NEUTRAL", "PREFILL"),  # KV cache
]
ROLES = ["PROMPT", "GENERATED", "SELECTED", "KEYS", "VALUES", "PREFILL", "DECODE", "CANDIDATE", "REMOVED"]
MACHADO = {
    "normal": np.eye(3),
    "protanopia": np.array([[0.152286, 1.052583, -0.204868], [0.114503, 0.786281, 0.099216], [-0.003882, -0.048116, 1.051998]]),
    "deuteranopia": np.array([[0.367322, 0.860646, -0.227968], [0.280085, 0.672501, 0.047413], [-0.011820, 0.042940, 0.968881]]),
    "tritanopia": np.array([[1.255528, -0.076749, -0.178779], [-0.078411, 0.930809, 0.147602], [0.004733, 0.691367, 0.303900]]),
}


def _linear(hex_color: str) -> np.ndarray:
    srgb = np.array([int(hex_color[i : i + 2], 16) for i in (1, 3, 5)]) / 255
    return np.where(srgb <= 0.04045, srgb / 12.92, ((srgb + 0.055) / 1.055) ** 2.4)


def _lab(linear: np.ndarray) -> np.ndarray:
    xyz = np.array([[0.4124, 0.3576, 0.1805], [0.2126, 0.7152, 0.0722], [0.0193, 0.1192, 0.9505]]) @ np.clip(linear, 0, 1)
    f = lambda t: np.where(t > (6 / 29) ** 3, np.cbrt(t), t / (3 * (6 / 29) ** 2) + 4 / 29)  # noqa: E731
    x, y, z = f(xyz / np.array([0.9505, 1.0, 1.089]))
    return np.array([116 * y - 16, 500 * (x - y), 200 * (y - z)])


def _seen(hex_color: str, vision: str, haze: float) -> np.ndarray:
    linear = MACHADO[vision] @ _linear(hex_color)
    return _lab((1 - haze) * linear + haze * np.ones(3))  # a projector's stray light adds white


def test_each_meaning_has_its_own_colour():
    colours = [getattr(th, role) for role in ROLES]
    assert len(set(colours)) == len(colours)
    assert th.CHOSEN == th.GENERATED  # the chosen token is the newest generated one: the same meaning


@pytest.mark.parametrize("vision", list(MACHADO))
@pytest.mark.parametrize("haze", [0.0, 0.45], ids=["screen", "washed-out projector"])
def test_colours_shown_together_stay_apart(vision, haze):
    close = []
    for a, b in TOGETHER:
        distance = float(np.linalg.norm(_seen(getattr(th, a), vision, haze) - _seen(getattr(th, b), vision, haze)))
        if distance < 10:  # CIE76 ΔE: about 2 is just noticeable; 10 is plainly another colour
            close.append(f"{a}/{b}: ΔE {distance:.1f}")
    assert close == []


def test_panels_draw_with_the_palette(window):
    assert window.kv.key_bars.opts["brush"] == th.KEYS and window.kv.value_bars.opts["brush"] == th.VALUES
    chosen, can, removed = window.logits._brushes
    assert (chosen.color().name().upper(), can.color().name().upper(), removed.color().name().upper()) == (
        th.CHOSEN.upper(), th.CANDIDATE.upper(), th.REMOVED.upper())
    assert window.embeddings._brush_prompt.color().name().upper() == th.PROMPT.upper()
    assert window.embeddings._brush_generated.color().name().upper() == th.GENERATED.upper()
