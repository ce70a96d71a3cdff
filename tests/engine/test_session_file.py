"""Session files (format 4): every branch round-trips exactly, a seeded session continues as it would
have, a session opens for viewing without its model, bad files are refused, saves are atomic, and
files of an unreleased format are refused."""

import json
import subprocess
import sys
import zipfile
from dataclasses import fields
from pathlib import Path

import numpy as np
import pytest

from engine.branches import ROOT
from engine.errors import ExportError, PromptError, SessionError
from engine.inside import inside
from engine.export import write_npz
from engine.sampling import SamplingSettings
from engine.session import Session
from engine.session_format import FORMAT
from engine.session_read import open_session, read_session
from engine.session_write import save_session, session_arrays

from .evil import write_pickle_bomb

PROMPT = "The cat sat on the"
SAMPLED = SamplingSettings(temperature=1.2, top_k=40, top_p=0.95, repetition_penalty=1.1, seed=11)
GREEDY = SamplingSettings(greedy=True)


def other_token(trace) -> int:
    return int(next(i for i in trace.candidate_ids if i != trace.chosen))


def branchy_session(model) -> Session:
    """Seeded sampled and greedy steps, a user's choice, Back then another token, a re-draw."""
    session = Session(model, SAMPLED, max_new_tokens=40)
    session.set_prompt(PROMPT)
    traces = [session.step() for _ in range(4)]  # seeded sampled steps 0..3
    session.rewind(1)
    session.choose(other_token(traces[1]))  # a user's choice at step 1: a sibling sharing its forward pass
    session.settings = GREEDY
    session.step()
    session.step()
    session.switch(session.branches().path_to(3)[2])  # Back on the first branch, to its step 2
    session.choose(other_token(traces[2]))
    session.resample(SamplingSettings(temperature=0.8, seed=3))  # a re-draw there, then on
    session.step()
    session.switch(session.branches().leaves()[1])  # end on a branch that is not the newest
    return session


@pytest.fixture(scope="module")
def original(demo_model):
    return branchy_session(demo_model)


@pytest.fixture(scope="module")
def saved_path(original, tmp_path_factory):
    return save_session(original, tmp_path_factory.mktemp("saved") / "branchy")


def assert_same_record(a, b):
    for f in fields(a):
        x, y = getattr(a, f.name), getattr(b, f.name)
        if isinstance(x, np.ndarray):
            assert x.dtype == y.dtype and x.shape == y.shape, f.name
            np.testing.assert_array_equal(x, y, err_msg=f.name)
        elif f.name == "kv":
            for g in fields(x):
                np.testing.assert_array_equal(getattr(x, g.name), getattr(y, g.name), err_msg=g.name)
        elif f.name == "draw_u" and np.isnan(x):
            assert np.isnan(y)
        else:
            assert x == y, f.name


def assert_same_session(a: Session, b: Session):
    assert a.prompt_ids == b.prompt_ids and a.node == b.node and a.settings == b.settings
    assert a.use_cache == b.use_cache and a.max_new_tokens == b.max_new_tokens and a.text() == b.text()
    assert a.tree.nodes() == b.tree.nodes()
    for node in a.tree.nodes():
        assert a.tree.parent(node) == b.tree.parent(node)
        assert_same_record(a.tree.record(node), b.tree.record(node))
    ta, tb = a.branches(), b.branches()
    for f in fields(ta):
        x, y = getattr(ta, f.name), getattr(tb, f.name)
        if isinstance(x, np.ndarray):
            np.testing.assert_array_equal(x, y, err_msg=f.name)
        else:
            assert x == y, f.name
    assert a.tree.nbytes() == b.tree.nbytes()  # siblings share their pass's arrays again
    for step in range(a.n_steps):
        x, y = a.trace(step), b.trace(step)
        np.testing.assert_array_equal(x.context_ids, y.context_ids)
        np.testing.assert_array_equal(x.candidate_ids, y.candidate_ids)
        np.testing.assert_array_equal(x.distribution.probs, y.distribution.probs)
        assert (x.pieces, x.chosen_piece, x.candidate_pieces) == (y.pieces, y.chosen_piece, y.candidate_pieces)
        assert (x.chosen_prob, x.chosen_rank, x.entropy_bits, x.stop_reason) == (y.chosen_prob, y.chosen_rank, y.entropy_bits, y.stop_reason)
    np.testing.assert_array_equal(a.projection.components, b.projection.components)
    np.testing.assert_array_equal(a.projection.mean, b.projection.mean)


