"""What do the exports cost the window's event loop?

1. The history table of a 1,000-step session at GPT-2's vocabulary (50,257 logits a step): the
   longest gap between ticks of a 5 ms QTimer on the GUI thread from the click to the file being
   there (the distributions are recomputed on the writer's thread), and how long the file took.
   The session is the demo model's (GPT-2's vocabulary) first steps, repeated to 1,000 records: the
   table's cost depends on the vocabulary and the number of steps, not on the model.
2. A full-window PNG (2x, ``--size``, default 1366x768) after 4 steps, five times; medians of 5:
   - the event-loop time: how long ``export_picture`` (what File → Export does once a path is
     chosen) holds the GUI thread (the render: Qt renders widgets only there; the PNG is encoded and
     written on the export thread), in wall-clock time and in the GUI thread's CPU time;
   - the longest gap between ticks of a 5 ms timer from the click until the file is written and
     ``SETTLE_MS`` more (the plots, drawn uncached for the picture, repaint one per turn after it):
     every stall the export causes is in it, the call included;
   - for comparison, the render and the PNG encoding each alone on the GUI thread.

    python benchmarks/bench_exports.py [--size 1366x768] [--steps 1000] [--only png|history]

Target: each under 250 ms. A script, not a test: the figures depend on the machine and on
its load, which is printed with them (the development machine's 2 cores are shared). ``Code:`` says
which tree was measured: to compare two versions, run each one's copy of this script in turn.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Callable

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from PySide6.QtCore import QByteArray, QBuffer, QEventLoop, QIODevice, QSettings, Qt, QTimer  # noqa: E402
from PySide6.QtWidgets import QApplication  # noqa: E402

from app.window import pictures  # noqa: E402
from app.window.window import MainWindow  # noqa: E402

DEMO_DIR = ROOT / "resources" / "models" / "gpt2-tiny-demo"
TARGET_MS = 250
SETTLE_MS = 300  # after the file is written: the plots' repaints, one per turn, are counted too


def wait_for(signal, timeout_s: float = 120.0):
    loop, got = QEventLoop(), []

    def arrived(*args):
        got.append(args)
        loop.quit()

    signal.connect(arrived)
    QTimer.singleShot(int(timeout_s * 1000), loop.quit)
    loop.exec()
    signal.disconnect(arrived)
    if not got:
        raise TimeoutError(f"no {signal} in {timeout_s} s")
    return got[0]


def long_session(result, steps: int):
    """``result`` with ``steps`` records: its decode records repeated, renumbered 0, 1, …"""
    decode = [r for r in result.records if r.step > 0]
    records = tuple(replace(decode[i % len(decode)], step=i) for i in range(steps))
    trace = replace(result.trace, record=records[-1], pieces=tuple(result.prompt_pieces) + ("x",) * (steps - 1))
    return replace(result, records=records, trace=trace)


def beat_gaps() -> tuple[QTimer, list[float], Callable[[], None]]:
    """A 5 ms timer on the GUI thread, the gaps between its ticks (seconds), and ``restart()``: a gap
    longer than 5 ms is time the event loop could not answer."""
    gaps, last = [0.0], [time.perf_counter()]

    def tick():
        now = time.perf_counter()
        gaps.append(now - last[0])
        last[0] = now

    beat = QTimer(interval=5, timerType=Qt.TimerType.PreciseTimer)
    beat.timeout.connect(tick)

    def restart():
        gaps[:] = [0.0]
        last[0] = time.perf_counter()
        beat.start()

    return beat, gaps, restart


def run_for(seconds: float) -> None:
    """Run the event loop for ``seconds``."""
    loop = QEventLoop()
    QTimer.singleShot(int(seconds * 1000), loop.quit)
    loop.exec()


def history_table(window, folder: Path, steps: int) -> tuple[float, float]:
    """The longest event-loop gap (ms) while the history table of ``steps`` steps is written, and
    how long it took (s)."""
    shown = window.state.result
    window.state.result = long_session(shown, steps)
    beat, gaps, restart = beat_gaps()
    restart()
    started = time.perf_counter()
    window.exporter.export_table("history", folder / "history.csv")
    (outcome,) = wait_for(window.exporter.saved)
    took = time.perf_counter() - started
    beat.stop()
    window.state.result = shown
    assert outcome.error is None, outcome.error
    return max(gaps) * 1e3, took


def window_png(window, folder: Path, runs: int = 5) -> dict[str, list[float]]:
    """Each figure of a full-window PNG (ms), one per run."""
    figures = {"call": [], "call_cpu": [], "gap": [], "render": [], "encode": []}
    beat, gaps, restart = beat_gaps()
    for i in range(runs):
        restart()
        t, cpu = time.perf_counter(), time.thread_time()
        assert window.exporter.export_picture(window, folder / f"window{i}.png"), window.status_line.status_label.text()
        figures["call"].append((time.perf_counter() - t) * 1e3)
        figures["call_cpu"].append((time.thread_time() - cpu) * 1e3)
        (outcome,) = wait_for(window.exporter.saved)
        assert outcome.error is None, outcome.error
        run_for(SETTLE_MS / 1e3)
        beat.stop()
        figures["gap"].append(max(gaps) * 1e3)
    for _ in range(runs):
        t = time.perf_counter()
        image = pictures.picture(window)
        t1 = time.perf_counter()
        data = QByteArray()
        buffer = QBuffer(data)
        buffer.open(QIODevice.OpenModeFlag.WriteOnly)
        image.save(buffer, "PNG", pictures.PNG_QUALITY)
        figures["render"].append((t1 - t) * 1e3)
        figures["encode"].append((time.perf_counter() - t1) * 1e3)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", default="1366x768")
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--only", choices=["png", "history"])
    args = parser.parse_args()
    width, height = map(int, args.size.split("x"))
    app = QApplication.instance() or QApplication(sys.argv)
    folder = Path(tempfile.mkdtemp(prefix="bench-exports-"))
    window = MainWindow(QSettings(str(folder / "x.ini"), QSettings.IniFormat), engine="thread", remember=False)
    window.resize(width, height)
    window.show()
    window.start(str(DEMO_DIR), "The cat sat on the")
    wait_for(window.resultApplied)
    for _ in range(4):
        window.step()
        wait_for(window.resultApplied)
    for _ in range(50):
        app.processEvents()
    load = os.getloadavg()[0]
    history = history_table(window, folder, args.steps) if args.only != "png" else None
    png = window_png(window, folder) if args.only != "history" else None
    window.close()

    def verdict(ms: float) -> str:
        return "met" if ms < TARGET_MS else "NOT met"

    print(f"## Exports ({width} x {height}, offscreen, {os.cpu_count()} CPUs, load average {load:.1f} -> {os.getloadavg()[0]:.1f})\n")
    print(f"Code: {Path(pictures.__file__).resolve().parents[1]}\n")
    print("| Measure | Figure | Target |")
    print("|---|---|---|")
    if history is not None:
        gap, took = history
        print(f"| History table, {args.steps:,} steps at 50,257 logits: longest event-loop gap | {gap:.0f} ms ({verdict(gap)}) | < {TARGET_MS} ms |")
        print(f"| History table: written after | {took:.1f} s | — |")
    if png is not None:
        med = {k: statistics.median(v) for k, v in png.items()}
        runs = {k: ", ".join(f"{x:.0f}" for x in v) for k, v in png.items()}
        print(f"| Full-window PNG (2x): event-loop time (``export_picture`` on the GUI thread), median of 5 | {med['call']:.0f} ms "
              f"(runs {runs['call']}; {verdict(med['call'])}) | < {TARGET_MS} ms |")
        print(f"| Full-window PNG: the same, GUI-thread CPU time | {med['call_cpu']:.0f} ms (runs {runs['call_cpu']}) | — |")
        print(f"| Full-window PNG: longest event-loop gap from the click until the file is written + {SETTLE_MS} ms, median of 5 | "
              f"{med['gap']:.0f} ms (runs {runs['gap']}; {verdict(med['gap'])}) | < {TARGET_MS} ms |")
        print(f"| Render / PNG encoding, each alone on the GUI thread (medians) | {med['render']:.0f} ms / {med['encode']:.0f} ms | — |")


if __name__ == "__main__":
    main()
