"""engine.architecture: each fact read from the model itself, for every supported design."""

from __future__ import annotations

import json
import sys

import pytest

from engine.architecture import EXPERTS, GATED, DENSE, INV_SQRT_D_HEAD, LEARNED, ROTARY, TOP_K_THEN_SOFTMAX, Architecture
from engine.random_model import DESIGNS, write_random_model

# (folder name, model type, config): the designs the window's words must hold for
CASES = DESIGNS


@pytest.fixture(scope="module")
def described(tmp_path_factory) -> dict[str, Architecture]:
    from engine import load_model

    root = tmp_path_factory.mktemp("arch")
    return {name: load_model(str(write_random_model(root / name, t, **cfg))).info.architecture for name, (t, cfg) in CASES.items()}


def test_positions_norms_and_mlp(described):
    g, l, q3 = described["gpt2"], described["llama-tied"], described["qwen3"]
    assert (g.position, g.rope_dims, g.norm, g.norm_shift, g.mlp, g.d_mlp) == (LEARNED, 0, "LayerNorm", True, DENSE, 256)
    assert (l.position, l.rope_base, l.rope_dims, l.norm, l.norm_shift) == (ROTARY, 10000.0, 16, "RMSNorm", False)
    assert (l.mlp, l.d_mlp, l.activation) == (GATED, 96, "silu")
    assert q3.rope_dims == 24 and q3.d_head == 24 and q3.qk_norm and not l.qk_norm
    assert q3.norms == ("before attention", "on each query and key head", "before the MLP", "after the last block")


def test_biases_heads_and_tied_head(described):
    g, q2, l, lu = described["gpt2"], described["qwen2"], described["llama-tied"], described["llama-untied"]
    assert (g.qkv_bias, g.o_bias, g.mlp_bias) == (True, True, True)
    assert (q2.qkv_bias, q2.o_bias, q2.mlp_bias) == (True, False, False)
    assert (l.qkv_bias, l.o_bias, l.mlp_bias) == (False, False, False)
    assert l.tied_lm_head and not lu.tied_lm_head and not q2.tied_lm_head and g.tied_lm_head
    assert (l.n_head, l.n_kv_heads, l.d_head, l.grouped) == (4, 2, 16, True)
    assert lu.n_params == l.n_params + 1000 * 64  # the separate head's own matrix


def test_scales_multipliers_and_experts(described):
    gm, mx, q3 = described["granitemoe"], described["mixtral"], described["qwen3"]
    assert (gm.score_scale, gm.score_rule) == (0.2, "attention_multiplier")  # not 1/sqrt(16) = 0.25
    assert q3.score_rule == INV_SQRT_D_HEAD and q3.score_scale == pytest.approx(24 ** -0.5)
    assert (gm.embedding_multiplier, gm.residual_multiplier, gm.logits_divisor) == (3.0, 0.5, 2.0)
    assert (mx.embedding_multiplier, mx.residual_multiplier, mx.logits_divisor) == (1.0, 1.0, 1.0)
    for a, experts in ((gm, 6), (mx, 4)):
        assert (a.mlp, a.n_experts, a.experts_per_token, a.d_mlp, a.routing) == (EXPERTS, experts, 2, 32, TOP_K_THEN_SOFTMAX)
        assert a.n_active_params < a.n_params


def test_chat_facts(described):
    l, g = described["llama-tied"], described["gpt2"]
    assert (l.chat_template, l.default_system, l.end_of_turn) == (True, "", ("<|im_end|>",))
    assert (g.chat_template, g.end_of_turn) == (False, ("<|endoftext|>",))


def test_dict_round_trip(described):
    a = described["qwen3"]
    assert Architecture.from_dict(json.loads(json.dumps(a.to_dict()))) == a


def test_smollm2_default_system_message_and_describe_command(capsys):
    """``--describe`` in this process (test_cli runs ``python -m engine`` once in a child)."""
    from engine import paths
    from engine.cli import main

    folder = paths.offline_model()
    if folder is None:
        pytest.skip("SmolLM2-135M-Instruct is not fetched")
    assert main(["--model", str(folder), "--describe"]) == 0
    facts = json.loads(capsys.readouterr().out)
    assert facts["default_system"] == "You are a helpful AI assistant named SmolLM, trained by Hugging Face"
    assert (facts["tied_lm_head"], facts["rope_base"], facts["rope_dims"], facts["d_mlp"]) == (True, 100000.0, 64, 1536)
    assert (facts["n_head"], facts["n_kv_heads"], facts["end_of_turn"]) == (9, 3, ["<|im_end|>"])
