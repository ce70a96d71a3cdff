"""Tokenization round trips and readable pieces."""

import pytest

from engine.tokens import readable, token_bytes

AWKWARD = [
    "The cat sat on the mat.",
    "  leading and trailing spaces  ",
    "tabs\tand\nnewlines\r\n",
    "naïve café — “quotes” ½ ∑",
    "emoji 🐈‍⬛ and flags 🇫🇷",
    "e\u0301 combining marks",
    "שלום עולם مرحبا",
    "NUL \x00 and bell \x07",
    "<|endoftext|> in the middle <|endoftext|>",
    "日本語のテキスト",
    "\u200b zero width",
]


@pytest.mark.parametrize("text", AWKWARD)
def test_round_trip_is_exact(demo_model, text):
    tok = demo_model.tokenizer
    ids = tok.encode(text)
    assert tok.decode(ids) == text


def test_endoftext_text_is_not_the_special_token(demo_model):
    tok = demo_model.tokenizer
    assert tok.eos_id not in tok.encode("<|endoftext|>")
    assert tok.piece(tok.eos_id) == "<|endoftext|>"


def test_known_gpt2_ids(demo_model):
    assert demo_model.tokenizer.encode("The cat sat on the") == [464, 3797, 3332, 319, 262]


def test_pieces_show_spaces_and_controls(demo_model):
    tok = demo_model.tokenizer
    assert [tok.piece(i) for i in tok.encode("The cat")] == ["The", "␣cat"]
    assert tok.piece(tok.encode("\n")[0]) == "↵"
    assert readable(b"\x00a\x7f") == "\\x00a\\x7f"
    assert token_bytes("Ġcat") == b" cat"


def test_split_utf8_is_shown_as_bytes(demo_model):
    tok = demo_model.tokenizer
    ids = tok.encode("🐈")
    assert len(ids) > 1  # a multi-byte character split over tokens
    assert all(tok.piece(i) for i in ids)
    assert "\\x" in "".join(tok.piece(i) for i in ids)


def tokenizer_without(folder, missing: bytes):
    """``folder``'s tokenizer (none there: the demo's) with no token for the bytes ``missing`` (as
    SmolLM2's converted vocabulary has none for six control characters), written to ``folder``."""
    import json

    from engine import paths
    from engine.tokens import token_bytes

    folder.mkdir(parents=True, exist_ok=True)
    demo = paths.demo_model_dir()
    own = folder / "tokenizer.json"
    tok = json.loads((own if own.exists() else demo / "tokenizer.json").read_text(encoding="utf-8"))
    model = tok["model"]
    gone = {piece for piece in model["vocab"] if any(b in missing for b in token_bytes(piece))}
    model["vocab"] = {piece: i for piece, i in model["vocab"].items() if piece not in gone}
    model["merges"] = [m for m in model["merges"] if not {m[0], m[1], m[0] + m[1]} & gone]
    (folder / "tokenizer.json").write_text(json.dumps(tok, ensure_ascii=False), encoding="utf-8")
    for name in ("tokenizer_config.json", "config.json"):  # a model folder keeps its own
        if not (folder / name).exists():
            (folder / name).write_text((demo / name).read_text(encoding="utf-8"), encoding="utf-8")
    return folder


def test_characters_the_vocabulary_has_no_token_for_are_named(tmp_path, demo_model):
    from transformers import AutoTokenizer

    from engine.tokens import Tokenizer

    tok = Tokenizer(AutoTokenizer.from_pretrained(tokenizer_without(tmp_path / "tok", b"\x04\x1d")))
    text = "a\x04b\x1d c\x04"
    assert tok.decode(tok.encode(text)) == "ab c"  # the tokenizer leaves them out without a word
    assert tok.missing_bytes == frozenset({0x04, 0x1D})
    assert tok.left_out(text) == ("\x04", "\x1d")  # each once, in the order they come
    assert tok.left_out("plain text") == ()
    assert demo_model.tokenizer.missing_bytes == frozenset() and demo_model.tokenizer.left_out(text) == ()


def test_smollm2s_tokenizer_leaves_out_six_control_characters():
    from engine import paths

    if paths.offline_model() is None:
        pytest.skip("SmolLM2-135M-Instruct is not set up here")
    from transformers import AutoTokenizer

    from engine.tokens import Tokenizer

    tok = Tokenizer(AutoTokenizer.from_pretrained(paths.offline_model()))
    ascii_text = "".join(map(chr, range(128)))
    assert "".join(tok.left_out(ascii_text)) == "\x04\x06\x13\x14\x16\x1d"
    kept = "".join(c for c in ascii_text if c not in tok.left_out(ascii_text))
    assert tok.decode(tok.encode(ascii_text)) == kept  # exactly those are lost
