"""The Inside path (engine.inside) and the hook names, against the plain Hugging Face model's own modules.

The reference below calls ``transformer.h[L].ln_1``, ``.attn.c_attn``, ``.attn.c_proj``, ``.ln_2``,
``.mlp.c_fc``, ``.mlp.act``, ``.mlp.c_proj``, ``ln_f`` and ``lm_head`` by hand, one after the other,
on an independent unhooked copy of the weights: nothing in it goes through engine code.
"""

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from transformers import GPT2LMHeadModel

from engine import hooks
from engine.errors import SessionError
from engine.inside import inside, inside_arrays, top_by_id
from engine.sampling import SamplingSettings
from engine.session import Session

PROMPT = "The database stores each row of a table"
ATOL = 2e-5


@pytest.fixture(scope="module", params=["demo", "tiny"])
def loaded(request, demo_model, tiny_model):
    return demo_model if request.param == "demo" else tiny_model


def plain_model(loaded):
    return GPT2LMHeadModel.from_pretrained(loaded.info.source, dtype=torch.float32, local_files_only=True).eval()


@torch.no_grad()
def reference(model, ids) -> dict[str, torch.Tensor]:
    """Every value at every position, computed module by module. Per layer lists, then stacked:
    [L, T, ...] ([L, H, T, T] for scores and pattern)."""
    tr = model.transformer
    ids = torch.as_tensor(ids)[None]
    t = ids.shape[1]
    embed, pos = tr.wte(ids)[0], tr.wpe(torch.arange(t))
    x = embed + pos  # [T, d]
    out = {k: [] for k in ("resid_pre", "ln1_scale", "ln1_normalized", "ln1_out", "q", "k", "v", "scores", "pattern",
                           "z", "attn_out", "resid_mid", "ln2_scale", "ln2_normalized", "ln2_out", "mlp_pre",
                           "mlp_post", "mlp_out", "resid_post")}
    d = x.shape[-1]
    for block in tr.h:
        a = block.attn
        out["resid_pre"].append(x)
        out["ln1_scale"].append(torch.sqrt(x.var(-1, unbiased=False) + block.ln_1.eps))
        out["ln1_normalized"].append(F.layer_norm(x, (d,), eps=block.ln_1.eps))  # no weight, no bias
        h = block.ln_1(x)
        out["ln1_out"].append(h)
        q, k, v = (m.reshape(t, a.num_heads, a.head_dim) for m in a.c_attn(h).split(d, dim=-1))  # [T, H, dh]
        scores = torch.einsum("qhd,khd->hqk", q, k) * a.scaling
        scores = scores.masked_fill(torch.ones(t, t, dtype=torch.bool).triu(1), float("-inf"))
        pattern = scores.softmax(-1)
        z = torch.einsum("hqk,khd->qhd", pattern, v)
        attn_out = a.c_proj(z.reshape(t, d))
        mid = x + attn_out
        out["ln2_scale"].append(torch.sqrt(mid.var(-1, unbiased=False) + block.ln_2.eps))
        out["ln2_normalized"].append(F.layer_norm(mid, (d,), eps=block.ln_2.eps))
        h2 = block.ln_2(mid)
        pre = block.mlp.c_fc(h2)
        post = block.mlp.act(pre)
        mlp_out = block.mlp.c_proj(post)
        x = mid + mlp_out
        for key, value in (("q", q), ("k", k), ("v", v), ("scores", scores), ("pattern", pattern), ("z", z),
                           ("attn_out", attn_out), ("resid_mid", mid), ("ln2_out", h2), ("mlp_pre", pre),
                           ("mlp_post", post), ("mlp_out", mlp_out), ("resid_post", x)):
            out[key].append(value)
    stacked = {key: torch.stack(values) for key, values in out.items()}
    stacked |= {"embed": embed, "pos": pos, "ln_final_scale": torch.sqrt(x.var(-1, unbiased=False) + tr.ln_f.eps),
                "ln_final_normalized": F.layer_norm(x, (d,), eps=tr.ln_f.eps), "final": tr.ln_f(x),
                "logits": model.lm_head(tr.ln_f(x))}
    return stacked


