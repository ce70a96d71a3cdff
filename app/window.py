"""The main window: layout and wiring. Controls, menus and the six panels, joined to the controller
(requests and results), the player (play state) and the paint scheduler (when results are drawn).

The window owns no plot state: each result goes through ``PaintScheduler`` to ``AppState`` and
every panel draws itself from there.
"""

from __future__ import annotations

import logging

import pyqtgraph as pg
from PySide6.QtCore import QEvent, QSettings, Qt, Signal
from PySide6.QtGui import QAction, QCursor, QKeySequence
from PySide6.QtWidgets import (
    QApplication,
    QButtonGroup,
    QCheckBox,
    QDoubleSpinBox,
    QFileDialog,
    QGraphicsItem,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QMainWindow,
    QMessageBox,
    QProgressDialog,
    QPushButton,
    QStackedWidget,
    QToolButton,
    QSizePolicy,
    QStyle,
    QStyleOptionGroupBox,
    QToolBar,
    QVBoxLayout,
    QWidget,
)

from engine import paths
from engine.defaults import truncation_keeps

from . import guard
from . import theme as th
from .controller import SessionController
from .export_actions import ExportActions
from .guard import guarded
from .paint_scheduler import PaintScheduler
from .stage_layout import StageArea
from .panels.attention_panel import AttentionPanel
from .panels.branches_panel import BranchesPanel
from .panels.embeddings_panel import EmbeddingsPanel
from .panels.cache_panel import CachePanel
from .panels.inside_panel import InsidePanel
from .panels.kv_panel import KVPanel, human_bytes
from .panels.logits_panel import LogitsPanel
from .panels.sampling_panel import SamplingPanel
from .panels.stages_panel import StagesPanel
from .panels.tokens_panel import TokensPanel
from .player import Player
from .about import about_text
from .help import panel_help
from .help_dialog import HelpButton, HelpDialog
from .result import SessionResult
from .state import AppState
from .views import VIEW_ALIASES, VIEW_BUTTONS, VIEWS

log = logging.getLogger(__name__)

GPT2_SMALL = "gpt2"
PREFERENCE_LAST_MODEL = "model/last"
PREFERENCE_GEOMETRY = "window/geometry"


