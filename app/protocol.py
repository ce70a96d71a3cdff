"""Every request the window sends to the engine, every reply it sends back, and the control values
the window may set there.

One small frozen dataclass per request kind and per reply kind: this module is the whole protocol.
The receiver matches on the classes, never on a name. Each request
carries the ``generation`` the controller numbered it with (newer requests make older results
stale). Requests that can reach a fresh or reloaded engine (``Load``, ``SetPrompt``, ``Reset``,
``Resample``) carry the sampling settings the person chose last, so an engine never runs on
settings the window does not show. Standard library and numpy types only: the window's process
imports this, and imports no torch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from engine.chat import ChatTurn
from engine.defaults import DEFAULT_SETTINGS
from engine.sampling import SamplingSettings

if TYPE_CHECKING:
    from .result import InsideResult, MapResult, SessionResult


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
    (a model without one gets the plain prompt); ``stop_sequences``: the window's."""

    kind: ClassVar[str] = "load"

    source: str | None = None
    prompt: str = ""
    fallback: bool = False
    settings: SamplingSettings = DEFAULT_SETTINGS
    use_cache: bool = True
    loaded: Any = None
    chat: ChatTurn | None = None
    stop_sequences: tuple[str, ...] = ()


@dataclass(frozen=True)
class SetPrompt(Request):
    """Use ``text`` as the prompt (dropping every step); too long is refused unless ``truncate``."""

    kind: ClassVar[str] = "prompt"

    text: str = ""
    truncate: bool = False
    settings: SamplingSettings = DEFAULT_SETTINGS


@dataclass(frozen=True)
class SetChat(Request):
    """Use ``turn`` (a system message and a user message) as the prompt, rendered by the model's own
    chat template (``engine.chat``), dropping every step; refused for a model without a template."""

    kind: ClassVar[str] = "chat"

    turn: ChatTurn = ChatTurn()
    settings: SamplingSettings = DEFAULT_SETTINGS


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

    settings: SamplingSettings = DEFAULT_SETTINGS


@dataclass(frozen=True)
class Reset(Request):
    """Drop every step, keep the prompt; use ``settings`` from now on."""

    kind: ClassVar[str] = "reset"

    settings: SamplingSettings = DEFAULT_SETTINGS


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
class AttentionMap(Inspect):
    """One head's whole attention pattern at the pass of history step ``step``, ``layer``, ``head``,
    recomputed by the engine (``engine.attention.head_map``): a long prefill keeps only a sample of
    its rows (``engine.trace.StepRecord.attn``). A view's question, as an Inspect is (it neither changes
    the session nor ends a play loop); answered by ``Inspected`` with an ``app.result.MapResult``."""

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
    """Write the whole session (every branch) to the file ``path`` (``engine.session_file``)."""

    kind: ClassVar[str] = "save"
    path: str = ""


@dataclass(frozen=True)
class SaveWritten(Request):
    """The host's own request, queued by its saver's thread (``app.saver``) when the file of the
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
    settings: SamplingSettings = DEFAULT_SETTINGS  # the person's, kept if the file is refused


@dataclass(frozen=True)
class Refresh(Request):
    """Send the session as it stands, unchanged (after a failed load dropped results as stale)."""

    kind: ClassVar[str] = "refresh"


REQUESTS = (Load, SetPrompt, SetChat, SetStops, Step, Play, Back, Choose, Resample, Reset, SetCache, Inspect, AttentionMap, Switch,
            SaveSession, OpenSession, Refresh)
RESTARTS = (Load, SetPrompt, SetChat, Reset, OpenSession)  # after one of these, results of older requests are stale
KEPT_ON_RESTART = (Load, SaveSession, SetStops)  # still run after a restart (a save's result is stale, its message is not; stop sequences are the person's)
COALESCING = (Step, Resample, Choose, Inspect, AttentionMap, Switch)  # a newer one replaces an older one still waiting

CONTROLS = ("play_generation", "latest_barrier", "cancel_load")
"""The host attributes the window may set while a request runs (and nothing else):
``play_generation``, the Play request still wanted (0: none); ``latest_barrier``, the newest
restart: a Step older than it is skipped unrun; ``cancel_load``, the generation of a Load whose
download the person cancelled: it stops at its next progress report."""



# ------------------------------------------------------------------ replies
@dataclass(frozen=True)
class Reply:
    """Base of every reply the engine sends up, one per request (a download also sends Progress);
    ``generation``: the request it answers."""

    generation: int = 0


@dataclass(frozen=True)
class Finished(Reply):
    """``result`` (``app.result.SessionResult``): the session as the request left it; its ``request``
    says which request that was (a play loop's steps are Step)."""

    result: "SessionResult | None" = None


@dataclass(frozen=True)
class Inspected(Reply):
    """The answer to an Inspect request (``app.result.InsideResult``) or an AttentionMap
    (``app.result.MapResult``)."""

    answer: "InsideResult | MapResult | None" = None


@dataclass(frozen=True)
class Failed(Reply):
    """``request`` was refused and changed nothing: ``error`` is the engine's own sentence
    (``engine.errors``)."""

    request: Request | None = None
    error: str = ""


@dataclass(frozen=True)
class PromptTooLong(Failed):
    """A SetPrompt longer than the model reads: it may run again with ``truncate`` (its last tokens)."""


@dataclass(frozen=True)
class DownloadCancelled(Failed):
    """The person cancelled a Load's download; the model ``kept`` (its name) stays."""

    kept: str = ""


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
    """A Load's download: ``done`` of ``total`` bytes (total 0: unknown)."""

    done: int = 0
    total: int = 0


REPLIES = (Finished, Inspected, Failed, PromptTooLong, DownloadCancelled, Crashed, NotSent, Skipped, Progress)
