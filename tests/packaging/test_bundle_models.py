"""What goes into the frozen bundle: extra model folders (packaging/bundle_models.py), pruning rules
(packaging/prune.py) and how the app lists bundled models (engine.paths.bundled_model_dirs)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from engine import paths
from engine.errors import ModelLoadError
from tests.conftest import make_tiny_folder

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "packaging"))
import bundle_models  # noqa: E402
from prune import is_unneeded  # noqa: E402


@pytest.fixture(scope="module")
def tiny_folder(tmp_path_factory) -> Path:
    folder = make_tiny_folder(tmp_path_factory.mktemp("m") / "my-gpt2")
    (folder / "tf_model.h5").write_bytes(b"tf weights the app cannot read")
    (folder / "README.md").write_text("model card")
    return folder


def test_bundle_takes_only_the_files_a_hub_download_would(tiny_folder):
    names = {f.name for f in bundle_models.model_files(tiny_folder)}
    assert {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"} <= names
    assert "tf_model.h5" not in names and "README.md" not in names
    datas = bundle_models.model_datas([tiny_folder])
    assert {dest for _, dest in datas} == {"resources/models/my-gpt2"}


def test_hub_cache_snapshot_is_named_after_its_repository(tmp_path):
    snapshot = tmp_path / "hub" / "models--openai-community--gpt2" / "snapshots" / "abc123"
    snapshot.mkdir(parents=True)
    assert bundle_models.bundle_name(snapshot) == "gpt2"
    assert bundle_models.bundle_name(tmp_path / "distilgpt2") == "distilgpt2"


def test_bad_or_clashing_folders_are_refused_before_building(tiny_folder, tmp_path):
    with pytest.raises(ModelLoadError):
        bundle_models.check_model_dirs([tmp_path / "missing"])
    with pytest.raises(ValueError, match="Two bundled models"):
        bundle_models.check_model_dirs([tiny_folder, tiny_folder])
    with pytest.raises(ValueError, match="gpt2-tiny-demo"):
        bundle_models.check_model_dirs([paths.demo_model_dir()])


def test_bundled_model_dirs_lists_the_demo_first(tmp_path, monkeypatch):
    models = tmp_path / "resources" / "models"
    for name in ("zeta", "Alpha", paths.DEMO_MODEL_NAME):
        (models / name).mkdir(parents=True)
        (models / name / "config.json").write_text("{}")
    (models / "not-a-model").mkdir()
    monkeypatch.setattr(sys, "_MEIPASS", str(tmp_path), raising=False)  # as in a frozen build
    assert [d.name for d in paths.bundled_model_dirs()] == [paths.DEMO_MODEL_NAME, "Alpha", "zeta"]


def test_a_bundle_opens_its_own_smollm2_first(tmp_path, monkeypatch):
    bundled = tmp_path / "resources" / "models" / paths.OFFLINE_MODEL_NAME
    monkeypatch.setattr(sys, "_MEIPASS", str(tmp_path), raising=False)  # as in a frozen build
    assert paths.offline_model() is None  # nothing bundled, nothing fetched beside it
    bundled.mkdir(parents=True)
    (bundled / "config.json").write_text("{}")
    assert paths.offline_model() == bundled
    assert bundled in paths.bundled_model_dirs()  # also a bundled model: --model SmolLM2-135M-Instruct opens it


def test_the_card_and_licence_travel_with_a_bundled_model(tiny_folder):
    (tiny_folder / "LICENSE").write_text("Apache-2.0")
    (tiny_folder / "MODEL_CARD.md").write_text("# card")
    names = {f.name for f in bundle_models.model_files(tiny_folder)}
    assert {"LICENSE", "MODEL_CARD.md"} <= names


def test_source_checkout_bundles_the_demo_and_the_icon():
    assert paths.bundled_model_dirs()[0] == paths.demo_model_dir()
    assert paths.app_icon_path().is_file()


@pytest.mark.parametrize(
    "dest, dropped",
    [
        ("torch/bin/test_api", True),
        ("torch/bin/protoc-3.13.0.0", True),
        ("torch/bin/torch_shm_manager", False),  # import torch needs it
        ("torch/test/Dict_test", True),
        ("torch/lib/libtorchbind_test.so", True),
        ("torch/lib/libtorch_cpu.so", False),
        ("libcudart.so", True),
        ("cudart64_12.dll", True),
        ("torch/_inductor/codegen/cuda/cuda_kernel.py", False),
        ("torch/cuda/__init__.py", False),
        ("PySide6/Qt/translations/qtbase_de.qm", True),
        ("PySide6\\translations\\qtbase_de.qm", True),
        ("PySide6/Qt/plugins/platforms/libqeglfs.so", True),
        ("PySide6/Qt/plugins/platforms/libqxcb.so", False),
        ("PySide6/Qt/plugins/platforms/libqoffscreen.so", False),
        ("PySide6/plugins/platforms/qwindows.dll", False),
        ("resources/models/gpt2-tiny-demo/config.json", False),
    ],
)
def test_prune_rules(dest, dropped):
    assert is_unneeded(dest) is dropped
