"""What does the window cost? GUI-thread time per step, event-loop stalls, Play throughput, launch.

Runs offscreen with GPT-2 small's shape (``GPT2Config()`` defaults: 12 layers x 12 heads, d=768,
1,024 positions, random weights, fp32), saved with the bundled tokenizer to a temporary folder and
loaded with ``engine.load_model``. Measures:

1. One step into every panel (``MainWindow.apply_result`` and the update turns it spreads over the
   event loop, one per panel) at 256 and 1,000 positions of context, median and p95 over
   consecutive decode steps; then the plots' paint turns, and the longest single turn.
2. The longest gap between ticks of a 5 ms QTimer on the GUI thread while Play runs at max speed.
3. Play's tokens per second at max speed (sampling, top-k 50) against the bare model's cached
   decode steps per second (plain ``GPT2LMHeadModel``, default attention, greedy, no outputs
   requested), for each engine (a child process, the app's default, or a thread) and torch thread
   count, with GPT-2 small's shape and the bundled demo model; in rounds (bare, then each engine),
   each Play against the bare model of its round, medians over the rounds.
   A target is "met" when the p95 (``apply_result``) or the worst case (event-loop gap) meets it.
4. Resident size of the window's process and the engine process after 1,000 steps of Play.
5. Launch to a window with the demo model ready: ``python -m app --smoke-test`` (load, 3 steps,
   render once) as a child process.

    python benchmarks/bench_gui.py            # full run, about 6 minutes on 2 cores
    python benchmarks/bench_gui.py --quick    # smoke run
    python benchmarks/bench_gui.py --only apply --size 1024x768   # a screen where the panels take two pages

Prints a markdown table (paste it into benchmarks/RESULTS_GUI.md). A script, not a test: the
figures depend on the machine and on what else it is running.
"""

from __future__ import annotations

import argparse
import datetime
import inspect
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import torch  # noqa: E402
from PySide6.QtCore import QEventLoop, QSettings, QTimer  # noqa: E402
from PySide6.QtWidgets import QApplication  # noqa: E402

from app.host import session_host, torch_threads  # noqa: E402
from app.protocol.messages import Resample, Step  # noqa: E402
from app.window.main import freeze_startup_objects  # noqa: E402
from app.logic.views import VIEWS  # noqa: E402
from app.window.window import MainWindow  # noqa: E402
from engine import SamplingSettings, Session, load_model  # noqa: E402
from engine.random_model import write_random_gpt2  # noqa: E402

DEMO_DIR = ROOT / "resources" / "models" / "gpt2-tiny-demo"
WORDS = [" The", " cat", " sat", " on", " the", " mat", " and", " the", " dog", " ran", " away", " from", " the", " house", "."]
GREEDY = SamplingSettings(greedy=True)
PLAY_TEXT = "Once upon a time, in a small town by the sea, there lived an old fisherman who"

FULL = dict(restyle_repeats=9, contexts=(256, 1000), apply_repeats=21, play_steps=100, demo_play_steps=120, rounds=3, launches=3, memory_steps=1000)
QUICK = dict(restyle_repeats=3, contexts=(256, 1000), apply_repeats=7, play_steps=30, demo_play_steps=40, rounds=1, launches=1, memory_steps=100)
TARGETS = {256: 16.0, 1000: 33.0}
GAP_TARGET_MS = 50.0
PLAY_TARGET = 0.8
RESTYLE_TARGET_MS = 100.0
WINDOW_SIZE = (1600, 1000)  # --size changes it
VIEW = "overview"  # the view in front (--view): "overview" (the Overview) or "flow", side by side


# ------------------------------------------------------------------ setup
def build_model_folder(folder: Path, seed: int = 0) -> Path:
    """GPT-2 small's shape with random weights, plus the real tokenizer, as a model folder."""
    return write_random_gpt2(folder, seed)


def prompt_text(n: int) -> str:
    return "".join(WORDS[i % len(WORDS)] for i in range(n))


def percentile(values, q: float) -> float:
    return float(np.percentile(np.asarray(values), q))