def lens_reference(model, resid: torch.Tensor, k: int = 10):
    """Top k of ln_f + lm_head on each row of resid [N, d], ties by lower id (numpy stable sort)."""
    with torch.no_grad():
        logits = model.lm_head(model.transformer.ln_f(resid)).numpy()
    order = np.argsort(-logits, axis=-1, kind="stable")[:, :k]
    return order, np.take_along_axis(logits, order, axis=1), logits


def stepped(loaded, steps=4, **settings) -> Session:
    session = Session(loaded, SamplingSettings(**(settings or {"greedy": True})))
    session.set_prompt(PROMPT)
    for _ in range(steps):
        session.step()
    return session


def check_position(trace, ref, model, p):
    """Every field of an InsideTrace at position p against the module-by-module reference."""
    close = lambda mine, theirs: np.testing.assert_allclose(mine, theirs.numpy(), atol=ATOL, rtol=1e-5)  # noqa: E731
    close(trace.token_embed, ref["embed"][p])
    close(trace.pos_embed, ref["pos"][p])
    for key in ("resid_pre", "ln1_normalized", "ln1_out", "q", "k", "v", "z", "attn_out", "resid_mid",
                "ln2_normalized", "ln2_out", "mlp_pre", "mlp_post", "mlp_out", "resid_post", "ln1_scale", "ln2_scale"):
        close(getattr(trace, key), ref[key][:, p])
    close(trace.scores, ref["scores"][:, :, p, : p + 1])
    close(trace.pattern, ref["pattern"][:, :, p, : p + 1])
    close(trace.keys, ref["k"][list(trace.kv_layers), : p + 1].transpose(1, 2))
    close(trace.values, ref["v"][list(trace.kv_layers), : p + 1].transpose(1, 2))
    close(trace.final_hidden, ref["final"][p])
    close(trace.ln_final_normalized, ref["ln_final_normalized"][p])
    assert trace.ln_final_scale == pytest.approx(float(ref["ln_final_scale"][p]), rel=1e-5)
    resid = torch.cat([ref["resid_pre"][:1, p], ref["resid_post"][:, p]])
    ids, logits, full = lens_reference(model, resid)
    np.testing.assert_array_equal(trace.lens_ids, ids)
    np.testing.assert_allclose(trace.lens_logits, logits, atol=1e-4, rtol=1e-5)
    probs = torch.softmax(torch.from_numpy(full), -1)[:, trace.next_id].numpy()
    np.testing.assert_allclose(trace.lens_next_prob, probs, atol=1e-6, rtol=1e-4)
    assert trace.lens_next_rank.tolist() == [int((row > row[trace.next_id]).sum()) + 1 for row in full]


@pytest.mark.parametrize("use_cache", [True, False], ids=["against the session's cache", "without it"])
def test_inside_equals_the_models_own_modules(loaded, use_cache):
    session = stepped(loaded)
    model = plain_model(loaded)
    ids = session.token_ids()
    newest = session.records[-1].end - 1
    ref = reference(model, ids[: newest + 1])
    fed = []
    handle = loaded.model.transformer.wte.register_forward_hook(lambda m, args, out: fed.append(args[0].shape[1]))
    try:
        traces = [inside(session, step, position, use_cache=use_cache)
                  for step, position in ((None, None), (0, 3), (2, 1), (1, newest - 2), (0, 0))]
    finally:
        handle.remove()
    # against the cache only position p runs; without it positions 0..p-1 first, unhooked
    expected = [[1] if use_cache or t.position == 0 else [t.position, 1] for t in traces]
    assert fed == [n for e in expected for n in e]
    for trace, position in zip(traces, (None, 3, 1, newest - 2, 0)):
        p = trace.position
        assert p == (newest if position is None else position)
        check_position(trace, ref, model, p)  # causal: the longer reference holds every shorter context
        assert trace.token_id == ids[p]


