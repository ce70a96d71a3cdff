"""The classroom variant: GPT-2 small stored as float16, bundled, opened by default, with its licence note.

The workflow downloads the real openai-community/gpt2 (packaging/fetch_gpt2.py); here a random
GPT-2-small-shaped folder (engine/random_model.py) goes the same way: float16 conversion, then
``packaging/build.py --classroom`` into dist/classroom/ (its own work folder build/classroom/, so the
plain build stays current). Slow: the random model about 1 min; the build, like test_frozen_app.py's,
about 5 min on 2 idle cores (reused while ``--if-changed`` finds it current).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from app.logic.site_defaults import read_site_defaults

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
MODEL = ROOT / "build" / "classroom-model" / "gpt2"  # kept between runs: the build's fingerprint reads it
DIST, WORK = ROOT / "dist" / "classroom", ROOT / "build" / "classroom"
GPT2_SMALL_PARAMETERS = 124_439_808
BUILD_TIMEOUT_S = 40 * 60

sys.path.insert(0, str(ROOT / "packaging"))
import fetch_gpt2  # noqa: E402


@pytest.fixture(scope="module")
def float16_gpt2() -> Path:
    """A random GPT-2 small in float16, as fetch_gpt2.py leaves the real one (written once)."""
    if not (MODEL / "model.safetensors").is_file():
        from engine.random_model import write_random_gpt2

        full = write_random_gpt2(MODEL.parent / "float32")
        MODEL.mkdir(parents=True, exist_ok=True)
        for f in full.iterdir():
            if f.suffix != ".safetensors":
                (MODEL / f.name).write_bytes(f.read_bytes())
        fetch_gpt2.to_float16(full / "model.safetensors", MODEL / "model.safetensors")
        shutil.rmtree(full)
    return MODEL


def test_float16_halves_the_weights_and_the_sha256_check_refuses_other_files(float16_gpt2, tmp_path):
    from safetensors import safe_open

    size = (float16_gpt2 / "model.safetensors").stat().st_size
    assert (float16_gpt2 / "model.safetensors").stat().st_mode & 0o044 == 0o044  # readable by every user
    assert abs(size - 2 * GPT2_SMALL_PARAMETERS) < 0.02 * size, f"{size / 2**20:.0f} MB"  # about 237 MiB
    with safe_open(str(float16_gpt2 / "model.safetensors"), "pt") as f:
        assert {str(f.get_slice(k).get_dtype()) for k in f.keys()} == {"F16"}
    with pytest.raises(ValueError, match="sha256"):
        fetch_gpt2.check_sha256(float16_gpt2 / "config.json", fetch_gpt2.WEIGHTS_SHA256)
    from engine.loading import check_folder

    check_folder(float16_gpt2)  # loads as GPT-2, as the build's preflight asks


def test_classroom_build_bundles_gpt2_opens_it_by_default_and_notes_its_licence(float16_gpt2):
    pytest.importorskip("PyInstaller", reason="install the packaging extra: pip install -e .[packaging]")
    build = subprocess.run(
        [sys.executable, str(ROOT / "packaging" / "build.py"), "--if-changed", "--classroom", str(float16_gpt2),
         "--dist", str(DIST), "--work", str(WORK)],
        cwd=ROOT, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S,
    )
    assert build.returncode == 0, f"build failed:\n{build.stdout[-5000:]}\n{build.stderr[-5000:]}"
    print(build.stdout[-2000:])
    internal = DIST / "nexttoken" / "_internal"
    bundled = internal / "resources" / "models" / "gpt2" / "model.safetensors"
    assert bundled.stat().st_size == (float16_gpt2 / "model.safetensors").stat().st_size
    assert read_site_defaults([internal / "defaults.conf"]).model == "gpt2"
    assert (internal / "resources" / "models" / "SmolLM2-135M-Instruct" / "config.json").is_file()  # beside it
    note = (internal / "licenses" / "models" / "gpt2" / "LICENCE-NOTE.txt").read_text()
    assert note.startswith("gpt2: MIT\n") and "OpenAI" in note
    total = sum(f.lstat().st_size for f in (DIST / "nexttoken").rglob("*") if f.is_file() or f.is_symlink())
    print(f"classroom folder: {total / 2**20:,.0f} MB, of which GPT-2 small {bundled.stat().st_size / 2**20:,.0f} MB")
    assert total < 1500 * 2**20  # the plain folder (with SmolLM2) plus ~240 MB of weights
