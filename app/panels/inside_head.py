"""Inside, part 4: the final norm, the LM head and softmax (how the last residual stream becomes the
next token's probabilities), and part 6: every matrix's shape and the parameter counts."""

from __future__ import annotations

from html import escape

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QGroupBox, QTableWidgetItem

from app.logic.wording import percent
from app.panels.inside_plots import VectorStrip, fit_rows, label, part_box, table

LOGITS_SHOWN = 5  # highest logits written out


class HeadPart:
    """The final norm's output h, the LM head's highest logits and softmax."""

    def __init__(self):
        self.final_strip = VectorStrip("final hidden state h")
        self.text = label()
        self.text.setTextFormat(Qt.RichText)
        self.box: QGroupBox = part_box("10 · Final norm, the LM head and softmax", [self.final_strip, self.text])

    def draw(self, t, says, piece, vocab: int, sampling: str) -> None:
        """Draw InsideTrace ``t``'s end of the path; ``sampling`` ends the last sentence (the sampling probability)."""
        self.final_strip.title = says("final_title")
        self.final_strip.show_vector(t.final_hidden, says("final_note", scale=float(t.ln_final_scale)))
        lines = [says("logit_line", piece=f"“{escape(piece(int(i)), quote=False)}”", id=int(i), logit=float(logit))
                 for i, logit in zip(t.lens_ids[-1][:LOGITS_SHOWN], t.lens_logits[-1][:LOGITS_SHOWN])]
        self.text.setText(
            f"Logits: {says('lm_head')}. The highest:<br>" + "<br>".join(lines)
            + f"<br><b>softmax</b> turns the {vocab:,} logits into probabilities that add up to 1 "
            f"(p = e<sup>logit</sup> / Σ e<sup>logit</sup>): the token that came next had <b>model probability "
            f"{percent(float(t.lens_next_prob[-1]))}</b>, before any sampling setting{sampling}."
        )


class SizesPart:
    """Every part's matrices (shapes of one block) and parameter counts."""

    def __init__(self):
        self.table = table()
        self.text = label()
        self.box: QGroupBox = part_box("13 · Sizes and parameters", [self.table, self.text])

    def draw(self, t, says) -> None:
        groups: dict[str, tuple[int, list[str]]] = {}
        for part in t.params:
            key = f"{part.part.split(' ', 2)[2]}, all {t.n_layer} blocks" if part.part.startswith("block ") else part.part
            count, shapes = groups.get(key, (0, []))
            shape = " × ".join(f"{n:,}" for n in part.shape)
            if shape not in shapes and len(shapes) < 4:
                shapes.append(shape)
            groups[key] = (count + part.count, shapes)
        self.table.setRowCount(len(groups))
        self.table.setColumnCount(3)
        self.table.setHorizontalHeaderLabels(["part", "matrices and biases (shapes, one block)", "parameters"])
        for row, (name, (count, shapes)) in enumerate(groups.items()):
            self.table.setItem(row, 0, QTableWidgetItem(name))
            self.table.setItem(row, 1, QTableWidgetItem(", ".join(shapes)))
            item = QTableWidgetItem(f"{count:,}")
            item.setTextAlignment(Qt.AlignRight | Qt.AlignVCenter)
            self.table.setItem(row, 2, item)
        fit_rows(self.table)
        self.text.setText(says("parameters", n_params=t.n_params, active_params=t.active_params,
                               active_now=t.active_params / t.n_params if t.n_params else 1.0))
