"""Entry point of the ``nexttoken`` command and ``python -m app``.

``nexttoken`` opens the window; the model runs in a child process (``--engine thread``: in a
thread of the window's process). ``--prompt``, ``--steps`` and ``--screenshot`` drive it through the
real engine and save a PNG of the whole window; ``--smoke-test`` loads the bundled model,
steps three tokens, renders the window once and prints a one-line JSON summary. Windowed frozen
builds have no stdout or stderr, so nothing here prints unguarded: messages go to ``logging``.
"""

from __future__ import annotations

import argparse
import gc
import json
import logging
import os
import re
import sys
from time import perf_counter

from engine.errors import NextTokenError
from engine.runtime import add_runtime_arguments, runtime_of

from app.logic.views import PANELS, VIEWS

log = logging.getLogger("app")


MIN_SIZE = (1024, 700)  # the smallest window every panel has room in (tests/app/test_screens.py)


def window_size(text: str) -> tuple[int, int]:
    """``--size WxH``: a window size of at least MIN_SIZE."""
    found = re.fullmatch(r"\s*(\d{1,5})\s*[xX×]\s*(\d{1,5})\s*", text)
    if not found:
        raise argparse.ArgumentTypeError(f"expected WIDTHxHEIGHT in pixels, such as 1366x768, not {text!r}")
    w, h = int(found.group(1)), int(found.group(2))
    if w < MIN_SIZE[0] or h < MIN_SIZE[1]:
        raise argparse.ArgumentTypeError(
            f"{w}x{h} is smaller than the smallest supported window, {MIN_SIZE[0]}x{MIN_SIZE[1]}"
        )
    return w, h


def steps_count(text: str) -> int:
    """``--steps N``: a whole number, 0 or more."""
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number of steps, not {text!r}") from None
    if n < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, not {n}")
    return n


