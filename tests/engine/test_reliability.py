"""Reliability, engine side: any text, context limits, model faults and long sessions.

What each test proves is written down in docs/RELIABILITY.md, with the memory bounds measured here.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from engine import GenerationStopped, ModelLoadError, PromptError, SamplingSettings, Session, load_model
from engine.tokens import readable
from engine.defaults import truncation_keeps
from tests.conftest import make_tiny_folder

GREEDY = SamplingSettings(greedy=True)


@pytest.fixture(scope="module")
def one_thread():
    """Run torch on one intra-op thread for speed only: on 2 shared cores, 2-thread kernels for
    decode-sized matmuls measured 5-400x slower. Nothing tested here depends on the thread count."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


# --------------------------------------------------------------------------------------- any text
SPECIALS = [
    "<|endoftext|>", "<|endoftext", "|>", "<|", "endoftext|>",  # the special token spelled out, and its halves
    "🐈‍⬛", "👩🏽‍🚀", "🇫🇷", "🏴󠁧󠁢󠁳󠁣󠁴󠁿", "😀" * 5,  # ZWJ sequences, skin tone, flags, tag characters
    "e\u0301", "\u0301\u0302\u0303", "ǅ", "ﬁ", "Å",  # combining marks, precomposed forms, ligature
    "שלום", "مرحبا بالعالم", "\u200f", "\u202e", "\u2066", "\u061c",  # right-to-left text and direction marks
    "\x00", "\x07", "\x1b[31m", "\x7f", "\x85", "\r\n", "\r", "\u2028", "\u2029",  # controls, NUL, separators
    "\ufeff", "\ufffd", "\u200b", "\u00ad", "\ue000", "\U0010fffd",  # BOM, replacement char, invisibles, private use
    "日本語", "한국어", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢",
]
WHITESPACE_RUN = st.text(alphabet=" \t\n\r\u00a0\u2003\u3000", min_size=1, max_size=400)
ANY_TEXT = st.lists(
    st.one_of(st.text(max_size=60), st.sampled_from(SPECIALS), WHITESPACE_RUN),
    max_size=8,
).map("".join)


@settings(max_examples=150, deadline=None)
@given(text=ANY_TEXT)
def test_any_text_round_trips_exactly(demo_model, text):
    tok = demo_model.tokenizer
    ids = tok.encode(text)
    assert tok.decode(ids) == text
    assert all(0 <= i < demo_model.info.vocab_size for i in ids)
    assert tok.eos_id not in ids  # typed <|endoftext|> is text, never the special token


@settings(max_examples=60, deadline=None)
@given(text=st.text(alphabet=st.characters(categories=["Cs", "Ll"]), min_size=1, max_size=20))
def test_text_with_unpaired_surrogates_is_refused_with_a_message(demo_model, text):
    assume(any(0xD800 <= ord(c) < 0xE000 for c in text))  # what a broken clipboard can hand Qt
    session = Session(demo_model)
    with pytest.raises(PromptError, match="not valid Unicode"):
        session.set_prompt(text)


def test_every_piece_of_the_vocabulary_is_printable(demo_model):
    """A chip is never blank and never holds a character that controls or reorders the strip.

    ``str.isprintable()`` is False exactly for control (Cc), format (Cf: zero-width space, soft
    hyphen, direction marks), surrogate, private-use and unassigned code points and every separator
    but the ASCII space (no-break space, U+2028); those are what would draw nothing or act instead
    of showing. Ordinary letters, marks and emoji in any script are printable.
    """
    tok = demo_model.tokenizer
    pieces = [tok.piece(i) for i in range(tok.vocab_size)]
    bad = [(i, p) for i, p in enumerate(pieces) if not p or not p.isprintable()]
    assert bad == []
    assert tok.piece(9525) == "\\xe2\\x80\\x8b"  # zero-width space: its bytes, not an empty chip
    assert tok.piece(1849) == "\\xc2\\xa0"  # no-break space


