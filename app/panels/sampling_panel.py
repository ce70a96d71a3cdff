"""Panel 5, sampling controls: greedy or sample, temperature, top-k, top-p, repetition penalty, seed.

Every widget's range comes from ``engine.sampling.RANGES``. The widgets show what the person chose
last, which is what the engine uses for the next step or re-draw (the controller sends it with
every request that can reach a fresh engine); results never change them. A change emits
``settingsChanged`` at once; the engine re-samples the current step without a forward pass. When
the step on screen was drawn with other settings (after Back, say), a line says so.
"""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QRegularExpressionValidator
from PySide6.QtWidgets import (
    QButtonGroup,
    QDoubleSpinBox,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QRadioButton,
    QSpinBox,
    QWidget,
)

from engine.defaults import DEFAULT_SETTINGS
from engine.errors import SettingsError
from engine.sampling import RANGES, SamplingSettings

from app.window import theme as th
from app.logic.state import AppState

CONTROL_NAMES = {"temperature": "Temperature", "top_k": "Top-k", "top_p": "Top-p", "repetition_penalty": "Repetition penalty", "seed": "Seed"}
"""Each setting's control, as its label reads (an error names the control, not the field)."""


class SamplingPanel(QGroupBox):
    """Widgets for SamplingSettings; ``settings()`` reads them, ``set_settings`` shows them."""

    settingsChanged = Signal(object)  # SamplingSettings
    settingsShown = Signal(object)  # SamplingSettings: what the widgets show now (set_settings or a person's change)

    def __init__(self, state: AppState, parent: QWidget | None = None):
        super().__init__("5 · Sampling: how the next token is picked", parent)
        self.short_title = "5 Sampling"
        self.state = state
        self.greedy = QRadioButton("Greedy (top token)")
        self.greedy.setToolTip("Always take the token with the highest score")
        self.sample = QRadioButton("Sample")
        self.sample.setToolTip("Draw the next token at random from the distribution shown above")
        d = DEFAULT_SETTINGS
        (self.greedy if d.greedy else self.sample).setChecked(True)
        group = QButtonGroup(self)
        group.addButton(self.greedy)
        group.addButton(self.sample)

        lo, hi = RANGES["temperature"]
        self.temperature = QDoubleSpinBox(decimals=2, singleStep=0.1, minimum=lo, maximum=hi, value=d.temperature)
        self.temperature.setToolTip("Divide the logits by this: below 1 sharpens, above 1 flattens (0 = greedy).")
        lo, hi = RANGES["top_k"]
        self.top_k = QSpinBox(minimum=lo, maximum=hi, value=d.top_k, singleStep=5)
        self.top_k.setSpecialValueText("off")
        self.top_k.setToolTip("Keep only the k highest-scoring tokens (0 = off).")
        lo, hi = RANGES["top_p"]
        self.top_p = QDoubleSpinBox(decimals=2, singleStep=0.05, minimum=lo, maximum=hi, value=d.top_p)
        self.top_p.setToolTip("After temperature and top-k: keep the smallest set of the most likely tokens whose probabilities reach at least p (1 = off).")
        lo, hi = RANGES["repetition_penalty"]
        self.penalty = QDoubleSpinBox(decimals=2, singleStep=0.1, minimum=lo, maximum=hi, value=d.repetition_penalty)
        self.penalty.setToolTip("Make tokens already in the context less likely (1 = off).")
        lo, hi = RANGES["seed"]
        self.seed = QLineEdit("" if d.seed is None else str(d.seed))
        self.seed.setValidator(QRegularExpressionValidator(r"\d{0,10}"))
        self.seed.setPlaceholderText("empty = a fresh random draw")
        self.seed.setToolTip(f"A whole number from {lo} to {hi:,} replays the same draws; empty = unseeded.")
        self.new_seed = QPushButton("New draw")
        self.new_seed.setToolTip("Add one to the seed: draw the current step again.")
        self.error = QLabel()
        self.error.setTextFormat(Qt.PlainText)
        self.error.setStyleSheet(f"color: {th.ERROR}")
        self.drawn_with = QLabel()  # shown when the step on screen was drawn with other settings
        self.drawn_with.setWordWrap(True)
        self.drawn_with.hide()

        mode = QHBoxLayout()
        mode.addWidget(self.greedy)
        mode.addWidget(self.sample)
        seed_row = QHBoxLayout()
        seed_row.addWidget(self.seed, 1)
        seed_row.addWidget(self.new_seed)
        form = QFormLayout(self)
        form.addRow(mode)
        form.addRow("Temperature", self.temperature)
        form.addRow("Top-k", self.top_k)
        form.addRow("Top-p", self.top_p)
        form.addRow("Repetition penalty", self.penalty)
        form.addRow("Seed", seed_row)
        form.addRow(self.error)
        form.addRow(self.drawn_with)

        for spin in (self.temperature, self.top_k, self.top_p, self.penalty):
            spin.setKeyboardTracking(False)
            spin.valueChanged.connect(self._on_widget_changed)
        self.greedy.toggled.connect(self._on_widget_changed)
        self.seed.editingFinished.connect(self._on_widget_changed)
        self.new_seed.clicked.connect(self._on_new_seed_clicked)
        state.subscribe(self._on_state_result)
        state.subscribe_theme(self._on_state_theme)
        self._shown: SamplingSettings | None = None
        self._sync_enabled()

    def plot_needs(self) -> list:
        return []  # no plots

    # ------------------------------------------------------------ settings
    def settings(self) -> SamplingSettings:
        """The settings the widgets show (raises SettingsError if the seed is out of range)."""
        text = self.seed.text().strip()
        return SamplingSettings(
            greedy=self.greedy.isChecked(),
            temperature=float(self.temperature.value()),
            top_k=int(self.top_k.value()),
            top_p=float(self.top_p.value()),
            repetition_penalty=float(self.penalty.value()),
            seed=int(text) if text else None,
        )

    def set_settings(self, s: SamplingSettings) -> None:
        """Show ``s`` without emitting settingsChanged."""
        widgets = (self.greedy, self.sample, self.temperature, self.top_k, self.top_p, self.penalty, self.seed)
        for w in widgets:
            w.blockSignals(True)
        (self.greedy if s.greedy else self.sample).setChecked(True)
        self.temperature.setValue(s.temperature)
        self.top_k.setValue(s.top_k)
        self.top_p.setValue(s.top_p)
        self.penalty.setValue(s.repetition_penalty)
        self.seed.setText("" if s.seed is None else str(s.seed))
        for w in widgets:
            w.blockSignals(False)
        self._shown = s
        self._sync_enabled()
        self._sync_drawn_with()
        self.settingsShown.emit(s)

    @property
    def shown(self) -> SamplingSettings | None:
        """The settings shown last (``set_settings``, or the person's last valid change)."""
        return self._shown

    def _sync_enabled(self) -> None:
        sampling = not self.greedy.isChecked()
        for w in (self.temperature, self.top_k, self.top_p, self.seed, self.new_seed):
            w.setEnabled(sampling)

    def _on_widget_changed(self, *_args) -> None:
        self._sync_enabled()
        try:
            settings = self.settings()
        except SettingsError as exc:  # named as the control shows it
            self.error.setText(exc.naming(CONTROL_NAMES.get(exc.setting, exc.setting)))
            return
        self.error.setText("")
        if settings != self._shown:
            self._shown = settings
            self.settingsChanged.emit(settings)
            self._sync_drawn_with()
            self.settingsShown.emit(settings)

    def _on_new_seed_clicked(self) -> None:
        text = self.seed.text().strip()
        self.seed.setText(str((int(text) + 1) % (RANGES["seed"][1] + 1) if text else 0))
        self._on_widget_changed()

    def _on_state_result(self, result) -> None:
        self._sync_drawn_with()

    def _sync_drawn_with(self) -> None:
        """Say so when the step on screen was drawn with settings other than the ones shown."""
        result = self.state.result
        drawn = None if result is None or result.trace is None else result.trace.record
        if drawn is None or self._shown is None or drawn.settings == self._shown or drawn.chosen_by == "user":
            self.drawn_with.hide()
            return
        self.drawn_with.setText(
            f"Step {drawn.step} on screen was drawn with {drawn.settings.describe()}. "
            f"The next step uses the settings above."
        )
        self.drawn_with.show()

    def _on_state_theme(self, theme: th.Theme) -> None:
        self.setFont(theme.font())
