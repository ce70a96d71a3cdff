"""Inside, part 2: the attention of one block and head for one position, in the order the model
computes: the block's input, norm 1, the query, RoPE where the model turns q and k, the grouped
key/value heads where it shares them, the keys, the scaled scores (the causal mask leaves later
positions out), softmax, the values, their weighted sum, W_O and the residual add.

Which parts are shown follows the step's record and the sentences the model's facts choose (a
sentence that does not hold for the model is empty, and its part is hidden), never the family's name.
"""

from __future__ import annotations

import numpy as np
from PySide6.QtWidgets import QGroupBox

from engine.tokens import clip

from app.window import theme as th
from app.panels.heatmap import room_for_row_names
from app.panels.inside_plots import PositionBars, VectorStrip, heatmap, label, norm, part_box, show_heatmap


class AttentionPart:
    """One block's attention for one position and head (see the module docstring)."""

    def __init__(self):
        self.block_text = label()
        self.ln1_in = VectorStrip("into the block (residual stream)")
        self.ln1_norm = VectorStrip("norm 1")
        self.ln1_out = VectorStrip("norm 1 output")
        self.q_strip = VectorStrip("query q of this position (this head)")
        self.rope_text = label()
        self.rot_q = VectorStrip("query after RoPE (this head)")
        self.rot_k = VectorStrip("key after RoPE (the key/value head this head reads)")
        self.angles = PositionBars("angle per pair of dimensions")
        self.gqa_text = label()
        self.keys_view, self.keys_image, self.keys_caption = heatmap("keys k of every visible position (this head)")
        self.scores = PositionBars("scores")
        self.pattern = PositionBars("attention weights")
        self.values_view, self.values_image, self.values_caption = heatmap("values v of every visible position (this head)")
        self.z_strip = VectorStrip("head output z: the weighted sum of the values")
        self.attn_out = VectorStrip("attention output")
        self.resid_mid = VectorStrip("residual stream after the attention: input + attention output")
        # six boxes (six parts, each at most one projector screen, when Inside is paged), in the order the model computes;
        # the query stands in RoPE's part where the model turns it, else over the keys it is compared with
        self.norm_box: QGroupBox = part_box("2 · Attention: the norm", [self.block_text, self.ln1_in, self.ln1_norm, self.ln1_out])
        self.rope_box: QGroupBox = part_box("3 · Attention: the query and RoPE", [self.q_strip, self.rope_text, self.angles])
        self.keys_box: QGroupBox = part_box("4 · Attention: the query and the keys", [
            self.rot_q, self.rot_k, self.keys_caption, self.keys_view])
        self.scores_box: QGroupBox = part_box("5 · Attention: scores and weights", [self.scores, self.pattern])
        self.values_box: QGroupBox = part_box("6 · Attention: the values and their weighted sum", [
            self.gqa_text, self.values_caption, self.values_view, self.z_strip])
        self.output_box: QGroupBox = part_box("7 · Attention: W_O and the residual add", [self.attn_out, self.resid_mid])
        self.boxes = (self.norm_box, self.rope_box, self.keys_box, self.scores_box, self.values_box, self.output_box)

    def restyle(self, theme: th.Theme) -> None:
        """The heat maps' axis titles in ``theme``'s font."""
        for view in (self.keys_view, self.values_view):
            th.style_plot(view.getPlotItem(), theme, left="position", bottom="dimension")
            room_for_row_names(view.getPlotItem(), theme)

    def titles(self, says) -> None:
        """Strip titles for the model on screen (its norm, its position encoding, its W_O)."""
        self.ln1_norm.title = says("ln_normalized_title", index=1)
        self.ln1_out.title = says("ln_out_title", index=1)
        self.q_strip.title = says("q_title")
        self.attn_out.title = says("attn_out_title")

    def draw(self, t, L: int, H: int, says, piece_at) -> bool:
        """Draw block ``L``, head ``H`` of InsideTrace ``t``; ``piece_at(j)`` names position j.
        False when the keys and values of layer ``L`` are not in ``t`` (they come per layer)."""
        self.titles(says)
        T, dh = t.position + 1, t.q.shape[-1]
        x = t.resid_pre[L]
        self.block_text.setText(says("block"))
        self.ln1_in.show_vector(x, f"mean {x.mean():+.3f}, spread {x.std():.3f}")
        n = t.ln1_normalized[L]
        self.ln1_norm.show_vector(n, says("ln_normalized_note", mean=float(n.mean()), spread=float(n.std()),
                                          rms=float(np.sqrt((n ** 2).mean())), scale=float(t.ln1_scale[L])))
        self.ln1_out.show_vector(t.ln1_out[L])
        self.q_strip.show_vector(t.q[L, H], f"{dh} numbers per head")
        self._draw_rope(t, L, H, says)
        self._draw_groups(t, H, says)
        has_kv = L in t.kv_layers
        if has_kv:
            i = t.kv_layers.index(L)
            show_heatmap(self.keys_image, self.keys_view, t.keys[i, t.kv_of(H), :T])
            show_heatmap(self.values_image, self.values_view, t.values[i, t.kv_of(H), :T])
            self.keys_caption.setText(says("keys_caption", T=T))
            self.values_caption.setText(f"<b>values v</b> of the {T} visible positions ({T} × {dh}): what the weights mix")
        else:
            self.keys_caption.setText("keys: computing for this layer…")
            self.values_caption.setText("values: computing for this layer…")
        pieces = [f"{clip(piece_at(j), 12)}\n{j}" for j in range(T)]  # the token over its position (spaced_ticks labels every n-th so they fit)
        self.scores.show_values(t.scores[L, H, :T], pieces, says("scores_note", position=t.position), th.BLUE)
        self.pattern.show_values(
            t.pattern[L, H, :T], pieces,
            f"softmax turns the scores into weights that are all positive and add up to 1 (sum "
            f"{float(t.pattern[L, H, :T].sum()):.4f}): the same row the attention panel draws for this position.",
            th.ORANGE,
        )
        self.z_strip.show_vector(t.z[L, H], f"Σ weight × value, {dh} numbers")
        self.attn_out.show_vector(t.attn_out[L], says("attn_out_note", hd=t.n_head * dh))
        self.resid_mid.show_vector(t.resid_mid[L], f"the attention added a vector of length {norm(t.attn_out[L]):.2f}")
        return has_kv

    def _draw_rope(self, t, L: int, H: int, says) -> None:
        """RoPE's turn of q and k, where the record has it and the model's facts say so."""
        angles = t.angles
        text = ""
        if angles is not None and t.rot_q is not None:
            half = len(angles)
            text = says("rope", half=half, pair_dims=2 * half, dh=t.q.shape[-1], position=t.position,
                        first=float(angles[0]), last_pair=half - 1, last=float(angles[-1]))
        for widget in (self.rope_text, self.rot_q, self.rot_k, self.angles):
            widget.setHidden(not text)
        home = self.rope_box if text else self.keys_box  # the query: on RoPE's page, else over the keys
        if home.layout().indexOf(self.q_strip) < 0:
            self.q_strip.parentWidget().layout().removeWidget(self.q_strip)
            home.layout().insertWidget(0, self.q_strip)
        if not text:
            return
        self.rope_text.setText(text + says("qk_norm"))
        kv = t.kv_of(H)
        self.rot_q.show_vector(t.rot_q[L, H], says("rot_q_note", position=t.position, length=norm(t.q[L, H])))
        self.rot_k.show_vector(t.rot_k[L, kv], says("rot_k_note", kv=kv))
        turned = np.mod(angles, 2 * np.pi)
        self.angles.show_values(turned, [str(i) for i in range(len(turned))], says("angles_note", position=t.position),
                                th.BLUE, lines=1)

    def _draw_groups(self, t, H: int, says) -> None:
        """Which key/value head each query head reads, where heads share them."""
        kv = t.kv_of(H)
        runs = "; ".join(f"kv head {j}: query heads {', '.join(str(h) for h in np.flatnonzero(t.kv_head == j))}"
                         for j in range(t.kv_heads)) if t.kv_head is not None else ""
        text = says("grouped", runs=runs, head=H, kv=kv) if t.kv_heads < t.n_head else ""
        self.gqa_text.setHidden(not text)
        self.gqa_text.setText(text)
