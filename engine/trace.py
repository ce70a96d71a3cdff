"""What one generation step computed: the records that cross from the worker to the window.

A step is one forward pass and one chosen token. Step 0 is the prefill: it runs all P prompt
positions at once. Decode step s (s >= 1) runs one position, P + s - 1, holding the token chosen at
step s - 1, against the KV cache. Shapes use: L layers, H heads, n positions computed this step
(P at prefill, 1 at decode), T = start + n key positions, d = d_model, V = vocabulary size.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from functools import cached_property

import numpy as np

from .sampling import Distribution, SamplingSettings, entropy_bits, model_probs, softmax

N_CANDIDATES = 64  # next-token candidates every StepTrace carries, with their pieces
ALL_ROWS_UP_TO = 256  # a pass of at most this many positions keeps every attention row (see StepRecord.attn)
SAMPLED_ROWS = 24  # rows a longer pass keeps of every head's pattern, evenly spaced, the newest last


def pattern_rows(start: int, n: int) -> np.ndarray:
    """int64 [r]: the query positions whose attention rows a pass over positions start..start + n - 1
    keeps (``StepRecord.attn``): every one up to ALL_ROWS_UP_TO positions, else SAMPLED_ROWS evenly
    spaced ones ending at the newest."""
    if n <= ALL_ROWS_UP_TO:
        return np.arange(start, start + n, dtype=np.int64)
    return start + np.unique(np.maximum((np.arange(1, SAMPLED_ROWS + 1) * n) // SAMPLED_ROWS - 1, 0)).astype(np.int64)


@dataclass(frozen=True)
class KVStats:
    """The KV cache after a step.

    key_positions, value_positions: int64 [L], positions cached per layer.
    total_bytes == 2 x layers x positions x kv_width x bytes_per_value.
    capacity: the model's context window in positions.
    kv_width: values cached per position and layer, for keys and again for values: n_kv_heads x
        d_head (0: d_model, GPT-2's full heads). Grouped heads cache fewer.
    full_width: n_head x d_head, what every query head having its own key/value head would cache
        (0: d_model).
    """

    key_positions: np.ndarray
    value_positions: np.ndarray
    total_bytes: int
    bytes_per_value: int
    d_model: int
    capacity: int
    kv_width: int = 0
    full_width: int = 0

    @property
    def width(self) -> int:
        return self.kv_width or self.d_model

    @property
    def bytes_per_position(self) -> int:
        """Bytes one position adds to the cache over every layer: 2 x L x kv_width x bytes_per_value."""
        return 2 * len(self.key_positions) * self.width * self.bytes_per_value

    @property
    def full_heads_bytes_per_position(self) -> int:
        """What one position would take if every query head had its own key and value head."""
        return 2 * len(self.key_positions) * (self.full_width or self.d_model) * self.bytes_per_value

    @property
    def positions(self) -> int:
        return int(self.key_positions.max()) if len(self.key_positions) else 0

    def arithmetic(self) -> str:
        """The byte count written out, e.g. ``2 x 4 layers x 12 positions x 256 x 4 B = 98,304 B``."""
        layers = len(self.key_positions)
        return (
            f"2 × {layers} layers × {self.positions} positions × {self.width} × "
            f"{self.bytes_per_value} B = {self.total_bytes:,} B"
        )


@dataclass(frozen=True)
class StepRecord:
    """What one forward pass computed; compact, kept for every step of the history.

    step: 0 for the prefill, s for decode step s.
    start: first position computed (0 at prefill, P + s - 1 at decode).
    input_ids: int64 [n], the tokens fed this step.
    token_embed, pos_embed: float32 [n, d] (hook_embed, hook_pos_embed).
    attn: float16 [L, H, r, T], blocks.{L}.attn.hook_pattern at the r query positions ``attn_rows``
        (the newest position last). A decode step keeps its one row; a prefill of at most
        ``ALL_ROWS_UP_TO`` positions keeps every row, a longer one ``SAMPLED_ROWS`` evenly spaced rows
        (what an overview of every head draws): a head's whole map is recomputed on request
        (``engine.attention.head_map``), so a record grows linearly with the text.
    attn_rows: int64 [r], the query positions of ``attn``'s rows, ascending (the last is end - 1).
    resid: float32 [L + 1, n, d], blocks.0.hook_resid_pre then blocks.{L}.hook_resid_post.
    attn_out, mlp_out: float16 [L, d], blocks.{L}.hook_attn_out and blocks.{L}.hook_mlp_out at the
        last position (what each block adds to the residual stream; the rest of the path is
        recomputed on demand by engine.inside).
    final_hidden: float32 [d], ln_final.hook_out (ln_f's output, after its weight and bias) at the
        last position.
    logits: float32 [V], raw logits for the next token (the LM head on final_hidden).
    kv: the cache after this step (0 positions in every layer when the session runs without one).
    forward_ms: wall time of the forward pass; step_ms: forward, recording and sampling.
    settings: sampling settings in force; chosen: the token id picked; chosen_by: "greedy",
        "sampled" or "user" (a branch).
    draw_u: the draw's u in [0, 1) that selected ``chosen`` (see engine.sampling); NaN for greedy
        steps and for tokens the user chose.
    experts: int64 [L, k], blocks.{L}.mlp.hook_expert_indices at the last position: the experts each
        block's router chose, highest weight first (a mixture of experts; None for a dense model).
    """

    step: int
    start: int
    input_ids: np.ndarray
    token_embed: np.ndarray
    pos_embed: np.ndarray
    attn: np.ndarray
    attn_rows: np.ndarray
    resid: np.ndarray
    attn_out: np.ndarray
    mlp_out: np.ndarray
    final_hidden: np.ndarray
    logits: np.ndarray
    kv: KVStats
    forward_ms: float
    step_ms: float
    settings: SamplingSettings
    chosen: int
    chosen_by: str
    draw_u: float = float("nan")
    experts: np.ndarray | None = None

    @property
    def n_new(self) -> int:
        return int(self.input_ids.shape[0])

    @property
    def nbytes(self) -> int:
        """Bytes held by this record's arrays: what one step of history costs in memory."""
        arrays = [getattr(self, f.name) for f in fields(self)] + [getattr(self.kv, f.name) for f in fields(self.kv)]
        return sum(a.nbytes for a in arrays if isinstance(a, np.ndarray))

    @property
    def all_rows(self) -> bool:
        """Whether ``attn`` holds every row its forward pass computed (else a sample: see ``attn``)."""
        return int(self.attn_rows.shape[0]) == self.n_new

    @property
    def end(self) -> int:
        """One past the last position computed: the length of the context the logits saw."""
        return self.start + self.n_new


@dataclass(frozen=True)
class StepTrace:
    """Everything the window draws for one step: the record plus its sampling view.

    context_ids: int64 [T], every token fed so far (prompt, then tokens chosen before this step).
    pieces: readable text of each context token (leading spaces shown as ␣), len T.
    prompt_len: P.
    distribution: the sampling stages for ``record.logits`` under ``record.settings``.
    chosen_piece, chosen_prob (its sampling probability: in the final distribution, the one drawn
    from), chosen_rank (1 = highest raw logit), entropy_bits (of the final distribution).

    Two probabilities, named the same everywhere: the *model probability* is the softmax of the raw
    logits (``model_prob``, ``model_entropy_bits``, ceiling log2 V); the *sampling probability* is
    after the penalty, temperature, top-k and top-p, what the draw used (``sampling_prob``,
    ``sampling_entropy_bits``, ceiling log2 of the tokens left).
    candidate_ids: int64 [K], the K most likely next tokens by penalised logit, best first (the
        order of the final distribution too: temperature keeps it and the filters cut its tail);
        candidate_pieces: their readable text.
    stop_reason: None while generation can go on, else "end_of_text", "stop_sequence",
        "max_new_tokens" or "context_full"; stop_message says it in words (for "stop_sequence":
        which one).
    """

    record: StepRecord
    context_ids: np.ndarray
    pieces: tuple[str, ...]
    prompt_len: int
    distribution: Distribution
    chosen_piece: str
    chosen_prob: float
    chosen_rank: int
    entropy_bits: float
    candidate_ids: np.ndarray
    candidate_pieces: tuple[str, ...]
    stop_reason: str | None
    stop_message: str

    @property
    def step(self) -> int:
        return self.record.step

    @cached_property
    def model_prob(self) -> float:
        """The chosen token's model probability: the softmax of the raw logits, no sampling stage."""
        return float(model_probs(self.record.logits)[self.chosen])

    @cached_property
    def model_entropy_bits(self) -> float:
        """The entropy of the model probabilities, in bits (at most ``model_entropy_ceiling_bits``)."""
        return entropy_bits(softmax(self.record.logits))

    @property
    def model_entropy_ceiling_bits(self) -> float:
        """log2 of the vocabulary: the model's entropy if every token were equally likely."""
        return float(np.log2(self.record.logits.shape[0]))

    @property
    def sampling_prob(self) -> float:
        """The chosen token's sampling probability (``chosen_prob``): what the draw used."""
        return self.chosen_prob

    @property
    def sampling_entropy_bits(self) -> float:
        """The entropy of the sampling probabilities (``entropy_bits``)."""
        return self.entropy_bits

    @cached_property
    def tokens_left(self) -> int:
        """How many tokens the sampling stages left a probability above 0."""
        return int(np.count_nonzero(self.distribution.probs))

    @property
    def sampling_entropy_ceiling_bits(self) -> float:
        """log2 of the tokens left: the sampling entropy if each of them were equally likely."""
        return float(np.log2(max(1, self.tokens_left)))

    @property
    def chosen(self) -> int:
        return self.record.chosen


def shared_prefix(records, seen: list, field: str) -> int:
    """How many leading ``records`` still hold, as ``field``, the very arrays in ``seen``: the part of
    a history that a rewind or branch left untouched and need not be processed again."""
    keep = 0
    while keep < min(len(records), len(seen)) and getattr(records[keep], field) is seen[keep]:
        keep += 1
    return keep
