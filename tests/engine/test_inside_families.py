"""engine.inside for the Llama design and its MoE variant, against the plain transformers model's own modules."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from transformers import AutoModelForCausalLM

from engine.inside import ROUTER_RULES, inside
from tests.conftest import FAMILY_PROMPT, stepped_family_session

PROMPT = FAMILY_PROMPT
ATOL = 1e-4


@pytest.fixture(scope="module", params=("llama", "qwen2", "qwen3", "granitemoe", "mixtral"))
def case(request, tmp_path_factory):
    """(session after three greedy steps, its InsideTrace, the plain model's outputs at that position, the plain model)."""
    folder, session = stepped_family_session(request.param, tmp_path_factory)
    trace = inside(session)
    plain = AutoModelForCausalLM.from_pretrained(folder, attn_implementation="eager", torch_dtype=torch.float32).eval()
    ids = torch.from_numpy(session.token_ids()[: trace.position + 1])[None]
    with torch.inference_mode():
        out = plain(ids, output_hidden_states=True, output_attentions=True, output_router_logits=plain.config.model_type in ("mixtral", "granitemoe"))
    return session, trace, out, plain


@pytest.fixture(autouse=True)
def _no_grad():
    with torch.no_grad():
        yield


def rms(x: torch.Tensor, eps: float) -> torch.Tensor:
    return torch.sqrt((x.float() ** 2).mean(-1) + eps)


def test_rmsnorm_has_no_mean_and_equals_the_models_norm(case):
    _, t, out, plain = case
    assert t.rope and t.family == type(plain).__name__.removesuffix("ForCausalLM")
    assert not t.pos_embed.any()  # no position vector: zeros that the views must not draw as one
    for L, layer in enumerate(plain.model.layers):
        x = out.hidden_states[L][0, -1]
        np.testing.assert_allclose(t.resid_pre[L], x.numpy(), atol=ATOL)
        eps = layer.input_layernorm.variance_epsilon
        assert t.ln1_scale[L] == pytest.approx(float(rms(x, eps)), abs=ATOL)
        np.testing.assert_allclose(t.ln1_normalized[L], (x / rms(x, eps)).numpy(), atol=ATOL)
        np.testing.assert_allclose(t.ln1_out[L], layer.input_layernorm(x).numpy(), atol=ATOL)


def test_rope_turns_q_and_k_by_position_times_frequency_as_the_model_does(case):
    _, t, out, plain = case
    p = t.position
    cos, sin = plain.model.rotary_emb(out.hidden_states[0], torch.tensor([[p]]))
    apply = __import__(type(plain.model.layers[0].self_attn).__module__, fromlist=["x"]).apply_rotary_pos_emb
    for L, layer in enumerate(plain.model.layers):
        attn = layer.self_attn
        h = layer.input_layernorm(out.hidden_states[L][0, -1:])[None]  # [1, 1, d]
        q = attn.q_proj(h).view(1, 1, -1, attn.head_dim)
        k = attn.k_proj(h).view(1, 1, -1, attn.head_dim)
        if hasattr(attn, "q_norm"):
            q, k = attn.q_norm(q), attn.k_norm(k)
        np.testing.assert_allclose(t.q[L], q[0, 0].detach().numpy(), atol=ATOL)
        np.testing.assert_allclose(t.k[L], k[0, 0].detach().numpy(), atol=ATOL)
        rq, rk = apply(q.transpose(1, 2), k.transpose(1, 2), cos, sin)
        np.testing.assert_allclose(t.rot_q[L], rq[0, :, 0].detach().numpy(), atol=ATOL)
        np.testing.assert_allclose(t.rot_k[L], rk[0, :, 0].detach().numpy(), atol=ATOL)
        np.testing.assert_allclose(t.pattern[L], out.attentions[L][0, :, -1].numpy(), atol=ATOL)
        np.testing.assert_allclose(torch.softmax(torch.from_numpy(t.scores[L]), -1).numpy(), t.pattern[L], atol=ATOL)
    np.testing.assert_allclose(t.angles, p * plain.model.rotary_emb.inv_freq.numpy(), rtol=1e-6)


def test_grouped_heads_are_what_the_model_stores(case):
    session, t, _, plain = case
    cfg = plain.config
    assert t.kv_heads == cfg.num_key_value_heads < cfg.num_attention_heads
    group = cfg.num_attention_heads // cfg.num_key_value_heads
    assert t.kv_head.tolist() == [h // group for h in range(cfg.num_attention_heads)]
    keys, _ = session.cached_kv(t.kv_layers[0], group)  # query head ``group`` reads kv head 1
    np.testing.assert_allclose(t.keys[0, 1], keys[: t.position + 1], atol=ATOL)
    np.testing.assert_allclose(t.keys[0, 1, -1], t.rot_k[t.kv_layers[0], 1], atol=ATOL)  # the cache holds rotated keys


def test_gated_mlp_or_experts(case):
    _, t, out, plain = case
    cfg = plain.config
    for L, layer in enumerate(plain.model.layers):
        mid = t.resid_mid[L]
        x = layer.post_attention_layernorm(torch.from_numpy(mid))
        np.testing.assert_allclose(t.ln2_out[L], x.numpy(), atol=ATOL)
        if hasattr(layer, "mlp") and hasattr(layer.mlp, "gate_proj"):
            mlp = layer.mlp
            np.testing.assert_allclose(t.mlp_pre[L], mlp.gate_proj(x).numpy(), atol=ATOL)
            np.testing.assert_allclose(t.mlp_pre_linear[L], mlp.up_proj(x).numpy(), atol=ATOL)
            np.testing.assert_allclose(t.mlp_post[L], (mlp.act_fn(mlp.gate_proj(x)) * mlp.up_proj(x)).numpy(), atol=ATOL)
            np.testing.assert_allclose(t.mlp_out[L], mlp(x[None, None])[0, 0].numpy(), atol=ATOL)
            assert t.router_probs is None and t.active_params == t.n_params
            continue
        E, k = cfg.num_local_experts, cfg.num_experts_per_tok
        logits = out.router_logits[L].reshape(-1, E)[-1]  # this position's router logits
        probs = torch.softmax(logits.float(), -1)
        np.testing.assert_allclose(t.router_probs[L], probs.numpy(), atol=ATOL)
        chosen = torch.topk(probs, k).indices
        assert sorted(t.experts[L].tolist()) == sorted(chosen.tolist())
        weights = probs[t.experts[L]] / probs[t.experts[L]].sum()  # renormalised = softmax over the chosen logits
        np.testing.assert_allclose(t.expert_weights[L], weights.numpy(), atol=ATOL)
        assert t.mlp_pre.shape == (t.n_layer, 0)
    if t.router_probs is not None:
        assert t.router_rule == ROUTER_RULES[t.family].format(E=cfg.num_local_experts, k=cfg.num_experts_per_tok)


def test_active_parameters_against_a_count_from_the_models_modules(case):
    _, t, _, plain = case
    total = sum(p.numel() for p in plain.parameters())
    assert t.n_params == total == sum(part.count for part in t.params)
    cfg = plain.config
    if not hasattr(cfg, "num_local_experts"):
        assert t.active_params == total
        return
    idle = 0
    for layer in plain.model.layers:
        moe = layer.block_sparse_moe if hasattr(layer, "block_sparse_moe") else layer.mlp
        expert_weights = sum(p.numel() for name, p in moe.named_parameters() if "experts" in name)
        idle += expert_weights * (cfg.num_local_experts - cfg.num_experts_per_tok) // cfg.num_local_experts
    assert t.active_params == total - idle < total


def test_final_logits_and_parts(case):
    session, t, out, plain = case
    np.testing.assert_allclose(t.lens_logits[-1], np.sort(out.logits[0, -1].numpy())[::-1][: t.lens_logits.shape[1]], atol=ATOL)
    assert int(t.lens_ids[-1, 0]) == session.records[-1].chosen
    assert t.lm_head_tied == plain.config.tie_word_embeddings
    parts = t.params_by_part()
    assert "position embedding" not in parts and "final RMSNorm" in parts and "block 0 RMSNorm 1" in parts