def test_the_fixture_has_branches(original):
    table = original.branches()
    assert len(table.leaves()) >= 3 and {"greedy", "sampled", "user"} <= set(table.chosen_by)
    assert original.node != table.ids[-1]


def test_round_trip_with_the_same_model(saved_path, original, demo_model):
    saved = read_session(saved_path)
    assert saved.meta["format"] == FORMAT and saved.n_nodes == len(original.tree)
    session, note = open_session(saved, demo_model)
    assert "stepping can go on" in note and session.loaded is demo_model
    assert_same_session(original, session)


@pytest.mark.parametrize("with_model", ["none", "different"])
def test_view_only_without_the_model(saved_path, original, tiny_model, with_model):
    session, note = open_session(read_session(saved_path), None if with_model == "none" else tiny_model)
    assert ("not loaded" if with_model == "none" else "differs") in note
    assert session.loaded.model is None and session.info == original.info
    assert_same_session(original, session)  # every panel's values, pieces included, without the model
    for needs_the_model in (session.step, lambda: inside(session), lambda: session.query(0, 0)):
        with pytest.raises(SessionError, match=r"saved with gpt2-tiny-demo \(.*\); open that model to continue stepping"):
            needs_the_model()
    with pytest.raises(PromptError, match="open that model"):
        session.set_prompt("new text needs the tokenizer")
    other = session.branches().leaves()[0]
    session.switch(other)  # Back and the branch view still work
    assert session.node == other and session.trace().chosen == original.tree.record(other).chosen


def test_a_view_only_session_saves_again_unchanged(saved_path, original, tmp_path):
    session, _ = open_session(read_session(saved_path), None)
    again, _ = open_session(read_session(save_session(session, tmp_path / "again.npz")), None)
    assert_same_session(original, again)
    assert again.loaded.missing_reason == session.loaded.missing_reason


def test_a_reopened_seeded_session_draws_the_same_tokens(demo_model, tmp_path):
    settings = SamplingSettings(temperature=1.0, top_k=50, seed=2024)
    whole = Session(demo_model, settings)
    whole.set_prompt(PROMPT)
    expected = [whole.step().record for _ in range(12)]
    assert len({r.chosen for r in expected}) > 3 and all(r.chosen_by == "sampled" for r in expected)

    part = Session(demo_model, settings)
    part.set_prompt(PROMPT)
    for _ in range(5):
        part.step()
    session, _ = open_session(read_session(save_session(part, tmp_path / "k5.npz")), demo_model)
    assert session.cache_length() == 0  # the next step runs one prefill over the path
    went_on = [session.step().record for _ in range(7)]
    assert [r.chosen for r in session.records] == [r.chosen for r in expected]
    assert [r.draw_u for r in went_on] == [r.draw_u for r in expected[5:]]
    np.testing.assert_allclose(went_on[-1].logits, expected[-1].logits, atol=1e-4, rtol=0)


def test_weights_hash_is_computed_once_and_tells_models_apart(demo_model, tiny_model):
    h = demo_model.weights_hash
    assert h.startswith("sha256:") and len(h) == 7 + 64
    assert demo_model.weights_hash is h  # kept, not computed again
    assert tiny_model.weights_hash != h


def test_nothing_to_save(demo_model, tmp_path):
    session = Session(demo_model)
    session.set_prompt("x")
    with pytest.raises(ExportError, match="Nothing to save"):
        save_session(session, tmp_path / "s.npz")


def test_back_before_the_prefill_round_trips(demo_model, tmp_path):
    session = Session(demo_model, GREEDY)
    session.set_prompt(PROMPT)
    session.step()
    session.step()
    session.rewind(-1)
    reopened, _ = open_session(read_session(save_session(session, tmp_path / "root.npz")), None)
    assert reopened.node == ROOT and reopened.n_steps == 0 and len(reopened.tree) == 2


# ------------------------------------------------------------------------------------ refusals
@pytest.fixture(scope="module")
def arrays(original):
    return session_arrays(original)


