"""Every view over one tiny model per family (Llama, Qwen2, Qwen3, GraniteMoe, Mixtral): what the views
show for RoPE, RMSNorm, grouped key/value heads, gated MLPs and experts."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
import pytest

from app.panels.embeddings_panel import POSITION, SUM
from app.panels.kv_panel import human_bytes
from app.window import theme as th
from engine import load_model
from engine.random_model import TINY, write_random_model

from app.protocol import messages as p

from .helpers import run_outside_a_test
from .test_inside_view import show_inside

FAMILIES = {"llama": "Llama", "qwen2": "Qwen2", "qwen3": "Qwen3", "granitemoe": "GraniteMoe", "mixtral": "Mixtral"}


@pytest.fixture(scope="module", params=tuple(FAMILIES))
def loaded(request, tmp_path_factory):
    """One tiny random model per family, loaded once for the module."""
    folder = write_random_model(tmp_path_factory.mktemp(request.param) / request.param, request.param, seed=3, **TINY[request.param])
    return load_model(str(folder))


@pytest.fixture(scope="module")
def stepped_window(module_window, loaded):
    """A window on the family's model after the prefill and one decode step, with the step's
    SessionResult: one for the module's tests of this family, which only look at it."""
    window = module_window()
    run_outside_a_test(window, lambda: window.load_model(None, loaded=loaded, prompt="The cat sat on the mat"), p.Load)
    run_outside_a_test(window, window.step, p.Step)
    return window, run_outside_a_test(window, window.step, p.Step)


@pytest.fixture
def stepped(stepped_window):
    """The family's window with the Overview in front (the views a test opens ask for their data)."""
    stepped_window[0].show_view("overview")
    return stepped_window


def test_inside_shows_rmsnorm_rope_grouped_heads_and_the_mlp_or_the_experts(stepped, qtbot):
    window, result = stepped
    window.state.set_layer(1)
    window.state.set_head(3)
    t = show_inside(window, qtbot)
    inside = window.inside
    assert t.family == result.info.family and t.rope
    assert inside.embedding.pos_strip.isHidden() and "No position vector" in inside.embedding.text.text()
    assert not inside.attention.rope_text.isHidden() and not inside.attention.gqa_text.isHidden() and not inside.mlp.gate_text.isHidden()
    parts = {name: getattr(inside.attention, name, None) or getattr(inside.mlp, name) for name in (
        "q_strip", "rope_text", "rot_q", "rot_k", "keys_view", "scores", "gqa_text", "attn_out", "ln2_out", "gate_text",
        "router", "mlp_pre", "mlp_out", "resid_post")}
    at = {name: place(inside, widget) for name, widget in parts.items()}  # (page, place on the page)
    assert all(page in range(1, 9) for page, _i in at.values()), at  # every part in the block's pages (2 to 9)
    assert at["q_strip"] < at["rope_text"] < at["rot_q"] < at["rot_k"] < at["keys_view"] < at["scores"], at
    assert at["scores"] < at["gqa_text"] < at["attn_out"] < at["ln2_out"] < at["gate_text"] < at["mlp_pre"], at  # with the values
    assert at["ln2_out"] < at["router"] < at["mlp_out"] < at["resid_post"], at
    assert "RMSNorm 1" in inside.attention.ln1_norm.caption.text() and "no mean subtracted" in inside.attention.ln1_norm.caption.text()
    np.testing.assert_array_equal(inside.attention.q_strip.values, t.q[1, 3])
    np.testing.assert_array_equal(inside.attention.rot_q.values, t.rot_q[1, 3])
    kv = t.kv_of(3)
    assert kv == 3 // (result.info.n_head // result.info.kv_heads)
    np.testing.assert_array_equal(inside.attention.rot_k.values, t.rot_k[1, kv])
    np.testing.assert_allclose(inside.attention.angles.values, np.mod(t.position * t.inv_freq, 2 * np.pi), rtol=1e-5)
    assert "depends on how far apart" in inside.attention.rope_text.text()
    assert f"{result.info.n_head} query heads share {result.info.kv_heads} key/value heads" in inside.attention.gqa_text.text()
    assert f"Head 3 reads kv head {kv}" in inside.attention.gqa_text.text()
    np.testing.assert_array_equal(inside.attention.keys_image.image, t.keys[0, kv])  # the keys this head reads
    if t.router_probs is None:
        assert "Gated MLP" in inside.mlp.gate_text.text() and inside.mlp.router.isHidden()
        np.testing.assert_array_equal(inside.mlp.mlp_up.values, t.mlp_pre_linear[1])
        np.testing.assert_array_equal(inside.mlp.mlp_pre.values, t.mlp_pre[1])
        unit = int(t.top_units(1, 1)[0][0])
        assert f"unit {unit:,} = SiLU(" in inside.mlp.gate_text.text()
        assert "dense model" in inside.sizes.text.text()
    else:
        assert inside.mlp.mlp_pre.isHidden() and inside.mlp.mlp_up.isHidden() and not inside.mlp.router.isHidden()
        np.testing.assert_array_equal(inside.mlp.router.values, t.router_probs[1])
        text = inside.mlp.experts_text.text()
        for e, w in zip(t.experts[1], t.expert_weights[1]):
            assert f"expert {int(e)} × {float(w):.3f}" in text
        assert t.router_rule in text and f"{t.active_params:,} of {t.n_params:,}" in text
        assert f"{t.active_params:,} of them were active" in inside.sizes.text.text()


