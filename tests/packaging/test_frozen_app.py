"""The frozen app (PyInstaller, packaging/) starts, steps the demo model and the bundled SmolLM2 and draws, with no missing module.

Slow: the first run builds dist/nexttoken/ (about 4-5 minutes on 2 cores); later runs reuse it while
packaging/build.py --if-changed finds sources, packages and options unchanged.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
APP_DIR = ROOT / "dist" / "nexttoken"
EXE = APP_DIR / ("nexttoken.exe" if sys.platform == "win32" else "nexttoken")
MISSING_MODULE = ("No module named", "ModuleNotFoundError")
BUILD_TIMEOUT_S = 40 * 60
SMOKE_TIMEOUT_S = 3 * 60  # the smoke test takes ~10 s; a hang should fail fast

sys.path.insert(0, str(ROOT / "packaging"))
from prune import GPU_LIBRARY  # noqa: E402


@pytest.fixture(scope="module")
def frozen_app() -> Path:
    """dist/nexttoken/, built by packaging/build.py unless the last build is still current."""
    pytest.importorskip("PyInstaller", reason="install the packaging extra: pip install -e .[packaging]")
    build = subprocess.run(
        [sys.executable, str(ROOT / "packaging" / "build.py"), "--if-changed"],
        cwd=ROOT, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S,
    )
    assert build.returncode == 0, f"build failed:\n{build.stdout[-5000:]}\n{build.stderr[-5000:]}"
    print(build.stdout[-2000:])  # shown with -s or on failure: where, how big, how long
    return APP_DIR


SMOLLM2 = ("--model", "SmolLM2-135M-Instruct", "--prompt", "The capital of France is", "--steps", "1")


def smoke_test(env_extra: dict[str, str], *options: str, **kwargs) -> subprocess.CompletedProcess:
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen", "HF_HUB_OFFLINE": "1", **env_extra}
    env.pop("PYTHONPATH", None)  # the frozen app must find everything inside itself
    return subprocess.run([str(EXE), "--smoke-test", *options], env=env, timeout=SMOKE_TIMEOUT_S, **kwargs)


def summary_line(stdout: str) -> dict:
    lines = [line for line in stdout.splitlines() if line.startswith("{")]
    assert lines, f"no JSON summary in the output:\n{stdout[-3000:]}"
    return json.loads(lines[-1])


def test_frozen_smoke_test_passes(frozen_app):
    run = smoke_test({}, capture_output=True, text=True)
    output = run.stdout + run.stderr
    assert run.returncode == 0, output[-5000:]
    assert not [m for m in MISSING_MODULE if m in output], output[-5000:]
    assert summary_line(run.stdout)["ok"] is True
    # the bundled SmolLM2-135M-Instruct, by name, offline: its greedy token after the prompt
    run = smoke_test({}, *SMOLLM2, capture_output=True, text=True)
    assert run.returncode == 0, (run.stdout + run.stderr)[-5000:]
    summary = summary_line(run.stdout)
    assert (summary["ok"], summary["model"], summary["greedy"]) == (True, "SmolLM2-135M-Instruct", "␣Paris"), summary


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="closes fds 1 and 2; log dir via XDG_STATE_HOME")
def test_frozen_app_without_stdout_or_stderr_writes_its_log(frozen_app, tmp_path):
    # With fds 1 and 2 closed, Python starts with sys.stdout = sys.stderr = None, as in a windowed build.
    def close_output():
        os.close(1)
        os.close(2)

    run = smoke_test({"XDG_STATE_HOME": str(tmp_path)}, stdin=subprocess.DEVNULL, preexec_fn=close_output)
    log = (tmp_path / "nexttoken" / "log" / "nexttoken.log").read_text(encoding="utf-8")
    assert run.returncode == 0, log[-5000:]
    assert "started (frozen" in log
    assert not [m for m in MISSING_MODULE if m in log], log[-5000:]


def test_bundle_holds_the_demo_model_smollm2_and_no_gpu_libraries(frozen_app):
    internal = frozen_app / "_internal"
    assert (internal / "resources" / "models" / "gpt2-tiny-demo" / "config.json").is_file()
    assert (internal / "resources" / "icons" / "nexttoken.png").is_file()
    smollm2 = internal / "resources" / "models" / "SmolLM2-135M-Instruct"
    assert json.loads((smollm2 / "generation_config.json").read_text())["temperature"] == 0.2
    assert {"config.json", "model.safetensors", "tokenizer.json", "LICENSE", "MODEL_CARD.md"} <= {f.name for f in smollm2.iterdir()}
    for text in ("LICENSE", "MODEL_CARD.md"):
        assert (internal / "licenses" / "models" / "SmolLM2-135M-Instruct" / text).is_file()
    assert (internal / "defaults.conf").read_text().startswith("# nexttoken's defaults")
    gpu = [str(p.relative_to(internal)) for p in internal.rglob("*") if GPU_LIBRARY.search(p.name.lower())]
    assert not gpu, f"GPU libraries in the bundle: {gpu[:10]}"


def test_bundle_carries_licenses_and_leaves_out_the_gtk_theme_and_the_font_libraries(frozen_app):
    from tests.packaging.test_licences import REQUIRED

    internal = frozen_app / "_internal"
    missing = [p for p in REQUIRED if not (internal / "licenses" / p).is_file()]
    assert not missing, f"licenses/ lacks {missing}"
    assert "Qt 6: LGPL-3.0-only" in (internal / "licenses" / "README.txt").read_text()
    # libqgtk3 aborts against the bundled GLib on newer GNOME; fontconfig and freetype come from the system.
    left_in = [p.name for p in internal.rglob("*") if p.name == "libqgtk3.so" or p.name.startswith(("libfontconfig.so",
                                                                                                     "libfreetype.so"))]
    assert not left_in, left_in
