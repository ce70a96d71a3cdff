"""What crosses from the engine to the window: one frozen result per finished request.

Imports no torch (the window's process reads it), only numpy and the engine's torch-free types.
"""

from __future__ import annotations

from dataclasses import dataclass, field
import numpy as np

from engine.branches import BranchTable
from engine.chat import ChatTurn
from engine.info import ModelInfo
from engine.sampling import SamplingSettings
from engine.trace import StepRecord, StepTrace

from .protocol import Request


@dataclass(frozen=True)
class Facts:
    """What a request did beyond the session it left, for the window to put in words (``app.wording``).
    Every field has a neutral default; each request fills in its own.

    seconds: how long a Load took. fallback: the source a Load could not open, so the demo model
        opened instead; why: that source's error ("" when the person cancelled its download).
    kept, whole: a prompt's tokens kept and typed (a Load or a truncating SetPrompt); kept < whole: cut
        (a Load's chat turn: the start of the user's message).
    chat_needs: a Load's chat turn refused: the tokens its template and system message need with one
        token of the user's message, more than a prompt may use; the prompt is the plain text.
    moved: False for a Back already at the start.
    catch_up: (positions, ms) the KV cache caught up on before a step, or None.
    stop: the engine's sentence when generation stopped (the context is full, a stop token).
    path, size: a saved or opened file and its bytes; steps, branches: its steps and leaves.
    ahead: the saves still being written when a Save was asked for (it waits behind them).
    note: what opening a file says about its model (``engine.session_file.open_session``).
    """

    seconds: float = 0.0
    fallback: str = ""
    why: str = ""
    kept: int = 0
    whole: int = 0
    chat_needs: int = 0
    moved: bool = True
    catch_up: tuple[int, float] | None = None
    stop: str = ""
    path: str = ""
    size: int = 0
    steps: int = 0
    branches: int = 0
    ahead: int = 0
    note: str = ""


@dataclass(frozen=True)
class SessionResult:
    """The session as it stands after one request, for drawing.

    generation: the number of the request that produced it (the controller drops older ones).
    request: the request that produced it (``app.protocol``); a play loop's steps are Step.
    info: the loaded model's ModelInfo.
    prompt_ids: int64 [P]; prompt_pieces: their readable text (len P); prompt_text: the prompt as
        the person typed it (or the end of it that was kept).
    trace: the current step's StepTrace, or None before the prefill has run.
    records: every StepRecord of the history, step 0 first (frozen; their arrays are never mutated).
    points: float32 [L + 1, T, 2], the residual stream of every computed position on the model's
        fixed PCA basis (index 0 = embeddings, i = after block i - 1); shape [L + 1, 0, 2] before
        the prefill. T == trace.record.end.
    embed_parts: per record, float32 [2, n, 2]: its token embeddings (hook_embed) and position
        embeddings (hook_pos_embed) on the same basis as ``points`` (each has the basis' centre
        subtracted, so their sum is ``points[0]`` shifted by that centre's projection);
        ``embed_points`` joins them. Kept per record, so the pipe carries only the newest step's.
    explained: float32 [2], the variance fraction of the two PCA axes.
    settings: the sampling settings the session will use.
    facts: what the request did, for the status line (``Facts``; the window writes the words).
    branches: every branch taken from this prompt (``engine.branches.BranchTable``); ``records`` is
        the path to its ``current`` node.
    can_step: False for a session reopened without its model (``why_not`` says why): it is shown, not
        continued.
    chat: the chat turn the prompt was made from with the model's chat template (None: plain text).
    stop_sequences: the texts that stop generation.
    """

    generation: int
    request: Request
    info: ModelInfo
    prompt_ids: np.ndarray
    prompt_pieces: tuple[str, ...]
    prompt_text: str
    trace: StepTrace | None
    records: tuple[StepRecord, ...]
    points: np.ndarray
    explained: np.ndarray
    settings: SamplingSettings
    facts: Facts = Facts()
    stopped: bool = field(default=False)
    branches: BranchTable | None = None
    can_step: bool = True
    why_not: str = ""
    embed_parts: tuple[np.ndarray, ...] = ()
    chat: ChatTurn | None = None
    stop_sequences: tuple[str, ...] = ()

    @property
    def embed_points(self) -> np.ndarray:
        """float32 [2, T, 2]: token embeddings ([0]) and position embeddings ([1]) of every position,
        projected like ``points``."""
        if not self.embed_parts:
            return np.zeros((2, 0, 2), np.float32)
        return np.concatenate(self.embed_parts, axis=1)

    @property
    def n_layer(self) -> int:
        return int(self.info.n_layer)

    @property
    def n_head(self) -> int:
        return int(self.info.n_head)

    @property
    def context_len(self) -> int:
        """T: positions the model has computed (0 before the prefill)."""
        return 0 if self.trace is None else int(self.trace.record.end)


@dataclass(frozen=True)
class InsideResult:
    """The answer to an Inspect request: ``trace``, an ``engine.inside_trace.InsideTrace``, and the
    readable text of every token id it names (``pieces``: id -> piece), for the Inside view."""

    trace: object
    pieces: dict


@dataclass(frozen=True)
class MapResult:
    """The answer to an AttentionMap request: ``rows``, float16 [n, T], blocks.{layer}.attn.hook_pattern
    of ``head`` at every query position ``record``'s pass computed (its start to its end - 1; T = its
    end). ``record`` is the StepRecord itself (the wire hands the window the very object it holds), so
    a view knows which pass the rows belong to."""

    record: StepRecord
    layer: int
    head: int
    rows: np.ndarray
