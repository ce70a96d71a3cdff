"""The sampling view shows each stage's numbers from the step's distribution and the draw a person can
check; the cache view shows what the KV cache holds; generating without the cache gives the same steps."""

from __future__ import annotations

import math

import numpy as np

from engine.sampling import SamplingSettings

from .helpers import choose_settings, run
from app.protocol import messages as p


def test_the_stages_and_the_draw_match_the_engine(window, qtbot):
    choose_settings(window.sampling, SamplingSettings(temperature=0.8, top_k=5, top_p=0.9, repetition_penalty=2.0, seed=3))
    run(qtbot, window, window.step, p.Step)
    result = run(qtbot, window, window.step, p.Step)
    window.show_view("sampling")
    st, record = window.sampling_view.stages, result.trace.record
    dist = result.trace.distribution
    assert list(st.ids[: len(result.trace.candidate_ids[:12])]) == list(result.trace.candidate_ids[:12])
    np.testing.assert_array_equal(st.probs, dist.probs[st.ids])
    table = window.sampling_view.table
    in_context = set(int(t) for t in result.trace.context_ids)
    for row, token in enumerate(st.ids):
        penalty_cell = table.item(row, 2).text()
        assert ("÷ 2" in penalty_cell or "× 2" in penalty_cell) == (int(token) in in_context)  # penalised tokens marked
        removed = st.removed_by[row]
        assert ("removed" in table.item(row, 4).text()) == (removed == "top-k")
        assert ("removed" in table.item(row, 6).text()) == (removed == "top-p")
    # the draw: u from the record falls in the chosen token's stretch, and re-drawing with it gives the token
    u = record.draw_u
    chosen = np.flatnonzero(st.ids == record.chosen)[0]
    assert st.draw_start[chosen] <= u < st.draw_end[chosen]
    assert dist.pick(u) == record.chosen
    assert "← u" in table.item(int(chosen), 8).text()
    assert f"u = {u:.4f}" in window.sampling_view.draw_caption.text()
    greedy = run(qtbot, window, lambda: window.sampling.greedy.setChecked(True), p.Resample)
    assert math.isnan(greedy.trace.record.draw_u) and "Greedy" in window.sampling_view.draw_caption.text()


def test_the_cache_view_holds_what_the_cache_holds_and_back_drops_rows(window, qtbot):
    for _ in range(3):
        run(qtbot, window, window.step, p.Step)
    window.state.set_layer(2)
    window.state.set_head(1)
    with qtbot.waitSignal(window.controller.insideReady, timeout=30_000):
        window.show_view("cache")
    qtbot.waitUntil(lambda: not window.cache_view.awaiting(), timeout=30_000)
    session = window.controller.engine.host.session
    keys, values = session.cached_kv(2, 1)
    np.testing.assert_allclose(window.cache_view.keys_image.image, keys, atol=1e-5)
    np.testing.assert_allclose(window.cache_view.values_image.image, values, atol=1e-5)
    assert keys.shape[0] == 7  # 5 prompt tokens, then one per decode step
    with qtbot.waitSignal(window.controller.insideReady, timeout=30_000):
        window.back()
    qtbot.waitUntil(lambda: not window.cache_view.awaiting(), timeout=30_000)
    assert window.cache_view.keys_image.image.shape[0] == 6  # the dropped row is gone


def test_without_the_cache_the_steps_are_the_same_and_nothing_is_cached(window, qtbot):
    choose_settings(window.sampling, SamplingSettings(greedy=True))
    cached = [run(qtbot, window, window.step, p.Step).trace for _ in range(3)]
    run(qtbot, window, window.reset, p.Reset)
    window.commands.no_cache_action.trigger()
    assert not window.controller.use_cache
    uncached = [run(qtbot, window, window.step, p.Step).trace for _ in range(3)]
    for a, b in zip(cached, uncached):
        assert a.chosen == b.chosen
        np.testing.assert_allclose(a.record.logits, b.record.logits, atol=1e-4)
        np.testing.assert_allclose(a.record.attn.astype(np.float32), b.record.attn.astype(np.float32), atol=2e-3)
        assert b.record.kv.positions == 0
    assert any(not cached_ for cached_, _ in window.forward_times.times)  # the times plot has uncached steps
    window.commands.no_cache_action.trigger()
    again = run(qtbot, window, window.step, p.Step)
    assert again.trace.record.kv.positions == again.trace.record.end  # back on: the cache is rebuilt


