"""Chat turns for instruction models: the tokenizer's own chat template turns messages into token ids.

The template is applied by the tokenizer (transformers' ``apply_chat_template``), never re-implemented:
whatever special tokens it adds (``<|im_start|>``, ``<|im_end|>``, role names) are part of the prompt,
and generation stops at the tokenizer's end-of-text token, which for these models is the end of
the assistant's turn (``<|im_end|>`` for SmolLM2-Instruct and Qwen2.5-Instruct).
"""

from __future__ import annotations

from dataclasses import dataclass

from .errors import PromptError


@dataclass(frozen=True)
class ChatTurn:
    """A chat prompt as the person wrote it: a system message ("": none) and one user message. The
    tokens the model reads are ``chat_prompt_ids`` of it. Standard library only: the window sends it."""

    system: str = ""
    user: str = ""


class ChatTurnTooLong(PromptError):
    """The chat template and the system message leave no room for the user's message: with one token
    of it the turn is ``needs`` tokens, more than the ``room`` a prompt may use."""

    def __init__(self, needs: int, room: int):
        super().__init__(
            f"The chat template and the system message need {needs:,} tokens with one token of the user's message, "
            f"more than the {room:,} a prompt may use: shorten the system message."
        )
        self.needs, self.room = needs, room


def has_chat_template(tokenizer) -> bool:
    """True when the model's tokenizer carries a chat template."""
    return bool(getattr(getattr(tokenizer, "hf", None), "chat_template", None))  # a session file's tokens: none


def chat_prompt_ids(tokenizer, user: str, system: str | None = None) -> list[int]:
    """Token ids of a system message (optional) and one user turn, with the assistant's turn opened."""
    if not has_chat_template(tokenizer):
        raise PromptError("This model's tokenizer has no chat template: write a plain prompt instead (without --chat).")
    if not user:
        raise PromptError("The user's message is empty: type at least one character.")
    messages = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": user}]
    ids = tokenizer.hf.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
    if hasattr(ids, "keys"):  # transformers 5 returns a BatchEncoding
        ids = ids["input_ids"]
    return [int(i) for i in ids]


def fit_chat_turn(tokenizer, turn: ChatTurn, room: int) -> tuple[ChatTurn, list[int]]:
    """``turn`` with the start of its user message cut (whole tokens) so that the template renders it in
    at most ``room`` tokens, and those tokens: the longest end of the message that fits. The template's
    special tokens and the system message are never cut; ChatTurnTooLong when they leave no room."""
    user_ids = tokenizer.encode(turn.user)

    def cut(n: int) -> tuple[ChatTurn, list[int]]:
        text = tokenizer.decode(user_ids[-n:])
        cut_turn = ChatTurn(turn.system, text.lstrip("\ufffd") or text)  # a character whose first bytes were cut: dropped
        return cut_turn, chat_prompt_ids(tokenizer, cut_turn.user, turn.system or None)

    fits = cut(1)
    if len(fits[1]) > room:
        raise ChatTurnTooLong(len(fits[1]), room)
    low, high = 1, len(user_ids)  # cut(low) fits; find the largest n that does
    while low < high:
        n = (low + high + 1) // 2
        candidate = cut(n)
        if len(candidate[1]) <= room:
            low, fits = n, candidate
        else:
            high = n - 1
    return fits


def special_ids(tokenizer) -> tuple[int, ...]:
    """The ids of the tokenizer's special tokens (end of text, the chat template's turn markers), ascending."""
    hf = tokenizer.hf
    added = {int(i) for i, token in getattr(hf, "added_tokens_decoder", {}).items() if getattr(token, "special", False)}
    return tuple(sorted(added | {int(i) for i in hf.all_special_ids}))
