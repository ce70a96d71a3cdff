"""The menu bar folds its menus into one "☰ Menu" when they and the view buttons in its corner do
not fit side by side with room for one more view button: on a 1024 x 768 projector the Help menu
slid behind the bar's » chevron and ran into "View:". Browsers fold their menus the same way. The
menus' shortcuts are the window's own actions and keep working whichever way the bar is."""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject, QSize, Qt
from PySide6.QtWidgets import QMenu, QMenuBar, QStyle, QStyleOptionMenuItem, QWidget

from app.window.guard import guarded

SLACK = 8  # px more than the style's own sum: a rounding of the bar's items never pushes one behind »


def menus_fit(menus: int, corner: int, spare: int, bar: int) -> bool:
    """Whether menus ``menus`` px wide fit a bar ``bar`` px wide beside a corner ``corner`` px wide
    with ``spare`` px between them (room for one more view button)."""
    return menus + spare + corner <= bar


class MenuFold(QObject):
    """Shows ``bar``'s menus one by one when they fit beside ``corner`` (the view buttons) with
    ``spare()`` px to spare, else one "☰ Menu" holding them all, in the same order."""

    def __init__(self, bar: QMenuBar, corner: QWidget, spare, parent: QObject | None = None):
        super().__init__(parent or bar)
        self.bar, self.corner, self.spare = bar, corner, spare
        self.menus = [a for a in bar.actions() if a.menu() is not None]  # the menus, in the bar's order
        self.folded_menu = QMenu("☰ &Menu", bar)
        self.folded_menu.setToolTip("File, Edit, Model, View, Run and Help: the window is too narrow to show them side by side")
        for action in self.menus:
            self.folded_menu.addAction(action)
        self.folded = False
        bar.installEventFilter(self)
        corner.installEventFilter(self)

    def menus_width(self) -> int:
        """The width the menus take side by side in ``bar``, as the style lays them out."""
        bar = self.bar
        style, fm = bar.style(), bar.fontMetrics()
        spacing = style.pixelMetric(QStyle.PM_MenuBarItemSpacing, None, bar)
        edge = style.pixelMetric(QStyle.PM_MenuBarHMargin, None, bar) + style.pixelMetric(QStyle.PM_MenuBarPanelWidth, None, bar)
        width = 2 * edge
        for action in self.menus:
            option = QStyleOptionMenuItem()
            option.initFrom(bar)
            option.text, option.menuItemType = action.text(), QStyleOptionMenuItem.Normal
            text = fm.size(Qt.TextShowMnemonic, action.text())
            width += style.sizeFromContents(QStyle.CT_MenuBarItem, option, QSize(text), bar).width() + spacing
        return width + SLACK

    def refit(self) -> None:
        fold = not menus_fit(self.menus_width(), self.corner.sizeHint().width(), self.spare(), self.bar.width())
        if fold == self.folded:
            return
        self.folded = fold
        for action in self.bar.actions():
            self.bar.removeAction(action)
        self.bar.addActions([self.folded_menu.menuAction()] if fold else self.menus)

    @guarded(fallback=False)
    def eventFilter(self, watched, event) -> bool:
        """A new width or font of the bar, or of its corner (another view button): fold or unfold."""
        if event.type() in (QEvent.Type.Resize, QEvent.Type.FontChange, QEvent.Type.LayoutRequest, QEvent.Type.Show):
            self.refit()
        return False
