"""Where each box of the flow view goes: plain geometry, no Qt, so that it can be tested at any size.

The flow reads in columns, left to right, each top to bottom, in the order the model computes:

    tokens      | blocks 0..L-1   | KV cache  | final layer norm | sampling stages
    embedding   | (one row each,  | (one row  | LM head          | the chosen token
                |  the selected   |  per      | logits           | appended to the text
                |  one expanded)  |  layer)   |                  |

A box is a title line and some content lines; each box has a least number of content lines it
needs and a number it can use. With many layers the blocks collapse into thin rows (bars only,
no text once a row is lower than a line) and the selected block stays expanded, so every stage
stays on screen without scrolling. Rects are (x, y, width, height) in pixels.
"""

from __future__ import annotations

from dataclasses import dataclass, field

Rect = tuple[int, int, int, int]

# column: (its share of the width, its boxes top to bottom); "blocks" and "kv" fill their columns
COLUMNS: tuple[tuple[float, tuple[str, ...]], ...] = (
    (0.17, ("tokens", "embedding")),
    (0.28, ("blocks",)),
    (0.11, ("kv",)),
    (0.20, ("ln_final", "lm_head", "logits")),
    (0.24, ("sampling", "chosen", "appended")),
)
# content lines (without the title): (the least a box needs, the most it uses)
LINES = {
    "tokens": (1, 3), "embedding": (2, 4), "ln_final": (1, 3), "lm_head": (1, 2), "logits": (2, 6),
    "sampling": (3, 6), "chosen": (2, 4), "appended": (1, 2),
}  # the sampling box's first line holds its temperature and top-k controls (app.panels.flow_sampling_controls)
EXPANDED_LINES = 5  # the selected block's content: its norms, its heads, its head's attention (two lines), its MLP
MATHS_LINES = (2, 6)  # under them, the head's maths (app.panels.flow_attention_strip): the least lines it adds, the most
# (with the expanded block's last line, which it takes too: a line of column heads and a row per key)
STAGES = ("tokens", "embedding", "blocks", "kv", "ln_final", "lm_head", "logits", "sampling", "chosen", "appended")


@dataclass(frozen=True)
class FlowLayout:
    """Every rect of the flow at one size. ``boxes``: stage -> rect; ``block_rows`` and ``kv_rows``:
    one rect per layer (same heights, side by side); ``expanded``: the selected layer, whose rows are
    tall; ``row_text``: whether a collapsed row has a line's height (else it shows bars only);
    ``parts``: the expanded block's "heads", "attention" and "mlp" rects (and "maths", the head's
maths table, when there is room: a box of its own under the blocks and their KV cache, as wide as
both, which end above it); ``lines``: content lines each box
    has room for; ``caption``: the tour's sentence band, or None; ``line`` and ``pad``: the text
    line height and a box's inner margin the rects were made for."""

    width: int
    height: int
    line: int
    pad: int
    boxes: dict[str, Rect]
    block_rows: list[Rect]
    kv_rows: list[Rect]
    expanded: int
    row_text: bool
    parts: dict[str, Rect]
    lines: dict[str, int]
    caption: Rect | None
    legend: Rect | None = None  # under the blocks: what a collapsed block's bars mean (when there is room)
    arrows: list[list[tuple[int, int]]] = field(default_factory=list)  # polylines, each ending at a box

    def box_at(self, x: int, y: int) -> tuple[str, int] | None:
        """(stage, layer) of the box at (x, y); layer is -1 outside the blocks and the KV cache."""
        for name, rows in (("blocks", self.block_rows), ("kv", self.kv_rows)):
            for layer, r in enumerate(rows):
                if _inside(r, x, y):
                    return name, layer
        tables = {"maths": self.parts["maths"]} if "maths" in self.parts else {}  # the head's maths: a box of its own
        for name, r in (self.boxes | tables).items():
            if _inside(r, x, y):
                return name, -1
        return None

    def fits_all(self) -> bool:
        """True if every box has all the lines it can use."""
        return all(self.lines[n] >= LINES[n][1] for n in LINES)

    def box_height(self, content_lines: int) -> int:
        return (1 + content_lines) * self.line + 2 * self.pad


def _inside(r: Rect, x: int, y: int) -> bool:
    return r[0] <= x < r[0] + r[2] and r[1] <= y < r[1] + r[3]


