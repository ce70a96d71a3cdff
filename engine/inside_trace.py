"""What the Inside view draws: the whole path from one token to the next, for one position.

Torch-free (numpy and the standard library only): this crosses from the engine to the window.
``engine.inside.inside`` fills it by recomputing the context up to the position with the model's own
modules; every number is what the model computed, float32.
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod

import numpy as np

from .sampling import top_ids


@dataclass(frozen=True)
class ParamPart:
    """One parameter of the model: which part it belongs to, its Hugging Face name and its shape.

    part: "token embedding", "position embedding", "block {L} ln_1", "block {L} attention",
        "block {L} ln_2", "block {L} MLP" or "final layer norm".
    name: e.g. ``transformer.h.0.attn.c_attn.weight`` (Conv1D: shape [in, out], x @ W + b).
    """

    part: str
    name: str
    shape: tuple[int, ...]

    @property
    def count(self) -> int:
        return prod(self.shape)


@dataclass(frozen=True)
class InsideTrace:
    """Every value on the path from the token at ``position`` to the prediction after it.

    L layers, H heads, dh = d / H, d = d_model, m = d_mlp (4 d for GPT-2), V vocabulary, K lens
    candidates (10), T = position + 1 visible positions. Names in brackets are the TransformerLens
    hook points (engine.hooks.HOOK_POINTS), all at this position unless said.

    step: the history step asked for; position: p (0-based, < the step's context length);
        context_len: that step's context length (P at the prefill, P + s at decode step s).
    token_id: the token at p; next_id: the token that came after it (the token chosen at that
        step when p is the step's newest position, else the next context token).
    token_embed, pos_embed: float32 [d], row ``token_id`` of wte [V, d] and row p of wpe [n_ctx, d]
        (hook_embed, hook_pos_embed); their sum is resid_pre[0]. GraniteMoe: the row times its
        embedding_multiplier (``embed_multiplier``, 1 for the others), and attn_out, mlp_out times
        its residual_multiplier (``residual_multiplier``, 1 for the others: what is added).
    resid_pre: float32 [L, d] (blocks.{L}.hook_resid_pre).
    ln1_scale: float32 [L], sqrt(var + eps) (ln1.hook_scale); ln1_normalized: float32 [L, d],
        (x - mean) / scale (ln1.hook_normalized); ln1_out: float32 [L, d], x weight + bias (ln1.hook_out).
    q, k, v: float32 [L, H, dh], this position's query, key and value (attn.hook_q/k/v: the c_attn
        output, biases included, split per head).
    kv_layers: the layers whose keys and values of every visible position are included;
        keys, values: float32 [len(kv_layers), H, T, dh] (attn.hook_k, attn.hook_v, positions 0..p).
    scores: float32 [L, H, T], q · k_j x attn_scale for every visible j, before softmax (row p of
        attn.hook_attn_scores; the masked positions j > p are left out); pattern: float32 [L, H, T],
        the softmax of scores (row p of attn.hook_pattern).
    z: float32 [L, H, dh], pattern-weighted sum of the values (attn.hook_z, before W_O).
    attn_out: float32 [L, d], after W_O and its bias (hook_attn_out); resid_mid: float32 [L, d],
        resid_pre + attn_out (hook_resid_mid).
    ln2_scale [L], ln2_normalized [L, d], ln2_out [L, d]: layer norm 2 (as ln1).
    mlp_pre, mlp_post: float32 [L, m], c_fc's output (bias included) and after the activation
        (mlp.hook_pre, mlp.hook_post); mlp_out: float32 [L, d], after c_proj (hook_mlp_out);
        resid_post: float32 [L, d], resid_mid + mlp_out (hook_resid_post).
    ln_final_scale: float; ln_final_normalized: float32 [d]; final_hidden: float32 [d], ln_f's
        output after its weight and bias (ln_final.hook_out).
    lens_ids: int64 [L + 1, K], lens_logits: float32 [L + 1, K]: the logit lens, ln_f then the LM head
        applied to the residual stream before block 0 (row 0) and after each block (row L + 1 is
        the model's real prediction): the K highest raw logits, best first, ties by lower id.
        lens_next_prob: float32 [L + 1], softmax probability (raw logits, no sampling stage) of
        next_id at each depth; lens_next_rank: int64 [L + 1], its rank there (1 = highest).
    lm_head_tied: True when the LM head's weight is the token embedding matrix wte (GPT-2), so
        logit(id) = final_hidden · wte[id] (the LM head has no bias).
    attn_scale: float32 [L], the factor on q · k per layer (1 / sqrt(dh) for GPT-2).
    params: every parameter of the model, by part; n_params: their total (a tied LM head counted once).
    compute_ms: the recompute (one forward pass over positions 0..p); lens_ms: the logit lens.

    Fields for the Llama design and its mixture-of-experts variant (engine.families; GPT-2 keeps
    the defaults). family: "GPT-2", "Llama", "Qwen2", "Qwen3", "GraniteMoe" or "Mixtral".
    rope: True when positions are rotations of q and k: pos_embed is then zeros and means nothing
        (there is no position vector; hook_pos_embed does not exist), and the norms are RMSNorm
        (ln*_scale = sqrt(mean(x²) + eps), ln*_normalized = x / scale: no mean subtracted,
        ln*_out = normalized x weight, no shift).
    With KV key/value heads (KV <= H): k, v are [L, KV, dh] and keys, values [len(kv_layers), KV, T, dh]
        (attn.hook_k / hook_v; the cache holds keys after RoPE); kv_head: int64 [H], the key/value
        head each query head reads (query heads share them in runs of H / KV).
    q, k are before RoPE (after Qwen3's per-head norm: what RoPE receives); rot_q: float32 [L, H, dh],
        rot_k: float32 [L, KV, dh] after it (attn.hook_rot_q / hook_rot_k); inv_freq: float32 [dh / 2],
        radians per position of each pair (i, i + dh / 2): the pair is turned by position x inv_freq.
        scores are rot_q · (cached rotated keys) x attn_scale.
    Gated MLP: mlp_pre = x @ W_gate (mlp.hook_pre), mlp_pre_linear: float32 [L, m] = x @ W_up
        (mlp.hook_pre_linear), mlp_post = act(pre) x pre_linear (mlp.hook_post, the down projection's
        input), mlp_out its output. In an MoE model these three are [L, 0] (each expert has its own).
    router_probs: float32 [L, E], softmax of the router's logits over every expert
        (mlp.hook_router_probs); experts: int64 [L, k], the chosen experts (mlp.hook_expert_indices);
        expert_weights: float32 [L, k], what their outputs are summed with (mlp.hook_topk_weights);
        router_rule: how this family's router computes them (a sentence).
    active_params: the parameters this token ran through (n_params for a dense model).
    """

    step: int
    position: int
    context_len: int
    token_id: int
    next_id: int
    token_embed: np.ndarray
    pos_embed: np.ndarray
    resid_pre: np.ndarray
    ln1_scale: np.ndarray
    ln1_normalized: np.ndarray
    ln1_out: np.ndarray
    q: np.ndarray
    k: np.ndarray
    v: np.ndarray
    kv_layers: tuple[int, ...]
    keys: np.ndarray
    values: np.ndarray
    scores: np.ndarray
    pattern: np.ndarray
    z: np.ndarray
    attn_out: np.ndarray
    resid_mid: np.ndarray
    ln2_scale: np.ndarray
    ln2_normalized: np.ndarray
    ln2_out: np.ndarray
    mlp_pre: np.ndarray
    mlp_post: np.ndarray
    mlp_out: np.ndarray
    resid_post: np.ndarray
    ln_final_scale: float
    ln_final_normalized: np.ndarray
    final_hidden: np.ndarray
    lens_ids: np.ndarray
    lens_logits: np.ndarray
    lens_next_prob: np.ndarray
    lens_next_rank: np.ndarray
    lm_head_tied: bool
    attn_scale: np.ndarray
    params: tuple[ParamPart, ...]
    n_params: int
    compute_ms: float
    lens_ms: float
    family: str = "GPT-2"
    rope: bool = False
    kv_head: np.ndarray | None = None
    rot_q: np.ndarray | None = None
    rot_k: np.ndarray | None = None
    inv_freq: np.ndarray | None = None
    mlp_pre_linear: np.ndarray | None = None
    router_probs: np.ndarray | None = None
    experts: np.ndarray | None = None
    expert_weights: np.ndarray | None = None
    router_rule: str = ""
    active_params: int = 0
    embed_multiplier: float = 1.0
    residual_multiplier: float = 1.0

    @property
    def n_layer(self) -> int:
        return int(self.resid_pre.shape[0])

    @property
    def n_head(self) -> int:
        return int(self.q.shape[1])

    @property
    def angles(self) -> np.ndarray | None:
        """float32 [dh / 2]: radians RoPE turns each pair of this position's q and k (None: GPT-2)."""
        return None if self.inv_freq is None else (self.position * self.inv_freq).astype(np.float32)

    @property
    def kv_heads(self) -> int:
        return int(self.k.shape[1])

    def kv_of(self, head: int) -> int:
        """The key/value head query head ``head`` reads (itself with full heads)."""
        return head if self.kv_head is None else int(self.kv_head[head])

    @property
    def resid(self) -> np.ndarray:
        """float32 [L + 1, d]: the residual stream before block 0 and after every block."""
        return np.concatenate([self.resid_pre[:1], self.resid_post])

    def norms(self) -> dict[str, np.ndarray]:
        """The L2 norm of each vector on the path, per layer: name -> float32 [L] (resid: [L + 1])."""
        names = ("resid_pre", "ln1_out", "attn_out", "resid_mid", "ln2_out", "mlp_post", "mlp_out", "resid_post")
        out = {name: np.linalg.norm(getattr(self, name), axis=-1) for name in names}
        out["z"] = np.linalg.norm(self.z.reshape(self.n_layer, -1), axis=-1)
        out["resid"] = np.linalg.norm(self.resid, axis=-1)
        return out

    def top_units(self, layer: int, n: int = 8) -> tuple[np.ndarray, np.ndarray]:
        """The ``n`` strongest MLP hidden units of ``layer``: largest absolute activation (mlp_post)
        first, ties by lower index; (indices int64 [n], their signed values)."""
        post = self.mlp_post[layer]
        if post.size == 0:  # a mixture-of-experts block: no single MLP
            return np.zeros(0, dtype=np.int64), post
        order = top_ids(np.abs(post), n)
        return order, post[order]

    def params_by_part(self) -> dict[str, int]:
        """Parameter count per part, in model order."""
        out: dict[str, int] = {}
        for p in self.params:
            out[p.part] = out.get(p.part, 0) + p.count
        return out
