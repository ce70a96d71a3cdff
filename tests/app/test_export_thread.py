"""A picture's PNG is encoded and written on the export thread: the file holds exactly the
picture rendered on the GUI thread, a failure there is still a status line, and quitting waits for a
picture being written and says so."""

from __future__ import annotations

import threading

import numpy as np
from PySide6.QtGui import QImage

from app.window import pictures
from app.protocol import messages as p
from app.window.help_dialog import CornerButton

from .helpers import hold_png_encoding, painted_status_lines, run


def pixels(image: QImage) -> np.ndarray:
    """uint8 [H, W, 4], straight RGBA, copied out of ``image``."""
    image = image.convertToFormat(QImage.Format.Format_RGBA8888)
    rows = np.frombuffer(image.constBits(), np.uint8).reshape(image.height(), image.bytesPerLine() // 4, 4)
    return rows[:, : image.width()].copy()


def rendered_now(window) -> QImage:
    """The window rendered on the GUI thread at 2x, without its panels' corner buttons (as exported)."""
    buttons = [b for b in window.findChildren(CornerButton) if b.isVisible()]
    for b in buttons:
        b.hide()
    try:
        return pictures.picture(window)
    finally:
        for b in buttons:
            b.show()


def test_a_png_written_on_the_export_thread_is_the_picture_rendered_directly(window, qtbot, tmp_path):
    run(qtbot, window, window.step, p.Step)
    reference = rendered_now(window)  # same turn as the export: nothing drawn in between
    path = tmp_path / "window.png"
    with qtbot.waitSignal(window.exporter.saved, timeout=20_000) as saved:
        assert window.exporter.export_picture(window, path)
    assert saved.args[0].error is None
    written = QImage(str(path))
    assert (written.width(), written.height()) == (2 * window.width(), 2 * window.height())
    assert (written.dotsPerMeterX(), written.dotsPerMeterY()) == (reference.dotsPerMeterX(), reference.dotsPerMeterY())
    expected, got = pixels(reference), pixels(written)
    assert len(np.unique(expected.view(np.uint32))) > 50  # a drawing, not a blank picture
    np.testing.assert_array_equal(got, expected)


def test_a_failure_on_the_export_thread_is_a_status_line(window, qtbot, tmp_path, monkeypatch):
    """Not only a full disk (OSError): a defect while encoding is told too, never lost on the thread."""
    run(qtbot, window, window.step, p.Step)

    def broken(image):
        raise RuntimeError("the encoder broke")

    monkeypatch.setattr(pictures, "png_bytes", broken)
    path = tmp_path / "window.png"
    with qtbot.waitSignal(window.exporter.saved, timeout=20_000) as saved:
        assert window.exporter.export_picture(window, path)
    assert isinstance(saved.args[0].error, RuntimeError) and not path.exists()
    assert window.status_line.status_label.text() == f"Could not save a picture of the window to {path}: the encoder broke."
    assert window.exporter.writer.pending == ()


def test_quitting_while_a_picture_is_written_waits_for_it_and_says_so(window, qtbot, tmp_path, monkeypatch):
    run(qtbot, window, window.step, p.Step)
    started, release = hold_png_encoding(monkeypatch)
    path = tmp_path / "window.png"
    width = window.width()
    assert window.exporter.export_picture(window, path)
    assert started.wait(20) and not path.exists()
    assert window.exporter.writer.pending == ("a picture of the window",)
    shown = painted_status_lines(window)
    threading.Timer(1.0, release.set).start()  # the encoding ends a second into quitting
    window.close()  # blocks until the file is written
    assert path.is_file() and QImage(str(path)).width() == 2 * width
    assert shown == ["Waiting for a picture of the window to be written before quitting…"]
    assert window.exporter.writer.pending == ()
