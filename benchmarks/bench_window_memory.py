"""Where does the window's process grow? A seeded random session on the real window (engine in its
child process, demo model: GPT-2's vocabulary), its resident size printed every 15 s.

    python benchmarks/bench_window_memory.py SECONDS [all|both|data|ui|pictures|rest]

"data": steps, Back, Reset, choices, branches; "ui": pictures, copies, tables, help, focus,
projector, resizes, views, Show top, prompt edits; "pictures": exports and copies only; "rest": ui
without them. "both": data and ui mixed, the whole random session. "all" is "both" and also prints
tracemalloc's largest growths (Python and numpy allocations; tracing adds to the RSS).
Found with it (2026-12-01, 60-75 s each): pictures climbed 149 → 210 MiB, the rest stayed flat,
tracemalloc saw nothing grow; with ``MALLOC_MMAP_THRESHOLD_=1048576`` pictures stayed at 165 MiB
(app/logic/memory.py now fixes the threshold). A script, not a test: the figures depend on the machine.
"""
import gc, os, random, sys, time, tracemalloc
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from PySide6.QtWidgets import QApplication
from PySide6.QtCore import QSettings, QEventLoop, QTimer


def main() -> None:
    app = QApplication(sys.argv)
    from app.window.window import MainWindow
    from app.window import guard
    def rss_bytes():
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    MODE = sys.argv[2] if len(sys.argv) > 2 else "all"
    SECONDS = float(sys.argv[1]) if len(sys.argv) > 1 else 120
    rng = random.Random(5)
    w = MainWindow(QSettings("/tmp/bench-window-memory.ini", QSettings.IniFormat), engine="process", remember=False)
    w.resize(1366, 768); w.show()
    def wait_ms(ms):
        loop = QEventLoop(); QTimer.singleShot(ms, loop.quit); loop.exec()
    def wait_result():
        loop = QEventLoop(); w.resultApplied.connect(loop.quit); QTimer.singleShot(60000, loop.quit); loop.exec(); w.resultApplied.disconnect(loop.quit)
    w.start("resources/models/gpt2-tiny-demo", "The cat sat on the")
    wait_result()
    for _ in range(3): w.step(); wait_result()
    gc.collect()
    tracemalloc.start(8) if MODE == 'all' else None
    snap0 = tracemalloc.take_snapshot() if MODE == 'all' else None
    print("start RSS", rss_bytes() / 2**20)
    rss0 = rss_bytes(); t0 = time.monotonic(); n = 0; last = t0
    panels = [w.tokens, *w.overview.panels()]
    while time.monotonic() - t0 < SECONDS:
        n += 1; r = rng.random()
        if MODE == "data": r = r * 0.54
        elif MODE == "ui": r = 0.54 + r * 0.34
        elif MODE == "pictures": r = 0.54 + r * 0.06
        elif MODE == "rest": r = 0.63 + r * 0.25
        if r < 0.35: w.step()
        elif r < 0.40: w.back()
        elif r < 0.43: w.reset()
        elif r < 0.50 and w.state.result is not None and w.state.result.trace is not None:
            ids = w.state.result.trace.candidate_ids; w.logits.tokenChosen.emit(int(ids[rng.randrange(min(5, len(ids)))]))
        elif r < 0.54 and w.state.result is not None and w.state.result.branches is not None:
            nodes = w.state.result.branches.ids
            if len(nodes): w.switch_branch(int(rng.choice(nodes)))
        elif r < 0.58: w.exporter.export_picture(rng.choice([w] + panels), f"/tmp/bench-window-memory-{n % 3}.png")
        elif r < 0.60: w.exporter.copy_picture(w)
        elif r < 0.63: w.exporter.export_table(rng.choice(["history", "candidates"]), "/tmp/bench-window-memory.csv")
        elif r < 0.67: w.help.show(rng.choice([None] + panels))
        elif r < 0.71: w.focus.toggle(rng.choice([None] + panels))
        elif r < 0.74: w.commands.projector_action.trigger()
        elif r < 0.78: w.resize(*rng.choice([(1024, 768), (1280, 720), (1366, 768), (1600, 900)]))
        elif r < 0.82: w.show_view(rng.choice(["main", "inside", "sampling", "cache", "branches"]))
        elif r < 0.85: w.logits.n_spin.setValue(rng.choice([5, 10, 20, 64]))
        elif r < 0.88: w.tokens.editor.setPlainText(rng.choice(["The cat sat on the", "Once upon a time", "a b c"]))
        wait_ms(rng.choice([0, 5, 30, 120]))
        if time.monotonic() - last > 15:
            last = time.monotonic(); print(f"{last - t0:5.0f} s  {n} actions  RSS {rss_bytes() / 2**20:.0f} MiB  traced {tracemalloc.get_traced_memory()[0] / 2**20:.0f} MiB", flush=True)
    w.player.pause(); wait_ms(3000); gc.collect()
    if MODE != 'all':
        print(f"end: {n} actions, RSS {rss0 / 2**20:.0f} -> {rss_bytes() / 2**20:.0f} MiB"); w.close(); return
    snap1 = tracemalloc.take_snapshot()
    print(f"end: {n} actions, RSS {rss0 / 2**20:.0f} -> {rss_bytes() / 2**20:.0f} MiB; traced {tracemalloc.get_traced_memory()[0] / 2**20:.0f} MiB")
    for stat in snap1.compare_to(snap0, "traceback")[:8]:
        print(f"{stat.size_diff / 2**20:+.1f} MiB  count {stat.count_diff:+d}")
        for line in stat.traceback.format()[-8:]: print("     ", line)
    w.close()


if __name__ == "__main__":  # the engine process is spawned: it must not run this
    main()
