"""Every hook value the engine records equals TransformerLens's value of the same name.

TransformerLens 4.x (the ``parity`` extra) has no HookedTransformer: it wraps the Hugging Face model
in a ``TransformerBridge``. ``enable_compatibility_mode(no_processing=True)`` is its HookedTransformer
equivalent without weight processing (fold_ln, center_writing_weights, center_unembed and
fold_value_biases off), so every value is in the model's own coordinates, as the engine's are. The
bridge wraps an independent copy of the weights, loaded from the same folder (it edits the model it
wraps in place). GPT-2: the bundled demo model; the other families: tiny random models with grouped
KV heads, built locally with transformers' config classes (engine.random_model.TINY).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from engine import SamplingSettings, Session, families, hooks, load_model, paths
from engine.random_model import TINY, write_random_model

# About 20 s for the module (importing TransformerLens alone takes 4 s): run by .ci/run, which installs the extra.
pytestmark = pytest.mark.slow

PROMPT = "The database stores each row of a table"
ATOL = 1e-4
FAMILY_TYPES = ("gpt2", "llama", "qwen2", "qwen3", "granitemoe", "mixtral")


def bridge(folder):
    """TransformerLens's model of the weights in ``folder``: HookedTransformer's hooks, unprocessed weights."""
    from transformer_lens.model_bridge import TransformerBridge

    hf = AutoModelForCausalLM.from_pretrained(folder, attn_implementation="eager", dtype=torch.float32,
                                              local_files_only=True).eval()
    tl = TransformerBridge.boot_transformers(str(folder), hf_model=hf, tokenizer=AutoTokenizer.from_pretrained(folder))
    tl.enable_compatibility_mode(disable_warnings=True, no_processing=True)
    return tl


@pytest.fixture(scope="module", params=FAMILY_TYPES)
def pair(request, tmp_path_factory):
    """(engine's LoadedModel, TransformerLens's bridge) of the same weights."""
    # imported here, not at collection: importing TransformerLens takes seconds
    pytest.importorskip("transformer_lens", reason="TransformerLens is not installed: pip install -e '.[parity]'")
    if request.param == "gpt2":
        folder = paths.demo_model_dir()
    else:
        folder = write_random_model(tmp_path_factory.mktemp(request.param) / request.param, request.param,
                                    seed=3, **TINY[request.param])
    return load_model(str(folder)), bridge(folder)


def tl_cache(tl, ids):
    with torch.inference_mode():
        logits, cache = tl.run_with_cache(torch.tensor([ids]))
    return logits, cache


def assert_same(name, mine: torch.Tensor, theirs: torch.Tensor, atol=ATOL) -> float:
    """mine == theirs in shape and to ``atol`` (-inf where the other is -inf); returns the max |difference|."""
    assert tuple(mine.shape) == tuple(theirs.shape), f"{name}: engine {tuple(mine.shape)}, TransformerLens {tuple(theirs.shape)}"
    mine, theirs = mine.float(), theirs.float()
    finite = torch.isfinite(theirs)
    assert torch.equal(finite, torch.isfinite(mine)), f"{name}: -inf in different places"
    diff = (mine[finite] - theirs[finite]).abs().max().item() if finite.any() else 0.0
    assert diff <= atol, f"{name}: max |engine - TransformerLens| = {diff:.2e}"
    return diff


def test_every_hook_point_equals_transformer_lens(pair):
    """Each point of the family's table, captured by engine.hooks in a prefill, against
    TransformerLens's cache at the same name; a name TransformerLens lacks must be listed as such."""
    loaded, tl = pair
    model, L = loaded.model, loaded.info.n_layer
    family = families.family_of(model)
    ids = loaded.tokenizer.encode(PROMPT)
    with torch.inference_mode(), hooks.capture(model, L, list(family.points)) as rec:
        model(torch.tensor([ids]))
    _, cache = tl_cache(tl, ids)
    missing = {name for name in rec if name not in cache}
    assert {hooks_template(name) for name in missing} <= set(families.NOT_IN_TRANSFORMERLENS), sorted(missing)
    mislabelled = granite_mislabels(rec, cache, L) if family.name == "GraniteMoe" else set()
    diffs = {name: assert_same(name, value, cache[name]) for name, value in rec.items()
             if name not in missing and name not in mislabelled}
    compared = {hooks_template(name) for name in diffs}
    assert {"hook_embed", "blocks.{L}.hook_resid_pre", "blocks.{L}.ln1.hook_scale", "blocks.{L}.ln1.hook_normalized",
            "blocks.{L}.attn.hook_q", "blocks.{L}.attn.hook_attn_scores", "blocks.{L}.attn.hook_pattern",
            "blocks.{L}.attn.hook_z", "blocks.{L}.hook_resid_post", "ln_final.hook_normalized"} <= compared
    if family.rope:
        assert {"blocks.{L}.attn.hook_rot_q", "blocks.{L}.attn.hook_rot_k", "blocks.{L}.attn.hook_k"} <= compared
    if family.rope and not family.moe:
        assert {"blocks.{L}.mlp.hook_pre", "blocks.{L}.mlp.hook_pre_linear", "blocks.{L}.mlp.hook_post"} <= compared
    if family.name == "Mixtral":
        assert {"blocks.{L}.mlp.gate.hook_out", "blocks.{L}.mlp.hook_expert_weights", "blocks.{L}.mlp.hook_expert_indices"} <= compared
    print(f"\n{family.name}: {len(diffs)} hooks equal, max |difference| {max(diffs.values()):.1e}; "
          f"not in TransformerLens: {sorted(missing)}")


