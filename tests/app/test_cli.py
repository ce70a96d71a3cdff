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
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", HOME=str(tmp_path), XDG_CONFIG_HOME=str(tmp_path))
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
