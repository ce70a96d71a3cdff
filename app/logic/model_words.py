"""Words about what the model on screen is made of, chosen by its facts (``engine.architecture``).

A text in ``resources/help/<language>.json`` is a string, or a choice by one of the model's facts:
``{"by": "lm_head", "tied": "...", "separate": "..."}`` (choices nest: a variant may itself be a
choice). ``facts`` names every fact a choice may ask; ``choose`` follows the choices for the model
loaded, so a Qwen2 with q/k/v biases, a Llama with a separate LM head or a GraniteMoe with its
multipliers gets the right words with no branch in the code. For a model whose facts are unknown
(no Architecture) a choice gives "": that sentence is not shown rather than guessed.

Plain Python, no Qt: the tour, the Flow, Inside, the help and the Model dialog all use it.
"""

from __future__ import annotations

import math

from engine.architecture import INV_SQRT_D_HEAD, Architecture

ACTIVATIONS = {"gelu": "GELU", "gelu_new": "GELU", "gelu_pytorch_tanh": "GELU", "gelu_fast": "GELU", "silu": "SiLU",
               "relu": "ReLU"}


def _yes(flag: bool) -> str:
    return "true" if flag else "false"


def facts(arch: Architecture | None) -> dict[str, str]:
    """The facts a text may choose by, as the strings its variants are keyed with ({} when unknown)."""
    if arch is None:
        return {}
    return {
        "position": arch.position,  # "learned" (a position table is added) or "rotary" (RoPE)
        "norm": arch.norm,  # "LayerNorm" or "RMSNorm"
        "norm_shift": _yes(arch.norm_shift),
        "qk_norm": _yes(arch.qk_norm),
        "mlp": arch.mlp,  # "dense", "gated" or "experts"
        "routing": arch.routing or "none",  # engine.architecture.TOP_K_THEN_SOFTMAX, SOFTMAX_THEN_TOP_K
        "qkv_bias": _yes(arch.qkv_bias),
        "o_bias": _yes(arch.o_bias),
        "mlp_bias": _yes(arch.mlp_bias),
        "lm_head_bias": _yes(arch.lm_head_bias),
        "heads": "grouped" if arch.grouped else "full",
        "score_rule": arch.score_rule if arch.score_rule == INV_SQRT_D_HEAD else "multiplier",
        "scaled_embedding": _yes(arch.embedding_multiplier != 1.0),
        "scaled_residual": _yes(arch.residual_multiplier != 1.0),
        "scaled_logits": _yes(arch.logits_divisor != 1.0),
        "lm_head": "tied" if arch.tied_lm_head else "separate",
        "chat_template": _yes(arch.chat_template),
        "default_system": _yes(bool(arch.default_system)),
    }


def choose(entry, arch: Architecture | None) -> str:
    """The variant of ``entry`` (a string or a choice, see the module docstring) for ``arch``."""
    known = facts(arch)
    while isinstance(entry, dict):
        value = known.get(entry["by"])
        if value is None:
            return ""
        entry = entry[value]
    return entry


def values(arch: Architecture | None) -> dict:
    """The numbers and names a text may fill in from the model's facts ({} when unknown)."""
    if arch is None:
        return {}
    return dict(
        d_model=arch.d_model, d_mlp=arch.d_mlp, d_head=arch.d_head, n_head=arch.n_head, kv_heads=arch.n_kv_heads,
        group=arch.n_head // arch.n_kv_heads, n_layer=arch.n_layer, vocab=arch.vocab_size, context=arch.context,
        sqrt_d=math.sqrt(arch.d_model), activation=activation_name(arch), norm=arch.norm,
        rope_base=arch.rope_base, rope_dims=arch.rope_dims, n_experts=arch.n_experts, k_experts=arch.experts_per_token,
        score_scale=arch.score_scale, inv_sqrt_d_head=arch.d_head ** -0.5, score_attribute=arch.score_rule,
        embedding_multiplier=arch.embedding_multiplier, residual_multiplier=arch.residual_multiplier,
        logits_divisor=arch.logits_divisor, n_params=arch.n_params, n_active_params=arch.n_active_params,
        active_share=arch.n_active_params / arch.n_params if arch.n_params else 1.0,
        default_system=arch.default_system, end_of_turn=", ".join(arch.end_of_turn),
    )


def activation_name(arch: Architecture) -> str:
    return ACTIVATIONS.get(arch.activation, arch.activation)


class _Numbers(dict):
    def __missing__(self, key):  # a number the text wants but this step does not have: say so
        return "?"


def fill(entry, arch: Architecture | None, numbers: dict | None = None, fragments: dict | None = None) -> str:
    """``entry``'s variant for ``arch`` with its fields filled in from the model's facts, ``numbers``
    and ``fragments`` (name -> a text or choice, itself filled in first: ``{embedding_scale}``)."""
    text = choose(entry, arch)
    if not text:
        return ""
    known = _Numbers(values(arch) | (numbers or {}))
    try:
        for name, fragment in (fragments or {}).items():
            if not name.startswith("_") and "{" + name + "}" in text:
                known[name] = choose(fragment, arch).format_map(known)
        return text.format_map(known)
    except (ValueError, TypeError):  # a "?" where a number with a format was wanted: nothing to say yet
        return ""