@settings(max_examples=150, deadline=None)
@given(raw=st.binary(min_size=1, max_size=24) | st.text(min_size=1, max_size=12).map(lambda t: t.encode("utf-8")))
def test_any_bytes_read_as_a_printable_piece(raw):
    piece = readable(raw)
    assert piece and piece.isprintable()


@settings(max_examples=60, deadline=None)
@given(text=ANY_TEXT.filter(bool))
def test_engine_steps_on_any_text(tiny_model, one_thread, text):
    info = tiny_model.info
    L, H, d, V, capacity = info.n_layer, info.n_head, info.d_model, info.vocab_size, info.n_positions
    session = Session(tiny_model, GREEDY)
    prompt = session.set_prompt(text, truncate=True)
    p = len(prompt)
    assert 1 <= p <= capacity
    first = session.step()
    r = first.record
    assert r.attn.shape == (L, H, p, p) and r.resid.shape == (L + 1, p, d) and r.logits.shape == (V,)
    assert r.token_embed.shape == r.pos_embed.shape == (p, d)
    assert np.isfinite(r.logits).all() and np.isfinite(r.resid).all()
    assert len(first.pieces) == p and all(piece and piece.isprintable() for piece in first.pieces)
    assert first.chosen_piece.isprintable() and all(c.isprintable() for c in first.candidate_pieces)
    if p == capacity:
        assert first.stop_reason == "context_full"
        with pytest.raises(GenerationStopped):
            session.step()
        return
    second = session.step().record
    assert second.attn.shape == (L, H, 1, p + 1) and second.resid.shape == (L + 1, 1, d)
    assert second.input_ids.tolist() == [r.chosen] and session.cache_length() == p + 1


# --------------------------------------------------------------------------------- context limits
ONE_TOKEN_WORDS = [" cat", " dog", " the", " sat", " on", " mat", " a", " red"]


