"""Model → About this model: what the loaded model is made of, as a table a teacher can project.

The rows are ``app.logic.model_words.architecture_rows`` of the model's description
(``engine.architecture.Architecture``, sent with every result): the dialog only lays them out.
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QDialog, QDialogButtonBox, QHeaderView, QLabel, QTableWidget, QTableWidgetItem, QVBoxLayout, QWidget

from app.logic.model_words import architecture_rows


class ModelDialog(QDialog):
    """One table, what and value, for the model on screen (``show_model``); it takes the window's
    font, so projector mode makes it large too."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setAttribute(Qt.WA_WindowPropagation)
        self.title = QLabel()
        self.title.setTextFormat(Qt.PlainText)
        self.title.setWordWrap(True)
        self.table = QTableWidget(0, 2)
        self.table.setHorizontalHeaderLabels(["", "this model"])
        self.table.verticalHeader().setVisible(False)
        self.table.setEditTriggers(QTableWidget.NoEditTriggers)
        self.table.setWordWrap(True)
        self.table.setSelectionMode(QTableWidget.NoSelection)
        self.table.setFocusPolicy(Qt.NoFocus)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(0, QHeaderView.ResizeToContents)
        header.setSectionResizeMode(1, QHeaderView.Stretch)
        buttons = QDialogButtonBox(QDialogButtonBox.Close)
        buttons.rejected.connect(self.close)
        layout = QVBoxLayout(self)
        layout.addWidget(self.title)
        layout.addWidget(self.table, 1)
        layout.addWidget(buttons)
        self.resize(900, 200)

    def show_model(self, info) -> None:
        """Fill the table for ``info`` (an engine.info.ModelInfo) and show the dialog."""
        self.setWindowTitle(f"About this model: {info.name}")
        arch = info.architecture
        self.title.setText(info.label if arch is not None else f"{info.label}: what it is made of is not known "
                                                                  "(a session file saved without it).")
        rows = architecture_rows(arch) if arch is not None else []
        self.table.setRowCount(len(rows))
        for i, (what, value) in enumerate(rows):
            for j, text in enumerate((what, value)):
                item = QTableWidgetItem(text)
                item.setToolTip(text)
                self.table.setItem(i, j, item)
        self.table.resizeRowsToContents()
        rows_h = sum(self.table.rowHeight(r) for r in range(self.table.rowCount()))
        self.table.setMinimumHeight(self.table.horizontalHeader().height() + rows_h + 4)  # every row in view, no scrolling
        self.resize(max(self.width(), 900), self.sizeHint().height())
        self.show()
        self.raise_()

    def rows(self) -> list[tuple[str, str]]:
        """What the table shows (tests read it)."""
        return [(self.table.item(i, 0).text(), self.table.item(i, 1).text()) for i in range(self.table.rowCount())]
