"""The window's views, one at a time, each built the first time it is shown or asked for.

A window opens on one view; building the other views' plots up front was half the cost of a new
window (about 150 ms of 300) for views many sessions never open. A view not built yet holds an
empty page in its place; ``page(name)`` builds it and puts it there.
"""

from __future__ import annotations

from typing import Callable

from PySide6.QtWidgets import QStackedWidget, QWidget

from app.logic.views import VIEWS
from app.window.guard import guarded


class ViewPages(QStackedWidget):
    """One page per view of ``VIEWS``, in that order: the widgets of ``built``, and for the others
    ``build(name)``, called the first time the view is shown or asked for. Not a QTabWidget: its tab
    bar re-measured itself on every layout pass a step set off (+10 ms a drawn step)."""

    def __init__(self, built: dict[str, QWidget], build: Callable[[str], QWidget], parent: QWidget | None = None):
        super().__init__(parent)
        self._build = build
        self._later = [name for name in VIEWS if name not in built]
        for name in VIEWS:
            self.addWidget(built.get(name) or QWidget())  # an empty page: its place, until it is built

    def page(self, name: str) -> QWidget:
        """View ``name``'s widget, built now if it was not yet."""
        index = list(VIEWS).index(name)
        if name in self._later:
            widget = self._build(name)
            self._later.remove(name)
            placeholder = self.widget(index)
            current = self.currentIndex()
            self.blockSignals(True)  # the same view stays current: no change to announce
            self.insertWidget(index, widget)
            self.removeWidget(placeholder)
            super().setCurrentIndex(current)  # the view on screen: built already, nothing to build
            self.blockSignals(False)
            placeholder.deleteLater()
        return self.widget(index)

    def built_page(self, name: str) -> QWidget | None:
        """View ``name``'s widget if it has been built, else None (nothing is built)."""
        return None if name in self._later else self.widget(list(VIEWS).index(name))

    @guarded  # a slot of the view buttons: a view that fails to build is reported, the window goes on
    def setCurrentIndex(self, index: int) -> None:  # noqa: N802 - Qt's name
        self.page(list(VIEWS)[index])  # built before it is shown
        super().setCurrentIndex(index)

    def setCurrentWidget(self, widget: QWidget) -> None:  # noqa: N802 - Qt's name
        self.setCurrentIndex(self.indexOf(widget))