def test_newest_position_agrees_with_what_the_step_recorded(loaded):
    session = stepped(loaded, steps=3, temperature=1.0, seed=3)
    for record in session.records:
        trace = inside(session, record.step)
        assert trace.next_id == record.chosen and trace.position == record.end - 1
        np.testing.assert_allclose(trace.final_hidden, record.final_hidden, atol=ATOL)
        np.testing.assert_allclose(trace.attn_out, record.attn_out.astype(np.float32), atol=2e-3, rtol=2e-3)
        np.testing.assert_allclose(trace.mlp_out, record.mlp_out.astype(np.float32), atol=2e-3, rtol=2e-3)
        # the attention row the attention panel draws (float16) is the Inside pattern row
        np.testing.assert_allclose(trace.pattern, record.attn[:, :, -1, :].astype(np.float32), atol=1e-3)
        np.testing.assert_allclose(trace.resid_post[-1], record.resid[-1, -1], atol=ATOL)
        # the last lens row is the step's own prediction
        top = np.argsort(-record.logits, kind="stable")[:10]
        np.testing.assert_array_equal(trace.lens_ids[-1], top)
        np.testing.assert_allclose(trace.lens_logits[-1], record.logits[top], atol=1e-4)
        probs = np.exp(record.logits - record.logits.max())
        assert trace.lens_next_prob[-1] == pytest.approx(probs[record.chosen] / probs.sum(), rel=1e-4)


def test_step_records_attention_and_mlp_outputs_of_the_newest_position(loaded):
    session = stepped(loaded, steps=3)
    ref = reference(plain_model(loaded), session.token_ids()[: session.records[-1].end])
    info = loaded.info
    for record in session.records:
        p = record.end - 1
        assert record.attn_out.dtype == record.mlp_out.dtype == np.float16
        assert record.attn_out.shape == record.mlp_out.shape == (info.n_layer, info.d_model)
        np.testing.assert_allclose(record.attn_out.astype(np.float32), ref["attn_out"][:, p].numpy(), atol=2e-3, rtol=2e-3)
        np.testing.assert_allclose(record.mlp_out.astype(np.float32), ref["mlp_out"][:, p].numpy(), atol=2e-3, rtol=2e-3)
        np.testing.assert_allclose(record.final_hidden, ref["final"][p].numpy(), atol=ATOL)


def test_export_path_arrays_equal_the_models_own_modules(loaded):
    session = stepped(loaded, steps=4, temperature=1.0, seed=11)
    model = plain_model(loaded)
    ids = session.token_ids()
    ref = reference(model, ids[: session.records[-1].end])
    arrays = inside_arrays(session)
    info = loaded.info
    h, dh = info.n_head, info.d_model // info.n_head
    prompt_len = len(session.prompt_ids)
    for record in session.records:
        s, r = record.step, prompt_len - 1 + record.step
        assert r == record.end - 1
        for key in ("q", "k", "v", "z"):
            assert arrays[f"{key}_{s}"].shape == (info.n_layer, h, dh) and arrays[f"{key}_{s}"].dtype == np.float32
            np.testing.assert_allclose(arrays[f"{key}_{s}"], ref[key][:, r].numpy(), atol=ATOL, rtol=1e-5)
        assert arrays[f"scores_{s}"].shape == (info.n_layer, h, prompt_len + s)
        np.testing.assert_allclose(arrays[f"scores_{s}"], ref["scores"][:, :, r, : r + 1].numpy(), atol=ATOL, rtol=1e-5)
        for key in ("attn_out", "resid_mid", "mlp_out", "mlp_pre", "mlp_post"):
            np.testing.assert_allclose(arrays[f"{key}_{s}"], ref[key][:, r].numpy(), atol=ATOL, rtol=1e-5)
        assert arrays[f"mlp_pre_{s}"].shape == (info.n_layer, 4 * info.d_model)
        resid = torch.cat([ref["resid_pre"][:1, r], ref["resid_post"][:, r]])
        lens_ids, lens_logits, _ = lens_reference(model, resid)
        assert arrays[f"lens_ids_{s}"].dtype == np.int64 and arrays[f"lens_ids_{s}"].shape == (info.n_layer + 1, 10)
        np.testing.assert_array_equal(arrays[f"lens_ids_{s}"], lens_ids)
        np.testing.assert_allclose(arrays[f"lens_logits_{s}"], lens_logits, atol=1e-4, rtol=1e-5)
        np.testing.assert_array_equal(arrays[f"lens_ids_{s}"][-1], np.argsort(-record.logits, kind="stable")[:10])
    np.testing.assert_allclose(arrays["final_hidden"], ref["final"][prompt_len - 1 :].numpy(), atol=ATOL)


