"""Temperature and top-k on the Flow: two small spin boxes on the sampling box's first line, each
named in words ("temperature 0.20", "top-k 50") so a class reads what it is.

They are a second face of the Sampling panel's own two controls (``app.panels.sampling_panel``):
a change here is handed to that panel's widget (``temperatureChosen``, ``topKChosen``; the window
connects them), which sends it the one way every settings change goes, a re-sample of the step on
screen without a forward pass; ``show_settings`` shows what that panel shows, the settings in force.
"""

from __future__ import annotations

from PySide6.QtCore import QRect, Signal
from PySide6.QtGui import QFont, QFontMetrics
from PySide6.QtWidgets import QAbstractSpinBox, QDoubleSpinBox, QHBoxLayout, QSpinBox, QWidget

from engine.defaults import DEFAULT_SETTINGS
from engine.sampling import RANGES, SamplingSettings


PREFIXES = (  # (the spin boxes' names, arrow buttons), the first that fits the box's width
    (("temperature ", "top-k "), True), (("temp ", "top-k "), True), (("temp ", "top-k "), False),
)


class FlowSamplingControls(QWidget):
    """The temperature and top-k spin boxes, their names as prefixes; disabled while sampling is greedy."""

    temperatureChosen = Signal(float)
    topKChosen = Signal(int)

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self._box = None  # what place() was given last
        d = DEFAULT_SETTINGS
        lo, hi = RANGES["temperature"]
        self.temperature = QDoubleSpinBox(decimals=2, singleStep=0.1, minimum=lo, maximum=hi, value=d.temperature)
        self.temperature.setPrefix("temperature ")
        self.temperature.setToolTip("Temperature: the logits are divided by it before softmax (below 1 sharpens, above 1 "
                                    "flattens); the candidates re-sample at once, no forward pass. Also in the Overview's "
                                    "Sampling panel.")
        lo, hi = RANGES["top_k"]
        self.top_k = QSpinBox(minimum=lo, maximum=hi, value=d.top_k, singleStep=5)
        self.top_k.setPrefix("top-k ")
        self.top_k.setSpecialValueText("top-k off")
        self.top_k.setToolTip("Top-k: keep only the k highest-scoring tokens (0 = off); the candidates re-sample at once.")
        row = QHBoxLayout(self)
        row.setContentsMargins(0, 0, 0, 0)
        row.setSpacing(2)
        for spin in (self.temperature, self.top_k):
            spin.setKeyboardTracking(False)  # typed digits count once Enter is pressed; arrows and the wheel at once
            row.addWidget(spin)
        self.temperature.valueChanged.connect(self._on_temperature_changed)
        self.top_k.valueChanged.connect(self._on_top_k_changed)

    def show_settings(self, s: SamplingSettings) -> None:
        """Show ``s`` (the Sampling panel's settings) without emitting anything."""
        if (self.temperature.value(), self.top_k.value(), self.top_k.isEnabled()) == (s.temperature, s.top_k, not s.greedy):
            return  # every step shows the settings again: the boxes are placed again only for new values
        for spin in (self.temperature, self.top_k):
            spin.blockSignals(True)
        self.temperature.setValue(s.temperature)
        self.top_k.setValue(s.top_k)
        for spin in (self.temperature, self.top_k):
            spin.blockSignals(False)
            spin.setEnabled(not s.greedy)
        self._refit()

    def place(self, box, line: int, pad: int, font: QFont) -> None:
        """Sit on the first line under the title of ``box`` (x, y, w, h), a line and a pad high,
        each box as wide as its name and value (never cut digits); where the line is short of
        room, "temp" for "temperature", then without the arrow buttons (the wheel and the arrow
        keys still step, the tooltip names them)."""
        self._box = (box, line, pad, font)
        x, y, w, h = box
        self.setFont(font)
        fm = QFontMetrics(font)
        spins = (self.temperature, self.top_k)
        room = w - 2 * pad - 4
        for prefixes, buttons in PREFIXES:
            arrows = max(16, line * 3 // 4) + 6 if buttons else 8  # the up/down buttons and the frame
            for spin, prefix in zip(spins, prefixes):
                spin.setPrefix(prefix)
                spin.setButtonSymbols(QAbstractSpinBox.UpDownArrows if buttons else QAbstractSpinBox.NoButtons)
            self.top_k.setSpecialValueText(prefixes[1] + "off")
            widths = [max(fm.horizontalAdvance(spin.prefix() + least), fm.horizontalAdvance(spin.text())) + arrows
                      for spin, least in zip(spins, ("0.00", "00"))]
            total = sum(widths) + self.layout().spacing()
            if total <= room:
                break
        for spin, width in zip(spins, widths):
            spin.setFixedWidth(width)
        self.setGeometry(QRect(x + pad + 2, y + pad + line, total, line + pad))

    def _refit(self) -> None:
        if self._box is not None:  # a longer value: a wider box, never cut digits
            self.place(*self._box)

    def _on_temperature_changed(self, value: float) -> None:
        self._refit()
        self.temperatureChosen.emit(float(value))

    def _on_top_k_changed(self, value: int) -> None:
        self._refit()
        self.topKChosen.emit(int(value))
