"""The model families nexttoken steps, each with its table from Hugging Face module paths to hook names.

One ``Family`` per design: GPT-2 (learned position vectors, LayerNorm, GELU MLP, full heads); the
Llama design as transformers implements it in ``LlamaForCausalLM``, ``Qwen2ForCausalLM`` (QKV
biases) and ``Qwen3ForCausalLM`` (an RMSNorm on every query and key head before RoPE): rotary
position embeddings, RMSNorm, a gated (SwiGLU) MLP, fewer key/value heads than query heads; and the
mixture-of-experts design of ``GraniteMoeForCausalLM`` and ``MixtralForCausalLM`` (the Llama design
with the MLP replaced by a router and experts).

Every name means what it means in TransformerLens (components/abstract_attention.py,
grouped_query_attention.py, rms_norm.py, mlps/gated_mlp.py, mlps/moe.py):

- ``hook_normalized`` is before the norm's weight; for RMSNorm ``hook_scale`` is sqrt(mean(x²) + eps)
  and ``hook_normalized`` is x / hook_scale (no mean subtracted).
- ``attn.hook_q`` is before RoPE; ``attn.hook_rot_q`` / ``hook_rot_k`` after it. With grouped heads
  ``hook_k``, ``hook_v`` and ``hook_rot_k`` have n_kv_heads heads ([batch, pos, kv_head, d_head]),
  as in TransformerLens's GroupedQueryAttention; ``hook_pattern`` and ``hook_z`` have every query head.
- Gated MLP: ``mlp.hook_pre`` = x @ W_gate (before the activation), ``mlp.hook_pre_linear`` = x @ W_in
  (the up projection), ``mlp.hook_post`` = act(pre) * pre_linear (the down projection's input).
- MoE (TransformerLens 4.x's MoERouterBridge; like every router hook there, batch and position are one
  axis, [batch x pos, ...], the layout of the router's own output): ``mlp.gate.hook_out`` the router's
  logits [tokens, n_experts]; ``mlp.hook_expert_indices`` [tokens, k] the chosen experts;
  ``mlp.hook_expert_weights`` [tokens, n_experts] the weights the chosen experts' outputs are summed
  with, scattered into the expert axis (0 for the experts not chosen). HookedTransformer 3.x used that
  name for the softmax over every expert before the top k; 4.x does not: that softmax is the
  engine's ``mlp.hook_router_probs`` (what Mixtral's router computes first; GraniteMoe's router never
  computes it: it takes the top k logits first and runs the softmax over those alone).

Names TransformerLens does not have are listed in ``NOT_IN_TRANSFORMERLENS`` with what they are.

GraniteMoe scales what it adds: the residual stream starts at the embedding row x embedding_multiplier,
each block adds its attention's and its MLP's output x residual_multiplier, and the logits are
divided by logits_scaling. As in TransformerLens 4.x (its Granite adapters), ``hook_embed``,
``hook_attn_out`` and ``hook_mlp_out`` are what is added, after that factor (``HookPoint.factor``), so
``hook_resid_pre`` = ``hook_embed`` and ``hook_resid_mid`` = ``hook_resid_pre`` + ``hook_attn_out``
hold for every family. The other families add the three unscaled, as GPT-2 does.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class HookPoint:
    """Where a TransformerLens value lives in a Hugging Face model.

    module: the module path (``{L}`` for the layer).
    take: which tensor of the call: "output", "output[i]" (a tuple's i-th item; an attention
        module's output[1] is its weights, only returned by the eager implementation), "input" (the
        first argument, positional or ``hidden_states=``) or "call" (the attention module's whole
        call: its input and its ``position_embeddings``, for values the model computes inside a
        function rather than a module), "outputs" (the whole output tuple).
    view: how that tensor becomes the TransformerLens value: "" as it is; "q", "k", "v" one third
        of GPT-2's ``c_attn`` output split per head; "heads" split per head (d_head from the
        attention module); "scale", "normalized" the LayerNorm statistics of the input;
        "rms_scale", "rms_normalized" the RMSNorm ones; "scores" q · k x the attention scale,
        causally masked (needs every key in the same pass: only in a pass without a KV cache);
        "rot_q", "rot_k" the query and key after RoPE, recomputed from the call with the model's
        own rotary function; "tokens" a router's output, [batch x pos, ...] (rows select tokens);
        "softmax" the softmax over the last axis of that; "expert_weights" a router's top-k weights
        scattered into [tokens, n_experts] (from its outputs: logits, top-k weights, top-k indices).
    factor: a config attribute the value is multiplied by ("" for none): GraniteMoe's
        embedding_multiplier and residual_multiplier, so the value is what is added to the residual stream.
    """

    module: str
    take: str
    view: str = ""
    factor: str = ""


@dataclass(frozen=True)
class Family:
    """One model design: which transformers model types it covers and its hook table.

    name: what a person reads ("Llama", "Qwen2", ...).
    model_types: config.json ``model_type`` values of this family.
    points: TransformerLens name -> HookPoint (``{L}`` for the layer).
    rope: True when positions are rotations of q and k (no position vector is added to the residual
        stream: ``hook_pos_embed`` does not exist).
    layers: the module path of the list of blocks (``layers.{L}`` is block L).
    """

    name: str
    model_types: tuple[str, ...]
    points: dict[str, HookPoint]
    rope: bool
    layers: str

    @property
    def moe(self) -> bool:
        return any("expert" in name for name in self.points)


_LN = "transformer.h.{L}.ln_1", "transformer.h.{L}.ln_2"
# TransformerLens name                       HF module, tensor, view                                   shape
GPT2_POINTS: dict[str, HookPoint] = {
    "hook_embed": HookPoint("transformer.wte", "output"),  # [batch, pos, d_model]
    "hook_pos_embed": HookPoint("transformer.wpe", "output"),  # [batch, pos, d_model] (or [1, pos, d_model])
    "blocks.{L}.hook_resid_pre": HookPoint("transformer.h.{L}", "input"),  # [batch, pos, d_model]
    "blocks.{L}.ln1.hook_scale": HookPoint(_LN[0], "input", "scale"),  # [batch, pos, 1]
    "blocks.{L}.ln1.hook_normalized": HookPoint(_LN[0], "input", "normalized"),  # [batch, pos, d_model]
    "blocks.{L}.ln1.hook_out": HookPoint(_LN[0], "output"),  # [batch, pos, d_model]
    "blocks.{L}.attn.hook_q": HookPoint("transformer.h.{L}.attn.c_attn", "output", "q"),  # [batch, pos, head, d_head]
    "blocks.{L}.attn.hook_k": HookPoint("transformer.h.{L}.attn.c_attn", "output", "k"),  # [batch, pos, head, d_head]
    "blocks.{L}.attn.hook_v": HookPoint("transformer.h.{L}.attn.c_attn", "output", "v"),  # [batch, pos, head, d_head]
    "blocks.{L}.attn.hook_attn_scores": HookPoint("transformer.h.{L}.attn.c_attn", "output", "scores"),  # [batch, head, query_pos, key_pos]
    "blocks.{L}.attn.hook_pattern": HookPoint("transformer.h.{L}.attn", "output[1]"),  # [batch, head, query_pos, key_pos]
    "blocks.{L}.attn.hook_z": HookPoint("transformer.h.{L}.attn.c_proj", "input", "heads"),  # [batch, pos, head, d_head]
    "blocks.{L}.hook_attn_out": HookPoint("transformer.h.{L}.attn", "output[0]"),  # [batch, pos, d_model]
    "blocks.{L}.hook_resid_mid": HookPoint(_LN[1], "input"),  # [batch, pos, d_model]
    "blocks.{L}.ln2.hook_scale": HookPoint(_LN[1], "input", "scale"),  # [batch, pos, 1]
    "blocks.{L}.ln2.hook_normalized": HookPoint(_LN[1], "input", "normalized"),  # [batch, pos, d_model]
    "blocks.{L}.ln2.hook_out": HookPoint(_LN[1], "output"),  # [batch, pos, d_model]
    "blocks.{L}.mlp.hook_pre": HookPoint("transformer.h.{L}.mlp.c_fc", "output"),  # [batch, pos, d_mlp]
    "blocks.{L}.mlp.hook_post": HookPoint("transformer.h.{L}.mlp.act", "output"),  # [batch, pos, d_mlp]
    "blocks.{L}.hook_mlp_out": HookPoint("transformer.h.{L}.mlp", "output"),  # [batch, pos, d_model]
    "blocks.{L}.hook_resid_post": HookPoint("transformer.h.{L}", "output"),  # [batch, pos, d_model]
    "ln_final.hook_scale": HookPoint("transformer.ln_f", "input", "scale"),  # [batch, pos, 1]
    "ln_final.hook_normalized": HookPoint("transformer.ln_f", "input", "normalized"),  # [batch, pos, d_model]
    "ln_final.hook_out": HookPoint("transformer.ln_f", "output"),  # [batch, pos, d_model]
}


def _llama_points(mlp: str, moe_router: str | None = None, scaled: bool = False) -> dict[str, HookPoint]:
    """The Llama design's table; ``mlp`` is the block's MLP module name, ``moe_router`` its router's
    (an MoE block has no gate/up/down projections of its own: its experts are fused 3-D weights);
    ``scaled``: the embedding and the blocks' outputs are scaled before they are added (GraniteMoe)."""
    embed_factor, residual_factor = ("embedding_multiplier", "residual_multiplier") if scaled else ("", "")
    block, attn, ln1, ln2 = "model.layers.{L}", "model.layers.{L}.self_attn", "model.layers.{L}.input_layernorm", "model.layers.{L}.post_attention_layernorm"
    points = {
        "hook_embed": HookPoint("model.embed_tokens", "output", factor=embed_factor),  # [batch, pos, d_model]
        "blocks.{L}.hook_resid_pre": HookPoint(block, "input"),  # [batch, pos, d_model]
        "blocks.{L}.ln1.hook_scale": HookPoint(ln1, "input", "rms_scale"),  # [batch, pos, 1]
        "blocks.{L}.ln1.hook_normalized": HookPoint(ln1, "input", "rms_normalized"),  # [batch, pos, d_model]
        "blocks.{L}.ln1.hook_out": HookPoint(ln1, "output"),  # [batch, pos, d_model]
        "blocks.{L}.attn.hook_q": HookPoint(f"{attn}.q_proj", "output", "heads"),  # [batch, pos, head, d_head]
        "blocks.{L}.attn.hook_k": HookPoint(f"{attn}.k_proj", "output", "heads"),  # [batch, pos, kv_head, d_head]
        "blocks.{L}.attn.hook_v": HookPoint(f"{attn}.v_proj", "output", "heads"),  # [batch, pos, kv_head, d_head]
        "blocks.{L}.attn.hook_rot_q": HookPoint(attn, "call", "rot_q"),  # [batch, pos, head, d_head]
        "blocks.{L}.attn.hook_rot_k": HookPoint(attn, "call", "rot_k"),  # [batch, pos, kv_head, d_head]
        "blocks.{L}.attn.hook_attn_scores": HookPoint(attn, "call", "scores"),  # [batch, head, query_pos, key_pos]
        "blocks.{L}.attn.hook_pattern": HookPoint(attn, "output[1]"),  # [batch, head, query_pos, key_pos]
        "blocks.{L}.attn.hook_z": HookPoint(f"{attn}.o_proj", "input", "heads"),  # [batch, pos, head, d_head]
        "blocks.{L}.hook_attn_out": HookPoint(attn, "output[0]", factor=residual_factor),  # [batch, pos, d_model]
        "blocks.{L}.hook_resid_mid": HookPoint(ln2, "input"),  # [batch, pos, d_model]
        "blocks.{L}.ln2.hook_scale": HookPoint(ln2, "input", "rms_scale"),  # [batch, pos, 1]
        "blocks.{L}.ln2.hook_normalized": HookPoint(ln2, "input", "rms_normalized"),  # [batch, pos, d_model]
        "blocks.{L}.ln2.hook_out": HookPoint(ln2, "output"),  # [batch, pos, d_model]
        "blocks.{L}.hook_mlp_out": HookPoint(f"{block}.{mlp}", "output", factor=residual_factor),  # [batch, pos, d_model]
        "blocks.{L}.hook_resid_post": HookPoint(block, "output"),  # [batch, pos, d_model]
        "ln_final.hook_scale": HookPoint("model.norm", "input", "rms_scale"),  # [batch, pos, 1]
        "ln_final.hook_normalized": HookPoint("model.norm", "input", "rms_normalized"),  # [batch, pos, d_model]
        "ln_final.hook_out": HookPoint("model.norm", "output"),  # [batch, pos, d_model]
    }
    if moe_router is None:
        points |= {
            "blocks.{L}.mlp.hook_pre": HookPoint(f"{block}.mlp.gate_proj", "output"),  # [batch, pos, d_mlp]
            "blocks.{L}.mlp.hook_pre_linear": HookPoint(f"{block}.mlp.up_proj", "output"),  # [batch, pos, d_mlp]
            "blocks.{L}.mlp.hook_post": HookPoint(f"{block}.mlp.down_proj", "input"),  # [batch, pos, d_mlp]
        }
    else:
        router = f"{block}.{mlp}.{moe_router}"  # returns (router_logits, top_k_weights, top_k_index)
        points |= {
            "blocks.{L}.mlp.gate.hook_out": HookPoint(router, "output[0]", "tokens"),  # [tokens, n_experts]
            "blocks.{L}.mlp.hook_router_probs": HookPoint(router, "output[0]", "softmax"),  # [tokens, n_experts]
            "blocks.{L}.mlp.hook_expert_weights": HookPoint(router, "outputs", "expert_weights"),  # [tokens, n_experts]
            "blocks.{L}.mlp.hook_expert_indices": HookPoint(router, "output[2]", "tokens"),  # [tokens, k]
            "blocks.{L}.mlp.hook_topk_weights": HookPoint(router, "output[1]", "tokens"),  # [tokens, k]
        }
    return points


