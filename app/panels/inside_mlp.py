"""Inside, part 3: the second half of one block for one position, in the order the model computes:
norm 2, then the MLP (its hidden units before and after the activation; a gated MLP's gate and up
projections) or, in a mixture of experts, the router's probabilities over every expert with the
chosen experts and their weights marked, then the output and the second residual add.

What is shown follows the step's record (an MoE block has no single MLP's units; a gated MLP has
an up projection) and the sentences the model's facts choose, never the family's name.
"""

from __future__ import annotations

import numpy as np
from PySide6.QtWidgets import QGroupBox

from app.window import theme as th
from app.panels.inside_plots import PositionBars, VectorStrip, label, norm, part_box

TOP_UNITS = 5  # strongest MLP units listed


class MlpPart:
    """One block's MLP or experts for one position (see the module docstring)."""

    def __init__(self):
        self.ln2_out = VectorStrip("norm 2 output")
        self.gate_text = label()
        self.router = PositionBars("router probabilities over every expert")
        self.experts_text = label()
        self.mlp_pre = VectorStrip("MLP hidden units")
        self.mlp_up = VectorStrip("up projection x · W_up")
        self.mlp_post = VectorStrip("MLP hidden units, activated")
        self.mlp_top = label()
        self.mlp_out = VectorStrip("MLP output")
        self.resid_post = VectorStrip("residual stream after the block: + MLP output")
        # two boxes (two parts, each at most one projector screen, when Inside is paged), in the order the model computes
        self.box: QGroupBox = part_box("8 · MLP", [
            self.ln2_out, self.gate_text, self.router, self.experts_text, self.mlp_pre, self.mlp_up])
        self.out_box: QGroupBox = part_box("9 · MLP: the output and the residual add", [
            self.mlp_post, self.mlp_top, self.mlp_out, self.resid_post])
        self.boxes = (self.box, self.out_box)

    def titles(self, says) -> None:
        """Strip titles for the model on screen (its norm, its MLP)."""
        self.ln2_out.title = says("ln_out_title", index=2)
        for strip, key in ((self.mlp_pre, "mlp_pre_title"), (self.mlp_post, "mlp_post_title"), (self.mlp_out, "mlp_out_title")):
            strip.title = says(key)
        self.resid_post.title = says("resid_post_title")

    def draw(self, t, L: int, says) -> None:
        """Draw block ``L`` of InsideTrace ``t``; ``says(key, **numbers)`` gives Inside's sentences."""
        self.titles(says)
        self.ln2_out.show_vector(t.ln2_out[L], says("ln_out_note", scale=float(t.ln2_scale[L])))
        dense = t.mlp_pre.shape[-1] > 0  # an MoE block has no single MLP (its strips are hidden)
        gated = dense and t.mlp_pre_linear is not None and t.mlp_pre_linear.shape[-1] > 0
        for strip in (self.mlp_pre, self.mlp_post):
            strip.setHidden(not dense)
        self.mlp_top.setHidden(not dense or gated)  # a gated MLP's sentence lists them, with their gate and up
        self.mlp_up.setHidden(not gated)
        units, values = t.top_units(L, TOP_UNITS)
        if dense:
            self.mlp_pre.show_vector(t.mlp_pre[L], says("mlp_pre_note"))
            self.mlp_post.show_vector(t.mlp_post[L], says("mlp_post_note"))
            if gated:  # the up projection: a gated MLP's second one
                self.mlp_up.show_vector(t.mlp_pre_linear[L], f"{t.attn_out.shape[-1]} → {t.mlp_pre_linear.shape[-1]}")
            self.mlp_top.setText("Strongest units: " + unit_list(units, values))
        act = says("mlp_activation")
        products = ", ".join(
            f"unit {int(u):,} = {act}({float(t.mlp_pre[L, u]):+.2f}) × {float(t.mlp_pre_linear[L, u]):+.2f} = {float(v):+.2f}"
            for u, v in zip(units, values)) if gated else ""
        intro = says("mlp_intro", layer=L, units=products)
        self.gate_text.setHidden(not intro)
        self.gate_text.setText(intro)
        self._draw_experts(t, L, says)
        self.mlp_out.show_vector(t.mlp_out[L], says("mlp_out_note"))
        self.resid_post.show_vector(t.resid_post[L], says("resid_post_note", length=norm(t.mlp_out[L])))

    def _draw_experts(self, t, L: int, says) -> None:
        """The router's probabilities, the chosen experts (orange, their weights over the bars) and what they cost."""
        experts = t.router_probs is not None
        for widget in (self.router, self.experts_text):
            widget.setHidden(not experts)
        if not experts:
            return
        probs, chosen, weights = t.router_probs[L], t.experts[L], t.expert_weights[L]
        self.router.show_values(probs, [f"e{i}" for i in range(len(probs))], says("router_note"), th.BLUE, lines=1,
                                headroom=1.3)  # room for the weights over the bars
        self.router.mark(chosen, weights, th.ORANGE)
        picks = ", ".join(f"expert {int(e)} × {float(w):.3f}" for e, w in zip(chosen, weights))
        share = t.active_params / t.n_params if t.n_params else 1.0
        self.experts_text.setText(says("experts_chosen", picks=picks, router_rule=t.router_rule, active=t.active_params,
                                       total=t.n_params, share=share))


def unit_list(units: np.ndarray, values: np.ndarray) -> str:
    """"unit 12 = +1.25, …": the strongest units of a dense MLP."""
    return ", ".join(f"unit {int(u):,} = {float(v):+.2f}" for u, v in zip(units, values))
