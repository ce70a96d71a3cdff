"""The nnsight backend (engine.nnsight_backend) records what the hooks backend records.

nnsight's local execution runs the same traced request a remote server runs, less the transport;
``simulate=True`` also sends it through nnsight's serialization (its ``remote="local"``), the remote
path without a network. On random GPT-2, Llama (grouped key/value heads) and GraniteMoe folders every
recorded value equals the hooks backend's within float32 precision and the greedy tokens are the same.
"""

from __future__ import annotations

from dataclasses import fields

import numpy as np
import pytest

pytest.importorskip("nnsight")

from engine import SamplingSettings, Session, load_model
from engine.errors import ModelLoadError
from engine.random_model import TINY, write_random_gpt2, write_random_model
from engine.runtime import Runtime

PROMPT = "The database stores each row of a table"
FAMILIES = ("gpt2", "llama", "granitemoe")
STEPS = 4


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("nnsight")
    out = {"gpt2": write_random_gpt2(root / "gpt2", 3, n_layer=2, n_head=4, n_embd=64, n_positions=128)}
    for family in FAMILIES[1:]:
        out[family] = write_random_model(root / family, family, seed=3, **TINY[family])
    return out


@pytest.fixture(scope="module")
def loaded(folders):
    """(family, backend) -> LoadedModel, each loaded once."""
    return {(f, b): load_model(str(folders[f]), runtime=Runtime(device="cpu", backend=b)) for f in FAMILIES for b in ("hooks", "nnsight")}


def stepped(loaded_model, *, use_cache=True, steps=STEPS) -> Session:
    session = Session(loaded_model, SamplingSettings(greedy=True), use_cache=use_cache)
    session.set_prompt(PROMPT)
    for _ in range(steps):
        session.step()
    return session


def assert_same_records(a: Session, b: Session, *, skip=("forward_ms", "step_ms")):
    assert [r.chosen for r in a.records] == [r.chosen for r in b.records]
    for ra, rb in zip(a.records, b.records):
        for f in fields(ra):
            if f.name in skip:
                continue
            x, y = getattr(ra, f.name), getattr(rb, f.name)
            if isinstance(x, np.ndarray):
                assert x.shape == y.shape and x.dtype == y.dtype, f.name
                np.testing.assert_allclose(x.astype(np.float64), y.astype(np.float64), rtol=1e-5, atol=1e-6, err_msg=f.name)
            elif f.name == "kv":
                np.testing.assert_array_equal(x.key_positions, y.key_positions)
                assert (x.total_bytes, x.bytes_per_value) == (y.total_bytes, y.bytes_per_value)
            else:
                assert x == y or (x != x and y != y), f.name  # NaN draws for greedy steps


@pytest.mark.parametrize("family", FAMILIES)
def test_every_recorded_value_equals_the_hooks_backend(loaded, family):
    hooks_session, nnsight_session = stepped(loaded[family, "hooks"]), stepped(loaded[family, "nnsight"])
    assert type(loaded[family, "nnsight"].backend).__name__ == "NnsightBackend"
    assert loaded[family, "nnsight"].info.backend == "nnsight"
    assert_same_records(hooks_session, nnsight_session)
    if family == "granitemoe":  # the experts chosen, through the router's output
        assert nnsight_session.records[-1].experts is not None


@pytest.mark.parametrize("family", FAMILIES)
def test_the_remote_request_path_equals_the_hooks_backend_without_a_cache(loaded, family):
    """The serialized request (what a server runs): a full pass over the text so far at every step, the
    newest position's rows saved."""
    from engine.nnsight_backend import NnsightBackend

    local = loaded[family, "nnsight"]
    simulated = type(local)(model=local.model, tokenizer=local.tokenizer, info=local.info,
                            backend=NnsightBackend(local.backend.lm, simulate=True))
    remote_like = stepped(simulated, use_cache=True, steps=2)
    assert not remote_like.use_cache  # no cache survives a remote step
    assert [r.kv.positions for r in remote_like.records] == [0, 0]
    assert_same_records(stepped(loaded[family, "hooks"], use_cache=False, steps=2), remote_like)


def test_a_decode_step_saves_only_the_newest_position(loaded):
    """Without a cache the whole text is fed, yet what comes back is one position's rows: the
    attention pattern [1, H, 1, T], never [1, H, T, T]."""
    from engine.session import step_hooks

    lm_loaded = loaded["llama", "nnsight"]
    model, backend = lm_loaded.model, lm_loaded.backend
    import torch

    ids = torch.arange(5, 17)[None]  # 12 positions
    with torch.inference_mode():
        rec, logits, cache = backend.forward(model, 2, ids, None, use_cache=False, keep=step_hooks(model), n_new=1)
    assert cache is None and logits.shape[:2] == (1, 1)
    assert rec["blocks.1.attn.hook_pattern"].shape == (1, 4, 1, 12)
    assert rec["blocks.0.hook_resid_pre"].shape == (1, 1, 64)
    assert rec["blocks.1.hook_resid_post"].shape == (1, 1, 64)


