"""Files of formats 1 and 2 (before branches): still read without ever unpickling, hostile ones refused;
``write_npz`` writes atomically. Format 3 is tested in test_session_file.py."""

import json

import numpy as np
import pytest

from engine import export
from engine import ExportError, SamplingSettings, Session
from engine.export import FORMAT, load_export, write_npz

from .evil import write_pickle_bomb
from .legacy import legacy_arrays


@pytest.fixture(scope="module")
def arrays(demo_model):
    session = Session(demo_model, SamplingSettings(greedy=True))
    session.set_prompt("The cat sat on the")
    for _ in range(3):
        session.step()
    return legacy_arrays(session, inside=True)


def write(tmp_path, arrays, **changes):
    data = dict(arrays) | changes
    data = {k: v for k, v in data.items() if v is not None}
    path = tmp_path / "s.npz"
    np.savez(path, **data)
    return path


def test_round_trip(tmp_path, arrays):
    path = write_npz(arrays, tmp_path / "ok")
    assert path.name == "ok.npz"
    data = load_export(path)
    np.testing.assert_array_equal(data["logits"], arrays["logits"])
    assert data["meta"]["format"] == FORMAT


def test_path_keys_for_every_step(tmp_path, arrays):
    """The Inside keys of issue 12 (values checked against the model in tests/engine/test_inside.py)."""
    data = load_export(write_npz(arrays, tmp_path / "path"))
    steps, prompt_len = len(data["chosen"]), int(data["prompt_len"])
    for s in range(steps):
        for key in ("q", "k", "v", "z"):
            assert data[f"{key}_{s}"].shape == (4, 4, 64) and data[f"{key}_{s}"].dtype == np.float32
        assert data[f"scores_{s}"].shape == (4, 4, prompt_len + s)
        for key in ("attn_out", "resid_mid", "mlp_out"):
            assert data[f"{key}_{s}"].shape == (4, 256)
        assert data[f"mlp_pre_{s}"].shape == data[f"mlp_post_{s}"].shape == (4, 1024)
        assert data[f"lens_ids_{s}"].dtype == np.int64 and data[f"lens_logits_{s}"].shape == (5, 10)
        top = np.argsort(-data["logits"][s], kind="stable")[:10]
        np.testing.assert_array_equal(data[f"lens_ids_{s}"][-1], top)
    assert data["final_hidden"].shape == (steps, 256)


@pytest.mark.parametrize(
    "changes, words",
    [
        ({"logits": None}, "lacks logits"),
        ({"input_ids": np.arange(8, dtype=np.float32)}, "'input_ids' should be a 1-D integer"),
        ({"chosen": np.zeros((3, 2), dtype=np.int64)}, "'chosen' should be a 1-D integer"),
        ({"probs": np.zeros((2, 50257), dtype=np.float32)}, "'probs' has shape"),
        ({"input_ids": np.arange(5, dtype=np.int64)}, "do not match"),
        ({"input_ids": np.full(8, 10**7, dtype=np.int64)}, "outside the vocabulary"),
        ({"kv_len": np.zeros(9, dtype=np.int64)}, "should hold 3 values"),
        ({"meta": np.array("not json")}, "not valid JSON"),
        ({"meta": np.array(json.dumps({"format": "other"}))}, "does not describe"),
        ({"meta": np.array(7)}, "should be a JSON string"),
        ({"q_1": None}, "'q_{s}' is missing for step 1"),
        ({"lens_ids_2": np.zeros((5, 10), dtype=np.float32)}, "'lens_ids_2' should be a 2-D integer"),
        ({"final_hidden": np.zeros((2, 256), dtype=np.float32)}, "'final_hidden' should be a float array of 3 rows"),
    ],
)
def test_malformed_files_are_refused(tmp_path, arrays, changes, words):
    with pytest.raises(ExportError, match=words):
        load_export(write(tmp_path, arrays, **changes))