# Checked against TransformerLens 4.3's TransformerBridge (tests/engine/test_transformer_lens_parity.py).
NOT_IN_TRANSFORMERLENS = {
    "blocks.{L}.mlp.hook_router_probs": "the softmax of the router's logits over every expert, [tokens, n_experts] "
                                        "(HookedTransformer 3.x's hook_expert_weights; 4.x gives that name the chosen weights)",
    "blocks.{L}.mlp.hook_topk_weights": "the weights the chosen experts' outputs are summed with, [tokens, k] "
                                        "(hook_expert_weights gathered at hook_expert_indices)",
}

GPT2 = Family("GPT-2", ("gpt2",), GPT2_POINTS, rope=False, layers="transformer.h")
LLAMA = Family("Llama", ("llama",), _llama_points("mlp"), rope=True, layers="model.layers")
QWEN2 = Family("Qwen2", ("qwen2",), LLAMA.points, rope=True, layers="model.layers")
QWEN3 = Family("Qwen3", ("qwen3",), LLAMA.points, rope=True, layers="model.layers")
GRANITE_MOE = Family("GraniteMoe", ("granitemoe",), _llama_points("block_sparse_moe", "router", scaled=True), rope=True,
                     layers="model.layers")
MIXTRAL = Family("Mixtral", ("mixtral",), _llama_points("mlp", "gate"), rope=True, layers="model.layers")
FAMILIES = (GPT2, LLAMA, QWEN2, QWEN3, GRANITE_MOE, MIXTRAL)

