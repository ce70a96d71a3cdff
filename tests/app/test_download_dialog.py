"""The window downloading a model by hub id from a stand-in hub on 127.0.0.1 (tests/hub_server.py):
its progress dialog, its Cancel button, and closing the window mid-download."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QProgressBar, QProgressDialog, QPushButton

from engine.loading import load_model
from tests.conftest import make_tiny_folder
from tests.hub_server import FakeHub, point_client_at

from .helpers import run
from app.protocol import messages as p
from app.logic import wording

REPO = "someone/gpt2-shaped"


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> Path:
    return make_tiny_folder(tmp_path_factory.mktemp("hub-src") / "gpt2-shaped")


@pytest.fixture
def hub(source, tmp_path, monkeypatch):
    with FakeHub.from_folder(REPO, source) as server:
        point_client_at(monkeypatch, server.endpoint, tmp_path / "hf-home" / "hub")
        yield server


def dialog_of(window, visible: bool = True) -> QProgressDialog | None:
    dialogs = [d for d in window.findChildren(QProgressDialog) if d.isVisible() or not visible]
    assert len(dialogs) <= 1
    return dialogs[0] if dialogs else None


def test_the_progress_dialog_follows_the_download_and_closes_when_loaded(make_window, qtbot, hub, source):
    window = make_window()
    reports, values, labels = [], [], []  # what the engine sent; every value and label the dialog showed

    def on_progress(done, total):  # runs after the window's own slot
        reports.append((done, total))
        dialog = dialog_of(window, visible=False)
        if not values:  # the dialog exists from the first report: follow its bar from then on
            values.append(dialog.value())
            dialog.findChild(QProgressBar).valueChanged.connect(values.append)
        labels.append(dialog.labelText())
        assert dialog.isVisible() or dialog.value() <= 0  # on screen from the first per cent

    window.controller.downloadProgress.connect(on_progress)
    with qtbot.waitSignal(window.resultApplied, timeout=30_000, check_params_cb=lambda r: isinstance(r.request, p.Load)):
        window.load_model(REPO)

    assert values == sorted(values) and values[-1] == 100  # the bar never goes back, and ends full
    total = sum(p.stat().st_size for p in source.iterdir() if p.name != "model.safetensors.index.json")
    assert len(reports) > 20 and {t for _, t in reports} == {total} and max(reports)[0] == total
    assert any(label.startswith(f"Downloading {REPO}: ") and label.endswith(" of 9.6 MiB") for label in labels)
    assert dialog_of(window) is None  # gone once the model is loaded
    assert REPO in window.status_line.model_label.text()


def test_closing_the_window_mid_download_stops_it_and_a_later_load_finishes(make_window, qtbot, hub, tmp_path):
    hub.hold_at["model.safetensors"] = 1 << 20  # the hub pauses after 1 MB of the weights
    window = make_window()
    window.load_model(REPO)
    with qtbot.waitSignal(window.controller.downloadProgress, timeout=30_000,
                          check_params_cb=lambda done, total: done >= 1 << 20):
        pass
    thread = window.controller.engine.thread
    threading.Timer(0.3, hub.release.set).start()  # more bytes arrive while the window closes
    window.close()  # the next progress report raises Cancelled in the download
    assert not thread.isRunning()
    gets_before = len(hub.gets("model.safetensors"))

    snapshot = tmp_path / "hf-home" / "hub" / ("models--" + REPO.replace("/", "--")) / "snapshots" / hub.commit
    assert (snapshot / "config.json").exists() and not (snapshot / "model.safetensors").exists()
    loaded = load_model(REPO)  # the next load (any window, or the terminal) fetches the rest
    assert loaded.info.name == REPO and len(hub.gets("model.safetensors")) == gets_before + 1


def cancel_mid_download(window, qtbot, hub) -> str:
    """Start loading REPO, press the dialog's Cancel while the hub holds the weights after 1 MB, then
    let more bytes arrive (the next progress report stops the download); return the status shown
    while the cancel was on its way."""
    hub.hold_at["model.safetensors"] = 1 << 20
    window.load_model(REPO)
    with qtbot.waitSignal(window.controller.downloadProgress, timeout=30_000,
                          check_params_cb=lambda done, total: done >= 1 << 20):
        pass
    cancel = dialog_of(window).findChild(QPushButton)
    assert cancel.text() == "Cancel"
    qtbot.mouseClick(cancel, Qt.LeftButton)
    assert dialog_of(window) is None  # gone at once
    cancelling = window.status_line.status_label.text()
    hub.release.set()
    return cancelling


def test_cancel_stops_the_download_the_old_model_still_steps_and_a_later_load_finishes(window, qtbot, hub, tmp_path):
    with qtbot.waitSignal(window.errorShown, timeout=30_000) as error:
        cancelling = cancel_mid_download(window, qtbot, hub)
    assert cancelling == f"Cancelling the download of {REPO}…"
    message = "Download cancelled: still using gpt2-tiny-demo."
    assert error.args == [message] and window.status_line.status_label.text() == message
    qtbot.wait(200)  # progress reports sent before the cancel was heard open no dialog again
    assert dialog_of(window, visible=False) is None

    result = run(qtbot, window, window.step, p.Step)  # the old session runs on
    assert result.info.is_demo and result.trace is not None and result.trace.step == 0
    snapshot = tmp_path / "hf-home" / "hub" / ("models--" + REPO.replace("/", "--")) / "snapshots" / hub.commit
    assert (snapshot / "config.json").exists() and not (snapshot / "model.safetensors").exists()

    gets = len(hub.gets("model.safetensors"))
    hub.hold_at.clear()
    result = run(qtbot, window, lambda: window.load_model(REPO), p.Load, timeout=30_000)  # the next load finishes it
    assert result.info.name == REPO and REPO in window.status_line.model_label.text()
    assert len(hub.gets("model.safetensors")) == gets + 1 and len(hub.gets("config.json")) == 1  # the files done are kept


def test_cancel_before_any_model_opens_the_demo_model(make_window, qtbot, hub):
    window = make_window()
    with qtbot.waitSignal(window.resultApplied, timeout=30_000, check_params_cb=lambda r: isinstance(r.request, p.Load)) as done:
        cancel_mid_download(window, qtbot, hub)
    result = done.args[0]
    assert result.info.is_demo
    assert wording.result_status(result).startswith(f"Download of {REPO} cancelled: opened the tiny demo model instead.")
    assert window.status_line.status_label.text() == wording.result_status(result) and dialog_of(window) is None


def test_the_app_engine_process_downloads_through_hf_endpoint(make_window, qtbot, hub, source, tmp_path, monkeypatch):
    """The app's default engine, a child process, set up the way a classroom mirror would be:
    HF_ENDPOINT and HF_HOME in the environment, read by huggingface_hub when the child imports it."""
    monkeypatch.setenv("HF_ENDPOINT", hub.endpoint)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "child-home"))
    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    window = make_window(engine="process")
    reports = []
    window.controller.downloadProgress.connect(lambda done, total: reports.append((done, total)))
    with qtbot.waitSignal(window.resultApplied, timeout=90_000, check_params_cb=lambda r: isinstance(r.request, p.Load)):
        window.load_model(REPO)

    total = sum(p.stat().st_size for p in source.iterdir() if p.name != "model.safetensors.index.json")
    assert reports and max(reports) == (total, total)  # huggingface_hub's own 10 MiB reads: a few reports
    assert REPO in window.status_line.model_label.text() and dialog_of(window) is None
    assert (tmp_path / "child-home" / "hub" / ("models--" + REPO.replace("/", "--"))).is_dir()


# Note: the dialog is window-modal, and QProgressDialog.setValue then processes events, so the
# window's slot for one report can run the slots for the next reports inside it: a listener
# connected after the window's slot sees reports out of order, and the label can lag one report
# behind the bar. That is why the bar's own valueChanged is followed above.
