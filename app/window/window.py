"""The main window: layout and wiring. The panels and views laid out, joined to the controller
(requests and replies), the player (play state), the paint scheduler (when results are drawn) and
the window's helpers: its commands (``app.window.actions``), the download dialog, the step gate (what may
run now, and the words for a refusal), the engine's recovery after a death, panel focus, panel help
and preferences.

The window owns no plot state: each result goes through ``PaintScheduler`` to ``AppState`` and
every panel draws itself from there.
"""

from __future__ import annotations

from dataclasses import replace

import pyqtgraph as pg
from PySide6.QtCore import QSettings, Signal
from PySide6.QtWidgets import QMainWindow, QVBoxLayout, QWidget

from engine import paths
from engine.chat import ChatTurn
from engine.runtime import CPU, Runtime

from app.window import flow_view, guard
from app.logic import wording
from app.protocol import messages as p
from app.window import theme as th
from app.window.actions import Commands
from app.window.controller import SessionController
from app.window.download_dialog import DownloadDialog
from app.window.engine_recovery import EngineRecovery
from app.window.export_actions import ExportActions
from app.window.flow_view import TourMode
from app.window.focus import PanelFocus
from app.window.guard import guarded
from app.window.inside_keys import InsidePageKeys
from app.window.menu_fold import MenuFold
from app.window.paint_scheduler import PaintScheduler
from app.window.panel_help import PanelHelp
from app.panels.attention_panel import AttentionPanel
from app.panels.branches_panel import BranchesPanel
from app.panels.cache_panel import CachePanel
from app.panels.embeddings_panel import EmbeddingsPanel
from app.panels.flow_panel import FlowPlace
from app.panels.inside_panel import InsidePanel
from app.panels.kv_panel import KVPanel
from app.panels.logits_panel import LogitsPanel
from app.panels.sampling_panel import SamplingPanel
from app.panels.sampling_stages_panel import SamplingStagesPanel
from app.panels.tokens_panel import TokensPanel
from app.panels.why_panel import WhyPanel
from app.window.player import Player
from app.window.preferences import Preferences
from app.window.overview_pages import OverviewPages
from app.window.view_pages import ViewPages
from app.logic.forward_times import ForwardTimes
from app.logic.state import LATEST, AppState
from app.window.status_line import StatusLine
from app.logic.step_gate import StepGate
from app.logic.views import PANELS, VIEWS


