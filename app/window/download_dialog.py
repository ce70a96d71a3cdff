"""The progress dialog of a model download, with its Cancel button."""

from __future__ import annotations

from PySide6.QtCore import QObject, Qt
from PySide6.QtWidgets import QProgressDialog, QWidget

from app.logic.wording import human_bytes


class DownloadDialog(QObject):
    """Shows a Load's download progress (``controller.downloadProgress``) in a modal dialog that
    closes when the load ends (``close``); Cancel stops the download (``controller.cancel_load``)
    and the load then fails, the session shown meanwhile staying usable. ``say(text)`` writes the
    status line."""

    def __init__(self, parent: QWidget, controller, say):
        super().__init__(parent)
        self.parent_widget, self.controller, self.say = parent, controller, say
        self.source: str | None = None  # what the running Load downloads
        self.dialog: QProgressDialog | None = None
        self.cancelled = False  # Cancel pressed: progress reports still on their way are ignored
        controller.downloadProgress.connect(self._on_controller_download_progress)

    def expect(self, source: str | None) -> None:
        """A Load of ``source`` was sent."""
        self.source = source

    def _on_controller_download_progress(self, done: int, total: int) -> None:
        if self.cancelled:  # reports sent before the download heard of the cancel
            return
        if self.dialog is None:
            self.dialog = QProgressDialog(f"Downloading {self.source}…", "Cancel", 0, 100, self.parent_widget)
            self.dialog.setWindowTitle("Downloading a model")
            self.dialog.setWindowModality(Qt.WindowModal)
            self.dialog.setMinimumDuration(0)
            self.dialog.canceled.connect(self._on_dialog_canceled)
        dialog = self.dialog  # setValue runs the event loop (a modal dialog): the load may end and close it
        dialog.setLabelText(f"Downloading {self.source}: {human_bytes(done)} of {human_bytes(total) if total else '?'}")
        dialog.setValue(int(100 * done / total) if total else 0)

    def _on_dialog_canceled(self) -> None:
        self.cancelled = True
        self.close()
        if self.controller.cancel_load():
            self.say(f"Cancelling the download of {self.source}…")

    def finish(self) -> None:
        """The load ended (loaded or failed): close the dialog, listen to the next download."""
        self.cancelled = False
        self.close()

    def close(self) -> None:
        if self.dialog is not None:
            self.dialog.blockSignals(True)  # closing emits canceled: only the Cancel button cancels
            self.dialog.close()
            self.dialog.deleteLater()
            self.dialog = None
