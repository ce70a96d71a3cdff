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


def special_ids(tokenizer) -> tuple[int, ...]:
    """The ids of the tokenizer's special tokens (end of text, the chat template's turn markers), ascending."""
    hf = tokenizer.hf
    added = {int(i) for i, token in getattr(hf, "added_tokens_decoder", {}).items() if getattr(token, "special", False)}
    return tuple(sorted(added | {int(i) for i in hf.all_special_ids}))
