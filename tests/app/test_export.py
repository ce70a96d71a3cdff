"""Export: pictures of the window and of a panel (PNG at 2x, SVG of a plot), the candidates and history
tables as CSV, and Copy text; a path that cannot be written is a status line, never a crash."""

from __future__ import annotations

import csv
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest
from PySide6.QtGui import QImage
from PySide6.QtWidgets import QApplication

from app.logic import tables
from engine.sampling import SamplingSettings, softmax

from app.protocol import messages as p

from .helpers import choose_settings, run

SVG = "{http://www.w3.org/2000/svg}"


def read_csv(path) -> list[dict]:
    with open(path, newline="", encoding="utf-8-sig") as f:
        return list(csv.DictReader(f))


def saved(qtbot, window, export) -> bool:
    """Do ``export()`` (a PNG or the history table: finished on the export thread) and wait until it ends."""
    with qtbot.waitSignal(window.exporter.saved, timeout=20_000):
        started = export()
    return started


def pixels(image: QImage) -> np.ndarray:
    """uint8 [H, W, 4] of a saved image."""
    image = image.convertToFormat(QImage.Format.Format_RGBA8888)
    # copied: the converted image is freed on return (a view of it read freed memory, and crashed
    # once large buffers were given back to the system: app/logic/memory.py)
    return np.frombuffer(image.constBits(), np.uint8).reshape(image.height(), image.bytesPerLine() // 4, 4)[:, : image.width()].copy()


def test_a_panel_picture_is_twice_its_size_drawn_at_that_size(window, qtbot, tmp_path):
    run(qtbot, window, window.step, p.Step)
    panel = window.attention
    path = tmp_path / "attention.png"
    assert saved(qtbot, window, lambda: window.exporter.export_picture(panel, path))
    image = QImage(str(path))
    assert (image.width(), image.height()) == (2 * panel.width(), 2 * panel.height())
    assert image.dotsPerMeterX() == round(192 / 0.0254)  # placed at its size on screen by slide software
    assert len(np.unique(pixels(image).view(np.uint32))) > 50  # a drawing, not a blank or one-colour image
    # drawn with twice the pixels, not a 1x picture scaled up: a scaled-up picture (nearest or smooth)
    # has no sharp step between the two pixels of one logical pixel; text and lines drawn at 2x do
    grey = pixels(image).astype(int)[..., :3].mean(axis=-1)
    steps = np.abs(np.diff(grey, axis=1)) > 150  # steps[:, j]: between pixel j and j + 1
    assert steps[:, 0::2].sum() > 500  # within a logical pixel (measured: 6,559 at 2x; 0 for a 1x image scaled up)
    assert "attention" in window.status_line.status_label.text().lower() and str(path) in window.status_line.status_label.text()
    # the panel's "?" and "⋯" buttons are not in the picture (where they stand: one plain colour), and stay on screen
    buttons = [window.help.buttons[panel], next(b for b in window.exporter.buttons if b.parent() is panel)]
    for button in buttons:
        g = button.geometry()
        spot = pixels(image)[2 * g.top() : 2 * g.bottom(), 2 * g.left() : 2 * g.right()]
        assert len(np.unique(spot.reshape(-1, 4), axis=0)) == 1
        assert button.isVisible()


def test_a_window_picture_and_a_hidden_view(window, qtbot, tmp_path):
    run(qtbot, window, window.step, p.Step)
    assert saved(qtbot, window, lambda: window.exporter.export_picture(window, tmp_path / "window.png"))
    image = QImage(str(tmp_path / "window.png"))
    assert (image.width(), image.height()) == (2 * window.width(), 2 * window.height())
    # a panel of another view is brought on screen first, then pictured at its size there
    assert not window.sampling_view.isVisible()
    with qtbot.waitSignal(window.exporter.saved, timeout=20_000):
        assert window.exporter.export_picture(window.sampling_view, tmp_path / "stages.png")
        size = window.sampling_view.size()  # when it was pictured (the status line's new text can move it later)
    assert window.sampling_view.isVisible() and size.width() > 200
    assert "a picture of the Sampling view (PNG" in window.status_line.status_label.text()
    image = QImage(str(tmp_path / "stages.png"))
    assert (image.width(), image.height()) == (2 * size.width(), 2 * size.height())


def test_a_plot_panel_as_svg_holds_its_drawing(window, qtbot, tmp_path):
    result = run(qtbot, window, window.step, p.Step)
    path = tmp_path / "logits.svg"
    assert window.exporter.export_picture(window.logits, path)
    root = ET.parse(path).getroot()
    assert root.tag == f"{SVG}svg"
    shapes = [e for e in root.iter() if e.tag in (f"{SVG}path", f"{SVG}polyline", f"{SVG}rect")]
    texts = " ".join("".join(e.itertext()) for e in root.iter(f"{SVG}text"))
    assert len(shapes) > 20  # bars, axes, grid: paths, not one embedded picture
    assert "Candidates" in texts  # the panel's title, as text
    top = result.trace.candidate_pieces[0]
    assert top in texts  # the best candidate's label on the bar axis
    # a panel without a plot has no SVG: said on the status line, nothing written
    assert not window.exporter.export_picture(window.tokens, tmp_path / "tokens.svg")
    assert "no plot" in window.status_line.status_label.text() and not (tmp_path / "tokens.svg").exists()


def test_the_candidates_table_holds_the_distributions_numbers(window, qtbot, tmp_path):
    choose_settings(window.sampling, SamplingSettings(temperature=0.8, top_k=10, top_p=0.5, repetition_penalty=2.0, seed=3))
    run(qtbot, window, window.step, p.Step)
    result = run(qtbot, window, window.step, p.Step)
    trace, dist = result.trace, result.trace.distribution
    path = tmp_path / "candidates.csv"
    assert window.exporter.export_table("candidates", path)
    rows = read_csv(path)
    assert list(rows[0]) == list(tables.CANDIDATE_COLUMNS)
    ids = np.array([int(r["id"]) for r in rows])
    expected = list(trace.candidate_ids) + ([] if trace.chosen in trace.candidate_ids else [trace.chosen])
    np.testing.assert_array_equal(ids, expected)

    def column(name):
        return np.array([np.float32(float(r[name])) for r in rows])

    np.testing.assert_array_equal(column("logit_raw"), trace.record.logits[ids])
    np.testing.assert_array_equal(column("model_prob"), softmax(trace.record.logits)[ids])
    np.testing.assert_array_equal(column("logit_after_penalty"), dist.after_penalty[ids])
    np.testing.assert_array_equal(column("logit_after_temperature"), dist.after_temperature[ids])
    np.testing.assert_array_equal(column("logit_after_top_k"), dist.after_top_k[ids])  # -inf where removed
    np.testing.assert_array_equal(column("prob_before_top_p"), softmax(dist.after_top_k)[ids])  # what top-p reads
    np.testing.assert_array_equal(column("logit_after_top_p"), dist.after_top_p[ids])
    np.testing.assert_array_equal(column("sampling_prob"), dist.probs[ids])
    assert {r["removed_by"] for r in rows} == {"top-k", "top-p", ""}  # each filter removed some
    assert [r["chosen"] for r in rows].count("1") == 1 and rows[[int(r["id"]) for r in rows].index(trace.chosen)]["chosen"] == "1"
    assert all(r["step"] == "1" for r in rows)
    assert [r["shown_as"] for r in rows[: len(trace.candidate_pieces)]] == list(trace.candidate_pieces)


def test_the_history_table_has_a_row_per_step(window, qtbot, tmp_path, demo_model):
    choose_settings(window.sampling, SamplingSettings(temperature=0.9, top_k=20, repetition_penalty=1.5, seed=4))
    traces = [run(qtbot, window, window.step, p.Step).trace for _ in range(4)]  # what the window showed at each step
    result = window.state.result
    path = tmp_path / "history.csv"
    assert saved(qtbot, window, lambda: window.exporter.export_table("history", path))
    rows = read_csv(path)
    assert list(rows[0]) == list(tables.HISTORY_COLUMNS)
    assert [int(r["step"]) for r in rows] == [0, 1, 2, 3]
    assert [int(r["id"]) for r in rows] == [r.chosen for r in result.records] == [t.chosen for t in traces]
    assert [r["token"] for r in rows] == [demo_model.tokenizer.decode([r.chosen]) for r in result.records]
    assert [r["shown_as"] for r in rows] == [t.chosen_piece for t in traces]
    assert [np.float32(float(r["sampling_prob"])) for r in rows] == [np.float32(t.chosen_prob) for t in traces]
    assert [float(r["model_prob"]) for r in rows] == pytest.approx([t.model_prob for t in traces], rel=1e-6)
    assert [int(r["rank"]) for r in rows] == [t.chosen_rank for t in traces]
    assert [float(r["sampling_entropy_bits"]) for r in rows] == [t.entropy_bits for t in traces]
    assert [float(r["model_entropy_bits"]) for r in rows] == [t.model_entropy_bits for t in traces]
    assert [int(r["cache_len"]) for r in rows] == [r.kv.positions for r in result.records] == [5, 6, 7, 8]
    assert [float(r["forward_ms"]) for r in rows] == [round(r.forward_ms, 3) for r in result.records]
    assert [float(r["draw_u"]) for r in rows] == [r.draw_u for r in result.records]


def test_copy_text_is_the_prompt_and_the_generated_text(window, qtbot, demo_model):
    for _ in range(3):
        result = run(qtbot, window, window.step, p.Step)
    text = window.exporter.copy_text()
    expected = "The cat sat on the" + demo_model.tokenizer.decode([r.chosen for r in result.records])
    assert text == expected and QApplication.clipboard().text() == expected


def test_copy_picture_of_the_window(window, qtbot):
    run(qtbot, window, window.step, p.Step)
    window.exporter.copy_picture_action.trigger()
    image = QApplication.clipboard().image()
    assert (image.width(), image.height()) == (2 * window.width(), 2 * window.height())


def test_a_path_that_cannot_be_written_is_a_status_line(window, qtbot, tmp_path):
    run(qtbot, window, window.step, p.Step)
    out = tmp_path / "out"
    out.mkdir()
    assert not window.exporter.export_picture(window.attention, out / "no such folder" / "a.png")
    assert "Could not save a picture" in window.status_line.status_label.text() and "No such file" in window.status_line.status_label.text()
    assert not window.exporter.export_table("history", out / "no such folder" / "h.csv")
    assert "Could not save the history table" in window.status_line.status_label.text()
    (out / "taken.png").mkdir()  # written, then not renamed over a folder: the written file is removed
    assert not window.exporter.export_picture(window.attention, out / "taken.png")
    assert not window.exporter.export_table("candidates", out / "taken.png")
    assert "Could not save the candidates table" in window.status_line.status_label.text()
    assert [p.name for p in out.iterdir()] == ["taken.png"]  # no temporary file left behind


def test_the_tables_before_the_first_step(window, tmp_path):
    assert not window.exporter.candidates_action.isEnabled()
    assert not window.exporter.export_table("candidates", tmp_path / "c.csv")
    assert "step once" in window.status_line.status_label.text().lower()


def test_the_menus_and_the_panel_buttons(window):
    titles = [a.text() for a in window.menuBar().actions()]
    assert titles[:2] == ["&File", "&Edit"]
    file_menu = window.menuBar().actions()[0].menu()
    export = next(a.menu() for a in file_menu.actions() if a.text() == "&Export")
    entries = [a.text() for a in export.actions()]
    assert entries[0] == "Picture of the window…" and "Candidates table (CSV)…" in entries and "History table (CSV)…" in entries
    panels = next(a.menu() for a in export.actions() if a.text() == "Picture of a panel")
    assert [a.text() for a in panels.actions()] == [
        "Prompt and tokens…", "Embeddings…", "Attention…", "Candidates…", "Sampling…", "KV cache…",
        "Inside view…", "Why view…", "Sampling view…", "KV cache view…", "Branches view…",
    ]  # fmt: skip
    assert len(window.exporter.buttons) == 6
    for button in window.exporter.buttons:
        assert [a.text() for a in button.menu().actions()] == ["Copy picture", "Export picture…"]


def test_csv_cells_read_back_exactly(tmp_path):
    rows = [
        {"token": " cat", "id": 1, "x": np.float32(0.1), "y": np.float32(-np.inf), "z": float("nan")},
        {"token": 'a, "b"\nc', "id": 2, "x": np.float32(3.4028235e38), "y": np.float32(1e-30), "z": 0.1 + 0.2},
    ]
    path = tmp_path / "t.csv"
    tables.write_csv(path, ("token", "id", "x", "y", "z"), rows)
    assert path.read_bytes().startswith(b"\xef\xbb\xbf")  # UTF-8 with a BOM: Excel reads it as UTF-8
    back = read_csv(path)
    assert [r["token"] for r in back] == [" cat", 'a, "b"\nc']
    assert [np.float32(float(r["x"])) for r in back] == [np.float32(0.1), np.float32(3.4028235e38)]
    assert back[0]["y"] == "-inf" and np.float32(float(back[1]["y"])) == np.float32(1e-30)
    assert back[0]["z"] == "" and float(back[1]["z"]) == 0.1 + 0.2


def test_the_menu_entries_ask_where_then_export(window, qtbot, tmp_path, monkeypatch):
    from app.window import export_actions

    run(qtbot, window, window.step, p.Step)
    answers = iter([(str(tmp_path / "attention"), "SVG drawing (*.svg)"), (str(tmp_path / "history"), "CSV table (*.csv)"), ("", "")])
    asked = []

    def ask(parent, caption, start, filters):
        asked.append((caption, Path(start).name, filters))
        return next(answers)

    monkeypatch.setattr(export_actions.QFileDialog, "getSaveFileName", ask)
    window.exporter.panel_picture_actions[window.attention].trigger()
    window.exporter.history_action.trigger()
    window.exporter.window_picture_action.trigger()  # cancelled: nothing written
    window.exporter.writer.wait()  # the history table is written on the export thread
    assert asked[0] == ("Save a picture of the Attention panel", "nexttoken-attention-step0.png", "PNG picture, 2× (*.png);;SVG drawing (*.svg)")
    assert asked[1][1] == "nexttoken-history-step0.csv" and asked[2][0] == "Save a picture of the window"
    assert sorted(p.name for p in tmp_path.iterdir() if p.suffix) == ["attention.svg", "history.csv", "nexttoken.ini"]
    assert ET.parse(tmp_path / "attention.svg").getroot().tag == f"{SVG}svg"
