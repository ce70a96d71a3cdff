"""Heat maps of signed numbers, rows by dimensions (keys, values, a query), for the Inside and the
KV cache views: one colour-blind-safe diverging map (blue negative, white 0, yellow positive) whose
scale is symmetric around 0, and an outline that can frame some rows, drawn outside them (a row one
pixel tall stays visible inside its frame)."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QRectF, Qt
from PySide6.QtGui import QPainter
from PySide6.QtWidgets import QGraphicsRectItem

from app.window import theme as th
from app.window.guard import guarded

DIVERGING = "CET-CBD1"


class Frame(QGraphicsRectItem):
    """A rectangle around cells whose line is drawn wholly outside them, in screen pixels: at any
    zoom its pen never covers the cells it frames (a 2 px outline hid a row 1 px tall), except
    where the cells touch the plot's edge: that side is drawn just inside, so it still shows."""

    def outside(self, painter: QPainter) -> QRectF:
        """The rectangle the pen's centre line follows, in screen pixels: the cells' own, grown by
        half the pen's width and a pixel."""
        grow = self.pen().widthF() / 2 + 1
        return painter.transform().mapRect(self.rect()).adjusted(-grow, -grow, grow, grow)

    @guarded(fallback=lambda self: QGraphicsRectItem.boundingRect(self))
    def boundingRect(self) -> QRectF:
        rect = self.rect()
        if rect.isEmpty():
            return rect
        # a few pixels around the cells, in data units (the view's scale is known only as it paints)
        view = self.scene().views()[0] if self.scene() is not None and self.scene().views() else None
        scale = self.deviceTransform(view.viewportTransform()) if view is not None else None
        sx = abs(scale.m11()) if scale is not None and scale.m11() else 1.0
        sy = abs(scale.m22()) if scale is not None and scale.m22() else 1.0
        grow = self.pen().widthF() + 2
        return rect.adjusted(-grow / sx, -grow / sy, grow / sx, grow / sy)

    @guarded
    def paint(self, painter: QPainter, option, widget=None) -> None:
        if self.rect().isEmpty():
            return
        box = self.outside(painter)
        if painter.hasClipping():  # the plot's edge: the side there moves in, on the row's last pixels
            half = self.pen().widthF() / 2
            box &= painter.transform().mapRect(painter.clipBoundingRect()).adjusted(half, half, -half, -half)
        painter.save()
        painter.resetTransform()
        painter.setPen(self.pen())
        painter.setBrush(Qt.NoBrush)
        painter.drawRect(box)
        painter.restore()


def tick_every(n: int, width_px: int, label_px: int) -> int:
    """Label every k-th of ``n`` bars or cells so that labels ``label_px`` wide fit in ``width_px``."""
    return max(1, int(np.ceil(n * label_px / max(1, width_px))))


def room_for_row_names(plot: pg.PlotItem, theme: th.Theme) -> None:
    """Half a line of the tick font above the map: the first row's name stands on the row's middle,
    and where a row is a few pixels tall (a long context) half the name stood above the map, cut by
    the view's edge. Call it after ``th.style_plot``, which sets the plot's margins."""
    left, top, right, bottom = plot.layout.getContentsMargins()
    plot.layout.setContentsMargins(left, max(top, theme.text_px(-1) // 2 + 1), right, bottom)


def heatmap_view() -> tuple[pg.PlotWidget, pg.ImageItem]:
    """A fixed plot (zoom and pan allowed: long contexts) holding one image; ``image.outline`` is a
    rectangle to frame rows with (empty at first)."""
    view = th.plot_widget()
    plot = view.getPlotItem()
    th.fix_plot(plot)
    plot.setMouseEnabled(x=True, y=True)
    plot.invertY(True)
    image = pg.ImageItem()
    image.setColorMap(pg.colormap.get(DIVERGING))
    plot.addItem(image)
    outline = Frame()
    outline.setPen(pg.mkPen(th.VERMILION, width=2))
    plot.addItem(outline)
    image.outline = outline
    return view, image


def show_heat(image: pg.ImageItem, values: np.ndarray) -> None:
    """Draw ``values`` [rows, columns], the colour scale symmetric around 0."""
    values = np.asarray(values, dtype=np.float32)
    scale = (float(np.max(np.abs(values))) if values.size else 0.0) or 1.0
    image.setImage(values, autoLevels=False, levels=(-scale, scale))
    image.setRect(0, 0, values.shape[1], values.shape[0])
