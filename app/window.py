"""The main window: layout and wiring. Controls, menus and the six panels, joined to the controller
(requests and results), the player (play state) and the paint scheduler (when results are drawn).

The window owns no plot state: each result goes through ``PaintScheduler`` to ``AppState`` and
every panel draws itself from there.
"""

from __future__ import annotations

import logging

import pyqtgraph as pg
from PySide6.QtCore import QSettings, Qt, Signal
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import (
    QApplication,
    QButtonGroup,
    QCheckBox,
    QDoubleSpinBox,
    QFileDialog,
    QGraphicsItem,
    QHBoxLayout,
    QLabel,
    QMainWindow,
    QProgressDialog,
    QPushButton,
    QSplitter,
    QStackedWidget,
    QToolBar,
    QVBoxLayout,
    QWidget,
)

from engine import paths

from . import guard
from . import theme as th
from .controller import SessionController
from .guard import guarded
from .paint_scheduler import PaintScheduler
from .panels.attention_panel import AttentionPanel
from .panels.embeddings_panel import EmbeddingsPanel
from .panels.cache_panel import CachePanel
from .panels.inside_panel import InsidePanel
from .panels.kv_panel import KVPanel, human_bytes
from .panels.logits_panel import LogitsPanel
from .panels.sampling_panel import SamplingPanel
from .panels.stages_panel import StagesPanel
from .panels.tokens_panel import TokensPanel
from .player import Player
from .result import SessionResult
from .state import AppState
from .views import VIEWS

log = logging.getLogger(__name__)

