"""Every family beside GPT-2 (Llama, Qwen2, Qwen3, GraniteMoe, Mixtral) records what the plain
transformers model computes: each hook value, the step's records, greedy and sampled tokens, the KV
cache's grouped heads. Tiny random models for speed; a few tests at real models' shapes (slow)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from transformers import AutoModelForCausalLM

from engine import SamplingSettings, Session, families, hooks, load_model, sampling
from engine.errors import ModelLoadError
from engine.random_model import SHAPES, TINY, random_loaded, write_random_model

PROMPT = "The database stores each row of a table"
TYPES = ("llama", "qwen2", "qwen3", "granitemoe", "mixtral")


@pytest.fixture(scope="module", params=TYPES)
def loaded(request, tmp_path_factory):
    folder = write_random_model(tmp_path_factory.mktemp(request.param) / request.param, request.param, seed=1,
                                **TINY[request.param])
    return load_model(str(folder))


def plain_model(loaded):
    """An independent, unhooked copy of the same weights."""
    return AutoModelForCausalLM.from_pretrained(
        loaded.info.source, attn_implementation="eager", dtype=torch.float32, local_files_only=True
    ).eval()


def module_calls(model, paths: list[str], ids) -> dict[str, tuple]:
    """(input, output) of each module in ``paths`` during one plain forward pass: the model's own
    values, taken by the test's own hooks (not engine.hooks)."""
    seen, handles = {}, []
    for path in paths:
        def hook(_m, args, kwargs, output, path=path):
            seen[path] = (args[0] if args else kwargs["hidden_states"], output)
        handles.append(model.get_submodule(path).register_forward_hook(hook, with_kwargs=True))
    try:
        with torch.no_grad():
            out = model(torch.tensor([ids]), output_attentions=True, use_cache=True)
    finally:
        for h in handles:
            h.remove()
    return seen, out


def test_each_family_has_its_table_and_other_architectures_are_refused(loaded, tmp_path):
    family = families.family_of(loaded.model)
    assert family.name == loaded.info.family
    assert "hook_pos_embed" not in family.points and family.rope  # RoPE: no position vector
    assert {"blocks.{L}.attn.hook_rot_q", "blocks.{L}.attn.hook_rot_k", "blocks.{L}.ln1.hook_scale"} <= set(family.points)
    gated = {"blocks.{L}.mlp.hook_pre", "blocks.{L}.mlp.hook_pre_linear", "blocks.{L}.mlp.hook_post"}
    moe = {"blocks.{L}.mlp.hook_expert_weights", "blocks.{L}.mlp.hook_expert_indices"}
    assert (moe <= set(family.points)) if family.moe else (gated <= set(family.points))
    bert = tmp_path / "bert"
    bert.mkdir()
    (bert / "config.json").write_text('{"model_type": "bert"}')
    with pytest.raises(ModelLoadError, match="holds a bert model; nexttoken steps GPT-2 .*Llama.*Qwen2.*Qwen3.*GraniteMoe and Mixtral"):
        load_model(str(bert))