SUPPORTED_SENTENCE = (
    "nexttoken steps GPT-2 (gpt2, distilgpt2, gpt2-medium, ...), the Llama family (Llama, SmolLM2), "
    "Qwen2 and Qwen2.5, Qwen3, and the mixture-of-experts GraniteMoe and Mixtral models"
)


def family_of_type(model_type: str | None) -> Family | None:
    """The family whose config.json ``model_type`` is ``model_type``, or None."""
    return next((f for f in FAMILIES if model_type in f.model_types), None)


def family_of(model) -> Family:
    """The family of a loaded transformers model (ValueError for any other architecture)."""
    family = family_of_type(getattr(model.config, "model_type", None))
    if family is None:
        raise ValueError(f"{type(model).__name__} is not a supported model: {SUPPORTED_SENTENCE}.")
    return family


def parameter_counts(model) -> tuple[int, int]:
    """(total, active per token) parameters of a loaded model, a tied weight counted once.

    Dense models use every parameter for every token. In a mixture-of-experts layer each token runs
    through ``num_experts_per_tok`` of the ``num_experts`` experts, so of the experts' weights (the
    fused 3-D ``gate_up_proj`` and ``down_proj`` of each layer's experts module) only that share is
    active; everything else (embedding, attention, norms, routers) is used by every token.
    """
    total = sum(p.numel() for p in model.parameters())  # parameters() lists a tied weight once
    if not family_of(model).moe:
        return total, total
    experts = [m for m in model.modules() if type(m).__name__.endswith("Experts")]
    expert_params = sum(p.numel() for m in experts for p in m.parameters())
    share = model.config.num_experts_per_tok / model.config.num_local_experts
    return total, total - expert_params + round(expert_params * share)