GPT2_SMALL = "gpt2"
PREFERENCE_LAST_MODEL = "model/last"


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
        self._closed = False

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
        self.statusBar().addWidget(self.status_label, 1)
        self.statusBar().addWidget(self.truncate_button)
        self.statusBar().addWidget(self.restart_button)
        self.statusBar().addPermanentWidget(self.model_label)

        c = self.controller
        c.resultReady.connect(self.painter.submit)
        c.errorOccurred.connect(self._on_controller_error)
        c.busyChanged.connect(self._on_controller_busy)
        c.downloadProgress.connect(self._on_controller_download_progress)
        c.modelLoaded.connect(self._on_controller_model_loaded)
        c.engineRestarted.connect(self._on_controller_engine_restarted)
        c.engineStopped.connect(self._on_controller_engine_stopped)
        self.painter.resultStarted.connect(self._on_painter_result_started)
        self.painter.resultApplied.connect(self.resultApplied)
        self.player.playingChanged.connect(self._on_player_playing_changed)
        self.tokens.promptEdited.connect(c.set_prompt)
        self.logits.tokenChosen.connect(self._on_logits_token_chosen)
        self.inside.inspectRequested.connect(c.inspect)
        self.cache.inspectRequested.connect(c.inspect)
        c.insideReady.connect(self._on_controller_inside_ready)
        self.sampling.set_settings(c.settings)
        self.sampling.settingsChanged.connect(c.set_settings)
        self.state.subscribe_theme(self._on_state_theme)
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

        middle = QSplitter(Qt.Vertical)
        middle.addWidget(self.logits)
        middle.addWidget(self.sampling)
        middle.setSizes([520, 260])
        self._middle = middle
        right = QSplitter(Qt.Vertical)
        right.addWidget(self.embeddings)
        right.addWidget(self.kv)
        right.setSizes([350, 430])
        columns = QSplitter(Qt.Horizontal)
        columns.addWidget(self.attention)
        columns.addWidget(middle)
        columns.addWidget(right)
        columns.setSizes([620, 470, 510])
        self._columns = columns
        rows = QSplitter(Qt.Vertical)
        rows.addWidget(self.tokens)
        rows.addWidget(columns)
        rows.setSizes([165, 805])
        rows.setChildrenCollapsible(False)
        self.inside = InsidePanel(s)
        self.stages = StagesPanel(s)
        self.cache = CachePanel(s)
        # the views, one at a time, chosen by a row of buttons (Alt+1 to Alt+4). Not a QTabWidget:
        # its tab bar re-measured itself on every layout pass a step set off (+10 ms a drawn step).
        self.views = QStackedWidget()
        switcher = QHBoxLayout()
        switcher.setSpacing(2)
        self.view_buttons = QButtonGroup(self)
        for index, (widget, (name, title)) in enumerate(zip((rows, self.inside, self.stages, self.cache), VIEWS.items())):
            self.views.addWidget(widget)
            button = QPushButton(f"{title}  (Alt+{index + 1})")
            button.setCheckable(True)
            button.setShortcut(QKeySequence(f"Alt+{index + 1}"))
            button.setToolTip(f"Show the view “{title}” (nexttoken --view {name})")
            self.view_buttons.addButton(button, index)
            switcher.addWidget(button)
        switcher.addStretch(1)
        self.view_buttons.button(0).setChecked(True)
        self.view_buttons.idClicked.connect(self.views.setCurrentIndex)
        central = QWidget()
        layout = QVBoxLayout(central)
        layout.setContentsMargins(6, 4, 6, 4)
        layout.addLayout(switcher)
        layout.addWidget(self.views)
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

        self.step_action = action("Step ▶", self.step, (Qt.Key_Space, Qt.Key_Right), "Run one step: one new token (Space or →)")
        self.back_action = action("◀ Back", self.back, (Qt.Key_Left,), "Go back one step (←)")
        self.play_action = action("Play", self.toggle_play, (Qt.Key_P,), "Play or pause (P)")
        self.play_action.setCheckable(True)
        self.reset_action = action("Reset", self.reset, (), "Drop every step, keep the prompt")
        self.demo_action = action("Tiny demo model (bundled)", lambda: self.load_model(None))
        bundled = any(d.name == GPT2_SMALL for d in paths.bundled_model_dirs())
        where = "bundled" if bundled else "downloads about 550 MB once"
        self.gpt2_action = action(f"GPT-2 small (124M, {where})", lambda: self.load_model(GPT2_SMALL))
        self.folder_action = action("Open a model folder…", self._on_folder_action_triggered, (QKeySequence.Open,))
        self.restart_action = action("Restart the model", self._on_restart_action_triggered, (), "Start the model's process again")
        self.restart_action.setEnabled(False)
        self.quit_action = action("Quit", self.close, (QKeySequence.Quit,))
        self.no_cache_action = action(
            "Generate without the KV cache (slower: every step runs the whole sequence again)", self._on_no_cache_toggled
        )
        self.no_cache_action.setCheckable(True)
        self.projector_action = action("Projector mode (large fonts, high contrast)", self._on_projector_toggled, (Qt.Key_F5,))
        self.projector_action.setCheckable(True)

    def _build_menus(self) -> None:
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
        model.addAction(self.quit_action)
        view = self.menuBar().addMenu("&View")
        view.addAction(self.projector_action)
        run = self.menuBar().addMenu("&Run")
        for a in (self.step_action, self.back_action, self.play_action, self.reset_action):
            run.addAction(a)
        run.addSeparator()
        run.addAction(self.no_cache_action)

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
        if self.state.result is not None and self.state.result.stopped:
            self._set_status(self.state.result.trace.stop_message if self.state.result.trace else "Stopped.")
            return
        self.controller.step()

    def back(self) -> None:
        self.pause()
        self.controller.back()

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
        index = list(VIEWS).index(name)
        self.view_buttons.button(index).setChecked(True)
        self.views.setCurrentIndex(index)

    def _can_go_on(self) -> bool:
        return not (self.state.result is not None and self.state.result.stopped)

    # ------------------------------------------------------------ results
    def _on_painter_result_started(self, result: SessionResult) -> None:
        if result.kind in ("load", "prompt"):
            self.truncate_button.hide()
        if result.message:
            self._set_status(result.message)
        if result.stopped:
            self.pause()
        self._sync_actions()

    def _on_controller_error(self, kind: str, message: str) -> None:
        self.pause()
        if kind == "prompt_too_long" and self.state.result is not None:
            self.truncate_button.setText(f"Keep only the last {self.state.result.info.n_positions:,} tokens")
            self.truncate_button.show()
        if kind == "load":
            self._close_progress()
            prior = self.state.result
            if prior is not None:
                message += f" Still using {prior.info.name}."
        self._set_status(message, error=True)
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
        if self.cache.wants(answer.trace):
            self.cache.show_inside(answer.trace)

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
        if self._progress is None:
            self._progress = QProgressDialog(f"Downloading {self._loading_source}…", None, 0, 100, self)
            self._progress.setWindowTitle("Downloading a model")
            self._progress.setWindowModality(Qt.WindowModal)
            self._progress.setMinimumDuration(0)
        self._progress.setValue(int(100 * done / total) if total else 0)
        self._progress.setLabelText(
            f"Downloading {self._loading_source}: {human_bytes(done)} of {human_bytes(total) if total else '?'}"
        )

    def _close_progress(self) -> None:
        if self._progress is not None:
            self._progress.close()
            self._progress.deleteLater()
            self._progress = None

    def _on_controller_model_loaded(self, info) -> None:
        self._close_progress()
        self.model_label.setText(f"Model: {info.label}")
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

    def _on_folder_action_triggered(self) -> None:
        folder = QFileDialog.getExistingDirectory(self, "Open a GPT-2 model folder (with config.json)")
        if folder:
            self.load_model(folder)

    def _on_projector_toggled(self, on: bool) -> None:
        self.painter.restyle(self.state.stage_projector(bool(on)))

    def _on_state_theme(self, theme: th.Theme) -> None:
        font = theme.font()
        self.setFont(font)
        self.menuBar().setFont(font)
        self.toolbar.setFont(theme.font(1, bold=True))
        self.statusBar().setFont(font)
        # large fonts need a wider middle column and more of it for the candidates' bars
        projector = theme is th.PROJECTOR
        self._columns.setSizes([540, 560, 500] if projector else [620, 470, 510])
        self._middle.setSizes([640, 300] if projector else [520, 260])

    def _sync_actions(self) -> None:
        result = self.state.result
        has = result is not None
        self.step_action.setEnabled(has and not result.stopped)
        self.play_action.setEnabled(has and not result.stopped)
        self.back_action.setEnabled(has and result.trace is not None)
        self.reset_action.setEnabled(has and result.trace is not None)

    def _set_status(self, text: str, *, error: bool = False) -> None:
        self.status_label.setStyleSheet(f"color: {th.VERMILION}; font-weight: bold" if error else "")
        self.status_label.setText(text)
        log.info("status: %s", text)

    @guarded
    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        self.painter.repaint_later()

    # ------------------------------------------------------------ closing
    @guarded
    def closeEvent(self, event) -> None:
        self._closed = True
        self.pause()
        self.painter.stop()
        self._close_progress()
        self.controller.shutdown()
        while QApplication.overrideCursor():
            QApplication.restoreOverrideCursor()
        super().closeEvent(event)