def write(tmp_path, arrays, **changes) -> str:
    data = {k: v for k, v in (dict(arrays) | changes).items() if v is not None}
    path = tmp_path / "s.npz"
    np.savez_compressed(path, **data)
    return path


def meta_with(arrays, **changes) -> np.ndarray:
    return np.array(json.dumps(json.loads(str(arrays["meta"])) | changes))


def changed(a: np.ndarray, at, value) -> np.ndarray:
    a = a.copy()
    a[at] = value
    return a


def leaf_off_the_path(arrays) -> int:
    parents, path = arrays["node_parent"], set(arrays["path"].tolist())
    return next(i for i in range(len(parents)) if i not in parents and i not in path)


def same_token_twice(arrays) -> np.ndarray:
    """node_chosen with the second child of the prefill taking the first one's token."""
    first, second = np.flatnonzero(arrays["node_parent"] == 0)[:2]
    return changed(arrays["node_chosen"], second, arrays["node_chosen"][first])


REFUSALS = {
    "foreign npz": (lambda a: {k: None for k in a} | {"x": np.zeros(3)}, "not a nexttoken session file \\(it has no 'meta'\\)"),
    "foreign meta": (lambda a: {"meta": meta_with(a, format="someone-else/1")}, "not a nexttoken session file \\(its format is"),
    "future version": (lambda a: {"meta": meta_with(a, format="nexttoken-session/5")}, "written by a newer nexttoken \\(format 5"),
    "meta not JSON": (lambda a: {"meta": np.array("{not json")}, "'meta' is not valid JSON"),
    "missing key": (lambda a: {"pass_resid": None}, "lacks 'pass_resid'"),
    "wrong dtype": (lambda a: {"pass_attn": a["pass_attn"].astype(np.float32)}, "'pass_attn' should be float16"),
    "wrong shape": (lambda a: {"pass_logits": a["pass_logits"][:, :-1]}, "'pass_logits' should be float32 \\[.*, 50257\\]"),
    "wrong rows": (lambda a: {"pass_resid": a["pass_resid"][:, 1:]}, "'pass_resid' should be float32"),
    "parent after child": (lambda a: {"node_parent": changed(a["node_parent"], 1, 5)}, "parents do not form a tree"),
    "parent loop": (lambda a: {"node_parent": changed(a["node_parent"], 0, 0)}, "parents do not form a tree"),
    "two nodes take one token": (lambda a: {"node_chosen": same_token_twice(a)}, "two nodes under 0 take token"),
    "step out of order": (lambda a: {"pass_step": changed(a["pass_step"], 1, 7)}, "does not follow from its parent"),
    "token outside vocabulary": (lambda a: {"node_chosen": changed(a["node_chosen"], leaf_off_the_path(a), 10**6)}, "outside the vocabulary"),
    "prompt outside vocabulary": (lambda a: {"prompt_ids": changed(a["prompt_ids"], 0, -3)}, "outside the vocabulary"),
    "current not in tree": (lambda a: {"current": np.array(999, dtype=np.int64)}, "current node 999 is not in the tree"),
    "path not to current": (lambda a: {"path": changed(a["path"], -1, leaf_off_the_path(a))}, "'path' is not the path"),
    "path too short": (lambda a: {"path": a["path"][:-1]}, "'input_ids' should be int64 \\["),
    "bad settings": (lambda a: {"meta": meta_with(a, settings_table=[{"temperature": -1.0}])}, "sampling settings are not valid"),
    "settings index": (lambda a: {"node_settings": changed(a["node_settings"], 0, 99)}, "outside the settings table"),
    "chosen_by unknown": (lambda a: {"node_chosen_by": changed(a["node_chosen_by"], 0, "magic")}, "'node_chosen_by' should hold"),
    "token table gap": (lambda a: {"token_bytes_len": a["token_bytes_len"] + 1}, "token table is inconsistent"),
    "kv heads do not divide heads": (lambda a: {"meta": meta_with(a, config=json.loads(str(a["meta"]))["config"] | {"n_kv_heads": 3})},
                                     "3 key/value heads cannot serve 4 query heads"),
    "more kv heads than heads": (lambda a: {"meta": meta_with(a, config=json.loads(str(a["meta"]))["config"] | {"n_kv_heads": 8})},
                                 "8 key/value heads cannot serve 4 query heads"),
    "pass unused": (lambda a: {"node_pass": changed(a["node_pass"], a["node_pass"] == a["node_pass"].max(), 0)}, "'node_pass' does not use"),
}


