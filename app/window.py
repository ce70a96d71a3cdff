"""The main window: controls, menus and the six panels, wired to the controller and the state.

The window owns no plot state: each result goes to ``AppState.stage_result`` and every panel draws
itself from there. ``apply_result`` is the single per-step entry point; it spreads a step over
event-loop turns (each panel's update, then each plot's paint, one per turn), and ``turn_ms`` keeps
how long each turn of the latest step took (benchmarks read it).
"""

from __future__ import annotations

import logging
from functools import partial
from time import perf_counter

import pyqtgraph as pg
from PySide6.QtCore import QCoreApplication, QEvent, QSettings, Qt, QTimer, Signal
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import (
    QApplication,
    QCheckBox,
    QDoubleSpinBox,
    QFileDialog,
    QGraphicsItem,
    QLabel,
    QMainWindow,
    QProgressDialog,
    QPushButton,
    QSplitter,
    QToolBar,
    QVBoxLayout,
    QWidget,
)

from engine import paths

from . import theme as th
from .controller import SessionController
from .panels.attention_panel import AttentionPanel
from .panels.embeddings_panel import EmbeddingsPanel
from .panels.kv_panel import KVPanel, human_bytes
from .panels.logits_panel import LogitsPanel
from .panels.sampling_panel import SamplingPanel
from .panels.tokens_panel import TokensPanel
from .result import SessionResult
from .state import AppState

log = logging.getLogger(__name__)

GPT2_SMALL = "gpt2"
SETTINGS_LAST_MODEL = "model/last"
FRAME_MS = 16  # draw at most one result per frame
MAX_SPEED_FRAME_MS = 500  # at max speed, draw at most 2 steps a second (see RESULTS_GUI.md)
MAX_SPEED_POLL_MS = 100  # at max speed results drive Play; this timer only restarts a stalled one


