"""GPT-2 byte-level BPE pieces made readable.

GPT-2's vocabulary maps every byte to a printable stand-in (a space becomes ``Ġ``). ``token_bytes``
undoes that; ``readable`` shows the bytes as text with whitespace and control characters visible,
so that ``" cat"`` reads ``␣cat`` and a token holding half of an emoji reads ``\\xf0\\x9f``.
"""

from __future__ import annotations

import re
from functools import cached_property, lru_cache

from .errors import PromptError

VISIBLE = {" ": "␣", "\n": "↵", "\t": "⇥", "\r": "␍"}


@lru_cache(maxsize=1)
def _byte_decoder() -> dict[str, int]:
    # The GPT-2 table (openai/gpt-2 encoder.py, bytes_to_unicode), inverted.
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
    printable += list(range(ord("®"), ord("ÿ") + 1))
    chars = printable[:]
    n = 0
    for b in range(256):
        if b not in printable:
            printable.append(b)
            chars.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(printable, chars)}


def token_bytes(piece: str) -> bytes:
    """The raw bytes behind one byte-level BPE piece (``'Ġcat'`` -> ``b' cat'``)."""
    table = _byte_decoder()
    if all(ch in table for ch in piece):
        return bytes(table[ch] for ch in piece)
    return piece.encode("utf-8")  # special tokens such as <|endoftext|> are plain text


def readable(raw: bytes) -> str:
    """Text for a token chip: whitespace visible, broken UTF-8 and characters that do not print as ``\\xNN``.

    "Do not print" is ``not str.isprintable()``: control and format characters (NUL, U+0085,
    zero-width space, soft hyphen, direction marks), separators other than the ASCII space
    (no-break space, U+2028), private-use and unassigned code points. Each is shown as its UTF-8
    bytes, so the chip is never blank and never reorders or breaks the strip.
    """
    text = raw.decode("utf-8", errors="backslashreplace")
    out = []
    for ch in text:
        if ch in VISIBLE:
            out.append(VISIBLE[ch])
        elif ch.isprintable():
            out.append(ch)
        else:
            out.append("".join(f"\\x{b:02x}" for b in ch.encode("utf-8")))
    return "".join(out)


_ESCAPE = re.compile(r"\\x([0-9a-f]{2})|(.)", re.S)
_VISIBLE_BACK = {shown: raw.encode() for raw, shown in VISIBLE.items()}


def piece_bytes(piece: str) -> bytes:
    """The bytes behind a readable piece: the inverse of ``readable`` (a literal ␣ in the text also
    reads back as a space; the window only shows these bytes in a tooltip)."""
    out = bytearray()
    for hexbyte, ch in _ESCAPE.findall(piece):
        if hexbyte:
            out.append(int(hexbyte, 16))
        else:
            out += _VISIBLE_BACK.get(ch) or ch.encode("utf-8")
    return bytes(out)


def clip(text: str, chars: int) -> str:
    """``text`` cut to ``chars`` characters with "…": a token in a fixed-width column or axis."""
    return text if len(text) <= chars else text[: chars - 1] + "…"


class Tokenizer:
    """Text <-> GPT-2 token ids with an exact round trip, and readable pieces per id.

    Text that spells a special token (``<|endoftext|>``) is tokenized as ordinary text, so a prompt
    always means what it says and decodes back to itself.
    """

    def __init__(self, hf_tokenizer):
        self.hf = hf_tokenizer
        self.eos_id = hf_tokenizer.eos_token_id
        self.vocab_size = len(hf_tokenizer)
        self._pieces: dict[int, str] = {}
        self._bytes: tuple[bytes, ...] | None = None

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text``. PromptError if it is not valid Unicode (an unpaired surrogate)."""
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise PromptError(
                f"The text holds a character that is not valid Unicode (U+{ord(text[exc.start]):04X} at "
                f"character {exc.start + 1:,}): retype or paste it again."
            ) from None
        return list(self.hf(text, add_special_tokens=False, split_special_tokens=True)["input_ids"])

    @cached_property
    def missing_bytes(self) -> frozenset[int]:
        """The bytes the vocabulary has no token of their own for (SmolLM2's converted vocabulary has
        none for 0x04, 0x06, 0x13, 0x14, 0x16, 0x1D): a character made of one of them cannot be
        encoded, and ``encode`` leaves it out (``left_out``). Empty for a whole byte-level vocabulary."""
        vocab = self.hf.get_vocab()
        return frozenset(b for ch, b in _byte_decoder().items() if ch not in vocab)

    def left_out(self, text: str) -> tuple[str, ...]:
        """The characters of ``text`` that ``encode`` leaves out because a byte of theirs has no
        token (``missing_bytes``), each once, in the order they come."""
        missing = self.missing_bytes
        if not missing:
            return ()
        return tuple(dict.fromkeys(c for c in text if not missing.isdisjoint(c.encode("utf-8", errors="ignore"))))

    def token_bytes(self, token_id: int) -> bytes:
        piece = self.hf.convert_ids_to_tokens(int(token_id))
        if piece is None:  # an embedding row with no token (Qwen2.5 pads 151,665 tokens to 151,936 rows)
            return f"<unused-{int(token_id)}>".encode()
        return token_bytes(piece)

    def bytes_by_id(self) -> tuple[bytes, ...]:
        """The raw bytes of every token, indexed by id: built once (about 0.1 s for GPT-2's 50,257),
        then any thread may read it while this tokenizer encodes on another (the Rust tokenizer
        refuses a call while another thread holds it mutably)."""
        if self._bytes is None:
            self._bytes = tuple(token_bytes(t) for t in self.hf.convert_ids_to_tokens(list(range(self.vocab_size))))
        return self._bytes

    def decode(self, ids) -> str:
        """Exact inverse of ``encode`` (bytes joined, then UTF-8; broken bytes become U+FFFD)."""
        return b"".join(self.token_bytes(i) for i in ids).decode("utf-8", errors="replace")

    def piece(self, token_id: int) -> str:
        """Readable text of one token, cached per id."""
        token_id = int(token_id)
        piece = self._pieces.get(token_id)
        if piece is None:
            piece = self._pieces[token_id] = readable(self.token_bytes(token_id))
        return piece
