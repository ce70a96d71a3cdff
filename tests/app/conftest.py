"""Fixtures for the window tests: offscreen Qt, isolated QSettings, and a check that no test leaves
a QThread or an engine child process running (an engine must always stop when its window closes)."""

from __future__ import annotations

import os
import threading

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import pytest
from PySide6.QtCore import QSettings, QThread

from app.panels import tokens_panel
from app.window import paint_scheduler
from engine import hf_compat

# No waits a person needs and a test does not: a result is drawn as soon as it arrives, its turns
# back to back (the window's 16 ms frame and 1 ms between turns: three window test files took about a
# fifth less time without them, side by side), and a prompt set in the editor goes out at the next
# turn of the event loop instead of after a 450 ms pause in typing (a test setting 16 prompts waited
# 7 s). What the waits are for is measured in benchmarks/bench_gui.py (which keeps the frames) and
# tested where a test needs them (tests/app/test_edits_during_loads.py sets the pause it wants).
paint_scheduler.FRAME_MS = paint_scheduler.TURN_MS = 0
tokens_panel.TYPING_PAUSE_MS = 0


_started: list[QThread] = []  # every QThread started from Python since the last test's check


def _record_start(start):
    def recording(self, *args):
        _started.append(self)
        return start(self, *args)

    return recording


QThread.start = _record_start(QThread.start)  # cheaper than scanning every object after each test (0.2 s)


def _running_qthreads() -> list[QThread]:
    running = [thread for thread in _started if _alive(thread)]
    _started[:] = running
    return running


def _alive(thread: QThread) -> bool:
    try:
        return thread.isRunning()
    except RuntimeError:  # the C++ object is gone
        return False


@pytest.fixture(autouse=True)
def no_thread_left_running(qapp):
    """Fail any test that leaves a QThread running (napari does the same)."""
    yield
    running = _running_qthreads()
    for thread in running:  # stop them so one leak does not fail every later test
        thread.quit()
        thread.wait(10_000)
    _started.clear()
    assert not running, f"test left {len(running)} QThread(s) running: {[t.objectName() for t in running]}"


@pytest.fixture(autouse=True)
def no_engine_process_left_running():
    """Fail any test that leaves an engine child process running (a window closed, or a
    controller shut down, must end its engine process)."""
    import multiprocessing

    from app.window import engine_process

    yield
    spare = engine_process._spare[0] if engine_process._spare is not None else None
    left = [c for c in multiprocessing.active_children() if c.name == "nexttoken-engine" and c is not spare]
    for child in left:  # end them so one leak does not fail every later test
        child.kill()
        child.join(5)
    assert not left, f"test left {len(left)} engine process(es) running"


@pytest.fixture
def qsettings(tmp_path):
    """QSettings in a temporary ini file, so tests never read or write the user's settings."""
    return QSettings(str(tmp_path / "nexttoken.ini"), QSettings.IniFormat)


def _shown_window(**kw):
    """A MainWindow (engine "thread" unless ``kw`` says otherwise) shown at 1600 x 1000."""
    from app.window.window import MainWindow

    window = MainWindow(**({"engine": "thread"} | kw))
    window.resize(1600, 1000)
    window.show()
    return window


@pytest.fixture
def make_window(qtbot, qsettings):
    """Build a MainWindow (closed at the end of the test, which stops its engine).

    Its engine is a thread of this process unless a test asks for ``engine="process"``: the tests
    can then count forward passes, break a step or inspect the session in place, and no test
    waits for a child process to import torch. tests/app/test_engine_process.py covers the
    process engine the app uses by default."""
    windows = []

    def make(**kw):
        window = _shown_window(**({"preferences": qsettings} | kw))
        qtbot.addWidget(window)
        windows.append(window)
        return window

    yield make
    for window in windows:
        window.close()


@pytest.fixture(scope="module")
def module_window(qapp, tmp_path_factory):
    """Build windows shared by a module's tests (for tests that only look at what a window shows,
    or that put back what they change): each is built once, with its own QSettings, and closed at
    the end of the module, which must stop every thread it started. Its threads are its own: the
    per-test check leaves them alone."""
    windows, owned = [], []

    def make(**kw):
        settings = QSettings(str(tmp_path_factory.mktemp("settings") / "nexttoken.ini"), QSettings.IniFormat)
        before = len(_started)
        window = _shown_window(**({"preferences": settings} | kw))
        owned.extend(_started[before:])
        del _started[before:]
        windows.append(window)
        return window

    yield make
    for window in windows:
        window.close()
    left = [thread for thread in owned if _alive(thread) and not thread.wait(10_000)]
    assert not left, f"a module's window left {len(left)} QThread(s) running"


@pytest.fixture
def window(make_window, qtbot, demo_model):
    """A window with the demo model loaded (the session-wide copy: no disk load per test) and a prompt."""
    w = make_window()
    with qtbot.waitSignal(w.resultApplied, timeout=20_000) as blocker:
        w.load_model(None, loaded=demo_model, prompt="The cat sat on the")
    from app.protocol.messages import Load

    assert isinstance(blocker.args[0].request, Load)
    return w


@pytest.fixture
def forward_calls(monkeypatch):
    """Every forward pass the engine runs, as the name of the thread that ran it."""
    calls: list[str] = []
    real = hf_compat.forward

    def counting(*args, **kwargs):
        calls.append(threading.current_thread().name)
        return real(*args, **kwargs)

    monkeypatch.setattr(hf_compat, "forward", counting)
    return calls


@pytest.fixture(scope="session")
def smollm_loaded(tmp_path_factory):
    """A Llama with random weights at SmolLM2-135M's shape (30 layers, 9 heads / 3 kv, d = 576, 49,152
    tokens), loaded once for the whole run (read-only: do not mutate it)."""
    from engine.random_model import SHAPES, random_loaded

    model_type, config = SHAPES["SmolLM2-135M"]
    return random_loaded(tmp_path_factory.mktemp("smollm") / "SmolLM2-135M-random", model_type, seed=1, **config)
