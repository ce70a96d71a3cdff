"""``python -m engine --export`` files (a session file with the current branch's distributions and
path): the path keys for every step, the README's recipe that reproduces each sampled token from
``probs`` and ``draw_u``, malformed path keys refused; ``write_npz`` writes atomically."""

import numpy as np
import pytest

from engine import ExportError, SamplingSettings, Session, export
from engine.export import write_npz
from engine.session_read import read_session
from engine.session_write import session_arrays


def write(tmp_path, arrays, **changes):
    data = {k: v for k, v in (dict(arrays) | changes).items() if v is not None}
    path = tmp_path / "s.npz"
    np.savez(path, **data)
    return path


@pytest.fixture(scope="module")
def arrays(demo_model):
    session = Session(demo_model, SamplingSettings(greedy=True))
    session.set_prompt("The cat sat on the")
    for _ in range(3):
        session.step()
    return session_arrays(session, inside=True)


def test_path_keys_for_every_step(tmp_path, arrays):
    """The Inside keys (values checked against the model in tests/engine/test_inside.py)."""
    data = read_session(write_npz(arrays, tmp_path / "path")).arrays
    steps, prompt_len = len(data["chosen"]), int(data["prompt_len"])
    logits = data["pass_logits"][data["node_pass"][data["path"]]]
    for s in range(steps):
        for key in ("q", "k", "v", "z"):
            assert data[f"{key}_{s}"].shape == (4, 4, 64) and data[f"{key}_{s}"].dtype == np.float32
        assert data[f"scores_{s}"].shape == (4, 4, prompt_len + s)
        for key in ("attn_out", "resid_mid", "mlp_out"):
            assert data[f"{key}_{s}"].shape == (4, 256)
        assert data[f"mlp_pre_{s}"].shape == data[f"mlp_post_{s}"].shape == (4, 1024)
        assert data[f"lens_ids_{s}"].dtype == np.int64 and data[f"lens_logits_{s}"].shape == (5, 10)
        top = np.argsort(-logits[s], kind="stable")[:10]
        np.testing.assert_array_equal(data[f"lens_ids_{s}"][-1], top)
    assert data["final_hidden"].shape == (steps, 256)


def test_the_export_holds_each_steps_logit_attribution(tmp_path, arrays):
    """--export's attr_* arrays: per step, the parts of the chosen token's logit, which sum to the logit
    the step computed (the parts themselves are checked against TransformerLens in tests/engine/test_attribution*)."""
    data = read_session(write_npz(arrays, tmp_path / "attr")).arrays
    logits = data["pass_logits"][data["node_pass"][data["path"]]]
    other = data["attr_other"]
    assert other.shape == (len(data["chosen"]), 5) and other.dtype == np.float32
    for s, chosen in enumerate(data["chosen"]):
        heads, attn, mlp = data[f"attr_heads_{s}"], data[f"attr_attn_{s}"], data[f"attr_mlp_{s}"]
        assert heads.shape == (4, 4) and attn.shape == mlp.shape == (4,)
        np.testing.assert_allclose(other[s, 0], logits[s, chosen], rtol=1e-5)  # the logit the step computed
        parts = attn.sum() + mlp.sum() + other[s, 1:].sum()
        assert abs(parts - other[s, 0]) <= 1e-4 * (np.abs(attn).sum() + np.abs(mlp).sum() + np.abs(other[s, 1:]).sum())


@pytest.mark.parametrize(
    "changes, words",
    [
        ({"probs": np.zeros((2, 50257), dtype=np.float32)}, "'probs' should be float32 \\[3, 50257\\]"),
        ({"q_1": None}, "'q_1' is missing"),
        ({"lens_ids_2": np.zeros((5, 10), dtype=np.float32)}, "'lens_ids_2' should be int64"),
        ({"scores_2": np.zeros((4, 4, 6), dtype=np.float32)}, "'scores_2' should be float32 \\[4, 4, 7\\]"),
        ({"final_hidden": np.zeros((2, 256), dtype=np.float32)}, "'final_hidden' should be float32 \\[3, 256\\]"),
        ({"attr_mlp_1": None}, "'attr_mlp_1' is missing"),
        ({"attr_other": np.zeros((3, 4), dtype=np.float32)}, "'attr_other' should be float32 \\[3, 5\\]"),
    ],
)
def test_malformed_path_keys_are_refused(tmp_path, arrays, changes, words):
    with pytest.raises(ExportError, match=words):
        read_session(write(tmp_path, arrays, **changes))


def test_crash_mid_write_leaves_the_old_file(tmp_path, arrays, monkeypatch):
    path = write_npz(arrays, tmp_path / "keep.npz")
    before = path.read_bytes()

    def crash(*a, **k):
        raise KeyboardInterrupt("power cut")

    monkeypatch.setattr(export, "pack_npz", crash)
    with pytest.raises(KeyboardInterrupt):
        write_npz(arrays, path)
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["keep.npz"]  # no temporary left behind


def test_unwritable_destination(tmp_path, arrays):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(ExportError, match="Could not write"):
        write_npz(arrays, blocker / "sub" / "s.npz")


def reference_pick(probs: np.ndarray, u: float) -> int:
    """What docs/SESSION_FILE.md tells a reader to do with probs[s] and draw_u[s]."""
    ids = np.flatnonzero(probs > 0)
    order = ids[np.lexsort((ids, -probs[ids]))]  # descending probability, ties by lower id
    cumulative = np.cumsum(probs[order], dtype=np.float64)
    return int(order[min(np.searchsorted(cumulative, u, side="right"), len(order) - 1)])


def test_chosen_is_reproduced_from_probs_and_draw_u(demo_model, tmp_path):
    settings = SamplingSettings(temperature=1.3, top_k=40, top_p=0.9, repetition_penalty=1.2, seed=77)
    session = Session(demo_model, settings)
    session.set_prompt("The cat sat on the")
    for _ in range(6):
        session.step()
    data = read_session(write_npz(session_arrays(session, inside=True), tmp_path / "s.npz")).arrays
    assert data["draw_u"].dtype == np.float64 and data["draw_u"].shape == (6,)
    for s in range(6):
        assert 0 <= data["draw_u"][s] < 1
        assert data["chosen"][s] == reference_pick(data["probs"][s], data["draw_u"][s])
    greedy = Session(demo_model, SamplingSettings(greedy=True))
    greedy.set_prompt("The cat sat on the")
    greedy.step()
    greedy.choose(13)
    greedy.step()
    assert np.isnan(session_arrays(greedy)["draw_u"]).all()  # a user's choice, then greedy: nothing drawn