def test_folded_rows_keep_the_top_three_and_the_chosen_row_in_one_view():
    from app.panels.sampling_stages_panel import folded_rows

    assert folded_rows(chosen=4, fits=6) == range(0)  # rows 0 to 4 fit: nothing folded
    assert folded_rows(chosen=10, fits=6) == range(3, 8)  # shown: 0, 1, 2, then 8, 9, 10
    assert folded_rows(chosen=6, fits=6) == range(3, 4)
    assert folded_rows(chosen=10, fits=3) == range(2, 10)  # a short view: the top two and the chosen row


def test_on_a_projector_the_top_candidates_stay_in_view_above_a_chosen_row_far_down(window, qtbot):
    """A token taken from far down the list (a click on the 11th candidate): the sampling table shows
    the top three candidates and the chosen row together at 1024 x 768 in projector mode."""
    window.state.set_projector(True)
    window.resize(1024, 768)
    result = run(qtbot, window, window.step, p.Step)
    window.show_view("sampling")
    chosen = int(result.trace.candidate_ids[10])
    result = run(qtbot, window, lambda: window.controller.choose(chosen), p.Choose)
    qtbot.wait(30)
    table = window.sampling_view.table
    view = table.viewport().rect()

    def in_view(row: int) -> bool:
        return not table.isRowHidden(row) and view.contains(table.visualRect(table.model().index(row, 0)))

    row = [table.item(r, 0).text() for r in range(table.rowCount())].index(next(
        table.item(r, 0).text() for r in range(table.rowCount()) if f"({chosen:,})" in table.item(r, 0).text()))
    assert row >= 10 and in_view(row)
    assert all(in_view(r) for r in range(3))
    from .test_text_size import overlapping_siblings, table_fit_problems

    assert window.sampling_view.fold_note.isVisible()  # rows folded: the note says which, under the table
    assert overlapping_siblings(window.sampling_view) == [] and table_fit_problems(table) == []


def test_the_columns_fit_with_the_folded_rows_shown_again(window, qtbot):
    """The columns are measured over every row, the folded ones too: measured over the rows in view
    only, a row folded while they were fitted ("6.167 (in text)") came back wider than its column
    and the table scrolled sideways (the demo model at 1024 x 768 projector, seed 0, as a screenshot)."""
    from .test_text_size import table_fit_problems

    choose_settings(window.sampling, SamplingSettings(temperature=1.0, top_k=50, top_p=1.0, seed=0))
    window.state.set_projector(True)
    window.resize(1024, 768)
    window.show_view("sampling")
    window.tokens.editor.setPlainText("The capital of France is")
    run(qtbot, window, window.tokens._debounce.start, p.SetPrompt, timeout=60_000)
    for _ in range(3):
        run(qtbot, window, window.step, p.Step)
        qtbot.wait(30)
        assert table_fit_problems(window.sampling_view.table) == []


def test_a_narrow_sampling_table_hides_columns_and_keeps_their_marks(window, qtbot):
    """At 1024 x 768 in projector mode the nine stage columns do not fit: the draw's stretch, top-k's
    column and the (off) penalty's column are hidden, never cut, and what they marked is said in
    another cell: "(in text)" by the token, "removed by top-k" in the softmax column."""
    from app.panels.sampling_stages_panel import droppable_columns
    from .test_text_size import table_fit_problems

    choose_settings(window.sampling, SamplingSettings(temperature=1.0, top_k=2, top_p=1.0, repetition_penalty=1.0, seed=3))
    window.state.set_projector(True)
    window.resize(1024, 768)
    for _ in range(3):
        result = run(qtbot, window, window.step, p.Step)
    window.show_view("sampling")
    qtbot.wait(30)
    view, table = window.sampling_view, window.sampling_view.table
    assert {8, 4, 2} <= view.hidden_columns and all(table.isColumnHidden(c) for c in view.hidden_columns)
    assert table_fit_problems(table) == []
    st = view.stages
    context = {int(t) for t in result.trace.context_ids}
    for row, token in enumerate(st.ids):
        assert ("(in text)" in table.item(row, 0).text()) == (int(token) in context)
        assert (table.item(row, 5).text() == "removed by top-k") == (st.removed_by[row] == "top-k")
    assert any(int(t) in context for t in st.ids) and "top-k" in list(st.removed_by)  # both marks were seen
    window.resize(1920, 1080)  # room for every column: none hidden, the marks in their own columns
    qtbot.wait(30)
    assert view.hidden_columns == set() and not any("(in text)" in table.item(r, 0).text() for r in range(len(st.ids)))
    assert droppable_columns(SamplingSettings(greedy=True, repetition_penalty=1.3)) == [8, 4, 3, 6]