def new_window(engine: str = "thread") -> MainWindow:
    settings = QSettings(str(Path(tempfile.gettempdir()) / "nexttoken-bench.ini"), QSettings.IniFormat)
    window = MainWindow(settings, remember=False, engine=engine)
    window.resize(*WINDOW_SIZE)
    window.show()
    window.show_view(VIEW)
    QApplication.processEvents()
    freeze_startup_objects()  # as app.window.main does: the process's objects so far are never walked again
    return window


def wait_for(app: QApplication, predicate, timeout_s: float = 600) -> None:
    end = time.perf_counter() + timeout_s
    while not predicate():
        if time.perf_counter() > end:
            raise TimeoutError("the window did not get there in time")
        app.processEvents()
        time.sleep(0.001)


# ----------------------------------------------------------- measurements
def measure_apply(app, loaded, context: int, repeats: int) -> dict[str, float]:
    """GUI-thread time to draw one decode step that reaches ``context`` positions, in every panel."""
    session = Session(loaded, GREEDY)
    session.set_prompt(prompt_text(context - repeats))
    points = session_host.PointCache()
    results = []
    for _ in range(repeats + 1):  # the prefill, then one decode step per repeat
        session.step()
        results.append(session_host.make_result(session, Step(1), points=points))
    window = new_window()
    answer_flow_maths(app, window, session, results)
    applied = []
    window.resultApplied.connect(applied.append)
    window.painter.apply(results[0])  # untimed: the prefill draws every panel from scratch
    wait_for(app, lambda: applied)
    app.processEvents()
    apply_ms, paint_ms, longest_turn, work_ms = [], [], [], []
    deliveries = len(window.state._subscribers) + 1  # one turn per panel, then the state's own
    for result in results[1:]:
        applied.clear()
        cpu = time.thread_time()
        t = time.perf_counter()
        window.painter.apply(result)  # the first panel's update turn runs inside
        call_ms = (time.perf_counter() - t) * 1e3
        while not applied:  # the other panels' update turns, then the plots' paint turns
            app.processEvents(QEventLoop.AllEvents | QEventLoop.WaitForMoreEvents)  # sleeps between turns
        app.processEvents()
        work_ms.append((time.thread_time() - cpu) * 1e3)
        turns = window.painter.turn_ms
        apply_ms.append(call_ms + sum(turns[1:deliveries]))
        paint_ms.append(sum(turns[deliveries:]))
        longest_turn.append(max([call_ms] + turns[1:]))
    pages = len(window.overview.pages)
    window.close()
    return {
        "context": results[-1].context_len,
        "pages": pages,
        "median": statistics.median(apply_ms),
        "p95": percentile(apply_ms, 95),
        "paint_median": statistics.median(paint_ms),
        "paint_p95": percentile(paint_ms, 95),
        "turn_max": max(longest_turn),
        "work_median": statistics.median(work_ms),
        "work_p95": percentile(work_ms, 95),
    }


def answer_flow_maths(app, window, session, results) -> None:
    """The Flow's head maths asks the engine for the Inside answer of the step it shows; this
    window has no model loaded, so answer as the engine would: each step's answer recomputed from
    ``session`` beforehand (untimed: the engine's work), delivered as an event of its own (the
    table drawn then is the step's GUI work)."""
    source = getattr(window.flow_view.flow, "maths", None)
    if source is None:  # a tree without the head maths
        return
    from engine.inside import inside

    layer = window.state.layer
    answers = {(r.trace.step, r.trace.record.end - 1, layer): inside(session, r.trace.step, kv_layers=(layer,)) for r in results}
    source.inspectRequested.disconnect()

    def answer(step, position, layer):
        trace = answers.get((step, position, layer))
        if trace is not None:
            QTimer.singleShot(0, lambda: source.show_inside(trace))

    source.inspectRequested.connect(answer)


def longest_gap_ms(app, action, settle_s: float = 0.8) -> float:
    """The longest time the event loop did not answer (a 2 ms timer's gaps) while ``action`` and
    the drawing it set off ran: what a person sees as a stall."""
    gaps, last = [], [time.perf_counter()]

    def beat():
        now = time.perf_counter()
        gaps.append(now - last[0])
        last[0] = now

    timer = QTimer(interval=2)
    timer.timeout.connect(beat)
    timer.start()
    end = time.perf_counter() + 0.1
    while time.perf_counter() < end:
        app.processEvents()
    gaps.clear()
    last[0] = time.perf_counter()
    action()
    end = time.perf_counter() + settle_s
    while time.perf_counter() < end:
        app.processEvents()
    timer.stop()
    return max(gaps) * 1e3