def test_hook_names_mean_what_transformerlens_means(loaded):
    """ln*.hook_normalized is before the weight and bias; hook_out after; scores are scaled and
    masked with -inf before the softmax; q, k, v, z are [batch, pos, head, d_head]."""
    ids = torch.tensor([Session(loaded).set_prompt(PROMPT)])
    model, n_layers = loaded.model, loaded.info.n_layer
    names = ["blocks.{L}.hook_resid_pre", "blocks.{L}.ln1.hook_normalized", "blocks.{L}.ln1.hook_scale", "blocks.{L}.ln1.hook_out",
             "blocks.{L}.attn.hook_attn_scores", "blocks.{L}.attn.hook_pattern", "blocks.{L}.attn.hook_q",
             "blocks.{L}.attn.hook_z", "ln_final.hook_normalized", "ln_final.hook_out"]
    with torch.inference_mode(), hooks.capture(model, n_layers, names) as rec:
        final = model.transformer(ids).last_hidden_state  # (output_hidden_states would hook the shared model for good)
    t, h, dh = ids.shape[1], loaded.info.n_head, loaded.info.d_model // loaded.info.n_head
    ln_1 = model.transformer.h[1].ln_1
    normalized = rec["blocks.1.ln1.hook_normalized"]
    np.testing.assert_allclose(normalized.mean(-1).numpy(), 0, atol=1e-5)
    x = rec["blocks.1.hook_resid_pre"]
    np.testing.assert_allclose(normalized.numpy(), F.layer_norm(x, x.shape[-1:], eps=ln_1.eps).numpy(), atol=1e-5)
    assert rec["blocks.1.ln1.hook_scale"].shape == (1, t, 1)
    np.testing.assert_allclose((normalized * ln_1.weight.detach() + ln_1.bias.detach()).numpy(), rec["blocks.1.ln1.hook_out"].numpy(), atol=1e-5)
    np.testing.assert_allclose(rec["ln_final.hook_out"].numpy(), final.numpy(), atol=1e-6)
    ln_f = model.transformer.ln_f
    np.testing.assert_allclose(  # before ln_f's weight and bias (TransformerLens 3.x/4.x), not its output
        (rec["ln_final.hook_normalized"] * ln_f.weight.detach() + ln_f.bias.detach()).numpy(), final.numpy(), atol=1e-5)
    scores = rec["blocks.1.attn.hook_attn_scores"]
    assert scores.shape == (1, h, t, t) and rec["blocks.1.attn.hook_q"].shape == rec["blocks.1.attn.hook_z"].shape == (1, t, h, dh)
    assert torch.isneginf(scores[0, :, torch.ones(t, t, dtype=torch.bool).triu(1)]).all()
    np.testing.assert_allclose(scores.softmax(-1).numpy(), rec["blocks.1.attn.hook_pattern"].numpy(), atol=1e-6)


def test_every_hook_point_is_reachable_and_removed(loaded):
    """Each name of HOOK_POINTS resolves to a module of the model, records, and leaves no hook behind."""
    table = hooks.hook_table(loaded.info.n_layer)
    before = [len(m._forward_hooks) for m in loaded.model.modules()]
    with torch.inference_mode(), hooks.capture(loaded.model, loaded.info.n_layer, list(hooks.HOOK_POINTS)) as rec:
        loaded.model(torch.tensor([[464, 3797, 3332]]))
    assert set(rec) == set(table)
    assert [len(m._forward_hooks) for m in loaded.model.modules()] == before


