"""The window's Export entries: pictures of the window or a panel, the CSV tables, copying text.

File → Export holds "Picture of the window…", "Picture of a panel" (one entry per panel),
"Candidates table (CSV)…", "History table (CSV)…" and "Why table (CSV)…"; Edit holds "Copy text" and "Copy picture of
the window"; each titled panel has a "⋯" button by its "?" with the same entries for that panel.
A dialog only asks where: the work is done by ``export_picture``, ``export_table``, ``copy_text``
and ``copy_picture``, which tests call with a path. Every outcome, a failure included (a folder
that cannot be written), is one line on the window's status line; nothing raises into Qt.

The history table (every step's distribution: seconds for a long session) and the PNG encoding of
a picture (100-350 ms for the window) are done on the export thread (``app.window.export_writer``); the
window goes on, and ``saved`` says when the file is there (the status line says it too). What must
happen on the GUI thread does: rendering the widgets, an SVG, the candidates table (one step).
"""

from __future__ import annotations

import logging
import re
from contextlib import contextmanager
from pathlib import Path

from PySide6.QtCore import QEvent, QObject, Signal
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QApplication, QFileDialog, QGroupBox, QMenu, QMenuBar, QToolButton, QWidget

from app.window import export_writer, pictures
from app.logic import memory, tables
from app.window.export_writer import ExportWriter, Written
from app.window.help_dialog import CornerButton
from app.logic.views import VIEW_BUTTONS, VIEWS

log = logging.getLogger(__name__)
LAYOUT_PASSES = 4  # a new page of panels takes two passes (its splitter, then the panels in it): room to spare

TABLES = {
    "candidates": ("Candidates table", tables.CANDIDATE_COLUMNS, tables.candidate_rows),
    "history": ("History table", tables.HISTORY_COLUMNS, tables.history_rows),
    "why": ("Why table", tables.WHY_COLUMNS, tables.why_rows),  # built from the Why view's answer, not the result
}
ON_A_THREAD = {"history"}  # the tables slow to build (every step's distribution); one step's is not


def write_table(which: str, source, path: Path) -> Written:
    """Build the ``which`` table of ``source`` (the SessionResult; for "why", the Why view's
    AttributionResult) and write it to ``path``: plain Python and numpy, on any thread. Never raises:
    a failure is the outcome's ``error``."""
    title, columns, build = TABLES[which]
    what = f"the {title.lower()}"
    try:
        rows = build(source)
        tables.write_csv(path, columns, rows)
    except (OSError, tables.TableError) as exc:
        return Written(what, path, error=exc)
    except Exception as exc:  # noqa: BLE001 - a defect: told on the status line, never lost on a thread
        log.exception("writing %s to %s failed", what, path)
        return Written(what, path, error=exc)
    return Written(what, path, f"{len(rows):,} rows")


def write_png(image, path: Path, what: str) -> Written:
    """Encode ``image`` (a QImage) as PNG into ``path``, on any thread; never raises."""
    detail = f"PNG, {image.width():,} × {image.height():,} pixels: 2× the screen"
    try:
        pictures.write_png(image, path)
    except OSError as exc:
        return Written(what, path, error=exc)
    except Exception as exc:  # noqa: BLE001 - a defect: told on the status line, never lost on a thread
        log.exception("writing %s to %s failed", what, path)
        return Written(what, path, error=exc)
    return Written(what, path, detail)


