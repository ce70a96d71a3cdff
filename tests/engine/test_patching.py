"""Activation patching (engine.patching) equals TransformerLens's get_act_patch_resid_pre,
get_act_patch_attn_out and get_act_patch_mlp_out on the same pair, and refuses what it cannot do."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from engine import load_model, paths
from engine.errors import NextTokenError
from engine.patching import SITES, PatchingCancelled, patch, patch_resid_pre
from engine.random_model import TINY, write_random_model


@pytest.fixture(scope="module", params=["gpt2", "llama"])
def folder_and_model(request, tmp_path_factory):
    if request.param == "gpt2":
        folder = paths.demo_model_dir()
    else:
        folder = write_random_model(tmp_path_factory.mktemp("llama") / "llama", "llama", seed=6, **TINY["llama"])
    return folder, load_model(str(folder))


def pair(loaded):
    clean = np.array(loaded.tokenizer.encode("The capital of France is the city of"), dtype=np.int64)
    corrupted = clean.copy()
    corrupted[3] = (corrupted[3] + 17) % 900  # one token changed: the two stay aligned
    return clean, corrupted


@pytest.mark.parametrize("site", SITES)
def test_patching_equals_transformer_lens(folder_and_model, site):
    pytest.importorskip("transformer_lens", reason="TransformerLens is not installed: pip install -e '.[parity]'")
    from transformer_lens import patching

    from tests.engine.test_transformer_lens_parity import bridge

    folder, loaded = folder_and_model
    clean, corrupted = pair(loaded)
    with torch.inference_mode():
        last = loaded.model(input_ids=torch.from_numpy(clean)[None]).logits[0, -1]
    target, versus = (int(i) for i in torch.argsort(last, descending=True)[:2])
    mine = patch(loaded.model, clean, corrupted, target, versus, site)
    assert mine.site == site
    tl = bridge(folder)
    helper = {"resid_pre": patching.get_act_patch_resid_pre, "attn_out": patching.get_act_patch_attn_out,
              "mlp_out": patching.get_act_patch_mlp_out}[site]
    with torch.inference_mode():
        _, clean_cache = tl.run_with_cache(torch.from_numpy(clean)[None])
        theirs = helper(tl, torch.from_numpy(corrupted)[None], clean_cache,
                        lambda logits: logits[0, -1, target] - logits[0, -1, versus]).float().numpy()
    assert mine.metric.shape == theirs.shape == (loaded.info.n_layer, len(clean))
    worst = np.abs(mine.metric - theirs).max()
    assert worst <= 1e-4, f"max |engine - TransformerLens| = {worst:.1e}"
    assert np.abs(theirs - mine.corrupted).max() > 1e-3, "the pair must move the metric somewhere, or the test proves nothing"
    # before the changed token the two prompts are the same: no patch there moves the metric
    assert np.allclose(mine.metric[:, :3], mine.corrupted, atol=1e-4)
    if site == "resid_pre":  # layer 0 at the changed position puts the clean token back: the whole clean run
        assert mine.metric[0, 3] == pytest.approx(mine.clean, abs=1e-4) and mine.restored[0, 3] == pytest.approx(1.0, abs=1e-4)
    print(f"\n{loaded.info.family} {site}: patching within {worst:.1e} of TransformerLens, {mine.seconds:.2f} s")


def test_unequal_lengths_are_refused_and_a_run_can_be_cancelled(folder_and_model):
    _, loaded = folder_and_model
    clean, corrupted = pair(loaded)
    with pytest.raises(NextTokenError, match="same length"):
        patch_resid_pre(loaded.model, clean, corrupted[:-1], 5)
    asked = []
    with pytest.raises(PatchingCancelled, match="after 1 of"):
        patch_resid_pre(loaded.model, clean, corrupted, 5, cancelled=lambda: len(asked) > 0,
                        progress=lambda done, total: asked.append((done, total)))
    assert asked == [(1, loaded.info.n_layer)]
    with pytest.raises(NextTokenError, match="resid_pre, attn_out, mlp_out"):
        patch(loaded.model, clean, corrupted, 5, site="resid_post")
