"""The Flow's lines that name a part of the model, as data: box line -> text, for the step's numbers.

The flow panel only draws these; tests read them. Each comes from ``resources/help/<language>.json``
under "flow", in its variant for the model's facts (``app.logic.model_words``), filled with the step's
numbers (``app.logic.tour.values``: the same the tour reads out).
"""

from __future__ import annotations

from app.logic.flow_numbers import FlowNumbers
from app.logic.help import texts, words
from app.logic.model_words import architecture_line
from app.logic.tour import values

LINES = ("ln_final_title", "ln_final_lengths", "ln_final_rule", "embedding_position", "embedding_length",
         "lm_head_size", "lm_head_matrix", "mlp", "heads")


def flow_texts(n: FlowNumbers, language: str = "en") -> dict[str, str]:
    """Every fact-dependent line of the Flow for ``n`` ("" where the model's facts are unknown), and
    ``model``: the model in one line."""
    numbers = values(n)
    lines = {name: words("flow", name, n.arch, numbers, language) for name in LINES if name in texts(language)["flow"]}
    lines["model"] = architecture_line(n.arch)
    return lines