# TransformerLens 4.3's GraniteMoe adapter reads the router's output as (top-k indices, top-k weights,
# logits), an older transformers' order; transformers 5.24's GraniteMoeTopKRouter returns (logits,
# top-k weights, top-k indices), so three of its hooks hold another value. Its name -> the engine's
# name of the value it holds. When TransformerLens reads the new order, this test fails: delete this.
GRANITE_MISLABELS = {
    "mlp.gate.hook_out": "mlp.hook_expert_indices",  # [tokens, k]: not the logits
    "mlp.hook_expert_indices": "mlp.gate.hook_out",  # [tokens, n_experts]: the logits, not the chosen experts
    "mlp.hook_expert_weights": "mlp.hook_topk_weights",  # [tokens, k]: not scattered into [tokens, n_experts]
}


def granite_mislabels(rec, cache, n_layers) -> set[str]:
    """The engine's names whose TransformerLens values are mislabelled (GRANITE_MISLABELS), checked to
    hold the value said there."""
    names = set()
    for i in range(n_layers):
        for theirs, mine in GRANITE_MISLABELS.items():
            assert_same(f"TransformerLens's blocks.{i}.{theirs}", rec[f"blocks.{i}.{mine}"], cache[f"blocks.{i}.{theirs}"])
            names.add(f"blocks.{i}.{theirs}")
    return names


def hooks_template(name: str) -> str:
    """``blocks.3.attn.hook_q`` -> ``blocks.{L}.attn.hook_q``."""
    parts = name.split(".")
    return ".".join(["blocks", "{L}", *parts[2:]]) if parts[0] == "blocks" else name


def test_step_records_equal_transformer_lens(pair):
    """A prefill and two decode steps: each StepRecord array against TransformerLens's cache of the
    whole context at the rows the step computed (attention and block outputs are float16: half an ulp)."""
    loaded, tl = pair
    L = loaded.info.n_layer
    rope = families.family_of(loaded.model).rope
    session = Session(loaded, SamplingSettings(greedy=True))
    session.set_prompt(PROMPT)
    for _ in range(3):
        r = session.step().record
        logits, cache = tl_cache(tl, session.token_ids()[: r.end].tolist())
        rows = slice(r.start, r.end)

        def row(name, at=rows):
            return cache[name][0, at]

        assert_same("logits", torch.from_numpy(r.logits), logits[0, -1])
        assert_same("hook_embed", torch.from_numpy(r.token_embed), row("hook_embed"))
        if not rope:
            assert_same("hook_pos_embed", torch.from_numpy(r.pos_embed), row("hook_pos_embed"))
        assert_same("blocks.0.hook_resid_pre", torch.from_numpy(r.resid[0]), row("blocks.0.hook_resid_pre"))
        for i in range(L):
            assert_same(f"blocks.{i}.hook_resid_post", torch.from_numpy(r.resid[i + 1]), row(f"blocks.{i}.hook_resid_post"))
            assert_half_ulp(f"blocks.{i}.attn.hook_pattern", r.attn[i], cache[f"blocks.{i}.attn.hook_pattern"][0, :, rows])
            assert_half_ulp(f"blocks.{i}.hook_attn_out", r.attn_out[i], row(f"blocks.{i}.hook_attn_out", -1))
            assert_half_ulp(f"blocks.{i}.hook_mlp_out", r.mlp_out[i], row(f"blocks.{i}.hook_mlp_out", -1))
        assert_same("ln_final.hook_out", torch.from_numpy(r.final_hidden), row("ln_final.hook_out", -1))


def assert_half_ulp(name, mine: np.ndarray, theirs: torch.Tensor) -> None:
    """A float16 record against TransformerLens's float32 value: within half a float16 ulp (+1e-6)."""
    theirs = theirs.float().numpy()
    assert mine.dtype == np.float16 and mine.shape == theirs.shape, name
    half_ulp = np.spacing(np.abs(theirs).astype(np.float16)).astype(np.float32) / 2
    worst = (np.abs(mine.astype(np.float32) - theirs) - half_ulp).max()
    assert worst <= 1e-6, f"{name}: {worst:.2e} beyond half a float16 ulp"
