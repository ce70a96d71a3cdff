"""What the window knows about a loaded model. Standard library only: the window's process reads it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ModelInfo:
    """A loaded model's name, where it came from, its shape and its size."""

    name: str
    source: str
    n_layer: int
    n_head: int
    d_model: int
    n_positions: int
    vocab_size: int
    n_params: int
    is_demo: bool

    @property
    def label(self) -> str:
        size = f"{self.n_params / 1e6:.0f}M" if self.n_params >= 1e6 else f"{self.n_params / 1e3:.0f}K"
        demo = "tiny demo model, " if self.is_demo else ""
        return f"{self.name} ({demo}{self.n_layer} layers, {self.n_head} heads, {size} parameters)"