def measure_restyle(app, loaded, context: int, repeats: int) -> dict[str, float]:
    """Longest event-loop stall of a projector-mode switch and of a resize (1366 x 768 <-> 1600 x 1000),
    with a decode step at ``context`` positions on screen; medians of ``repeats``."""
    session = Session(loaded, GREEDY)
    session.set_prompt(prompt_text(context - 1))
    session.step()
    session.step()
    window = new_window()
    applied = []
    window.resultApplied.connect(applied.append)
    window.painter.apply(session_host.make_result(session, Step(1)))
    wait_for(app, lambda: applied)
    toggles = [longest_gap_ms(app, window.commands.projector_action.trigger) for _ in range(repeats)]
    sizes = [(1366, 768), (1600, 1000)]
    resizes = [longest_gap_ms(app, lambda i=i: window.resize(*sizes[i % 2])) for i in range(repeats)]
    window.close()
    return {"context": context, "toggle": statistics.median(toggles), "toggle_max": max(toggles),
            "resize": statistics.median(resizes), "resize_max": max(resizes), "repeats": repeats}


def measure_stages(app, loaded, repeats: int) -> dict[str, float]:
    """GUI-thread time of the sampling view's update after a settings change (its stage table and
    draw bar, with ``Distribution.stages`` at GPT-2's vocabulary), with the engine's re-sample done."""
    from app.panels.sampling_stages_panel import SamplingStagesPanel
    from app.logic.state import AppState
    from app.window import theme as th

    session = Session(loaded, SamplingSettings(top_k=50, top_p=0.9, repetition_penalty=1.3, seed=1))
    session.set_prompt(prompt_text(120))
    session.step()
    session.step()
    state = AppState(th.NORMAL, th.PROJECTOR)
    panel = SamplingStagesPanel(state)
    panel.resize(1400, 800)
    panel.show()  # shown: a hidden sampling view draws nothing until it is shown
    times = []
    for i in range(repeats + 1):
        settings = SamplingSettings(temperature=0.5 + 0.1 * (i % 5), top_k=50, top_p=0.9, repetition_penalty=1.3, seed=1)
        session.resample(settings)
        result = session_host.make_result(session, Resample(i))
        t = time.perf_counter()
        state.set_result(result)
        times.append((time.perf_counter() - t) * 1e3)
    panel.close()
    return {"median": statistics.median(times[1:]), "p95": percentile(times[1:], 95), "repeats": repeats}


def measure_play(app, folder: Path | None, loaded, steps: int, threads: int, engine: str, attempts: int = 20) -> dict[str, float]:
    """Play at max speed for ``steps`` steps: results per second and the longest event-loop gap.

    Play samples (top-k 50); a seed whose run draws <|endoftext|> early is replaced by the next one.
    ``engine``: "process" (the app's default) loads ``folder`` (None: the demo model) in its child
    process; "thread" gets ``loaded``, the same model already in memory.
    """
    torch_threads.ENGINE_TORCH_THREADS = threads  # read when the window's engine starts
    window = new_window(engine)
    arrived: list[tuple[float, int]] = []  # (time, step) of every result the worker delivered
    ticks: list[float] = []
    window.controller.resultReady.connect(
        lambda r: arrived.append((time.perf_counter(), r.trace.step)) if r.trace is not None else None
    )
    timer = QTimer(interval=5)
    timer.timeout.connect(lambda: ticks.append(time.perf_counter()))
    window.commands.max_speed.setChecked(True)
    if engine == "process":
        window.load_model(str(folder) if folder else None, prompt=PLAY_TEXT)
    else:
        window.load_model(None, loaded=loaded, prompt=PLAY_TEXT)
    wait_for(app, lambda: window.state.result is not None)
    for seed in range(attempts):
        window.controller.set_settings(SamplingSettings(top_k=50, seed=seed))
        wait_for(app, lambda: window.controller.idle)
        arrived.clear(), ticks.clear()
        timer.start()
        window.player.play()
        wait_for(app, lambda: (arrived and arrived[-1][1] >= steps) or not window.player.playing)
        window.player.pause()
        timer.stop()
        wait_for(app, lambda: window.controller.idle)
        if arrived and arrived[-1][1] >= steps:
            break
        window.reset()
        wait_for(app, lambda: window.controller.idle)
    window.close()
    decode = [(t, s) for t, s in arrived if s >= 1]  # from the first decode step on: no prefill
    (t0, s0), (t1, s1) = decode[0], decode[-1]
    first = next(t for t, _ in decode)
    gaps = np.diff([t for t in ticks if t >= first])
    return {
        "engine": engine,
        "threads": threads,
        "steps": s1 - s0,
        "context": arrived[-1][1] + len(loaded.tokenizer.encode(PLAY_TEXT)),
        "sps": (s1 - s0) / (t1 - t0),
        "max_gap_ms": float(gaps.max() * 1e3) if gaps.size else float("nan"),
        "p99_gap_ms": percentile(gaps * 1e3, 99) if gaps.size else float("nan"),
    }


