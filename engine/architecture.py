"""What the loaded model is made of, read once from its config and its module tree.

``describe`` looks at the model itself (which modules exist, which of them have a bias, what the
attention multiplies its scores by, whether the LM head is the embedding table) and never at the
family's name, so every sentence the window builds from an ``Architecture`` holds for the model on
screen: a Qwen2 with q/k/v biases, a Llama with a separate LM head and a GraniteMoe with its
multipliers each get their own words without a branch per family.

Standard library only at import: the window's process reads ``Architecture`` (it travels inside
``engine.info.ModelInfo``); ``describe`` is called in the engine's process with a loaded model.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields

LEARNED, ROTARY = "learned", "rotary"  # position: a table added to the stream, or rotations of q and k
DENSE, GATED, EXPERTS = "dense", "gated", "experts"  # MLP kinds
TOP_K_THEN_SOFTMAX = "top-k logits, softmax over them"  # the chosen weights add up to 1
SOFTMAX_THEN_TOP_K = "softmax over every expert, top k kept"  # the chosen weights are their shares of all
INV_SQRT_D_HEAD = "1/sqrt(d_head)"


@dataclass(frozen=True)
class Architecture:
    """The loaded model's design, as plain values (JSON: ``to_dict``; ``python -m engine --describe``).

    Shape: n_layer blocks, d_model wide; n_head query heads of d_head numbers sharing n_kv_heads
    key/value heads (n_kv_heads == n_head: full heads); context positions; vocab_size rows.
    position: LEARNED (a position table [context, d_model] is added to the token's row) or ROTARY
        (q and k are turned by position: rope_dims of each head's d_head dimensions, in pairs, at
        frequencies base ** (-2i / rope_dims) with base ``rope_base``); rope_* are 0 when LEARNED.
    norm: "LayerNorm" (mean subtracted, divided by the spread) or "RMSNorm" (divided by the root
        mean square); norm_shift: it adds a learned shift (a bias) after its learned scale;
        norm_eps: the epsilon under the root; norms: where the norms sit, in computing order
        ("before attention", "on each query and key head", "before the MLP", "after the last block").
    mlp: DENSE (d_model → d_mlp, the activation, d_mlp → d_model), GATED (gate and up projections
        d_model → d_mlp each, activation(gate) × up, down projection d_mlp → d_model) or EXPERTS
        (n_experts gated MLPs of d_mlp units, experts_per_token chosen per token by a router whose
        rule is ``routing``); activation: the config's name for it ("gelu_new", "silu").
    qkv_bias, o_bias, mlp_bias, lm_head_bias: whether those projections add a learned bias.
    score_scale: the factor q · k is multiplied by; score_rule: INV_SQRT_D_HEAD when that is
        1 / sqrt(d_head), else the config attribute it is ("attention_multiplier").
    embedding_multiplier: the token's row is multiplied by it before block 0; residual_multiplier:
        what each attention and MLP adds is multiplied by it; logits_divisor: the logits are divided
        by it (config ``logits_scaling``). 1.0: none.
    tied_lm_head: the LM head's matrix is the token embedding table itself.
    n_params, n_active_params: parameters in all (a tied matrix once) and those one token runs
        through (fewer with experts).
    chat_template: the tokenizer has one; default_system: the system message it inserts when the
        turn has none ("": none); end_of_turn: the tokens that end a turn and stop generation.
    model_type: config.json's model_type, for the record (no sentence depends on it).
    """

    model_type: str
    n_layer: int
    d_model: int
    n_head: int
    n_kv_heads: int
    d_head: int
    context: int
    vocab_size: int
    position: str
    rope_base: float
    rope_dims: int
    norm: str
    norm_shift: bool
    norm_eps: float
    norms: tuple[str, ...]
    mlp: str
    activation: str
    d_mlp: int
    n_experts: int
    experts_per_token: int
    routing: str
    qkv_bias: bool
    o_bias: bool
    mlp_bias: bool
    lm_head_bias: bool
    score_scale: float
    score_rule: str
    embedding_multiplier: float
    residual_multiplier: float
    logits_divisor: float
    tied_lm_head: bool
    n_params: int
    n_active_params: int
    chat_template: bool
    default_system: str
    end_of_turn: tuple[str, ...]

    @property
    def rotary(self) -> bool:
        """q and k are turned by position (RoPE)."""
        return self.position == ROTARY

    @property
    def position_table(self) -> bool:
        """A learned table of positions is added to the token's row (GPT-2's hook_pos_embed)."""
        return self.position == LEARNED

    @property
    def qk_norm(self) -> bool:
        return "on each query and key head" in self.norms

    @property
    def grouped(self) -> bool:
        return self.n_kv_heads < self.n_head

    @property
    def experts(self) -> bool:
        return self.mlp == EXPERTS

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, values: dict) -> "Architecture":
        """The inverse of ``to_dict`` (a session file's JSON: lists back to tuples)."""
        names = {f.name for f in fields(cls)}
        return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in values.items() if k in names})


