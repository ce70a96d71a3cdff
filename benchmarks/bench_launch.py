"""Launch: from process start to the window's first paint, to the model ready, and the window
process's memory, for this checkout and (``--before REV``) an earlier commit, interleaved.

Each launch runs ``nexttoken --smoke-test`` (the bundled demo model, three steps) in a fresh
interpreter through a small driver that creates the QApplication first and watches it: the first
paint of the start-up splash (where there is one) and of the main window, the first "load" result drawn, the resident size then, and whether the
window's process imported torch. Times count from the process's start (Linux /proc), so the
interpreter's own start and every import are included.

    python benchmarks/bench_launch.py                 # this checkout, 5 launches
    python benchmarks/bench_launch.py --before a94316a --runs 5
    python benchmarks/bench_launch.py --model gpt2-tiny-demo --model SmolLM2-135M-Instruct --steps 1
                                                      # bundled models side by side, interleaved

``--model`` (repeatable) launches each named model in turn (``--smoke-test --model NAME``); ``--steps``
sets the smoke test's steps (default 3), and "first step drawn" is when the first step's result is.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

DRIVER = r"""
import json, os, sys, time

def since_start():
    ticks = os.sysconf("SC_CLK_TCK")
    start = int(open("/proc/self/stat").read().rsplit(")", 1)[1].split()[19]) / ticks
    return float(open("/proc/uptime").read().split()[0]) - start

def rss_mib():
    return int(open("/proc/self/statm").read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20

from PySide6.QtCore import QEvent, QObject
from PySide6.QtWidgets import QApplication, QMainWindow, QSplashScreen

qt = QApplication(sys.argv[:1])
marks = {}

class Watch(QObject):
    def eventFilter(self, obj, event):
        try:
            self.watch(obj, event)
        except Exception:  # an object half-built or half-destroyed: not the window
            pass
        return False

    def watch(self, obj, event):
        if isinstance(obj, QMainWindow) and "window" not in marks and hasattr(obj, "resultApplied"):
            obj.resultApplied.connect(self.on_result)
            marks["window"] = obj
        if event.type() == QEvent.Type.Paint and isinstance(obj, QSplashScreen) and "splash_s" not in marks:
            marks["splash_s"] = since_start()
        if event.type() == QEvent.Type.Paint and isinstance(obj, QMainWindow) and "paint_s" not in marks:
            marks["paint_s"], marks["paint_rss"] = since_start(), rss_mib()

    def on_result(self, result):
        from app.protocol.messages import Load

        from app.protocol.messages import Step

        if isinstance(result.request, Load) and "ready_s" not in marks:
            marks["ready_s"], marks["ready_rss"] = since_start(), rss_mib()
            marks["torch"] = "torch" in sys.modules
        if isinstance(result.request, Step) and "stepped_s" not in marks:
            marks["stepped_s"] = since_start()

watch = Watch()
qt.installEventFilter(watch)
from app.window.main import main
code = main(["--smoke-test", *sys.argv[1:]])
marks.pop("window", None)
print("LAUNCH " + json.dumps(marks), flush=True)
sys.exit(code)
"""


def launch(checkout: Path, options: tuple[str, ...] = ()) -> dict:
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", PYTHONPATH=str(checkout), HF_HUB_OFFLINE="1")
    with tempfile.TemporaryDirectory() as home:  # no remembered model: the demo loads (or --model's)
        env.update(HOME=home, XDG_CONFIG_HOME=home, XDG_STATE_HOME=home)
        out = subprocess.run([sys.executable, "-c", DRIVER, *options], cwd=checkout, env=env, capture_output=True,
                             text=True, timeout=300)
    line = [x for x in out.stdout.splitlines() if x.startswith("LAUNCH ")]
    if out.returncode != 0 or not line:
        raise RuntimeError(f"launch failed in {checkout}: {out.stderr[-1500:]}")
    return json.loads(line[-1][len("LAUNCH "):])


def worktree(rev: str) -> Path:
    folder = Path(tempfile.mkdtemp(prefix="nexttoken-before-"))
    subprocess.run(["git", "worktree", "add", "--detach", str(folder), rev], cwd=ROOT, check=True, capture_output=True)
    return folder


def summary(runs: list[dict], key: str) -> str:
    values = [r[key] for r in runs if key in r]
    return f"{statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f})" if values else "n/a"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--before", metavar="REV", help="also launch this commit, interleaved with this checkout")
    p.add_argument("--model", action="append", default=[], metavar="NAME",
                   help="launch with --model NAME (repeatable: the models take turns)")
    p.add_argument("--steps", type=int, default=None, help="the smoke test's steps (default 3)")
    args = p.parse_args(argv)
    checkouts = {"this checkout": ROOT}
    if args.before:
        checkouts = {f"before ({args.before})": worktree(args.before), **checkouts}
    steps = () if args.steps is None else ("--steps", str(args.steps))
    cases = {(f"{name}, {model}" if model else name, folder): ((("--model", model) if model else ()) + steps)
             for name, folder in checkouts.items() for model in (args.model or [None])}
    results: dict[str, list[dict]] = {label: [] for label, _ in cases}
    try:
        for _ in range(args.runs):
            for (label, folder), options in cases.items():
                results[label].append(launch(folder, options))
                print(f"{label}: {json.dumps(results[label][-1])}", file=sys.stderr, flush=True)
    finally:
        for name, folder in checkouts.items():
            if folder != ROOT:
                subprocess.run(["git", "worktree", "remove", "--force", str(folder)], cwd=ROOT, capture_output=True)
    print(f"| launch ({args.runs} runs, median (min-max)) | splash painted, s | main window painted, s | model ready, s | "
          "first step drawn, s | window process RSS at ready, MiB | torch in the window's process |")
    print("|---|---|---|---|---|---|---|")
    for name, runs in results.items():
        torch = {r.get("torch") for r in runs}
        print(f"| {name} | {summary(runs, 'splash_s')} | {summary(runs, 'paint_s')} | {summary(runs, 'ready_s')} | "
              f"{summary(runs, 'stepped_s')} | {summary(runs, 'ready_rss')} | {', '.join(map(str, torch))} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