class MainWindow(QMainWindow):
    """nexttoken's window. ``start()`` loads the first model; closing it stops the engine."""

    resultApplied = Signal(object)  # SessionResult, after every panel has drawn it
    errorShown = Signal(str)

    def __init__(
        self, preferences: QSettings | None = None, *, projector: bool = False, remember: bool = True, engine: str = "process",
        runtime: Runtime | None = None,
    ):
        """``preferences``: where the last model used is remembered (``remember``); ``engine``: where
        the model runs, "process" (a child process) or "thread" (see app.window.controller); ``runtime``: on
        which device and through which backend each load runs it (engine.runtime: --device, --backend, ...)."""
        super().__init__()
        th.configure_pyqtgraph()
        self.preferences = Preferences(preferences, remember)
        self.state = AppState(th.NORMAL, th.PROJECTOR)
        self.controller = c = SessionController(self, engine=engine)
        c.runtime = runtime or CPU
        self.gate = StepGate()
        self._closed = False
        self._viewing = False  # a session opened from a file without its model is on screen
        self.setWindowTitle("nexttoken — watch a language model pick its next token")
        # an explicit minimum, so that the layout sets none of its own: it grew the window past its
        # screen for a moment of a change of focus and never gave the height back; the pages make the room
        self.setMinimumSize(640, 480)
        self.resize(1600, 1000)
        self._build_panels()
        plot_views = [v for panel in (self.embeddings, self.attention, self.logits, self.kv) for v in panel.plot_views()]
        self.painter = PaintScheduler(self.state, plot_views, c.is_current, self)
        self.player = Player(c, self.step, lambda: self.gate.can_go_on, self)
        self.focus = PanelFocus(self.tokens, self.overview, self._central_layout, self.painter.repaint_later, self)
        self.focus.focusChanged.connect(self._on_focus_changed)
        self.flow_view.tokensReturned.connect(self.focus.restore)
        keys = {self.tokens: "tokens", self.embeddings: "embeddings", self.attention: "attention", self.logits: "logits"}
        self.help = PanelHelp(self, self.state, keys | {self.sampling: "sampling", self.kv: "kv"})
        self.commands = Commands(self)
        self.commands.build_menus()
        self.exporter = ExportActions(self, [self.tokens, *self.overview.panels()], ["inside", "why", "sampling", "cache", "branches"],
                                      lambda text, error=False: self.status_line.say(text, error=error))
        self.exporter.add_to(self.menuBar())  # File → Export, Edit → Copy, each titled panel's "⋯"
        self.commands.end_file_menu()
        self.menu_fold = MenuFold(self.menuBar(), self.commands.view_switcher, self.commands.view_button_width)
        _without_plot_menus(self)
        self.toolbar = self.commands.build_toolbar()
        self.status_line = line = StatusLine(self)
        self._outer_layout.addLayout(line.layout)
        line.truncate_button.clicked.connect(lambda: c.set_prompt(self.tokens.prompt(), truncate=True))
        self.recovery = EngineRecovery(self)
        line.restart_button.clicked.connect(self.recovery.restart)
        line.cancel_button.clicked.connect(c.cancel_step)
        self.download = DownloadDialog(self, c, line.say)
        self.tour = TourMode(self.flow_view, self.commands.step_action, self.commands.back_action,
                             self.commands.unfocus_action, self._show_flow, self)
        self.tour.toggle_action.setToolTip(self.flow_view.tour_button.toolTip())
        self.inside_keys = InsidePageKeys(self.inside, self.commands.step_action, self.commands.back_action, self)
        self.flow_back_action = self.commands.add_flow_back(self._show_flow)
        self.flow_view.flow.openRequested.connect(self._on_flow_open_requested)
        self.flow_view.model_button.clicked.connect(self.commands.show_model_dialog)
        self.views.currentChanged.connect(self._on_views_current_changed)
        for panel in self.overview.panels():  # the Overview's panels draw a step only once they are on screen
            self.painter.deliver_when_shown(panel)
        self.show_view("overview")  # the Overview until app.window.main brings --view (default: flow) forward

        c.resultReady.connect(self.painter.submit)
        self.painter.resultDropped.connect(c.not_drawn)
        c.failed.connect(self._on_controller_failed)
        c.busyChanged.connect(th.show_busy)
        c.prefillProgress.connect(self._on_controller_prefill_progress)
        c.modelLoaded.connect(self._on_controller_model_loaded)
        c.noticed.connect(lambda result: self.status_line.say(wording.result_status(result)))
        c.insideReady.connect(self._on_controller_inside_ready)
        c.attributionReady.connect(self._on_controller_attribution_ready)
        self.painter.resultStarted.connect(self._on_painter_result_started)
        self.painter.resultApplied.connect(self.resultApplied)
        self.painter.resultApplied.connect(self._on_painter_result_applied)
        self.player.playingChanged.connect(self._on_player_playing_changed)
        self.player.fastChanged.connect(self._on_player_fast_changed)
        self.tokens.promptEdited.connect(self._on_tokens_prompt_edited)
        self.tokens.chatEdited.connect(self._on_tokens_chat_edited)
        self.tokens.stopsEdited.connect(c.set_stops)
        self.logits.tokenChosen.connect(self._on_logits_token_chosen)
        self.logits.whyRequested.connect(self._on_logits_why_requested)
        self.inside.inspectRequested.connect(c.inspect)
        self.flow_view.flow.maths.inspectRequested.connect(c.inspect)
        self.player.playingChanged.connect(self.flow_view.flow.maths.set_playing)
        self.tour.attributeRequested.connect(c.attribute)
        c.compareReady.connect(self._on_controller_compare_ready)
        c.patchReady.connect(self._on_controller_patch_ready)
        self.attention.mapRequested.connect(c.attention_map)
        c.mapReady.connect(self.attention.show_map)
        controls = self.flow_view.flow.sampling_controls  # the Flow's temperature and top-k: a face of the panel's own
        controls.temperatureChosen.connect(self.sampling.temperature.setValue)
        controls.topKChosen.connect(self.sampling.top_k.setValue)
        self.sampling.settingsShown.connect(controls.show_settings)
        self.sampling.set_settings(c.settings)
        self.sampling.settingsChanged.connect(c.set_settings)
        self.state.subscribe_theme(self._on_state_theme)
        self.state.themeChanged.connect(lambda _theme: self.overview.relayout(force=True))  # other fonts: other sizes
        guard.reporter().occurred.connect(self._on_guard_occurred)  # a bound method: let go with the window
        saved = next((t for t in th.TEXT_SIZES if t.name == self.preferences.text_size()), None)
        start = th.PROJECTOR if projector else saved  # the text size chosen last, unless --projector
        if start is not None:
            for restyle in self.state.stage_theme(start):  # at once: nothing is drawn yet
                restyle()
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
        self.overview = OverviewPages(columns, weights)
        s.topNChanged.connect(lambda _n: self.overview.relayout())  # more rows of candidates: more room
        overview = QWidget()
        layout = QVBoxLayout(overview)
        layout.setContentsMargins(6, 2, 6, 2)
        layout.setSpacing(4)
        layout.addWidget(self.tokens)
        layout.addWidget(self.overview, 1)
        self._central_layout = layout
        self.inside = InsidePanel(s)
        self.forward_times = ForwardTimes(s)  # from the start: the KV cache view plots every step timed
        self.flow_view = flow_view.FlowView(s, self.tokens, layout)  # the prompt stays on screen: it borrows the tokens
        # the views, one at a time (buttons in the menu bar's corner: app.window.actions); the last four
        # built the first time they are shown or asked for (``_build_view``)
        self.views = ViewPages({"flow": self.flow_view, "overview": overview, "inside": self.inside}, self._build_view)
        central = QWidget()
        outer = QVBoxLayout(central)
        outer.setContentsMargins(0, 0, 0, 2)
        outer.setSpacing(2)
        outer.addWidget(self.views, 1)
        self._outer_layout = outer  # the views, then the status line under all of them
        self.setCentralWidget(central)

    def _build_view(self, name: str) -> QWidget:
        """View ``name`` (why, sampling, cache or branches), built the first time it is needed: joined
        to the controller, then given the theme and the step on screen, as the others had them."""
        mark = self.state.subscriptions()
        try:
            return self._join_view(name, mark)
        except Exception:
            self.state.forget_since(mark)  # the half-built view is dropped: nothing of it is called again
            raise

    def _join_view(self, name: str, mark: tuple[int, int]) -> QWidget:
        s, c = self.state, self.controller
        if name == "why":
            view = WhyPanel(s)
            view.attributeRequested.connect(c.attribute)
            patch = view.patch
            patch.tokenizeRequested.connect(c.tokenize)
            patch.patchRequested.connect(self._on_patch_requested)
            patch.cancelRequested.connect(c.cancel_patch)
            patch.compareRequested.connect(c.compare)
            c.tokenizedReady.connect(patch.show_tokens)
            c.patchProgress.connect(patch.show_progress)
        elif name == "sampling":
            view = SamplingStagesPanel(s)
        elif name == "cache":
            view = CachePanel(s, self.forward_times)
            view.inspectRequested.connect(c.inspect)
        else:
            view = BranchesPanel(s)
            view.switchRequested.connect(self.switch_branch)
        _without_plot_menus(view)
        s.catch_up(mark)
        return view

    @property
    def why_view(self) -> WhyPanel:
        return self.views.page("why")

    @property
    def sampling_view(self) -> SamplingStagesPanel:
        return self.views.page("sampling")

    @property
    def cache_view(self) -> CachePanel:
        return self.views.page("cache")

    @property
    def branches_view(self) -> BranchesPanel:
        return self.views.page("branches")

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
        self.views.setCurrentIndex(list(VIEWS).index(name))  # a view that fails to build is reported (guarded)
        self.commands.view_buttons.button(self.views.currentIndex()).setChecked(True)  # the view on screen

    def _show_flow(self) -> None:
        self.show_view("flow")

    def _on_flow_open_requested(self, place: FlowPlace) -> None:
        """A click on a box of the Flow: that place in the view that shows it."""
        if place.layer >= 0:
            self.state.set_layer(place.layer)
        if place.head >= 0:
            self.state.set_head(place.head)
        if place.newest:
            self.state.set_position(LATEST)
        self.tour.stop()
        if place.view == "overview" and not place.newest:  # the candidates: their page of the Overview
            self.overview.show_panel(self.logits)
        if place.view == "why" and self.state.result is not None and self.state.result.trace is not None:
            self._on_logits_why_requested(self.state.result.trace.chosen)  # "why?" on the chosen token
            return
        self.show_view(place.view)

    def _on_views_current_changed(self, _index: int) -> None:
        if not self.flow_view.isVisible():
            self.tour.stop()
        self.inside_keys.sync(self.views.currentWidget() is self.inside)  # its pages' keys, after the tour gave them back

    def panel_named(self, name: str):
        """The Overview's panel called ``name`` (one of views.PANELS)."""
        return dict(zip(PANELS, (self.tokens, *self.overview.panels())))[name]

    def _on_focus_changed(self, panel) -> None:
        self.attention.set_alone(panel is self.attention)

    # ------------------------------------------------------------ results
    def _on_tokens_prompt_edited(self, text: str) -> None:
        if not text.strip():
            self.player.pause()
            self.status_line.say(self.gate.prompt_emptied(self.controller.sent), error=True)
            self._sync_actions()
            return
        self.controller.set_prompt(text)

    def _on_tokens_chat_edited(self, turn: ChatTurn) -> None:
        if not turn.user.strip():
            self._on_tokens_prompt_edited("")  # an empty user message: as an empty prompt
            return
        self.controller.set_chat(turn)

    def _on_controller_prefill_progress(self, done: int, total: int) -> None:
        self.status_line.say(wording.prefill_progress(done, total))
        self.status_line.cancel_button.setVisible(done < total)

    def _on_painter_result_started(self, result: p.SessionResult) -> None:
        self.gate.show(result)
        self.status_line.cancel_button.hide()
        if isinstance(result.request, (p.Load, p.SetPrompt, p.SetChat, p.OpenSession)):
            self.status_line.truncate_button.hide()
        if not self.controller.settings_chosen and self.sampling.shown != self.controller.settings:
            self.sampling.set_settings(self.controller.settings)  # the model's own, until the person chooses
        if isinstance(result.request, p.OpenSession):  # the file's settings are the person's now
            self.sampling.set_settings(self.controller.settings)
            if not result.can_step:
                self.status_line.show_viewing(result)
                self._viewing = True
        elif self._viewing and result.can_step:  # a new prompt or Reset left the file: the loaded model again
            self._viewing = False
            self._on_controller_model_loaded(result)
        if message := wording.result_status(result):
            self.status_line.say(message, shorter=wording.shorter_status(result))
        if result.stopped:
            self.player.pause()
        self._sync_actions()

    def _on_painter_result_applied(self, result: p.SessionResult) -> None:
        # a model's own axis titles, more positions to name: the panels may need other room (0.5 ms;
        # behind another view, once the Overview is shown again)
        self.overview.relayout_when_shown()

    def _on_controller_failed(self, reply: p.Failed) -> None:
        self.status_line.cancel_button.hide()
        refusal = self.gate.fail(reply)
        why = self.views.built_page("why")  # it asked: it is built
        if why is not None and isinstance(reply.request, p.Patch):  # its second page says why, beside its Run button
            why.patch.show_failed(refusal.message)
        if why is not None and isinstance(reply.request, p.Compare):  # the pair's refusal: said on the page
            why.patch.show_compare_failed(refusal.message)
        if isinstance(reply, (p.StepCancelled, p.PatchCancelled)):  # what the person asked for: said calmly, Play stops
            self.player.pause()
            self.status_line.say(refusal.message)
            self._sync_actions()
            return
        if refusal.keep:
            self.status_line.truncate_button.setText(f"Keep only the last {refusal.keep:,} tokens")
            self.status_line.truncate_button.show()
        if isinstance(reply.request, p.Load):
            self.download.finish()
            if self.state.result is not None:  # the model shown stays: so do its backend and the menu's tick
                self.controller.runtime = replace(self.controller.runtime, backend=self.state.result.info.backend)
                self.commands.show_runtime(self.state.result.info)
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
        if (cache := self.views.built_page("cache")) is not None and cache.wants(answer.trace):
            cache.show_inside(answer.trace)
        if self.flow_view.flow.maths.wants(answer.trace):
            self.flow_view.flow.maths.show_inside(answer.trace)

    def _on_controller_attribution_ready(self, answer) -> None:
        if (why := self.views.built_page("why")) is not None and why.wants(answer):
            why.show_attribution(answer)
        if self.tour.wants(answer):
            self.tour.show_attribution(answer)

    def _on_patch_requested(self, text: str, step: int, target: int, versus: int, site: str) -> None:
        self.player.pause()  # the map is of the step on screen
        self.controller.patch(text, step, target, versus, site)

    def _on_controller_compare_ready(self, answer) -> None:
        if (why := self.views.built_page("why")) is not None and why.patch.wants_compare(answer):
            why.patch.show_compare(answer)

    def _on_controller_patch_ready(self, answer) -> None:
        if (why := self.views.built_page("why")) is not None and why.patch.wants(answer):
            why.patch.show_patch(answer)

    def _on_controller_model_loaded(self, result: p.SessionResult) -> None:
        """``result``'s model is the one the engine holds: the label names it, and it is remembered."""
        info, request = result.info, result.request
        if isinstance(request, p.Load):
            self.download.finish()
        self.status_line.show_model(info)
        self.commands.show_runtime(info)
        asked = request.source if isinstance(request, p.Load) else None  # as the person named it (a hub id)
        self.preferences.set_last_model("" if info.is_demo else (asked or info.source))

    def _on_logits_why_requested(self, token_id: int) -> None:
        """"why?" on a candidate: the Why view, its first page, splitting that token's logit."""
        self.tour.stop()
        self.show_view("why")
        self.why_view.show_page(0)
        self.why_view.choose(token_id)

    def _on_logits_token_chosen(self, token_id: int) -> None:
        self.player.pause()
        self.controller.choose(token_id)

    def _on_player_fast_changed(self, fast: bool) -> None:
        self.painter.fast = fast

    def _on_player_playing_changed(self, playing: bool) -> None:
        self.commands.play_action.setChecked(playing)
        self.commands.play_action.setText("Pause" if playing else "Play")
        if not playing:
            self.painter.flush()  # a step held back by max speed's slow frame rate: show it now

    def zoom_text(self, steps: int) -> None:
        """Every text ``steps`` steps larger (negative: smaller): ``app.window.theme.TEXT_SIZES``."""
        self.set_text_size(th.zoomed(self.state.theme, steps))

    def set_text_size(self, theme: th.Theme) -> None:
        """Restyle for ``theme`` (one panel an event-loop turn) and remember it for the next start."""
        self.painter.restyle(self.state.stage_theme(theme))
        self.preferences.set_text_size(theme.name)
        self.commands.projector_action.setChecked(th.is_projector(theme))

    def _on_state_theme(self, theme: th.Theme) -> None:
        self.commands.projector_action.setChecked(th.is_projector(theme))  # setChecked does not emit triggered
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


def _without_plot_menus(widget: QWidget) -> None:
    """pyqtgraph's own right-click Export… fails on SVG here (pyqtgraph #3485): File → Export and each
    panel's ⋯ do it, so its plots' menus go."""
    for view in widget.findChildren(pg.GraphicsView):
        view.scene().contextMenu = []
