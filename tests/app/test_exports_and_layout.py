"""Exports and the layout they depend on: a panel exported while another is focused is pictured at its
laid-out size (never a 0 x 0 or 4 x 1,606 picture reported as saved), and projector mode with a large
"Show top" keeps the window inside its screen (the candidate list scrolls, text keeps its size).
And where the exports' costs go: the history table is built, and a PNG encoded, on the export thread."""

from __future__ import annotations

import pytest
from PySide6.QtGui import QImage

from app.window import theme as th

from app.protocol import messages as p

from .helpers import run


def laid_out_size(window, panel):
    """``panel``'s size with every panel shown (nothing focused), as a person sees it."""
    window.focus.toggle(None)
    window.exporter.reveal(panel)
    return panel.size()


@pytest.mark.parametrize("focused, exported", [("attention", "logits"), ("logits", "attention"), ("tokens", "kv")])
def test_a_panel_exported_while_another_is_focused_is_pictured_at_its_laid_out_size(window, qtbot, tmp_path, focused, exported):
    run(qtbot, window, window.step, p.Step)
    focused, exported = getattr(window, focused), getattr(window, exported)
    expected = laid_out_size(window, exported)
    assert expected.width() >= exported.minimumSizeHint().width() and expected.height() >= exported.minimumSizeHint().height()
    window.focus.toggle(focused)  # as a double-click on its title or Ctrl+1…6 does
    qtbot.wait(10)
    path = tmp_path / "panel.png"
    with qtbot.waitSignal(window.exporter.saved, timeout=20_000):  # encoded on the export thread
        assert window.exporter.export_picture(exported, path), window.status_line.status_label.text()
    status = window.status_line.status_label.text()
    image = QImage(str(path))
    assert (image.width(), image.height()) == (2 * expected.width(), 2 * expected.height()), status
    assert f"{image.width():,} × {image.height():,}" in status  # the status says the size saved


def test_a_panel_that_has_no_room_is_refused_not_pictured_degenerate(window, qtbot, tmp_path):
    """A panel squeezed below its minimum size (here: by hand) is refused with a message, never saved."""
    run(qtbot, window, window.step, p.Step)
    panel = window.attention
    window.exporter.reveal = lambda target: target.resize(4, 1606)  # what a layout pass in flight left
    path = tmp_path / "squeezed.png"
    assert not window.exporter.export_picture(panel, path)
    assert not path.exists()
    assert "Could not save a picture of the Attention panel" in window.status_line.status_label.text()


@pytest.mark.parametrize("top", [20, 64])
def test_projector_mode_with_a_large_show_top_keeps_the_window_on_its_screen(window, qtbot, top):
    window.resize(1366, 768)
    run(qtbot, window, window.step, p.Step)
    window.commands.projector_action.trigger()
    qtbot.waitUntil(lambda: window.painter._turns is None)  # restyled, one panel per event-loop turn
    window.overview.show_panel(window.logits)  # on another page at this size
    window.logits.n_spin.setValue(top)
    qtbot.wait(50)
    assert window.height() == 768 and window.minimumSizeHint().height() <= 768
    logits = window.logits
    font = th.PROJECTOR.font(-2).pixelSize()  # the theme sizes its fonts in pixels
    assert font != th.NORMAL.font(-2).pixelSize()
    assert window.state.theme is th.PROJECTOR and len(logits.labels) >= top  # the rows past the first ten made now
    assert {label.textItem.font().pixelSize() for label in logits.labels} == {font}  # each at the projector's size
    shown = logits.rows_shown()
    assert 1 <= shown < top and logits.scroll.isVisible()  # the list scrolls
    first = logits.logit_plot.getViewBox().viewRange()[1]
    logits.scroll.setValue(logits.scroll.maximum())  # scrolled to the end: the last candidate is in view
    low, high = logits.logit_plot.getViewBox().viewRange()[1]
    assert low < top - 1 < high and first != [low, high]
    window.logits.n_spin.setValue(5)
    qtbot.wait(10)
    assert not logits.scroll.isVisible()  # five rows fit: no scroll bar


def test_every_panel_comes_back_at_its_size_after_the_prompt_was_focused(window, qtbot):
    """Found with the exports of focused panels: re-planning the pages while the old ones were being removed (a resize in
    the middle of it) left the panels hidden on a page nobody showed, after Esc from a focused prompt."""
    run(qtbot, window, window.step, p.Step)
    window.focus.toggle(window.tokens)
    qtbot.wait(10)
    window.focus.toggle(None)
    qtbot.wait(10)
    assert window.overview.stack.count() == len(window.overview.pages)
    front = window.overview.stack.currentIndex()
    for panel in window.overview.panels():
        if window.overview.page_of(panel) == front:
            least = panel.minimumSizeHint()
            assert panel.isVisible() and panel.width() >= least.width() and panel.height() >= least.height(), panel.short_title


def test_the_history_table_is_built_on_a_thread_while_the_window_goes_on(window, qtbot, tmp_path, monkeypatch):
    """Every step's distribution is recomputed off the GUI thread; the window's status says it is being
    saved, then that it was; a file that cannot be renamed into place is said on the status line."""
    import threading

    from app.logic import tables

    for _ in range(3):
        run(qtbot, window, window.step, p.Step)
    threads, real = [], tables.distribution
    monkeypatch.setattr(tables, "distribution", lambda *a: threads.append(threading.current_thread()) or real(*a))
    path = tmp_path / "history.csv"
    with qtbot.waitSignal(window.exporter.saved, timeout=20_000) as saved:
        assert window.exporter.export_table("history", path)
        assert "Saving the history table (3 rows)" in window.status_line.status_label.text()
    assert saved.args[0].error is None and saved.args[0].detail == "3 rows" and path.exists()
    assert len(threads) == 3 and threading.main_thread() not in threads
    assert window.status_line.status_label.text() == f"Saved the history table (3 rows) to {path}."
    monkeypatch.setattr(tables.os, "replace", lambda *a: (_ for _ in ()).throw(OSError(28, "No space left on device")))
    with qtbot.waitSignal(window.exporter.saved, timeout=20_000) as saved:  # a failure on the thread
        assert window.exporter.export_table("history", tmp_path / "late.csv")
    assert isinstance(saved.args[0].error, OSError) and "No space left" in window.status_line.status_label.text()
    assert "Could not save the history table" in window.status_line.status_label.text()
    assert not (tmp_path / "late.csv").exists() and not [p for p in tmp_path.iterdir() if p.suffix == ".tmp"]


def test_a_png_is_encoded_on_the_export_thread(window, qtbot, tmp_path, monkeypatch):
    """The picture is taken on the GUI thread (Qt renders widgets only there); its PNG is encoded and
    written on the export thread, and the status line says it is being saved, then that it was."""
    import threading

    from app.window import pictures

    run(qtbot, window, window.step, p.Step)
    threads, real = [], pictures.png_bytes
    monkeypatch.setattr(pictures, "png_bytes", lambda image: threads.append(threading.current_thread()) or real(image))
    path = tmp_path / "window.png"
    with qtbot.waitSignal(window.exporter.saved, timeout=20_000) as saved:
        assert window.exporter.export_picture(window, path)
        assert window.status_line.status_label.text() == f"Saving a picture of the window to {path}…"
    assert len(threads) == 1 and threads[0] is not threading.main_thread()
    assert saved.args[0].error is None and QImage(str(path)).width() == 2 * window.width()
    assert window.status_line.status_label.text().startswith("Saved a picture of the window (PNG, ")
