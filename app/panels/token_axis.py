"""An axis that names the cells of a token-by-token map (the attention matrix) by their tokens.

Each cell (one position) gets the label "piece position" when the labels fit one per cell; where
they do not, a subset that never collides: the cells that must be named (the newest query, the
selected one, the strongest key), then every n-th (n = 1, 2, 5, 10, 20, ...) between them. A piece
too long for the room the axis has is left out, never cut: the label is its position alone. The bottom axis writes its labels turned 90°,
reading upwards and ending at the map, so one label needs only a line's height of width, and its
title may go beside them, in the corner under the rows' labels; given only a line's height (a small
map among the other panels), it writes them level, fewer of them, its title under them.
Rows too close for a label each can be named from both sides: every second row on the left, the
others on the right.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import pyqtgraph as pg
from PySide6.QtCore import QPointF, QRectF, Qt
from PySide6.QtGui import QFont, QFontMetricsF

from app.window.guard import guarded

TICK = 3  # px: a tick mark, outside the map
GAP = 2  # px between a tick mark and its label


def nice_step(step: float) -> int:
    """The smallest of 1, 2, 5, 10, 20, 50, ... that is >= ``step``."""
    if step <= 1:
        return 1
    power = 10 ** math.floor(math.log10(step))
    return next(n * power for n in (1, 2, 5, 10) if n * power >= step)


def choose_cells(first: int, last: int, pitch: float, size: float, always: Sequence[int] = (), *,
                 lanes: int = 1, lane: int = 0, anchor: int = 0) -> list[int]:
    """The cells ``first``..``last`` (inclusive) to label, sorted, when cells are ``pitch`` px apart
    and a label takes ``size`` px along the axis: every cell when labels fit one per cell; else the
    cells in ``always`` (first come, first served), then every n-th cell, each only where its label
    keeps ``size`` px from every label already chosen, so no two labels overlap.

    With two ``lanes`` (labels on both sides of the map), ``lane`` 0 takes every cell and lane 1
    none while they fit one per cell; when they fit one per two cells, lane 0 takes every second
    cell counted from ``anchor`` and lane 1 the others, so that every cell is named; else lane 0
    takes the subset above and lane 1 none."""
    if last < first:
        return []
    if pitch >= size:
        return list(range(first, last + 1)) if lane == 0 else []
    if lanes == 2 and 2 * pitch >= size:
        return [c for c in range(first, last + 1) if (anchor - c) % 2 == lane]
    if lane:
        return []
    step = nice_step(size / max(pitch, 1e-9))
    chosen: list[int] = []
    for cell in [*always, *range(math.ceil(first / step) * step, last + 1, step)]:
        if first <= cell <= last and all(abs(cell - c) * pitch >= size for c in chosen):
            chosen.append(cell)
    return sorted(chosen)


class TokenAxis(pg.AxisItem):
    """A left, right or bottom axis of a map with one cell per position, labelled by token (see the module).

    ``set_cells`` gives the pieces, the cells that must be named and the one marked ▶; ``placed``
    holds what the last drawing labelled: (cell, text, rectangle in this item's coordinates)."""

    def __init__(self, orientation: str):
        self.extent = 0  # bottom: how long a label may be (its height on screen), set by set_extent
        self.title_beside = False  # bottom: the title may go left of turned labels (its owner knows the room there)
        super().__init__(orientation, maxTickLength=TICK)  # it lays the title out: the two above first
        self.setStyle(hideOverlappingLabels=True, tickLength=TICK)
        self.pieces: Sequence[str] = ()
        self.always: tuple[int, ...] = ()
        self.marked: int | None = None
        self.placed: list[tuple[int, str, QRectF]] = []
        self.lanes, self.lane = 1, 0  # rows named from both sides: 2 lanes, this axis's one (choose_cells)

    def set_cells(self, pieces: Sequence[str], always: Sequence[int] = (), marked: int | None = None) -> None:
        """Label cell i by ``pieces[i]``; ``always``: cells named whatever the room, in order of
        priority; ``marked``: a cell whose label starts with ▶."""
        self.pieces, self.always, self.marked = pieces, tuple(always), marked
        self.picture = None
        self.update()

    def set_extent(self, extent: int) -> None:
        """Bottom axis: give its turned labels ``extent`` px (longer ones are cut), plus the tick
        marks and the axis title under them, unless it goes beside them (``title_aside``)."""
        self.extent = max(0, int(extent))
        title = 0 if self.title_aside() else int(self.label.boundingRect().height()) - 1
        self.setHeight(TICK + GAP + self.extent + title)
        self.resizeEvent()  # the title's place, whether the height changed or not

    def title_aside(self) -> bool:
        """Whether this bottom axis writes its title left of its turned labels, in the corner under
        the rows' labels (``title_beside`` and turned labels), rather than under them."""
        return self.title_beside and self.turned()

    @guarded
    def resizeEvent(self, ev=None) -> None:
        super().resizeEvent(ev)
        if self.label is not None and self.title_aside():
            # right-aligned to the map's left edge, half a line down: the last row's label ends above it
            line = QFontMetricsF(self.style["tickFont"] or QFont()).height()
            self.label.setPos(-self.label.boundingRect().width() - GAP, TICK + line / 2)

    def turned(self) -> bool:
        """Whether this bottom axis writes its labels turned 90°: given more than a line's height
        (else level, in one line)."""
        line = QFontMetricsF(self.style["tickFont"] or QFont()).height()
        return self.orientation == "bottom" and self.extent > line + 1

    def layout_labels(self) -> list[tuple[int, str, QRectF]]:
        """Place the labels for the current size and range, as drawing does, and return ``placed``."""
        self.generateDrawSpecs(None)
        return self.placed

    def text_room(self) -> float:
        """How long a label may be, in pixels."""
        if self.orientation == "bottom":
            return self.extent if self.turned() else QFontMetricsF(self.style["tickFont"] or QFont()).horizontalAdvance("x" * 8 + " 99")
        title = self.label.boundingRect().height() if self.label.isVisible() else 0
        return max(0.0, self.width() - TICK - GAP - title)

    def label_text(self, cell: int, metrics: QFontMetricsF, room: float) -> str:
        """"▶ piece 12" ("◀ piece 12" on the right); a piece too long for ``room`` px is left out, never
        cut: the label is then its position alone ("▶ 12"), the piece in the chips and the caption."""
        prefix = ("◀ " if self.orientation == "right" else "▶ ") if cell == self.marked else ""
        suffix = f" {cell}"
        piece = self.pieces[cell] if cell < len(self.pieces) else ""
        if not piece or metrics.horizontalAdvance(prefix + piece + suffix) > room:
            return prefix + str(cell)
        return prefix + piece + suffix

    def _allowed(self) -> QRectF:
        """Where labels may go, in this item's coordinates: a row axis's box reaching a line past
        either end (an end row's label is centred on it, and the corners under the map are empty),
        the key axis's own box (its end labels would meet the rows' there), within the view."""
        box = self.mapRectFromParent(self.geometry()) if self.orientation == "bottom" else self.boundingRect()
        views = self.scene().views() if self.scene() is not None else []
        if views:
            viewport = views[0].viewport()
            box &= self.mapRectFromScene(QRectF(0, 0, viewport.width(), viewport.height()))
        return box

    @guarded(fallback=lambda self: pg.AxisItem.boundingRect(self))
    def boundingRect(self) -> QRectF:
        margin = QFontMetricsF(self.style["tickFont"] or QFont()).height()
        box = self.mapRectFromParent(self.geometry())
        if self.orientation == "bottom":
            return box.adjusted(-margin, 0, margin, 0)
        return box.adjusted(0, -margin, 0, margin)

    def _cell_centre(self, view, cell: int) -> float:
        """The centre of ``cell`` along this axis, in this item's coordinates."""
        point = QPointF(cell + 0.5, 0) if self.orientation == "bottom" else QPointF(0, cell + 0.5)
        local = self.mapFromScene(view.mapViewToScene(point))
        return local.x() if self.orientation == "bottom" else local.y()

    @guarded  # called from paint: nothing drawn rather than a crash
    def generateDrawSpecs(self, p):
        bounds = self.mapRectFromParent(self.geometry())
        view = self.linkedView()
        pen = self.pen()
        if self.orientation == "bottom":
            axis = (pen, bounds.topLeft(), bounds.topRight())
        elif self.orientation == "right":
            axis = (pen, bounds.topLeft(), bounds.bottomLeft())
        else:
            axis = (pen, bounds.topRight(), bounds.bottomRight())
        self.placed = []
        count = len(self.pieces)
        if view is None or count == 0 or not self.isVisible() or view.width() <= 0 or view.height() <= 0:
            return axis, [], []
        font = self.style["tickFont"] or QFont()
        metrics = QFontMetricsF(font)
        line = metrics.height()
        (x0, x1), (y0, y1) = view.viewRange()
        lo, hi = (x0, x1) if self.orientation == "bottom" else (y0, y1)
        first, last = max(0, math.floor(lo)), min(count, math.ceil(hi)) - 1
        pitch = abs(self._cell_centre(view, 1) - self._cell_centre(view, 0))
        room = self.text_room()
        allowed = self._allowed()
        turned = self.turned()
        size = line if turned or self.orientation != "bottom" else room + metrics.horizontalAdvance("  ")
        ticks, texts = [], []
        cells = choose_cells(first, last, pitch, size, self.always, lanes=self.lanes, lane=self.lane, anchor=count - 1)
        for cell in sorted(cells, key=lambda c: c not in self.always):  # the must-name cells first
            at = self._cell_centre(view, cell)
            text = self.label_text(cell, metrics, room)
            width = min(metrics.horizontalAdvance(text), room)
            if self.orientation == "bottom":
                tick = (pen, QPointF(at, bounds.top()), QPointF(at, bounds.top() + TICK))
                if turned:
                    rect = QRectF(at - line / 2, bounds.top() + TICK + GAP, line, width)
                else:
                    rect = QRectF(at - width / 2, bounds.top() + TICK + GAP, width, line)
                rect.moveLeft(min(max(rect.left(), allowed.left()), allowed.right() - rect.width()))
            elif self.orientation == "right":
                tick = (pen, QPointF(bounds.left(), at), QPointF(bounds.left() + TICK, at))
                rect = QRectF(bounds.left() + TICK + GAP, at - line / 2, width, line)
                rect.moveTop(min(max(rect.top(), allowed.top()), allowed.bottom() - rect.height()))
            else:
                tick = (pen, QPointF(bounds.right() - TICK, at), QPointF(bounds.right(), at))
                rect = QRectF(bounds.right() - TICK - GAP - width, at - line / 2, width, line)
                rect.moveTop(min(max(rect.top(), allowed.top()), allowed.bottom() - rect.height()))
            # a label moved in from an end may now touch its neighbour: the first placed keeps its place
            if all(not rect.intersects(other) for _cell, _text, other in self.placed):
                ticks.append(tick)
                texts.append((rect, text, turned))
                self.placed.append((cell, text, rect))
        self.placed.sort(key=lambda placed: placed[0])
        return axis, ticks, texts

    @guarded
    def drawPicture(self, p, axisSpec, tickSpecs, textSpecs):
        p.setRenderHint(p.RenderHint.Antialiasing, False)
        p.setRenderHint(p.RenderHint.TextAntialiasing, True)
        pen, p1, p2 = axisSpec
        p.setPen(pen)
        p.drawLine(p1, p2)
        for pen, p1, p2 in tickSpecs:
            p.setPen(pen)
            p.drawLine(p1, p2)
        if self.style["tickFont"] is not None:
            p.setFont(self.style["tickFont"])
        p.setPen(self.textPen())
        for rect, text, turned in textSpecs:
            if turned:  # turned 90°: reads upwards and ends at the map
                p.save()
                p.translate(rect.center().x(), rect.top())
                p.rotate(-90)
                p.drawText(QRectF(-rect.height(), -rect.width() / 2, rect.height(), rect.width()),
                           int(Qt.AlignRight | Qt.AlignVCenter), text)
                p.restore()
            else:
                align = {"bottom": Qt.AlignHCenter, "right": Qt.AlignLeft}.get(self.orientation, Qt.AlignRight)
                p.drawText(rect, int(align | Qt.AlignVCenter), text)