def rss_mib(pid: int) -> float:
    """Resident size of process ``pid`` in MiB (Linux /proc; NaN elsewhere)."""
    try:
        pages = int(Path(f"/proc/{pid}/statm").read_text().split()[1])
    except OSError:
        return float("nan")
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


def measure_memory(app, folder: Path, steps: int) -> dict[str, float]:
    """Resident size of the window's process and the engine process after ``steps`` steps of Play
    at max speed (greedy, GPT-2 small's shape, the app's default process engine)."""
    torch_threads.ENGINE_TORCH_THREADS = max(1, torch_threads.cores() - 1)
    window = new_window("process")
    window.commands.max_speed.setChecked(True)
    window.load_model(str(folder), prompt=PLAY_TEXT)
    wait_for(app, lambda: window.state.result is not None)
    window.controller.set_settings(GREEDY)
    wait_for(app, lambda: window.controller.idle)
    child = window.controller.engine.process.pid
    before = {"window": rss_mib(os.getpid()), "engine": rss_mib(child)}
    window.player.play()
    wait_for(app, lambda: window.state.result is not None and window.state.result.trace is not None
             and window.state.result.trace.step >= steps or window.state.result.stopped)
    window.player.pause()
    wait_for(app, lambda: window.controller.idle)
    app.processEvents()
    after = {"window": rss_mib(os.getpid()), "engine": rss_mib(child), "steps": window.state.result.trace.step}
    window.close()
    return {"before": before, "after": after}


def measure_bare(folder: Path | None, steps: int, threads: int) -> float:
    """Cached greedy decode steps per second of the plain model, from PLAY_TEXT."""
    from transformers import GPT2LMHeadModel

    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    model = GPT2LMHeadModel.from_pretrained(folder or DEMO_DIR, dtype=torch.float32, local_files_only=True).eval()
    tokenizer = load_model(str(folder) if folder else None).tokenizer
    ids = torch.tensor([tokenizer.encode(PLAY_TEXT)])
    kwarg = "cache" if "cache" in inspect.signature(type(model).forward).parameters else "past_key_values"
    with torch.inference_mode():
        out = model(input_ids=ids, use_cache=True)
        cache, nxt = out.past_key_values, out.logits[:, -1].argmax(-1, keepdim=True)
        t = time.perf_counter()
        for _ in range(steps):  # a minimal generate loop: forward one token, pick, feed it back
            out = model(input_ids=nxt, use_cache=True, logits_to_keep=1, **{kwarg: cache})
            cache, nxt = out.past_key_values, out.logits[:, -1].argmax(-1, keepdim=True)
        sps = steps / (time.perf_counter() - t)
    torch.set_num_threads(previous)
    return sps


def measure_launch(runs: int) -> dict[str, float]:
    """``python -m app --smoke-test``: wall time of the child, and its own launch-to-done seconds."""
    wall, inner = [], []
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen")
    for _ in range(runs):
        t = time.perf_counter()
        out = subprocess.run([sys.executable, "-m", "app", "--smoke-test"], cwd=ROOT, env=env,
                             capture_output=True, text=True, timeout=300)
        wall.append(time.perf_counter() - t)
        line = [x for x in out.stdout.splitlines() if x.startswith("{")][-1]
        inner.append(json.loads(line)["seconds"])
    return {"wall": statistics.median(wall), "inner": statistics.median(inner), "runs": runs}