def test_the_nnsight_backend_refuses_a_point_a_step_does_not_record(loaded):
    from engine.nnsight_backend import read_plan

    with pytest.raises(ValueError, match="hook_scale"):
        read_plan(loaded["gpt2", "nnsight"].model, 2, ["blocks.{L}.ln1.hook_scale"], 1)


@pytest.mark.parametrize("family", FAMILIES)
def test_the_command_line_export_equals_the_hooks_backends_key_by_key(folders, family, tmp_path):
    from engine.cli import main

    paths = {}
    for backend in ("hooks", "nnsight"):
        paths[backend] = tmp_path / f"{backend}.npz"
        assert main(["--model", str(folders[family]), "--backend", backend, "--device", "cpu", "--steps", "3",
                     "--prompt", PROMPT, "--export", str(paths[backend])]) == 0
    a, b = np.load(paths["hooks"]), np.load(paths["nnsight"])
    assert sorted(a.files) == sorted(b.files)
    for key in a.files:
        if key in ("pass_forward_ms", "pass_step_ms"):  # wall times
            continue
        x, y = a[key], b[key]
        assert x.shape == y.shape and x.dtype == y.dtype, key
        if x.dtype.kind == "f":
            np.testing.assert_allclose(x, y, rtol=1e-5, atol=1e-6, err_msg=key)
        else:
            np.testing.assert_array_equal(x, y, err_msg=key)


def test_remote_needs_the_nnsight_backend_and_refuses_a_local_folder(folders):
    from engine.cli import main

    with pytest.raises(ValueError, match="need --backend nnsight"):
        Runtime(remote=True)
    assert main(["--model", str(folders["llama"]), "--remote", "--steps", "1"]) == 2
    with pytest.raises(ModelLoadError, match="hub id"):
        load_model(str(folders["llama"]), runtime=Runtime(backend="nnsight", remote=True))


@pytest.mark.parametrize("family", ("gpt2", "llama"))
def test_the_embedding_basis_computed_where_the_weights_are_equals_the_local_fit(loaded, family):
    """A remote model's PCA basis is computed on the server (only [k, d] comes back): through the
    serialized request here it equals engine.projection.fit of the weights."""
    from engine.nnsight_backend import NnsightBackend
    from engine.projection import fit

    local = loaded[family, "nnsight"]
    basis = NnsightBackend(local.backend.lm, simulate=True).embedding_projection()
    expected = fit(local.model.get_input_embeddings().weight.detach().numpy())
    np.testing.assert_allclose(basis.mean, expected.mean, atol=1e-6)
    np.testing.assert_allclose(basis.components, expected.components, atol=1e-5)
    np.testing.assert_allclose(basis.explained, expected.explained, rtol=1e-5)


def test_a_remote_model_refuses_what_needs_its_weights_in_a_sentence(loaded):
    from dataclasses import replace

    from engine.errors import SessionError
    from engine.loading import LoadedModel

    local = loaded["llama", "nnsight"]
    remote = LoadedModel(model=local.model, tokenizer=local.tokenizer, backend=local.backend,
                         info=replace(local.info, remote_host="https://api.ndif.us"))
    session = Session(remote, SamplingSettings(greedy=True))
    session.set_prompt(PROMPT)
    session.step()  # the step itself runs (here: the local nnsight backend)
    with pytest.raises(SessionError, match="runs on https://api.ndif.us: its weights are not here"):
        session.query(0, 0)


def test_rows_given_as_indices_are_read_as_the_hooks_backend_reads_them(loaded):
    """A Keep may name its rows as an index tensor (engine.inside does): both backends keep the same rows."""
    import torch

    from engine import hooks
    from engine.step_backend import HooksBackend

    local = loaded["gpt2", "nnsight"]
    rows = hooks.Keep(rows=torch.tensor([1, 4, 6]))
    keep = {"blocks.{L}.attn.hook_pattern": rows, "blocks.{L}.hook_resid_post": rows, "hook_embed": hooks.ALL}
    ids = torch.arange(5, 13)[None]
    with torch.inference_mode():
        by_hooks = HooksBackend().forward(local.model, 2, ids, None, use_cache=False, keep=keep, n_new=8)[0]
        by_nnsight = local.backend.forward(local.model, 2, ids, None, use_cache=False, keep=keep, n_new=8)[0]
    assert sorted(by_hooks) == sorted(by_nnsight)
    for name, value in by_hooks.items():
        torch.testing.assert_close(by_nnsight[name], value, rtol=1e-5, atol=1e-6, msg=name)
    assert by_nnsight["blocks.1.attn.hook_pattern"].shape == (1, 4, 3, 8)
