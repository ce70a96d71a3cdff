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