def test_pickled_objects_are_never_loaded(tmp_path, arrays):
    marker, path = tmp_path / "pwned", tmp_path / "evil.npz"
    write_pickle_bomb(path, arrays, "meta", marker)
    with pytest.raises(ExportError, match="Python objects"):
        load_export(path)
    assert not marker.exists()


def test_not_a_zip_and_missing_file(tmp_path):
    junk = tmp_path / "junk.npz"
    junk.write_bytes(b"this is not a zip file")
    with pytest.raises(ExportError, match="not a readable .npz"):
        load_export(junk)
    with pytest.raises(ExportError, match="does not exist"):
        load_export(tmp_path / "none.npz")


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
    """What the README tells a reader to do with probs[s] and draw_u[s]."""
    ids = np.flatnonzero(probs > 0)
    order = ids[np.lexsort((ids, -probs[ids]))]  # descending probability, ties by lower id
    cumulative = np.cumsum(probs[order], dtype=np.float64)
    return int(order[min(np.searchsorted(cumulative, u, side="right"), len(order) - 1)])


@pytest.fixture(scope="module")
def sampled(demo_model, tmp_path_factory):
    settings = SamplingSettings(temperature=1.3, top_k=40, top_p=0.9, repetition_penalty=1.2, seed=77)
    session = Session(demo_model, settings)
    session.set_prompt("The cat sat on the")
    for _ in range(6):
        session.step()
    return write_npz(legacy_arrays(session), tmp_path_factory.mktemp("sampled") / "s.npz"), session


def test_chosen_is_reproduced_from_probs_and_draw_u(sampled, demo_model):
    data = load_export(sampled[0])
    assert data["meta"]["format"] == FORMAT == "nexttoken-session/2"
    assert data["draw_u"].dtype == np.float64 and data["draw_u"].shape == (6,)
    for s in range(6):
        assert 0 <= data["draw_u"][s] < 1
        assert data["chosen"][s] == reference_pick(data["probs"][s], data["draw_u"][s])
    session = Session(demo_model, SamplingSettings(greedy=True))
    session.set_prompt("The cat sat on the")
    session.step()
    session.choose(13)
    session.step()
    assert np.isnan(legacy_arrays(session)["draw_u"]).all()  # a user's choice, then greedy: nothing drawn


def test_a_seeded_session_replays_exactly(sampled, demo_model):
    data = load_export(sampled[0])
    meta = data["meta"]
    settings = SamplingSettings(**{k: v for k, v in meta["settings"][0].items() if k != "chosen_by"})
    replay = Session(demo_model, settings)
    replay.set_prompt(demo_model.tokenizer.decode(data["input_ids"][: int(data["prompt_len"])]))
    records = [replay.step().record for _ in range(len(data["chosen"]))]
    assert [r.chosen for r in records] == data["chosen"].tolist()
    np.testing.assert_array_equal([r.draw_u for r in records], data["draw_u"])
    np.testing.assert_array_equal(legacy_arrays(replay)["probs"], data["probs"])


def test_format_1_files_still_load(tmp_path, arrays):
    old = {k: v for k, v in arrays.items() if k != "draw_u"}
    old["meta"] = np.array(json.dumps(json.loads(str(arrays["meta"])) | {"format": "nexttoken-session/1"}))
    data = load_export(write(tmp_path, old))
    assert data["meta"]["format"] == "nexttoken-session/1" and "draw_u" not in data


@pytest.mark.parametrize(
    "changes, words",
    [
        ({"draw_u": None}, "must hold 'draw_u'"),
        ({"draw_u": np.zeros(2)}, "'draw_u' should hold 3 values"),
        ({"draw_u": np.zeros(3, dtype=np.int64)}, "'draw_u' should be a 1-D float"),
    ],
)
def test_bad_draw_u_is_refused(tmp_path, arrays, changes, words):
    with pytest.raises(ExportError, match=words):
        load_export(write(tmp_path, arrays, **changes))
