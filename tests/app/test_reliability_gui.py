"""Reliability, window side: any text, context limits, model and worker faults, a held
step key, quitting mid-work, settings and long sessions, over the real worker thread.

What each test proves, with the figures measured here, is written down in docs/RELIABILITY.md.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
from pathlib import Path
from time import perf_counter

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from PySide6.QtCore import Qt, QTimer
from PySide6.QtGui import QColor, QImage

from app.protocol import messages as p
from app.window import theme as th
from app.panels.tokens_panel import Chip, TokenStrip
from app.protocol.messages import Step
from engine import SamplingSettings, SettingsError, load_model
from engine.sampling import RANGES
from tests.conftest import make_tiny_folder
from tests.engine.test_reliability import ANY_TEXT, SPECIALS

from .helpers import run

REPO = Path(__file__).resolve().parents[2]


def rss_bytes() -> int:
    return int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")


# --------------------------------------------------------------------------------------- any text
MIN_INK = 3  # pixels: "." draws 4 in the normal theme's font
def ink_per_chip(strip: TokenStrip) -> list[int]:
    """Pixels in each chip's text line that differ clearly from the chip's fill (the glyphs drawn)."""
    image = strip.grab().toImage().convertToFormat(QImage.Format_RGB32)
    w, h = image.width(), image.height()
    pixels = np.frombuffer(image.constBits(), np.uint8).reshape(h, image.bytesPerLine() // 4, 4)[:, :w, :3]
    fill = QColor(th.PROMPT_CHIP)
    fill_bgr = np.array([fill.blue(), fill.green(), fill.red()], np.int16)
    ink = np.abs(pixels.astype(np.int16) - fill_bgr).sum(axis=2) > 120
    text_h = strip._fm.height()
    out = []
    for r in strip.rects:
        top = r.top() + strip.PAD_Y
        out.append(int(ink[top : top + text_h, r.left() + strip.PAD_X : r.right() + 1 - strip.PAD_X].sum()))
    return out


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=ANY_TEXT.filter(bool))
def test_token_strip_draws_every_piece_of_any_text(qapp, demo_model, text):
    """One chip per token, holding the engine's readable piece, and every chip's text line has ink."""
    tok = demo_model.tokenizer
    ids = tok.encode(text)
    strip = TokenStrip()
    try:
        strip.resize(1200, 100)
        strip.set_chips([Chip(i, tok.piece(i), "prompt") for i in ids], -1)
        assert [c.piece for c in strip.chips] == [tok.piece(i) for i in ids]
        assert len(strip.rects) == len(ids)
        assert all(c.piece and c.piece.isprintable() for c in strip.chips)
        assert all(r.width() > 2 * strip.PAD_X for r in strip.rects)
        blank = [(c.token_id, c.piece) for c, ink in zip(strip.chips, ink_per_chip(strip)) if ink < MIN_INK]
        assert blank == []
    finally:
        strip.deleteLater()


def test_every_piece_of_the_vocabulary_draws_visible_ink(qapp, demo_model):
    """Each of the 1,223 pieces without an ASCII letter or digit (punctuation, marks, other scripts,
    whitespace symbols: the ones that could draw little or nothing) puts ink in its chip. Found: the
    variation selector U+FE0F (id 37929) drew nothing and lone vowel points drew one pixel; chips now
    show a leading mark on a dotted circle and a leading variation selector as its bytes."""
    tok = demo_model.tokenizer
    ids = [i for i in range(tok.vocab_size) if not re.search(r"[A-Za-z0-9]", tok.piece(i))]
    strip = TokenStrip()
    try:
        strip.resize(1600, 100)
        strip.set_chips([Chip(i, tok.piece(i), "prompt") for i in ids], -1)
        faint = [(c.token_id, c.piece, ink) for c, ink in zip(strip.chips, ink_per_chip(strip)) if ink < MIN_INK]
        assert faint == []
    finally:
        strip.deleteLater()


TYPED = [
    "<|endoftext|> is just text",
    "🐈‍⬛👩🏽‍🚀🇫🇷 e\u0301\u0302 ǅ",
    "שלום \u200f مرحبا \u202e abc",
    "NUL\x00 BEL\x07 ESC\x1b[31m DEL\x7f",
    "a" + " " * 40 + "\t\t\n\n\n" + "\u3000" * 5 + "b",
    "".join(SPECIALS),
]


def test_typed_text_shows_one_readable_chip_per_token(window, qtbot, demo_model):
    """Through the editor, the worker and the window: chips are the engine's pieces of the text the
    editor holds (Qt's editor turns \\r, U+2028/9 into newlines and no-break spaces into spaces)."""
    tok = demo_model.tokenizer
    for text in TYPED:
        result = run(qtbot, window, lambda: window.tokens.editor.setPlainText(text), p.SetPrompt)
        held = window.tokens.prompt()
        ids = tok.encode(held)
        assert result.prompt_ids.tolist() == ids
        chips = window.tokens.strip.chips
        assert [(c.token_id, c.piece) for c in chips] == [(i, tok.piece(i)) for i in ids]
        assert all(c.piece.isprintable() and c.piece for c in chips)
        assert min(ink_per_chip(window.tokens.strip)) >= MIN_INK
        stepped = run(qtbot, window, window.step, p.Step)  # the engine steps on it, the strip follows
        assert len(window.tokens.strip.chips) == len(ids) + 1
        assert window.tokens.strip.chips[-1].piece == stepped.trace.chosen_piece


# --------------------------------------------------------------------------------- context limits
@pytest.fixture(scope="module")
def short_model(tmp_path_factory):
    """A tiny GPT-2 reading at most 16 positions."""
    return load_model(str(make_tiny_folder(tmp_path_factory.mktemp("short") / "short-gpt2", n_layer=1, n_positions=16)))


def test_too_long_prompt_says_the_limit_and_offers_to_keep_the_end(make_window, qtbot, short_model):
    w = make_window()
    run(qtbot, w, lambda: w.load_model(None, loaded=short_model, prompt=" a" * 5), p.Load)
    run(qtbot, w, w.step, p.Step)
    with qtbot.waitSignal(w.errorShown, timeout=20_000) as blocker:
        w.tokens.editor.setPlainText(" b" * 20)
    assert "20 tokens long" in blocker.args[0] and "at most 16 tokens" in blocker.args[0]
    assert "at most 16 tokens" in w.status_line.status_label.text()
    assert w.status_line.truncate_button.isVisible() and "last 8 tokens" in w.status_line.truncate_button.text()  # 8 stay free
    assert [c.piece for c in w.tokens.strip.chips][:5] == ["␣a"] * 5  # the previous prompt stays...
    assert not w.commands.step_action.isEnabled() and "Step is off" in w.status_line.status_label.text()  # ...and does not run
    cut = run(qtbot, w, w.status_line.truncate_button.click, p.SetPrompt)  # the explicit choice
    assert len(cut.prompt_ids) == 8
    assert "last 8 of 20 tokens (8 stay free to generate)" in w.status_line.status_label.text()
    assert not w.status_line.truncate_button.isVisible() and w.commands.step_action.isEnabled()
    for _ in range(9):  # the prefill and 8 decode steps fill the window; the last one stops
        last = run(qtbot, w, w.step, p.Step)
    assert last.stopped and "16 positions is full" in w.status_line.status_label.text()


def test_loading_a_smaller_model_says_the_prompt_was_cut(make_window, qtbot, demo_model, short_model):
    w = make_window()
    run(qtbot, w, lambda: w.load_model(None, loaded=demo_model, prompt=" a" * 30), p.Load)
    result = run(qtbot, w, lambda: w.load_model("short", loaded=short_model), p.Load)
    assert len(result.prompt_ids) == 8  # half of a 16-position window stays free to generate
    assert "last 8 of its 30 tokens" in w.status_line.status_label.text() and "8 stay free to generate" in w.status_line.status_label.text()


def test_play_stops_with_the_reason_when_the_window_fills(make_window, qtbot, short_model):
    w = make_window()
    run(qtbot, w, lambda: w.load_model(None, loaded=short_model, prompt=" a" * 10), p.Load)
    w.commands.speed.setValue(30)
    with qtbot.waitSignal(w.resultApplied, timeout=30_000, check_params_cb=lambda r: r.stopped) as blocker:
        w.player.play()
    stopped = blocker.args[0]
    assert stopped.trace.stop_reason == "context_full" and stopped.trace.record.end == 16
    assert "context window of 16 positions is full" in w.status_line.status_label.text()
    assert not w.player.playing and not w.commands.play_action.isEnabled() and not w.commands.step_action.isEnabled()
    reset = run(qtbot, w, w.reset, p.Reset)  # still usable: start over
    assert reset.trace is None and w.commands.play_action.isEnabled()


# ----------------------------------------------------------------------------------- model faults
def _broken_folders(tmp_path: Path) -> list[tuple[str, str]]:
    truncated = make_tiny_folder(tmp_path / "truncated", n_layer=1)
    weights = truncated / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    bert = make_tiny_folder(tmp_path / "bert", n_layer=1)
    config = json.loads((bert / "config.json").read_text())
    (bert / "config.json").write_text(json.dumps(config | {"model_type": "bert"}))
    llama = make_tiny_folder(tmp_path / "llama", n_layer=1)  # GPT-2 weights under a Llama config: 6.7 B parameters
    (llama / "config.json").write_text(json.dumps(config | {"model_type": "llama"}))
    small_vocab = make_tiny_folder(tmp_path / "small-vocab", n_layer=1, vocab_size=1000)
    return [
        (str(tmp_path / "missing"), "does not exist"),
        (str(truncated), "is truncated"),
        (str(bert), "holds a bert model"),
        (str(llama), "the config does not belong to these weights"),
        (str(small_vocab), "does not match the model"),
    ]


def test_broken_models_show_a_message_and_the_old_model_keeps_stepping(window, qtbot, tmp_path):
    before = run(qtbot, window, window.step, p.Step)
    chips = list(window.tokens.strip.chips)
    for n, (source, words) in enumerate(_broken_folders(tmp_path), start=1):
        with qtbot.waitSignal(window.errorShown, timeout=30_000) as blocker:
            window.load_model(source)
        assert words in blocker.args[0] and words in window.status_line.status_label.text()
        assert "Still using gpt2-tiny-demo" in window.status_line.status_label.text()
        assert "Tiny demo model" in window.status_line.model_label.text() and "GPT-2 small" in window.status_line.model_label.text()
        assert window.tokens.strip.chips == chips and window.commands.step_action.isEnabled()
        result = run(qtbot, window, window.step, p.Step)
        assert result.info.is_demo and result.trace.step == before.trace.step + n
        chips = list(window.tokens.strip.chips)


# ---------------------------------------------------------------------------------- worker faults
def test_a_fault_inside_a_step_shows_an_error_and_keeps_the_last_good_step(window, qtbot, demo_model):
    run(qtbot, window, window.step, p.Step)
    good = run(qtbot, window, window.step, p.Step).trace
    run(qtbot, window, window.back, p.Back)

    def fault(module, args):
        raise RuntimeError("injected fault")

    hook = demo_model.model.register_forward_pre_hook(fault)
    try:
        window.commands.speed.setValue(30)
        with qtbot.waitSignal(window.errorShown, timeout=20_000) as blocker:
            window.player.play()  # Play stops on the error
        assert "RuntimeError: injected fault" in blocker.args[0]
        assert "injected fault" in window.status_line.status_label.text()
        assert not window.player.playing
        assert window.state.result.trace.step == 0 and window.commands.step_action.isEnabled()
    finally:
        hook.remove()
    again = run(qtbot, window, window.step, p.Step).trace  # the session was left at step 0
    assert again.step == 1 and again.chosen == good.chosen
    np.testing.assert_array_equal(again.record.logits, good.record.logits)


@pytest.mark.slow  # over 5 s (a child process or a whole app run)
def test_holding_the_step_key_does_not_pile_up_work(window, qtbot, forward_calls):
    """300 presses of Space, one every 5 ms while the event loop runs: at most one step ever waits
    behind the one running, at most two run after the last press, and the event loop never stalls
    long: no forward pass runs on the GUI thread. (Generation must not stop half-way, or the later presses would test nothing: an earlier
    version of this test bounded the forward passes by a quarter of the presses, which held only
    because the demo model happened to draw <|endoftext|> after 28 steps.)"""
    presses, sent, at_last_press, ticks, waiting = 300, [0], [0], [], []
    window.attention.setFocus()  # in the prompt editor, Space types a space
    keys, heartbeat = QTimer(interval=5), QTimer(interval=10)
    heartbeat.timeout.connect(lambda: ticks.append(perf_counter()))

    def press():
        qtbot.keyPress(window, Qt.Key_Space)
        sent[0] += 1
        waiting.append(sum(isinstance(r, Step) for r in window.controller.policy.waiting))
        if sent[0] == presses:
            keys.stop()
            qtbot.keyRelease(window, Qt.Key_Space)
            at_last_press[0] = len(forward_calls)

    keys.timeout.connect(press)
    started = perf_counter()
    heartbeat.start()
    keys.start()
    qtbot.waitUntil(lambda: sent[0] == presses and window.controller.idle, timeout=120_000)
    heartbeat.stop()
    elapsed = perf_counter() - started
    qtbot.waitUntil(lambda: window.state.result.trace is not None and window.state.result.trace.step == len(forward_calls) - 1)
    gaps = np.diff(ticks) * 1e3
    print(f"\n{presses} presses in {elapsed:.2f} s: {len(forward_calls)} forward passes, "
          f"{len(forward_calls) - at_last_press[0]} after the last press; event-loop gap max {gaps.max():.0f} ms, "
          f"p99 {np.percentile(gaps, 99):.0f} ms")
    assert not window.state.result.stopped  # every press could have asked for a step
    assert max(waiting) <= 1  # a held key queues one step, never a pile
    assert len(forward_calls) < presses
    assert len(forward_calls) - at_last_press[0] <= 2
    # The event loop stays free because no forward pass runs on its thread; the gap printed above is
    # a figure, not a bound (one CI run saw a single 1.35 s pause of the shared machine, p99 118 ms):
    # benchmarks/bench_gui.py measures the longest gap under Play against its target.
    assert threading.main_thread().name not in forward_calls


# ----------------------------------------------------------------------------------------- quitting
QUIT_SCRIPT = r"""
import sys, time
import app.window.window as window_mod
import app.host.session_host as worker_mod
from app.protocol import messages as p
from app.window.main import main

MODE, ENGINE = sys.argv[1], sys.argv[2]
real_load = worker_mod.load_model

def endless_download(source=None, *, progress=None, **kw):
    if source != "slow/download":
        return real_load(source, progress=progress, **kw)
    done = 0
    while True:  # a download that only stops if its progress callback raises
        done += 1 << 20
        progress(done, 550 << 20)
        time.sleep(0.02)

worker_mod.load_model = endless_download  # in this process: the download runs on a thread engine


class Scripted(window_mod.MainWindow):
    def __init__(self, *args, **kw):
        super().__init__(*args, **kw)
        self.steps_seen = 0
        self.resultApplied.connect(self._on_test_result)
        self.controller.downloadProgress.connect(self._on_test_progress)

    def _on_test_result(self, result):
        if isinstance(result.request, p.Load) and MODE == "play":
            self.commands.speed.setValue(30)
            self.player.play()
        elif isinstance(result.request, p.Load):
            self.load_model("slow/download")
        elif isinstance(result.request, p.Step):
            self.steps_seen += 1
            if self.steps_seen == 3:
                print("quit during play", flush=True)
                self.commands.quit_action.trigger()

    def _on_test_progress(self, done, total):
        if self.isVisible():
            print("quit during download", flush=True)
            self.commands.quit_action.trigger()


window_mod.MainWindow = Scripted
code = main(["--model", "", "--engine", ENGINE])
print("exit", code, flush=True)
sys.exit(code)
"""


@pytest.mark.slow  # over 5 s (a child process or a whole app run)
@pytest.mark.parametrize("mode, engine", [("play", "process"), ("play", "thread"), ("download", "thread")])
def test_quitting_mid_play_or_mid_download_exits_cleanly(tmp_path, mode, engine):
    """A real process: quit from the menu while Play runs or while a download reports progress.
    The process exits promptly with status 0 and Qt never says "QThread: Destroyed while thread is
    still running" (which aborts the process)."""
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", HF_HUB_OFFLINE="1", XDG_CONFIG_HOME=str(tmp_path),
               HOME=str(tmp_path), PYTHONPATH=str(REPO))
    started = perf_counter()
    proc = subprocess.run([sys.executable, "-c", QUIT_SCRIPT, mode, engine], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=120)
    seconds = perf_counter() - started
    print(f"\nquit during {mode} ({engine} engine): exited {proc.returncode} after {seconds:.1f} s")
    assert f"quit during {mode}" in proc.stdout, proc.stderr[-2000:]
    assert "exit 0" in proc.stdout and proc.returncode == 0, proc.stderr[-2000:]
    assert "QThread" not in proc.stderr


