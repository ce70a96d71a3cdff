"""engine.logs: a windowed build (no stdout/stderr) can print, log and show progress bars without crashing."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import textwrap

import pytest

from engine import logs
from engine.quiet import QUIET_ENV


@pytest.fixture
def fresh_logs(monkeypatch):
    """setup_logging as at start-up; its handlers, hooks and environment are undone afterwards."""
    for name in QUIET_ENV:
        monkeypatch.delenv(name, raising=False)
    logs._reset_for_tests()
    yield logs
    logs._reset_for_tests()


def test_writes_the_log_file_and_returns_its_path(fresh_logs, tmp_path):
    path = fresh_logs.setup_logging(tmp_path / "logs")
    logging.getLogger("app.test").warning("hello from the test")
    assert path == tmp_path / "logs" / "nexttoken.log" == fresh_logs.log_file()
    text = path.read_text(encoding="utf-8")
    assert "started (source" in text and "hello from the test" in text
    assert fresh_logs.setup_logging(tmp_path / "elsewhere") == path  # a second call changes nothing


def test_replaces_missing_streams_and_silences_progress_bars(fresh_logs, monkeypatch, tmp_path):
    monkeypatch.setattr(sys, "stdout", None)
    monkeypatch.setattr(sys, "stderr", None)
    fresh_logs.setup_logging(tmp_path)
    sys.stdout.write("nowhere\n")
    sys.stderr.write("nowhere\n")
    assert os.environ["TQDM_DISABLE"] == "1" and os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] == "1"


def test_unwritable_log_folder_runs_without_a_file(fresh_logs, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    assert fresh_logs.setup_logging(blocker / "logs") is None


def test_uncaught_exceptions_go_to_the_log(fresh_logs, tmp_path):
    path = fresh_logs.setup_logging(tmp_path)
    try:
        raise RuntimeError("boom in a slot")
    except RuntimeError:
        sys.excepthook(*sys.exc_info())
    assert "boom in a slot" in path.read_text(encoding="utf-8")


def test_engine_download_progress_still_reports_with_bars_disabled(fresh_logs, tmp_path):
    from engine.loading import _progress_bar_class

    fresh_logs.setup_logging(tmp_path)
    seen = []
    bar = _progress_bar_class(lambda done, total: seen.append((done, total)))(
        total=10, name="huggingface_hub.snapshot_download"
    )
    bar.update(4)
    bar.close()
    assert seen == [(4, 10)]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="closes fds 1 and 2 of a child process")
def test_no_console_process_survives_tqdm_and_stream_writes(tmp_path):
    # With fds 1 and 2 closed, Python starts with sys.stdout = sys.stderr = None (a windowed build).
    script = textwrap.dedent(
        f"""
        import logging, sys
        from engine.logs import setup_logging
        setup_logging({str(tmp_path)!r})
        from tqdm import tqdm
        for _ in tqdm(range(3)):
            pass
        sys.stdout.write("x"); sys.stderr.write("y")
        logging.getLogger("app").warning("windowed ok")
        """
    )

    def close_output():
        os.close(1)
        os.close(2)

    run = subprocess.run([sys.executable, "-c", script], stdin=subprocess.DEVNULL, preexec_fn=close_output, timeout=120)
    assert run.returncode == 0
    assert "windowed ok" in (tmp_path / "nexttoken.log").read_text(encoding="utf-8")