class MainWindow(QMainWindow):
    """nexttoken's window. ``start()`` loads the first model; closing it stops the engine."""

    resultApplied = Signal(object)  # SessionResult, after every panel has drawn it
    errorShown = Signal(str)

    def __init__(
        self, preferences: QSettings | None = None, *, projector: bool = False, remember: bool = True, engine: str = "process"
    ):
        """``preferences``: where the last model used is remembered (``remember``); ``engine``: where
        the model runs, "process" (a child process) or "thread" (see app.controller)."""
        super().__init__()
        th.configure_pyqtgraph()
        self.preferences = preferences if preferences is not None else QSettings("nexttoken", "nexttoken")
        self.remember = remember
        self.state = AppState(self)
        self.controller = SessionController(self, engine=engine)
        self._loading_source: str | None = None
        self._progress: QProgressDialog | None = None
        self._download_cancelled = False  # Cancel pressed: progress reports still on their way are ignored
        self._closed = False
        self.focused: QWidget | None = None  # the panel shown alone (toggle_focus), or None
        self.prompt_refused = ""  # why the editor's prompt cannot run (Step is off meanwhile), or ""
        self._viewing = False  # a session opened from a file without its model is on screen

        self.setWindowTitle("nexttoken — watch GPT-2 pick its next token")
        self.resize(1600, 1000)
        self._build_panels()
        panels = (self.embeddings, self.attention, self.logits, self.kv)
        plot_views = [v for panel in panels for v in panel.plot_views()]
        for view in plot_views:  # an axis is text: keep it as a pixmap until its range changes
            for item in view.scene().items():
                if isinstance(item, pg.AxisItem):
                    item.setCacheMode(QGraphicsItem.CacheMode.DeviceCoordinateCache)
        self.painter = PaintScheduler(self.state, plot_views, self.controller.is_current, self)
        self.player = Player(self.controller, self.step, self._can_go_on, self)
        self._build_actions()
        self._build_menus()
        self._build_export_menus()
        self.file_menu.addSeparator()
        self.file_menu.addAction(self.quit_action)
        for view in self.findChildren(pg.GraphicsView):  # pyqtgraph's own right-click Export… fails on SVG
            view.scene().contextMenu = []  # here (pyqtgraph #3485): File → Export and each panel's ⋯ do it
        self._build_toolbar()
        self.model_label = QLabel("no model loaded")
        self.status_label = QLabel("Starting…")
        self.truncate_button = QPushButton("Keep only the last tokens that fit")
        self.truncate_button.setToolTip("The prompt is longer than the model reads: use only its end")
        self.truncate_button.clicked.connect(self._on_truncate_button_clicked)
        self.truncate_button.hide()  # shown while a too-long prompt is refused
        self.restart_button = QPushButton("Restart the model")
        self.restart_button.clicked.connect(self._on_restart_action_triggered)
        self.restart_button.hide()  # shown once the engine was not restarted by itself
        # a line of labels that wrap, under the panels (a QStatusBar's labels do not wrap: a long
        # message widened the whole window)
        for label in (self.status_label, self.model_label):
            label.setTextFormat(Qt.PlainText)  # token text such as <|endoftext|> is text, not a tag
            label.setWordWrap(True)
            label.setSizePolicy(QSizePolicy.Ignored, QSizePolicy.Preferred)
        self.model_label.setAlignment(Qt.AlignRight | Qt.AlignVCenter)
        bar = QHBoxLayout()
        bar.setContentsMargins(8, 0, 8, 0)
        bar.addWidget(self.status_label, 2)  # a step's line fits on one line at 1280 px, projector
        bar.addWidget(self.truncate_button)
        bar.addWidget(self.restart_button)
        bar.addWidget(self.model_label, 1)
        self._outer_layout.addLayout(bar)

        c = self.controller
        c.resultReady.connect(self.painter.submit)
        c.errorOccurred.connect(self._on_controller_error)
        c.busyChanged.connect(self._on_controller_busy)
        c.downloadProgress.connect(self._on_controller_download_progress)
        c.modelLoaded.connect(self._on_controller_model_loaded)
        c.engineRestarted.connect(self._on_controller_engine_restarted)
        c.engineStopped.connect(self._on_controller_engine_stopped)
        c.noticed.connect(self._set_status)
        self.painter.resultStarted.connect(self._on_painter_result_started)
        self.painter.resultApplied.connect(self.resultApplied)
        self.painter.resultApplied.connect(self._on_painter_result_applied)
        self.player.playingChanged.connect(self._on_player_playing_changed)
        self.tokens.promptEdited.connect(self._on_tokens_prompt_edited)
        self.logits.tokenChosen.connect(self._on_logits_token_chosen)
        self.inside.inspectRequested.connect(c.inspect)
        self.cache_view.inspectRequested.connect(c.inspect)
        self.branches_view.switchRequested.connect(self._on_branches_switch_requested)
        c.insideReady.connect(self._on_controller_inside_ready)
        self.sampling.set_settings(c.settings)
        self.sampling.settingsChanged.connect(c.set_settings)
        self.state.subscribe_theme(self._on_state_theme)
        self.state.themeChanged.connect(self._on_state_theme_changed)
        guard.reporter().occurred.connect(self._on_guard_occurred)
        if projector:
            self.projector_action.setChecked(True)  # setChecked does not emit triggered
            self.state.set_projector(True)  # at once: nothing is drawn yet
        self._sync_actions()

    # ------------------------------------------------------------- building
    def _build_panels(self) -> None:
        s = self.state
        self.tokens = TokensPanel(s)
        self.embeddings = EmbeddingsPanel(s)
        self.attention = AttentionPanel(s)
        self.logits = LogitsPanel(s)
        self.sampling = SamplingPanel(s)
        self.kv = KVPanel(s)
        # in the order the model computes; a column's panels one above the other
        columns = [[self.embeddings, self.attention], [self.logits, self.sampling], [self.kv]]
        weights = {self.embeddings: 2, self.attention: 3, self.logits: 3, self.sampling: 2, self.kv: 2}
        self.stages = StageArea(columns, weights)
        s.topNChanged.connect(lambda _n: self.stages.relayout())  # more rows of candidates: more room
        self.help_keys = {
            self.tokens: "tokens", self.embeddings: "embeddings", self.attention: "attention",
            self.logits: "logits", self.sampling: "sampling", self.kv: "kv",
        }
        self.help_buttons = {}
        for panel in (self.tokens, *self.stages.panels()):
            panel.installEventFilter(self)  # a double-click on a panel's title focuses it
            self.help_buttons[panel] = HelpButton(panel, lambda _=False, p=panel: self.show_help(p))
        self._help: HelpDialog | None = None
        central = QWidget()
        layout = QVBoxLayout(central)
        layout.setContentsMargins(6, 2, 6, 2)
        layout.setSpacing(4)
        layout.addWidget(self.tokens)
        layout.addWidget(self.stages, 1)
        self._central_layout = layout
        overview = central
        self.inside = InsidePanel(s)
        self.sampling_view = StagesPanel(s)
        self.cache_view = CachePanel(s)
        self.branches_view = BranchesPanel(s)
        # the views, one at a time, chosen by buttons in the menu bar's free corner (Alt+1 to Alt+4):
        # no row of their own, so the panels keep every pixel of height. Not a QTabWidget: its tab
        # bar re-measured itself on every layout pass a step set off (+10 ms a drawn step).
        self.views = QStackedWidget()
        switcher = QWidget()
        row = QHBoxLayout(switcher)
        row.setContentsMargins(0, 0, 4, 0)
        row.setSpacing(2)
        row.addWidget(QLabel("View:"))
        self.view_buttons = QButtonGroup(self)
        pages = (overview, self.inside, self.sampling_view, self.cache_view, self.branches_view)
        for index, (widget, (name, title)) in enumerate(zip(pages, VIEWS.items())):
            self.views.addWidget(widget)
            button = QToolButton()
            button.setText(VIEW_BUTTONS[name])
            button.setCheckable(True)
            button.setAutoRaise(True)
            button.setShortcut(QKeySequence(f"Alt+{index + 1}"))
            button.setToolTip(f"{title} (Alt+{index + 1}; nexttoken --view {name})")
            self.view_buttons.addButton(button, index)
            row.addWidget(button)
        self.view_buttons.button(0).setChecked(True)
        self.view_buttons.idClicked.connect(self.views.setCurrentIndex)
        self._view_switcher = switcher  # goes into the menu bar's corner once the menus exist
        central = QWidget()
        outer = QVBoxLayout(central)
        outer.setContentsMargins(0, 0, 0, 2)
        outer.setSpacing(2)
        outer.addWidget(self.views, 1)
        self._outer_layout = outer  # the views, then the status line under all of them
        self.setCentralWidget(central)

    def _build_actions(self) -> None:
        def action(text, slot, keys=(), tip=""):
            a = QAction(text, self)
            a.setShortcuts([QKeySequence(k) for k in keys])
            a.setShortcutContext(Qt.WindowShortcut)
            a.setToolTip(tip or text)
            a.triggered.connect(slot)
            self.addAction(a)
            return a

        # Page Down / Page Up: what a presentation clicker sends
        self.step_action = action(
            "Step ▶", self.step, (Qt.Key_Space, Qt.Key_Right, Qt.Key_PageDown), "Run one step: one new token (Space, → or Page Down)"
        )
        self.back_action = action("◀ Back", self.back, (Qt.Key_Left, Qt.Key_PageUp), "Go back one step (← or Page Up); the steps after it stay as a branch (View: Branches)")
        self.play_action = action("Play", self.toggle_play, (Qt.Key_P,), "Play or pause (P)")
        self.play_action.setCheckable(True)
        self.reset_action = action("Reset", self.reset, (), "Drop every step, keep the prompt")
        self.demo_action = action("Tiny demo model (bundled)", lambda: self.load_model(None))
        bundled = any(d.name == GPT2_SMALL for d in paths.bundled_model_dirs())
        where = "bundled" if bundled else "downloads about 550 MB once"
        self.gpt2_action = action(f"GPT-2 small (124M, {where})", lambda: self.load_model(GPT2_SMALL))
        self.folder_action = action("Open a model folder…", self._on_folder_action_triggered, ("Ctrl+Shift+O",))
        self.open_action = action(
            "Open session…", self._on_open_action_triggered, (QKeySequence.Open,), "Show a saved session again, every branch (Ctrl+O)"
        )
        self.save_action = action(
            "Save session…", self._on_save_action_triggered, (QKeySequence.Save,),
            "Save every step of every branch, with the numbers the panels draw, to one .npz file (Ctrl+S)",
        )
        self.restart_action = action("Restart the model", self._on_restart_action_triggered, (), "Start the model's process again")
        self.restart_action.setEnabled(False)
        self.quit_action = action("Quit", self.close, (QKeySequence.Quit,))
        self.no_cache_action = action(
            "Generate without the KV cache (slower: every step runs the whole sequence again)", self._on_no_cache_toggled
        )
        self.no_cache_action.setCheckable(True)
        self.projector_action = action("Projector mode (large fonts, high contrast)", self._on_projector_toggled, (Qt.Key_F5,))
        self.projector_action.setCheckable(True)
        self.full_screen_action = action("Full screen", self._on_full_screen_triggered, (Qt.Key_F11,))
        self.full_screen_action.setCheckable(True)
        self.focus_actions = [
            action(f"Focus: {panel.title()}", lambda _=False, p=panel: self.toggle_focus(p), (f"Ctrl+{i}",),
                   "Show this panel alone, filling the window (again, or Ctrl+0, or Escape: every panel)")
            for i, panel in enumerate((self.tokens, *self.stages.panels()), start=1)
        ]
        self.unfocus_action = action("Show every panel", lambda: self.toggle_focus(None), ("Ctrl+0", Qt.Key_Escape))
        self.about_action = action("About nexttoken", self._on_about_action_triggered)
        self.help_action = action(
            "What am I looking at?", self._on_help_action_triggered, (Qt.Key_F1,),
            "Explain the panel under the mouse (or with the keyboard focus), with its current numbers (F1)",
        )
        self.glossary_action = action("Glossary", lambda: self.show_help(None))

    def _build_menus(self) -> None:
        self.menuBar().setCornerWidget(self._view_switcher, Qt.TopRightCorner)
        file = self.menuBar().addMenu("&File")
        file.addAction(self.open_action)
        file.addAction(self.save_action)
        self.file_menu = file
        model = self.menuBar().addMenu("&Model")
        for a in (self.demo_action, self.gpt2_action, self.folder_action):
            model.addAction(a)
        extra = [d for d in paths.bundled_model_dirs() if d.name not in (paths.DEMO_MODEL_NAME, GPT2_SMALL)]
        if extra:  # a classroom build with more checkpoints inside (packaging/build.py --model-dir)
            model.addSeparator()
        for folder in extra:
            model.addAction(f"{folder.name} (bundled)", lambda name=folder.name: self.load_model(name))
        model.addSeparator()
        model.addAction(self.restart_action)
        view = self.menuBar().addMenu("&View")
        view.addAction(self.projector_action)
        view.addAction(self.full_screen_action)
        view.addSeparator()
        for a in (*self.focus_actions, self.unfocus_action):
            view.addAction(a)
        run = self.menuBar().addMenu("&Run")
        for a in (self.step_action, self.back_action, self.play_action, self.reset_action):
            run.addAction(a)
        run.addSeparator()
        run.addAction(self.no_cache_action)
        help_menu = self.menuBar().addMenu("&Help")
        help_menu.addAction(self.help_action)
        help_menu.addAction(self.glossary_action)
        help_menu.addSeparator()
        help_menu.addAction(self.about_action)

    # ------------------------------------------------------------ export (app/export_actions.py)
    def _build_export_menus(self) -> None:
        """File → Export, Edit → Copy text / Copy picture, and a "⋯" menu on each titled panel."""
        panels = [self.tokens, *self.stages.panels(), self.inside, self.sampling_view, self.cache_view, self.branches_view]
        self.exporter = ExportActions(self, panels, lambda text, error=False: self._set_status(text, error=error))
        self.exporter.add_to(self.menuBar())

    def export_picture(self, target: QWidget, path) -> bool:
        """Save a picture of ``target`` (the window or a panel): SVG for a .svg path, else PNG at 2x."""
        return self.exporter.export_picture(target, path)

    def export_table(self, which: str, path) -> bool:
        """Save the "candidates" or "history" table (app.tables) to ``path`` as CSV."""
        return self.exporter.export_table(which, path)

    def copy_text(self) -> str:
        return self.exporter.copy_text()

    def _build_toolbar(self) -> None:
        bar = QToolBar("Controls")
        bar.setMovable(False)
        bar.setToolButtonStyle(Qt.ToolButtonTextOnly)
        bar.addAction(self.back_action)
        bar.addAction(self.step_action)
        bar.addAction(self.play_action)
        bar.addWidget(QLabel("  speed "))
        self.speed = QDoubleSpinBox(minimum=0.5, maximum=30.0, singleStep=0.5, value=3.0, suffix=" tokens/s")
        self.speed.setToolTip("How fast Play steps")
        self.speed.valueChanged.connect(self._on_speed_value_changed)
        bar.addWidget(self.speed)
        self.max_speed = QCheckBox("max")
        self.max_speed.setToolTip("Play as fast as the model computes: each step starts as soon as the last one ends")
        self.max_speed.toggled.connect(self._on_max_speed_toggled)
        bar.addWidget(self.max_speed)
        bar.addSeparator()
        bar.addAction(self.reset_action)
        bar.addSeparator()
        self.keys_hint = QLabel("  keys: Space / → step · ← back · P play")
        bar.addWidget(self.keys_hint)
        self.addToolBar(bar)
        self.toolbar = bar

    # ------------------------------------------------------------- commands
    def start(self, model: str | None = None, prompt: str = "", *, fallback: bool = True) -> None:
        """Load ``model`` (default: the last one used, else the demo) with ``prompt``."""
        if model is None and self.remember:
            model = self.preferences.value(PREFERENCE_LAST_MODEL, "") or None
        self.load_model(model, prompt=prompt, fallback=fallback)

    def load_model(self, source: str | None, *, prompt: str = "", fallback: bool = False, loaded=None) -> None:
        self._loading_source = source
        self.pause()
        what = f"{paths.DEMO_MODEL_NAME} (the tiny demo model)" if source is None and loaded is None else (source or "the model")
        self._set_status(f"Loading {what}… The window works meanwhile; Step waits until the model is ready.")
        self.controller.load(source, loaded=loaded, fallback=fallback, prompt=prompt or self.tokens.prompt())

    def step(self) -> None:
        if self.prompt_refused:  # the chips show another prompt than the editor: never run it silently
            self._set_status(self.prompt_refused, error=True)
            return
        if self.state.result is not None and not self.state.result.can_step:
            self._set_status(self.state.result.why_not, error=True)
            return
        if self.state.result is not None and self.state.result.stopped:
            self._set_status(self.state.result.trace.stop_message if self.state.result.trace else "Stopped.")
            return
        self.controller.step()

    def back(self) -> None:
        self.pause()
        self.controller.back()

    def switch_branch(self, node: int) -> None:
        """Show the branch through tree ``node`` (``engine.branches``) as it was."""
        self.pause()
        self.controller.switch(node)

    def save_session(self, path: str) -> None:
        """Save the session (every branch) to ``path``; the status line says how it went."""
        self._set_status(f"Saving the session to {path}…")
        self.controller.save_session(path)

    def open_session(self, path: str, step: int = -1) -> None:
        """Show the session saved in ``path`` at ``step`` (-1: where it was saved); a refused file changes nothing."""
        self.pause()
        self._set_status(f"Opening {path}…")
        self.controller.open_session(path, step)

    def reset(self) -> None:
        self.pause()
        self.controller.reset()

    def toggle_play(self) -> None:
        self.player.toggle()

    def play(self) -> None:
        self.player.play()

    def pause(self) -> None:
        self.player.pause()

    @property
    def playing(self) -> bool:
        return self.player.playing

    def apply_result(self, result: SessionResult) -> None:
        """Draw ``result`` in every panel now (spread over event-loop turns; see PaintScheduler)."""
        self.painter.apply(result)

    @property
    def turn_ms(self) -> list[float]:
        """How long each event-loop turn of the latest result's drawing took (benchmarks read it)."""
        return self.painter.turn_ms

    def show_view(self, name: str) -> None:
        """Bring view ``name`` (one of VIEWS) to the front; the others stay a tab away."""
        index = list(VIEWS).index(VIEW_ALIASES.get(name, name))
        self.view_buttons.button(index).setChecked(True)
        self.views.setCurrentIndex(index)

    def _can_go_on(self) -> bool:
        return not (self.state.result is not None and self.state.result.stopped)

    # ------------------------------------------------------------ results
    def _on_tokens_prompt_edited(self, text: str) -> None:
        if not text.strip():
            self.pause()
            self.prompt_refused = "The prompt is empty: type some text; Step then runs it (the tokens shown are of the last prompt that ran)."
            self._set_status(self.prompt_refused, error=True)
            self._sync_actions()
            return
        self.controller.set_prompt(text)

    def _on_painter_result_started(self, result: SessionResult) -> None:
        if result.kind in ("load", "prompt", "open"):
            self.truncate_button.hide()
            self.prompt_refused = ""
        if result.kind == "open":  # the file's settings are the person's now (the tokens panel shows its prompt)
            self.sampling.set_settings(self.controller.settings)
            if not result.can_step:
                self.model_label.setText(f"Viewing a session made with {result.info.name} (not loaded)")
                self.model_label.setToolTip(result.why_not)
                self._viewing = True
        elif self._viewing and result.can_step:  # a new prompt or Reset left the file: the loaded model again
            self._viewing = False
            self._on_controller_model_loaded(result.info)
        if result.message:
            self._set_status(result.message)
        if result.stopped:
            self.pause()
        self._sync_actions()

    def _on_painter_result_applied(self, result: SessionResult) -> None:
        if result.kind == "load":  # a model's own axis titles: the panels may need other room
            self.stages.relayout()

    def _on_controller_error(self, kind: str, message: str) -> None:
        self.pause()
        if kind == "prompt_too_long" and self.state.result is not None:
            keep = truncation_keeps(self.state.result.info.n_positions)
            self.truncate_button.setText(f"Keep only the last {keep:,} tokens")
            self.truncate_button.show()
        if kind in ("prompt_too_long", "prompt"):  # the editor shows a prompt that cannot run: say so, no Step
            self.prompt_refused = f"{message} Step is off until the prompt can run."
            message = self.prompt_refused
        if kind == "load":
            self._close_progress()
            self._download_cancelled = False
            prior = self.state.result
            if prior is not None and prior.info.name not in message:
                message += f" Still using {prior.info.name}."
        self._set_status(message, error=True)
        self._sync_actions()
        self.errorShown.emit(message)

    def _on_controller_engine_restarted(self, why: str) -> None:
        """The model's process died and a fresh one started: load the model shown again (its steps
        are lost with the process; the prompt and the sampling settings are kept). A step of the
        dead process still waiting to be drawn is dropped, so the message stays until the new
        process is ready."""
        self.painter.drop_stale()
        self._reload_model()
        self._on_controller_error(
            "engine", f"{why} Loading the model again: its steps were lost; the prompt and your sampling settings are kept."
        )

    def _reload_model(self) -> None:
        info = self.state.result.info if self.state.result is not None else None
        source = None if info is None or info.is_demo else info.source
        self.load_model(source, prompt=self.tokens.prompt(), fallback=True)

    def _on_controller_engine_stopped(self, message: str) -> None:
        self.painter.drop_stale()
        self.restart_action.setEnabled(True)
        self.restart_button.show()
        self._on_controller_error("engine", message)

    def _on_restart_action_triggered(self) -> None:
        self.restart_action.setEnabled(False)
        self.restart_button.hide()
        self.controller.restart_engine()
        self._reload_model()

    def _on_controller_inside_ready(self, answer) -> None:
        if self.inside.wants(answer.trace):
            self.inside.show_inside(answer.trace, answer.pieces)
        if self.cache_view.wants(answer.trace):
            self.cache_view.show_inside(answer.trace)

    def _on_no_cache_toggled(self, on: bool) -> None:
        self.controller.set_use_cache(not on)

    def _on_guard_occurred(self, message: str) -> None:
        self._set_status(message, error=True)

    def _on_controller_busy(self, busy: bool) -> None:
        if busy:
            QApplication.setOverrideCursor(Qt.BusyCursor) if not QApplication.overrideCursor() else None
        else:
            while QApplication.overrideCursor():
                QApplication.restoreOverrideCursor()

    def _on_controller_download_progress(self, done: int, total: int) -> None:
        if self._download_cancelled:  # reports sent before the download heard of the cancel
            return
        if self._progress is None:
            self._progress = QProgressDialog(f"Downloading {self._loading_source}…", "Cancel", 0, 100, self)
            self._progress.setWindowTitle("Downloading a model")
            self._progress.setWindowModality(Qt.WindowModal)
            self._progress.setMinimumDuration(0)
            self._progress.canceled.connect(self._on_progress_canceled)
        dialog = self._progress  # setValue runs the event loop (a modal dialog): the load may end and close it
        dialog.setLabelText(f"Downloading {self._loading_source}: {human_bytes(done)} of {human_bytes(total) if total else '?'}")
        dialog.setValue(int(100 * done / total) if total else 0)

    def _on_progress_canceled(self) -> None:
        """Cancel pressed: the download stops at its next report and the load fails with a message
        (``_on_controller_error``); the session shown meanwhile stays usable."""
        self._download_cancelled = True
        self._close_progress()
        if self.controller.cancel_load():
            self._set_status(f"Cancelling the download of {self._loading_source}…")

    def _close_progress(self) -> None:
        if self._progress is not None:
            self._progress.blockSignals(True)  # closing emits canceled: only the Cancel button cancels
            self._progress.close()
            self._progress.deleteLater()
            self._progress = None

    def _on_controller_model_loaded(self, info) -> None:
        self._download_cancelled = False
        self._close_progress()
        if info.is_demo:  # one calm line: what this model is for, and how to get a real one
            self.model_label.setText("Tiny demo model (Model → GPT-2 small)")
            self.model_label.setToolTip(
                f"{info.label}. It writes word salad; for real text: Model → GPT-2 small. GPT-2 small (124M) downloads once (about 550 MB) from the Model menu; for a "
                "classroom without a network, build the installer with packaging/build.py --model-dir to bundle it."
            )
        else:
            self.model_label.setText(f"Model: {info.name}")
            self.model_label.setToolTip(info.label)
        if self.remember:
            self.preferences.setValue(PREFERENCE_LAST_MODEL, "" if info.is_demo else (self._loading_source or info.source))

    def _on_truncate_button_clicked(self) -> None:
        self.controller.set_prompt(self.tokens.prompt(), truncate=True)

    def _on_logits_token_chosen(self, token_id: int) -> None:
        self.pause()
        self.controller.choose(token_id)

    def _on_player_playing_changed(self, playing: bool) -> None:
        self.play_action.setChecked(playing)
        self.play_action.setText("Pause" if playing else "Play")
        self.painter.fast = playing and self.player.max_speed
        if not playing:
            self.painter.flush()  # a step held back by max speed's slow frame rate: show it now

    def _on_speed_value_changed(self, value: float) -> None:
        self.player.set_speed(value)

    def _on_max_speed_toggled(self, on: bool) -> None:
        self.speed.setEnabled(not on)
        self.player.set_max_speed(on)
        self.painter.fast = on and self.player.playing

    def _on_branches_switch_requested(self, node: int) -> None:
        self.switch_branch(node)

    def _on_save_action_triggered(self) -> None:
        path, _ = QFileDialog.getSaveFileName(self, "Save the session", "session.npz", "nexttoken sessions (*.npz)")
        if path:
            self.save_session(path)

    def _on_open_action_triggered(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Open a saved session", "", "nexttoken sessions (*.npz)")
        if path:
            self.open_session(path)

    def _on_folder_action_triggered(self) -> None:
        folder = QFileDialog.getExistingDirectory(self, "Open a GPT-2 model folder (with config.json)")
        if folder:
            self.load_model(folder)

    def _on_projector_toggled(self, on: bool) -> None:
        self.painter.restyle(self.state.stage_projector(bool(on)))

    def _on_state_theme(self, theme: th.Theme) -> None:
        font = theme.font()
        th.apply_tooltip_font(theme)
        self.setFont(font)
        self.menuBar().setFont(font)
        self.toolbar.setFont(theme.font(0, bold=True))
        for label in (self.status_label, self.model_label):
            label.setFont(theme.font(-1))

    def _sync_actions(self) -> None:
        result = self.state.result
        has = result is not None
        runs = has and not result.stopped and not self.prompt_refused and result.can_step
        self.step_action.setEnabled(runs)
        self.play_action.setEnabled(runs)
        self.back_action.setEnabled(has and result.trace is not None)
        self.reset_action.setEnabled(has and result.trace is not None)

    def _set_status(self, text: str, *, error: bool = False) -> None:
        self.status_label.setStyleSheet(f"color: {th.ERROR}; font-weight: bold" if error else "")
        self.status_label.setText(text)
        log.info("status: %s", text)

    # ------------------------------------------------------------ the view
    def toggle_focus(self, panel: QWidget | None) -> None:
        """Show ``panel`` alone, filling the window; the same panel again (or None): every panel."""
        if panel is None or panel is self.focused:
            panel = None
        self.focused = panel
        self.tokens.setVisible(panel is None or panel is self.tokens)
        self.stages.setVisible(panel is not self.tokens)
        self._central_layout.setStretchFactor(self.tokens, 1 if panel is self.tokens else 0)
        self.tokens.set_expanded(panel is self.tokens)
        self.stages.focus(None if panel is self.tokens else panel)
        self.painter.repaint_later()

    @guarded(fallback=False)
    def eventFilter(self, watched, event) -> bool:
        """A double-click on a panel's title focuses that panel (and back)."""
        if event.type() == QEvent.Type.MouseButtonDblClick and isinstance(watched, QGroupBox):
            option = QStyleOptionGroupBox()
            watched.initStyleOption(option)
            title = watched.style().subControlRect(QStyle.CC_GroupBox, option, QStyle.SC_GroupBoxLabel, watched)
            if title.adjusted(-4, -4, 4, 4).contains(event.position().toPoint()):
                self.toggle_focus(watched)
                return True
        return False

    def show_help(self, panel: QWidget | None) -> None:
        """Explain ``panel`` with the current numbers (None: the glossary)."""
        if self._help is None:
            self._help = HelpDialog(self)
        if panel is None:
            self._help.show_glossary()
        else:
            title, text = panel_help(self.help_keys[panel], self.state.result, self.state.layer, self.state.head)
            self._help.show_text(title, text)

    def _on_help_action_triggered(self) -> None:
        """F1: the panel under the mouse, else the one holding the keyboard focus, else the first shown."""
        for widget in (QApplication.widgetAt(QCursor.pos()), QApplication.focusWidget()):
            while widget is not None and widget not in self.help_keys:
                widget = widget.parentWidget()
            if widget is not None:
                self.show_help(widget)
                return
        shown = [p for p in self.help_keys if p.isVisible()]
        self.show_help(shown[0] if shown else self.tokens)

    def _on_full_screen_triggered(self, on: bool) -> None:
        self.showFullScreen() if on else self.showNormal()

    def _on_state_theme_changed(self, _theme) -> None:
        self.stages.relayout(force=True)  # other fonts: other minimum sizes, maybe other pages

    def _on_about_action_triggered(self) -> None:
        info = self.state.result.info.label if self.state.result is not None else "none loaded yet"
        QMessageBox.about(self, "About nexttoken", about_text(info))

    def restore_geometry(self) -> bool:
        """Put the window where it was last closed (on that screen, so it stays on the projector)."""
        saved = self.preferences.value(PREFERENCE_GEOMETRY)
        return bool(saved) and self.restoreGeometry(saved)

    @guarded
    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        self.tokens.fit_chips()  # how many rows of chips the new height has room for
        self.painter.repaint_later()

    # ------------------------------------------------------------ closing
    @guarded
    def closeEvent(self, event) -> None:
        if self.remember and not self._closed:
            self.preferences.setValue(PREFERENCE_GEOMETRY, self.saveGeometry())
        self._closed = True
        self.pause()
        self.painter.stop()
        self._close_progress()
        self.controller.shutdown()
        while QApplication.overrideCursor():
            QApplication.restoreOverrideCursor()
        super().closeEvent(event)
