"""The words a person reads about what the engine did: the window writes them from the facts the
engine sends (``app.protocol.messages`` replies, ``app.protocol.messages.Facts``), so the engine names no shortcut,
view or menu. Pure Python, no Qt.
"""

from __future__ import annotations

from engine.defaults import truncation_keeps

from app.protocol import messages as p

BRANCHES = "the Branches view, Alt+7"

UNITS = (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10))  # powers of 1,024: 414,720 B is 405.0 KiB


def duration(ms: float) -> str:
    """A pass's time as a person reads it: "83 ms" under 10 s, "12.4 s" under a minute, then "9 min 50 s"."""
    if ms < 10_000:
        return f"{ms:.0f} ms"
    if ms < 60_000:
        return f"{ms / 1000:.1f} s"
    minutes, seconds = divmod(round(ms / 1000), 60)
    return f"{minutes} min {seconds} s"


def human_bytes(n: int) -> str:
    """``n`` bytes in the largest unit of 1,024 that fits: "405.0 KiB"."""
    for unit, size in UNITS:
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"


def prefill_progress(done: int, total: int) -> str:
    """The status line while a long prompt is read: "Reading the prompt: block 12 of 30…"."""
    return f"Reading the prompt: block {done:,} of {total:,}…"


def percent(prob: float) -> str:
    """A probability as a percentage that never reads 0 while it is not: 12.3%, 0.041%, 0.0004%
    (two significant figures below 0.1 %). Every view writes probabilities with it."""
    return f"{prob:.1%}" if prob >= 0.001 or prob == 0 else f"{100 * prob:.2g}%"


RESTART = "Use Model → Restart the model to try again."


def result_status(result: p.SessionResult) -> str:
    """One sentence (or a few) for the status line about what ``result``'s request did ("": nothing to say)."""
    f, request = result.facts, result.request
    if f.stop:  # generation stopped before the request could run
        return f.stop
    if f.left_out and isinstance(request, (p.Load, p.SetPrompt, p.SetChat)):  # never dropped silently
        return f"{_status(result)} {left_out(result.info.name, f.left_out)}"
    return _status(result)


def left_out(model: str, characters) -> str:
    """The sentence for characters of a prompt the tokenizer left out (``Facts.left_out``)."""
    codes = ", ".join(f"U+{ord(c):04X}" for c in characters)
    them = "it" if len(characters) == 1 else "them"
    return f"{model}'s tokenizer has no token for {codes}: the model reads the prompt without {them}."


def _status(result: p.SessionResult) -> str:
    f, request, trace = result.facts, result.request, result.trace
    match request:
        case p.Load():
            return _load(result)
        case p.SetPrompt():
            if f.kept < f.whole:
                free = result.info.n_positions - f.kept
                what = f"cut to its last {f.kept:,} of {f.whole:,} tokens ({free:,} stay free to generate)"
            else:
                what = f"{f.kept} tokens"
            return f"Prompt: {what}. Press Step (Space) to run the prefill."
        case p.SetChat():
            return (f"Chat turn: {f.kept} tokens, written by {result.info.name}'s chat template (its special tokens are the "
                    "purple chips); the model ends its turn with its end-of-turn token. Press Step (Space) to run the prefill.")
        case p.SetStops():
            if not result.stop_sequences:
                return "No stop sequences: generation stops only at the end-of-text token or when the context is full."
            return f"Generation stops once the text reaches {_quoted(result.stop_sequences)}."
        case p.Step() | p.Play():
            return _step(result)
        case p.Back():
            if not f.moved:
                return "Already at the start: nothing to go back to."
            if trace is None:
                return f"Back before the prefill: no step shown (the steps stay as a branch: {BRANCHES})."
            return f"Back to step {trace.step} (the later steps stay as a branch: {BRANCHES})."
        case p.Choose():
            return f"Branched: step {trace.step} now takes “{trace.chosen_piece}” (chosen by you); the earlier choice stays as a branch."
        case p.Resample():
            if trace is None:
                return f"Sampling: {result.settings.describe()}."
            return f"Re-sampled step {trace.step} ({result.settings.describe()}): chose “{trace.chosen_piece}”, no forward pass."
        case p.Reset():
            return "Reset: the prompt is kept, every step and branch dropped."
        case p.SetCache(on=True):
            return "The KV cache is on: each step runs one new position against the cached keys and values."
        case p.SetCache():
            return "Generating without the KV cache: each step runs the whole sequence again, as a model without a cache must."
        case p.Switch():
            if trace is None:
                return f"Before the prefill: every branch is kept ({BRANCHES})."
            return f"Showing a branch at step {trace.step} (“{trace.chosen_piece}”), as it was: nothing was recomputed."
        case p.SaveSession():  # the file is written on the engine's saver thread: SaveWritten follows
            after = f", after {f.ahead} other save{'s' if f.ahead != 1 else ''}" if f.ahead else ""
            return f"Saving {_steps(f.steps)} on {_branches(f.branches)} to {f.path}{after}…"
        case p.SaveWritten():
            return f"Saved {_steps(f.steps)} on {_branches(f.branches)} to {f.path} ({f.size / 2**20:.1f} MiB)."
        case p.OpenSession():
            shown = f"step {trace.step}" if trace is not None else "before the prefill"
            return f"Opened {f.path}: {f.steps:,} steps on {_branches(f.branches)}, showing {shown}. {f.note}".strip()
    return ""