# ---------------------------------------------------------------- report
def mark(ok: bool) -> str:
    return "met" if ok else "**missed**"


def report(args, applies, plays, memory, launch, wall_s: float, restyle=None, stages=None) -> str:
    cores = torch_threads.cores()
    lines = [
        f"GUI benchmark, {datetime.date.today()}, `python benchmarks/bench_gui.py{' --quick' if args.quick else ''}`: "
        f"{platform.processor() or platform.machine()}, {cores} cores, torch {torch.__version__} (CPU), "
        f"offscreen Qt, window {WINDOW_SIZE[0]} x {WINDOW_SIZE[1]}, the {VIEW} view in front, GPT-2 small's shape (12 layers x 12 heads, d=768, random weights). "
        f"The app's engine uses `torch.set_num_threads({torch_threads.cores() - 1 or 1})`. Took {wall_s:.0f} s.",
        "",
        "| measure | value | target | |",
        "|---|---|---|---|",
    ]
    for a in applies:
        paged = "" if a["pages"] == 1 else f", the panels on {a['pages']} pages"
        target = TARGETS.get(a["context"] if a["context"] in TARGETS else min(TARGETS, key=lambda c: abs(c - a["context"])))
        lines.append(
            f"| one step into every panel (`apply_result` and its update turns), {a['context']} positions of context{paged} "
            f"(median / p95 of {args.apply_repeats}) "
            f"| {a['median']:.1f} / {a['p95']:.1f} ms | < {target:.0f} ms | {mark(a['p95'] < target)} |"
        )
        lines.append(
            f"| then painting the plots, one per turn (median / p95 of the sum; longest single turn of the step) | {a['paint_median']:.1f} / {a['paint_p95']:.1f} ms ({a['turn_max']:.0f} ms) | | |"
        )
        lines.append(
            f"| all the GUI thread's work for the step, layout passes between the turns included (its CPU time, median / p95) "
            f"| {a['work_median']:.1f} / {a['work_p95']:.1f} ms | | |"
        )
    if stages:
        lines.append(
            f"| the sampling view's update after a settings change, GPT-2's vocabulary (median / p95 of {stages['repeats']}) "
            f"| {stages['median']:.1f} / {stages['p95']:.1f} ms | < 16 ms | {mark(stages['median'] < 16)} |"
        )
    if restyle:
        r = restyle
        lines.append(
            f"| longest event-loop stall of a projector-mode switch, {r['context']} positions on screen (median of {r['repeats']}; worst) "
            f"| {r['toggle']:.0f} ms ({r['toggle_max']:.0f} ms) | < {RESTYLE_TARGET_MS:.0f} ms | {mark(r['toggle'] < RESTYLE_TARGET_MS)} |"
        )
        lines.append(
            f"| longest event-loop stall of a resize, 1366 x 768 <-> 1600 x 1000 (median of {r['repeats']}; worst) "
            f"| {r['resize']:.0f} ms ({r['resize_max']:.0f} ms) | < {RESTYLE_TARGET_MS:.0f} ms | {mark(r['resize'] < RESTYLE_TARGET_MS)} |"
        )
    groups: dict[tuple, list] = {}
    for p in plays:
        groups.setdefault((p["model"], p["threads"], p["engine"]), []).append(p)
    for (model, threads, engine), runs in groups.items():
        ratios = [r["sps"] / r["bare"] for r in runs]  # each against the bare model of its own round
        ratio = statistics.median(ratios)
        spread = f", {min(ratios):.0%}-{max(ratios):.0%}" if len(runs) > 1 else ""
        row = (f"| Play at max speed, {model}, {engine} engine, torch threads {threads}: {runs[0]['steps']} steps to "
               f"{runs[0]['context']} positions, median of {len(runs)} rounds | {statistics.median(r['sps'] for r in runs):.1f} tokens/s "
               f"vs bare {statistics.median(r['bare'] for r in runs):.1f}/s = **{ratio:.0%}**{spread} ")
        lines.append(row + f"| ≥ {PLAY_TARGET:.0%} | {mark(ratio >= PLAY_TARGET)} |")
        worst = max(r["max_gap_ms"] for r in runs)
        lines.append(
            f"| longest event-loop gap during those Plays (5 ms timer; worst of the rounds, median p99) | {worst:.0f} ms "
            f"({statistics.median(r['p99_gap_ms'] for r in runs):.0f} ms) | < {GAP_TARGET_MS:.0f} ms | {mark(worst < GAP_TARGET_MS)} |"
        )
    if memory:
        b, a = memory["before"], memory["after"]
        lines.append(
            f"| resident size after {a['steps']:,} steps of max-speed Play (GPT-2 small shape, process engine): "
            f"engine process; growth of the window's process (this benchmark's process, which also holds "
            f"the models of the other measures) | {a['engine']:,.0f} MiB (loaded: {b['engine']:,.0f} MiB); "
            f"+{a['window'] - b['window']:,.0f} MiB | | |"
        )
    if launch:
        lines.append(
            f"| launch to a window with the demo model ready and 3 steps drawn (`python -m app --smoke-test`, "
            f"median of {launch['runs']}) | {launch['wall']:.1f} s wall ({launch['inner']:.1f} s from `main()`) | | |"
        )
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="fewer repeats and steps (a smoke run)")
    p.add_argument("--engines", nargs="+", choices=("process", "thread"), default=("process", "thread"),
                   help="where Play runs the model: a child process (the app's default) and/or a thread")
    measures = ("apply", "play", "memory", "launch", "restyle", "stages")
    p.add_argument("--skip", nargs="*", choices=measures, default=(), help="leave these measures out")
    p.add_argument("--only", nargs="*", choices=measures, help="run only these measures")
    p.add_argument("--size", metavar="WxH", default="1600x1000",
                   help="the window's size for every measure but the resize (1024x768: the panels take two pages)")
    p.add_argument("--view", choices=tuple(VIEWS), default="overview",
                   help="the view in front while measuring (main: the Overview; flow: the Flow view)")
    args = p.parse_args(argv)
    global WINDOW_SIZE, VIEW
    VIEW = args.view
    WINDOW_SIZE = tuple(int(v) for v in args.size.lower().split("x"))
    if args.only:
        args.skip = [m for m in measures if m not in args.only]
    cfg = QUICK if args.quick else FULL
    args.apply_repeats = cfg["apply_repeats"]
    started = time.perf_counter()
    app = QApplication.instance() or QApplication([])
    cores = torch_threads.cores()
    thread_counts = sorted({max(1, cores - 1), cores})
    with tempfile.TemporaryDirectory(prefix="nexttoken-bench-") as tmp:
        folder = build_model_folder(Path(tmp) / "gpt2-small-shape")
        loaded = load_model(str(folder))
        demo = load_model(None)
        applies = [] if "apply" in args.skip else [measure_apply(app, loaded, c, cfg["apply_repeats"]) for c in cfg["contexts"]]
        plays = []  # each Play with the bare model measured just before it, in the same round
        restyle = None if "restyle" in args.skip else measure_restyle(app, loaded, 256, cfg["restyle_repeats"])
        stages = None if "stages" in args.skip else measure_stages(app, loaded, cfg["apply_repeats"])
        played = () if "play" in args.skip else (("GPT-2 small shape", loaded, folder, cfg["play_steps"]),
                                                 ("demo model", demo, None, cfg["demo_play_steps"]))
        for name, model, path, steps in played:
            for threads in thread_counts:
                for _ in range(cfg["rounds"]):  # the machine's load drifts: interleave, then take medians
                    bare = measure_bare(path, steps, threads)
                    for engine in args.engines:
                        play = measure_play(app, path, model, steps, threads, engine)
                        plays.append(dict(play, model=name, bare=bare))
        memory = None if "memory" in args.skip else measure_memory(app, folder, cfg["memory_steps"])
        launch = None if "launch" in args.skip else measure_launch(cfg["launches"])
    print(report(args, applies, plays, memory, launch, time.perf_counter() - started, restyle, stages))
    return 0


if __name__ == "__main__":
    sys.exit(main())