def test_every_hook_value_equals_the_plain_model(loaded):
    """Each point of the family's table, captured by engine.hooks in a prefill, against the plain
    model's own module inputs and outputs, attention weights and KV cache (float32, 1e-4)."""
    model, info = loaded.model, loaded.info
    family = families.family_of(model)
    ids = loaded.tokenizer.encode(PROMPT)
    n, L = len(ids), info.n_layer
    with torch.inference_mode(), hooks.capture(model, L, list(family.points)) as rec:
        model(torch.tensor([ids]))
    plain = plain_model(loaded)
    mlp = "block_sparse_moe" if info.family == "GraniteMoe" else "mlp"
    paths = ["model.embed_tokens", "model.norm"] + [
        f"model.layers.{i}{p}" for i in range(L)
        for p in ("", ".input_layernorm", ".self_attn", ".self_attn.o_proj", ".post_attention_layernorm", f".{mlp}")
    ]
    if not family.moe:
        paths += [f"model.layers.{i}.mlp.{p}" for i in range(L) for p in ("gate_proj", "up_proj", "down_proj")]
    calls, out = module_calls(plain, paths, ids)

    def close(name, theirs, atol=1e-4):
        np.testing.assert_allclose(rec[name].float().numpy(), theirs.detach().float().numpy(), atol=atol, rtol=0, err_msg=name)

    embed_factor, residual_factor = multipliers(plain)
    close("hook_embed", calls["model.embed_tokens"][1] * embed_factor)
    close("blocks.0.hook_resid_pre", rec["hook_embed"])  # what is added is the residual stream's start
    for i in range(L):
        b, a = f"blocks.{i}", f"model.layers.{i}"
        close(f"{b}.hook_resid_pre", calls[a][0])
        close(f"{b}.hook_resid_post", calls[a][1])
        close(f"{b}.hook_attn_out", calls[f"{a}.self_attn"][1][0] * residual_factor)
        close(f"{b}.attn.hook_pattern", out.attentions[i])
        close(f"{b}.hook_resid_mid", calls[f"{a}.post_attention_layernorm"][0])
        close(f"{b}.hook_resid_mid", rec[f"{b}.hook_resid_pre"] + rec[f"{b}.hook_attn_out"])
        close(f"{b}.hook_mlp_out", calls[f"{a}.{mlp}"][1] * residual_factor)
        close(f"{b}.hook_resid_post", rec[f"{b}.hook_resid_mid"] + rec[f"{b}.hook_mlp_out"])
        for ln, path in (("ln1", f"{a}.input_layernorm"), ("ln2", f"{a}.post_attention_layernorm")):
            x, y = calls[path]
            weight = plain.get_submodule(path).weight
            assert rec[f"{b}.{ln}.hook_normalized"].shape == x.shape and rec[f"{b}.{ln}.hook_scale"].shape == (1, n, 1)
            close(f"{b}.{ln}.hook_normalized", y / weight)  # RMSNorm: x / scale, then x weight
            close(f"{b}.{ln}.hook_out", y)
            np.testing.assert_allclose((rec[f"{b}.{ln}.hook_normalized"] * rec[f"{b}.{ln}.hook_scale"]).numpy(), x.numpy(), atol=1e-4)
        # RoPE: the rotated keys are what the model's own cache stores, and rot_q with them gives its attention
        keys, values = out.cache.layers[i].keys, out.cache.layers[i].values  # [1, kv_heads, n, dh]
        assert keys.shape == (1, info.kv_heads, n, info.head_dim)
        close(f"{b}.attn.hook_rot_k", keys.transpose(1, 2))
        close(f"{b}.attn.hook_v", values.transpose(1, 2))
        scores = rec[f"{b}.attn.hook_attn_scores"]
        assert torch.isinf(scores[0, :, 0, 1:]).all()  # causal: -inf above the diagonal
        close(f"{b}.attn.hook_pattern", torch.softmax(scores, dim=-1))
        group = info.n_head // info.kv_heads
        rot_q, rot_k = rec[f"{b}.attn.hook_rot_q"], rec[f"{b}.attn.hook_rot_k"].repeat_interleave(group, dim=2)
        manual = torch.einsum("bqhd,bkhd->bhqk", rot_q, rot_k) * plain.model.layers[i].self_attn.scaling
        np.testing.assert_allclose(manual[0, :, -1, :].numpy(), scores[0, :, -1, :].numpy(), atol=1e-4)
        # hook_z through o_proj is the attention output; z is the pattern times the shared values
        close(f"{b}.attn.hook_z", calls[f"{a}.self_attn.o_proj"][0].reshape(1, n, info.n_head, info.head_dim))
        z = torch.einsum("bhqk,bkhd->bqhd", rec[f"{b}.attn.hook_pattern"], rec[f"{b}.attn.hook_v"].repeat_interleave(group, dim=2))
        close(f"{b}.attn.hook_z", z)
        assert rec[f"{b}.attn.hook_q"].shape == (1, n, info.n_head, info.head_dim)
        assert rec[f"{b}.attn.hook_k"].shape == (1, n, info.kv_heads, info.head_dim)
        if family.moe:
            _check_moe(rec, b, plain.get_submodule(f"{a}.{mlp}"), calls[f"{a}.{mlp}"], info.family, residual_factor)
        else:
            close(f"{b}.mlp.hook_pre", calls[f"{a}.mlp.gate_proj"][1])
            close(f"{b}.mlp.hook_pre_linear", calls[f"{a}.mlp.up_proj"][1])
            close(f"{b}.mlp.hook_post", calls[f"{a}.mlp.down_proj"][0])
            close(f"{b}.mlp.hook_post", F.silu(rec[f"{b}.mlp.hook_pre"]) * rec[f"{b}.mlp.hook_pre_linear"])
    close("ln_final.hook_out", calls["model.norm"][1])
    close("ln_final.hook_normalized", calls["model.norm"][1] / plain.model.norm.weight)


