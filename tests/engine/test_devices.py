"""--device and --dtype (engine.devices): a GPU PyTorch does not see is refused in a sentence, auto
picks what it sees, and a bfloat16 model's values reach the window in float32 (the float16 block
outputs stay float16) with the KV cache counting 2 bytes a value, through both backends, the Inside
view's recomputation and the export. No GPU was lent to this task: CUDA and MPS themselves never ran."""

from __future__ import annotations

import numpy as np
import pytest

from engine import SamplingSettings, Session, load_model
from engine.errors import ModelLoadError
from engine.random_model import TINY, write_random_model
from engine.runtime import Runtime

PROMPT = "The database stores each row of a table"


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("devices")
    return {"llama": write_random_model(root / "llama", "llama", seed=3, **TINY["llama"]),
            "gpt2": write_random_model(root / "gpt2", "gpt2", seed=3, n_layer=2, n_head=2, n_embd=32, n_positions=64)}


def stepped(loaded_model, steps=2) -> Session:
    session = Session(loaded_model, SamplingSettings(greedy=True))
    session.set_prompt(PROMPT)
    for _ in range(steps):
        session.step()
    return session


def test_device_cuda_is_refused_where_torch_sees_no_gpu(folders, monkeypatch, capsys):
    import torch

    from engine.cli import main

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(ModelLoadError, match="sees no CUDA GPU"):
        load_model(str(folders["gpt2"]), runtime=Runtime(device="cuda"))
    assert main(["--model", str(folders["gpt2"]), "--device", "cuda", "--steps", "1"]) == 2
    assert "--device cuda: PyTorch" in capsys.readouterr().err


def test_auto_picks_the_cpu_where_there_is_no_gpu(monkeypatch):
    import torch

    from engine.devices import resolve

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    assert resolve("auto") == (torch.device("cpu"), torch.float32)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda: True)
    assert resolve("auto") == (torch.device("cuda"), torch.bfloat16)
    assert resolve("cuda", "float16") == (torch.device("cuda"), torch.float16)


@pytest.mark.parametrize("backend", ("hooks", "nnsight"))
def test_bfloat16_weights_reach_the_record_in_float32_and_the_cache_counts_two_bytes(folders, backend):
    if backend == "nnsight":
        pytest.importorskip("nnsight")
    loaded16 = load_model(str(folders["llama"]), runtime=Runtime(device="cpu", dtype="bfloat16", backend=backend))
    assert (loaded16.info.dtype, loaded16.info.device) == ("bfloat16", "cpu")
    assert loaded16.info.runs_on.startswith("cpu, bfloat16, ")
    session = stepped(loaded16, steps=2)
    record = session.records[-1]
    assert record.resid.dtype == np.float32 and record.logits.dtype == np.float32
    assert record.attn_out.dtype == np.float16
    kv = record.kv
    assert kv.bytes_per_value == 2
    assert kv.total_bytes == 2 * 2 * kv.positions * kv.width * 2  # 2 x layers x positions x width x 2 B




@pytest.mark.parametrize("family", ("gpt2", "llama"))
def test_the_inside_view_and_the_export_recompute_in_bfloat16(folders, family, tmp_path):
    from engine.cli import main
    from engine.inside import inside

    session = stepped(load_model(str(folders[family]), runtime=Runtime(device="cpu", dtype="bfloat16")))
    path = inside(session)
    assert path.resid_post.dtype == np.float32 and path.keys.dtype == np.float32
    assert np.isfinite(path.lens_logits).all()
    np.testing.assert_allclose(path.final_hidden, session.records[-1].final_hidden, rtol=0.05, atol=0.05)
    out = tmp_path / "bf16.npz"
    assert main(["--model", str(folders[family]), "--dtype", "bfloat16", "--device", "cpu", "--steps", "2", "--export", str(out)]) == 0
    assert np.load(out)["q_1"].dtype == np.float32
