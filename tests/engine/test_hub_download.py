"""Downloading a model by hub id, end to end, from a stand-in hub on 127.0.0.1 (tests/hub_server.py).

Each test starts its own server and its own empty cache, points huggingface_hub at them, and
stops the server when it ends. The model is a small random GPT-2 with the real GPT-2 tokenizer;
the repository also holds files a download must not fetch (Flax, TF, PyTorch pickles, ONNX).
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from engine.errors import ModelLoadError
from engine.loading import load_model
from engine.session import Session
from tests.conftest import make_tiny_folder
from tests.hub_server import CHUNK, HOLD_S, FakeHub, point_client_at

REPO = "someone/gpt2-shaped"
NEEDED = {"config.json", "generation_config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"}
NOT_NEEDED = {
    "flax_model.msgpack": b"\x00" * 4000,
    "pytorch_model.bin": b"\x01" * 3000,
    "tf_model.h5": b"\x02" * 2000,
    "onnx/decoder_model.onnx": b"\x03" * 1000,
    "README.md": b"# a GPT-2-shaped random model\n",
}


class Stop(Exception):
    """What a progress callback raises to stop a download (the window's Cancelled)."""


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> Path:
    return make_tiny_folder(tmp_path_factory.mktemp("hub-src") / "gpt2-shaped")


@pytest.fixture
def cache(tmp_path) -> Path:
    return tmp_path / "hf-home" / "hub"


@pytest.fixture
def hub(source, cache, monkeypatch):
    """The stand-in hub serving REPO, with huggingface_hub pointed at it and at an empty cache."""
    with FakeHub.from_folder(REPO, source, extra=NOT_NEEDED) as server:
        point_client_at(monkeypatch, server.endpoint, cache)
        yield server


def fetched(server: FakeHub) -> set[str]:
    """Names of the files the server was asked for (HEAD or GET)."""
    return {r.path.split("/resolve/", 1)[1].split("/", 1)[1] for r in server.requests if "/resolve/" in r.path}


def stop_at(limit: int, seen: list):
    def progress(done: int, total: int) -> None:
        seen.append((done, total))
        if done >= limit:
            raise Stop("the window is closing")

    return progress


def test_download_fetches_only_the_needed_files_then_loads_and_steps(hub, source):
    seen = []
    loaded = load_model(REPO, progress=lambda done, total: seen.append((done, total)))

    assert fetched(hub) == NEEDED
    folder = Path(loaded.info.source)
    assert {p.name for p in folder.iterdir()} == NEEDED
    assert all((folder / name).read_bytes() == (source / name).read_bytes() for name in NEEDED)
    assert loaded.info.name == REPO and not loaded.info.is_demo and loaded.info.n_layer == 2
    session = Session(loaded)
    session.set_prompt("The cat sat on the")
    record = session.step().record
    assert record.logits.shape == (50257,) and 0 <= record.chosen < 50257


def test_progress_counts_bytes_up_to_a_total_known_from_the_start(hub, source):
    seen = []
    load_model(REPO, progress=lambda done, total: seen.append((done, total)))

    total = sum((source / name).stat().st_size for name in NEEDED)
    assert len(seen) > 20  # 6.5 MB of weights in 256 KiB chunks, plus the tokenizer
    assert {t for _, t in seen} == {total}  # never a smaller total first, so the bar never goes back
    assert all(a <= b for (a, _), (b, _) in zip(seen, seen[1:]))
    assert seen[-1] == (total, total)


def test_progress_reports_stay_in_order_while_the_callback_is_busy(hub):
    """Files download on several threads; a report must not overtake one counted before it."""
    seen = []

    def slow_first(done, total):
        if not seen:
            time.sleep(0.3)  # meanwhile the other files' threads count on
        seen.append(done)

    load_model(REPO, progress=slow_first)
    assert seen == sorted(seen)


def test_a_dropped_connection_resumes_with_a_range_request(hub, source):
    hub.drop_once["model.safetensors"] = 1_000_000  # the line breaks after about 1 MB
    loaded = load_model(REPO)

    gets = hub.gets("model.safetensors")
    assert [g.range for g in gets] == [None, f"bytes={3 * CHUNK}-"]  # the 3 whole chunks received are kept
    assert (Path(loaded.info.source) / "model.safetensors").read_bytes() == (source / "model.safetensors").read_bytes()


def test_cancel_stops_the_download_and_a_later_load_finishes_it(hub, source, cache):
    """Cancelled once config.json is saved and while the weights are held by the hub after 1 MB, so
    what was finished and what was not is the same however the download's threads are timed."""
    repo = cache / ("models--" + REPO.replace("/", "--"))
    config = repo / "snapshots" / hub.commit / "config.json"
    hub.hold_at["model.safetensors"] = 1_000_000
    cancel, seen = threading.Event(), []

    def cancel_once_config_is_saved():
        deadline = time.monotonic() + HOLD_S / 2
        while not config.exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        cancel.set()  # the next progress report stops the download ...
        hub.release.set()  # ... and the weights go on, so that one comes

    def progress(done, total):
        seen.append((done, total))
        if cancel.is_set():
            raise Stop("the person cancelled")

    watcher = threading.Thread(target=cancel_once_config_is_saved)
    watcher.start()
    with pytest.raises(Stop):  # the callback's own exception, not a load failure
        load_model(REPO, progress=progress)
    watcher.join()
    requests_when_stopped = len(hub.requests)

    assert seen[-1][0] < seen[-1][1]
    assert config.exists()
    assert not (repo / "snapshots" / hub.commit / "model.safetensors").exists()
    assert not list((repo / "blobs").glob("*.incomplete"))  # no half file left behind
    loaded = load_model(REPO)
    assert len(hub.requests) > requests_when_stopped
    assert (Path(loaded.info.source) / "model.safetensors").read_bytes() == (source / "model.safetensors").read_bytes()
    small_files_fetched = [r for r in hub.requests if r.method == "GET" and r.path.endswith("/config.json")]
    assert len(small_files_fetched) == 1  # what was finished before the cancel was kept


@pytest.mark.parametrize("damage", ["truncated", "corrupt"])
def test_damaged_weights_from_the_hub_are_refused_then_fetched_again(hub, source, damage):
    good = (source / "model.safetensors").read_bytes()
    bad = good[: len(good) // 2] if damage == "truncated" else b"\xff" * 8 + good[8:]
    hub.push("model.safetensors", bad)
    message = (
        rf"The weights file model\.safetensors that the model hub sent for '{REPO}' is {damage}.*; it was removed "
        rf"from the cache, so loading '{REPO}' again downloads it afresh\."
    )
    with pytest.raises(ModelLoadError, match=message):
        load_model(REPO)
    with pytest.raises(ModelLoadError, match=message):  # fetched again, not read back from the cache
        load_model(REPO)
    assert len(hub.gets("model.safetensors")) == 2

    hub.push("model.safetensors", good)  # the hub is fixed
    loaded = load_model(REPO)
    assert (Path(loaded.info.source) / "model.safetensors").read_bytes() == good


def test_a_file_of_the_wrong_size_stops_the_download_with_its_reason(hub, source):
    hub.announce["model.safetensors"] = (source / "model.safetensors").stat().st_size - 1000
    with pytest.raises(
        ModelLoadError,
        match=rf"Downloading '{REPO}' stopped \(Consistency check failed: .*/model\.safetensors\)\); load it "
        r"again to continue: the files already downloaded are kept\.",
    ):
        load_model(REPO)
    hub.announce.clear()
    assert load_model(REPO).info.name == REPO


def test_offline_with_nothing_cached_says_how_to_get_the_model(hub):
    hub.stop()
    with pytest.raises(
        ModelLoadError,
        match=rf"'{REPO}' is not in the local model cache and the model hub cannot be reached: connect to the "
        rf"internet and load '{REPO}' once \(it is then cached\), or download the model folder on another machine",
    ):
        load_model(REPO)


def test_offline_with_a_complete_cache_loads_from_the_cache(hub):
    first = load_model(REPO)
    hub.stop()
    again = load_model(REPO)
    assert again.info.source == first.info.source


def test_offline_after_a_cancelled_download_says_it_was_interrupted(hub):
    with pytest.raises(Stop):
        load_model(REPO, progress=stop_at(2_000_000, []))
    hub.stop()
    with pytest.raises(
        ModelLoadError,
        match=rf"'{REPO}' was only partly downloaded \(the download was interrupted\) and the model hub cannot be "
        rf"reached to finish it: connect to the internet and load '{REPO}' again\.",
    ):
        load_model(REPO)


def test_a_name_the_hub_does_not_know(hub):
    with pytest.raises(ModelLoadError, match="There is no folder called 'someone/nothing-here' and the model hub has"):
        load_model("someone/nothing-here")
    assert not fetched(hub)


@pytest.mark.slow
def test_hf_endpoint_in_the_environment_reaches_the_server(hub, tmp_path):
    """The setting a classroom mirror would use, read by huggingface_hub at import in a fresh process."""
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    env.update(HF_ENDPOINT=hub.endpoint, HF_HOME=str(tmp_path / "env-home"), PYTHONPATH=str(Path(__file__).parents[2]))
    script = (
        "from engine.loading import load_model\n"
        f"print(load_model({REPO!r}).info.source)\n"
    )
    run = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.strip().startswith(str(tmp_path / "env-home" / "hub"))
    assert fetched(hub) == NEEDED
