"""A generation session: one prompt, its KV cache, its settings and the history of steps.

Not thread-safe: exactly one thread (the GUI's worker, or the terminal) owns a session.
"""

from __future__ import annotations

from contextlib import nullcontext
from dataclasses import replace
from time import perf_counter
from typing import Callable

import numpy as np
import torch

from . import families, hf_compat, hooks, sampling
from .branches import ROOT, BranchTable, BranchTree
from .chat import ChatTurn, chat_prompt_ids, fit_chat_turn
from . import memory
from .memory import release_freed_memory
from .defaults import truncation_keeps
from .loaded_model import LoadedModel
from .errors import GenerationStopped, PromptError, PromptTooLong, SessionError
from .projection import Projection
from .sampling import Distribution, SamplingSettings
from .trace import N_CANDIDATES, KVStats, StepRecord, StepTrace, pattern_rows

TRIM_EVERY = 32  # steps between handing freed heap memory back to the OS (see memory.release_freed_memory)

# What each step keeps of the hook points (hooks.HOOK_POINTS): the newest position's attention and
# MLP outputs in float16 (2 x L x d x 2 B: 36 KiB a step at GPT-2 small); everything else on the path
# is recomputed on demand by engine.inside.
_NEWEST = hooks.Keep(rows=slice(-1, None))
_NEWEST_F16 = hooks.Keep(rows=slice(-1, None), dtype=torch.float16)
STEP_HOOKS = {
    "hook_embed": hooks.ALL,
    "hook_pos_embed": hooks.ALL,
    "blocks.0.hook_resid_pre": hooks.ALL,
    "blocks.{L}.attn.hook_pattern": hooks.Keep(dtype=torch.float16),
    "blocks.{L}.hook_attn_out": _NEWEST_F16,
    "blocks.{L}.hook_mlp_out": _NEWEST_F16,
    "blocks.{L}.hook_resid_post": hooks.ALL,
    "ln_final.hook_out": _NEWEST,
    "blocks.{L}.mlp.hook_expert_indices": _NEWEST,  # a mixture of experts: the experts chosen [1, k]
}



def step_hooks(model, rows: np.ndarray | None = None, *, from_start: bool = False,
               resid: torch.Tensor | None = None) -> dict[str, hooks.Keep]:
    """STEP_HOOKS that exist in ``model``'s family (a RoPE model has no hook_pos_embed), the attention
    pattern kept at the fed positions ``rows`` (indices into the pass; None: every one).

    ``from_start``: the pass feeds every position from 0 (a prefill, or no cache) and runs with SDPA
    attention, which never builds a [heads, P, P] tensor and returns no weights: the kept rows of
    ``hook_attn_scores`` are recorded through their softmax, which is hook_pattern ([1, H, r, T] float16).
    ``resid``: float32 [L + 1, n, d] made beforehand: each block's input and output is copied into it
    as the block finishes (the newest n positions), rather than every block's output kept to the end."""
    points = families.family_of(model).points
    keep = {name: keep for name, keep in STEP_HOOKS.items() if name.replace("blocks.0.", "blocks.{L}.") in points}
    at = None if rows is None else torch.from_numpy(np.asarray(rows, dtype=np.int64))
    if from_start:
        del keep["blocks.{L}.attn.hook_pattern"]
        keep["blocks.{L}.attn.hook_attn_scores"] = hooks.Keep(rows=at, softmax=True, dtype=torch.float16)
    else:
        keep["blocks.{L}.attn.hook_pattern"] = hooks.Keep(rows=at, dtype=torch.float16)
    if resid is not None:
        newest = slice(-resid.shape[1], None)
        del keep["blocks.0.hook_resid_pre"], keep["blocks.{L}.hook_resid_post"]
        keep["blocks.0.hook_resid_pre"] = hooks.Keep(rows=newest, out=resid[0])
        keep |= {f"blocks.{i}.hook_resid_post": hooks.Keep(rows=newest, out=resid[i + 1]) for i in range(len(resid) - 1)}
    return keep


PROGRESS_FROM = 512  # a pass over this many positions or more tells ``Session.progress`` block by block


