"""The narrow-screen layout's cost per drawn step: this checkout's OverviewPages against an earlier one.

Both windows are this checkout's in every other respect: the other revision's ``app/window/overview_pages.py``
(``git show REV:app/window/overview_pages.py``) is loaded as a module and put in ``MainWindow``'s place for
the "before" windows. The same decode steps (GPT-2 small's shape, random weights) are drawn into
windows of each kind in turn, alternating which goes first, so both see the machine's load alike.
Measured: the GUI thread's CPU time from ``apply_result`` to the step's last paint turn, with the
layout passes, events and paints between the turns (``time.thread_time``; the loop sleeps while it
waits for the 1 ms turn timers).

    python benchmarks/bench_stage_area.py --before d035092 --size 1024x768 --rounds 10

d035092 is the last commit with the QTabWidget. A script, not a test: the figures depend on the machine.
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import bench_gui as bg  # noqa: E402  (sets up the path, offscreen Qt, the model folder helpers)
from PySide6.QtCore import QEventLoop  # noqa: E402
from PySide6.QtWidgets import QApplication, QTabWidget  # noqa: E402

import app.window.window as window_module  # noqa: E402
from app.host import session_host  # noqa: E402
from app.protocol.messages import Step  # noqa: E402
from engine.session import Session  # noqa: E402


def stage_area_at(rev: str, folder: Path):
    """``OverviewPages`` as revision ``rev`` wrote it, loaded beside this checkout's."""
    path = folder / "stage_layout_before.py"
    path.write_text(subprocess.run(["git", "show", f"{rev}:app/window/overview_pages.py"], cwd=bg.ROOT, check=True,
                                   capture_output=True, text=True).stdout)
    spec = importlib.util.spec_from_file_location("app.stage_layout_before", path)  # in the app package: its relative imports work
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.OverviewPages


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--before", metavar="REV", required=True, help="the revision whose OverviewPages to compare with")
    p.add_argument("--size", metavar="WxH", default="1024x768", help="the window's size (one where the panels take pages)")
    p.add_argument("--rounds", type=int, default=10, help="windows of each kind, alternating")
    p.add_argument("--steps", type=int, default=15, help="decode steps drawn into each window")
    args = p.parse_args(argv)
    bg.WINDOW_SIZE = tuple(int(v) for v in args.size.lower().split("x"))
    app = QApplication.instance() or QApplication([])
    with tempfile.TemporaryDirectory(prefix="nexttoken-bench-") as tmp:
        kinds = {f"before ({args.before})": stage_area_at(args.before, Path(tmp)), "this checkout": window_module.OverviewPages}
        loaded = bg.load_model(str(bg.build_model_folder(Path(tmp) / "gpt2-small-shape")))
        print(f"| window {args.size}, GPT-2 small's shape | pages | {' | '.join(kinds)} |\n|---|---|{'---|' * len(kinds)}")
        for context in (256, 1000):
            session = Session(loaded, bg.GREEDY)
            session.set_prompt(bg.prompt_text(context - args.steps))
            points = session_host.PointCache()
            results = []
            for _ in range(args.steps + 1):  # the prefill, then one decode step each
                session.step()
                results.append(session_host.make_result(session, Step(1), points=points))
            work = {name: [] for name in kinds}
            pages = {}
            for round_ in range(args.rounds):
                for name, cls in (list(kinds.items()) if round_ % 2 == 0 else list(kinds.items())[::-1]):
                    window_module.OverviewPages = cls
                    window = bg.new_window()
                    assert bool(window.findChildren(QTabWidget)) == (cls is not kinds["this checkout"])
                    applied = []
                    window.resultApplied.connect(applied.append)
                    window.painter.apply(results[0])  # untimed: the prefill draws every panel from scratch
                    bg.wait_for(app, lambda: applied)
                    app.processEvents()
                    for result in results[1:]:
                        applied.clear()
                        cpu = time.thread_time()
                        window.painter.apply(result)
                        while not applied:
                            app.processEvents(QEventLoop.AllEvents | QEventLoop.WaitForMoreEvents)
                        app.processEvents()
                        work[name].append((time.thread_time() - cpu) * 1e3)
                    pages[name] = len(window.overview.pages)  # with the steps drawn (the prompt's chips take room)
                    window.close()
                    app.processEvents()
            window_module.OverviewPages = kinds["this checkout"]
            cells = [f"{statistics.median(v):.1f} ms ({bg.percentile(v, 25):.1f}-{bg.percentile(v, 75):.1f})" for v in work.values()]
            print(f"| GUI-thread CPU per drawn step, {context} positions: median (p25-p75) of {len(work['this checkout'])} steps "
                  f"| {'/'.join(str(n) for n in pages.values())} | {' | '.join(cells)} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
