"""Colours, fonts and colour maps: the normal look and projector mode.

Colours come from the Okabe-Ito palette and the maps are viridis / cividis, all readable with the
common kinds of colour blindness. The palette below (PROMPT, GENERATED, CHOSEN, SELECTED, KEYS,
VALUES, PREFILL, DECODE…) is the one place that says which colour means what.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pyqtgraph as pg
from PySide6.QtGui import QColor, QFont, QFontMetrics
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication, QToolTip

# Okabe-Ito
BLUE = "#0072B2"
ORANGE = "#E69F00"
VERMILION = "#D55E00"
SKY = "#56B4E9"
GREEN = "#009E73"
GREY = "#B8B8B8"
DARK = "#202020"

PURPLE = "#CC79A7"
YELLOW = "#F0E442"

# The palette: one colour means one thing in every panel. Okabe-Ito colours, told apart with the
# common kinds of colour blindness and on a washed-out projector (tests/app/test_palette.py checks
# the pairs that share a view after simulating both).
PROMPT = BLUE  # prompt tokens (points; chips in PROMPT_CHIP, its pale tint)
GENERATED = ORANGE  # generated tokens (points; chips in GENERATED_CHIP)
CHOSEN = ORANGE  # the token chosen at this step: it becomes the newest generated token
SELECTED = "#000000"  # the selected position: its outline, its path through the layers, its label
KEYS = GREEN  # cached keys
VALUES = YELLOW  # cached values (bars drawn with a dark outline: yellow on white needs one)
PREFILL = PURPLE  # the prefill step
DECODE = SKY  # decode steps
CANDIDATE = "#4F6D8A"  # a candidate that can be drawn (not chosen): a quiet slate
REMOVED = "#D0D0D0"  # a candidate top-k / top-p removed
NEUTRAL = "#111111"  # lines that mean no role (the cache's growth, a mean): near the text colour
ERROR = "#B3261E"  # error messages (text)

PROMPT_CHIP = "#D6EAF8"  # prompt tokens: pale blue
GENERATED_CHIP = "#FCE5C0"  # generated tokens: pale orange
SPECIAL_CHIP = "#EBD5E3"  # special tokens (a chat template's turn markers, end of text): pale purple, outlined PURPLE
MASKED = "#C8C8C8"  # masked (future) attention cells: hatched grey
BRANCH_A = VERMILION  # the Branches view's comparison: branch A (that view draws no prompt points)
BRANCH_B = BLUE  # and branch B


@dataclass(frozen=True)
class Theme:
    """How everything is drawn. ``font_pt`` is the base font size in points (others are relative to it);
    ``min_px`` the smallest text allowed anywhere, in pixels (the height of the font at a device pixel
    ratio of 1: 18 px is readable from the back of a classroom on a 1280 x 720 projector); ``line``
    is a pen width in pixels; ``colormap`` names the pyqtgraph colour map of weights."""

    name: str
    font_pt: int
    colormap: str
    line: float
    min_px: int
    text: str = DARK

    def px(self, delta: int = 0) -> int:
        """The pixel size of ``font(delta)``: ``font_pt + delta`` points at 96 dpi, never under ``min_px``."""
        return max(self.min_px, round((self.font_pt + delta) * 96 / 72))

    def font(self, delta: int = 0, bold: bool = False) -> QFont:
        """The font ``delta`` points from the base size, never smaller than ``min_px`` (the one rule
        of text size: every widget, axis, legend and dialog takes its font from here)."""
        f = QFont()
        f.setPixelSize(self.px(delta))
        f.setBold(bold)
        return f

    def css_size(self, delta: int = 0) -> str:
        """``font(delta)``'s size for pyqtgraph's labels and titles, which take a CSS size."""
        return f"{self.px(delta)}px"

    def text_px(self, delta: int = 0) -> int:
        """The height of a line of text in ``font(delta)``, in pixels: the unit of the room a plot needs."""
        return QFontMetrics(self.font(delta)).height()

    def cmap(self) -> pg.ColorMap:
        return pg.colormap.get(self.colormap)

    def pen(self, color: str, width: float | None = None, **kw):
        return pg.mkPen(color, width=width or self.line, **kw)


NORMAL = Theme("normal", font_pt=10, colormap="viridis", line=1.5, min_px=11)
PROJECTOR = Theme("projector", font_pt=15, colormap="cividis", line=3.0, min_px=18, text="#000000")
LARGE = Theme("large", font_pt=12, colormap="viridis", line=2.0, min_px=14)
PROJECTOR_LARGE = Theme("projector, larger", font_pt=18, colormap="cividis", line=3.0, min_px=22, text="#000000")

TEXT_SIZES = (NORMAL, LARGE, PROJECTOR, PROJECTOR_LARGE)
"""The steps of text zoom (Ctrl+= and Ctrl+-), smallest first: projector mode is the third."""


def zoomed(theme: Theme, steps: int) -> Theme:
    """The text size ``steps`` steps larger (negative: smaller) than ``theme``, at the ends the end."""
    here = TEXT_SIZES.index(theme) if theme in TEXT_SIZES else 0
    return TEXT_SIZES[max(0, min(len(TEXT_SIZES) - 1, here + steps))]


def is_projector(theme: Theme) -> bool:
    """Projector mode or larger: its colour map, its thick lines and its 18 px floor at the least."""
    return theme.min_px >= PROJECTOR.min_px


def configure_pyqtgraph() -> None:
    """Global pyqtgraph options: row-major images (rows = queries), light background, antialiasing."""
    pg.setConfigOptions(imageAxisOrder="row-major", background="w", foreground=DARK, antialias=True)


def apply_tooltip_font(theme: Theme) -> None:
    """Make ``theme.font()`` the tooltips' font (they are windows of their own, drawn by Qt with
    one font for the whole application)."""
    QToolTip.setFont(theme.font())


def plot_widget(**kwargs) -> pg.PlotWidget:
    """A pyqtgraph PlotWidget built without pyqtgraph's context menus: no plot here offers them,
    and building them took a sixth of the time to build a window."""
    return pg.PlotWidget(enableMenu=False, **kwargs)


def fix_plot(plot: pg.PlotItem) -> pg.PlotItem:
    """Make ``plot`` a fixed picture: no pan, zoom, context menu or auto-range button."""
    plot.setMenuEnabled(False)
    plot.hideButtons()
    plot.setMouseEnabled(False, False)
    return plot


def style_plot(plot: pg.PlotItem, theme: Theme, *, left: str | None = None, bottom: str | None = None) -> None:
    """Fonts and axis labels of one plot for ``theme``."""
    for name in ("left", "bottom", "right", "top"):
        axis = plot.getAxis(name)
        axis.setTickFont(theme.font(-1))
        axis.setPen(pg.mkPen(theme.text))
        axis.setTextPen(pg.mkPen(theme.text))
        # no "(x0.001)" after a label; each plot scales its own data. It also saves re-rendering
        # every label's HTML whenever an axis range changes (about 1 ms a step in all).
        axis.enableAutoSIPrefix(False)
        _no_si_scale(axis)
    if plot.legend is not None:  # legends at the mode's size too
        plot.legend.setLabelTextSize(theme.css_size(-1))
        for _sample, label in plot.legend.items:
            label.setText(label.text, size=theme.css_size(-1))
    style = {"color": theme.text, "font-size": theme.css_size()}
    if left is not None:
        plot.setLabel("left", left, **style)
    if bottom is not None:
        plot.setLabel("bottom", bottom, **style)
        # pyqtgraph counts 80 % of the title's height: its last pixels were cut off
        axis = plot.getAxis("bottom")  # ticks, their spacing, then the title's box (with its margins)
        axis.setHeight(theme.text_px(-1) + int(axis.label.boundingRect().height()) + 4)
        # pyqtgraph hangs the title's box 5 px below the axis: keep those pixels inside the view
        plot.layout.setContentsMargins(1, 1, 1, 7)
    for name in ("left", "bottom"):  # a new title: pyqtgraph worked its scale out again
        _no_si_scale(plot.getAxis(name))
    for name, title in (("left", left), ("bottom", bottom)):  # pyqtgraph places a title only when its axis
        if title is not None:  # is resized: a longer one kept the shorter one's start and ran past the plot
            plot.getAxis(name).resizeEvent()


def _no_si_scale(axis: pg.AxisItem) -> None:
    """Tick values as the data has them. pyqtgraph 0.14's ``enableAutoSIPrefix(False)`` (and a new
    title) still works out an SI scale for an axis under 1 and writes its ticks times 1000 ("200"
    for 0.2), with no "(x0.001)" to say so: reset it, and centre the title again."""
    if axis.autoSIPrefixScale != 1.0 or axis.labelUnitPrefix:
        axis.autoSIPrefixScale = 1.0
        axis.labelUnitPrefix = ""
        axis._updateLabel()


def fix_axis_width(plot: pg.PlotItem, theme: Theme, chars: int, name: str = "left") -> None:
    """Give a vertical axis room for ``chars`` characters of tick text, fixed. An axis that sizes
    itself to its labels resizes while it paints when they change (new candidates, a longer
    context): the layout moves and the plot paints again, up to five times a step."""
    sample = QFontMetrics(theme.font(-1)).horizontalAdvance("x" * chars) if chars else 0
    plot.getAxis(name).setWidth(sample + 12)  # + tick marks and spacing


def need_area(view: pg.GraphicsView, plot: pg.PlotItem, width: int, height: int, *, beside: int = 0) -> tuple[int, int]:
    """Give ``plot``'s drawing area (its ViewBox) at least ``width`` x ``height`` pixels: set the
    minimum size of ``view`` to that plus its axes, title and ``beside`` (a colour bar). Returns the
    need, which the panel's ``plot_needs()`` reports (tests/app/test_screens.py checks it)."""
    # an axis title longer than its axis was cut: the area is at least as long as its axes' titles
    for name, along in (("bottom", 0), ("left", 1)):
        axis = plot.getAxis(name)
        if axis.isVisible() and axis.label.isVisible() and axis.labelText:
            need = int(axis.label.boundingRect().width()) + 6
            width, height = (max(width, need), height) if along == 0 else (width, max(height, need))
    if plot.titleLabel.isVisible() and plot.titleLabel.text:  # a title wider than the plot was cut
        width = max(width, int(plot.titleLabel.item.boundingRect().width()) + 6)
    w = width + beside + 24  # + the layout's margins and spacing
    # + the plot's margins, and a GraphicsLayoutWidget's own around it (9 px each side: the attention
    # map's drawing area came out 7 px short of its need on a projector)
    margins = [plot.layout.getContentsMargins()] + ([view.ci.layout.getContentsMargins()] if hasattr(view, "ci") else [])
    h = height + max(12, int(sum(top + bottom for _left, top, _right, bottom in margins)))
    for name in ("left", "right"):
        axis = plot.getAxis(name)
        if axis.isVisible():
            w += max(axis.minimumWidth(), axis.preferredWidth())
    for name in ("top", "bottom"):
        axis = plot.getAxis(name)
        if axis.isVisible():
            h += max(axis.minimumHeight(), axis.preferredHeight())
    if plot.titleLabel.isVisible():
        h += int(plot.titleLabel.preferredHeight())
    view.setMinimumSize(int(w), int(h))
    return width, height


NICE = (1.0, 1.2, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0)


def nice_ceil(x: float) -> float:
    """The smallest 1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6 or 8 x 10^k that is >= ``x`` (> 0).

    An axis that ends there changes (and repaints its labels) only every 20-25 % of growth, not on
    every step.
    """
    if x <= 0:
        return 1.0
    scale = 10.0 ** math.floor(math.log10(x))
    return next(m * scale for m in NICE if m * scale >= x * (1 - 1e-9))


def qcolor(hex_color: str, alpha: int = 255) -> QColor:
    """``hex_color`` with ``alpha`` (0 transparent to 255 opaque)."""
    c = QColor(hex_color)
    c.setAlpha(alpha)
    return c


def show_busy(busy: bool) -> None:
    """The busy cursor over the whole application while the engine works (``busy``), else none."""
    if busy and not QApplication.overrideCursor():
        QApplication.setOverrideCursor(Qt.BusyCursor)
    while not busy and QApplication.overrideCursor():
        QApplication.restoreOverrideCursor()
