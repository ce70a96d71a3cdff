"""Errors the engine raises on purpose.

Every message is a sentence a person can act on; the GUI and the terminal show ``str(error)`` as is.
"""


class NextTokenError(Exception):
    """Base class: anything the engine refuses or cannot do, said in plain words."""


class ModelLoadError(NextTokenError):
    """A model could not be loaded: missing folder, corrupt weights, not GPT-2, offline, ..."""


class PromptError(NextTokenError):
    """The prompt cannot be used: empty, or longer than the model's context window."""


class PromptTooLong(PromptError):
    """A prompt longer than the model reads, or than the memory free lets a prefill take: ``tokens``
    is its length and ``keep`` how many of its last tokens ``set_prompt(text, truncate=True)`` would
    keep (``truncation_keeps`` of the context, or fewer when memory is the limit: engine.memory)."""

    def __init__(self, message: str, *, tokens: int, keep: int):
        super().__init__(message)
        self.tokens, self.keep = tokens, keep


class SettingsError(NextTokenError, ValueError):
    """A sampling setting is out of its allowed range. ``setting`` is its field name (``top_p``) and
    ``rule`` what it must be, so that a front end can name its own flag or control instead."""

    def __init__(self, message: str, setting: str = "", rule: str = "", value=None):
        super().__init__(message)
        self.setting, self.rule, self.value = setting, rule, value

    def naming(self, name: str) -> str:
        """The message with the setting called ``name`` (``--top-p``, ``Top-p``)."""
        if not self.setting:
            return str(self)
        return f"{name} must be {self.rule} (got {self.value!r})"


class SessionError(NextTokenError):
    """A session request that does not fit its state (no prompt yet, no such step, ...)."""


class GenerationStopped(SessionError):
    """Generation has stopped (end-of-text, token limit, context window full); ``reason`` says which."""

    def __init__(self, reason: str, message: str):
        super().__init__(message)
        self.reason = reason


class ExportError(NextTokenError):
    """A saved session file could not be written or read (missing keys, wrong dtypes, hostile content)."""