def describe(model, tokenizer) -> Architecture:
    """The Architecture of a loaded transformers causal LM and its ``engine.tokens.Tokenizer``."""
    from . import chat, families

    cfg = model.config
    inner = model.base_model  # GPT2Model, LlamaModel, ...
    block = model.get_submodule(families.family_of(model).layers)[0]
    attn = _attention(block)
    n_head = cfg.num_attention_heads
    d_head = getattr(cfg, "head_dim", None) or cfg.hidden_size // n_head
    kv_heads = getattr(cfg, "num_key_value_heads", None) or n_head
    rotary = getattr(inner, "rotary_emb", None)
    final = _final_norm(inner)
    total, active = families.parameter_counts(model)
    norms = ["before attention"] + (["on each query and key head"] if hasattr(attn, "q_norm") else [])
    norms += ["before the MLP", "after the last block"]
    mlp_module = _mlp(block)
    kind, d_mlp, n_experts, top_k, routing = _mlp_kind(model, mlp_module, cfg)
    scale = float(attn.scaling)
    lm_head = model.get_output_embeddings()
    return Architecture(
        model_type=str(cfg.model_type),
        n_layer=int(cfg.num_hidden_layers),
        d_model=int(cfg.hidden_size),
        n_head=int(n_head),
        n_kv_heads=int(kv_heads),
        d_head=int(d_head),
        context=int(cfg.max_position_embeddings),
        vocab_size=int(cfg.vocab_size),
        position=ROTARY if rotary is not None else LEARNED,
        rope_base=_rope_base(cfg, rotary),
        rope_dims=2 * int(rotary.inv_freq.numel()) if rotary is not None else 0,
        norm="LayerNorm" if type(final).__name__ == "LayerNorm" else "RMSNorm",
        norm_shift=getattr(final, "bias", None) is not None,
        norm_eps=float(getattr(final, "eps", None) or getattr(final, "variance_epsilon", 0.0)),
        norms=tuple(norms),
        mlp=kind,
        activation=str(getattr(cfg, "hidden_act", None) or getattr(cfg, "activation_function", "")),
        d_mlp=int(d_mlp),
        n_experts=n_experts,
        experts_per_token=top_k,
        routing=routing,
        qkv_bias=any(_has_bias(attn, name) for name in ("c_attn", "q_proj", "k_proj", "v_proj")),
        o_bias=any(_has_bias(attn, name) for name in ("c_proj", "o_proj")),
        mlp_bias=any(p is not None for n, p in mlp_module.named_parameters() if n.endswith("bias")),
        lm_head_bias=getattr(lm_head, "bias", None) is not None,
        score_scale=scale,
        score_rule=_score_rule(scale, d_head, cfg),
        embedding_multiplier=float(getattr(cfg, "embedding_multiplier", 1.0) or 1.0),
        residual_multiplier=float(getattr(cfg, "residual_multiplier", 1.0) or 1.0),
        logits_divisor=float(getattr(cfg, "logits_scaling", 1.0) or 1.0),
        tied_lm_head=lm_head.weight.data_ptr() == model.get_input_embeddings().weight.data_ptr(),
        n_params=int(total),
        n_active_params=int(active),
        chat_template=chat.has_chat_template(tokenizer),
        default_system=default_system_message(tokenizer),
        end_of_turn=tuple(tokenizer.piece(i) for i in end_of_turn_ids(model, tokenizer)),
    )


