"""A generation session: one prompt, its KV cache, its settings and the history of steps.

Not thread-safe: exactly one thread (the GUI's worker, or the terminal) owns a session.
"""

from __future__ import annotations

from dataclasses import replace
from time import perf_counter

import numpy as np
import torch

from . import hf_compat, hooks, sampling
from .memory import release_freed_memory
from .defaults import truncation_keeps
from .errors import GenerationStopped, PromptError, SessionError
from .loading import LoadedModel
from .projection import Projection
from .sampling import Distribution, SamplingSettings
from .trace import N_CANDIDATES, KVStats, StepRecord, StepTrace

TRIM_EVERY = 32  # steps between handing freed heap memory back to the OS (see memory.release_freed_memory)

STOP_MESSAGES = {
    "end_of_text": "Stopped: the model chose <|endoftext|>.",
    "max_new_tokens": "Stopped: reached the limit of {limit} new tokens.",
    "context_full": "Stopped: the context window of {capacity} positions is full.",
}


class Session:
    """Steps a GPT-2 through a prompt one token at a time, recording each step.

    Step 0 (prefill) runs the whole prompt in one forward pass and fills the KV cache; each later
    step runs only the newest token against the cache. ``rewind``, ``choose`` and ``resample``
    change the history without re-running the model where they can.
    """

    def __init__(
        self,
        loaded: LoadedModel,
        settings: SamplingSettings | None = None,
        *,
        max_new_tokens: int | None = None,
    ):
        self.loaded = loaded
        self.settings = settings or SamplingSettings()
        if max_new_tokens is not None and max_new_tokens < 1:
            raise SessionError(f"max_new_tokens must be at least 1 (got {max_new_tokens})")
        self.max_new_tokens = max_new_tokens
        self._prompt_ids: list[int] = []
        self._records: list[StepRecord] = []
        self._cache = None
        self._latest_dist: Distribution | None = None

    # ----------------------------------------------------------------- state
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

    def history_nbytes(self) -> int:
        """Bytes held by the recorded steps' arrays (the KV cache and model weights not included)."""
        return sum(r.nbytes for r in self._records)

    def token_ids(self) -> np.ndarray:
        """int64 [P + S]: the prompt then every chosen token."""
        return np.array(self._prompt_ids + [r.chosen for r in self._records], dtype=np.int64)

    def text(self) -> str:
        return self.loaded.tokenizer.decode(self.token_ids())

    def cache_length(self) -> int:
        return hf_compat.cache_length(self._cache)

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
        if len(ids) > capacity:
            keep = truncation_keeps(capacity)
            if not truncate:
                raise PromptError(
                    f"The prompt is {len(ids):,} tokens long but {self.info.name} reads at most "
                    f"{capacity:,} tokens. Shorten it, or choose to keep only its last {keep:,} tokens "
                    f"(room to generate {capacity - keep:,})."
                )
            ids = ids[-keep:]
        self._prompt_ids = ids
        self.reset()
        return list(ids)

    def reset(self) -> None:
        """Drop every step and the cache; keep the prompt."""
        self._records = []
        self._cache = None
        self._latest_dist = None

    # ------------------------------------------------------------- stepping
    def stop_reason(self) -> tuple[str | None, str]:
        """(reason, message) if no further step can run, else (None, "")."""
        if not self._records:
            return None, ""
        last = self._records[-1]
        if last.chosen == self.loaded.tokenizer.eos_id:
            reason = "end_of_text"
        elif self.max_new_tokens is not None and len(self._records) >= self.max_new_tokens:
            reason = "max_new_tokens"
        elif last.end + 1 > self.info.n_positions:
            reason = "context_full"
        else:
            return None, ""
        message = STOP_MESSAGES[reason].format(limit=self.max_new_tokens, capacity=self.info.n_positions)
        return reason, message

    def step(self) -> StepTrace:
        """Run the next forward pass (prefill first) and choose a token."""
        if not self._prompt_ids:
            raise SessionError("Set a prompt before stepping.")
        reason, message = self.stop_reason()
        if reason:
            raise GenerationStopped(reason, message)
        if not self._records:
            start, new_ids = 0, self._prompt_ids
        else:
            start, new_ids = self._records[-1].end, [self._records[-1].chosen]
        record, dist = self._run(len(self._records), start, new_ids)
        self._records.append(record)
        self._latest_dist = dist
        if len(self._records) % TRIM_EVERY == 0:
            release_freed_memory()
        return self.trace()

    def _run(self, step: int, start: int, new_ids: list[int]) -> tuple[StepRecord, Distribution]:
        """One forward pass with every hook recorded. On any failure the cache is restored."""
        t_step = perf_counter()
        model, n_layers = self.loaded.model, self.info.n_layer
        try:
            with torch.inference_mode(), hooks.capture(model, n_layers, pattern_dtype=torch.float16) as rec:
                t_fwd = perf_counter()
                logits, self._cache = hf_compat.forward(model, torch.tensor([new_ids], dtype=torch.long), self._cache)
                forward_ms = (perf_counter() - t_fwd) * 1e3
                d = self.info.d_model
                attn = torch.stack([rec[f"blocks.{i}.attn.hook_pattern"][0] for i in range(n_layers)])  # [L, H, n, T] float16
                resid = torch.stack(
                    [rec["blocks.0.hook_resid_pre"][0]] + [rec[f"blocks.{i}.hook_resid_post"][0] for i in range(n_layers)]
                )  # [L + 1, n, d]
                record_arrays = dict(
                    token_embed=rec["hook_embed"].reshape(-1, d).float().numpy(),  # [n, d]
                    pos_embed=rec["hook_pos_embed"].reshape(-1, d)[-len(new_ids):].float().numpy(),  # [n, d]
                    attn=attn.numpy(),
                    resid=resid.float().numpy(),
                    final_hidden=rec["ln_final.hook_normalized"][0, -1].float().numpy().copy(),  # [d]
                    logits=logits[0, -1].float().numpy().copy(),  # [V]
                )
            if self.cache_length() != start + len(new_ids):
                raise RuntimeError(f"the KV cache holds {self.cache_length()} positions, expected {start + len(new_ids)}")
            dist = sampling.distribution(record_arrays["logits"], self._context(step), self.settings)
            chosen = sampling.draw(dist, step)
        except BaseException:
            if self._cache is not None:
                hf_compat.crop_cache(self._cache, start)
            if start == 0:
                self._cache = None
            raise
        record = StepRecord(
            step=step,
            start=start,
            input_ids=np.array(new_ids, dtype=np.int64),
            kv=self._kv_stats(),
            forward_ms=forward_ms,
            step_ms=(perf_counter() - t_step) * 1e3,
            settings=self.settings,
            chosen=chosen,
            chosen_by="greedy" if self.settings.is_greedy else "sampled",
            **record_arrays,
        )
        return record, dist

    def _kv_stats(self) -> KVStats:
        layers = hf_compat.layer_tensors(self._cache)
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
        )

    # ------------------------------------------------------- changing history
    def rewind(self, step: int) -> StepTrace | None:
        """Keep steps 0..``step`` and drop the rest; -1 drops every step. Returns the new current trace."""
        if not -1 <= step < len(self._records):
            raise SessionError(f"There is no step {step} to go back to (steps 0 to {len(self._records) - 1}).")
        if step == -1:
            self.reset()
            return None
        del self._records[step + 1 :]
        hf_compat.crop_cache(self._cache, self._records[-1].end)
        self._latest_dist = None
        return self.trace()

    def choose(self, token_id: int) -> StepTrace:
        """Take ``token_id`` at the current step instead of the drawn one: the next step continues from it."""
        record = self._current("choose a token")
        if not 0 <= int(token_id) < self.info.vocab_size:
            raise SessionError(f"Token id {token_id} is not in the vocabulary (0 to {self.info.vocab_size - 1}).")
        self._records[-1] = replace(record, chosen=int(token_id), chosen_by="user")
        return self.trace()

    def resample(self, settings: SamplingSettings | None = None) -> StepTrace:
        """Re-draw the current step's token under ``settings`` (default: the session's), no forward pass.
        The settings also apply to later steps."""
        if settings is not None:
            self.settings = settings
        record = self._current("re-sample")
        context = self._context(record.step)
        dist = sampling.distribution(record.logits, context, self.settings)
        chosen = sampling.draw(dist, record.step)
        self._records[-1] = replace(
            record, settings=self.settings, chosen=chosen, chosen_by="greedy" if self.settings.is_greedy else "sampled"
        )
        self._latest_dist = dist
        return self.trace()

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
