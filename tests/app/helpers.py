"""Helpers shared by the window tests."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

_MAIN_IN_CHILD = """
import json, sys
from app.logic import stop_text
from app.window import window as window_mod
from app.window.main import main

windows = []

class Recorded(window_mod.MainWindow):
    def __init__(self, *args, **kw):
        super().__init__(*args, **kw)
        windows.append(self)

window_mod.MainWindow = Recorded
code = main(sys.argv[1:])
(window,) = windows
tokens, result = window.tokens, window.state.result
seen = dict(code=code)
"""


def run_main_in_child(tmp_path, argv: list[str], report: str) -> dict:
    """Run the app's ``main(argv)`` in a fresh interpreter, offscreen, with its own home under
    ``tmp_path``; then ``report`` (Python run there, with ``window``, ``tokens``, ``result``, ``stop_text``
    and ``seen = dict(code=...)`` at hand) fills ``seen``, which comes back here."""
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", HF_HUB_OFFLINE="1", XDG_CONFIG_HOME=str(tmp_path),
               HOME=str(tmp_path), PYTHONPATH=str(ROOT))
    script = _MAIN_IN_CHILD + report + "\nprint(json.dumps(seen))\n"
    done = subprocess.run([sys.executable, "-c", script, *argv], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def run(qtbot, window, action, request: type | None = None, timeout: int = 20_000):
    """Do ``action()`` and wait for the window to draw its result (of a ``request``, an
    ``app.protocol.messages`` class, if given); return the SessionResult."""
    assert request is None or isinstance(request, type), f"request: a protocol class, not {request!r}"

    def matches(result):
        return request is None or isinstance(result.request, request)

    with qtbot.waitSignal(window.resultApplied, timeout=timeout, check_params_cb=matches) as blocker:
        action()
    return blocker.args[0]


def run_outside_a_test(window, action, request: type, timeout: int = 30_000):
    """``run`` for a module-scoped fixture (no qtbot there): do ``action()``, wait in an event loop
    for the window to draw the result of a ``request``, and return that SessionResult."""
    from PySide6.QtCore import QEventLoop, QTimer

    loop, results = QEventLoop(), []

    def on_applied(result):
        if isinstance(result.request, request):
            results.append(result)
            loop.quit()

    window.resultApplied.connect(on_applied)
    QTimer.singleShot(timeout, loop.quit)
    try:
        action()
        if not results:
            loop.exec()
    finally:
        window.resultApplied.disconnect(on_applied)
    assert results, f"no {request.__name__} result drawn within {timeout / 1000:g} s"
    return results[0]


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


def choose_settings(panel, settings) -> None:
    """Set the sampling panel's widgets to ``settings`` as a person would, one widget at a time
    (each change goes to the engine as it happens)."""
    (panel.greedy if settings.greedy else panel.sample).setChecked(True)
    panel.temperature.setValue(settings.temperature)
    panel.top_k.setValue(settings.top_k)
    panel.top_p.setValue(max(settings.top_p, panel.top_p.minimum()))
    panel.penalty.setValue(settings.repetition_penalty)
    panel.seed.setText("" if settings.seed is None else str(settings.seed))
    panel.seed.editingFinished.emit()


def save(qtbot, window, path, timeout: int = 30_000):
    """Save the session to ``path`` and wait until the file is written (the engine answers a Save at
    once and again, with ``SaveWritten``, when its saver thread has written the file)."""
    from app.protocol import messages as p

    with qtbot.waitSignal(window.resultApplied, timeout=timeout, check_params_cb=lambda r: isinstance(r.request, p.SaveWritten)) as blocker:
        window.save_session(str(path))
    return blocker.args[0]


def hold_png_encoding(monkeypatch):
    """Make the export thread's PNG encoding wait until released: (started, release), two
    threading.Events, the first set when an encoding begins."""
    import threading

    from app.window import pictures

    started, release = threading.Event(), threading.Event()
    real = pictures.png_bytes

    def held(image):
        started.set()
        assert release.wait(60)
        return real(image)

    monkeypatch.setattr(pictures, "png_bytes", held)
    return started, release


def painted_status_lines(window) -> list[str]:
    """The status line's texts as they are repainted from now on (a close has no event loop to
    draw them otherwise): a list that grows."""
    label, shown = window.status_line.status_label, []
    real = label.repaint
    label.repaint = lambda: (shown.append(label.text()), real())
    return shown


def show_text_size(window, size: tuple[int, int], theme) -> None:
    """Restyle ``window`` for ``theme`` (a step of ``app.window.theme.TEXT_SIZES``) at once, every panel,
    and resize it to ``size``: one window walks every text size, no build per size."""
    for restyle in window.state.stage_theme(theme):
        restyle()
    window.resize(*size)


def text_size_id(case) -> str:
    """A test id for a ``(size, theme)`` case: "1920x1080-projector-larger"."""
    (width, height), theme = case
    return f"{width}x{height}-" + "-".join(theme.name.replace(",", "").split())