def _load(result: p.SessionResult) -> str:
    f, info = result.facts, result.info
    note = ""
    if f.fallback and f.why:
        note = f"Could not open {f.fallback}: {f.why} Opened the tiny demo model instead. "
    elif f.fallback:
        note = f"Download of {f.fallback} cancelled: opened the tiny demo model instead. "
    if f.chat_needs:
        note += (
            f"The chat turn does not fit: {info.name}'s chat template and the system message need {f.chat_needs:,} tokens "
            f"with one token of the user's message, more than the {truncation_keeps(info.n_positions):,} a prompt may use "
            f"({info.name} reads at most {info.n_positions:,} and keeps room to generate), so the text is a plain prompt. "
        )
    if f.kept < f.whole:  # never cut silently
        room = f"{info.name} reads at most {info.n_positions:,}, and {info.n_positions - f.kept:,} stay free to generate. "
        if result.chat is not None:
            note += (f"The chat turn was cut to {f.kept:,} of its {f.whole:,} tokens (the start of the user's message; the "
                     f"template's tokens and the system message are whole): {room}")
        else:
            note += f"The prompt was cut to its last {f.kept:,} of its {f.whole:,} tokens: {room}"
    if result.request.chat is not None and result.chat is None and not f.chat_needs:
        note += f"{info.name} has no chat template: the prompt is plain text. "
    return f"{note}Loaded {info.label} in {f.seconds:.1f} s."


def shorter_status(result: p.SessionResult) -> tuple[str, ...]:
    """Shorter forms of ``result_status(result)`` for a narrow status line, longest first: a step's
    line without its details (the prefill's positions, the time), then, when it stopped generation,
    without its numbers (why it stopped is kept whole), rather than cut at its end; () where there
    is none."""
    if result.facts.stop or not isinstance(result.request, (p.Step, p.Play)) or result.trace is None:
        return ()
    return tuple(_step(result, form) for form in ((1, 2, 3) if result.trace.stop_reason else (1, 2)))


def _step(result: p.SessionResult, form: int = 0) -> str:
    """The step's line; ``form`` 1 and 2 leave out its details: the positions read, then the time;
    3 (a step that stopped generation) keeps only the token and why it stopped."""
    trace, f = result.trace, result.facts
    rec = trace.record
    if form == 3:
        return f"Token {rec.step + 1}: “{trace.chosen_piece}”. {trace.stop_message}"
    # counted as the chips count the generated tokens (the prefill chooses token 1), the step as the views do
    what = (f"“{trace.chosen_piece}”, sampling p {percent(trace.sampling_prob)}, model p {percent(trace.model_prob)}, "
            f"rank {trace.chosen_rank:,}")
    if form == 2:
        message = f"Token {rec.step + 1}: {what}."
    elif form == 1:
        message = f"Token {rec.step + 1} ({duration(rec.forward_ms)}): {what}."
    elif rec.step == 0:
        message = f"Token 1 (prefill, {rec.n_new:,} positions, {duration(rec.forward_ms)}): {what}."
    else:
        message = f"Token {rec.step + 1} (step {rec.step}, {duration(rec.forward_ms)}): {what}."
    if result.info.remote_host:
        message += (f" It ran on {result.info.remote_host}: a full forward pass over the text so far (no KV cache is kept "
                    "between requests); the time includes the server and the network.")
    if f.catch_up:
        n, ms = f.catch_up
        message += (f" Before it, the KV cache caught up on {n:,} position{'s' if n != 1 else ''} it did not hold for "
                    f"this branch ({ms:.0f} ms, not in the step's time).")
    if trace.stop_reason:
        message += " " + trace.stop_message
        if trace.stop_reason == "end_of_text" and result.chat is not None:
            message += " That ends its turn."
    return message


def _quoted(sequences) -> str:
    """Stop sequences as a person reads them: each quoted, a newline as \\n."""
    return " or ".join(repr(s) for s in sequences)


def _steps(n: int) -> str:
    return f"{n:,} step{'s' if n != 1 else ''}"


def _branches(n: int) -> str:
    return f"{n} branch{'es' if n != 1 else ''}"


def failure(reply: p.Failed) -> str:
    """What the status line says about a refused request."""
    match reply:
        case p.Crashed():
            return f"Unexpected error: {reply.error}"
        case p.DownloadCancelled():
            return f"Download cancelled: still using {reply.kept}."
        case p.StepCancelled():
            return (f"Reading the prompt cancelled after block {reply.done:,} of {reply.total:,}: no step was "
                    "taken and the prompt is unchanged. Press Step to read it again.")
        case p.PatchCancelled():
            return (f"Patching cancelled after layer {reply.done:,} of {reply.total:,}: no map was made "
                    "and nothing changed.")
        case p.NotSent():
            return f"The model's process is stopped. {RESTART}"
    return reply.error


def engine_died(exit_code) -> str:
    """The engine's process ended without being asked to."""
    return f"The model's process stopped unexpectedly (exit code {exit_code})."


def engine_stopped(exit_code, deaths: int, quick_s: float, log_file) -> str:
    """The engine died quickly ``deaths`` times in a row and was not started again."""
    return (
        f"{engine_died(exit_code)} The model's process stopped {deaths} times in a row, each within "
        f"{quick_s:.0f} s of starting, so it was not started again. "
        + (f"Details are in the log file {log_file}. " if log_file else "")
        + RESTART
    )