def test_parameters_and_shapes(loaded):
    session = stepped(loaded, steps=1)
    trace = inside(session)
    model, info = loaded.model, loaded.info
    assert trace.n_params == info.n_params == sum(p.numel() for p in model.parameters())
    assert trace.lm_head_tied and not any(p.part == "LM head" for p in trace.params)
    parts = trace.params_by_part()
    d, v = info.d_model, info.vocab_size
    assert parts["token embedding"] == v * d and parts["position embedding"] == info.n_positions * d
    assert parts["block 0 attention"] == d * 3 * d + 3 * d + d * d + d
    assert parts["block 0 MLP"] == d * 4 * d + 4 * d + 4 * d * d + d
    assert {p.name: p.shape for p in trace.params}["transformer.h.0.attn.c_attn.weight"] == (d, 3 * d)
    np.testing.assert_allclose(trace.attn_scale, (d // info.n_head) ** -0.5)
    # the logits are dot products with the token embedding rows
    wte = model.transformer.wte.weight.detach().numpy()
    np.testing.assert_allclose(wte[trace.lens_ids[-1]] @ trace.final_hidden, trace.lens_logits[-1], atol=1e-4)
    norms = trace.norms()
    assert norms["resid"].shape == (info.n_layer + 1,) and norms["mlp_post"].shape == (info.n_layer,)
    units, values = trace.top_units(0, 5)
    assert np.abs(values).tolist() == sorted(np.abs(trace.mlp_post[0]), reverse=True)[:5]  # by absolute value
    np.testing.assert_array_equal(trace.mlp_post[0][units], values)


def test_keys_and_values_of_chosen_layers_only(demo_model):
    session = stepped(demo_model, steps=2)
    trace = inside(session, position=4, kv_layers=(2,))
    assert trace.kv_layers == (2,) and trace.keys.shape == (1, 4, 5, 64)
    np.testing.assert_allclose(trace.keys[0, :, -1], trace.k[2], atol=1e-6)


def test_ties_go_to_the_lower_id():
    logits = torch.tensor([[1.0, 3.0, 2.0, 3.0, 3.0, 0.5], [0.0, 0.0, 0.0, 0.0, 0.0, 0.0]])
    ids, values = top_by_id(logits, 4)
    assert ids.tolist() == [[1, 3, 4, 2], [0, 1, 2, 3]]
    assert values.tolist() == [[3.0, 3.0, 3.0, 2.0], [0.0] * 4]


def test_bad_requests(demo_model):
    session = Session(demo_model)
    session.set_prompt("Hello there")
    with pytest.raises(SessionError, match="No step"):
        inside(session)
    session.step()
    with pytest.raises(SessionError, match="no step 3"):
        inside(session, 3)
    with pytest.raises(SessionError, match="positions 0 to 1"):
        inside(session, 0, 2)


@pytest.mark.slow  # over 5 s: 124 M random weights written and read
def test_gpt2_small_shape(tmp_path):
    """GPT-2 small's shape (12 x 12 x 768, random weights): an older position and the export's last step."""
    from engine.loading import load_model
    from tests.conftest import make_tiny_folder

    folder = make_tiny_folder(tmp_path / "small", n_layer=12, n_head=12, n_embd=768, n_positions=1024)
    loaded = load_model(str(folder))
    session = Session(loaded, SamplingSettings(greedy=True))
    session.set_prompt(PROMPT)
    session.step(), session.step()
    model = plain_model(loaded)
    ref = reference(model, session.token_ids()[: session.records[-1].end])
    check_position(inside(session, 1, 5), ref, model, 5)
    arrays = inside_arrays(session)
    r = session.records[-1].end - 1
    for key in ("q", "z", "mlp_post", "resid_mid"):
        np.testing.assert_allclose(arrays[f"{key}_1"], ref[key][:, r].numpy(), atol=ATOL, rtol=1e-5)


def test_the_trace_module_imports_only_numpy_and_the_standard_library():
    """engine/inside_trace.py crosses to the window, whose process must not import torch."""
    import ast
    import sys
    from pathlib import Path

    import engine.inside_trace as module

    tree = ast.parse(Path(module.__file__).read_text())
    imported = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    imported |= {node.module.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.level == 0}
    assert imported - set(sys.stdlib_module_names) == {"numpy"}