@pytest.mark.parametrize("case", list(REFUSALS))
def test_bad_files_are_refused_with_one_line(tmp_path, arrays, case):
    make, words = REFUSALS[case]
    path = write(tmp_path, arrays, **make(arrays))
    before = path.read_bytes()
    with pytest.raises(ExportError, match=words) as info:
        read_session(path)
    assert "\n" not in str(info.value) and str(info.value).startswith("s.npz")
    assert path.read_bytes() == before


def test_missing_not_a_zip_truncated_and_damaged(tmp_path, saved_path):
    with pytest.raises(ExportError, match="does not exist"):
        read_session(tmp_path / "none.npz")
    junk = tmp_path / "junk.npz"
    junk.write_bytes(b"hello, this is text")
    with pytest.raises(ExportError, match="junk.npz is not a readable .npz file \\(it is not a zip archive\\)"):
        read_session(junk)
    raw = saved_path.read_bytes()
    cut = tmp_path / "cut.npz"
    cut.write_bytes(raw[: len(raw) // 2])
    with pytest.raises(ExportError, match="cut.npz is damaged or not a readable .npz file"):
        read_session(cut)
    with zipfile.ZipFile(saved_path) as z:  # a byte changed inside the largest member's deflate stream
        info = max(z.infolist(), key=lambda i: i.compress_size)
    at = info.header_offset + 30 + len(info.filename.encode()) + len(info.extra) + info.compress_size // 2
    bad = bytearray(raw)
    bad[at] ^= 0xFF
    damaged = tmp_path / "damaged.npz"
    damaged.write_bytes(bytes(bad))
    with pytest.raises(ExportError, match="damaged.npz is damaged or not a readable .npz file"):
        read_session(damaged)


def test_pickled_objects_are_never_loaded(tmp_path, arrays):
    marker, path = tmp_path / "pwned", tmp_path / "evil.npz"
    write_pickle_bomb(path, arrays, "node_parent", marker)
    with pytest.raises(ExportError, match="holds Python objects"):
        read_session(path)
    assert not marker.exists()


def test_a_crash_mid_save_leaves_the_old_file_whole(tmp_path, original, monkeypatch):
    path = save_session(original, tmp_path / "keep.npz")
    before = path.read_bytes()
    from engine import export

    real = export.pack_npz

    def crash(f, arrays):  # write part of the new file, then the power goes
        real(f, dict(list(arrays.items())[:3]))
        raise KeyboardInterrupt("power cut")

    monkeypatch.setattr(export, "pack_npz", crash)
    with pytest.raises(KeyboardInterrupt):
        save_session(original, path)
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["keep.npz"]  # no temporary left behind
    monkeypatch.undo()
    assert read_session(path).n_nodes == len(original.tree)


def test_a_file_of_an_unreleased_format_is_refused(tmp_path, arrays):
    path = write(tmp_path, arrays, meta=meta_with(arrays, format="nexttoken-session/3"))
    with pytest.raises(ExportError, match="s.npz has format 3, written before the first release: this version reads format 4"):
        read_session(path)


def test_export_writes_format_4_with_the_path_arrays(tmp_path, capsys):
    from engine.cli import main

    path = tmp_path / "run.npz"
    assert main(["--steps", "3", "--seed", "9", "--export", str(path)]) == 0
    saved = read_session(path)
    a = saved.arrays
    assert saved.max_new_tokens == 3 and a["probs"].shape == (3, 50257)
    assert a["q_2"].shape == (4, 4, 64) and a["scores_2"].shape == (4, 4, 5 + 2) and a["final_hidden"].shape == (3, 256)
    session, _ = open_session(saved, None)
    assert session.n_steps == 3 and session.stop_reason()[0] == "max_new_tokens"


def test_reading_imports_no_torch(saved_path):
    """The window's process may read a file (to say what it holds) without importing torch."""
    code = ("import sys; from engine.session_read import read_session; "
            f"s = read_session({str(saved_path)!r}); assert s.n_nodes > 0; "
            "assert 'torch' not in sys.modules, 'torch imported'")
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=root)
    assert done.returncode == 0, done.stderr
