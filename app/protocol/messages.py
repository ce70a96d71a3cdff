"""Every request the window sends to the engine, every reply it sends back, the results those replies
carry (``SessionResult``, ``InsideResult``, ``Facts``) and the control values the window may set there.

One small frozen dataclass per request kind and per reply kind: this module is the whole protocol.
The receiver matches on the classes, never on a name. Each request
carries the ``generation`` the controller numbered it with (newer requests make older results
stale). Requests that can reach a fresh or reloaded engine (``Load``, ``SetPrompt``, ``Reset``,
``Resample``) carry the sampling settings the person chose last, so an engine never runs on
settings the window does not show; None before the person has chosen any: the model's own
(``engine.defaults.model_settings``, from its ``generation_config.json``), which the window then shows. Standard library and numpy types only: the window's process
imports this, and imports no torch.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from engine.branches import BranchTable
from engine.chat import ChatTurn
from engine.defaults import DEFAULT_SETTINGS
from engine.info import ModelInfo
from engine.runtime import CPU, Runtime
from engine.sampling import SamplingSettings
from engine.trace import StepRecord, StepTrace


@dataclass(frozen=True)
class Request:
    """Base of every request; ``generation`` is set by the controller. ``kind`` names the request
    in results and error messages."""

    kind: ClassVar[str] = ""
    generation: int = 0


@dataclass(frozen=True)
class Load(Request):
    """Load a model and set the prompt. ``source``: a folder or hub id, None for the demo model;
    ``loaded``: an already loaded model (the thread engine only: tests pass one to skip the disk);
    ``fallback``: open the demo model if ``source`` fails; ``prompt``: "" keeps the current one;
    ``chat``: with its system message, the prompt is a user turn through the model's chat template
    (a model without one gets the plain prompt); ``stop_sequences``: the window's; ``runtime``: on which
    device, in which dtype and through which backend (engine.runtime; the command line's)."""

    kind: ClassVar[str] = "load"

    source: str | None = None
    prompt: str = ""
    fallback: bool = False
    settings: SamplingSettings | None = DEFAULT_SETTINGS
    use_cache: bool = True
    loaded: Any = field(default=None, repr=False)  # its repr would be the whole model's
    chat: ChatTurn | None = None
    stop_sequences: tuple[str, ...] = ()
    runtime: Runtime = CPU


@dataclass(frozen=True)
class SetPrompt(Request):
    """Use ``text`` as the prompt (dropping every step); too long is refused unless ``truncate``."""

    kind: ClassVar[str] = "prompt"

    text: str = ""
    truncate: bool = False
    settings: SamplingSettings | None = DEFAULT_SETTINGS


@dataclass(frozen=True)
class SetChat(Request):
    """Use ``turn`` (a system message and a user message) as the prompt, rendered by the model's own
    chat template (``engine.chat``), dropping every step; refused for a model without a template."""

    kind: ClassVar[str] = "chat"

    turn: ChatTurn = ChatTurn()
    settings: SamplingSettings | None = DEFAULT_SETTINGS


@dataclass(frozen=True)
class SetStops(Request):
    """Stop generating once the text reaches one of ``sequences`` (checked from the newest step on;
    the steps taken stay)."""

    kind: ClassVar[str] = "stops"

    sequences: tuple[str, ...] = ()


@dataclass(frozen=True)
class Step(Request):
    """Run the next forward pass (the prefill first) and choose a token."""

    kind: ClassVar[str] = "step"


@dataclass(frozen=True)
class Play(Request):
    """Step, then queue the next Play behind whatever arrived meanwhile, until ``play_generation``
    no longer names this request (a pause or any newer request)."""

    kind: ClassVar[str] = "play"


@dataclass(frozen=True)
class Back(Request):
    """Drop the newest step (and its cache positions)."""

    kind: ClassVar[str] = "back"


@dataclass(frozen=True)
class Choose(Request):
    """Take ``token_id`` at the current step instead of the drawn token (a branch)."""

    kind: ClassVar[str] = "choose"

    token_id: int = 0


@dataclass(frozen=True)
class Resample(Request):
    """Use ``settings`` from now on and re-draw the current step with them (no forward pass)."""

    kind: ClassVar[str] = "resample"

    settings: SamplingSettings | None = DEFAULT_SETTINGS


@dataclass(frozen=True)
class Reset(Request):
    """Drop every step, keep the prompt; use ``settings`` from now on."""

    kind: ClassVar[str] = "reset"

    settings: SamplingSettings | None = DEFAULT_SETTINGS


@dataclass(frozen=True)
class SetCache(Request):
    """Generate with the KV cache (``on``) or without it: every step then runs the whole sequence,
    as a model without a cache must. The steps already taken stay as they are."""

    kind: ClassVar[str] = "cache"
    on: bool = True


@dataclass(frozen=True)
class Inspect(Request):
    """Compute everything on the path at ``position`` (-1: the step's newest) of history ``step``
    (-1: the latest), with every position's keys and values of ``layer`` (the Inside and cache
    views). Answered with an ``engine.inside_trace.InsideTrace``, not a SessionResult; it neither
    changes the session nor ends a play loop."""

    kind: ClassVar[str] = "inspect"
    step: int = -1
    position: int = -1
    layer: int = 0


@dataclass(frozen=True)
class Attribute(Request):
    """Split the logit of ``target`` (-1: the token that came next, the chosen one at a step's
    newest position) minus that of ``versus`` (-1: none) at ``position`` (-1: the step's newest) of
    history ``step`` (-1: the latest) into what each part of the model writes into it
    (``engine.attribution``, the Why view). Answered with an ``Attributed``; like Inspect it neither
    changes the session nor ends a play loop."""

    kind: ClassVar[str] = "attribute"
    step: int = -1
    position: int = -1
    target: int = -1
    versus: int = -1


@dataclass(frozen=True)
class Tokenize(Request):
    """The tokens ``text`` would have as a prompt (``engine.tokens.Tokenizer.encode``, as a SetPrompt
    reads it): the Why view's second prompt, to say before patching whether it has as many tokens
    as the first. Answered with a ``Tokenized``; it changes nothing and ends no play loop."""

    kind: ClassVar[str] = "tokenize"
    text: str = ""


@dataclass(frozen=True)
class Patch(Request):
    """Activation patching (``engine.patching``) at history step ``step`` (-1: the latest). The
    first run reads the tokens that step read (the prompt, then the tokens chosen before it); the
    second reads ``text``'s tokens followed by the same chosen tokens. For every layer L and
    position i the second runs again with block L's ``site`` at position i taken from the first
    run (``engine.patching.SITES``: "resid_pre", the block's input; "attn_out", its attention's
    output; "mlp_out", its MLP's output), and the logit of ``target`` (-1: the token the step chose) minus that of
    ``versus`` (-1: none) at the last position is read. The two prompts must have as many tokens
    (else ``Failed``, the sentence giving both counts). It is told layer by layer (``Progress``
    "patch"), stops at the next layer once ``cancel_patch`` names it (``PatchCancelled``), changes
    nothing, and is answered with a ``Patched``."""

    kind: ClassVar[str] = "patch"
    text: str = ""
    step: int = -1
    target: int = -1
    versus: int = -1
    site: str = "resid_pre"


@dataclass(frozen=True)
class Compare(Request):
    """A prompt pair stepped together, at history step ``step`` (-1: the latest): the first reads the
    tokens that step read, the second ``text``'s tokens followed by the same chosen tokens (so both
    texts stay aligned, whatever their lengths). Each is split at its last position into what each
    part writes into the logit of ``target`` (-1: the token the step chose) minus that of ``versus``
    (-1: none) (``engine.attribution``), and each's most likely next tokens are named. Answered with
    a ``Compared``; like Attribute it changes nothing and ends no play loop."""

    kind: ClassVar[str] = "compare"
    text: str = ""
    step: int = -1
    target: int = -1
    versus: int = -1


@dataclass(frozen=True)
class AttentionMap(Inspect):
    """One head's whole attention pattern at the pass of history step ``step``, ``layer``, ``head``,
    recomputed by the engine (``engine.attention.head_map``): a long prefill keeps only a sample of
    its rows (``engine.trace.StepRecord.attn``). A view's question, as an Inspect is (it neither changes
    the session nor ends a play loop); answered by ``Inspected`` with a ``MapResult``."""

    kind: ClassVar[str] = "map"
    head: int = 0


@dataclass(frozen=True)
class Switch(Request):
    """Show the branch through tree ``node`` (``engine.branches``) as it was, up to that node: no
    forward pass; -1 (the tree's root): before the prefill, every branch kept."""

    kind: ClassVar[str] = "switch"
    node: int = -1


@dataclass(frozen=True)
class SaveSession(Request):
    """Write the whole session (every branch) to the file ``path`` (``engine.session_write``)."""

    kind: ClassVar[str] = "save"
    path: str = ""


@dataclass(frozen=True)
class SaveWritten(Request):
    """The host's own request, queued by its saver's thread (``app.host.saver``) when the file of the
    Save numbered ``generation`` is written: the host answers it on its thread, with the file's facts
    (``path``, ``size`` in bytes, ``steps``, ``branches``), or fails it with ``error``. The window
    never sends it."""

    kind: ClassVar[str] = "saved"
    path: str = ""
    size: int = 0
    steps: int = 0
    branches: int = 0
    error: str = ""


@dataclass(frozen=True)
class OpenSession(Request):
    """Replace the session with the one saved in ``path``, at its step ``step`` of the branch it was
    saved on (-1: the step it was saved at). Its own sampling settings come with it (the window adopts
    them); it steps on only with the same model (else it is shown, not continued). A refused file
    changes nothing but the session's settings, which become ``settings`` (the window's). The file's chat
    turn and stop sequences come with it too."""

    kind: ClassVar[str] = "open"
    path: str = ""
    step: int = -1
    use_cache: bool = True
    settings: SamplingSettings | None = DEFAULT_SETTINGS  # the person's, kept if the file is refused


@dataclass(frozen=True)
class Refresh(Request):
    """Send the session as it stands, unchanged (after a failed load dropped results as stale)."""

    kind: ClassVar[str] = "refresh"


REQUESTS = (Load, SetPrompt, SetChat, SetStops, Step, Play, Back, Choose, Resample, Reset, SetCache, Inspect, AttentionMap,
            Attribute, Tokenize, Patch, Compare, Switch, SaveSession, OpenSession, Refresh)
RESTARTS = (Load, SetPrompt, SetChat, Reset, OpenSession)  # after one of these, results of older requests are stale
KEPT_ON_RESTART = (Load, SaveSession, SetStops)  # still run after a restart (a save's result is stale, its message is not; stop sequences are the person's)
PROMPT_EDITS = (SetPrompt, SetChat)  # the person's text: still run after any restart but a newer edit (a Load may be refused)
COALESCING = (Step, Resample, Choose, Inspect, AttentionMap, Attribute, Tokenize, Patch, Compare, Switch)  # a newer one replaces an older one still waiting
LOOKS = (Inspect, Attribute, Tokenize, Compare)  # ask what the model computed for a view: change nothing, end no play loop (an AttentionMap
# is an Inspect); a Patch changes nothing either but ends a play loop: its map is of the step on screen

CONTROLS = ("play_generation", "latest_barrier", "cancel_load", "cancel_step", "cancel_patch")
"""The host attributes the window may set while a request runs (and nothing else):
``play_generation``, the Play request still wanted (0: none); ``latest_barrier``, the newest
restart: a Step older than it is skipped unrun; ``cancel_load``, the generation of a Load whose
download the person cancelled: it stops at its next progress report; ``cancel_step``, the
generation of a Step (or Play) whose long prefill the person cancelled: it stops after the block
that runs; ``cancel_patch``, the generation of a Patch the person cancelled (or a restart made
stale): it stops before its next layer."""



# ------------------------------------------------------------------ results
@dataclass(frozen=True)
class Facts:
    """What a request did beyond the session it left, for the window to put in words (``app.logic.wording``).
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
    note: what opening a file says about its model (``engine.session_read.open_session``).
    left_out: the characters of a prompt or chat turn (a Load's, a SetPrompt's, a SetChat's) that the
        tokenizer left out because the vocabulary has no token for them, each once (``Tokenizer.left_out``).
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
    left_out: tuple[str, ...] = ()


@dataclass(frozen=True, repr=False)
class SessionResult:
    """The session as it stands after one request, for drawing.

    generation: the number of the request that produced it (the controller drops older ones).
    request: the request that produced it (``app.protocol.messages``); a play loop's steps are Step.
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

    def __repr__(self) -> str:
        """Which request and model, and how far: the dataclass' own repr wrote out every array of every
        record (pytest-qt builds the repr of each result a test waits for: 10 s of a test run)."""
        return (f"SessionResult(generation={self.generation}, request={type(self.request).__name__}, model={self.info.name!r}, "
                f"prompt={len(self.prompt_ids)} tokens, steps={len(self.records)}, positions={self.context_len})")

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
class AttributionResult:
    """The answer to an Attribute request: ``attribution``, an ``engine.attribution_trace.Attribution``;
    ``target_piece`` and ``versus_piece`` (versus -1: ""), the readable text of the two tokens; and
    ``source_pieces``, the text of every position the heads read (positions 0..p), for the Why view."""

    attribution: object
    target_piece: str
    versus_piece: str
    source_pieces: tuple[str, ...]


@dataclass(frozen=True)
class TokensResult:
    """The answer to a Tokenize request: ``text``, its token ids ``ids`` (int64 [n]) and their
    readable text ``pieces`` (len n)."""

    text: str
    ids: np.ndarray
    pieces: tuple[str, ...]


@dataclass(frozen=True)
class PatchResult:
    """The answer to a Patch request, for the Why view's second page.

    patching: the ``engine.patching.Patching`` itself (its ``metric`` float32 [L, P], its ids).
    restored: float32 [L, P], the share of the two prompts' difference in the metric that comes back
        when block L's input at position i is taken from the first prompt ((metric - second) /
        (first - second); NaN everywhere when the two prompts do not differ).
    first_metric, second_metric: the metric (logit of target minus that of versus) at the last
        position of each prompt's own run.
    step: the history step patched; text: the second prompt as typed.
    first_pieces, second_pieces: the readable text of each run's P tokens.
    target_piece, versus_piece: the two tokens' text (versus -1: "").
    first_top, second_top: each run's most likely next tokens, (id, piece, model probability: the
        softmax of its logits), most likely first (ties: the lower id).
    """

    patching: object
    restored: np.ndarray
    first_metric: float
    second_metric: float
    step: int
    text: str
    first_pieces: tuple[str, ...]
    second_pieces: tuple[str, ...]
    target_piece: str
    versus_piece: str
    first_top: tuple[tuple[int, str, float], ...] = ()
    second_top: tuple[tuple[int, str, float], ...] = ()

    @property
    def site(self) -> str:
        return str(self.patching.site)

    @property
    def target(self) -> int:
        return int(self.patching.target)

    @property
    def versus(self) -> int:
        return int(self.patching.versus)


@dataclass(frozen=True)
class CompareResult:
    """The answer to a Compare request, for the Why view's second page: two ``engine.attribution_trace
    .Attribution`` of the same target (``first``: the step's own text, ``second``: the second prompt
    followed by the same chosen tokens), each at its last position.

    step: the history step; text: the second prompt as typed.
    first_pieces, second_pieces: the readable text of each run's tokens (their lengths may differ).
    target_piece, versus_piece: the two tokens' text (versus -1: "").
    first_top, second_top: each run's most likely next tokens, (id, piece, model probability),
        most likely first (ties: the lower id).
    """

    first: object
    second: object
    step: int
    text: str
    first_pieces: tuple[str, ...]
    second_pieces: tuple[str, ...]
    target_piece: str
    versus_piece: str
    first_top: tuple[tuple[int, str, float], ...] = ()
    second_top: tuple[tuple[int, str, float], ...] = ()

    @property
    def target(self) -> int:
        return int(self.first.target)

    @property
    def versus(self) -> int:
        return int(self.first.versus)


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


# ------------------------------------------------------------------ replies
@dataclass(frozen=True)
class Reply:
    """Base of every reply the engine sends up, one per request (a download also sends Progress);
    ``generation``: the request it answers."""

    generation: int = 0


@dataclass(frozen=True)
class Finished(Reply):
    """``result`` (``SessionResult``): the session as the request left it; its ``request``
    says which request that was (a play loop's steps are Step)."""

    result: SessionResult | None = None


@dataclass(frozen=True)
class Inspected(Reply):
    """The answer to an Inspect request (``InsideResult``) or an AttentionMap (``MapResult``)."""

    answer: InsideResult | MapResult | None = None


@dataclass(frozen=True)
class Attributed(Reply):
    """The answer to an Attribute request (``AttributionResult``)."""

    answer: AttributionResult | None = None


@dataclass(frozen=True)
class Tokenized(Reply):
    """The answer to a Tokenize request (``TokensResult``)."""

    answer: TokensResult | None = None


@dataclass(frozen=True)
class Patched(Reply):
    """The answer to a Patch request (``PatchResult``)."""

    answer: PatchResult | None = None


@dataclass(frozen=True)
class Compared(Reply):
    """The answer to a Compare request (``CompareResult``)."""

    answer: CompareResult | None = None


@dataclass(frozen=True)
class Failed(Reply):
    """``request`` was refused and changed nothing: ``error`` is the engine's own sentence
    (``engine.errors``); ``kept``: for a refused Load, the name of the model the engine still holds
    ("" none: no model was loaded yet)."""

    request: Request | None = None
    error: str = ""
    kept: str = ""


@dataclass(frozen=True)
class PromptTooLong(Failed):
    """A SetPrompt longer than the model reads: it may run again with ``truncate``, which keeps its
    last ``keep`` tokens (the engine's figure: the context less room to generate, or fewer when the
    memory free is the limit; 0: not known)."""

    keep: int = 0


@dataclass(frozen=True)
class DownloadCancelled(Failed):
    """The person cancelled a Load's download; the model ``kept`` (its name) stays."""


@dataclass(frozen=True)
class StepCancelled(Failed):
    """The person cancelled a long prefill after block ``done`` of ``total``: no step was taken, the
    prompt and the KV cache are as they were."""

    done: int = 0
    total: int = 0


@dataclass(frozen=True)
class PatchCancelled(Failed):
    """The person cancelled a Patch after ``done`` of its ``total`` layers: no map, nothing changed."""

    done: int = 0
    total: int = 0


@dataclass(frozen=True)
class Crashed(Failed):
    """A bug, not a refusal: ``error`` names the exception and says what it said; the engine lives on."""


@dataclass(frozen=True)
class NotSent(Failed):
    """The controller's own answer: the engine is stopped (it died quickly too often), so ``request``
    was not sent."""


@dataclass(frozen=True)
class Skipped(Reply):
    """The request was skipped unrun: a paused play loop, or a step made stale by a restart."""


@dataclass(frozen=True)
class Progress(Reply):
    """A Load's download: ``done`` of ``total`` bytes (total 0: unknown); ``what`` "prefill": a long
    pass over the prompt, ``done`` of its ``total`` blocks computed (``engine.session.PROGRESS_FROM``);
    "patch": a Patch, ``done`` of its ``total`` layers patched."""

    done: int = 0
    total: int = 0
    what: str = "download"


REPLIES = (Finished, Inspected, Attributed, Tokenized, Patched, Compared, Failed, PromptTooLong, DownloadCancelled, StepCancelled,
           PatchCancelled, Crashed, NotSent, Skipped, Progress)