def test_the_router_marks_exactly_the_recorded_chosen_experts_with_their_weights(stepped, qtbot):
    """The experts the step recorded (blocks.{L}.mlp.hook_expert_indices, kept by the step itself)
    are the orange bars, each with its weight over it; every other bar is blue."""
    window, result = stepped
    if result.info.architecture.mlp != "experts":
        pytest.skip("a dense model has no router")
    window.state.set_layer(1)
    t = show_inside(window, qtbot)
    router = window.inside.mlp.router
    recorded = result.records[-1].experts[1]  # the step's own record, at its newest position
    assert t.position == result.records[-1].end - 1
    assert router.marked == sorted(int(e) for e in recorded) == sorted(int(e) for e in t.experts[1])
    colours = [b.color().name() for b in router.bars.opts["brushes"]]
    assert {i for i, c in enumerate(colours) if c == pg.mkColor(th.ORANGE).name()} == set(router.marked)
    assert {i for i, c in enumerate(colours) if c == pg.mkColor(th.BLUE).name()} == set(range(len(colours))) - set(router.marked)
    drawn = [item for item in router.view.scene().items() if isinstance(item, pg.TextItem) and item.isVisible()]
    over = {round(text.pos().x()): text.toPlainText() for text in drawn}
    assert over == {int(e): f"×{float(w):.2f}" for e, w in zip(t.experts[1], t.expert_weights[1])}
    for e in router.marked:  # each weight sits on its own bar
        assert [text.pos().y() for text in drawn if round(text.pos().x()) == e] == [float(router.values[e])]


def place(inside, widget) -> tuple[int, int]:
    """(page, place in its page's box) of a widget of Inside: the order it is read in."""
    for page, box in enumerate(inside.pages.boxes):
        if (i := box.layout().indexOf(widget)) >= 0:
            return page, i
    return -1, -1


def test_the_kv_views_show_grouped_heads_against_full_heads(stepped, qtbot):
    window, result = stepped
    kv = result.records[-1].kv
    assert kv.bytes_per_position * (result.info.n_head // result.info.kv_heads) == kv.full_heads_bytes_per_position
    text = window.kv.bytes_label.text()
    assert f"adds {human_bytes(kv.bytes_per_position)}, not the {human_bytes(kv.full_heads_bytes_per_position)}" in text
    window.state.set_layer(0)
    window.state.set_head(result.info.n_head - 1)
    with qtbot.waitSignal(window.controller.insideReady, timeout=30_000) as answer:
        window.show_view("cache")
    qtbot.waitUntil(lambda: not window.cache_view.awaiting(), timeout=30_000)
    t = answer.args[0].trace
    last_kv = result.info.kv_heads - 1
    np.testing.assert_array_equal(window.cache_view.keys_image.image, t.keys[0, last_kv])
    assert f"reads key/value head {last_kv}" in window.cache_view.header.text()


def test_the_embeddings_view_has_no_position_vector_to_show(stepped, qtbot):
    window, result = stepped
    panel = window.embeddings
    panel.slider.setValue(0)  # the embeddings' depth, where a part can be chosen
    panel.part.setCurrentIndex(POSITION)
    assert "There is no position vector to show" in panel.caption.text()
    assert not any(label.isVisible() for label in panel.labels)
    panel.part.setCurrentIndex(SUM)
    assert "RoPE adds no position vector" in panel.caption.text()


def test_the_flow_and_the_tour_adapt_to_the_family(stepped, qtbot):
    from app.logic.flow_numbers import flow_numbers
    from app.logic.flow_texts import flow_texts
    from app.panels.flow_panel import box_title
    from app.logic.tour import STAGES, sentence

    window, result = stepped
    info = result.info
    n = flow_numbers(result, layer=1, head=0)
    lines = flow_texts(n)
    assert n.arch is info.architecture and n.arch.rotary and n.kv_heads == info.kv_heads < n.n_head
    assert box_title("ln_final", lines) == "4 · Final RMSNorm"
    assert sentence("embedding", n).count("No position vector is added") == 1 and "position table" not in sentence("embedding", n)
    assert "RMSNorm" in sentence("ln_final", n) and "shift" not in sentence("ln_final", n).replace("(no shift)", "")
    assert f"{info.kv_heads} key/value heads rather than {info.n_head}" in sentence("kv", n)
    assert f"share {info.kv_heads} key/value heads" in sentence("attention", n)
    moe = info.family in ("GraniteMoe", "Mixtral")
    assert n.arch.experts == moe and ("experts" in lines["mlp"]) == moe and ("router scores all" in sentence("mlp", n)) == moe
    for stage, _box in STAGES:  # every sentence fills in for this family
        assert "{" not in sentence(stage, n)
    window.show_view("flow")
    image = window.flow_view.flow.grab().toImage()
    assert image.width() > 200 and image.pixelColor(image.width() // 2, image.height() // 2).isValid()


def test_the_token_strip_is_what_the_residual_stream_starts_at_and_says_so(stepped, qtbot, loaded):
    """GraniteMoe scales its embedding row (hook_embed: what is added, as in TransformerLens): the
    strip shows the scaled row and names the multiplier; the other families show the row itself."""
    window, _ = stepped
    t = show_inside(window, qtbot)
    model = loaded.model
    row = model.get_input_embeddings().weight[t.token_id].detach().float().numpy()
    multiplier = float(getattr(model.config, "embedding_multiplier", 1.0))
    np.testing.assert_allclose(window.inside.embedding.token_strip.values, row * multiplier, rtol=1e-6)
    np.testing.assert_allclose(t.resid_pre[0], t.token_embed, rtol=1e-6)
    caption = window.inside.embedding.token_strip.caption.text()
    assert (f", times the model's embedding multiplier {multiplier:g}" in caption) == (multiplier != 1.0)