@settings(max_examples=40, deadline=None)
@given(offset=st.sampled_from([-1, 0, 1]), words=st.data())
def test_prompts_at_the_edge_of_the_window(tiny_model, offset, words):
    """n_positions - 1 tokens: two steps; n_positions: one step; n_positions + 1: refused, or cut to
    ``truncation_keeps(n_positions)`` tokens, which leaves room to generate the rest."""
    capacity = tiny_model.info.n_positions
    n = capacity + offset
    text = "".join(words.draw(st.lists(st.sampled_from(ONE_TOKEN_WORDS), min_size=n, max_size=n)))
    ids = tiny_model.tokenizer.encode(text)
    assert len(ids) == n
    session = Session(tiny_model, GREEDY)
    if n > capacity:
        with pytest.raises(PromptError, match=f"{n:,} tokens long but .* reads at most {capacity:,} tokens"):
            session.set_prompt(text)
        keep = truncation_keeps(capacity)
        assert session.set_prompt(text, truncate=True) == ids[-keep:]
        assert capacity - keep >= min(32, capacity // 2, max(capacity // 4, 32))  # room to generate
        n = keep
    else:
        assert session.set_prompt(text) == ids
    steps = []
    with pytest.raises(GenerationStopped) as stopped:
        while True:
            steps.append(session.step())
    assert len(steps) == capacity - n + 1
    assert stopped.value.reason == "context_full" and f"{capacity:,} positions" in str(stopped.value)
    assert steps[-1].stop_reason == "context_full" and steps[-1].record.end == capacity
    assert session.cache_length() == capacity


def test_refused_prompt_keeps_the_previous_one(tiny_model):
    session = Session(tiny_model, GREEDY)
    session.set_prompt("The cat sat")
    before = session.step()
    with pytest.raises(PromptError):
        session.set_prompt(" a" * (tiny_model.info.n_positions + 5))
    assert session.n_steps == 1 and session.prompt_ids == tiny_model.tokenizer.encode("The cat sat")
    assert session.step().record.input_ids.tolist() == [before.chosen]


# --------------------------------------------------------------------------------------- settings
ANY_VALUE = st.one_of(
    st.floats(), st.floats(min_value=-1e-30, max_value=1e-30), st.integers(-(2**70), 2**70),
    st.booleans(), st.none(), st.text(max_size=3),
)
LOGITS = (np.random.default_rng(0).normal(size=50257) * 3 - 40).astype(np.float32)  # GPT-2-like: negative


@settings(max_examples=150, deadline=None)
@given(values=st.dictionaries(st.sampled_from(["greedy", "temperature", "top_k", "top_p", "repetition_penalty",
                                               "seed"]), ANY_VALUE, max_size=6))
def test_any_settings_are_refused_or_give_a_valid_distribution(values):
    """The engine checks settings on its own: any value is a SettingsError naming the rule, or it
    yields finite probabilities summing to 1 from which a kept token is drawn."""
    from engine import SettingsError
    from engine.sampling import distribution, draw

    try:
        chosen_settings = SamplingSettings(**values)
    except SettingsError as exc:
        assert " must be " in str(exc)
        return
    dist = distribution(LOGITS, np.array([1, 2, 3]), chosen_settings)
    assert np.isfinite(dist.probs).all() and abs(float(dist.probs.sum()) - 1) < 1e-4
    token = draw(dist, 0).token
    assert dist.kept[token] or chosen_settings.is_greedy


def test_temperature_too_small_to_compute_is_refused():
    from engine import SettingsError

    with pytest.raises(SettingsError, match="0 means greedy; the smallest other value is 0.001"):
        SamplingSettings(temperature=1e-40)  # was accepted, and every probability came out NaN


# ------------------------------------------------------------------------------- saved sessions
@pytest.fixture(scope="module")
def saved_session(demo_model, tmp_path_factory) -> Path:
    from engine.session_write import save_session

    session = Session(demo_model, GREEDY)
    session.set_prompt("The cat sat")
    session.step()
    session.step()
    return save_session(session, tmp_path_factory.mktemp("saved") / "s.npz")


@settings(max_examples=80, deadline=None)
@given(data=st.data())
def test_damaged_session_files_are_refused_with_a_message(saved_session, tmp_path_factory, data):
    """A file cut short (a crash mid-copy) or with a byte changed is an ExportError, never a crash.
    (Found: a damaged deflate stream raised zlib.error past the reader.)"""
    from engine import ExportError
    from engine.session_read import read_session

    raw = bytearray(saved_session.read_bytes())
    if data.draw(st.booleans(), label="truncate"):
        raw = raw[: data.draw(st.integers(0, len(raw) - 1), label="length")]
    else:
        at = data.draw(st.integers(0, len(raw) - 1), label="offset")
        raw[at] ^= data.draw(st.integers(1, 255), label="xor")
    path = tmp_path_factory.mktemp("damaged") / "s.npz"
    path.write_bytes(bytes(raw))
    try:
        saved = read_session(path)
    except ExportError as exc:
        assert "s.npz" in str(exc) and "\n" not in str(exc)
    else:  # a change the zip checksums cannot see (e.g. in a header's timestamp) must still be a valid file
        assert saved.n_nodes == 2 and set(saved.arrays) >= {"node_parent", "pass_logits", "meta"}


# ----------------------------------------------------------------------------------- model faults
@pytest.mark.parametrize("damage", ["garbage", "half", "empty", "empty_object"])
def test_corrupted_tokenizer_json(tmp_path, damage):
    folder = make_tiny_folder(tmp_path / "model", n_layer=1)
    path = folder / "tokenizer.json"
    data = path.read_bytes()
    path.write_bytes({"garbage": b"\x00\xffnot json", "half": data[: len(data) // 2], "empty": b"",
                      "empty_object": b"{}"}[damage])
    with pytest.raises(ModelLoadError, match="The tokenizer in .* could not be read"):
        load_model(str(folder))


def _train_tokenizer(kind: str, path: Path) -> None:
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

    corpus = ["the cat sat on the mat, hello world"] * 20
    if kind == "byte_level_bpe":  # the right kind of tokenizer, but another vocabulary
        tok = Tokenizer(models.BPE())
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(vocab_size=300, special_tokens=["<|endoftext|>"],
                                      initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    else:  # a BERT-style WordPiece: lowercases and drops what it does not know
        tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
        tok.normalizer = normalizers.BertNormalizer(lowercase=True)
        tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
        trainer = trainers.WordPieceTrainer(vocab_size=200, special_tokens=["[UNK]", "<|endoftext|>"])
    tok.train_from_iterator(corpus, trainer)
    tok.save(str(path))


def test_tokenizer_from_another_vocabulary(tmp_path):
    folder = make_tiny_folder(tmp_path / "model", n_layer=1)
    _train_tokenizer("byte_level_bpe", folder / "tokenizer.json")
    with pytest.raises(ModelLoadError, match="does not match the model: its <\\|endoftext\\|> token is id 0 "
                                             "but the model's is id 50,256"):
        load_model(str(folder))


def test_tokenizer_that_is_not_byte_level(tmp_path):
    # No end-of-text id in the config, so only the round-trip probe can tell.
    folder = make_tiny_folder(tmp_path / "model", n_layer=1, eos_token_id=None, bos_token_id=None)
    _train_tokenizer("wordpiece", folder / "tokenizer.json")
    with pytest.raises(ModelLoadError, match="does not match the model: it is not a GPT-2 byte-level tokenizer"):
        load_model(str(folder))


REVISION = "0123456789abcdef0123456789abcdef01234567"


def hub_cache_with_blobs(root: Path, repo_id: str, source: Path) -> tuple[Path, Path]:
    """huggingface_hub's cache layout: blobs/ hold the files, snapshots/<rev>/ links to them."""
    repo = root / ("models--" + repo_id.replace("/", "--"))
    snapshot = repo / "snapshots" / REVISION
    snapshot.mkdir(parents=True)
    (repo / "blobs").mkdir()
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(REVISION)
    for file in source.iterdir():
        blob = repo / "blobs" / f"sha256-{file.name}"
        shutil.copy(file, blob)
        (snapshot / file.name).symlink_to(os.path.relpath(blob, snapshot))
    return repo, snapshot


def use_hub_cache(monkeypatch, cache: Path) -> None:
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(cache))
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", True)  # never the network


def interrupt(repo: Path, snapshot: Path, how: str) -> None:
    blob = repo / "blobs" / "sha256-model.safetensors"
    if how == "incomplete_blob":  # stopped mid-file: the link is only made once the blob is whole
        data = blob.read_bytes()
        (snapshot / "model.safetensors").unlink()
        blob.unlink()
        (repo / "blobs" / "sha256-model.safetensors.incomplete").write_bytes(data[: len(data) // 3])
    elif how == "truncated_blob":
        data = blob.read_bytes()
        blob.write_bytes(data[: len(data) // 3])
    elif how == "dangling_link":  # the blob is gone (cleaned up, or never written)
        blob.unlink()
    elif how == "no_tokenizer_yet":
        (snapshot / "tokenizer.json").unlink()


@pytest.mark.parametrize("how", ["incomplete_blob", "truncated_blob", "dangling_link", "no_tokenizer_yet"])
def test_interrupted_download_offline_says_how_to_finish_it(tmp_path, tiny_dir, monkeypatch, how):
    repo, snapshot = hub_cache_with_blobs(tmp_path / "hub", "someone/tiny-gpt2", tiny_dir)
    interrupt(repo, snapshot, how)
    use_hub_cache(monkeypatch, tmp_path / "hub")
    with pytest.raises(ModelLoadError, match="'someone/tiny-gpt2' was only partly downloaded .*: "
                                             "connect to the internet and load 'someone/tiny-gpt2' again"):
        load_model("someone/tiny-gpt2")


def test_interrupted_download_resumes_instead_of_reusing_the_partial_cache(tmp_path, tiny_dir, monkeypatch):
    import huggingface_hub

    repo, snapshot = hub_cache_with_blobs(tmp_path / "hub", "someone/tiny-gpt2", tiny_dir)
    interrupt(repo, snapshot, "incomplete_blob")
    calls = []

    def fake_snapshot_download(repo_id, *, local_files_only=False, **kwargs):
        calls.append(local_files_only)
        if not local_files_only:  # what the real download does: finish the blob, link it
            shutil.copy(tiny_dir / "model.safetensors", snapshot / "model.safetensors")
        return str(snapshot)

    monkeypatch.setattr(huggingface_hub, "snapshot_download", fake_snapshot_download)
    loaded = load_model("someone/tiny-gpt2")
    assert calls == [True, False] and loaded.info.n_layer == 2


def test_incomplete_snapshot_reported_by_huggingface_hub(tmp_path, monkeypatch):
    import huggingface_hub
    from huggingface_hub.errors import IncompleteSnapshotError

    def fake_snapshot_download(repo_id, **kwargs):  # the hub's own check, when it knows the file list
        raise IncompleteSnapshotError("1 file(s) are missing (model.safetensors).", snapshot_path=str(tmp_path))

    monkeypatch.setattr(huggingface_hub, "snapshot_download", fake_snapshot_download)
    with pytest.raises(ModelLoadError, match="'gpt2' was only partly downloaded"):
        load_model("gpt2")


def test_dangling_weights_link_in_a_folder(tmp_path):
    folder = make_tiny_folder(tmp_path / "model", n_layer=1)
    (folder / "model.safetensors").unlink()
    (folder / "model.safetensors").symlink_to(tmp_path / "gone.safetensors")
    with pytest.raises(ModelLoadError, match="The weights file model.safetensors cannot be opened"):
        load_model(str(folder))


def test_previous_model_stays_usable_after_failed_loads(tiny_model, tmp_path, monkeypatch):
    session = Session(tiny_model, GREEDY)
    session.set_prompt("The cat sat on the")
    session.step()
    state = (torch.is_grad_enabled(), torch.get_default_dtype(), torch.get_num_threads())

    broken = make_tiny_folder(tmp_path / "broken", n_layer=1)
    weights = broken / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:1000])
    bad_tokenizer = make_tiny_folder(tmp_path / "bad-tokenizer", n_layer=1)
    (bad_tokenizer / "tokenizer.json").write_text("{")
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(tmp_path / "empty"))
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", True)
    for source in [tmp_path / "missing", broken, bad_tokenizer, "someone/not-cached"]:
        with pytest.raises(ModelLoadError):
            load_model(str(source))

    assert (torch.is_grad_enabled(), torch.get_default_dtype(), torch.get_num_threads()) == state
    after = session.step()  # the same session goes on, and computes what a fresh one does
    clean = Session(tiny_model, GREEDY)
    clean.set_prompt("The cat sat on the")
    clean.step()
    np.testing.assert_allclose(after.record.logits, clean.step().record.logits, atol=1e-5)


# ---------------------------------------------------------------------------------- long sessions
def rss_bytes() -> int:
    return int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def step_bytes_bound(info, n: int, T: int) -> int:
    """Most bytes one step's record may hold: n positions computed against T keys.

    logits 4V + attention 2·L·H·n·T (float16) + residual stream 4·(L+1)·n·d + token and position
    embeddings 2·4·n·d + the newest position's attention and MLP outputs 2·2·L·d (float16) + final
    hidden 4d + input ids 8n + KV statistics 3·8·L.
    """
    L, H, d, V = info.n_layer, info.n_head, info.d_model, info.vocab_size
    return 4 * V + 2 * L * H * n * T + 4 * (L + 1) * n * d + 8 * n * d + 4 * L * d + 4 * d + 8 * n + 24 * L


def history_nbytes(session) -> int:
    """Bytes held by the recorded steps' arrays of the current path (the KV cache and weights not included)."""
    return sum(r.nbytes for r in session.records)


def test_thousand_steps_hold_a_bounded_history(tmp_path, one_thread):
    """1,000 decode steps on a window of 1,100: each step's record stays under its bound and the
    process grows by no more than the history itself plus a fixed slack (no hidden copies)."""
    loaded = load_model(str(make_tiny_folder(tmp_path / "long", n_positions=1100)))
    session = Session(loaded, GREEDY)
    session.set_prompt("The")
    session.step()
    rss_start, history_start = rss_bytes(), history_nbytes(session)
    for _ in range(1000):
        session.step()
    records = session.records
    assert len(records) == 1001 and records[-1].end == 1001
    for r in records:
        assert r.nbytes <= step_bytes_bound(loaded.info, r.n_new, r.end)
    grown = history_nbytes(session) - history_start  # 206.12 MB for 1,000 steps
    assert rss_bytes() - rss_start <= grown + 64 * 2**20


@pytest.mark.slow  # over 5 s
def test_looping_play_on_the_demo_model_does_not_leak(demo_model, one_thread):
    """1,000 steps of Play, rewinding to step 0 each time the 256-position window fills, with a
    branch (step back, choose another token, re-sample) every 25 steps: the history never exceeds
    one full window's bound, the branches kept beside it never exceed their budget, and RSS grows
    by no more than that budget from loop to loop after the first."""
    info = demo_model.info
    eos = demo_model.tokenizer.eos_id

    def other_token() -> int:
        return int(rng.integers(0, eos))  # any token but <|endoftext|> (the last id)
    session = Session(demo_model, SamplingSettings(temperature=1.0, top_k=50, seed=7))
    budget = session.tree.budget_bytes = 48 * 2**20  # every rewind keeps the old loop as a branch: bounded by this
    prompt_len = len(session.set_prompt("The cat sat on the mat and looked at the door. " * 8 + "Then"))  # 97 tokens
    window_bound = step_bytes_bound(info, prompt_len, prompt_len) + sum(
        step_bytes_bound(info, 1, T) for T in range(prompt_len + 1, info.n_positions + 1)
    )
    rng = np.random.default_rng(0)
    steps, loops, peak_history, rss_at_loop = 0, 0, 0, []
    while steps < 1000:
        try:
            session.step()
            steps += 1
        except GenerationStopped as stopped:
            peak_history = max(peak_history, history_nbytes(session))
            if stopped.reason == "end_of_text":  # the user picks another token and Play goes on
                session.choose(other_token())
                continue
            assert stopped.reason == "context_full"
            assert session.tree.nbytes(exclude=set(session.tree.path(session.node))) <= budget
            rss_at_loop.append(rss_bytes())
            session.rewind(0)  # what a looping Play does
            if session.stop_reason()[0]:
                session.choose(other_token())
            loops += 1
            continue
        if steps % 25 == 0 and session.n_steps > 4:  # step back a little and branch
            session.rewind(session.n_steps - int(rng.integers(2, 5)))
            session.choose(other_token())
            session.resample(SamplingSettings(temperature=0.7, top_p=0.9, seed=steps))
    peak_history = max(peak_history, history_nbytes(session))
    assert loops >= 5
    assert peak_history <= window_bound  # a full window after a 97-token prompt: 36.0 MB, measured and bound
    after_warmup = rss_at_loop[1:]
    assert session.tree.dropped > 0  # the budget was reached: old branches went
    assert max(after_warmup) - after_warmup[0] <= budget + 32 * 2**20
