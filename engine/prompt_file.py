"""``--prompt-file PATH``: a prompt read from a text file, for both command lines (``python -m engine``
and ``nexttoken``). Standard library only: the window's process reads it too."""

from __future__ import annotations

from pathlib import Path

from .errors import PromptError


def read_prompt_file(path: str) -> str:
    """The text of the UTF-8 file ``path``, less one final line break (what an editor adds after the
    last line); PromptError in one line when it cannot be read or is not UTF-8 text."""
    try:
        text = Path(path).expanduser().read_bytes().decode("utf-8")
    except OSError as exc:
        raise PromptError(f"Cannot read the prompt file {path}: {exc.strerror or exc}.") from exc
    except UnicodeDecodeError as exc:
        raise PromptError(f"The prompt file {path} is not UTF-8 text (byte {exc.start}).") from exc
    return text[:-2] if text.endswith("\r\n") else text[:-1] if text.endswith("\n") else text