class ExportActions(QObject):
    """Builds the Export entries for ``window`` (a MainWindow) and carries them out.

    ``panels``: the titled panels that can be pictured, in menu order, then ``views``: the views by
    name (each built when first pictured); ``status``: the window's ``_set_status(text, error=...)``."""

    saved = Signal(object)  # Written: an export ended, its file written or the error that stopped it

    def __init__(self, window, panels: list[QWidget], views: list[str], status):
        super().__init__(window)
        self.window = window
        self.panels = {panel: panel.title().split("·")[-1].split(":")[0].strip() for panel in panels}  # "Attention"
        self.status = status
        self.folder = Path.home()  # where the last export went: the next dialog starts there

        def action(text, slot, tip=""):
            a = QAction(text, self)
            a.setToolTip(tip or text)
            a.triggered.connect(slot)
            return a

        self.window_picture_action = action(
            "Picture of the window…", lambda: self.ask_picture(window), "Save the whole window as PNG (2× for slides) or SVG"
        )
        self.panel_picture_actions = {
            panel: action(f"{name}…", lambda _=False, p=panel: self.ask_picture(p)) for panel, name in self.panels.items()
        }
        self.view_picture_actions = {
            view: action(f"{VIEW_BUTTONS[view]} view…", lambda _=False, v=view: self.ask_picture(window.views.page(v))) for view in views
        }
        self.candidates_action = action(
            "Candidates table (CSV)…", lambda: self.ask_table("candidates"),
            "This step's candidates: raw logit, every sampling stage, final probability",
        )  # fmt: skip
        self.history_action = action(
            "History table (CSV)…", lambda: self.ask_table("history"),
            "One row per step: token, probability, rank, entropy, cache length, times",
        )  # fmt: skip
        self.why_action = action(
            "Why table (CSV)…", lambda: self.ask_table("why"),
            "The Why view's split of the logit: one row per part (embedding, each head, each MLP…), summing to the logit",
        )  # fmt: skip
        self.copy_text_action = action("Copy text", self.copy_text, "Copy the prompt and the generated text, as plain text")
        self.copy_picture_action = action(
            "Copy picture of the window", lambda: self.copy_picture(window), "Copy the whole window as a picture (2×)"
        )
        memory.return_large_buffers()  # a 16 MiB picture freed is given back, not kept by the process
        self.writer = ExportWriter(self)
        self.writer.written.connect(self._on_writer_written)
        self.buttons = [PanelMenuButton(panel, self) for panel in self.panels if isinstance(panel, QGroupBox)]
        window.resultApplied.connect(self._on_window_result_applied)
        self._on_window_result_applied(None)

    def add_to(self, bar: QMenuBar) -> None:
        """File → Export and the Edit entries, in ``bar`` (File and Edit made first if not there yet)."""
        file_menu = _menu(bar, "&File", 0)
        if file_menu.actions():
            file_menu.addSeparator()
        export = file_menu.addMenu("&Export")
        export.addAction(self.window_picture_action)
        panel_menu = export.addMenu("Picture of a panel")
        for a in [*self.panel_picture_actions.values(), *self.view_picture_actions.values()]:
            panel_menu.addAction(a)
        export.addSeparator()
        export.addAction(self.candidates_action)
        export.addAction(self.history_action)
        export.addAction(self.why_action)
        edit = _menu(bar, "&Edit", 1)
        edit.addAction(self.copy_text_action)
        edit.addAction(self.copy_picture_action)

    def _title(self, target: QWidget) -> str:
        """"Attention" for the panel titled "3 · Attention: where each position looks"; "Inside view" for a view."""
        index = self.window.views.indexOf(target)
        if index >= 0:
            return f"{VIEW_BUTTONS[list(VIEWS)[index]]} view"
        return self.panels.get(target, "panel")

    def name(self, target: QWidget) -> str:
        if target is self.window:
            return "the window"
        name = self._title(target)
        return f"the {name}" if name.endswith(" view") else f"the {name} panel"

    # ------------------------------------------------------------ commands
    def export_picture(self, target: QWidget, path) -> bool:
        """Save ``target`` (the window or a panel, brought into view first) to ``path``: SVG if the
        name ends in .svg, else PNG at twice its size on screen. The picture is taken now; a PNG is
        encoded and written on the export thread: True then means it was started (``saved`` says how
        it ended). Says the outcome on the status line."""
        path = Path(path)
        what = f"a picture of {self.name(target)}"
        self.reveal(target)
        try:
            tables.check_writable(path)
            with self._without_buttons(target):
                if path.suffix.lower() == ".svg":
                    pictures.save_svg(target, path, f"nexttoken: {self.name(target)}")
                    return self._on_writer_written(Written(what, path, "SVG drawing"))
                image = pictures.picture(target)
        except (OSError, ValueError) as exc:
            return self._failed(f"Could not save {what} to {path}", exc)
        self.status(f"Saving {what} to {path}…")
        self.writer.submit(lambda: write_png(image, path, what), what)
        return True

    def export_table(self, which: str, path) -> bool:
        """Write the ``which`` table ("candidates", "history" or "why", see app.logic.tables) to ``path`` as CSV.
        The history is written on the writer's thread: True then means it was started (refused at
        once: nothing to export, a folder that cannot be written); ``tableSaved`` says how it ended."""
        what = f"the {TABLES[which][0].lower()}"
        path = Path(path)
        result = self.window.state.result
        try:
            tables.check(result)
            why = self.window.views.built_page("why")  # not built yet: it has split nothing
            source = result if which != "why" else why.answer if why is not None else None
            if which == "why" and (source is None or source.attribution.step != result.trace.step):
                raise tables.TableError("the Why view has not split this step's logit yet: open it (Alt+4) and wait for its parts")
            tables.check_writable(path)
        except (OSError, tables.TableError) as exc:
            return self._failed(f"Could not save {what} to {path}", exc)
        if which not in ON_A_THREAD:
            return self._on_writer_written(write_table(which, source, path))
        self.status(f"Saving {what} ({len(result.records):,} rows) to {path}…")
        self.writer.submit(lambda: write_table(which, result, path), what)
        return True

    def waiting(self) -> str:
        """The words for quitting while exports are still being written ("" when none is): quitting
        waits for them (``writer.close``), a few seconds at most."""
        pending = self.writer.pending
        if not pending:
            return ""
        what = pending[0] if len(pending) == 1 else f"{len(pending)} exports"
        return f"Waiting for {what} to be written before quitting…"

    def left_behind(self, left: tuple[str, ...]) -> str:
        """The words for quitting without the exports ``left`` (``writer.close`` waited for them in vain)."""
        what, was = (left[0], "it was") if len(left) == 1 else (f"{len(left)} exports", "they were")
        return (f"Quitting without {what}: {was} still being written after {export_writer.CLOSE_WAIT_S:g} s "
                "(a file already at that path is left as it was).")

    def _on_writer_written(self, outcome: Written) -> bool:
        self.saved.emit(outcome)
        if outcome.error is not None:
            return self._failed(f"Could not save {outcome.what} to {outcome.path}", outcome.error)
        self.folder = outcome.path.parent
        self.status(f"Saved {outcome.what} ({outcome.detail}) to {outcome.path}.")
        return True

    def copy_text(self) -> str:
        """Put the prompt and the generated text on the clipboard, as plain text; return it."""
        result = self.window.state.result
        if result is None:
            self.status("Nothing to copy yet: the model is still loading.", error=True)
            return ""
        try:
            text = tables.text(result)
        except tables.TableError as exc:
            self._failed("Could not copy the text", exc)
            return ""
        QApplication.clipboard().setText(text)
        self.status(f"Copied the prompt and the generated text ({len(text):,} characters).")
        return text

    def copy_picture(self, target: QWidget) -> bool:
        """Put a picture of ``target`` at twice its size on screen on the clipboard."""
        self.reveal(target)
        try:
            with self._without_buttons(target):
                image = pictures.copy(target)
        except ValueError as exc:
            return self._failed(f"Could not copy a picture of {self.name(target)}", exc)
        self.status(f"Copied a picture of {self.name(target)} ({image.width():,} × {image.height():,} pixels).")
        return True

    def reveal(self, target: QWidget) -> None:
        """Bring ``target`` on screen at its laid-out size: its view, its page of panels, every panel
        if another is focused."""
        w = self.window
        if target is not w and not target.isVisible():
            index = w.views.indexOf(target)
            w.show_view(list(VIEWS)[index] if index >= 0 else "overview")
            if index < 0:
                if w.focus.focused is not None and w.focus.focused is not target:
                    w.focus.toggle(None)
                if target in w.overview.panels():
                    w.overview.show_panel(target)
        # the layout passes a change of focus or page posted, before it is pictured: each pass can post
        # the next (a new page's splitter, then the panels in it), and a panel shown by the last change
        # is visible before it has its size (0 x 0 until then)
        for _ in range(LAYOUT_PASSES):
            QApplication.sendPostedEvents(None, QEvent.Type.LayoutRequest)

    @contextmanager
    def _without_buttons(self, target: QWidget):
        """The panels' "?" and "⋯" buttons hidden while ``target`` is pictured: not part of a slide.
        Afterwards the plots (drawn uncached for the picture) repaint one per event-loop turn: all in
        one turn, rebuilding their caches, held the loop 100-1,000 ms after a window's picture."""
        buttons = [b for b in target.findChildren(QToolButton) if isinstance(b, CornerButton) and b.isVisible()]
        for b in buttons:
            b.hide()
        try:
            yield
        finally:
            for b in buttons:
                b.show()
            self.window.painter.repaint_later()

    # ------------------------------------------------------------ dialogs
    def ask_picture(self, target: QWidget) -> None:
        self.reveal(target)  # seen while choosing where it goes
        svg = pictures.has_plot(target)
        filters = "PNG picture, 2× (*.png)" + (";;SVG drawing (*.svg)" if svg else "")
        path, chosen = QFileDialog.getSaveFileName(
            self.window, f"Save a picture of {self.name(target)}", str(self.folder / f"{self._stem(target)}.png"), filters
        )
        if path:
            if not Path(path).suffix:
                path += ".svg" if chosen.startswith("SVG") else ".png"
            self.export_picture(target, path)

    def ask_table(self, which: str) -> None:
        title = TABLES[which][0]
        path, _ = QFileDialog.getSaveFileName(
            self.window, f"Save the {title.lower()}", str(self.folder / f"{self._stem(None, which)}.csv"), "CSV table (*.csv)"
        )
        if path:
            self.export_table(which, path if Path(path).suffix else path + ".csv")

    def _stem(self, target: QWidget | None, what: str = "") -> str:
        """A file name: nexttoken-<what>-step<N>."""
        if not what:
            what = "window" if target is self.window else re.sub(r"[^a-z0-9]+", "-", self._title(target).lower()).strip("-")
        result = self.window.state.result
        step = f"-step{result.trace.step}" if result is not None and result.trace is not None else ""
        return f"nexttoken-{what}{step}"

    def _failed(self, what: str, exc: Exception) -> bool:
        log.warning("%s: %s", what, exc)
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        self.status(f"{what}: {reason}.", error=True)
        return False

    def _on_window_result_applied(self, result) -> None:
        has_step = result is not None and result.trace is not None
        self.candidates_action.setEnabled(has_step)
        self.history_action.setEnabled(has_step)
        self.why_action.setEnabled(has_step)


class PanelMenuButton(CornerButton):
    """A small "⋯" in ``panel``'s title row, left of its "?": copy or save a picture of the panel."""

    def __init__(self, panel: QWidget, actions: ExportActions):
        super().__init__(panel, "⋯", "Copy or save a picture of this panel", slot=1)  # the "?" is right of it
        self.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        self.setStyleSheet("QToolButton::menu-indicator { image: none; }")  # "⋯" says it is a menu
        menu = QMenu(self)
        menu.addAction("Copy picture", lambda: actions.copy_picture(panel))
        menu.addAction("Export picture…", lambda: actions.ask_picture(panel))
        self.setMenu(menu)


def _menu(bar: QMenuBar, title: str, place: int) -> QMenu:
    """The menu ``title`` of ``bar``, or a new one put at ``place`` among its menus."""
    for a in bar.actions():
        if a.menu() is not None and a.text().replace("&", "") == title.replace("&", ""):
            return a.menu()
    menu = QMenu(title, bar)
    actions = bar.actions()
    if place < len(actions):
        bar.insertMenu(actions[place], menu)
    else:
        bar.addMenu(menu)
    return menu