def architecture_rows(arch: Architecture) -> list[tuple[str, str]]:
    """The Model dialog's table: (what, this model's value), in the order the model computes."""
    position = ("a learned table of positions added to the token's row" if not arch.rotary else
                f"rotary (RoPE): q and k turned by position, {arch.rope_dims} of {arch.d_head} dimensions per head, base {arch.rope_base:,.0f}")
    norm = f"{arch.norm}, " + ("times a learned scale plus a learned shift" if arch.norm_shift else "times a learned scale, no shift")
    heads = (f"{arch.n_head} query heads sharing {arch.n_kv_heads} key/value heads ({arch.n_head // arch.n_kv_heads} each)"
             if arch.grouped else f"{arch.n_head} heads, each with its own keys and values")
    act = activation_name(arch)
    if arch.mlp == "dense":
        mlp = f"{arch.d_model} → {arch.d_mlp}, {act}, {arch.d_mlp} → {arch.d_model}"
    elif arch.mlp == "gated":
        mlp = f"gated: gate and up {arch.d_model} → {arch.d_mlp} each, {act}(gate) × up, down {arch.d_mlp} → {arch.d_model}"
    else:
        mlp = (f"{arch.n_experts} experts (each gated, {arch.d_model} → {arch.d_mlp} → {arch.d_model}), "
               f"{arch.experts_per_token} chosen per token by a router: {arch.routing}")
    biases = [name for name, flag in (("q/k/v", arch.qkv_bias), ("attention output", arch.o_bias), ("MLP", arch.mlp_bias),
                                      ("LM head", arch.lm_head_bias)) if flag]
    if arch.score_rule == INV_SQRT_D_HEAD:
        score = f"q · k × 1/√{arch.d_head} = {arch.score_scale:.4g}"
    else:
        score = f"q · k × {arch.score_scale:.4g} (its {arch.score_rule}; 1/√{arch.d_head} would be {arch.d_head ** -0.5:.4g})"
    multipliers = [text for text, value in ((f"embedding × {arch.embedding_multiplier:g}", arch.embedding_multiplier),
                                            (f"each block's additions × {arch.residual_multiplier:g}", arch.residual_multiplier),
                                            (f"logits ÷ {arch.logits_divisor:g}", arch.logits_divisor)) if value != 1.0]
    params = f"{arch.n_params:,}"
    if arch.n_active_params != arch.n_params:
        params += f" ({arch.n_active_params:,} active per token: {arch.n_active_params / arch.n_params:.0%})"
    return [
        ("blocks × width", f"{arch.n_layer} blocks, d = {arch.d_model}"),
        ("vocabulary", f"{arch.vocab_size:,} tokens"),
        ("context", f"{arch.context:,} positions"),
        ("position", position),
        ("norm", norm),
        ("norms sit", ", ".join(arch.norms)),
        ("attention heads", f"{heads}, {arch.d_head} numbers per head"),
        ("attention scores", score),
        ("MLP", mlp),
        ("biases", ", ".join(biases) if biases else "none"),
        ("multipliers", "; ".join(multipliers) if multipliers else "none"),
        ("LM head", "the token embedding table itself (tied)" if arch.tied_lm_head else "a matrix of its own (not tied)"),
        ("parameters", params),
        ("chat template", ("yes" if arch.chat_template else "none")),
        ("default system message", f"“{arch.default_system}”" if arch.default_system else "none"),
        ("end of turn", ", ".join(arch.end_of_turn) or "none"),
    ]


def architecture_line(arch: Architecture | None) -> str:
    """The model in one line (the Flow shows it): what its position, norm, MLP and LM head are."""
    if arch is None:
        return ""
    position = "learned positions" if not arch.rotary else "RoPE"
    heads = f"{arch.n_head} heads / {arch.n_kv_heads} kv" if arch.grouped else f"{arch.n_head} heads"
    mlp = {"dense": f"{activation_name(arch)} MLP", "gated": f"gated {activation_name(arch)} MLP",
           "experts": f"{arch.experts_per_token} of {arch.n_experts} experts"}[arch.mlp]
    head = "tied LM head" if arch.tied_lm_head else "own LM head"
    return f"{arch.n_layer} blocks · d {arch.d_model} · {heads} · {position} · {arch.norm} · {mlp} · {head}"


def system_placeholder(arch: Architecture | None) -> tuple[str, ...]:
    """The empty System field's grey text, its wordings longest first (the field shows the first
    that fits): what the model reads when it stays empty."""
    if arch is None or not arch.chat_template:
        return ("System message (optional)",)
    if arch.default_system:
        return (f"Empty: the model's chat template writes its own system message: “{arch.default_system}”",
                "Empty: the chat template writes its own system message (hover to read it)",
                "Empty: the template writes its own system message",
                "Empty: the template's own system message", "Empty: the template's own", "Empty: template's own")
    return ("System message (optional; empty: the model's chat template adds none)",
            "System message (optional; the template adds none)", "System message (optional)")