def multipliers(model) -> tuple[float, float]:
    """GraniteMoe's (embedding_multiplier, residual_multiplier); (1, 1) for the other families."""
    return getattr(model.config, "embedding_multiplier", 1.0), getattr(model.config, "residual_multiplier", 1.0)


def _check_moe(rec, b, block, call, family_name, residual_factor):
    """Router values against the model's own router, and the block's output rebuilt from the chosen experts
    (hook_mlp_out: times GraniteMoe's residual_multiplier, what is added)."""
    x, y = call  # the MoE block's input [1, n, d] and output
    router = block.router if family_name == "GraniteMoe" else block.gate
    with torch.no_grad():
        logits, weights, index = router(x.reshape(-1, x.shape[-1]))
    np.testing.assert_allclose(rec[f"{b}.mlp.gate.hook_out"].numpy(), logits.float().numpy(), atol=1e-5)  # [tokens, E]
    assert torch.equal(rec[f"{b}.mlp.hook_expert_indices"], index)
    np.testing.assert_allclose(rec[f"{b}.mlp.hook_topk_weights"].numpy(), weights.float().numpy(), atol=1e-5)
    scattered = rec[f"{b}.mlp.hook_expert_weights"]  # TransformerLens 4.x: the chosen weights, 0 elsewhere
    assert scattered.shape == logits.shape and (scattered > 0).sum(-1).tolist() == [index.shape[1]] * len(index)
    np.testing.assert_allclose(scattered.gather(-1, index).numpy(), weights.float().numpy(), atol=1e-6)
    probs = rec[f"{b}.mlp.hook_router_probs"]  # softmax over every expert
    np.testing.assert_allclose(probs.sum(-1).numpy(), 1.0, atol=1e-5)
    chosen = probs.gather(-1, index)
    if family_name == "Mixtral":  # Mixtral renormalises the chosen experts' share of that softmax
        np.testing.assert_allclose((chosen / chosen.sum(-1, keepdim=True)).numpy(), weights.numpy(), atol=1e-5)
    else:  # GraniteMoe: a softmax over the chosen logits alone, which gives the same ratios
        np.testing.assert_allclose(torch.softmax(logits.gather(-1, index), -1).numpy(), weights.numpy(), atol=1e-5)
    experts = block.experts
    rebuilt = torch.zeros_like(x[0])
    with torch.no_grad():
        for pos in range(x.shape[1]):
            for slot in range(index.shape[1]):
                e = int(index[pos, slot])
                gate, up = F.linear(x[0, pos], experts.gate_up_proj[e]).chunk(2, dim=-1)
                rebuilt[pos] += weights[pos, slot] * F.linear(experts.act_fn(gate) * up, experts.down_proj[e])
    np.testing.assert_allclose(rebuilt.numpy(), y[0].numpy(), atol=1e-4)
    np.testing.assert_allclose(rec[f"{b}.hook_mlp_out"][0].numpy(), rebuilt.numpy() * residual_factor, atol=1e-4)


