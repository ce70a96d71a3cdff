"""Heat maps of signed numbers, rows by dimensions (keys, values, a query), for the Inside and the
KV cache views: one colour-blind-safe diverging map (blue negative, white 0, yellow positive) whose
scale is symmetric around 0, and an outline that can frame some rows."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtWidgets import QGraphicsRectItem

from .. import theme as th

DIVERGING = "CET-CBD1"


def heatmap_view() -> tuple[pg.PlotWidget, pg.ImageItem]:
    """A fixed plot (zoom and pan allowed: long contexts) holding one image; ``image.outline`` is a
    rectangle to frame rows with (empty at first)."""
    view = pg.PlotWidget()
    plot = view.getPlotItem()
    th.fix_plot(plot)
    plot.setMouseEnabled(x=True, y=True)
    plot.invertY(True)
    image = pg.ImageItem()
    image.setColorMap(pg.colormap.get(DIVERGING))
    plot.addItem(image)
    outline = QGraphicsRectItem()
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
