"""The main window: layout and wiring. The panels and views laid out, joined to the controller
(requests and replies), the player (play state), the paint scheduler (when results are drawn) and
the window's helpers: its commands (``app.actions``), the download dialog, the step gate (what may
run now, and the words for a refusal), the engine's recovery after a death, panel focus, panel help
and preferences.

The window owns no plot state: each result goes through ``PaintScheduler`` to ``AppState`` and
every panel draws itself from there.
"""

from __future__ import annotations

import pyqtgraph as pg
from PySide6.QtCore import QSettings, Signal
from PySide6.QtWidgets import QMainWindow, QStackedWidget, QVBoxLayout, QWidget

from engine import paths
from engine.chat import ChatTurn

from . import flow_view, guard, wording
from . import protocol as p
from . import theme as th
from .actions import Commands
from .controller import SessionController
from .download_dialog import DownloadDialog
from .engine_recovery import EngineRecovery
from .export_actions import ExportActions
from .focus import PanelFocus
from .guard import guarded
from .paint_scheduler import PaintScheduler
from .panel_help import PanelHelp
from .panels.attention_panel import AttentionPanel
from .panels.branches_panel import BranchesPanel
from .panels.cache_panel import CachePanel
from .panels.embeddings_panel import EmbeddingsPanel
from .panels.inside_panel import InsidePanel
from .panels.kv_panel import KVPanel
from .panels.logits_panel import LogitsPanel
from .panels.sampling_panel import SamplingPanel
from .panels.stages_panel import StagesPanel
from .panels.tokens_panel import TokensPanel
from .player import Player
from .preferences import Preferences
from .result import SessionResult
from .stage_layout import StageArea
from .state import AppState
from .status_line import StatusLine
from .step_gate import StepGate
from .views import PANELS, VIEW_ALIASES, VIEWS


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
        self.preferences = Preferences(preferences, remember)
        self.state = AppState(self)
        self.controller = c = SessionController(self, engine=engine)
        self.gate = StepGate()
        self._closed = False
        self._viewing = False  # a session opened from a file without its model is on screen
        self.setWindowTitle("nexttoken — watch GPT-2 pick its next token")
        # an explicit minimum, so that the layout sets none of its own: it grew the window past its
        # screen for a moment of a change of focus and never gave the height back; the pages make the room
        self.setMinimumSize(640, 480)
        self.resize(1600, 1000)
        self._build_panels()
        plot_views = [v for panel in (self.embeddings, self.attention, self.logits, self.kv) for v in panel.plot_views()]
        self.painter = PaintScheduler(self.state, plot_views, c.is_current, self)
        self.player = Player(c, self.step, lambda: self.gate.can_go_on, self)
        self.focus = PanelFocus(self.tokens, self.stages, self._central_layout, self.painter.repaint_later, self)
        self.focus.focusChanged.connect(self._on_focus_changed)
        keys = {self.tokens: "tokens", self.embeddings: "embeddings", self.attention: "attention", self.logits: "logits"}
        self.help = PanelHelp(self, self.state, keys | {self.sampling: "sampling", self.kv: "kv"})
        self.commands = Commands(self)
        self.commands.build_menus()
        panels = [self.tokens, *self.stages.panels(), self.inside, self.sampling_view, self.cache_view, self.branches_view]
        self.exporter = ExportActions(self, panels, lambda text, error=False: self.status_line.say(text, error=error))
        self.exporter.add_to(self.menuBar())  # File → Export, Edit → Copy, each titled panel's "⋯"
        self.commands.end_file_menu()
        for view in self.findChildren(pg.GraphicsView):  # pyqtgraph's own right-click Export… fails on SVG
            view.scene().contextMenu = []  # here (pyqtgraph #3485): File → Export and each panel's ⋯ do it
        self.toolbar = self.commands.build_toolbar()
        self.status_line = line = StatusLine(self)
        self._outer_layout.addLayout(line.layout)
        line.truncate_button.clicked.connect(lambda: c.set_prompt(self.tokens.prompt(), truncate=True))
        self.recovery = EngineRecovery(self)
        line.restart_button.clicked.connect(self.recovery.restart)
        self.download = DownloadDialog(self, c, line.say)
        flow_view.attach(self)  # clicks to the detail views, "◀ Flow" back, the tour's keys
        self.show_view("overview")  # the Overview until app.main brings --view (default: flow) forward

        c.resultReady.connect(self.painter.submit)
        c.failed.connect(self._on_controller_failed)
        c.busyChanged.connect(th.show_busy)
        c.modelLoaded.connect(self._on_controller_model_loaded)
        c.noticed.connect(lambda result: self.status_line.say(wording.result_status(result)))
        c.insideReady.connect(self._on_controller_inside_ready)
        self.painter.resultStarted.connect(self._on_painter_result_started)
        self.painter.resultApplied.connect(self.resultApplied)
        self.painter.resultApplied.connect(self._on_painter_result_applied)
        self.player.playingChanged.connect(self._on_player_playing_changed)
        self.tokens.promptEdited.connect(self._on_tokens_prompt_edited)
        self.tokens.chatEdited.connect(self._on_tokens_chat_edited)
        self.tokens.stopsEdited.connect(c.set_stops)
        self.logits.tokenChosen.connect(self._on_logits_token_chosen)
        self.inside.inspectRequested.connect(c.inspect)
        self.cache_view.inspectRequested.connect(c.inspect)
        self.attention.mapRequested.connect(c.attention_map)
        c.mapReady.connect(self.attention.show_map)
        self.branches_view.switchRequested.connect(self.switch_branch)
        self.sampling.set_settings(c.settings)
        self.sampling.settingsChanged.connect(c.set_settings)
        self.state.subscribe_theme(self._on_state_theme)
        self.state.themeChanged.connect(lambda _theme: self.stages.relayout(force=True))  # other fonts: other sizes
        guard.reporter().occurred.connect(self._on_guard_occurred)  # a bound method: let go with the window
        if projector:
            self.commands.projector_action.setChecked(True)  # setChecked does not emit triggered
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
        overview = QWidget()
        layout = QVBoxLayout(overview)
        layout.setContentsMargins(6, 2, 6, 2)
        layout.setSpacing(4)
        layout.addWidget(self.tokens)
        layout.addWidget(self.stages, 1)
        self._central_layout = layout
        self.inside = InsidePanel(s)
        self.sampling_view = StagesPanel(s)
        self.cache_view = CachePanel(s)
        self.branches_view = BranchesPanel(s)
        # the views, one at a time (buttons in the menu bar's corner: app.actions). Not a QTabWidget:
        # its tab bar re-measured itself on every layout pass a step set off (+10 ms a drawn step).
        self.views = QStackedWidget()
        self.flow_view = flow_view.FlowView(s, self.tokens, layout)  # the prompt stays on screen: it borrows the tokens
        for page in (self.flow_view, overview, self.inside, self.sampling_view, self.cache_view, self.branches_view):
            self.views.addWidget(page)
        central = QWidget()
        outer = QVBoxLayout(central)
        outer.setContentsMargins(0, 0, 0, 2)
        outer.setSpacing(2)
        outer.addWidget(self.views, 1)
        self._outer_layout = outer  # the views, then the status line under all of them
        self.setCentralWidget(central)

    # ------------------------------------------------------------- commands
    def start(self, model: str | None = None, prompt: str = "", *, fallback: bool = True, first: str | None = None,
              chat: ChatTurn | None = None, stops: tuple[str, ...] = ()) -> None:
        """Load ``model`` (default: the last one used, else ``first``, else the demo) with ``prompt``: the
        user's turn of ``chat`` (its system message) when given, through the model's chat template, and
        stop sequences ``stops``."""
        turn = None if chat is None else ChatTurn(chat.system, prompt)
        if turn is not None:
            self.tokens.set_chat(turn)  # shown; the box is greyed out until a model with a template is loaded
        self.tokens.set_stops(stops)
        self.controller.set_stops(stops)
        self.load_model(model or self.preferences.last_model() or first, prompt=prompt, fallback=fallback, chat=turn)

    def load_model(self, source: str | None, *, prompt: str = "", fallback: bool = False, loaded=None,
                   chat: ChatTurn | None = None) -> None:
        """Load ``source`` with ``prompt``, as a user turn through its chat template when ``chat`` is
        given or the Chat turn box is on (the editors' turn)."""
        self.download.expect(source)
        self.player.pause()
        what = f"{paths.DEMO_MODEL_NAME} (the tiny demo model)" if source is None and loaded is None else (source or "the model")
        self.status_line.say(f"Loading {what}… The window works meanwhile; Step waits until the model is ready.")
        self.controller.load(source, loaded=loaded, fallback=fallback, prompt=prompt or self.tokens.prompt(),
                             chat=chat or self.tokens.chat_turn())

    def step(self) -> None:
        refusal = self.gate.why_not_step()
        if refusal is not None:
            self.status_line.say(refusal.message, error=refusal.error)
            return
        self.controller.step()

    def back(self) -> None:
        self.player.pause()
        self.controller.back()

    def switch_branch(self, node: int) -> None:
        """Show the branch through tree ``node`` (``engine.branches``) as it was."""
        self.player.pause()
        self.controller.switch(node)

    def save_session(self, path: str) -> None:
        """Save the session (every branch) to ``path``; the status line says how it went."""
        self.status_line.say(f"Saving the session to {path}…")
        self.controller.save_session(path)

    def open_session(self, path: str, step: int = -1) -> None:
        """Show the session saved in ``path`` at ``step`` (-1: where it was saved); a refused file changes nothing."""
        self.player.pause()
        self.status_line.say(f"Opening {path}…")
        self.controller.open_session(path, step)

    def reset(self) -> None:
        self.player.pause()
        self.controller.reset()

    def show_view(self, name: str) -> None:
        """Bring view ``name`` (one of VIEWS) to the front; the others stay a tab away."""
        index = list(VIEWS).index(VIEW_ALIASES.get(name, name))
        self.commands.view_buttons.button(index).setChecked(True)
        self.views.setCurrentIndex(index)

    def panel_named(self, name: str):
        """The Overview's panel called ``name`` (one of views.PANELS)."""
        return dict(zip(PANELS, (self.tokens, *self.stages.panels())))[name]

    def _on_focus_changed(self, panel) -> None:
        self.attention.set_alone(panel is self.attention)

    # ------------------------------------------------------------ results
    def _on_tokens_prompt_edited(self, text: str) -> None:
        if not text.strip():
            self.player.pause()
            self.status_line.say(self.gate.prompt_emptied(), error=True)
            self._sync_actions()
            return
        self.controller.set_prompt(text)

    def _on_tokens_chat_edited(self, turn: ChatTurn) -> None:
        if not turn.user.strip():
            self._on_tokens_prompt_edited("")  # an empty user message: as an empty prompt
            return
        self.controller.set_chat(turn)

    def _on_painter_result_started(self, result: SessionResult) -> None:
        self.gate.show(result)
        if isinstance(result.request, (p.Load, p.SetPrompt, p.SetChat, p.OpenSession)):
            self.status_line.truncate_button.hide()
        if isinstance(result.request, p.OpenSession):  # the file's settings are the person's now
            self.sampling.set_settings(self.controller.settings)
            if not result.can_step:
                self.status_line.show_viewing(result)
                self._viewing = True
        elif self._viewing and result.can_step:  # a new prompt or Reset left the file: the loaded model again
            self._viewing = False
            self._on_controller_model_loaded(result.info)
        if message := wording.result_status(result):
            self.status_line.say(message)
        if result.stopped:
            self.player.pause()
        self._sync_actions()

    def _on_painter_result_applied(self, result: SessionResult) -> None:
        # a model's own axis titles, more positions to name: the panels may need other room (0.3 ms)
        self.stages.relayout()

    def _on_controller_failed(self, reply: p.Failed) -> None:
        refusal = self.gate.fail(reply)
        if refusal.keep:
            self.status_line.truncate_button.setText(f"Keep only the last {refusal.keep:,} tokens")
            self.status_line.truncate_button.show()
        if isinstance(reply.request, p.Load):
            self.download.finish()
        self.show_error(refusal.message)

    def show_error(self, message: str) -> None:
        """``message`` on the status line in the error style; Play stops."""
        self.player.pause()
        self.status_line.say(message, error=True)
        self._sync_actions()
        self.errorShown.emit(message)

    def _on_guard_occurred(self, message: str) -> None:
        self.status_line.say(message, error=True)

    def _on_controller_inside_ready(self, answer) -> None:
        if self.inside.wants(answer.trace):
            self.inside.show_inside(answer.trace, answer.pieces)
        if self.cache_view.wants(answer.trace):
            self.cache_view.show_inside(answer.trace)

    def _on_controller_model_loaded(self, info) -> None:
        self.download.finish()
        self.status_line.show_model(info)
        self.preferences.set_last_model("" if info.is_demo else (self.download.source or info.source))

    def _on_logits_token_chosen(self, token_id: int) -> None:
        self.player.pause()
        self.controller.choose(token_id)

    def _on_player_playing_changed(self, playing: bool) -> None:
        self.commands.play_action.setChecked(playing)
        self.commands.play_action.setText("Pause" if playing else "Play")
        self.painter.fast = playing and self.player.max_speed
        if not playing:
            self.painter.flush()  # a step held back by max speed's slow frame rate: show it now

    def _on_state_theme(self, theme: th.Theme) -> None:
        font = theme.font()
        th.apply_tooltip_font(theme)  # tooltips are windows of their own (dialogs take the window's font)
        self.setFont(font)
        self.menuBar().setFont(font)
        self.toolbar.setFont(theme.font(0, bold=True))
        self.status_line.set_theme(theme)

    def _sync_actions(self) -> None:
        for action in (self.commands.step_action, self.commands.play_action):
            action.setEnabled(self.gate.can_step)
        for action in (self.commands.back_action, self.commands.reset_action):
            action.setEnabled(self.gate.can_go_back)

    # ------------------------------------------------------------ the view
    @guarded
    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        self.tokens.fit_chips()  # how many rows of chips the new height has room for
        self.painter.repaint_later()

    # ------------------------------------------------------------ closing
    @guarded
    def closeEvent(self, event) -> None:
        if not self._closed:
            self.preferences.save_geometry(self)
        self._closed = True
        self.player.pause()
        self.painter.stop()
        self.download.close()
        if waiting := self.exporter.waiting():  # a picture or table still being written: say why the window stays
            self.status_line.say(waiting)
            self.status_line.status_label.repaint()
        if left := self.exporter.writer.close():  # it waited a few seconds at most: say what is not written
            self.status_line.say(self.exporter.left_behind(left))
            self.status_line.status_label.repaint()
        if self.controller.saves_pending:  # shutdown waits for the file: say why the window stays
            self.status_line.say("Waiting for the session file to be written before quitting…")
            self.status_line.status_label.repaint()
        self.controller.shutdown()
        th.show_busy(False)
        super().closeEvent(event)
