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


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    """licenses/ as every bundle carries it (the demo model only), and README.txt's lines."""
    folder = tmp_path_factory.mktemp("l") / "licenses"
    licences.write_licences(folder, {DEMO_MODEL_NAME: demo_model_dir()})
    lines = (folder / "README.txt").read_text(encoding="utf-8").splitlines()
    return folder, dict(line.split(": ", 1) for line in lines[2:])


def test_every_bundled_distribution_has_its_folder_whole_expression_and_every_text(written):
    from importlib import metadata

    folder, readme = written
    for dist in licences.runtime_distributions():
        name, meta = dist.metadata["Name"], dist.metadata
        expression = readme[f"{name} {dist.version}"]
        declared = (meta.get("License-Expression") or meta.get("License") or "").strip()
        if declared and "\n" not in declared:
            assert expression == declared, name  # whole, never cut
        assert expression and not expression.endswith(" "), name
        copied = {f.read_bytes() for f in (folder / name).rglob("*") if f.is_file()}
        assert copied, f"{name}: no licence text"
        lost = [inner for source, inner in licences.licence_files(dist) if source.read_bytes() not in copied]
        assert not lost, f"{name}: texts not copied: {lost}"
    torch = metadata.distribution("torch")
    assert readme[f"torch {torch.version}"].endswith("AND BSL-1.0 AND MIT")


def test_texts_of_one_name_in_two_folders_are_both_kept(tmp_path, monkeypatch):
    info = tmp_path / "pkg-1.0.dist-info"
    for inner, text in (("LICENSE", "top"), ("licenses/LICENSE", "other"), ("licenses/a/LICENSE", "a"),
                        ("licenses/b/LICENSE", "b"), ("licenses/c/LICENSE", "a")):
        (info / inner).parent.mkdir(parents=True, exist_ok=True)
        (info / inner).write_text(text)

    class Dist:
        files = [Path(info.name, p) for p in ("LICENSE", "licenses/LICENSE", "licenses/a/LICENSE", "licenses/b/LICENSE",
                                              "licenses/c/LICENSE", "RECORD")]
        metadata, version = {"Name": "pkg"}, "1.0"

        def locate_file(self, f):
            return tmp_path / f

    copied = licences.write_distribution(Dist(), tmp_path / "out")
    assert sorted(p.read_text() for p in copied) == ["a", "a", "b", "other", "top"]
    assert (tmp_path / "out" / "a" / "LICENSE").read_text() == "a" and (tmp_path / "out" / "c" / "LICENSE").is_file()


def test_a_wheel_without_texts_gets_the_named_ones_or_stops_the_build(tmp_path):
    class Dist:
        files, version = [], "0.1"

        def __init__(self, name):
            self.metadata = {"Name": name, "Classifier": None}

    class Meta(dict):
        def get_all(self, key):
            return ["License :: OSI Approved :: Apache Software License"]

    tokenizers = Dist("tokenizers")
    tokenizers.metadata = Meta(Name="tokenizers")
    copied = licences.write_distribution(tokenizers, tmp_path / "tokenizers")
    assert (tmp_path / "tokenizers" / "Apache-2.0").read_text().startswith("\n                                 Apache License")
    assert "Apache Software License" in copied[0].read_text()
    stranger = Dist("stranger")
    stranger.metadata = Meta(Name="stranger")
    with pytest.raises(ValueError, match="stranger 0.1 is bundled but carries no licence file"):
        licences.write_distribution(stranger, tmp_path / "stranger")
