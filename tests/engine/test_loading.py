"""Loading: the bundled model, local folders, hub ids from the cache, and every failure's message."""

import json
import shutil
from pathlib import Path

import pytest

from engine import ModelLoadError, load_model
from engine.loading import HUB_FILES, _progress_bar_class, looks_like_path
from tests.conftest import DEMO_DIR, make_tiny_folder


def copy_model(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst


def test_default_is_the_bundled_demo(demo_model):
    info = demo_model.info
    assert info.is_demo and info.name == "gpt2-tiny-demo"
    assert (info.n_layer, info.n_head, info.d_model, info.n_positions, info.vocab_size) == (4, 4, 256, 256, 50257)
    assert "tiny demo model" in info.label
    assert demo_model.model.config._attn_implementation == "eager"
    assert next(demo_model.model.parameters()).dtype.is_floating_point
    assert (DEMO_DIR / "MODEL_CARD.md").exists()


def test_local_folder(tiny_model, tiny_dir):
    assert tiny_model.info.name == "tiny-gpt2" and not tiny_model.info.is_demo
    assert tiny_model.info.source == str(tiny_dir)


@pytest.mark.parametrize(
    "breakage, words",
    [
        ("missing", "does not exist"),
        ("no_config", "no config.json"),
        ("bad_json", "not valid JSON"),
        ("not_gpt2", "holds a bert model; nexttoken steps GPT-2 .*, the Llama family .*Qwen3, and the mixture-of-experts"),
        ("no_weights", "has no weights"),
        ("truncated", "is truncated"),
        ("bad_header", "is corrupt"),
        ("nan_weights", "NaN or infinite"),
        ("no_tokenizer", "has no tokenizer"),
        ("missing_shard", "could not be read|incomplete"),
    ],
)
def test_broken_folders_say_what_is_wrong(tmp_path, breakage, words):
    folder = make_tiny_folder(tmp_path / "model", n_layer=1)
    weights = folder / "model.safetensors"
    if breakage == "missing":
        folder = tmp_path / "nowhere"
    elif breakage == "no_config":
        (folder / "config.json").unlink()
    elif breakage == "bad_json":
        (folder / "config.json").write_text("{not json")
    elif breakage == "not_gpt2":
        config = json.loads((folder / "config.json").read_text())
        (folder / "config.json").write_text(json.dumps(config | {"model_type": "bert"}))
    elif breakage == "no_weights":
        weights.unlink()
    elif breakage == "truncated":
        data = weights.read_bytes()
        weights.write_bytes(data[: len(data) // 2])
    elif breakage == "bad_header":
        data = bytearray(weights.read_bytes())
        data[8:20] = b"\xff" * 12
        weights.write_bytes(bytes(data))
    elif breakage == "nan_weights":
        from safetensors.torch import load_file, save_file

        tensors = load_file(weights)
        tensors["transformer.h.0.mlp.c_fc.weight"][0, 0] = float("nan")
        save_file(tensors, weights, metadata={"format": "pt"})
    elif breakage == "no_tokenizer":
        (folder / "tokenizer.json").unlink()
    elif breakage == "missing_shard":
        from safetensors.torch import load_file, save_file

        tensors = load_file(weights)
        save_file({k: v for k, v in tensors.items() if "h.0.mlp" not in k}, weights, metadata={"format": "pt"})
    with pytest.raises(ModelLoadError, match=words):
        load_model(str(folder))


def test_tokenizer_that_does_not_match_the_model(tmp_path):
    folder = make_tiny_folder(tmp_path / "small-vocab", n_layer=1, vocab_size=1000)
    with pytest.raises(ModelLoadError, match="does not match the model: it has 50,257 tokens"):
        load_model(str(folder))


def test_a_file_is_not_a_folder(tmp_path):
    path = tmp_path / "weights.txt"
    path.write_text("x")
    with pytest.raises(ModelLoadError, match="is a file"):
        load_model(str(path))


def test_path_or_hub_id():
    assert looks_like_path("./models/x") and looks_like_path("/abs/path") and looks_like_path("~/m")
    assert not looks_like_path("gpt2") and not looks_like_path("openai-community/gpt2")


def hub_cache(tmp_path: Path, repo_id: str, source: Path) -> Path:
    """Lay a model out the way huggingface_hub caches a download: models--org--name/snapshots/<rev>."""
    cache = tmp_path / "hub"
    repo = cache / ("models--" + repo_id.replace("/", "--"))
    revision = "0123456789abcdef0123456789abcdef01234567"
    shutil.copytree(source, repo / "snapshots" / revision)
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(revision)
    return cache


def test_hub_id_loads_from_the_local_cache_offline(tmp_path, tiny_dir, monkeypatch):
    cache = hub_cache(tmp_path, "someone/tiny-gpt2", tiny_dir)
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(cache))
    loaded = load_model("someone/tiny-gpt2")
    assert loaded.info.name == "someone/tiny-gpt2" and loaded.info.n_layer == 2
    assert str(cache) in loaded.info.source


def test_hub_id_offline_and_not_cached_says_how_to_get_it(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty"))
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(tmp_path / "empty"))
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", True)
    with pytest.raises(ModelLoadError, match="'gpt2' is not in the local model cache.*: connect to the internet"):
        load_model("gpt2")


def test_invalid_hub_id(tmp_path, monkeypatch):
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(tmp_path / "empty"))
    with pytest.raises(ModelLoadError, match="neither an existing folder nor a valid model hub id|not in the local"):
        load_model("bad id with spaces")


def test_download_fetches_only_what_is_needed():
    import fnmatch

    gpt2_repo = ["config.json", "model.safetensors", "tokenizer.json", "vocab.json", "merges.txt",
                 "generation_config.json", "tokenizer_config.json", "pytorch_model.bin", "tf_model.h5",
                 "flax_model.msgpack", "rust_model.ot", "onnx/decoder_model.onnx", "64-8bits.tflite"]
    wanted = [f for f in gpt2_repo if any(fnmatch.fnmatch(f, p) for p in HUB_FILES)]
    assert wanted == ["config.json", "model.safetensors", "tokenizer.json", "vocab.json", "merges.txt",
                      "generation_config.json", "tokenizer_config.json"]


def test_progress_bar_reports_bytes_and_prints_nothing(capsys):
    seen = []
    bar_class = _progress_bar_class(lambda done, total: seen.append((done, total)))
    bar = bar_class(total=1000, unit="B", name="huggingface_hub.snapshot_download")
    bar.update(400)
    bar.update(600)
    bar.close()
    other = bar_class(total=3, name="something else")
    other.update(1)
    assert seen == [(400, 1000), (1000, 1000)]
    assert capsys.readouterr() == ("", "")


def test_a_bundled_name_loads_offline_before_the_hub(tmp_path, tiny_dir, monkeypatch):
    """A classroom build ships gpt2 in resources/models/gpt2: `--model gpt2` must not need the hub."""
    from engine import paths

    resources = tmp_path / "resources"
    shutil.copytree(DEMO_DIR, resources / "models" / paths.DEMO_MODEL_NAME)
    shutil.copytree(tiny_dir, resources / "models" / "gpt2")
    monkeypatch.setattr(paths, "resources_dir", lambda: resources)
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(tmp_path / "empty"))
    loaded = load_model("gpt2")
    assert loaded.info.name == "gpt2" and loaded.info.n_layer == 2 and not loaded.info.is_demo
    assert [d.name for d in paths.bundled_model_dirs()] == [paths.DEMO_MODEL_NAME, "gpt2"]


def test_all_finite_finds_every_non_finite_value_and_no_false_one():
    import torch

    from engine.loading import all_finite

    big = torch.full((1000,), torch.finfo(torch.float32).max)  # finite, its float32 sum would overflow
    assert all_finite([torch.zeros(3), big, -big])
    for bad in (float("nan"), float("inf"), float("-inf")):
        t = torch.ones(5, 7)
        t[3, 2] = bad
        assert not all_finite([torch.zeros(2), t]), bad
    both = torch.tensor([float("inf"), float("-inf")])  # a sum of NaN: still found
    assert not all_finite([both])
    assert not all_finite([torch.tensor([float("nan")], dtype=torch.float16)])
