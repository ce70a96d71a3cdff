"""The Inside view draws what the engine recomputed, and agrees with the other panels."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pytest
from PySide6.QtCore import QRectF, Qt
from PySide6.QtGui import QPainter, QPicture

from .helpers import run, run_outside_a_test
from app.logic.help import words
from app.logic.inside_paging import group_pages, needs_pages
from app.panels.inside_panel import PAGES
from app.protocol import messages as p


def show_inside(window, qtbot):
    """Bring Inside to the front and wait until it has drawn the answer to its question (asked now,
    or asked before and already drawn); return the InsideTrace drawn."""
    window.show_view("inside")
    inside = window.inside
    qtbot.wait(10)  # the view asks once it is shown (a turn of the event loop later)
    qtbot.waitUntil(lambda: inside._asked is not None and not inside.awaiting(), timeout=30_000)
    return inside.trace


def test_the_inside_view_shows_the_newest_position_and_agrees_with_the_attention_panel(window, qtbot):
    run(qtbot, window, window.step, p.Step)
    result = run(qtbot, window, window.step, p.Step)
    window.state.set_layer(1)
    window.state.set_head(2)
    trace = show_inside(window, qtbot)
    T = result.trace.record.end
    assert trace.step == result.trace.step and trace.position == T - 1
    inside = window.inside
    attention_row = result.records[-1].attn[1, 2, -1].astype(np.float32)  # float16 in the record
    np.testing.assert_allclose(inside.attention.pattern.values, attention_row[:T], atol=1e-3)
    np.testing.assert_array_equal(inside.attention.q_strip.values, trace.q[1, 2])
    np.testing.assert_array_equal(inside.embedding.sum_strip.values, trace.token_embed + trace.pos_embed)
    assert f"position {T - 1}" in inside.header.text() and "block 1" in inside.pages.names[1]
    assert inside.lens.table.rowCount() == result.n_layer + 1
    assert f"{result.info.n_params:,}" in inside.sizes.text.text()


def test_choosing_a_token_or_a_layer_asks_again(window, qtbot):
    run(qtbot, window, window.step, p.Step)
    show_inside(window, qtbot)
    with qtbot.waitSignal(window.controller.insideReady, timeout=30_000) as answer:
        window.state.set_position(2)  # a click on the third chip
    assert answer.args[0].trace.position == 2
    qtbot.waitUntil(lambda: not window.inside.awaiting(), timeout=30_000)
    assert "position 2" in window.inside.header.text()
    with qtbot.waitSignal(window.controller.insideReady, timeout=30_000) as answer:
        window.state.set_layer(3)
    assert answer.args[0].trace.kv_layers == (3,)
    assert window.inside.attention.keys_image.image.shape == (3, answer.args[0].trace.q.shape[-1])  # positions 0-2 x d_head


def test_an_earlier_step_of_the_history_can_be_opened(window, qtbot):
    run(qtbot, window, window.step, p.Step)
    run(qtbot, window, window.step, p.Step)
    show_inside(window, qtbot)
    with qtbot.waitSignal(window.controller.insideReady, timeout=30_000) as answer:
        window.inside.step_spin.setValue(0)  # the prefill, while step 1 stays on screen
    trace = answer.args[0].trace
    assert trace.step == 0 and trace.position == 4  # the prompt's last position
    assert window.state.result.trace.step == 1


# ------------------------------------------------------------ pages, keys, axes and columns
SIZES = [((1024, 768), True), ((1280, 720), True), ((1366, 768), False), ((1920, 1080), False)]  # (size, projector)


def tick_texts(axis) -> list[tuple[QRectF, str]]:
    """The tick labels ``axis`` draws and their text rectangles, as its paint() measures them."""
    picture = QPicture()
    painter = QPainter(picture)
    try:
        if axis.style["tickFont"]:
            painter.setFont(axis.style["tickFont"])
        specs = axis.generateDrawSpecs(painter)
    finally:
        painter.end()
    return [(rect, text) for rect, _flags, text in (specs[2] if specs else [])]


def overlapping(texts: list[tuple[QRectF, str]]) -> list[str]:
    return [f"{a!r} overlaps {b!r}" for i, (ra, a) in enumerate(texts) for rb, b in texts[i + 1:] if ra.intersects(rb)]


def lens_problems(table) -> list[str]:
    """The logit lens's last column (the next token's model p and rank) cut off, sideways scrolling,
    or fewer than the two best candidates shown."""
    problems = []
    last = table.columnCount() - 1
    right = table.horizontalHeader().sectionViewportPosition(last) + table.columnWidth(last)
    if table.isColumnHidden(last) or right > table.viewport().width():
        problems.append(f"last column ends at {right} px, the view at {table.viewport().width()} px")
    if table.horizontalScrollBar().maximum() > 0:
        problems.append("scrolls sideways")
    if table.isColumnHidden(1) or table.isColumnHidden(2):
        problems.append("the two best candidates are not both shown")
    return problems


def inside_at(window, qtbot, size, projector):
    """Inside in front at ``size`` in projector mode or not, drawn and paged (or not) for that size."""
    window.state.set_projector(projector)
    window.resize(*size)
    inside = window.inside
    trace = show_inside(window, qtbot)
    qtbot.waitUntil(lambda: not inside._paging_later.isActive(), timeout=5_000)
    qtbot.wait(20)
    return inside, trace


def test_pages_are_needed_in_projector_mode_or_past_two_screens_of_scrolling():
    assert needs_pages(True, 100, 500)  # a projector: pages even when all would fit
    assert not needs_pages(False, 3 * 500, 500)  # scrolls exactly two screens: one page
    assert needs_pages(False, 3 * 500 + 1, 500)


def test_a_page_takes_the_next_parts_while_they_fit_and_a_part_taller_than_the_room_is_alone():
    def room(_first, _last):
        return 500

    assert group_pages([200, 250, 100, 600, 50, 440, 40], room, spacing=10) == [[0, 1], [2], [3], [4, 5], [6]]
    assert group_pages([600, 600], room) == [[0], [1]]  # each scrolls on a page of its own
    assert group_pages([], room) == []

    def room_under_a_title(first, last):  # each name more in the title above: a line less for the parts
        return 500 - 20 * (last - first)

    assert group_pages([240, 240], room_under_a_title) == [[0, 1]]  # exactly the room: it fits
    assert group_pages([240, 241], room_under_a_title) == [[0], [1]]


def test_inside_is_pages_in_the_order_the_model_computes_and_next_back_and_the_keys_turn_them(window, qtbot):
    run(qtbot, window, window.step, p.Step)
    inside, _t = inside_at(window, qtbot, (1280, 720), True)
    assert inside.paged
    pages = inside.pages
    a = inside.attention
    assert pages.boxes == [inside.embedding.box, *a.boxes, *inside.mlp.boxes, inside.head.box, inside.lens.box,
                           inside.lens.stream_box, inside.sizes.box]
    assert [a.norm_box, a.rope_box, a.keys_box, a.scores_box, a.values_box, a.output_box] == list(a.boxes)
    arch = window.state.result.info.architecture
    names = [words("inside", key, arch, dict(layer=0, head=0, last=result_layers(window) - 1)) for key in PAGES]
    assert pages.names == names and names[2] == "" and all(names[:2] + names[3:])  # the demo has no RoPE: no RoPE page
    assert pages.nav.isVisible() and pages.title.text() == f"{names[0]} · page 1 of 12"

    def shown() -> list[int]:
        return [i for i, box in enumerate(pages.boxes) if box.isVisible()]

    assert shown() == [0] and not pages.back_button.isEnabled()
    qtbot.mouseClick(pages.next_button, Qt.LeftButton)
    assert pages.index == 1 and shown() == [1] and pages.title.text() == f"{names[1]} · page 2 of 12"
    step = window.state.result.trace.step
    qtbot.keyClick(window, Qt.Key_Right)  # past RoPE's part, no page here
    assert pages.index == 3 and shown() == [3] and pages.title.text() == f"{names[3]} · page 3 of 12"
    qtbot.keyClick(window, Qt.Key_PageDown)
    assert pages.index == 4 and shown() == [4]
    qtbot.keyClick(window, Qt.Key_Left)
    assert pages.index == 3
    qtbot.keyClick(window, Qt.Key_Left)
    assert pages.index == 1
    qtbot.keyClick(window, Qt.Key_Right)
    qtbot.keyClick(window, Qt.Key_Left)
    assert pages.index == 1
    qtbot.keyClick(window, Qt.Key_PageUp)
    qtbot.mouseClick(pages.back_button, Qt.LeftButton)
    assert pages.index == 0 and shown() == [0]
    for _ in range(len(PAGES) + 2):  # past the last page: it stays there
        qtbot.keyClick(window, Qt.Key_Right)
    assert pages.index == len(PAGES) - 1 and not pages.next_button.isEnabled()
    assert window.state.result.trace.step == step  # the arrows turned the pages, not the text
    run(qtbot, window, lambda: qtbot.keyClick(window, Qt.Key_Space), p.Step)  # Space still steps
    assert window.state.result.trace.step == step + 1 and pages.index == len(PAGES) - 1
    window.show_view("overview")  # anywhere else → steps again
    run(qtbot, window, lambda: qtbot.keyClick(window, Qt.Key_Right), p.Step)
    assert window.state.result.trace.step == step + 2 and pages.index == len(PAGES) - 1


def result_layers(window) -> int:
    return int(window.state.result.n_layer)


@pytest.fixture(scope="module")
def deep_window(module_window, tmp_path_factory):
    """A window on a random 30-layer model (SmolLM2's depth, tiny width) after one step."""
    from engine import load_model
    from engine.random_model import TINY, write_random_model

    shape = TINY["llama"] | {"num_hidden_layers": 30}
    folder = write_random_model(tmp_path_factory.mktemp("deep") / "llama30", "llama", seed=5, **shape)
    window = module_window()
    loaded = load_model(str(folder))
    run_outside_a_test(window, lambda: window.load_model(None, loaded=loaded, prompt="The capital of France is"), p.Load)
    run_outside_a_test(window, window.step, p.Step)
    return window


@pytest.mark.parametrize(("size", "projector"), SIZES, ids=["1024x768-projector", "1280x720-projector", "1366x768", "1920x1080"])
def test_every_page_scrolls_at_most_one_screen_and_the_charts_keep_their_ticks(deep_window, qtbot, size, projector):
    """At every size: each page's content is at most two screens (it scrolls at most one screen);
    the residual stream chart names blocks by number without two labels touching (their text
    rectangles measured as the axis paints them), every block or every second one; the
    other bar charts' labels do not touch either; the logit lens's last column (the next token's
    model p and rank) lies inside the table's view, with no sideways scrolling."""
    window = deep_window
    window.state.set_layer(1)
    inside, t = inside_at(window, qtbot, size, projector)
    assert inside.paged  # 30 blocks: the long page scrolls more than two screens at every size
    pages = inside.pages
    problems = []
    for i, name in enumerate(pages.names):
        pages.go(i)
        qtbot.wait(30)
        bar = pages.scroll.verticalScrollBar()
        if bar.maximum() > pages.screen_height():
            problems.append(f"page {i + 1} ({name}) scrolls {bar.maximum()} px > one screen, {pages.screen_height()} px")
        for chart in (inside.attention.scores, inside.attention.pattern, inside.attention.angles, inside.mlp.router):
            if chart.isVisible():
                problems += [f"{chart.title}: {o}" for o in overlapping(tick_texts(chart.plot.getAxis("bottom")))]
        if pages.boxes[i] is inside.lens.box:
            axis = inside.lens.stream_view.getPlotItem().getAxis("bottom")
            texts = tick_texts(axis)
            problems += [f"stream chart: {o}" for o in overlapping(texts)]
            labels = [text for _rect, text in texts]
            step = int(labels[1]) - int(labels[0]) if len(labels) > 1 and labels[0].isdigit() and labels[1].isdigit() else 0
            if labels != [str(n) for n in range(0, t.n_layer, step or 1)] or step not in (1, 2):
                problems.append(f"stream chart: {labels} are not the block numbers, every block or every second")
            problems += [f"lens: {p}" for p in lens_problems(inside.lens.table)]
            inside.show_inside(t, {i: "W" * 10 for i in inside.pieces})  # the widest pieces the table writes
            qtbot.wait(10)
            problems += [f"lens with wide pieces: {p}" for p in lens_problems(inside.lens.table)]
    pages.go(0)
    assert problems == [], "\n".join(problems)


def test_the_logit_lens_shows_whole_tokens_dropping_columns_rather_than_cutting_them(qtbot):
    """A narrow table shows fewer candidates, each token whole: never "␣internati…" (a token cut
    reads as another word)."""
    from app.panels.inside_lens import LENS_SHOWN, LensTable

    table = LensTable()
    qtbot.addWidget(table)
    table.setColumnCount(LENS_SHOWN + 2)
    table.setRowCount(3)
    table.resize(520, 300)
    table.show()
    pieces = [["␣international", "␣institutional", "␣the", "␣a", "␣of"]] * 3
    table.set_candidates(pieces, np.arange(15, dtype=np.float32).reshape(3, 5))
    shown = [table.item(row, col).text() for row in range(3) for col in range(1, LENS_SHOWN + 1)
             if not table.isColumnHidden(col)]
    assert shown and not any("…" in text for text in shown), shown
    assert all(text.split(" (")[0] in pieces[0] for text in shown)


def test_the_gated_mlp_page_lists_its_strongest_units_once(deep_window, qtbot):
    """A gated MLP's sentence lists its strongest units with their gate and up factors: the plain
    list under the strips ("Strongest units: unit 1,194 = +8.50, ...") said it a second time."""
    from PySide6.QtWidgets import QLabel

    inside, _t = inside_at(deep_window, qtbot, (1280, 720), True)
    said = [label.text() for box in inside.mlp.boxes for label in box.findChildren(QLabel) if label.isVisibleTo(box)]
    assert sum(text.count("Strongest units") for text in said) == 1, said


def test_a_long_page_title_wraps_rather_than_being_cut(deep_window, qtbot):
    """The page bar's title ("Attention in block 0, head 0: the values and their weighted sum ·
    page 6 of 13") is wider than a 1024 x 768 projector's bar: it takes a second line, every word shown."""
    from PySide6.QtCore import QRect

    inside, _t = inside_at(deep_window, qtbot, (1024, 768), True)
    pages, problems = inside.pages, []
    for i in range(len(pages.boxes)):
        pages.go(i)
        title = pages.title

        def fits() -> bool:
            fm, w = title.fontMetrics(), title.contentsRect().width()
            wrapped = fm.boundingRect(QRect(0, 0, w, 10_000), int(Qt.TextWordWrap), title.text()).height()
            return fm.horizontalAdvance(title.text()) <= w or (title.wordWrap() and wrapped <= title.contentsRect().height())

        try:  # the second line's height comes with a layout pass
            qtbot.waitUntil(fits, timeout=2_000)
        except AssertionError:
            problems.append(f"{title.text()!r} cut: {title.fontMetrics().horizontalAdvance(title.text())} px in {title.contentsRect().width()} px")
    pages.go(0)
    assert problems == [], problems


@pytest.fixture(scope="module")
def demo_inside_window(module_window, demo_model):
    """A window on the demo model (GPT-2 shaped, 4 blocks, learned positions) after one step."""
    window = module_window()
    run_outside_a_test(window, lambda: window.load_model(None, loaded=demo_model, prompt="The capital of France is"), p.Load)
    run_outside_a_test(window, window.step, p.Step)
    return window


@pytest.fixture(scope="module")
def smollm_inside_window(module_window, smollm_loaded):
    """A window on the SmolLM2-shaped random model (30 blocks, d = 576, RoPE, 9 heads / 3 kv) after one step."""
    window = module_window()
    run_outside_a_test(window, lambda: window.load_model(None, loaded=smollm_loaded, prompt="The capital of France is"),
                       p.Load, 60_000)
    run_outside_a_test(window, window.step, p.Step)
    return window


@pytest.mark.parametrize("model", ["demo", "smollm"])
@pytest.mark.parametrize("size", [(1024, 768), (1280, 720)], ids=["1024x768-projector", "1280x720-projector"])
def test_every_page_fits_a_projector_screen_without_scrolling(request, qtbot, model, size):
    """A page is one projector screen: nothing below it to scroll to (page 3, RoPE's keys, scrolled
    about 355 px at 1024 x 768 for SmolLM2)."""
    window = request.getfixturevalue(f"{model}_inside_window")
    inside, _t = inside_at(window, qtbot, size, True)
    pages, problems = inside.pages, []
    for i, name in enumerate(pages.names):
        pages.go(i)
        qtbot.wait(30)
        scrolls = pages.scroll.verticalScrollBar().maximum()
        if scrolls > 0:
            problems.append(f"page {i + 1} ({name}) scrolls {scrolls} px")
    pages.go(0)
    window.state.set_projector(False)
    assert problems == [], "\n".join(problems)


class Page(NamedTuple):
    """One page as shown: its parts, the pixels they take one under the other, their boxes' titles
    and how far the page scrolls."""

    parts: list[int]
    used: int
    titles: list[str]
    scrolls: int
    bar: str


def walk_pages(pages, qtbot) -> list[Page]:
    """From the first page, Next until it is disabled: each page as shown."""
    pages.go(0)
    walked = []
    while True:
        qtbot.wait(30)
        shown = [i for i, box in enumerate(pages.boxes) if box.isVisible()]
        used = sum(pages.boxes[i].height() for i in shown) + pages.column.spacing() * (len(shown) - 1)
        walked.append(Page(shown, used, [pages.boxes[i].title() for i in shown], pages.scroll.verticalScrollBar().maximum(),
                           pages.title.text()))
        if not pages.next_button.isEnabled():
            return walked
        qtbot.mouseClick(pages.next_button, Qt.LeftButton)


def page_room(pages) -> int:
    """The height a page's parts have: the scroll area's view less the column's margins."""
    margins = pages.column.contentsMargins()
    return pages.screen_height() - margins.top() - margins.bottom()


def test_a_large_screen_puts_as_many_parts_on_a_page_as_fit(smollm_inside_window, qtbot):
    """At 1920 x 1080 in normal text with a 30-block model, Inside is pages (the long page scrolls
    more than two screens), but a page is never less than half full when the next part would have
    fitted on it (one part a page, 13 pages, left page 1 at 21 %: two colour strips and blank), no
    page scrolls, Next reaches every part once, in the model's order, the keys turn pages as Next and
    Back do, and on a page of several parts each box is titled with its part's number and name, the
    bar with their numbers (it named them all again)."""
    window = smollm_inside_window
    inside, _t = inside_at(window, qtbot, (1920, 1080), False)
    assert inside.paged
    pages = inside.pages
    walked = walk_pages(pages, qtbot)
    room, spacing = page_room(pages), pages.column.spacing()
    assert [i for page in walked for i in page.parts] == pages.present()
    problems = []
    for k, page in enumerate(walked):
        if page.scrolls > 0 and len(page.parts) > 1:
            problems.append(f"page {k + 1} (parts {page.parts}) scrolls {page.scrolls} px")
        present = pages.present()
        number = [present.index(i) + 1 for i in page.parts]
        if len(page.parts) > 1 and page.titles != [f"{n} · {pages.names[i]}" for n, i in zip(number, page.parts)]:
            problems.append(f"page {k + 1}: its boxes are titled {page.titles}")
        if len(page.parts) > 1 and page.bar != f"Parts {number[0]} to {number[-1]} of {len(present)} · page {k + 1} of {len(walked)}":
            problems.append(f"page {k + 1}: its bar says {page.bar!r}")  # not every name again
        if k + 1 < len(walked):
            after = pages.boxes[walked[k + 1].parts[0]].height()
            if page.used < room / 2 and page.used + spacing + after <= room:
                problems.append(f"page {k + 1} (parts {page.parts}) is {page.used} px of {room} px, "
                                f"the next part ({after} px) would fit")
    pages.go(0)
    turned = []
    for key in (Qt.Key_Right, Qt.Key_PageDown, Qt.Key_Left):  # the keys turn pages, not parts
        qtbot.keyClick(window, key)
        turned.append(pages.index)
    assert turned == [walked[1].parts[0], walked[2].parts[0], walked[1].parts[0]], (turned, walked)
    pages.go(0)
    assert problems == [], "\n".join(problems) + f"\n{len(walked)} pages"


def test_the_pages_are_grouped_again_for_another_size_or_text_size_and_the_part_shown_stays(smollm_inside_window, qtbot):
    """A smaller window or projector-sized text holds fewer parts a page (more pages); the part the
    teacher turned to stays on screen through each change."""
    window = smollm_inside_window
    inside, _t = inside_at(window, qtbot, (1920, 1080), False)
    pages = inside.pages
    large = len(walk_pages(pages, qtbot))
    part = pages.present()[7]
    pages.go(part)
    counts = {}
    for size, projector in (((1366, 768), False), ((1920, 1080), True), ((1920, 1080), False)):
        inside_at(window, qtbot, size, projector)
        assert pages.boxes[part].isVisible() and pages.index == part, (size, projector)
        counts[size, projector] = len(walk_pages(pages, qtbot))
        pages.go(part)
    window.state.set_projector(False)
    pages.go(0)
    assert counts[(1920, 1080), False] == large
    assert large < counts[(1366, 768), False] and large < counts[(1920, 1080), True], counts