def test_step_records_equal_the_plain_model(loaded):
    """A prefill and decode steps: residual stream, attention (float16: half an ulp), block outputs,
    final norm output and logits against a full recompute by the plain model."""
    session = Session(loaded, SamplingSettings(temperature=1.0, seed=5))
    session.set_prompt(PROMPT)
    plain = plain_model(loaded)
    L = loaded.info.n_layer
    mlp = "block_sparse_moe" if loaded.info.family == "GraniteMoe" else "mlp"
    paths = ["model.norm"] + [f"model.layers.{i}{p}" for i in range(L) for p in ("", ".self_attn", f".{mlp}")]
    for _ in range(4):
        trace = session.step()
        r = trace.record
        calls, out = module_calls(plain, paths, trace.context_ids.tolist())
        rows = slice(r.start, r.end)
        np.testing.assert_allclose(r.logits, out.logits[0, -1].numpy(), atol=1e-4, rtol=0)
        for i in range(L):
            np.testing.assert_allclose(r.resid[i], calls[f"model.layers.{i}"][0][0, rows].numpy(), atol=1e-4)
            np.testing.assert_allclose(r.resid[i + 1], calls[f"model.layers.{i}"][1][0, rows].numpy(), atol=1e-4)
            pattern = out.attentions[i][0, :, rows].numpy()
            ulp = np.spacing(np.abs(pattern).astype(np.float16)).astype(np.float32)
            assert (np.abs(r.attn[i].astype(np.float32) - pattern) <= ulp / 2 + 1e-7).all()
            for mine, path in ((r.attn_out[i], f"model.layers.{i}.self_attn"), (r.mlp_out[i], f"model.layers.{i}.{mlp}")):
                theirs = calls[path][1]
                theirs = (theirs[0] if isinstance(theirs, tuple) else theirs)[0, -1].numpy() * multipliers(plain)[1]
                half_ulp = np.spacing(np.abs(theirs).astype(np.float16)).astype(np.float32) / 2
                assert (np.abs(mine.astype(np.float32) - theirs) <= half_ulp + 1e-6).all(), path
        np.testing.assert_allclose(r.final_hidden, calls["model.norm"][1][0, -1].numpy(), atol=1e-4)
        assert not r.pos_embed.any()  # RoPE: nothing added to the residual stream for the position
        # the sampled token is the draw from the plain model's own distribution
        dist = sampling.distribution(out.logits[0, -1].numpy(), trace.context_ids, session.settings)
        assert sampling.draw(dist, r.step).token == r.chosen


def test_greedy_steps_equal_generate(loaded):
    steps = 6
    session = Session(loaded, SamplingSettings(greedy=True), max_new_tokens=steps)
    ids = session.set_prompt(PROMPT)
    mine = [session.step().chosen for _ in range(steps)]
    with torch.no_grad():
        out = plain_model(loaded).generate(torch.tensor([ids]), max_new_tokens=steps, min_new_tokens=steps,
                                           do_sample=False, pad_token_id=0)
    assert mine == out[0, len(ids):].tolist()


def test_kv_cache_holds_the_grouped_heads_the_model_stores(loaded):
    session = Session(loaded, SamplingSettings(greedy=True))
    ids = session.set_prompt(PROMPT)
    session.step()
    trace = session.step()
    info = loaded.info
    with torch.no_grad():
        out = plain_model(loaded)(torch.from_numpy(trace.context_ids)[None], use_cache=True)
    T = len(ids) + 1
    for layer in range(info.n_layer):
        theirs = out.cache.layers[layer]
        assert theirs.keys.shape == (1, info.kv_heads, T, info.head_dim)
        for head in range(info.n_head):
            keys, values = session.cached_kv(layer, head)
            kv_head = head // (info.n_head // info.kv_heads)
            np.testing.assert_allclose(keys, theirs.keys[0, kv_head].numpy(), atol=1e-4)
            np.testing.assert_allclose(values, theirs.values[0, kv_head].numpy(), atol=1e-4)
    kv = trace.record.kv
    assert kv.bytes_per_position == 2 * info.n_layer * info.kv_heads * info.head_dim * 4
    assert kv.full_heads_bytes_per_position == 2 * info.n_layer * info.n_head * info.head_dim * 4
    assert kv.total_bytes == kv.bytes_per_position * T
    assert info.kv_heads < info.n_head


