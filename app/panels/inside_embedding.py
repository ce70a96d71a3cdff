"""Inside, part 1: the token's row of the embedding table, the position's row where the model has a
position table, and their sum, where the residual stream starts."""

from __future__ import annotations

from PySide6.QtWidgets import QGroupBox

from app.panels.inside_plots import VectorStrip, label, part_box


class EmbeddingPart:
    """The token and position embeddings of one position, and the residual stream's start."""

    def __init__(self):
        self.text = label()
        self.token_strip = VectorStrip("token embedding")
        self.pos_strip = VectorStrip("position embedding")
        self.sum_strip = VectorStrip("sum: the residual stream's start")
        self.box: QGroupBox = part_box("1 · Token and position", [self.text, self.token_strip, self.pos_strip, self.sum_strip])

    def draw(self, t, says) -> None:
        """Draw InsideTrace ``t``'s embeddings; ``says(key, **numbers)`` gives Inside's sentences."""
        at = dict(token_id=t.token_id, position=t.position)
        self.text.setText(says("embed", **at))
        self.token_strip.show_vector(t.token_embed, says("token_row", **at))
        row = says("position_row", **at)  # "" for a model without a position table: no vector to draw
        self.pos_strip.setHidden(not row)
        if row:
            self.pos_strip.show_vector(t.pos_embed, row)
        self.sum_strip.show_vector(t.resid_pre[0], says("stream_start"))