def layout(width: int, height: int, n_layer: int, line: int, selected: int = 0, caption_lines: int = 0) -> FlowLayout:
    """The flow's rects in a ``width`` x ``height`` area for a model of ``n_layer`` blocks, with text
    lines ``line`` pixels high and block ``selected`` expanded; ``caption_lines`` > 0 keeps a band at
    the bottom for the tour's sentence."""
    pad = max(2, line // 5)
    gap = max(14, line)  # between boxes: room for an arrow
    selected = max(0, min(selected, n_layer - 1))
    caption = None
    if caption_lines:
        ch = caption_lines * line + 2 * pad
        caption = (0, height - ch, width, ch)
        height -= ch + pad
    small = 2 * pad  # between the blocks and their KV cache: one unit, no arrow between them
    usable = width - gap * (len(COLUMNS) - 2) - small
    boxes: dict[str, Rect] = {}
    lines: dict[str, int] = {}
    x = 0
    column_rects = []
    for i, (share, names) in enumerate(COLUMNS):
        w = int(usable * share) if i < len(COLUMNS) - 1 else width - x
        column_rects.append((x, w))
        if names[0] in LINES:
            _stack(names, x, w, height, line, pad, gap, boxes, lines)
        x += w + (small if names == ("blocks",) else gap)
    bx, bw = column_rects[1]
    kx, kw = column_rects[2]
    block_rows, kv_rows, row_text, parts, legend = _rows(bx, bw, kx, kw, height, n_layer, line, pad, selected,
                                                         tour=caption is not None)
    column_h = parts["maths"][1] - pad if "maths" in parts else height  # the table's box under both columns
    boxes["blocks"] = (bx, 0, bw, column_h)
    boxes["kv"] = (kx, 0, kw, column_h)
    arrows = _arrows(boxes, block_rows, line, pad)
    return FlowLayout(width, height + (caption[3] + pad if caption else 0), line, pad, boxes, block_rows, kv_rows,
                      selected, row_text, parts, lines, caption, legend, arrows)


def _arrows(boxes: dict[str, Rect], block_rows: list[Rect], line: int, pad: int) -> list[list[tuple[int, int]]]:
    """Polylines in the gaps: down a column, and across (an elbow) to the next column's first box."""
    def right(name, y):
        r = boxes[name]
        return (r[0] + r[2], y)

    def first_line(r):
        return r[1] + pad + line // 2

    out = []
    for a, b in (("tokens", "embedding"), ("ln_final", "lm_head"), ("lm_head", "logits"), ("sampling", "chosen"), ("chosen", "appended")):
        ra, rb = boxes[a], boxes[b]
        cx = ra[0] + ra[2] // 2
        out.append([(cx, ra[1] + ra[3]), (cx, rb[1])])
    for a, y1, b, y2 in (
        ("embedding", first_line(boxes["embedding"]), "blocks", block_rows[0][1] + min(block_rows[0][3], line) // 2),
        ("kv", block_rows[-1][1] + block_rows[-1][3] // 2, "ln_final", first_line(boxes["ln_final"])),
        ("logits", first_line(boxes["logits"]), "sampling", first_line(boxes["sampling"])),
    ):
        x1, _ = right(a, y1)
        x2 = boxes[b][0]
        xm = (x1 + x2) // 2
        out.append([(x1, y1), (xm, y1), (xm, y2), (x2, y2)])
    return out


def _stack(names, x, w, height, line, pad, gap, boxes, lines) -> None:
    """Stack ``names`` in one column: each its least lines, then more while there is room."""
    count = {n: LINES[n][0] for n in names}

    def total():
        return sum((1 + count[n]) * line + 2 * pad for n in names) + gap * (len(names) - 1)

    grown = True
    while grown:
        grown = False
        for n in names:
            if count[n] < LINES[n][1] and total() + line <= height:
                count[n] += 1
                grown = True
    spare = max(0, height - total()) // len(names)
    y = 0
    for n in names:
        h = (1 + count[n]) * line + 2 * pad + spare
        boxes[n] = (x, y, w, h)
        lines[n] = count[n]
        y += h + gap


def _rows(bx, bw, kx, kw, height, n_layer, line, pad, selected, tour=False):
    """One row per block (and its KV cache beside it) under a title line; the selected one tall.
    With room for the head's maths, its table gets a box at the bottom, under both columns: the
    expanded block gives it its last line (empty without the table), the box its frame."""
    top = line + 2 * pad  # the column's title
    legend_h = line + pad if n_layer > 1 else 0  # a legend line under the rows
    room = height - top - legend_h
    expanded = min(room, (1 + EXPANDED_LINES) * line + 2 * pad)
    others = n_layer - 1
    frame = pad + 2 * table_margin(pad)  # the gap above the table's box and its own margins
    maths = _maths_lines(room - expanded - frame, others, line, pad, tour)
    table_h = 0
    if maths:
        expanded -= line
        table_h = (maths + 1) * line + 2 * table_margin(pad)  # a line of column heads and a row per key
        room -= table_h + pad
    bottom = top + room  # where the rows end: the legend under them
    row = min(line + pad, (room - expanded) // others) if others else 0
    row = max(row, 2)
    row_text = row >= line
    if others and row_text:  # room to spare: the rows spread out a little, up to a line and a half
        row = min((room - expanded) // others, int(1.5 * line))
    block_rows, kv_rows = [], []
    y = top
    for layer in range(n_layer):
        h = expanded if layer == selected else row
        block_rows.append((bx, y, bw, h))
        kv_rows.append((kx, y, kw, h))
        y += h
    ex, ey, ew, eh = block_rows[selected]
    body = ey + line + pad  # under the block's own heading line
    parts = {
        "heads": (ex + pad, body, ew - 2 * pad, line),
        "attention": (ex + pad, body + line, ew - 2 * pad, 2 * line),
        "mlp": (ex + pad, body + 3 * line, ew - 2 * pad, line),
    }
    if maths:
        parts["maths"] = (bx, height - table_h, kx + kw - bx, table_h)
    legend = None
    if n_layer > 1:
        legend = (bx + pad, bottom, bw - 2 * pad, line)
    return block_rows, kv_rows, row_text, parts, legend


def _maths_lines(spare: int, others: int, line: int, pad: int, tour: bool = False) -> int:
    """Lines the head's maths gets from ``spare`` pixels: as many as leave the ``others`` collapsed
    blocks rows as tall as they would have been, up to a line and its pad each, or as thin as still
    numbers them as often (``block_numbers``: every 5th needs a fifth of a line), else as thin as
    numbers every 10th (a teacher still finds block 17 between 10 and 20); in the ``tour``,
    which reads the table out and whose sentence takes a band, down to 2 pixels. 0 when fewer than
    the least it needs are left."""
    if not others:
        return max(0, min(MATHS_LINES[1], spare // line))
    had = max(2, min(line + pad, spare // others))
    every = next((k for k in NUMBER_EVERY if k * had >= line), NUMBER_EVERY[-1])
    rows = [min(had, line + pad), max(2, min(had, -(-line // every)))] + ([2] if tour else [])
    for row in rows:
        lines = min(MATHS_LINES[1], (spare - others * row) // line)
        if lines >= MATHS_LINES[0]:
            return lines
    thinner = max(2, min(had, -(-line // 10)))  # short of room (a chat turn's chips): the least table, numbered every 10th
    return MATHS_LINES[0] if (spare - others * thinner) // line >= MATHS_LINES[0] else 0


def table_margin(pad: int) -> int:
    """The head's maths box's inner margin above and below its lines (a box's ``pad`` beside them)."""
    return max(1, pad // 2)


NUMBER_EVERY = (1, 2, 5, 10, 20, 50)  # collapsed blocks carry their layer number: every one, else every 2nd, 5th, ...


def block_numbers(block_rows: list[Rect], expanded: int, line: int) -> list[tuple[int, Rect]]:
    """The collapsed blocks that carry their layer number, and the rect (one line high, centred on
    the block's row, in the column's left gutter) each number is drawn in: every block when a row is
    a line high, else every 2nd (5th, 10th, ...) so the numbers are a line apart, the count never
    skipping one; none that would run into the expanded block, which names itself."""
    others = [h for layer, (_x, _y, _w, h) in enumerate(block_rows) if layer != expanded]
    if not others:
        return []
    ex, ey, ew, eh = block_rows[expanded]
    first, last = block_rows[0][1], block_rows[-1][1] + block_rows[-1][3]
    numbers: list[tuple[int, Rect]] = []
    for every in [k for k in NUMBER_EVERY if k * min(others) >= line] or NUMBER_EVERY[-1:]:
        numbers, crowded = [], False
        for layer, (x, y, w, h) in enumerate(block_rows):
            if layer == expanded or layer % every:
                continue
            top = min(max(y + h // 2 - line // 2, first), last - line)  # inside the rows: clear of the column's title
            if top < ey + eh and top + line > ey:
                continue
            if numbers and top < numbers[-1][1][1] + line:  # kept inside the rows, it runs into the one before
                crowded = True
                break
            numbers.append((layer, (x, top, w, line)))
        if not crowded:  # else number less often: a gap in the count would read as a missing block
            break
    return numbers