def test_the_query_against_the_cached_keys_gives_the_attention_row(loaded):
    session = Session(loaded, SamplingSettings(greedy=True))
    session.set_prompt(PROMPT)
    session.step()
    trace = session.step()
    dh = loaded.info.head_dim
    for layer in range(loaded.info.n_layer):
        for head in range(loaded.info.n_head):
            keys, _ = session.cached_kv(layer, head)
            q = session.query(layer, head)
            scale = loaded.model.model.layers[layer].self_attn.scaling
            row = torch.softmax(torch.from_numpy(keys @ q * scale), -1).numpy()
            np.testing.assert_allclose(row, trace.record.attn[layer, head, -1].astype(np.float32), atol=2e-3)
    assert dh == loaded.info.head_dim


REAL = [name for name in SHAPES if name != "Qwen3-0.6B"] + ["Qwen3-0.6B"]


@pytest.mark.slow  # builds models of 135M to 1.3B random parameters
@pytest.mark.parametrize("name", REAL)
def test_real_shapes_step_and_equal_the_plain_model(name, tmp_path):
    model_type, config = SHAPES[name]
    loaded = random_loaded(tmp_path / name, model_type, **config)
    info = loaded.info
    assert (info.n_layer, info.n_head, info.kv_heads, info.d_model, info.vocab_size) == (
        config["num_hidden_layers"], config["num_attention_heads"], config["num_key_value_heads"],
        config["hidden_size"], config["vocab_size"])
    tied = loaded.model.lm_head.weight.data_ptr() == loaded.model.model.embed_tokens.weight.data_ptr()
    assert tied == config["tie_word_embeddings"]
    session = Session(loaded, SamplingSettings(greedy=True))
    ids = session.set_prompt(PROMPT)
    first = session.step()
    second = session.step()
    assert all(not m._forward_hooks for m in loaded.model.modules())
    with torch.no_grad():  # the same weights without hooks: the plain model's own computation
        out = loaded.model(torch.tensor([ids + [first.chosen]]), output_attentions=True, use_cache=True)
    np.testing.assert_allclose(second.record.logits, out.logits[0, -1].numpy(), atol=1e-4, rtol=0)
    np.testing.assert_allclose(second.record.attn[:, :, -1].astype(np.float32),
                               torch.stack([a[0, :, -1] for a in out.attentions]).numpy(), atol=1e-3)
    assert out.cache.layers[0].keys.shape[1] == info.kv_heads
    assert second.record.kv.total_bytes == 2 * info.n_layer * (len(ids) + 1) * info.kv_heads * info.head_dim * 4


def test_an_embedding_row_without_a_token_reads_as_unused(loaded):
    """Qwen2.5's embedding has 151,936 rows for 151,665 tokens: a random or odd model may pick a row
    with no token, which must still read as a chip (not crash the step)."""
    beyond = len(loaded.tokenizer.hf) + 5
    assert loaded.tokenizer.piece(beyond) == f"<unused-{beyond}>"


@pytest.mark.parametrize("name, total, active", [
    ("granite-3.1-1b-a400m", 1.3e9, 0.4e9),  # IBM's headline: 1.3B total, about 400M active
    ("SmolLM2-135M", 135e6, 135e6),
    ("Qwen2.5-0.5B", 494e6, 494e6),
])
def test_parameter_counts_at_real_shapes_match_the_published_sizes(name, total, active):
    """Counted from the model's own modules, built on the meta device (no memory for the weights)."""
    from transformers import AutoConfig

    model_type, config = SHAPES[name]
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(AutoConfig.for_model(model_type, **config))
    counted_total, counted_active = families.parameter_counts(model)
    assert counted_total == pytest.approx(total, rel=0.05)
    assert counted_active == pytest.approx(active, rel=0.1)


def test_moe_active_parameters_are_the_chosen_experts_share(loaded):
    total, active = families.parameter_counts(loaded.model)
    assert total == loaded.info.n_params == sum(p.numel() for p in loaded.model.parameters())
    if not families.family_of(loaded.model).moe:
        assert active == total
        return
    cfg = loaded.model.config
    per_expert = sum(p[0].numel() for name, p in loaded.model.named_parameters() if ".experts." in name)
    layers_experts = per_expert * cfg.num_local_experts  # every layer's experts' weights
    assert active == total - layers_experts + per_expert * cfg.num_experts_per_tok
    assert "active per token" in loaded.info.label
