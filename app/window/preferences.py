"""What the window remembers between runs: the last model used, where the window was and the text size."""

from __future__ import annotations

from PySide6.QtCore import QSettings

LAST_MODEL = "model/last"
GEOMETRY = "window/geometry"
TEXT_SIZE = "window/text_size"


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

    def text_size(self) -> str | None:
        """The name of the text size chosen last (a ``Theme.name`` of ``app.window.theme.TEXT_SIZES``), if any."""
        return (self.settings.value(TEXT_SIZE, "") or None) if self.remember else None

    def set_text_size(self, name: str) -> None:
        if self.remember:
            self.settings.setValue(TEXT_SIZE, name)