def _progress_hooks(model, n_layers: int, report: Callable[[int, int], None]) -> list:
    """Forward hooks on every block that call ``report(i + 1, n_layers)`` as block i finishes; the
    handles, to remove. Nothing is recorded: the values are not touched."""
    table = hooks.hook_table(n_layers, families.family_of(model).points)
    handles = []
    for i in range(n_layers):
        module = model.get_submodule(table[f"blocks.{i}.hook_resid_post"].module)
        handles.append(module.register_forward_hook(lambda *_, done=i + 1: report(done, n_layers)))
    return handles


STOP_MESSAGES = {
    "end_of_text": "Stopped: the model chose {eos}.",  # <|endoftext|>; an instruct model's end of turn, <|im_end|>
    "max_new_tokens": "Stopped: reached the limit of {limit} new tokens.",
    "context_full": "Stopped: the context window of {capacity} positions is full.",
    "stop_sequence": "Stopped: the text reached the stop sequence {sequence!r}.",
}


class Session:
    """Steps a model of any family in engine.families through a prompt one token at a time, recording each step.

    Step 0 (prefill) runs the whole prompt in one forward pass and fills the KV cache; each later
    step runs only the newest token against the cache. ``rewind``, ``choose`` and ``resample``
    change the history without re-running the model where they can.

    Nothing taken is lost: every step lives in a tree of branches (``engine.branches``). The
    history (``records``) is the path to the current node; a different token at some step starts a
    new branch beside the earlier one, and ``switch`` moves to any node. Back and switching keep the
    KV cache's positions the new path shares with the old one; before the next step, one catch-up
    pass gives it the rest (``_catch_up``).

    With ``use_cache=False`` every step runs the whole sequence through the model, as a model
    without a KV cache must, and nothing is cached; the records are the same (the rows of the newest
    positions), only slower. The switch may be flipped between steps: turned back on, the next step
    rebuilds the cache from the whole sequence.
    """

    def __init__(
        self,
        loaded: LoadedModel,
        settings: SamplingSettings | None = None,
        *,
        max_new_tokens: int | None = None,
        use_cache: bool = True,
        stop_sequences: tuple[str, ...] | list[str] = (),
    ):
        self.loaded = loaded
        self.settings = settings or SamplingSettings()
        if max_new_tokens is not None and max_new_tokens < 1:
            raise SessionError(f"max_new_tokens must be at least 1 (got {max_new_tokens})")
        self.max_new_tokens = max_new_tokens
        self.stop_sequences = stop_sequences
        self.chat: ChatTurn | None = None  # the chat turn the prompt was made from (set_chat), or None
        self._prompt_ids: list[int] = []
        self._records: list[StepRecord] = []  # the current path's records, prefill first
        self._path: list[int] = []  # their node ids in the tree
        self.tree = BranchTree()
        self._cache = None
        self._latest_dist: Distribution | None = None
        self._use_cache = bool(use_cache) and _keeps_cache(loaded)  # a remote step keeps no cache
        self.last_catch_up: tuple[int, float] | None = None  # the last step's cache catch-up (see _catch_up)
        # called with (blocks done, blocks) as each block of a pass over PROGRESS_FROM positions or more
        # finishes (the window's status line shows a long prefill's progress); None: not told
        self.progress: Callable[[int, int], None] | None = None

    # ----------------------------------------------------------------- state
    @property
    def use_cache(self) -> bool:
        """Whether steps use the KV cache; False drops it at once (see the class docstring)."""
        return self._use_cache

    @use_cache.setter
    def use_cache(self, on: bool) -> None:
        self._use_cache = bool(on) and _keeps_cache(self.loaded)
        if not on:
            self._cache = None

    @property
    def stop_sequences(self) -> tuple[str, ...]:
        """Generation stops once the text it writes reaches one of these (``stop_sequence_reached``)."""
        return self._stop_sequences

    @stop_sequences.setter
    def stop_sequences(self, sequences) -> None:
        if any(not isinstance(text, str) or not text for text in sequences):
            raise SessionError("A stop sequence must be at least one character of text.")
        self._stop_sequences = tuple(sequences)

    @property
    def info(self):
        return self.loaded.info

    @property
    def prompt_ids(self) -> list[int]:
        return list(self._prompt_ids)

    @property
    def records(self) -> tuple[StepRecord, ...]:
        return tuple(self._records)

    @property
    def n_steps(self) -> int:
        return len(self._records)

    def token_ids(self) -> np.ndarray:
        """int64 [P + S]: the prompt then every chosen token."""
        return np.array(self._prompt_ids + [r.chosen for r in self._records], dtype=np.int64)

    def text(self) -> str:
        return self.loaded.tokenizer.decode(self.token_ids())

    def cache_length(self) -> int:
        return hf_compat.cache_length(self._cache)

    def kv_prefix(self, length: int):
        """A copy of the KV cache's first ``length`` positions, or None when there is no cache or it
        holds fewer: lets engine.inside recompute one position the way a decode step computes it."""
        if self._cache is None or length < 1 or self.cache_length() < length:
            return None
        return hf_compat.copy_prefix(self._cache, length, self.loaded.model.config)

    def cached_kv(self, layer: int, head: int) -> tuple[np.ndarray, np.ndarray]:
        """(keys, values), each float32 [T, dh]: what the KV cache holds for one layer and query head, one
        row per cached position (T = 0 when nothing is cached). With grouped heads that is the
        key/value head the query head shares: head // (n_head / n_kv_heads)."""
        info = self.info
        if not (0 <= layer < info.n_layer and 0 <= head < info.n_head):
            raise SessionError(f"There is no layer {layer}, head {head} (layers 0 to {info.n_layer - 1}, heads 0 to {info.n_head - 1}).")
        layers = hf_compat.layer_tensors(self._cache)
        if not layers:
            empty = np.zeros((0, info.head_dim), dtype=np.float32)
            return empty, empty.copy()
        keys, values = layers[layer]  # [batch, kv_heads, T, dh]
        kv_head = head // (info.n_head // info.kv_heads)  # query heads share key/value heads in runs
        return keys[0, kv_head].float().cpu().numpy().copy(), values[0, kv_head].float().cpu().numpy().copy()

    def query(self, layer: int, head: int, step: int | None = None) -> np.ndarray:
        """float32 [dh]: the query of the newest position computed at ``step`` (default: the latest)
        for one layer and head: the vector compared with every cached key, so that
        softmax(keys @ query / sqrt(dh)) is that position's attention row. Computed from the recorded
        residual stream through the block's own ln_1 and c_attn (one position: well under a millisecond)."""
        info = self.info
        if not (0 <= layer < info.n_layer and 0 <= head < info.n_head):
            raise SessionError(f"There is no layer {layer}, head {head} (layers 0 to {info.n_layer - 1}, heads 0 to {info.n_head - 1}).")
        record = self.trace(step).record if step is not None else self._current("read a query")
        model = self.require_model("compute a query")
        dh = info.head_dim
        x = torch.from_numpy(record.resid[layer, -1:]).to(model.device, model.dtype)  # [1, d]: block L's input (resid[L] is its resid_pre)
        with torch.inference_mode():
            if families.family_of(model).rope:  # the rotated query, at this position: what meets the cached keys
                block = model.model.layers[layer]
                position = torch.tensor([record.end - 1], device=model.device)
                rope = hf_compat.rotary_embeddings(model, position)
                q, _ = hf_compat.rotated_qk(block.self_attn, block.input_layernorm(x)[None], rope)  # [1, H, 1, dh]
                return q[0, head, 0].float().cpu().numpy().copy()
            block = model.transformer.h[layer]
            q = block.attn.c_attn(block.ln_1(x))[0, : info.d_model]  # [d]: queries of every head
        return q[head * dh : (head + 1) * dh].float().cpu().numpy().copy()

    @property
    def projection(self) -> Projection:
        """The model's fixed PCA basis (owned by the loaded model: fitted once per model)."""
        return self.loaded.projection

    # ---------------------------------------------------------------- prompt
    def set_prompt(self, text: str, *, truncate: bool = False) -> list[int]:
        """Tokenize ``text`` and start over. A prompt longer than the context window is an error,
        unless ``truncate`` keeps its last ``truncation_keeps(n_positions)`` tokens (room to generate)."""
        if not isinstance(text, str):
            raise PromptError("The prompt must be text.")
        if not text:
            raise PromptError("The prompt is empty: type at least one character.")
        ids = self.loaded.tokenizer.encode(text)
        capacity = self.info.n_positions
        fits = self.positions_that_fit()
        if len(ids) > fits and fits < truncation_keeps(capacity):  # memory, not the context, is the limit
            if not truncate:
                raise PromptTooLong(self._too_big_message(len(ids), fits), tokens=len(ids), keep=fits)
            ids = ids[-fits:]
        elif len(ids) > capacity:
            keep = truncation_keeps(capacity)
            if not truncate:
                raise PromptTooLong(
                    f"The prompt is {len(ids):,} tokens long but {self.info.name} reads at most "
                    f"{capacity:,} tokens. Shorten it, or choose to keep only its last {keep:,} tokens "
                    f"(room to generate {capacity - keep:,}).",
                    tokens=len(ids), keep=keep,
                )
            ids = ids[-keep:]
        self._prompt_ids, self.chat = ids, None
        self.reset()
        return list(ids)

    def positions_that_fit(self) -> int:
        """How many prompt positions a prefill can take in the memory the machine has free now
        (``engine.memory``); the model's context when that is not known."""
        return memory.positions_that_fit(self.info, _mlp_width(self.loaded.model, self.info.d_model), memory.available_bytes())

    def _too_big_message(self, tokens: int, fits: int, what: str = "The prompt is") -> str:
        free = memory.available_bytes() or 0
        return (f"{what} {tokens:,} tokens long, but this machine has {free / 2**30:.1f} GB of memory free: "
                f"about {fits:,} tokens fit. Shorten the prompt, or choose to keep only its last {fits:,} tokens.")

    def set_chat(self, turn: ChatTurn, *, truncate: bool = False) -> list[int]:
        """Start over from ``turn`` rendered by the model's own chat template (engine.chat): the
        template's special tokens are part of the prompt, and the model ends its turn with its
        end-of-text token (``<|im_end|>``), which stops generation. A turn longer than the context
        window is an error, unless ``truncate`` cuts the start of the user's message so that the turn
        takes at most ``truncation_keeps(n_positions)`` tokens (``chat`` is then the cut turn;
        ``ChatTurnTooLong`` when the template and the system message alone leave no room)."""
        tokenizer, capacity = self.loaded.tokenizer, self.info.n_positions
        ids = chat_prompt_ids(tokenizer, turn.user, turn.system or None)
        if truncate and len(ids) > capacity:
            turn, ids = fit_chat_turn(tokenizer, turn, truncation_keeps(capacity))
        ids = self.set_prompt_ids(ids)
        self.chat = turn
        return ids

    def set_prompt_ids(self, ids) -> list[int]:
        """Start over from token ids as they are (a reopened session file's prompt), no tokenizer needed."""
        ids = [int(i) for i in ids]
        if not ids:
            raise PromptError("The prompt is empty: it needs at least one token.")
        if min(ids) < 0 or max(ids) >= self.info.vocab_size:
            raise PromptError(f"A prompt token id is outside the vocabulary (0 to {self.info.vocab_size - 1}).")
        if len(ids) > self.info.n_positions:
            raise PromptError(f"The prompt is {len(ids):,} tokens long but {self.info.name} reads at most {self.info.n_positions:,}.")
        self._prompt_ids, self.chat = ids, None
        self.reset()
        return list(ids)

    def reset(self) -> None:
        """Drop every step, every branch and the cache; keep the prompt."""
        self._records, self._path = [], []
        self.tree.clear()
        self._cache = None
        self._latest_dist = None

    # -------------------------------------------------------------- branches
    @property
    def node(self) -> int:
        """The tree node of the current step (``branches.ROOT`` before the prefill)."""
        return self._path[-1] if self._path else ROOT

    def branches(self) -> BranchTable:
        """The tree of every branch taken, for drawing and comparing."""
        return self.tree.table(self.node)

    def switch(self, node: int) -> StepTrace | None:
        """Show the branch through ``node`` as it was, up to ``node``: no forward pass. The KV cache
        keeps the positions the old and new paths share; the next step computes the rest."""
        if node != ROOT and node not in self.tree:
            raise SessionError(f"There is no branch node {node} (it may have been dropped to save memory).")
        self._follow(self.tree.path(node))
        return self.trace() if self._records else None

    def _follow(self, path: list[int]) -> None:
        """Make ``path`` the current history, cropping the cache to the tokens it shares with the old one."""
        records = [self.tree.record(n) for n in path]
        old_fed = self._prompt_ids + [r.chosen for r in self._records[:-1]]  # what the cache's positions read
        new_fed = self._prompt_ids + [r.chosen for r in records[:-1]]
        shared = 0
        while shared < min(len(old_fed), len(new_fed)) and old_fed[shared] == new_fed[shared]:
            shared += 1
        keep = min(self.cache_length(), shared, records[-1].end if records else 0)
        if keep == 0:
            self._cache = None
        else:
            hf_compat.crop_cache(self._cache, keep)
        self._path, self._records = list(path), records
        self._latest_dist = None
        self.tree.visit(self._path)

    def _take(self, parent: int, record: StepRecord) -> None:
        """Put ``record`` in the tree under ``parent`` and make it the current step."""
        node = self.tree.put(parent, record, self.loaded.tokenizer.piece(record.chosen))
        self._path = self._path[: record.step] + [node]
        self._records = self._records[: record.step] + [record]
        self.tree.visit(self._path)
        self.tree.prune(self._path)

    # ------------------------------------------------------------- stepping
    def require_model(self, what: str, *, weights: bool = True):
        """The model, or SessionError when this session was opened from a file without it, or when
        ``weights`` are needed and the model runs on a remote server (only its architecture is here)."""
        if self.loaded.model is None:
            raise SessionError(self.loaded.missing_reason or f"No model is loaded to {what} with.")
        if weights and self.info.remote_host:
            raise SessionError(f"{self.info.name} runs on {self.info.remote_host}: its weights are not here to {what} with "
                               "(a remote step brings back what the step's views show; the Inside view recomputes with the weights).")
        return self.loaded.model

    def stop_reason(self) -> tuple[str | None, str]:
        """(reason, message) if no further step can run, else (None, "")."""
        if not self._records:
            return None, ""
        last = self._records[-1]
        sequence = self.stop_sequence_reached()
        if last.chosen == self.loaded.tokenizer.eos_id:
            reason = "end_of_text"
        elif sequence is not None:
            reason = "stop_sequence"
        elif self.max_new_tokens is not None and len(self._records) >= self.max_new_tokens:
            reason = "max_new_tokens"
        elif last.end + 1 > self.info.n_positions:
            reason = "context_full"
        else:
            return None, ""
        eos = getattr(getattr(self.loaded.tokenizer, "hf", None), "eos_token", None) or "<|endoftext|>"  # a file's saved tokens have no hf
        message = STOP_MESSAGES[reason].format(limit=self.max_new_tokens, capacity=self.info.n_positions, eos=eos,
                                               sequence=sequence)
        return reason, message

    def stop_sequence_reached(self) -> str | None:
        """The first of ``stop_sequences`` whose bytes end within the newest token's, else None.

        Checked after every step, so each occurrence is found by the step whose token completes it;
        a stop sequence may span several tokens, and the prompt before them (never the prompt alone).
        """
        if not self._records or not self.stop_sequences:
            return None
        token_bytes = self.loaded.tokenizer.token_bytes
        ids = self._prompt_ids + [r.chosen for r in self._records]
        for sequence in self.stop_sequences:
            wanted = sequence.encode("utf-8")
            tail = [token_bytes(i) for i in ids[-len(wanted):]]  # every token is at least one byte
            text = b"".join(tail)
            found = text.rfind(wanted)
            if found >= 0 and found + len(wanted) > len(text) - len(tail[-1]):
                return sequence
        return None

    def step(self) -> StepTrace:
        """Run the next forward pass (prefill first) and choose a token."""
        if not self._prompt_ids:
            raise SessionError("Set a prompt before stepping.")
        reason, message = self.stop_reason()
        if reason:
            raise GenerationStopped(reason, message)
        start, new_ids = self.next_input()
        fed = len(new_ids) if self._use_cache and self.cache_length() >= start else start + len(new_ids)
        if fed > 1 and fed > (fits := self.positions_that_fit()):  # a pass over many positions: will it fit?
            raise SessionError(self._too_big_message(fed, fits, "The next step reads a text"))
        record, dist = self._run(len(self._records), start, new_ids)
        self._take(self.node, record)
        self._latest_dist = dist
        if len(self._records) % TRIM_EVERY == 0:
            release_freed_memory()
        return self.trace()

    def next_input(self) -> tuple[int, list[int]]:
        """(start, token ids) the next step feeds: the prompt at the prefill, then the token chosen last."""
        if not self._records:
            return 0, list(self._prompt_ids)
        return self._records[-1].end, [self._records[-1].chosen]

    def _run(self, step: int, start: int, new_ids: list[int]) -> tuple[StepRecord, Distribution]:
        """One forward pass with every hook recorded. On any failure the cache is restored.

        With the cache, only ``new_ids`` are fed: a cache holding fewer than ``start`` positions (after
        Back, a switch to another branch, or the cache switched back on) first catches up
        (``_catch_up``), so the step itself is always an ordinary one. Without it (no-cache mode)
        the whole sequence is fed and the newest n rows are kept.
        """
        model = self.require_model("compute a step", weights=False)  # the backend runs it, here or on a server
        t_step = perf_counter()
        n_layers, n = self.info.n_layer, len(new_ids)
        whole = self._context(step).tolist()  # positions 0..start + n - 1
        self.last_catch_up = None
        if self._use_cache and self.cache_length() < start:
            self._catch_up(whole[:start])
        cached = self.cache_length() if self._use_cache else 0
        fed = new_ids if self._use_cache else whole
        if not self._use_cache:
            self._cache = None
        in_place = self.loaded.backend.records_in_place  # engine.hooks: kept rows of SDPA's scores, the stream as it goes
        from_start = cached == 0 and in_place  # every position from 0: SDPA, the kept rows' scores recorded (step_hooks)
        rows = pattern_rows(start, n)  # the query positions whose attention rows the record keeps
        resid = torch.empty((n_layers + 1, n, self.info.d_model)) if in_place else None  # filled by the hooks
        keep = step_hooks(model, rows - cached, from_start=from_start, resid=resid)
        told = _progress_hooks(model, n_layers, self.progress) if self.progress and in_place and len(fed) >= PROGRESS_FROM else []
        try:
            with torch.inference_mode(), (hf_compat.attention(model, "sdpa") if from_start else nullcontext()):
                t_fwd = perf_counter()
                rec, logits, self._cache = self.loaded.backend.forward(  # engine.step_backend: hooks or nnsight
                    model, n_layers, torch.tensor([fed], dtype=torch.long), self._cache, use_cache=self._use_cache,
                    keep=keep, n_new=n,
                )
                forward_ms = (perf_counter() - t_fwd) * 1e3
                record_arrays = _step_arrays(rec, n_layers, self.info.d_model, n, logits, from_start, resid)
            if self._use_cache and self.cache_length() != start + n:
                raise RuntimeError(f"the KV cache holds {self.cache_length()} positions, expected {start + n}")
            dist = sampling.distribution(record_arrays["logits"], self._context(step), self.settings)
            drawn = sampling.draw(dist, step)
        except BaseException:
            self._restore_cache(cached)
            raise
        finally:
            for handle in told:
                handle.remove()
        record = StepRecord(
            step=step,
            start=start,
            input_ids=np.array(new_ids, dtype=np.int64),
            attn_rows=rows,
            kv=self._kv_stats(),
            forward_ms=forward_ms,
            step_ms=(perf_counter() - t_step) * 1e3,
            settings=self.settings,
            chosen=drawn.token,
            chosen_by="greedy" if self.settings.is_greedy else "sampled",
            draw_u=drawn.u,
            **record_arrays,
        )
        return record, dist

    def _catch_up(self, tokens: list[int]) -> None:
        """Give the cache the positions of ``tokens`` it lacks (it holds their first ones, or none) in one
        forward pass, unrecorded and untimed as a step: the step that follows is then the ordinary
        one-position decode step its record says. ``last_catch_up`` = (positions fed, milliseconds)."""
        cached = self.cache_length()
        if cached == 0:
            self._cache = None
        t0 = perf_counter()
        try:
            with torch.inference_mode(), hf_compat.attention(self.loaded.model, "sdpa"):  # never [heads, n, T]
                _, self._cache = hf_compat.forward(self.loaded.model, torch.tensor([tokens[cached:]], dtype=torch.long), self._cache)
        except BaseException:
            self._restore_cache(cached)
            raise
        self.last_catch_up = (len(tokens) - cached, (perf_counter() - t0) * 1e3)

    def _restore_cache(self, cached: int) -> None:
        """After a failed forward pass: the cache as it held ``cached`` positions before it (none: no cache)."""
        if self._cache is not None and cached:
            hf_compat.crop_cache(self._cache, cached)
        else:
            self._cache = None

    def _kv_stats(self) -> KVStats:
        layers = hf_compat.layer_tensors(self._cache)
        if not layers:  # no cache: every layer holds 0 positions
            zeros = np.zeros(self.info.n_layer, dtype=np.int64)
            itemsize = self.loaded.model.dtype.itemsize
            return KVStats(zeros, zeros.copy(), 0, itemsize, self.info.d_model, self.info.n_positions, *self.info.kv_widths())
        keys = np.array([k.shape[-2] for k, _ in layers], dtype=np.int64)
        values = np.array([v.shape[-2] for _, v in layers], dtype=np.int64)
        per_layer = np.array([k.numel() * k.element_size() + v.numel() * v.element_size() for k, v in layers], dtype=np.int64)
        return KVStats(
            key_positions=keys,
            value_positions=values,
            total_bytes=int(per_layer.sum()),
            bytes_per_value=layers[0][0].element_size() if layers else 4,
            d_model=self.info.d_model,
            capacity=self.info.n_positions,
            kv_width=self.info.kv_widths()[0],
            full_width=self.info.kv_widths()[1],
        )

    # ------------------------------------------------------- changing history
    def rewind(self, step: int) -> StepTrace | None:
        """Go back to step ``step`` of the current branch (-1: before the prefill); the later steps stay
        in the tree, where ``switch`` finds them. Returns the new current trace."""
        if not -1 <= step < len(self._records):
            raise SessionError(f"There is no step {step} to go back to (steps 0 to {len(self._records) - 1}).")
        self._follow(self._path[: step + 1])
        return self.trace() if self._records else None

    def choose(self, token_id: int) -> StepTrace:
        """Take ``token_id`` at the current step instead of the drawn one: the next step continues from it."""
        record = self._current("choose a token")
        if not 0 <= int(token_id) < self.info.vocab_size:
            raise SessionError(f"Token id {token_id} is not in the vocabulary (0 to {self.info.vocab_size - 1}).")
        self._take(self._parent(), replace(record, chosen=int(token_id), chosen_by="user", draw_u=float("nan")))
        return self.trace()

    def resample(self, settings: SamplingSettings | None = None) -> StepTrace:
        """Re-draw the current step's token under ``settings`` (default: the session's), no forward pass.
        The settings also apply to later steps."""
        if settings is not None:
            self.settings = settings
        record = self._current("re-sample")
        context = self._context(record.step)
        dist = sampling.distribution(record.logits, context, self.settings)
        drawn = sampling.draw(dist, record.step)
        chosen_by = "greedy" if self.settings.is_greedy else "sampled"
        self._take(self._parent(), replace(record, settings=self.settings, chosen=drawn.token, chosen_by=chosen_by, draw_u=drawn.u))
        self._latest_dist = dist
        return self.trace()

    def _parent(self) -> int:
        """The tree node the current step hangs from."""
        return self._path[-2] if len(self._path) > 1 else ROOT

    def _current(self, what: str) -> StepRecord:
        if not self._records:
            raise SessionError(f"Step at least once before trying to {what}.")
        return self._records[-1]

    def _context(self, step: int) -> np.ndarray:
        return np.array(self._prompt_ids + [r.chosen for r in self._records[:step]], dtype=np.int64)

    # ---------------------------------------------------------------- views
    def trace(self, step: int | None = None) -> StepTrace:
        """The full view of ``step`` (default: the latest) for drawing."""
        if not self._records:
            raise SessionError("No step has run yet.")
        index = len(self._records) - 1 if step is None else step
        if not 0 <= index < len(self._records):
            raise SessionError(f"There is no step {step} (steps 0 to {len(self._records) - 1}).")
        record = self._records[index]
        context = self._context(index)
        latest = index == len(self._records) - 1
        dist = self._latest_dist if latest else None
        if dist is None or dist.settings != record.settings:
            dist = sampling.distribution(record.logits, context, record.settings)
            if latest:
                self._latest_dist = dist
        tokenizer = self.loaded.tokenizer
        reason, message = self.stop_reason() if latest else (None, "")
        logits = record.logits
        candidates = dist.top(N_CANDIDATES, by=dist.after_penalty)
        return StepTrace(
            record=record,
            context_ids=context,
            pieces=tuple(tokenizer.piece(i) for i in context),
            prompt_len=len(self._prompt_ids),
            distribution=dist,
            chosen_piece=tokenizer.piece(record.chosen),
            chosen_prob=float(dist.probs[record.chosen]),
            chosen_rank=int((logits > logits[record.chosen]).sum()) + 1,
            entropy_bits=dist.entropy_bits(),
            candidate_ids=candidates.astype(np.int64),
            candidate_pieces=tuple(tokenizer.piece(i) for i in candidates),
            stop_reason=reason,
            stop_message=message,
        )


