"""Pictures of the window or of one panel: PNG at twice the size on screen, SVG where it holds a plot.

``picture`` renders the widget into an image whose device pixel ratio is ``SCALE``: Qt lays text,
lines and plots out at the logical size and draws them with twice the pixels, so text stays sharp
(a 1x grab scaled up would be blurred). ``svg`` renders it through ``QSvgGenerator``: plots become
paths and text (a heat map stays an embedded image). pyqtgraph's own ``SVGExporter`` fails on the
SVG Qt 6.10 writes (pyqtgraph issue #3485), so it is not used.

While either renders, the plots' items are drawn directly instead of from their cached pixmaps
(the window caches axes as pixmaps, which would come out at 1x, and as images in an SVG).
"""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path

from PySide6.QtCore import QBuffer, QByteArray, QIODevice, QPoint, QRectF, QSize
from PySide6.QtGui import QImage, QPainter
from PySide6.QtSvg import QSvgGenerator
from PySide6.QtWidgets import QApplication, QGraphicsItem, QGraphicsView, QWidget

from app.logic.tables import replacing

SCALE = 2  # pixels per logical pixel in an exported PNG: sharp on slides and on a projector
PNG_QUALITY = 80  # Qt's PNG writer turns it into zlib level (100 - q) * 9 // 91 = 1: the window's
# PNG in about 90 ms instead of 150 ms at the default level, and no larger (a window is mostly flat colour)
SCREEN_DPI = 96  # a PNG says it is SCALE x this, so slide software places it at its size on screen


def has_plot(widget: QWidget) -> bool:
    """Whether ``widget`` shows a plot (a pyqtgraph view), which an SVG can keep as drawing."""
    return bool(widget.findChildren(QGraphicsView))


@contextmanager
def uncached(widget: QWidget):
    """Draw every item of the plots in ``widget`` directly while the block runs (cache modes restored)."""
    views = widget.findChildren(QGraphicsView)
    if isinstance(widget, QGraphicsView):
        views.append(widget)
    saved = []
    for view in views:
        saved.append((view, view.cacheMode()))
        view.setCacheMode(QGraphicsView.CacheModeFlag.CacheNone)
        for item in view.scene().items():
            if item.cacheMode() != QGraphicsItem.CacheMode.NoCache:
                saved.append((item, item.cacheMode()))
                item.setCacheMode(QGraphicsItem.CacheMode.NoCache)
    try:
        yield
    finally:
        for thing, mode in saved:
            thing.setCacheMode(mode)


def require_room(widget: QWidget) -> None:
    """ValueError unless ``widget`` has the room it is laid out with: not empty, and a panel at least
    half its ``minimumSizeHint`` each way (one caught in the middle of a layout change can be 0 x 0
    or 4 x 1,606)."""
    size, least = widget.size(), widget.minimumSizeHint()
    if widget.isWindow():
        least = QSize(1, 1)
    # half its minimum: a restyle under way (new fonts, new minimum sizes, the layout one turn
    # behind) leaves a panel a little short of its new minimum, and that picture is still right
    if size.width() < max(least.width() // 2, 1) or size.height() < max(least.height() // 2, 1):
        raise ValueError(
            f"it is not laid out on screen ({size.width():,} × {size.height():,} pixels, "
            f"far less than the {least.width():,} × {least.height():,} it needs): nothing saved"
        )


def picture(widget: QWidget, scale: int = SCALE) -> QImage:
    """``widget`` as it looks now, at ``scale`` pixels per logical pixel, on its window colour.
    ValueError if it has no room on screen (``require_room``)."""
    require_room(widget)
    size = widget.size()
    image = QImage(size * scale, QImage.Format.Format_ARGB32_Premultiplied)
    image.setDevicePixelRatio(scale)
    dots_per_metre = round(SCREEN_DPI * scale / 0.0254)
    image.setDotsPerMeterX(dots_per_metre)
    image.setDotsPerMeterY(dots_per_metre)
    image.fill(widget.palette().window().color())
    with uncached(widget):
        widget.render(image)
    return image


def png_bytes(image: QImage) -> bytes:
    """``image`` as PNG file contents. Any thread (QImage is reentrant; Qt releases the GIL meanwhile)."""
    data = QByteArray()
    buffer = QBuffer(data)
    buffer.open(QIODevice.OpenModeFlag.WriteOnly)
    if not image.save(buffer, "PNG", PNG_QUALITY):
        raise OSError("Qt could not encode the picture as PNG.")
    buffer.close()
    return bytes(data)


def svg_bytes(widget: QWidget, title: str = "") -> bytes:
    """``widget`` as an SVG drawing of its logical size (ValueError if it has no room: ``require_room``)."""
    require_room(widget)
    data = QByteArray()
    buffer = QBuffer(data)
    buffer.open(QIODevice.OpenModeFlag.WriteOnly)
    generator = QSvgGenerator()
    generator.setOutputDevice(buffer)
    size = widget.size()
    generator.setSize(QSize(size))
    generator.setViewBox(QRectF(0, 0, size.width(), size.height()))
    generator.setResolution(SCREEN_DPI)
    generator.setTitle(title or "nexttoken")
    generator.setDescription("Exported from nexttoken")
    painter = QPainter(generator)
    try:
        painter.fillRect(QRectF(0, 0, size.width(), size.height()), widget.palette().window())
        with uncached(widget):
            widget.render(painter, QPoint())
    finally:
        painter.end()
    buffer.close()
    return bytes(data)


def write_png(image: QImage, path) -> Path:
    """Write ``image`` to ``path`` as PNG, replaced whole or not at all; OSError if it cannot be. Any thread."""
    path = Path(path)
    data = png_bytes(image)
    with replacing(path) as f:
        f.write(data)
    return path


def save_svg(widget: QWidget, path, title: str = "") -> Path:
    """Write ``widget`` to ``path`` as an SVG drawing, replaced whole or not at all. OSError if it
    cannot be written; ValueError for a widget without a plot, or without room (``require_room``)."""
    path = Path(path)
    if not has_plot(widget):
        raise ValueError("it holds no plot to keep as a drawing: save it as PNG")
    data = svg_bytes(widget, title)
    with replacing(path) as f:
        f.write(data)
    return path


def copy(widget: QWidget) -> QImage:
    """Put a ``SCALE``x picture of ``widget`` on the clipboard; return it."""
    image = picture(widget)
    QApplication.clipboard().setImage(image)
    return image