def cut_rows(table) -> list[int]:
    """The rows of ``table`` that its viewport's bottom edge cuts: partly in view, partly below it."""
    bottom = table.viewport().height()
    return [row for row in range(table.rowCount()) if not table.isRowHidden(row)
            and table.rowViewportPosition(row) < bottom < table.rowViewportPosition(row) + table.rowHeight(row)]


def test_the_sampling_table_shows_whole_rows_only(window, qtbot):
    """The table is a whole number of rows tall: at 1024 x 768 projector its last row in view was cut in
    half. Also at 1280 x 720 projector, at 1366 x 768 and at 1920 x 1080, and after a chosen row far
    down folds rows away (the note under the table takes room)."""
    window.show_view("sampling")
    for _ in range(3):
        result = run(qtbot, window, window.step, p.Step)
    table, problems = window.sampling_view.table, []

    def look(case: str) -> None:
        qtbot.wait(30)
        if rows := cut_rows(table):
            problems.append(f"{case}: rows {rows} cut at {table.viewport().height()} px (row height {table.rowHeight(0)} px)")

    for size, projector in (((1024, 768), True), ((1280, 720), True), ((1366, 768), False), ((1920, 1080), False)):
        window.state.set_projector(projector)
        window.resize(*size)
        look(f"{size[0]}x{size[1]}{' projector' if projector else ''}")
    window.state.set_projector(True)
    window.resize(1024, 768)
    result = run(qtbot, window, lambda: window.controller.choose(int(result.trace.candidate_ids[10])), p.Choose)
    look("1024x768 projector, rows folded")
    assert window.sampling_view.folded
    assert problems == [], "\n".join(problems)


def labels_out_of_view(view, name: str = "left") -> list[str]:
    """The tick labels of ``view``'s axis ``name`` that stick out of the view (cut by its edge)."""
    from .test_inside_view import tick_texts

    axis = view.getPlotItem().getAxis(name)
    room = view.viewport().rect()
    out = []
    for rect, text in tick_texts(axis):
        box = view.mapFromScene(axis.mapRectToScene(rect)).boundingRect()
        if not room.contains(box):
            out.append(f"{text!r} at {box.getRect()} outside {room.getRect()}")
    return out


def test_the_first_rows_name_is_whole_on_a_long_context(window, qtbot):
    """With 37 positions a row is a few pixels tall and the first row's name ("<|im_start|> 0" in a chat
    turn) stood half above the map, cut by the view's top edge (1024 x 768 projector); the Inside view's
    keys and values maps too."""
    from .test_inside_view import show_inside

    window.state.set_projector(True)
    window.resize(1024, 768)
    window.tokens.editor.setPlainText("The capital of France is Paris, and the capital of Italy is Rome. " * 3)
    run(qtbot, window, window.tokens._debounce.start, p.SetPrompt, timeout=60_000)
    run(qtbot, window, window.step, p.Step)
    with qtbot.waitSignal(window.controller.insideReady, timeout=30_000):
        window.show_view("cache")
    qtbot.waitUntil(lambda: not window.cache_view.awaiting(), timeout=30_000)
    qtbot.wait(30)
    cache = window.cache_view
    problems = [f"cache {name}: {o}" for name, view in (("keys", cache.keys_view), ("values", cache.values_view))
                for o in labels_out_of_view(view)]
    show_inside(window, qtbot)
    inside = window.inside
    for box, view in ((inside.attention.keys_box, inside.attention.keys_view), (inside.attention.values_box, inside.attention.values_view)):
        inside.pages.go(inside.pages.boxes.index(box))
        qtbot.wait(30)
        problems += [f"inside: {o}" for o in labels_out_of_view(view)]
    assert problems == [], "\n".join(problems)