def default_system_message(tokenizer) -> str:
    """The system message the chat template writes when a turn has none ("" when it writes none).

    Rendered twice, with a marker system message and without one: the text the template puts where
    the marker would stand is its own default."""
    from . import chat

    if not chat.has_chat_template(tokenizer):
        return ""
    marker, user = "\u2063SYSTEM\u2063", "\u2063USER\u2063"

    def render(messages):
        return tokenizer.hf.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)

    try:
        with_marker = render([{"role": "system", "content": marker}, {"role": "user", "content": user}])
        without = render([{"role": "user", "content": user}])
    except Exception:  # a template that refuses a system message has no default either
        return ""
    before, _, after = with_marker.partition(marker)
    if not (without.startswith(before) and without.endswith(after) and len(without) > len(before) + len(after)):
        return ""
    return without[len(before): len(without) - len(after)]


def end_of_turn_ids(model, tokenizer) -> tuple[int, ...]:
    """The token ids that end generation: the generation config's end-of-sequence ids and the tokenizer's."""
    ids = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    ids = [ids] if isinstance(ids, int) else list(ids or [])
    if tokenizer.eos_id is not None:
        ids.append(tokenizer.eos_id)
    return tuple(sorted({int(i) for i in ids}))


def _attention(block):
    return getattr(block, "self_attn", None) or block.attn


def _mlp(block):
    return getattr(block, "block_sparse_moe", None) or block.mlp


def _final_norm(inner):
    return getattr(inner, "norm", None) or inner.ln_f


def _has_bias(module, name: str) -> bool:
    part = getattr(module, name, None)
    return part is not None and getattr(part, "bias", None) is not None


def _mlp_kind(model, mlp, cfg) -> tuple[str, int, int, int, str]:
    """(kind, hidden width, experts, experts per token, routing rule) of a block's MLP module."""
    n_experts = getattr(cfg, "num_local_experts", 0) or 0
    if n_experts:
        return EXPERTS, int(cfg.intermediate_size), int(n_experts), int(cfg.num_experts_per_tok), _routing(model, mlp)
    if hasattr(mlp, "gate_proj") and hasattr(mlp, "up_proj"):
        return GATED, int(mlp.up_proj.out_features), 0, 0, ""
    weight = mlp.c_fc.weight  # GPT-2's Conv1D: [d_model, d_mlp]
    return DENSE, int(weight.shape[1]), 0, 0, ""


def _routing(model, mlp) -> str:
    """Which rule the router's chosen weights follow, found by asking the router (four embedding rows
    as its input): their softmax over the k chosen logits alone (they add up to 1), or their share
    of the softmax over every expert. Tensor methods only: this module imports no torch."""
    router = getattr(mlp, "router", None) or mlp.gate
    x = model.get_input_embeddings().weight[:4].detach().to(router.weight.dtype)
    logits, weights, index = (t.detach() for t in router(x)[:3])
    chosen = logits.float().gather(-1, index)

    def close(a, b) -> bool:
        return float((a - b).abs().max()) < 1e-5

    if close(weights.float(), chosen.softmax(dim=-1)):
        return TOP_K_THEN_SOFTMAX
    if close(weights.float(), logits.float().softmax(dim=-1).gather(-1, index)):
        return SOFTMAX_THEN_TOP_K
    return "other"


def _score_rule(scale: float, d_head: int, cfg) -> str:
    if math.isclose(scale, d_head ** -0.5, rel_tol=1e-6):
        return INV_SQRT_D_HEAD
    if math.isclose(scale, float(getattr(cfg, "attention_multiplier", math.nan)), rel_tol=1e-6):
        return "attention_multiplier"
    return "other"


def _rope_base(cfg, rotary) -> float:
    if rotary is None:
        return 0.0
    params = getattr(cfg, "rope_parameters", None) or {}
    base = params.get("rope_theta") if isinstance(params, dict) else None
    return float(base if base is not None else getattr(cfg, "rope_theta", 10000.0))
