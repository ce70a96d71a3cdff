"""When Inside's parts are pages, and which parts share a page: plain arithmetic on pixel heights,
tested without a QApplication (``app.panels.inside_pages`` measures the parts and shows the pages)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

SCREENS = 2  # the long page becomes pages when it would scroll more than this many screens


def needs_pages(projector: bool, content_px: int, screen_px: int) -> bool:
    """Pages, rather than one long page: in projector mode, or when ``content_px`` of parts would
    scroll more than SCREENS screens of ``screen_px``."""
    return projector or (screen_px > 0 and content_px - screen_px > SCREENS * screen_px)


def group_pages(heights: Sequence[int], room: Callable[[int, int], int], spacing: int = 0) -> list[list[int]]:
    """The parts (their indices in ``heights``, in order) on each page: a page takes the next parts
    while they fit one under the other, ``spacing`` px apart, in ``room(first, last)`` px (the room a
    page holding parts first to last leaves them: a longer title above takes more lines). A part
    taller than that room is a page of its own (it scrolls there)."""
    pages: list[list[int]] = []
    for i, height in enumerate(heights):
        page = pages[-1] if pages else []
        if page and sum(heights[j] + spacing for j in page) + height <= room(page[0], i):
            page.append(i)
        else:
            pages.append([i])
    return pages