def tour_stage(text: str) -> int:
    """``--tour STAGE``: its index in app.logic.tour.STAGES."""
    from app.logic.tour import stage_index

    try:
        return stage_index(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def build_parser() -> argparse.ArgumentParser:
    """The command line's options (scripts/cli_table.py writes the README's table from them)."""
    from app.logic.about import version_text

    p = argparse.ArgumentParser(
        prog="nexttoken", description="Watch a language model produce its next token, step by step, with the model's own numbers.", allow_abbrev=False
    )
    p.add_argument("--model", default=None,
                   help="model folder, bundled model or hub id such as gpt2 (default: the last used, else the one "
                        "defaults.conf names, else SmolLM2-135M-Instruct where bundled or fetched, else the tiny demo)")
    text = p.add_mutually_exclusive_group()
    text.add_argument("--prompt", default="", help="the prompt to start with")
    text.add_argument("--prompt-file", metavar="PATH", help="read the prompt to start with from this UTF-8 file (less its final line break)")
    p.add_argument("--steps", type=steps_count, default=0, help="steps to run at start (with --screenshot: before the picture)")
    p.add_argument("--chat", action="store_true",
                   help="send the prompt as a user turn through the model's chat template; stops at the end of the turn")
    p.add_argument("--system", default="", help="with --chat: a system message before the user turn")
    p.add_argument("--stop", action="append", default=[], metavar="TEXT",
                   help="stop once the generated text reaches TEXT (repeat for several; the status line names which)")
    p.add_argument("--screenshot", metavar="FILE.png", help="save a PNG of the window after --steps steps, then exit")
    p.add_argument("--projector", action="store_true", help="large fonts and high contrast for a projector")
    from app.logic.tour import STAGES

    p.add_argument("--tour", type=tour_stage, metavar="STAGE", default=None,
                   help="open the Flow in the presenter's tour at STAGE, a number from 1 or a name (" + ", ".join(s for s, _ in STAGES)
                   + "), after --steps steps")
    p.add_argument("--about-model", action="store_true",
                   help="open Model → About this model once the model is loaded (with --screenshot: the picture is of that table)")
    p.add_argument("--view", choices=tuple(VIEWS), default="flow",
                   help="the view in front: " + "; ".join(f"{name} = {what}" for name, what in VIEWS.items()))
    p.add_argument("--what-if", metavar="PROMPT", default=None,
                   help="open the Why view's second page with this second prompt: the pair's candidates and the "
                        "difference of their attributions, and its activation patching map (--patch) once the steps ran "
                        "(with no --steps, one step runs first: a step's chosen token is the target)")
    from app.logic.why_numbers import SITE_WORDS

    p.add_argument("--patch", choices=tuple(SITE_WORDS), default="resid_pre",
                   help="with --what-if: what the pair patches at each block and position: " + "; ".join(
                       f"{site} = {words[1].replace('block L', 'the block')}" for site, words in SITE_WORDS.items()))
    p.add_argument("--focus", choices=PANELS, default=None,
                   help="show the Overview with this panel alone, filling the window (as View → Focus does)")
    p.add_argument("--layer", type=int, default=0, help="the layer selected, counted from 0 as the window shows it")
    p.add_argument("--head", type=int, default=0, help="the attention head selected, counted from 0")
    p.add_argument("--open", metavar="FILE.npz", help="show a saved session (File → Save session, or python -m engine --export)")
    p.add_argument("--step", type=steps_count, default=None, metavar="N",
                   help="with --open: show step N of the saved branch (0 = the prefill; default: the step it was saved at)")
    p.add_argument("--smoke-test", action="store_true",
                   help="load the bundled demo model (or --model), step 3 tokens (or --steps), print JSON, exit")
    p.add_argument("--engine", choices=("process", "thread"), default="process",
                   help="where the model runs: a child process (default: the window never waits for it) or a thread of the window's process")
    p.add_argument("--size", type=window_size, metavar="WxH",
                   help=f"window size in pixels, such as 1366x768 (at least {MIN_SIZE[0]}x{MIN_SIZE[1]}; default: "
                        "where the window was last, else 1600x1000 or the screen); --screenshot saves exactly that")
    add_runtime_arguments(p)  # --device, --dtype, --backend, --remote, --nnsight-host: as python -m engine
    p.add_argument("--version", action="version", version=version_text())
    return p


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    return build_parser().parse_args(argv)


def default_size(app, scripted: bool) -> tuple[int, int]:
    """1600 x 1000, or what the screen has room for (a script's screenshot: always 1600 x 1000)."""
    if scripted or app.primaryScreen() is None:
        return 1600, 1000
    room = app.primaryScreen().availableGeometry()
    return max(MIN_SIZE[0], min(1600, room.width())), max(MIN_SIZE[1], min(1000, room.height() - 40))


def _say(text: str, stream=None) -> None:
    stream = stream or sys.stdout
    if stream is not None:
        try:
            print(text, file=stream, flush=True)
        except (OSError, ValueError):
            pass


class ScriptedRun:
    """Drives a window from the command line: load, step N times, then screenshot and/or report.

    ``done(code)`` is called once, from the event loop, when the script finishes or fails.
    """

    def __init__(self, window, *, steps: int, screenshot: str | None, smoke: bool, started: float, done, opening: bool = False,
                 tour: int | None = None, about_model: bool = False, what_if: str | None = None, patch_site: str = "resid_pre"):
        """``opening``: a session file is being opened (``--open``): wait for it before anything else.
        ``tour``: once the steps ran, start the tour at that stage; ``about_model``: open the Model
        dialog (the screenshot is then of it); ``what_if``: run that second prompt on the Why view's
        second page, patching ``patch_site`` (the screenshot waits for its map and the pair's split)."""
        self.window, self.steps_left, self.screenshot, self.smoke = window, steps, screenshot, smoke
        self.tour, self.about_model, self.what_if, self.patch_site = tour, about_model, what_if, patch_site
        self.opening = opening
        self.steps_done = 0
        self.started, self.done = started, done
        self.finished = False
        window.resultApplied.connect(self._on_window_result_applied)
        window.errorShown.connect(self._on_window_error_shown)

    def _on_window_result_applied(self, result) -> None:
        from app.protocol import messages as p

        if self.finished or (self.opening and not isinstance(result.request, p.OpenSession)):
            return
        self.opening = False
        if isinstance(result.request, p.Step):
            self.steps_done += 1
        if self.steps_left > 0 and not result.can_step:  # opened to view only: the steps asked for cannot run
            self._on_window_error_shown(f"--steps {self.steps_left}: {result.why_not}")
        elif self.steps_left > 0 and not result.stopped:
            self.steps_left -= 1
            self.window.step()
        else:
            self._finish(result)

    def _on_window_error_shown(self, message: str) -> None:
        if not self.finished:
            self.finished = True
            log.error("%s", message)
            _say(f"error: {message}", sys.stderr)
            if self.smoke:
                _say(json.dumps({"ok": False, "error": message}))
            self.done(2)

    def _finish(self, result) -> None:
        self.finished = True
        if self.tour is not None:
            self.window.tour.start(self.tour)
        if self.about_model:
            self.window.commands.show_model_dialog()
        if self.what_if is not None:
            why = self.window.why_view
            self.window.show_view("why")
            why.show_page(1)
            why.patch.site_box.setCurrentIndex(why.patch.site_box.findData(self.patch_site))
            why.patch.set_second_prompt(self.what_if)
            why.patch.run()
        view, tour = self.window.views.currentWidget(), self.window.tour

        def awaiting() -> bool:  # a view's answer from the engine is on its way (or the tour's why stage's)
            return getattr(view, "awaiting", lambda: False)() or tour.awaiting()

        if awaiting():
            from PySide6.QtCore import QTimer

            c = self.window.controller
            for answered in (c.insideReady, c.attributionReady, c.patchReady, c.compareReady):  # drawn: picture it once nothing else is awaited
                answered.connect(lambda _answer: QTimer.singleShot(
                    50, lambda: None if awaiting() else self._capture(result)))
            c.failed.connect(lambda _reply: QTimer.singleShot(50, lambda: self._capture(result)))  # refused: picture it anyway
            return
        if self.window.attention.awaiting():  # the selected head's rows of a long prefill are on their way
            from PySide6.QtCore import QTimer

            self.window.controller.mapReady.connect(lambda _answer: QTimer.singleShot(50, lambda: self._capture(result)))
            return
        self._capture(result)

    def _capture(self, result) -> None:
        from PySide6.QtWidgets import QApplication

        if getattr(self, "_captured", False):  # a second answer after the first was pictured
            return
        self._captured = True
        QApplication.processEvents()
        dialog = self.window.commands.model_dialog if self.about_model else None
        image = (dialog or self.window).grab()
        code = 0
        if self.screenshot:
            if not image.save(self.screenshot):
                log.error("could not write %s", self.screenshot)
                _say(f"error: could not write {self.screenshot}", sys.stderr)
                code = 3
            else:
                log.info("saved %s", self.screenshot)
        if self.smoke:
            trace = result.trace
            summary = {
                "ok": code == 0 and not image.isNull(),
                "model": result.info.name,
                "steps": self.steps_done,
                "tokens": [] if trace is None else [p for p in trace.pieces[len(result.prompt_ids):]] + [trace.chosen_piece],
                # the last step's most likely token: what greedy decoding picks there
                "greedy": None if trace is None else trace.candidate_pieces[0],
                "text_tokens": 0 if trace is None else len(trace.context_ids) + 1,
                "window": [image.width(), image.height()],
                "seconds": round(perf_counter() - self.started, 2),
            }
            _say(json.dumps(summary, ensure_ascii=False))
            if not summary["ok"]:
                code = code or 4
        self.done(code)


def select_layer_and_head(window, layer: int, head: int, fail) -> None:
    """Select ``layer`` and ``head`` once the model is loaded (its size is known only then). Out of
    range: the window shows why and ``fail(message)`` ends the run with status 2, with or without
    --steps or --screenshot. Connect this before a ScriptedRun: it must see the load first."""

    def on_result(result) -> None:
        from app.protocol import messages as p

        if not isinstance(result.request, p.Load):
            return
        window.resultApplied.disconnect(on_result)
        if not (0 <= layer < result.n_layer and 0 <= head < result.n_head):
            message = (f"--layer {layer} --head {head} is not in {result.info.name}: it has layers 0 to "
                       f"{result.n_layer - 1} and heads 0 to {result.n_head - 1}.")
            window.status_line.say(message, error=True)
            fail(message)
            return
        window.state.set_layer(layer)
        window.state.set_head(head)

    if layer or head:
        window.resultApplied.connect(on_result)


def show_splash(app):
    """A small window with the app's icon, shown while the main window is built (about 2 s: most
    of it importing pyqtgraph), so a double-click answers at once."""
    from PySide6.QtCore import Qt
    from PySide6.QtGui import QColor, QFont, QPainter, QPixmap
    from PySide6.QtWidgets import QSplashScreen

    from engine import paths

    pixmap = QPixmap(420, 260)
    pixmap.fill(QColor("white"))
    painter = QPainter(pixmap)
    icon = QPixmap(str(paths.app_icon_path()))
    if not icon.isNull():
        painter.drawPixmap(154, 28, icon.scaled(112, 112, Qt.KeepAspectRatio, Qt.SmoothTransformation))
    font = QFont()
    font.setPointSize(16)
    font.setBold(True)
    painter.setFont(font)
    painter.drawText(pixmap.rect().adjusted(0, 150, 0, 0), Qt.AlignHCenter | Qt.AlignTop, "nexttoken")
    font.setPointSize(10)
    font.setBold(False)
    painter.setFont(font)
    painter.drawText(pixmap.rect().adjusted(0, 190, 0, 0), Qt.AlignHCenter | Qt.AlignTop,
                     "Opening the window; the model loads in the background…")
    painter.end()
    splash = QSplashScreen(pixmap)
    splash.show()
    app.processEvents()
    return splash


def freeze_startup_objects() -> None:
    """Leave what start-up made (Qt, torch, numpy and pyqtgraph's modules: about 200,000 objects) out
    of every later garbage collection. A full collection walked them all and held the window's
    thread for 110-140 ms. Python runs one when the objects kept since the last one reach a quarter
    of the long-lived ones (about 50,000 here; a drawn step keeps about 11): rare, but a stall."""
    gc.collect()  # what start-up left as garbage goes first, not frozen with the rest
    gc.freeze()


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if args.prompt_file:  # a file that cannot be read ends here, before any window: one line, status 2
        from engine.errors import PromptError
        from engine.prompt_file import read_prompt_file

        try:
            args.prompt = read_prompt_file(args.prompt_file)
        except PromptError as exc:
            _say(f"error: {exc}", sys.stderr)
            return 2
    saved_model = None
    try:
        runtime = runtime_of(args)
    except NextTokenError as exc:
        _say(f"error: {exc}", sys.stderr)
        return 2
    if args.step is not None and not args.open:
        _say("error: --step N needs --open FILE (the step of a saved session to show).", sys.stderr)
        return 2
    if args.open:  # a bad file ends here, before any window: one line, status 2
        from engine.errors import ExportError
        from engine.session_read import read_meta

        try:
            saved_model = read_meta(args.open)["model"]
        except ExportError as exc:
            _say(f"error: {exc}", sys.stderr)
            return 2
    from engine.logs import setup_logging

    setup_logging()  # a log file, and safe printing in windowed builds without a console
    started = perf_counter()
    from app.logic.site_defaults import read_site_defaults

    site = read_site_defaults()  # /etc/nexttoken/defaults.conf and the bundle's: before the user's own settings
    if not site.hub_downloads:
        os.environ["HF_HUB_OFFLINE"] = "1"  # inherited by the engine's process: it never goes online
    from app.host.torch_cache import use_own_cache

    use_own_cache()  # no empty torchinductor_<user> folder left in the temporary directory
    if args.engine == "process":
        from app.window.engine_process import prestart

        prestart()  # the model's process imports torch while this one imports Qt and builds the window
    from PySide6.QtCore import QTimer
    from PySide6.QtWidgets import QApplication

    app = QApplication.instance() or QApplication(sys.argv[:1])
    app.setApplicationName("nexttoken")
    app.setOrganizationName("nexttoken")
    app.setDesktopFileName("nexttoken")  # the menu entry's name (packaging/linux/nexttoken.desktop): Wayland docks match it
    splash = show_splash(app)  # painted now: importing pyqtgraph and building the window take seconds

    from app.window.window import MainWindow

    scripted = bool(args.screenshot or args.smoke_test)
    window = MainWindow(projector=args.projector or site.projector, remember=not args.smoke_test, engine=args.engine, runtime=runtime)
    if args.size is not None:
        window.resize(*args.size)
    elif scripted or not window.preferences.restore_geometry(window):
        window.resize(*default_size(app, scripted))
    exit_code = [0]

    def done(code: int) -> None:
        exit_code[0] = code
        window.close()
        app.quit()

    def refuse(message: str) -> None:  # one line on stderr, status 2, whatever else was asked for
        if script is not None:
            script.finished = True  # no steps, no screenshot
        _say(f"error: {message}", sys.stderr)
        done(2)

    select_layer_and_head(window, args.layer, args.head, refuse)  # before the script: it sees the load first
    steps = 3 if args.smoke_test and not args.steps else args.steps
    if args.what_if is not None:  # the pair explains a step's chosen token: one step at least
        steps = max(steps, 1)
    script = None  # kept referenced: its slots must outlive this block
    if scripted:
        script = ScriptedRun(window, steps=steps, screenshot=args.screenshot, smoke=args.smoke_test, started=started, done=done,
                             opening=bool(args.open), tour=args.tour, about_model=args.about_model, what_if=args.what_if, patch_site=args.patch)
    elif steps or args.tour is not None or args.about_model or args.what_if is not None:
        script = ScriptedRun(window, steps=steps, screenshot=None, smoke=False, started=started, done=lambda code: None,
                             opening=bool(args.open), tour=args.tour, about_model=args.about_model, what_if=args.what_if, patch_site=args.patch)
    window.show_view("overview" if args.focus else "why" if args.what_if is not None else args.view)
    if args.focus:
        window.focus.toggle(window.panel_named(args.focus))
    window.show()
    splash.finish(window)
    model = args.model  # the smoke test: the bundled demo unless --model names one
    if saved_model is not None and model is None:  # the session's own model, so that it can step on
        from engine import paths

        model = paths.DEMO_MODEL_NAME if saved_model.get("is_demo") else saved_model.get("source")

    def start() -> None:
        from engine import paths

        # a new user's first model: the site's default, else SmolLM2 when bundled or fetched by setup.sh
        # (the smoke test: the bundled demo)
        offline = paths.offline_model()
        first = None if args.smoke_test else site.model or (offline and str(offline))
        from engine.chat import ChatTurn

        chat = ChatTurn(args.system, args.prompt) if args.chat else None
        window.start(model, args.prompt, fallback=True if args.open else not scripted, first=first,
                     chat=chat, stops=tuple(args.stop))
        if args.open:  # queued behind the load: it opens with that model
            window.open_session(args.open, -1 if args.step is None else args.step)

    QTimer.singleShot(0, start)
    freeze_startup_objects()  # while the engine process still imports torch: no wait of its own
    code = app.exec()
    window.close()
    del script
    return exit_code[0] or code


if __name__ == "__main__":
    sys.exit(main())
