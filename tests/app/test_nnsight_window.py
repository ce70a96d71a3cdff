"""``nexttoken --backend nnsight --model <random Llama folder> --steps 5`` steps in the window: a real
run of ``main`` in a child process (the engine in its own process, as by default), offscreen; the
Model menu and the model label say where the model runs and what records its steps."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("nnsight")

from engine.random_model import TINY, write_random_model

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = """
import json, sys
from app import window as window_mod
from app.main import main

windows = []

class Recorded(window_mod.MainWindow):
    def __init__(self, *args, **kw):
        super().__init__(*args, **kw)
        windows.append(self)

window_mod.MainWindow = Recorded
code = main(sys.argv[1:])
(window,) = windows
result = window.state.result
print(json.dumps(dict(
    code=code, backend=result.info.backend, steps=len(result.records), runs_on=window.commands.runs_on_action.text(),
    nnsight_ticked=window.commands.nnsight_action.isChecked(), tooltip=window.status_line.model_label.toolTip(),
    runtime=window.controller.runtime.backend,
)))
"""


@pytest.mark.slow  # over 5 s (a whole app run)
def test_the_nnsight_backend_steps_in_the_window(tmp_path):
    folder = write_random_model(tmp_path / "tiny-llama", "llama", seed=3, **TINY["llama"])
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", HF_HUB_OFFLINE="1", XDG_CONFIG_HOME=str(tmp_path),
               HOME=str(tmp_path), PYTHONPATH=str(ROOT))
    argv = ["--backend", "nnsight", "--model", str(folder), "--steps", "5", "--prompt", "The database stores",
            "--size", "1280x720", "--screenshot", str(tmp_path / "shot.png")]
    done = subprocess.run([sys.executable, "-c", SCRIPT, *argv], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["code"] == 0, seen
    assert seen["backend"] == seen["runtime"] == "nnsight", seen  # the engine process loaded it through nnsight
    assert seen["steps"] == 5, seen
    assert seen["runs_on"] == "Runs on: cpu, float32, nnsight's tracing", seen
    assert seen["nnsight_ticked"] is True
    assert "runs on cpu, float32, nnsight's tracing" in seen["tooltip"]


def test_the_window_refuses_a_remote_run_without_the_nnsight_backend(capsys):
    from app.main import main

    assert main(["--remote", "--model", "meta-llama/Llama-3.1-70B"]) == 2
    assert "need --backend nnsight" in capsys.readouterr().err
