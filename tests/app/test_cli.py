"""The command line: ``--smoke-test`` and ``--screenshot`` run the real window and worker, then exit."""

from __future__ import annotations

import pytest

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow  # over 5 s (a child process or a whole app run)
def test_smoke_test_with_screenshot_prints_json_and_saves_a_png(tmp_path):
    shot = tmp_path / "shot.png"
    temp = tmp_path / "temp"
    temp.mkdir()
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", HOME=str(tmp_path), XDG_CONFIG_HOME=str(tmp_path), TMPDIR=str(temp))
    env.pop("TORCHINDUCTOR_CACHE_DIR", None)
    done = subprocess.run(
        [sys.executable, "-m", "app", "--smoke-test", "--screenshot", str(shot)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    assert summary["ok"] is True
    assert summary["model"] == "gpt2-tiny-demo"
    assert summary["steps"] == 3 and len(summary["tokens"]) == 3
    assert summary["window"] == [1600, 1000]
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not list(temp.iterdir()), "left in the temporary directory: no torchinductor_<user> folder, nothing"
    # --model, --prompt and --steps choose what it loads and runs (the clean-root test's " Paris");
    # "greedy" is the last step's most likely token, as a greedy session picks it.
    from engine import SamplingSettings, Session, load_model
    from tests.conftest import make_tiny_folder

    folder = make_tiny_folder(tmp_path / "tiny-model", seed=3)
    done = subprocess.run(
        [sys.executable, "-m", "app", "--engine", "thread", "--smoke-test", "--model", str(folder),
         "--prompt", "The capital of France is", "--steps", "1"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    session = Session(load_model(str(folder)), SamplingSettings(greedy=True))
    session.set_prompt("The capital of France is")
    trace = session.step()
    assert (summary["model"], summary["steps"]) == ("tiny-model", 1)
    assert summary["greedy"] == trace.chosen_piece and summary["greedy"] != ""


def _refused(capsys, argv) -> str:
    import pytest

    from app.window.main import parse_args

    with pytest.raises(SystemExit) as exit_:
        parse_args(argv)
    assert exit_.value.code == 2
    return capsys.readouterr().err


def test_bad_flags_are_refused_naming_the_flag(capsys):
    from app.window.main import parse_args

    assert parse_args(["--size", "1280x720", "--projector"]).size == (1280, 720)
    err = _refused(capsys, ["--steps", "-3"])
    assert "--steps" in err and "0 or more" in err
    err = _refused(capsys, ["--size", "800x600"])
    assert "--size" in err and "smallest supported window, 1024x700" in err
    assert "--size" in _refused(capsys, ["--size", "big"])
    assert "unrecognized arguments: --width" in _refused(capsys, ["--width", "100"])  # the old flag is gone
    assert "--siz" in _refused(capsys, ["--siz", "1280x720"])  # no abbreviations
    assert "not allowed with argument --prompt" in _refused(capsys, ["--prompt", "x", "--prompt-file", "p.txt"])


def test_a_prompt_file_that_cannot_be_read_ends_before_any_window(capsys, tmp_path):
    from app.window.main import main

    assert main(["--prompt-file", str(tmp_path / "missing.txt")]) == 2
    assert capsys.readouterr().err.startswith("error: Cannot read the prompt file")


def test_version_comes_from_the_package_metadata(capsys):
    import pytest

    from app.logic.about import version
    from app.window.main import parse_args

    with pytest.raises(SystemExit):
        parse_args(["--version"])
    assert capsys.readouterr().out.strip() == f"nexttoken {version()}" and version() == "0.1.0"
