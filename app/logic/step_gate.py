"""Whether Step, Play, Back and Reset may run now, and the words for a refused request: the view-model
of the window's run controls. Pure Python, no Qt (tests/app/test_step_gate.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.defaults import truncation_keeps

from app.protocol import messages as p
from app.logic import wording

EMPTY_PROMPT = "The prompt is empty: type some text; Step then runs it (the tokens shown are of the last prompt that ran)."


@dataclass(frozen=True)
class Refusal:
    """What the window shows for a refused request: ``message`` for the status line (``error``: in
    the error style) and, for a prompt that is too long, ``keep``: how many of its last tokens would
    fit (0: no such offer)."""

    message: str
    keep: int = 0
    error: bool = True


class StepGate:
    """The session on screen (``result``) and the prompt the editor holds that cannot run
    (``refused``: why, or ""), and what they allow."""

    def __init__(self):
        self.result: p.SessionResult | None = None
        self.refused = ""  # why the editor's prompt cannot run (Step is off meanwhile), or ""
        self._refused_after = 0  # the number of the newest request sent when it was refused

    # ------------------------------------------------------------- events
    def show(self, result: p.SessionResult) -> None:
        """``result`` is being drawn: a model or a file loaded clears the refusal (its prompt fills the
        editor), and so does a prompt edit sent after the refusal (one sent before, answered after the
        person emptied the editor, is no longer the editor's)."""
        self.result = result
        request = result.request
        if isinstance(request, (p.Load, p.OpenSession)) or (
                isinstance(request, (p.SetPrompt, p.SetChat)) and request.generation > self._refused_after):
            self.refused = ""

    def prompt_emptied(self, sent: int) -> str:
        """The person emptied the editor after request number ``sent`` (the newest) went: Step stays
        off until there is text. Returns why."""
        self.refused, self._refused_after = EMPTY_PROMPT, sent
        return self.refused

    def fail(self, reply: p.Failed) -> Refusal:
        """A request was refused: the words for it, and whether to offer cutting the prompt."""
        message, keep = wording.failure(reply), 0
        if isinstance(reply, p.PromptTooLong):  # the engine's figure: memory may allow fewer than the context
            keep = reply.keep or (truncation_keeps(self.result.info.n_positions) if self.result is not None else 0)
        if isinstance(reply.request, (p.SetPrompt, p.SetChat)):  # the editor shows a prompt that cannot run: say so, no Step
            self.refused = message = f"{message} Step is off until the prompt can run."
            self._refused_after = reply.request.generation
        if isinstance(reply.request, p.Load) and reply.kept and reply.kept not in message:  # the engine's, maybe not the one drawn
            message += f" Still using {reply.kept}."
        return Refusal(message, keep)

    # ---------------------------------------------------------- what runs
    def why_not_step(self) -> Refusal | None:
        """Why Step would not run now (None: it would); ``keep`` is unused here."""
        result = self.result
        if self.refused:  # the chips show another prompt than the editor: never run it silently
            return Refusal(self.refused)
        if result is not None and not result.can_step:
            return Refusal(result.why_not)
        if result is not None and result.stopped:  # not an error: the model said its last word
            return Refusal(result.trace.stop_message if result.trace else "Stopped.", error=False)
        return None

    @property
    def can_step(self) -> bool:
        """Step and Play are on: a session that can go on, and a prompt that runs."""
        r = self.result
        return r is not None and not r.stopped and not self.refused and r.can_step

    @property
    def can_go_back(self) -> bool:
        """Back and Reset are on: a step is shown."""
        return self.result is not None and self.result.trace is not None

    @property
    def can_go_on(self) -> bool:
        """Play may take another step (generation has not stopped)."""
        return not (self.result is not None and self.result.stopped)