def _keeps_cache(loaded) -> bool:
    """Whether ``loaded``'s steps may keep a KV cache (engine.step_backend; a session file's view-only
    model has no backend: it never steps)."""
    backend = getattr(loaded, "backend", None)
    return backend is None or backend.keeps_cache


WARM_UP_PROMPT = "Hello, this warms the model up"


def warm_up(loaded: LoadedModel) -> None:
    """Take a prefill and one decode step on a short prompt, with every hook, and drop them: the
    first pass after a load does torch's one-off start-up work (measured 3 to 7 times a later
    pass), which would otherwise be reported as the prefill's time. Costs two short passes."""
    session = Session(loaded, SamplingSettings())
    session.set_prompt(WARM_UP_PROMPT)
    session.step()
    session.step()


def _step_arrays(rec: dict[str, torch.Tensor], n_layers: int, d: int, n: int, logits: torch.Tensor,
                 from_start: bool, resid: torch.Tensor | None) -> dict[str, np.ndarray]:
    """The StepRecord arrays of the newest ``n`` positions from one step's captured hook points (see
    step_hooks; without the cache the whole sequence was fed; ``resid`` was filled by the hooks)."""
    layers = range(n_layers)
    name = "blocks.{i}.attn.hook_attn_scores" if from_start else "blocks.{i}.attn.hook_pattern"  # both: hook_pattern's rows
    attn = torch.stack([rec.pop(name.format(i=i))[0] for i in layers])  # [L, H, r, T] float16
    if resid is None:  # a backend that keeps every hooked value to the end (nnsight)
        resid = torch.stack(
            [_rows(rec["blocks.0.hook_resid_pre"][0], n)] + [_rows(rec[f"blocks.{i}.hook_resid_post"][0], n) for i in layers]
        )  # [L + 1, n, d]
    return dict(
        token_embed=_rows(rec["hook_embed"].reshape(-1, d), n).float().cpu().numpy(),  # [n, d]
        pos_embed=_pos_embed(rec, d, n),  # [n, d]
        attn=attn.cpu().numpy(),
        resid=resid.float().cpu().numpy(),  # [L + 1, n, d]
        attn_out=torch.cat([rec[f"blocks.{i}.hook_attn_out"][0] for i in layers]).cpu().numpy(),  # [L, d] float16
        mlp_out=torch.cat([rec[f"blocks.{i}.hook_mlp_out"][0] for i in layers]).cpu().numpy(),  # [L, d] float16
        final_hidden=rec["ln_final.hook_out"][0, -1].float().cpu().numpy().copy(),  # [d]
        logits=logits[0, -1].float().cpu().numpy().copy(),  # [V]
        experts=(torch.cat([rec[f"blocks.{i}.mlp.hook_expert_indices"] for i in layers]).cpu().numpy().astype(np.int64)
                 if "blocks.0.mlp.hook_expert_indices" in rec else None),  # [L, k]
    )


def _pos_embed(rec: dict[str, torch.Tensor], d: int, n: int) -> np.ndarray:
    """float32 [n, d]: hook_pos_embed; zeros for a RoPE model, which adds no position vector to the
    residual stream (its positions are rotations of each query and key)."""
    if "hook_pos_embed" not in rec:
        return np.zeros((n, d), dtype=np.float32)
    return _rows(rec["hook_pos_embed"].reshape(-1, d), n).float().cpu().numpy()


def _rows(t: torch.Tensor, n: int, dim: int = -2) -> torch.Tensor:
    """The last ``n`` rows of ``t`` along ``dim``, copied when that is a part of it, so a record
    never keeps a whole-sequence tensor alive (no-cache mode feeds every position)."""
    if t.shape[dim] == n:
        return t
    return t.narrow(dim, t.shape[dim] - n, n).clone()


def _mlp_width(model, d: int) -> int:
    """The MLP's hidden width of a loaded model (4 d when the config does not say: GPT-2's)."""
    config = getattr(model, "config", None)
    return int(getattr(config, "intermediate_size", None) or getattr(config, "n_inner", None) or 4 * d)
