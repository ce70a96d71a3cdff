"""The window's commands: its actions with their shortcuts, the menus, the toolbar and the view
switcher in the menu bar's corner, and the small handlers behind them (file dialogs, About)."""

from __future__ import annotations

from dataclasses import replace

from PySide6.QtCore import QObject, Qt
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import (
    QButtonGroup,
    QCheckBox,
    QDoubleSpinBox,
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QMessageBox,
    QToolBar,
    QToolButton,
    QWidget,
)

from engine import paths

from app.window import theme as th
from app.logic.about import about_text
from app.logic.site_defaults import read_site_defaults
from app.logic.views import VIEW_BUTTONS, VIEWS

GPT2_SMALL = "gpt2"


class Commands(QObject):
    """Every QAction of ``window`` (a MainWindow: its commands, controller, player, painter and
    state), the menus and the toolbar that hold them, and the view buttons (``view_buttons``)."""

    def __init__(self, window):
        super().__init__(window)
        self.window = window
        w = window

        def action(text, slot, keys=(), tip=""):
            a = QAction(text, w)
            a.setShortcuts([QKeySequence(k) for k in keys])
            a.setShortcutContext(Qt.WindowShortcut)
            a.setToolTip(tip or text)
            a.triggered.connect(slot)
            w.addAction(a)
            return a

        # Page Down / Page Up: what a presentation clicker sends
        self.step_action = action(
            "Step ▶", w.step, (Qt.Key_Space, Qt.Key_Right, Qt.Key_PageDown), "Run one step: one new token (Space, → or Page Down)"
        )
        self.back_action = action("◀ Back", w.back, (Qt.Key_Left, Qt.Key_PageUp), "Go back one step (← or Page Up); the steps after it stay as a branch (View: Branches)")
        self.play_action = action("Play", w.player.toggle, (Qt.Key_P,), "Play or pause (P)")
        self.play_action.setCheckable(True)
        self.reset_action = action("Reset", w.reset, (), "Drop every step, keep the prompt")
        self.demo_action = action("Tiny demo model (bundled)", lambda: w.load_model(None))
        bundled = any(d.name == GPT2_SMALL for d in paths.bundled_model_dirs())
        where = "bundled" if bundled else "downloads about 550 MB once"
        offered = bundled or read_site_defaults().hub_downloads  # defaults.conf: hub_downloads = no
        self.gpt2_action = offered and action(f"GPT-2 small (124M, {where})", lambda: w.load_model(GPT2_SMALL))
        offline = paths.offline_model()  # SmolLM2-135M-Instruct: bundled by an installer, or fetched by scripts/setup.sh
        kind = "bundled" if offline in paths.bundled_model_dirs() else "offline"
        self.offline_action = offline and action(f"{paths.OFFLINE_MODEL_NAME} ({kind})", lambda: w.load_model(str(offline)))
        self.folder_action = action("Open a model folder…", self._on_folder_action_triggered, ("Ctrl+Shift+O",))
        self.open_action = action(
            "Open session…", self._on_open_action_triggered, (QKeySequence.Open,), "Show a saved session again, every branch (Ctrl+O)"
        )
        self.save_action = action(
            "Save session…", self._on_save_action_triggered, (QKeySequence.Save,),
            "Save every step of every branch, with the numbers the panels draw, to one .npz file (Ctrl+S)",
        )
        self.runs_on_action = action("Runs on: (no model loaded yet)", lambda: None, (), "Where the model runs and what records its steps "
                                     "(python -m engine and nexttoken: --device, --dtype, --backend, --remote)")
        self.runs_on_action.setEnabled(False)  # a fact, not a command
        self.nnsight_action = action(
            "Record steps with nnsight's tracing", self._on_nnsight_action_triggered, (),
            "Read the same hook points through nnsight (pip install 'nexttoken[nnsight]') instead of forward hooks; reloads the model",
        )
        self.nnsight_action.setCheckable(True)
        self.nnsight_action.setChecked(w.controller.runtime.backend == "nnsight")
        self.model_action = action("About this model…", self.show_model_dialog, ("Ctrl+I",),
                                   "What the loaded model is made of: positions, norms, MLP, heads, LM head, sizes (Ctrl+I)")
        self.model_dialog = None  # made on first use
        self.restart_action = action("Restart the model", lambda: w.recovery.restart(), (), "Start the model's process again")
        self.restart_action.setEnabled(False)
        self.quit_action = action("Quit", w.close, (QKeySequence.Quit,))
        self.no_cache_action = action(
            "Generate without the KV cache (slower: every step runs the whole sequence again)",
            lambda on: w.controller.set_use_cache(not on),
        )
        self.no_cache_action.setCheckable(True)
        self.projector_action = action(
            "Projector mode (large fonts, high contrast)", lambda on: w.set_text_size(th.PROJECTOR if on else th.NORMAL), (Qt.Key_F5,)
        )
        self.projector_action.setCheckable(True)
        self.larger_action = action("Larger text", lambda: w.zoom_text(1), ("Ctrl+=", "Ctrl++"),
                                    "Every text one step larger (Ctrl+=); the third step is projector mode")
        self.smaller_action = action("Smaller text", lambda: w.zoom_text(-1), ("Ctrl+-",), "Every text one step smaller (Ctrl+-)")
        self.full_screen_action = action("Full screen", lambda on: w.showFullScreen() if on else w.showNormal(), (Qt.Key_F11,))
        self.full_screen_action.setCheckable(True)
        self.focus_actions = [
            action(f"Focus: {panel.title()}", lambda _=False, p=panel: w.focus.toggle(p), (f"Ctrl+{i}",),
                   "Show this panel alone, filling the window (again, or Ctrl+0, or Escape: every panel)")
            for i, panel in enumerate((w.tokens, *w.overview.panels()), start=1)
        ]
        self.unfocus_action = action("Show every panel", lambda: w.focus.toggle(None), ("Ctrl+0", Qt.Key_Escape))
        self.about_action = action("About nexttoken", self._on_about_action_triggered)
        self.help_action = action(
            "What am I looking at?", w.help.show_pointed, (Qt.Key_F1,),
            "Explain the panel under the mouse (or with the keyboard focus), with its current numbers (F1)",
        )
        self.glossary_action = action("Glossary", lambda: w.help.show(None))

    def show_runtime(self, info) -> None:
        """The Model menu says where ``info`` (the loaded model's ModelInfo) runs."""
        self.runs_on_action.setText(f"Runs on: {info.runs_on}")
        self.nnsight_action.setChecked(info.backend == "nnsight")
        self.nnsight_action.setEnabled(not info.remote_host)  # a remote model has only the nnsight backend

    def _on_nnsight_action_triggered(self, on: bool) -> None:
        w = self.window
        w.controller.runtime = replace(w.controller.runtime, backend="nnsight" if on else "hooks")
        result = w.state.result  # the model shown, loaded again through the other backend
        w.load_model(None if result is None or result.info.is_demo else result.info.source)

    # ------------------------------------------------------------- menus
    def build_menus(self) -> None:
        """File, Model, View, Run and Help; the view buttons in the menu bar's corner."""
        w, bar = self.window, self.window.menuBar()
        self.view_switcher = self._view_switcher()  # held here: the corner does not keep it alive
        bar.setCornerWidget(self.view_switcher, Qt.TopRightCorner)
        self.file_menu = bar.addMenu("&File")
        self.file_menu.addActions([self.open_action, self.save_action])
        model = bar.addMenu("&Model")
        model.addActions([a for a in (self.offline_action, self.demo_action, self.gpt2_action, self.folder_action) if a])
        extra = [d for d in paths.bundled_model_dirs() if d.name not in (paths.DEMO_MODEL_NAME, GPT2_SMALL, paths.OFFLINE_MODEL_NAME)]
        if extra:  # a classroom build with more checkpoints inside (packaging/build.py --model-dir)
            model.addSeparator()
        for folder in extra:
            model.addAction(f"{folder.name} (bundled)", lambda name=folder.name: w.load_model(name))
        model.addSeparator()
        model.addAction(self.model_action)
        model.addActions([self.runs_on_action, self.nnsight_action])
        model.addSeparator()
        model.addAction(self.restart_action)
        view = bar.addMenu("&View")
        view.addActions([self.projector_action, self.larger_action, self.smaller_action, self.full_screen_action])
        view.addSeparator()
        view.addActions([*self.focus_actions, self.unfocus_action])
        run = bar.addMenu("&Run")
        run.addActions([self.step_action, self.back_action, self.play_action, self.reset_action])
        run.addSeparator()
        run.addAction(self.no_cache_action)
        help_menu = bar.addMenu("&Help")
        help_menu.addActions([self.help_action, self.glossary_action])
        help_menu.addSeparator()
        help_menu.addAction(self.about_action)

    def view_button_width(self) -> int:
        """The width of the widest view button: the room the menu bar keeps for one more view."""
        return max(button.sizeHint().width() for button in self.view_buttons.buttons())

    def end_file_menu(self) -> None:
        """Quit goes last in File, after what other modules added (File → Export)."""
        self.file_menu.addSeparator()
        self.file_menu.addAction(self.quit_action)

    def _view_switcher(self) -> QWidget:
        """The views, one at a time, chosen by buttons in the menu bar's free corner (Alt+1 to
        Alt+7): no row of their own, so the panels keep every pixel of height."""
        switcher = QWidget()
        row = QHBoxLayout(switcher)
        row.setContentsMargins(0, 0, 4, 0)
        row.setSpacing(2)
        row.addWidget(QLabel("View:"))
        self.view_buttons = QButtonGroup(self)
        for index, (name, title) in enumerate(VIEWS.items()):
            button = QToolButton()
            button.setText(VIEW_BUTTONS[name])
            button.setCheckable(True)
            button.setAutoRaise(True)
            button.setShortcut(QKeySequence(f"Alt+{index + 1}"))
            button.setToolTip(f"{title} (Alt+{index + 1}; nexttoken --view {name})")
            self.view_buttons.addButton(button, index)
            row.addWidget(button)
        self.view_buttons.button(0).setChecked(True)
        self.view_buttons.idClicked.connect(lambda index: self.window.show_view(list(VIEWS)[index]))
        return switcher

    def build_toolbar(self) -> QToolBar:
        """Back, Step, Play with its speed, Reset, and a reminder of the keys."""
        w = self.window
        bar = QToolBar("Controls")
        bar.setMovable(False)
        bar.setToolButtonStyle(Qt.ToolButtonTextOnly)
        bar.addAction(self.back_action)
        bar.addAction(self.step_action)
        bar.addAction(self.play_action)
        bar.addWidget(QLabel("  speed "))
        self.speed = QDoubleSpinBox(minimum=0.5, maximum=30.0, singleStep=0.5, value=3.0, suffix=" tokens/s")
        self.speed.setToolTip("How fast Play steps")
        self.speed.valueChanged.connect(w.player.set_speed)
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
        w.addToolBar(bar)
        self.toolbar = bar
        return bar

    def add_flow_back(self, show_flow) -> QAction:
        """"◀ Flow" (F) at the start of the toolbar, and the Flow's keys in its hint."""
        back = QAction("◀ Flow", self.window)
        back.setShortcuts([QKeySequence(Qt.Key_F)])
        back.setShortcutContext(Qt.WindowShortcut)
        back.setToolTip("Back to the flow of the step (F or Alt+1)")
        back.triggered.connect(show_flow)
        self.window.addAction(back)
        first = self.toolbar.actions()[0]
        self.toolbar.insertAction(first, back)
        self.toolbar.insertSeparator(first)
        self.keys_hint.setText(self.keys_hint.text() + " · F flow · T tour")
        return back

    # ------------------------------------------------------------ handlers
    def _on_max_speed_toggled(self, on: bool) -> None:
        w = self.window
        self.speed.setEnabled(not on)
        w.player.set_max_speed(on)

    def _on_save_action_triggered(self) -> None:
        path, _ = QFileDialog.getSaveFileName(self.window, "Save the session", "session.npz", "nexttoken sessions (*.npz)")
        if path:
            self.window.save_session(path)

    def _on_open_action_triggered(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self.window, "Open a saved session", "", "nexttoken sessions (*.npz)")
        if path:
            self.window.open_session(path)

    def _on_folder_action_triggered(self) -> None:
        folder = QFileDialog.getExistingDirectory(self.window, "Open a model folder (with config.json)")
        if folder:
            self.window.load_model(folder)

    def show_model_dialog(self) -> None:
        """Model → About this model: the description of the model on screen, as a table."""
        from app.window.model_dialog import ModelDialog

        result = self.window.state.result
        if result is None:
            return
        if self.model_dialog is None:
            self.model_dialog = ModelDialog(self.window)
        self.model_dialog.show_model(result.info)

    def _on_about_action_triggered(self) -> None:
        result = self.window.state.result
        QMessageBox.about(self.window, "About nexttoken", about_text(result.info.label if result is not None else "none loaded yet"))
