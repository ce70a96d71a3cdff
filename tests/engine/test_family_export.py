"""``python -m engine --export`` for every family beside GPT-2 (Llama, Qwen2, Qwen3, GraniteMoe, Mixtral):
the path arrays of each step, reopened from the file, equal the plain transformers model's own forward
over the same tokens (eager attention weights, every block's input, its KV cache) and the steps' records.
Tiny random models with grouped heads (4 query / 2 key-value heads; Qwen3 with d_head 24 != d / H)
and the session-file tests' prompt."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from transformers import AutoModelForCausalLM

from engine import SamplingSettings, Session, load_model
from engine.cli import main
from engine.random_model import TINY, write_random_model
from engine.session_read import read_session
from engine.session_write import save_session
from tests.conftest import FAMILY_PROMPT

TYPES = ("llama", "qwen2", "qwen3", "granitemoe", "mixtral")
ATOL = 1e-4  # float32, as the families' hook values (tests/engine/test_families.py)


@pytest.fixture(scope="module", params=TYPES)
def exported(request, tmp_path_factory):
    """(session, the reopened file's arrays) after the prefill and two decode steps, greedy, saved as
    --export saves. Weights drawn 10x wider than the configs' default (initializer_range 0.2 for 0.02):
    at the default the attention is nearly uniform (no weight above 0.06) and the residual stream
    under 0.1, too flat for a 1e-4 comparison to tell a wrong value from a right one; at 0.2 the
    heads pick positions (weights up to 0.9) and the residual reaches 9."""
    family = request.param
    folder = write_random_model(tmp_path_factory.mktemp(family) / family, family, seed=2, initializer_range=0.2, **TINY[family])
    session = Session(load_model(str(folder)), SamplingSettings(greedy=True))
    session.set_prompt(FAMILY_PROMPT)
    for _ in range(3):
        session.step()
    path = save_session(session, tmp_path_factory.mktemp("export") / "export.npz", inside=True)  # engine/cli.py's call
    return session, read_session(path).arrays


@pytest.fixture(scope="module")
def own(exported):
    """(model, output): an independent eager copy of the weights run once over the exported branch's
    fed tokens, with its attention weights, hidden states and KV cache."""
    session, a = exported
    model = AutoModelForCausalLM.from_pretrained(session.info.source, attn_implementation="eager",
                                                 dtype=torch.float32, local_files_only=True).eval()
    fed = a["input_ids"][:-1]  # the last token taken was never fed
    with torch.no_grad():
        out = model(torch.tensor(fed[None]), output_attentions=True, output_hidden_states=True, use_cache=True)
    return model, out


def rows(a) -> list[tuple[int, int]]:
    """(step s, its newest position r) for each step of the file."""
    prompt_len = int(a["prompt_len"])
    return [(s, prompt_len - 1 + s) for s in range(len(a["chosen"]))]


def test_every_step_has_the_path_keys_with_grouped_heads(exported):
    session, a = exported
    info, moe = session.info, session.info.family in ("GraniteMoe", "Mixtral")
    L, H, KV, dh, d = info.n_layer, info.n_head, info.kv_heads, info.head_dim, info.d_model
    assert KV == 2 < H == 4 and (dh == 24) == (info.family == "Qwen3")
    assert len(rows(a)) == 3
    for s, r in rows(a):
        assert a[f"q_{s}"].shape == a[f"z_{s}"].shape == (L, H, dh)
        assert a[f"k_{s}"].shape == a[f"v_{s}"].shape == (L, KV, dh)
        assert a[f"scores_{s}"].shape == (L, H, r + 1)
        assert a[f"attn_out_{s}"].shape == a[f"resid_mid_{s}"].shape == a[f"mlp_out_{s}"].shape == (L, d)
        assert (f"mlp_pre_{s}" in a) == (f"mlp_post_{s}" in a) == (not moe)  # an MoE block has no single MLP
        assert all(a[k].dtype == np.float32 for k in a if k.endswith(f"_{s}") and not k.startswith("lens_ids"))


def test_scores_are_the_models_own_before_its_softmax(exported, own):
    """softmax(scores_s) over the causal row is the eager attention's weights; each diagonal entry is
    q_s · k_s × the scale the config gives (1/√dh, GraniteMoe's attention_multiplier)."""
    session, a = exported
    model, out = own
    info = session.info
    group = info.n_head // info.kv_heads
    scale = getattr(model.config, "attention_multiplier", info.head_dim ** -0.5)
    for s, r in rows(a):
        weights = torch.stack([w[0, :, r, : r + 1] for w in out.attentions]).numpy()  # [L, H, r + 1]
        assert weights.max() > 3 / (r + 1)  # some head picks positions: a uniform row would not tell wrong scores from right
        scores = torch.from_numpy(a[f"scores_{s}"])
        np.testing.assert_allclose(torch.softmax(scores, dim=-1).numpy(), weights, atol=1e-5, rtol=0)
        own_diag = np.einsum("lhd,lhd->lh", a[f"q_{s}"], np.repeat(a[f"k_{s}"], group, axis=1)) * scale
        np.testing.assert_allclose(a[f"scores_{s}"][:, :, r], own_diag, atol=ATOL, rtol=1e-5)


def test_k_and_v_are_what_the_kv_cache_holds(exported, own):
    """The key after RoPE and the value, per key/value head: the model's own cache at that position."""
    _, a = exported
    _, out = own
    for s, r in rows(a):
        np.testing.assert_allclose(a[f"k_{s}"], torch.stack([layer.keys[0, :, r] for layer in out.cache.layers]).numpy(), atol=ATOL, rtol=0)
        np.testing.assert_allclose(a[f"v_{s}"], torch.stack([layer.values[0, :, r] for layer in out.cache.layers]).numpy(), atol=ATOL, rtol=0)


def rotate(x: torch.Tensor, position: int, theta: float) -> torch.Tensor:
    """RoPE written out (default type): dimension i turns with i + dh/2 by position x theta^(-2i/dh)."""
    dh = x.shape[-1]
    angle = position * theta ** (-torch.arange(0, dh, 2, dtype=torch.float64) / dh)
    cos, sin = torch.cos(angle).float(), torch.sin(angle).float()
    x1, x2 = x[..., : dh // 2], x[..., dh // 2 :]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)


def test_q_is_the_rotated_query_of_the_blocks_input(exported, own):
    session, a = exported
    model, out = own
    theta = model.config.rope_parameters["rope_theta"]
    with torch.no_grad():
        for s, r in rows(a):
            for layer, block in enumerate(model.model.layers):
                attn = block.self_attn
                q = attn.q_proj(block.input_layernorm(out.hidden_states[layer][0, r])).view(session.info.n_head, -1)
                if hasattr(attn, "q_norm"):  # Qwen3 normalises each head before RoPE
                    q = attn.q_norm(q)
                np.testing.assert_allclose(a[f"q_{s}"][layer], rotate(q, r, theta).numpy(), atol=ATOL, rtol=1e-5)


def test_z_attn_out_and_the_residual_stream(exported, own):
    """z = the eager weights over the cached values; attn_out = W_O z (× GraniteMoe's residual_multiplier:
    what is added to the residual stream, as TransformerLens's hook_attn_out); resid_mid and the next
    block's input are the residual plus each output; the final norm of the last one is the model's
    last hidden state."""
    session, a = exported
    model, out = own
    info = session.info
    group, mult = info.n_head // info.kv_heads, getattr(model.config, "residual_multiplier", 1.0)
    hidden = out.hidden_states  # L + 1: every block's input, then the final norm's output
    with torch.no_grad():
        for s, r in rows(a):
            for layer, block in enumerate(model.model.layers):
                w = out.attentions[layer][0, :, r, : r + 1]  # [H, r + 1]
                values = out.cache.layers[layer].values[0, :, : r + 1].repeat_interleave(group, dim=0)  # [H, r + 1, dh]
                z = torch.einsum("ht,htd->hd", w, values)
                np.testing.assert_allclose(a[f"z_{s}"][layer], z.numpy(), atol=ATOL, rtol=1e-5)
                np.testing.assert_allclose(a[f"attn_out_{s}"][layer], mult * block.self_attn.o_proj(z.reshape(-1)).numpy(),
                                           atol=ATOL, rtol=1e-5)
                resid_mid = hidden[layer][0, r] + torch.from_numpy(a[f"attn_out_{s}"][layer])
                np.testing.assert_allclose(a[f"resid_mid_{s}"][layer], resid_mid.numpy(), atol=ATOL, rtol=1e-5)
                resid_post = resid_mid + torch.from_numpy(a[f"mlp_out_{s}"][layer])
                after = hidden[layer + 1][0, r] if layer + 1 < info.n_layer else None
                if after is not None:
                    np.testing.assert_allclose(resid_post.numpy(), after.numpy(), atol=ATOL, rtol=1e-5)
                else:
                    np.testing.assert_allclose(model.model.norm(resid_post).numpy(), hidden[-1][0, r].numpy(), atol=ATOL, rtol=1e-5)


def test_a_gated_mlp_keeps_the_gate_before_its_activation(exported, own):
    """mlp_pre = x · W_gate (TransformerLens's mlp.hook_pre), mlp_post = SiLU(gate) × x · W_up, and the down
    projection of mlp_post is mlp_out; a mixture of experts' file has neither."""
    session, a = exported
    model, _ = own
    if session.info.family in ("GraniteMoe", "Mixtral"):
        assert not [k for k in a if k.startswith(("mlp_pre", "mlp_post"))]
        return
    with torch.no_grad():
        for s, _r in rows(a):
            for layer, block in enumerate(model.model.layers):
                x = block.post_attention_layernorm(torch.from_numpy(a[f"resid_mid_{s}"][layer]))
                mlp = block.mlp
                np.testing.assert_allclose(a[f"mlp_pre_{s}"][layer], mlp.gate_proj(x).numpy(), atol=ATOL, rtol=1e-5)
                post = torch.nn.functional.silu(mlp.gate_proj(x)) * mlp.up_proj(x)
                np.testing.assert_allclose(a[f"mlp_post_{s}"][layer], post.numpy(), atol=ATOL, rtol=1e-5)
                np.testing.assert_allclose(mlp.down_proj(torch.from_numpy(a[f"mlp_post_{s}"][layer])).numpy(),
                                           a[f"mlp_out_{s}"][layer], atol=ATOL, rtol=1e-5)


def test_logit_lens_and_final_hidden(exported, own):
    """Each lens row is the top 10 of the final norm + LM head (÷ logits_scaling) on that depth's residual;
    the last row is the step's own logits' top 10; final_hidden is what each step recorded."""
    session, a = exported
    model, out = own
    divide = getattr(model.config, "logits_scaling", 1.0)
    with torch.no_grad():
        for s, r in rows(a):
            record = session.records[s]
            for depth in range(session.info.n_layer):  # before block 0, ..., before the last block
                logits = (model.lm_head(model.model.norm(out.hidden_states[depth][0, r])) / divide).numpy()
                top = np.argsort(-logits, kind="stable")[:10]
                np.testing.assert_array_equal(a[f"lens_ids_{s}"][depth], top)
                np.testing.assert_allclose(a[f"lens_logits_{s}"][depth], logits[top], atol=ATOL, rtol=1e-5)
            np.testing.assert_array_equal(a[f"lens_ids_{s}"][-1], np.argsort(-record.logits, kind="stable")[:10])
            np.testing.assert_allclose(a["final_hidden"][s], record.final_hidden, atol=0, rtol=0)
    np.testing.assert_allclose(a["final_hidden"][-1], out.hidden_states[-1][0, -1].numpy(), atol=ATOL, rtol=1e-5)


def test_the_command_line_exports_a_llama_folder(tmp_path):
    folder = write_random_model(tmp_path / "tiny-llama", "llama", seed=3, **TINY["llama"])
    path = tmp_path / "f.npz"
    assert main(["--model", str(folder), "--steps", "2", "--export", str(path)]) == 0  # python -m engine: tests/engine/test_cli.py
    a = read_session(path).arrays
    assert a["probs"].shape == (2, 1000) and a["k_1"].shape == (2, 2, 16) and a["q_1"].shape == (2, 4, 16)
    assert a["scores_1"].shape == (2, 4, int(a["prompt_len"]) + 1)