class MainWindow(QMainWindow):
    """nexttoken's window. ``start()`` loads the first model; closing it stops the worker thread."""

    resultApplied = Signal(object)  # SessionResult, after every panel has drawn it
    errorShown = Signal(str)

    def __init__(
        self, settings: QSettings | None = None, *, projector: bool = False, remember: bool = True, engine: str = "process"
    ):
        """``engine``: where the model runs, "process" (a child process) or "thread" (see app.controller)."""
        super().__init__()
        th.configure_pyqtgraph()
        self.settings = settings if settings is not None else QSettings("nexttoken", "nexttoken")
        self.remember = remember
        self.state = AppState(self)
        self.controller = SessionController(self, engine=engine)
        self._pending: SessionResult | None = None
        self._last_draw = 0.0
        self._loading_source: str | None = None
        self._progress: QProgressDialog | None = None
        self._closed = False

        self.setWindowTitle("nexttoken — watch GPT-2 pick its next token")
        self.resize(1600, 1000)
        self._build_panels()
        self._plot_views = self.findChildren(pg.GraphicsView)
        for view in self._plot_views:  # an axis is text: keep it as a pixmap until its range changes
            for item in view.scene().items():
                if isinstance(item, pg.AxisItem):
                    item.setCacheMode(QGraphicsItem.CacheMode.DeviceCoordinateCache)
        self._build_actions()
        self._build_menus()
        self._build_toolbar()
        self.model_label = QLabel("no model loaded")
        self.status_label = QLabel("Starting…")
        self.truncate_button = QPushButton("Keep only the last tokens that fit")
        self.truncate_button.setToolTip("The prompt is longer than the model reads: use only its end")
        self.truncate_button.clicked.connect(self._on_truncate_button_clicked)
        self.truncate_button.hide()  # shown while a too-long prompt is refused
        self.statusBar().addWidget(self.status_label, 1)
        self.statusBar().addWidget(self.truncate_button)
        self.statusBar().addPermanentWidget(self.model_label)

        self._play_timer = QTimer(self)
        self._play_timer.timeout.connect(self._on_play_timer_timeout)
        self._draw_timer = QTimer(self, singleShot=True)
        self._draw_timer.timeout.connect(self._on_draw_timer_timeout)
        # one panel or plot per event-loop turn after a step, each started 1 ms after the last one
        # ended: a repeating timer is due again before its turn ends, and ran turns back to back
        # ahead of other due timers (stalls of 50 ms and more)
        self._turn_timer = QTimer(self, interval=1, singleShot=True)
        self._turn_timer.timeout.connect(self._on_turn_timer_timeout)
        self._turns: tuple[SessionResult, list] | None = None  # the step being drawn, its turns left
        self.turn_ms: list[float] = []  # how long each turn of the latest step took

        c = self.controller
        c.resultReady.connect(self._on_controller_result)
        c.errorOccurred.connect(self._on_controller_error)
        c.busyChanged.connect(self._on_controller_busy)
        c.downloadProgress.connect(self._on_controller_download_progress)
        c.modelLoaded.connect(self._on_controller_model_loaded)
        c.engineRestarted.connect(self._on_controller_engine_restarted)
        self.tokens.promptEdited.connect(c.set_prompt)
        self.logits.tokenChosen.connect(self._on_logits_token_chosen)
        self.sampling.settingsChanged.connect(c.resample)
        self.state.themeChanged.connect(self._on_state_theme)
        if projector:
            self.projector_action.setChecked(True)  # setChecked does not emit triggered
            self._on_projector_toggled(True)
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
        central = QWidget()
        layout = QVBoxLayout(central)
        layout.setContentsMargins(6, 4, 6, 4)
        layout.addWidget(rows)
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
        self.quit_action = action("Quit", self.close, (QKeySequence.Quit,))
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
        model.addAction(self.quit_action)
        view = self.menuBar().addMenu("&View")
        view.addAction(self.projector_action)
        run = self.menuBar().addMenu("&Run")
        for a in (self.step_action, self.back_action, self.play_action, self.reset_action):
            run.addAction(a)

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
            model = self.settings.value(SETTINGS_LAST_MODEL, "") or None
        self.load_model(model, prompt=prompt, fallback=fallback)

    def load_model(self, source: str | None, *, prompt: str = "", fallback: bool = False, loaded=None) -> None:
        self._loading_source = source
        self.pause()
        what = "the tiny demo model" if source is None and loaded is None else (source or "the model")
        self._set_status(f"Loading {what}…")
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
        if self._play_timer.isActive():
            self.pause()
        else:
            self.play()

    def play(self) -> None:
        self._play_timer.start(self._play_interval_ms())
        self.play_action.setChecked(True)
        self.play_action.setText("Pause")
        self._on_play_timer_timeout()

    def pause(self) -> None:
        self._play_timer.stop()
        self.controller.stop_play()
        if self._draw_timer.isActive():  # a step held back by max speed's slow frame rate: show it now
            self._draw_timer.start(0)
        self.play_action.setChecked(False)
        self.play_action.setText("Play")

    @property
    def playing(self) -> bool:
        return self._play_timer.isActive()

    # ------------------------------------------------------------ results
    def apply_result(self, result: SessionResult) -> None:
        """Draw ``result`` in every panel, the status line and the controls (one step, all panels).

        The first panel updates now, then one more per event-loop turn, then the plots paint one
        per turn (all at once stalled the loop for 50-100 ms); ``resultApplied`` follows the last.
        """
        self._finish_turns()  # a previous step still being drawn: its held-back plots paint with this one
        for view in self._plot_views:  # held back until their turn
            view.setUpdatesEnabled(False)
        deliveries = self.state.stage_result(result)
        paints = [partial(self._paint, view) for view in self._plot_views]
        self._turns = (result, deliveries + paints)
        self.turn_ms = []
        self._on_turn_timer_timeout()
        if result.kind in ("load", "prompt"):
            self.truncate_button.hide()
        if result.message:
            self._set_status(result.message)
        if result.stopped:
            self.pause()
        self._sync_actions()

    def _on_turn_timer_timeout(self) -> None:
        started = perf_counter()
        turn = self._turns[1].pop(0)
        turn()
        self.turn_ms.append((perf_counter() - started) * 1e3)
        if not self._turns[1]:
            self._finish_turns()
        else:
            self._turn_timer.start()

    @staticmethod
    def _paint(view: pg.GraphicsView) -> None:
        scene = view.scene()
        scene.prepareForPaint()  # pyqtgraph applies new ranges while painting and then paints again
        # the items that moved are marked for repainting by a call Qt queues to the scene: made
        # now, before the paint, instead of in a later turn that would paint the view a second time
        QCoreApplication.sendPostedEvents(scene, QEvent.Type.MetaCall)
        view.setUpdatesEnabled(True)
        view.repaint()

    def _finish_turns(self) -> None:
        """End the step being drawn: its plots paint at the next paint and ``resultApplied`` goes out.
        Called early (a newer step arrived), the panels it had not reached yet get the newer one."""
        if self._turns is None:
            return
        result = self._turns[0]
        self._turns = None
        self._turn_timer.stop()
        for view in self._plot_views:
            view.setUpdatesEnabled(True)
        self.resultApplied.emit(result)

    def _on_controller_result(self, result: SessionResult) -> None:
        self._pending = result
        if not self._draw_timer.isActive():
            frame = MAX_SPEED_FRAME_MS if self.playing and self.max_speed.isChecked() else FRAME_MS
            wait = frame - (perf_counter() - self._last_draw) * 1e3
            self._draw_timer.start(max(0, int(wait)))

    def _on_draw_timer_timeout(self) -> None:
        result, self._pending = self._pending, None
        if result is None or self._closed:
            return
        self._last_draw = perf_counter()
        self.apply_result(result)

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
        are lost with the process; the prompt is kept)."""
        message = f"{why} Loading the model again: its steps were lost, the prompt is kept."
        info = self.state.result.info if self.state.result is not None else None
        source = None if info is None or info.is_demo else info.source
        self.load_model(source, prompt=self.tokens.prompt(), fallback=True)
        self._on_controller_error("engine", message)

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
            self.settings.setValue(SETTINGS_LAST_MODEL, "" if info.is_demo else (self._loading_source or info.source))

    def _on_truncate_button_clicked(self) -> None:
        self.controller.set_prompt(self.tokens.prompt(), truncate=True)

    def _on_logits_token_chosen(self, token_id: int) -> None:
        self.pause()
        self.controller.choose(token_id)

    def _on_play_timer_timeout(self) -> None:
        if not self.controller.idle:  # never queue a forward pass behind another: no pile-up
            return
        if not self.max_speed.isChecked():
            self.step()
        elif not self.controller.looping and not (self.state.result and self.state.result.stopped):
            self.controller.play()  # the worker loops on its own; this restarts a loop a request ended

    def _play_interval_ms(self) -> int:
        return MAX_SPEED_POLL_MS if self.max_speed.isChecked() else int(1000 / self.speed.value())

    def _on_speed_value_changed(self, _value: float) -> None:
        if self._play_timer.isActive():
            self._play_timer.setInterval(self._play_interval_ms())

    def _on_max_speed_toggled(self, on: bool) -> None:
        self.speed.setEnabled(not on)
        self._on_speed_value_changed(self.speed.value())
        if not on:
            self.controller.stop_play()
        elif self.playing:
            self._on_play_timer_timeout()

    def _on_folder_action_triggered(self) -> None:
        folder = QFileDialog.getExistingDirectory(self, "Open a GPT-2 model folder (with config.json)")
        if folder:
            self.load_model(folder)

    def _on_projector_toggled(self, on: bool) -> None:
        self.state.set_projector(bool(on))

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

    # ------------------------------------------------------------ closing
    def closeEvent(self, event) -> None:
        self._closed = True
        self.pause()
        self._draw_timer.stop()
        self._turn_timer.stop()
        self._close_progress()
        self.controller.shutdown()
        while QApplication.overrideCursor():
            QApplication.restoreOverrideCursor()
        super().closeEvent(event)
