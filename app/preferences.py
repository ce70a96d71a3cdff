"""What the window remembers between runs: the last model used and where the window was."""

from __future__ import annotations

from PySide6.QtCore import QSettings

LAST_MODEL = "model/last"
GEOMETRY = "window/geometry"


class Preferences:
    """The window's QSettings (``settings``); with ``remember`` False nothing is read or written."""

    def __init__(self, settings: QSettings | None = None, remember: bool = True):
        self.settings = settings if settings is not None else QSettings("nexttoken", "nexttoken")
        self.remember = remember

    def last_model(self) -> str | None:
        """The model loaded last ("" or None: the demo model)."""
        return (self.settings.value(LAST_MODEL, "") or None) if self.remember else None

    def set_last_model(self, source: str) -> None:
        """``source``: a folder or hub id, "" for the demo model."""
        if self.remember:
            self.settings.setValue(LAST_MODEL, source)

    def save_geometry(self, window) -> None:
        if self.remember:
            self.settings.setValue(GEOMETRY, window.saveGeometry())

    def restore_geometry(self, window) -> bool:
        """Put ``window`` where it was last closed (on that screen, so it stays on the projector)."""
        saved = self.settings.value(GEOMETRY)
        return bool(saved) and window.restoreGeometry(saved)