NEVER_CLOSED_SCRIPT = r"""
import sys
from PySide6.QtWidgets import QApplication
from app.protocol import messages as p
from app.window.window import MainWindow

app = QApplication(sys.argv)
window = MainWindow(remember=False)
window.start(None, "The cat sat on the")
window.resultApplied.connect(lambda r: (window.step(), app.quit()) if isinstance(r.request, p.Load) else None)
app.exec()  # quits while the step it just asked for may still run; the window is never closed
print("exit 0", flush=True)
"""


@pytest.mark.slow  # over 5 s (a child process or a whole app run)
def test_a_window_that_is_never_closed_still_stops_its_thread(tmp_path):
    """A script that quits without closing its window: the worker thread is stopped at quit/exit,
    so Qt never aborts with "QThread: Destroyed while thread is still running"."""
    env = dict(os.environ, QT_QPA_PLATFORM="offscreen", HF_HUB_OFFLINE="1", XDG_CONFIG_HOME=str(tmp_path),
               HOME=str(tmp_path), PYTHONPATH=str(REPO))
    proc = subprocess.run([sys.executable, "-c", NEVER_CLOSED_SCRIPT], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0 and "exit 0" in proc.stdout, proc.stderr[-2000:]
    assert "QThread" not in proc.stderr


def test_download_progress_past_2_gib_reaches_the_window(window, qtbot):
    """Found: progress crossed threads as 32-bit ints, so downloading a model over 2 GiB (GPT-2
    large, XL) raised OverflowError inside the download once 2 GiB had arrived."""
    host = window.controller.engine.host
    with qtbot.waitSignal(window.controller.downloadProgress, timeout=5_000) as blocker:
        # from another thread, through the engine thread's own signals, as a download reports it
        reporter = threading.Thread(target=host._report_progress, args=(3 << 30, 6 << 30))
        reporter.start()
    reporter.join()
    assert blocker.args == [3 << 30, 6 << 30]
    assert window.download.dialog is not None and window.download.dialog.value() == 50


def test_closing_during_a_blocking_load_waits_for_the_worker(make_window, qtbot, demo_model, monkeypatch):
    """A load that reports no progress cannot be interrupted: closing waits for it to end, and the
    thread is stopped (never destroyed while running)."""
    import app.host.session_host as worker_mod

    release, entered = threading.Event(), threading.Event()

    def blocking_load(source=None, *, progress=None, **_kw):
        entered.set()
        release.wait(30)
        return demo_model

    monkeypatch.setattr(worker_mod, "load_model", blocking_load)
    w = make_window()
    w.load_model("slow/folder")
    qtbot.waitUntil(entered.is_set, timeout=10_000)
    threading.Timer(0.3, release.set).start()
    thread = w.controller.engine.thread
    w.close()
    assert release.is_set() and not thread.isRunning()


# ----------------------------------------------------------------------------------------- settings
def test_sampling_widgets_refuse_out_of_range_values(window, qtbot):
    s = window.sampling
    spins = {"temperature": s.temperature, "top_k": s.top_k, "top_p": s.top_p, "repetition_penalty": s.penalty}
    for name, spin in spins.items():
        lo, hi = RANGES[name]
        assert spin.maximum() == hi
        assert spin.minimum() == (0.01 if name == "top_p" else lo)  # top-p must be greater than 0
    emitted: list[SamplingSettings] = []
    s.settingsChanged.connect(emitted.append)
    for name, spin in spins.items():
        for typed in ("99999999", "-5", "1e9", "abc"):
            spin.setFocus()
            spin.selectAll()
            qtbot.keyClicks(spin, typed)
            qtbot.keyClick(spin, Qt.Key_Return)
            lo, hi = RANGES[name]
            assert lo <= spin.value() <= hi, (name, typed, spin.value())
    s.sample.setChecked(True)
    before = len(emitted)
    for typed in ("4294967296", "9999999999"):  # one past the largest seed; the most digits allowed
        s.seed.setFocus()
        s.seed.selectAll()
        qtbot.keyClicks(s.seed, typed)
        qtbot.keyClick(s.seed, Qt.Key_Return)
        assert "Seed must be" in s.error.text()  # the control's name
    assert len(emitted) == before  # nothing out of range was sent on
    s.seed.selectAll()
    qtbot.keyClicks(s.seed, "123456789012")
    assert len(s.seed.text()) <= 10  # the validator stops at ten digits
    for settings_sent in emitted:  # everything sent was accepted by the engine's own check
        SamplingSettings(**{k: getattr(settings_sent, k) for k in RANGES} | {"greedy": settings_sent.greedy})
    with pytest.raises(SettingsError):
        SamplingSettings(seed=2**32)


# ------------------------------------------------------------------------------------ long sessions
PLAY_STEPS = 1000


@pytest.mark.slow  # about 2 minutes: drawing a step costs ~130 ms on 2 shared cores
def test_thousand_steps_of_play_keep_the_window_memory_bounded(make_window, qtbot, demo_model):
    """1,000 steps of Play on the demo model. When the model picks <|endoftext|>, another token is
    chosen (a click on a bar) and Play goes on; when the 256-position window fills, Reset and Play
    again. RSS at the end of each loop after the first stays within 32 MiB of the first loop's end,
    and the whole run stays within one full window's history (its records' bytes, measured when the
    window fills) plus 64 MiB of the RSS before Play: the window keeps no growing copies of traces."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # speed only: 2-thread kernels are several times slower on 2 shared cores
    try:
        w = make_window()
        w.resize(1000, 700)  # drawing dominates a step here; a smaller window draws the same items faster
        run(qtbot, w, lambda: w.load_model(None, loaded=demo_model, prompt="The cat sat on the"), p.Load)
        w.commands.speed.setValue(30)
        eos = demo_model.tokenizer.eos_id
        steps, loop_end_rss, peak, branches, history = [0], [], [0], [0], [0]
        run(qtbot, w, w.step, p.Step)  # warm-up: first draw of every panel
        start_rss = rss_bytes()

        def on_result(result):
            if isinstance(result.request, p.Step):
                steps[0] += 1
                peak[0] = max(peak[0], rss_bytes())
            if result.stopped and steps[0] < PLAY_STEPS:
                if result.trace.stop_reason == "context_full":
                    loop_end_rss.append(rss_bytes())
                    history[0] = max(history[0], sum(r.nbytes for r in result.records))
                    QTimer.singleShot(0, w.reset)
                else:  # end of text: pick the best other token, as a student clicking a bar would
                    branches[0] += 1
                    other = next(int(t) for t in result.trace.candidate_ids if int(t) != eos)
                    QTimer.singleShot(0, lambda: w.logits.tokenChosen.emit(other))
            elif isinstance(result.request, (p.Reset, p.Choose)):
                w.player.play()

        w.resultApplied.connect(on_result)
        started = perf_counter()
        w.player.play()
        qtbot.waitUntil(lambda: steps[0] >= PLAY_STEPS, timeout=300_000)
        w.player.pause()
        seconds = perf_counter() - started
        qtbot.waitUntil(lambda: w.controller.idle)
        w.resultApplied.disconnect(on_result)
        mib = [round(r / 2**20, 1) for r in loop_end_rss]
        print(f"\n{steps[0]} steps in {seconds:.1f} s ({len(loop_end_rss)} full windows, {branches[0]} end-of-text "
              f"branches); RSS start {start_rss / 2**20:.1f} MiB, peak {peak[0] / 2**20:.1f} MiB, at loop ends {mib}")
        assert len(loop_end_rss) >= 3
        assert max(loop_end_rss[1:]) - loop_end_rss[0] <= 32 * 2**20
        assert history[0] > 0
        assert peak[0] - start_rss <= history[0] + 64 * 2**20
    finally:
        torch.set_num_threads(threads)
