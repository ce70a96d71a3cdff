"""File → Save session / Open session and ``nexttoken --open``: a session comes back as it was, every
branch; a bad file is refused and changes nothing; without its model a session is shown, not continued."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from engine.sampling import SamplingSettings

from .helpers import save, choose_settings, run
from app.protocol import messages as p
from app.logic import wording

ROOT = Path(__file__).resolve().parents[2]
SEEDED = SamplingSettings(temperature=0.9, top_k=20, seed=11)


def _session_with_two_branches(qtbot, window):
    choose_settings(window.sampling, SEEDED)
    for _ in range(4):
        run(qtbot, window, window.step, p.Step)
    run(qtbot, window, window.back, p.Back)
    back = run(qtbot, window, window.back, p.Back)
    other = int(next(i for i in back.trace.candidate_ids if i != back.trace.chosen))
    run(qtbot, window, lambda: window.logits.tokenChosen.emit(other), p.Choose)
    return run(qtbot, window, window.step, p.Step)


def _same_session(a, b) -> None:
    assert a.prompt_text == b.prompt_text
    assert [r.chosen for r in a.records] == [r.chosen for r in b.records]
    for x, y in zip(a.records, b.records):
        for name in ("logits", "resid", "attn", "token_embed", "pos_embed", "attn_out", "mlp_out", "final_hidden"):
            np.testing.assert_array_equal(getattr(x, name), getattr(y, name), err_msg=name)
        assert (x.settings, x.chosen_by, x.kv.positions, x.forward_ms) == (y.settings, y.chosen_by, y.kv.positions, y.forward_ms)
    for name in ("ids", "parents", "steps", "tokens"):
        np.testing.assert_array_equal(getattr(a.branches, name), getattr(b.branches, name))
    assert a.branches.current == b.branches.current and a.branches.pieces == b.branches.pieces


def test_save_then_open_shows_the_session_as_it_was(window, qtbot, tmp_path):
    before = _session_with_two_branches(qtbot, window)
    path = tmp_path / "lesson.npz"
    saved = save(qtbot, window, path)
    assert path.is_file() and "Saved" in wording.result_status(saved) and str(path) in window.status_line.status_label.text()
    run(qtbot, window, window.reset, p.Reset)
    choose_settings(window.sampling, SamplingSettings(greedy=True))
    opened = run(qtbot, window, lambda: window.open_session(str(path)), p.OpenSession)
    _same_session(opened, before)
    assert opened.can_step  # the same model: it steps on
    assert window.controller.settings == SEEDED == window.sampling.settings()  # the file's settings came with it
    assert len(opened.branches.leaves()) == 2
    window.show_view("branches")
    assert window.branches_view.comparison() is not None


def test_a_reopened_seeded_session_steps_on_as_the_original_did(window, qtbot, tmp_path):
    _session_with_two_branches(qtbot, window)
    path = tmp_path / "seeded.npz"
    save(qtbot, window, path)
    original = [run(qtbot, window, window.step, p.Step).trace.chosen for _ in range(4)]
    run(qtbot, window, lambda: window.open_session(str(path)), p.OpenSession)
    again = [run(qtbot, window, window.step, p.Step).trace.chosen for _ in range(4)]
    assert again == original


def test_open_at_a_step(window, qtbot, tmp_path):
    before = _session_with_two_branches(qtbot, window)
    path = tmp_path / "s.npz"
    save(qtbot, window, path)
    opened = run(qtbot, window, lambda: window.open_session(str(path), 1), p.OpenSession)
    assert opened.trace.step == 1 and [r.chosen for r in opened.records] == [r.chosen for r in before.records[:2]]
    assert len(opened.branches) == len(before.branches)  # every branch kept


@pytest.mark.parametrize("content", [b"", b"not a zip at all", b"PK\x03\x04 truncated"])
def test_a_bad_file_is_refused_and_nothing_changes(window, qtbot, tmp_path, content):
    before = run(qtbot, window, window.step, p.Step)
    path = tmp_path / "bad.npz"
    path.write_bytes(content)
    with qtbot.waitSignal(window.errorShown, timeout=20_000) as blocker:
        window.open_session(str(path))
    assert "bad.npz" in blocker.args[0]
    qtbot.waitUntil(lambda: window.controller.idle)
    shown = window.state.result
    assert shown.prompt_text == before.prompt_text and [r.chosen for r in shown.records] == [r.chosen for r in before.records]
    after = run(qtbot, window, window.step, p.Step)  # still usable, same session
    assert after.trace.step == 1 and after.prompt_text == before.prompt_text


def test_without_its_model_a_session_is_shown_not_continued(make_window, window, qtbot, tmp_path, tiny_model):
    run(qtbot, window, window.step, p.Step)
    shown = run(qtbot, window, window.step, p.Step)
    path = tmp_path / "demo.npz"
    save(qtbot, window, path)
    other = make_window()
    run(qtbot, other, lambda: other.load_model(None, loaded=tiny_model, prompt="The cat"), p.Load)
    opened = run(qtbot, other, lambda: other.open_session(str(path)), p.OpenSession)
    assert not opened.can_step and opened.why_not
    _same_session(opened, shown)
    assert not other.commands.step_action.isEnabled()
    other.step()
    assert opened.why_not in other.status_line.status_label.text()


@pytest.mark.slow  # a whole app run in a child process
def test_open_from_the_terminal_saves_a_picture_and_a_bad_file_exits_2(window, qtbot, tmp_path):
    _session_with_two_branches(qtbot, window)
    path = tmp_path / "s.npz"
    save(qtbot, window, path)
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", HOME=str(tmp_path), XDG_CONFIG_HOME=str(tmp_path))
    shot = tmp_path / "shot.png"
    done = subprocess.run(
        [sys.executable, "-m", "app", "--open", str(path), "--step", "2", "--view", "branches", "--size", "1366x768",
         "--screenshot", str(shot)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stderr
    from PySide6.QtGui import QImage

    image = QImage(str(shot))
    assert (image.width(), image.height()) == (1366, 768)
    bad = tmp_path / "bad.npz"
    bad.write_bytes(b"nothing")
    done = subprocess.run([sys.executable, "-m", "app", "--open", str(bad), "--screenshot", str(shot)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1 and "bad.npz" in done.stderr
    done = subprocess.run([sys.executable, "-m", "app", "--open", str(path), "--step", "99", "--screenshot", str(shot)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 2 and "no step 99" in done.stderr
