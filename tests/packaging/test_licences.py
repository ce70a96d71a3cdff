"""packaging/licences.py: the licenses/ folder every bundle carries (the frozen app's is checked in test_frozen_app.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "packaging"))
import licences  # noqa: E402

from engine.paths import DEMO_MODEL_NAME, demo_model_dir  # noqa: E402

# What every bundle must carry, as paths inside licenses/.
REQUIRED = ("nexttoken/LICENSE", "Qt/LGPL-3", "Qt/GPL-3", "torch/LICENSE", "transformers/LICENSE",
            f"models/{DEMO_MODEL_NAME}/LICENCE-NOTE.txt", "README.txt")


def test_the_folder_holds_qt_torch_transformers_and_each_model(tmp_path):
    gpt2 = tmp_path / "gpt2"
    gpt2.mkdir()
    rows = licences.write_licences(tmp_path / "licenses", {DEMO_MODEL_NAME: demo_model_dir(), "gpt2": gpt2})
    folder = tmp_path / "licenses"
    missing = [p for p in REQUIRED if not (folder / p).is_file()]
    assert not missing, missing
    assert "GNU LESSER GENERAL PUBLIC LICENSE" in (folder / "Qt" / "LGPL-3").read_text()
    assert (folder / "models" / "gpt2" / "LICENCE-NOTE.txt").read_text().startswith("gpt2: MIT\n")
    readme = (folder / "README.txt").read_text()
    assert "model gpt2: MIT" in readme and "\ntorch " in readme and "\ntransformers " in readme
    assert len(rows) == len(readme.splitlines()) - 2


def test_a_model_of_unknown_licence_stops_the_build(tmp_path):
    stranger = tmp_path / "my-checkpoint"
    stranger.mkdir()
    with pytest.raises(ValueError, match="my-checkpoint.*no LICENSE file"):
        licences.write_licences(tmp_path / "licenses", {"my-checkpoint": stranger})
    (stranger / "LICENSE").write_text("Apache-2.0")
    licences.write_licences(tmp_path / "licenses", {"my-checkpoint": stranger})
    assert (tmp_path / "licenses" / "models" / "my-checkpoint" / "LICENSE").read_text() == "Apache-2.0"
