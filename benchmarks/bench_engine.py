"""How much does recording everything cost? The engine's Session.step against the bare model.

Builds GPT-2 small's shape (``GPT2Config()`` defaults, 124M parameters, fp32) with random weights,
saves it with the bundled tokenizer to a temporary folder, and loads it twice: through
``engine.load_model`` (the real engine path: eager attention, every hook recorded) and as a plain
``GPT2LMHeadModel`` with the default attention implementation (sdpa). Every comparison runs both
side by side in one process, interleaved repeat by repeat, and reports medians and their ratio.

    python benchmarks/bench_engine.py                   # full run, about 4 to 8 minutes on 2 cores
    python benchmarks/bench_engine.py --quick           # smoke run, about a minute
    python benchmarks/bench_engine.py --only sampling   # the sampling stages' cost alone, 20 s
    python benchmarks/bench_engine.py --only cache      # the KV cache on and off alone
    python benchmarks/bench_engine.py --only inside     # the Inside figures (decode, history, recompute, lens)
    python benchmarks/bench_engine.py --only file --steps 1000  # a session file's size, save and open times
    python benchmarks/bench_engine.py --only families   # recording everything at SmolLM2-135M's and Qwen2.5-0.5B's shapes

The cache section times, at each position, a cached step and a whole-sequence recompute for both the
bare model and the engine (``Session(use_cache=False)``, what ``--no-cache`` runs). The sampling
section times what a settings change costs the engine at GPT-2's vocabulary: every stage, the draw
and ``Distribution.stages`` for 64 candidates (the stage-by-stage view's data), then the whole
``Session.resample``.

Prints a markdown table (paste it into benchmarks/RESULTS.md). A script, not a test: the figures
depend on the machine and on what else it is running.
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

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import torch  # noqa: E402

from engine import GenerationStopped, SamplingSettings, Session, load_model  # noqa: E402
from engine import hf_compat, sampling  # noqa: E402
from engine import session as session_module  # noqa: E402
from engine.inside import inside  # noqa: E402
from engine.random_model import SHAPES, random_loaded, write_random_gpt2  # noqa: E402

# Each of these is exactly one GPT-2 token, so a prompt of n of them is n tokens long.
WORDS = [" The", " cat", " sat", " on", " the", " mat", " and", " the", " dog", " ran", " away", " from", " the", " house", "."]
SETTINGS = SamplingSettings()  # temperature 1, no top-k or top-p, seed 0 (the app adds top-k 50)

FULL = dict(decode_contexts=(128, 1000), decode_repeats=21, prefill_len=512, prefill_repeats=4,
            cache_positions=(16, 128, 256, 512, 1000), uncached_repeats=2, play_steps=500, memory_steps=1000,
            inside_context=1000, inside_repeats=3, sampling_repeats=41)
QUICK = dict(decode_contexts=(128, 1000), decode_repeats=5, prefill_len=512, prefill_repeats=2,
             cache_positions=(16, 128, 512), uncached_repeats=1, play_steps=30, memory_steps=30,
             inside_context=1000, inside_repeats=1, sampling_repeats=11)
# StepRecord arrays before the Inside view, and what it added (the newest position's attention and MLP outputs)
HISTORY_BEFORE = ("input_ids", "token_embed", "pos_embed", "attn", "resid", "final_hidden", "logits")
HISTORY_ADDED = ("attn_out", "mlp_out")
# The sampling view's settings changes: the app's defaults, the window's start (top-k 50), everything on.
SAMPLING_CASES = {
    "temperature 1, no cut": SamplingSettings(seed=1),
    "top-k 50": SamplingSettings(top_k=50, seed=1),
    "temperature 0.7, top-k 50, top-p 0.9, penalty 1.3": SamplingSettings(
        temperature=0.7, top_k=50, top_p=0.9, repetition_penalty=1.3, seed=1),
    "temperature 1.5, top-p 0.95 (no top-k)": SamplingSettings(temperature=1.5, top_p=0.95, seed=1),
}
PLAY_PROMPT = 24


def app_threads() -> int:
    """The thread count the app gives torch: every core but one, which stays with the GUI."""
    from app.host.torch_threads import ENGINE_TORCH_THREADS

    return ENGINE_TORCH_THREADS


# ------------------------------------------------------------------ setup
def build_model_folder(folder: Path, seed: int = 0) -> Path:
    """GPT-2 small's shape with random weights, plus the real tokenizer, as a model folder."""
    return write_random_gpt2(folder, seed)


def load_bare(folder: Path):
    """The plain model: default attention implementation, eval mode, fp32."""
    from transformers import GPT2LMHeadModel

    model = GPT2LMHeadModel.from_pretrained(folder, dtype=torch.float32, local_files_only=True).eval()
    return model


def prompt_text(n: int) -> str:
    return "".join(WORDS[i % len(WORDS)] for i in range(n))


def session_with_prompt(loaded, n: int, **kwargs) -> Session:
    session = Session(loaded, SETTINGS, **kwargs)
    ids = session.set_prompt(prompt_text(n))
    assert len(ids) == n, f"prompt is {len(ids)} tokens, expected {n}"
    return session


class Bare:
    """The baseline: the plain model's forward pass in inference mode, no outputs requested."""

    def __init__(self, model):
        self.model = model
        params = inspect.signature(type(model).forward).parameters
        self.cache_kwarg = "cache" if "cache" in params else "past_key_values"  # renamed in transformers 5

    def forward(self, ids: torch.Tensor, cache=None, **kwargs):
        """Returns (logits, cache)."""
        with torch.inference_mode():
            out = self.model(input_ids=ids, use_cache=True, **{self.cache_kwarg: cache}, **kwargs)
        new_cache = getattr(out, "cache", None)
        return out.logits, (new_cache if new_cache is not None else out.past_key_values)

    def uncached(self, ids: torch.Tensor, **kwargs):
        with torch.inference_mode():
            return self.model(input_ids=ids, use_cache=False, **kwargs).logits


def ids_tensor(session: Session) -> torch.Tensor:
    return torch.tensor([session.prompt_ids], dtype=torch.long)


def timed(fn) -> float:
    """Milliseconds fn() takes."""
    t = time.perf_counter()
    fn()
    return (time.perf_counter() - t) * 1e3


def median(values) -> float:
    return statistics.median(values)


def interleave(fns: dict, repeats: int, between=None) -> dict[str, float]:
    """Median ms of each fn, run in turn each repeat (order reversed every other repeat)."""
    times = {name: [] for name in fns}
    names = list(fns)
    for r in range(repeats):
        for name in names if r % 2 == 0 else names[::-1]:
            times[name].append(timed(fns[name]))
            if between:
                between(name)
    return {name: median(v) for name, v in times.items()}


# ----------------------------------------------------------- measurements
def measure_decode(loaded, bare: Bare, context: int, repeats: int) -> dict[str, float]:
    """One cached decode step that sees ``context`` positions: Session.step vs the bare forward."""
    session = session_with_prompt(loaded, context - 1)
    session.step()  # prefill; the next step runs position context - 1 against the cache
    _, cache = bare.forward(ids_tensor(session))
    token = torch.tensor([[session.records[-1].chosen]])

    def engine_step():
        session.step()

    def bare_step():
        bare.forward(token, cache)

    def undo(name):  # untimed: back to the same context for the next repeat
        if name == "engine":
            session.rewind(0)
        else:
            hf_compat.crop_cache(cache, context - 1)

    engine_step(), undo("engine"), bare_step(), undo("bare")  # warm-up
    return interleave({"engine": engine_step, "bare": bare_step}, repeats, undo)


FAMILY_SHAPES = ("SmolLM2-135M", "Qwen2.5-0.5B")


def family_pair(folder: Path, name: str):
    """The engine's model at a real shape (random weights, eager, every hook recorded) and the bare
    model: the same weights in a plain model with the default (sdpa) attention."""
    from transformers import AutoModelForCausalLM

    model_type, config = SHAPES[name]
    loaded = random_loaded(folder, model_type, **config)
    import copy

    config = copy.deepcopy(loaded.model.config)  # a shared config would switch the engine's model to sdpa too
    plain = AutoModelForCausalLM.from_config(config, dtype=torch.float32, attn_implementation="sdpa")
    plain.load_state_dict(loaded.model.state_dict())
    return loaded, Bare(plain.eval())


def families_report(cfg, threads: int, t0: float) -> str:
    """Recording everything against a bare cached decode step at SmolLM2-135M's and Qwen2.5-0.5B's shapes."""
    rows = ["| shape | context | engine step (ms) | bare decode (ms) | ratio |", "|---|---:|---:|---:|---:|"]
    with tempfile.TemporaryDirectory(prefix="nexttoken-bench-") as tmp:
        for name in FAMILY_SHAPES:
            loaded, bare = family_pair(Path(tmp) / name, name)
            for context in cfg["decode_contexts"]:
                d = measure_decode(loaded, bare, context, cfg["decode_repeats"])
                rows.append(f"| {name} ({loaded.info.family}, {loaded.info.n_head} / {loaded.info.kv_heads} heads) | "
                            f"{context:,} | {d['engine']:.1f} | {d['bare']:.1f} | {d['engine'] / d['bare']:.2f}× |")
                print(rows[-1], file=sys.stderr, flush=True)
            del loaded, bare
    return ("\n".join(rows) + f"\n\nRandom weights at the real shapes, fp32, {threads} torch threads, {cfg['decode_repeats']} "
            f"interleaved repeats, medians ({time.perf_counter() - t0:.0f} s, `python benchmarks/bench_engine.py --only families`).")


def measure_prefill(loaded, bare: Bare, length: int, repeats: int) -> dict[str, float]:
    """The prompt's forward pass: Session.step at step 0 vs the bare model, with and without logits_to_keep=1."""
    session = session_with_prompt(loaded, length)
    ids = ids_tensor(session)
    fns = {
        "engine": session.step,
        "bare_last": lambda: bare.forward(ids, logits_to_keep=1),
        "bare_all": lambda: bare.forward(ids),
    }
    session.step(), session.reset()  # warm-up
    return interleave(fns, repeats, lambda name: session.reset() if name == "engine" else None)


def measure_cache(loaded, bare: Bare, positions, decode_repeats: int, uncached_repeats: int) -> list[dict]:
    """Per-token cost at each position: a cached decode step vs re-running the whole sequence, for
    the bare model and for the engine (``Session.step`` with and without ``use_cache``)."""
    rows = []
    for n in positions:
        ids = torch.randint(0, 50257, (1, n), generator=torch.Generator().manual_seed(n))  # any n token ids
        _, cache = bare.forward(ids[:, :-1])
        last = ids[:, -1:]
        engine = {}
        for mode in (True, False):  # the step that computes position n - 1, after a prefill of n - 1 tokens
            engine[mode] = session_with_prompt(loaded, n - 1, use_cache=mode)
            engine[mode].step()

        def cached():
            bare.forward(last, cache)

        def engine_step(mode: bool) -> float:
            ms = timed(engine[mode].step)
            engine[mode].rewind(0)
            return ms

        # Interleaved in rounds: one recompute, then one untimed cached step (a decode step timed right
        # after a recompute pays for the memory the recompute churned), then a few timed ones.
        cached_ms, uncached_ms, engine_cached_ms, engine_uncached_ms = [], [], [], []
        per_round = -(-decode_repeats // uncached_repeats)
        for _ in range(uncached_repeats):
            uncached_ms.append(timed(lambda: bare.uncached(ids, logits_to_keep=1)))
            engine_uncached_ms.append(engine_step(False))
            for i in range(per_round + 1):
                ms = timed(cached)
                hf_compat.crop_cache(cache, n - 1)
                engine_ms = engine_step(True)
                if i:
                    cached_ms.append(ms)
                    engine_cached_ms.append(engine_ms)
        rows.append({"position": n, "cached": median(cached_ms), "uncached": median(uncached_ms),
                     "engine_cached": median(engine_cached_ms), "engine_uncached": median(engine_uncached_ms)})
        del engine
    return rows


def measure_sampling(loaded, repeats: int) -> list[dict]:
    """Engine-side cost of a settings change at GPT-2's vocabulary (V = 50,257), no forward pass:
    ``distribution`` (every stage), the draw, ``Distribution.stages`` for the 64 candidates the
    trace carries, and the whole ``Session.resample`` (which also builds the StepTrace)."""
    session = session_with_prompt(loaded, 128)
    session.step()
    record = session.records[-1]
    rng = np.random.default_rng(0)
    peaked = (rng.standard_normal(50257) * 3).astype(np.float32)  # a trained model's spread, roughly
    context = session.token_ids()
    rows = []
    for name, settings in SAMPLING_CASES.items():
        for source, logits in (("random GPT-2 small", record.logits), ("normal, sd 3", peaked)):
            def stages():
                dist = sampling.distribution(logits, context, settings)
                sampling.draw(dist, 1)
                dist.stages(dist.top(64, by=dist.after_penalty))

            stages()
            wall, cpu = [], []
            for _ in range(repeats):
                t_cpu = time.thread_time()
                wall.append(timed(stages))
                cpu.append((time.thread_time() - t_cpu) * 1e3)
            row = {"settings": name, "logits": source, "median": median(wall), "max": max(wall), "cpu": median(cpu)}
            if source.startswith("random"):
                session.resample(settings)
                resample_ms = sorted(timed(lambda: session.resample(settings)) for _ in range(repeats))
                row["resample_median"], row["resample_max"] = median(resample_ms), resample_ms[-1]
            rows.append(row)
    return rows


def measure_play(loaded, bare: Bare, steps: int) -> dict[str, float]:
    """Steps per second over one run from a PLAY_PROMPT-token prompt, engine and bare interleaved step by step."""
    session = session_with_prompt(loaded, PLAY_PROMPT, max_new_tokens=steps)
    ids = ids_tensor(session)
    state = {"cache": None, "next": ids}

    def bare_step():  # what a minimal generate loop does: forward, pick a token, feed it back
        logits, state["cache"] = bare.forward(state["next"], state["cache"], logits_to_keep=1)
        state["next"] = logits[:, -1].argmax(-1, keepdim=True)

    engine_ms, bare_ms = [], []
    for i in range(steps):
        try:
            engine_ms.append(timed(session.step))
        except GenerationStopped:  # <|endoftext|> drawn: compare the steps both ran
            break
        bare_ms.append(timed(bare_step))
    n = len(engine_ms)
    return {
        "steps": n,
        "context": session.records[-1].end,
        "engine_sps": n / (sum(engine_ms) / 1e3),
        "bare_sps": n / (sum(bare_ms) / 1e3),
    }


def measure_added_recording(loaded, bare: Bare, context: int, repeats: int) -> dict[str, float]:
    """A decode step recording everything ("now") vs the same step without the Inside view's additions
    (attn_out and mlp_out of the newest position: "before") vs the bare model, interleaved. "before"
    runs with STEP_HOOKS patched for the duration of its step (zeros fill the two record fields).
    Times are this thread's CPU time (torch runs on it with one thread): unlike wall time they do
    not count the waits for a core that a loaded machine adds."""
    with_all = dict(session_module.STEP_HOOKS)
    without = {k: v for k, v in with_all.items() if k not in ("blocks.{L}.hook_attn_out", "blocks.{L}.hook_mlp_out")}
    step_arrays = session_module._step_arrays

    def arrays_without(rec, n_layers, d, n, logits, *rest):
        zero = torch.zeros(1, n, d, dtype=torch.float16)
        for i in range(n_layers):
            rec[f"blocks.{i}.hook_attn_out"] = rec[f"blocks.{i}.hook_mlp_out"] = zero
        return step_arrays(rec, n_layers, d, n, logits, *rest)

    sessions = {name: session_with_prompt(loaded, context - 1) for name in ("now", "before")}
    for session in sessions.values():
        session.step()
    _, cache = bare.forward(ids_tensor(sessions["now"]))
    token = torch.tensor([[sessions["now"].records[-1].chosen]])

    def cpu_ms(name) -> float:
        if name == "bare":
            t = time.thread_time()
            bare.forward(token, cache)
            ms = (time.thread_time() - t) * 1e3
            hf_compat.crop_cache(cache, context - 1)
            return ms
        session_module.STEP_HOOKS, session_module._step_arrays = (
            (with_all, step_arrays) if name == "now" else (without, arrays_without))
        try:
            t = time.thread_time()
            sessions[name].step()
            ms = (time.thread_time() - t) * 1e3
        finally:
            session_module.STEP_HOOKS, session_module._step_arrays = with_all, step_arrays
        sessions[name].rewind(0)
        return ms

    names = ["now", "before", "bare"]
    for name in names:  # warm-up
        cpu_ms(name)
    times = {name: [] for name in names}
    for r in range(repeats):
        for name in names if r % 2 == 0 else names[::-1]:
            times[name].append(cpu_ms(name))
    return {name: median(v) for name, v in times.items()}


def measure_inside(loaded, bare: Bare, context: int, repeats: int) -> dict[str, float]:
    """Opening the Inside view for older positions of a ``context``-token context vs one prefill of that
    context. The context is a (context - 1)-token prompt and one decode step; the prefill is the engine's
    step 0 on a ``context``-token prompt (everything recorded) and the bare model's."""
    session = session_with_prompt(loaded, context - 1)
    session.step(), session.step()
    prefill = session_with_prompt(loaded, context)
    ids = ids_tensor(prefill)
    lens_ms = []

    def opened(position, **kwargs):
        def run():
            lens_ms.append(inside(session, 1, position, **kwargs).lens_ms)
        return run

    fns = {
        "engine_prefill": lambda: (prefill.reset(), prefill.step()),
        "bare_prefill": lambda: bare.forward(ids, logits_to_keep=1),
        "inside_middle": opened(context // 2),
        "inside_older": opened(context - 2),
        "inside_older_one_layer": opened(context - 2, kv_layers=(0,)),
        "inside_newest": opened(None),
        "inside_older_no_cache": opened(context - 2, use_cache=False),
    }
    inside(session, 1, 3)  # warm-up
    out = interleave(fns, repeats)
    out["lens"] = median(lens_ms)
    return out


def rss_bytes() -> int:
    """Current resident set size (Linux /proc; elsewhere the peak from getrusage)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    import resource

    scale = 1 if sys.platform == "darwin" else 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale


def memory_child(folder: str, steps: int) -> dict:
    """Run in a fresh process holding only the engine: RSS along a ``steps``-step session."""
    loaded = load_model(folder)
    rss_model = rss_bytes()
    session = session_with_prompt(loaded, PLAY_PROMPT, max_new_tokens=steps)
    samples = []  # (steps done, rss)
    every = max(1, steps // 20)
    for i in range(steps):
        try:
            session.step()
        except GenerationStopped:
            break
        if (i + 1) % every == 0 or i == 0:
            samples.append((i + 1, rss_bytes()))
    records = session.records
    history = sum(getattr(r, name).nbytes for r in records for name in HISTORY_BEFORE + HISTORY_ADDED)
    added = [sum(getattr(r, name).nbytes for name in HISTORY_ADDED) for r in records]
    # growth per step: least-squares slope over the second half (past allocator warm-up)
    half = [s for s in samples if s[0] >= samples[-1][0] // 2]
    x = np.array([s[0] for s in half], dtype=np.float64)
    y = np.array([s[1] for s in half], dtype=np.float64)
    slope = float(np.polyfit(x, y, 1)[0]) if len(half) > 1 else float("nan")
    return {
        "steps": len(records),
        "context": records[-1].end,
        "rss_model": rss_model,
        "rss_after_prefill": samples[0][1],
        "rss_end": samples[-1][1],
        "growth_per_step": slope,
        "history_bytes": history,
        "history_per_step": history / len(records),
        "added_per_decode_step": added[-1],
        "added_bytes": sum(added),
        "kv_bytes": records[-1].kv.total_bytes,
    }


def measure_projection_fit(loaded) -> dict[str, float]:
    """Peak memory (numpy allocations, tracemalloc) and time of fitting the fixed PCA basis on the
    token embedding matrix: the engine's chunked fit against the former one, which made two float64
    copies of the whole matrix. Both give the same components (checked)."""
    import tracemalloc

    from engine.projection import fit

    weight = loaded.model.get_input_embeddings().weight.detach().float().numpy()

    def former(x):  # the fit before the chunked one (a float64 covariance), kept here only to measure it
        x = np.asarray(x, dtype=np.float64)
        centered = x - x.mean(axis=0)
        cov = centered.T @ centered / max(len(x) - 1, 1)
        values, vectors = np.linalg.eigh(cov)
        return vectors[:, np.argsort(values)[::-1][:3]].T

    out = {"matrix_mib": weight.nbytes / 2**20}
    for name, fn in (("chunked", lambda: fit(weight).components), ("former", lambda: former(weight))):
        tracemalloc.start()
        t = time.perf_counter()
        components = fn()
        out[f"{name}_s"] = time.perf_counter() - t
        out[f"{name}_peak_mib"] = tracemalloc.get_traced_memory()[1] / 2**20
        tracemalloc.stop()
        out[f"{name}_components"] = np.abs(np.asarray(components, dtype=np.float64))
    out["same"] = bool(np.allclose(out.pop("chunked_components"), out.pop("former_components"), atol=1e-4))
    return out


def measure_memory(folder: Path, steps: int, threads: int) -> dict:
    cmd = [sys.executable, __file__, "--memory-child", str(folder), "--steps", str(steps), "--threads", str(threads)]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


# ----------------------------------------------------------------- report
def mib(n: float) -> str:
    return f"{n / 2**20:,.0f} MiB"


def fit_row(f: dict) -> str:
    return (f"| fitting the fixed PCA basis on the token embeddings ({f['matrix_mib']:.0f} MiB, float32): peak extra memory "
            f"and time | {f['chunked_peak_mib']:.0f} MiB, {f['chunked_s']:.1f} s (before: {f['former_peak_mib']:.0f} MiB, "
            f"{f['former_s']:.1f} s; same components: {f['same']}) | |")


def report(args, threads: int, decode, prefill, cache_rows, play, memory, sampling_rows, wall_s: float) -> str:
    ctx_lo, ctx_hi = sorted(decode)
    cmd = "python benchmarks/bench_engine.py" + (" --quick" if args.quick else "") + (
        f" --threads {args.threads}" if args.threads else "")
    lines = [
        f"Measured {datetime.date.today().isoformat()} on {platform.machine()} Linux, {os.cpu_count()} cores, "
        f"torch {torch.__version__} (CPU), `torch.set_num_threads({threads})` (the app's setting: every core "
        f"but one, which stays with the GUI). GPT-2 small's shape (`GPT2Config()`: 12 layers x 12 heads, "
        f"d=768, 124M parameters), random weights, fp32. Command: `{cmd}` ({wall_s:.0f} s).",
        "",
        "Engine = `Session.step()` with everything recorded (eager attention, every hook, numpy records, "
        "sampling, the StepTrace). Bare = plain `GPT2LMHeadModel`, default attention (sdpa), "
        "`torch.inference_mode()`, no outputs requested: its forward pass only. Medians of interleaved repeats.",
        "",
        "| Measure | Engine | Bare | Ratio | Target |",
        "|---|---|---|---|---|",
    ]
    for ctx, target in ((ctx_lo, 1.15), (ctx_hi, 1.3)):
        d = decode[ctx]
        r = d["engine"] / d["bare"]
        lines.append(f"| Decode step, {ctx:,} tokens of context | {d['engine']:.1f} ms | {d['bare']:.1f} ms | "
                     f"{r:.2f}x | <= {target}x {'met' if r <= target else 'MISSED'} |")
    p = prefill
    r_last, r_all = p["engine"] / p["bare_last"], p["engine"] / p["bare_all"]
    lines.append(f"| Prefill, {args.prefill_len} tokens (bare with `logits_to_keep=1`, as the engine) | "
                 f"{p['engine']:.0f} ms | {p['bare_last']:.0f} ms | {r_last:.2f}x | <= 1.3x "
                 f"{'met' if r_last <= 1.3 else 'MISSED'} |")
    lines.append(f"| Prefill, {args.prefill_len} tokens (bare computing all {args.prefill_len} positions' logits) | "
                 f"{p['engine']:.0f} ms | {p['bare_all']:.0f} ms | {r_all:.2f}x | |")
    share = play["engine_sps"] / play["bare_sps"]
    lines.append(f"| Play, {play['steps']:,} steps from a {PLAY_PROMPT}-token prompt (to {play['context']:,} tokens) | "
                 f"{play['engine_sps']:.1f} steps/s | {play['bare_sps']:.1f} steps/s | {share:.0%} of bare | "
                 f">= 80% {'met' if share >= 0.8 else 'MISSED'} |")
    m = memory
    lines += [
        "",
        f"Memory (a fresh process holding only the engine, same thread setting): resident size "
        f"{mib(m['rss_model'])} with the model loaded, {mib(m['rss_after_prefill'])} after the prefill, "
        f"**{mib(m['rss_end'])} after a {m['steps']:,}-step session** (prompt {PLAY_PROMPT} tokens, context "
        f"{m['context']:,}); growth **{m['growth_per_step'] / 1024:,.0f} KiB per step** (slope over the second "
        f"half). The recorded history holds {mib(m['history_bytes'])} ({m['history_per_step'] / 1024:,.0f} KiB "
        f"per step on average: float32 logits [50,257] are 196 KiB of it, float16 attention rows "
        f"[12, 12, 1, T] the rest growing with T); the KV cache {mib(m['kv_bytes'])}.",
        "",
    ]
    return "\n".join(lines) + "\n" + report_tail(cache_rows, sampling_rows)


def report_tail(cache_rows, sampling_rows) -> str:
    """The KV cache comparison and the sampling table."""
    lines = [
        "Why the KV cache matters: the time to produce the token at each position, with the cache (one "
        "position against cached keys and values) and without it (re-running the whole sequence, "
        "`use_cache=False`, `logits_to_keep=1`): the bare model, and the engine's `Session.step()` "
        "(everything recorded) in its default mode and with `Session(use_cache=False)` (`--no-cache`).",
        "",
        "| Position | Bare cached | Bare recompute | Ratio | Engine cached | Engine no cache | Ratio |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in cache_rows:
        lines.append(f"| {row['position']:,} | {row['cached']:.1f} ms | {row['uncached']:,.0f} ms | "
                     f"{row['uncached'] / row['cached']:,.1f}x | {row['engine_cached']:.1f} ms | "
                     f"{row['engine_uncached']:,.0f} ms | {row['engine_uncached'] / row['engine_cached']:,.1f}x |")
    lines += [
        "",
        "A settings change at GPT-2's vocabulary (V = 50,257), no forward pass: every sampling stage "
        "(`sampling.distribution`), the draw, and `Distribution.stages` for the 64 candidates (what the "
        "stage-by-stage view draws); then the whole `Session.resample` at 129 positions (also builds the "
        "StepTrace). Wall time, median and worst of the repeats, and the median CPU time of this thread "
        "(what the work costs when no other process competes for the core); target for the view's "
        "update: under 16 ms in all.",
        "",
        "| Settings | Logits | Stages + draw + view data: wall (worst), CPU | Whole resample: wall (worst) |",
        "|---|---|---|---|",
    ]
    for row in sampling_rows:
        whole = (f"{row['resample_median']:.1f} ms (worst {row['resample_max']:.1f})"
                 if "resample_median" in row else "")
        lines.append(f"| {row['settings']} | {row['logits']} | {row['median']:.1f} ms (worst {row['max']:.1f}), "
                     f"CPU {row['cpu']:.1f} ms | {whole} |")
    return "\n".join(lines)


def inside_report(decode, figs, memory, context: int) -> str:
    """The Inside figures: decode overhead with the new recordings, history per step, Inside and lens."""
    m, f = memory, figs
    lines = [
        "| Measure (Inside view) | Measured | Target |",
        "|---|---|---|",
    ]
    for ctx in sorted(decode):
        d = decode[ctx]
        r = d["engine"] / d["bare"]
        target = 1.15 if ctx <= 128 else 1.3
        lines.append(f"| Decode step with everything recorded (now also attn_out and mlp_out), {ctx:,} tokens | "
                     f"{d['engine']:.1f} ms vs bare {d['bare']:.1f} ms = {r:.2f}x | <= {target}x "
                     f"{'met' if r <= target else 'MISSED'} |")
    a = f["added"]
    ctx = min(decode)
    r = a["now"] / a["bare"]
    lines.append(f"| The same step, {ctx:,} tokens, in thread CPU time: now vs without the Inside view's two recordings "
                 f"vs bare (interleaved) | {a['now']:.1f} vs {a['before']:.1f} vs {a['bare']:.1f} ms: "
                 f"{a['now'] / a['before']:.3f}x before, {r:.2f}x bare | <= 1.15x {'met' if r <= 1.15 else 'MISSED'} |")
    added = m["added_per_decode_step"]
    before = (m["history_bytes"] - m["added_bytes"]) / m["steps"]
    lines.append(f"| History per decode step: added for the Inside view (attn_out + mlp_out, float16 [12, 768] each) | "
                 f"{added:,} B ({added / 1024:.0f} KiB); average per step over {m['steps']:,} steps "
                 f"{before / 1024:,.0f} KiB before, {m['history_per_step'] / 1024:,.0f} KiB after | <= 64 KB "
                 f"{'met' if added <= 64_000 else 'MISSED'} |")
    prefill = f["engine_prefill"]
    for key, words in (("inside_middle", f"position {context // 2:,}"), ("inside_older", f"position {context - 2:,}"),
                       ("inside_older_one_layer", f"position {context - 2:,} (keys and values of one layer)"),
                       ("inside_newest", f"the newest position, {context - 1:,},"),
                       ("inside_older_no_cache", f"position {context - 2:,}, without the session's KV cache (positions 0..{context - 3:,} first, unhooked, sdpa),")):
        r = f[key] / prefill
        lines.append(f"| Opening Inside for {words} of a {context:,}-token context (`engine.inside.inside`, logit lens included) | "
                     f"{f[key]:,.0f} ms = {r:.2f}x the engine's prefill ({prefill:,.0f} ms; bare model "
                     f"{f['bare_prefill']:,.0f} ms) | <= 1 prefill {'met' if r <= 1 else 'MISSED'} |")
    lines.append(f"| Logit lens (ln_f + LM head on 13 residual vectors, top 10 each), inside those | "
                 f"{f['lens']:.0f} ms | never in the timed step |")
    return "\n".join(lines)


def only_section(args, cfg, loaded, bare, t0: float) -> int:
    """``--only cache`` or ``--only sampling``: one section's table, for a quick check."""
    if args.only == "cache":
        rows = measure_cache(loaded, bare, cfg["cache_positions"], cfg["decode_repeats"], cfg["uncached_repeats"])
        table = report_section(rows, None)
    else:
        table = report_section(None, measure_sampling(loaded, cfg["sampling_repeats"]))
    print(f"{table}\n\n({time.perf_counter() - t0:.0f} s, `python benchmarks/bench_engine.py --only {args.only}"
          f"{' --quick' if args.quick else ''}`)")
    return 0


def report_section(cache_rows, sampling_rows) -> str:
    """The cache or the sampling table alone (a part of ``report_tail``)."""
    full = report_tail(cache_rows or [], sampling_rows or [])
    start = full.index("| Position") if cache_rows else full.index("| Settings")
    end = full.index("\n\nA settings change") if cache_rows else len(full)
    return full[start:end]


def measure_file(loaded, steps: int, folder: Path) -> dict:
    """Size and times of a session file of ``steps`` sampled steps (one branch) at this model's shape."""
    import zipfile

    from engine.session_read import open_session, read_session
    from engine.session_write import save_session, session_arrays

    t0 = time.perf_counter()
    loaded.weights_hash
    hash_s = time.perf_counter() - t0
    loaded.projection  # fitted once per model in the app too, before any save
    session = session_with_prompt(loaded, 16)
    t0 = time.perf_counter()
    for _ in range(steps):
        session.step()
    step_s = time.perf_counter() - t0
    path = folder / "session.npz"
    t0 = time.perf_counter()
    save_session(session, path)
    save_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    arrays = session_arrays(session)  # the part of a save before compression
    arrays_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    np.savez_compressed(folder / "deflate-all.npz", **arrays)  # the former writer, side by side: every member deflated
    deflate_s = time.perf_counter() - t0
    deflate_size = (folder / "deflate-all.npz").stat().st_size
    del arrays
    t0 = time.perf_counter()
    saved = read_session(path)
    read_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    open_session(saved, loaded)
    open_same_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    open_session(saved, None)
    open_view_s = time.perf_counter() - t0
    with zipfile.ZipFile(path) as z:
        members = {i.filename.removesuffix(".npy"): (i.file_size, i.compress_size) for i in z.infolist()}
    return dict(steps=steps, size=path.stat().st_size, history=sum(r.nbytes for r in session.records), step_s=step_s, save_s=save_s, arrays_s=arrays_s,
                read_s=read_s, open_same_s=open_same_s, open_view_s=open_view_s, hash_s=hash_s, members=members,
                deflate_s=deflate_s, deflate_size=deflate_size)


def file_report(f: dict) -> str:
    top = sorted(f["members"].items(), key=lambda kv: -kv[1][1])[:6]
    lines = [
        f"| {f['steps']:,} sampled steps, 16-token prompt | value |",
        "|---|---|",
        f"| file size | {mib(f['size'])} ({f['size'] / f['steps'] / 1024:.0f} KiB a step) |",
        f"| the records in memory | {mib(f['history'])} |",
        f"| save_session (arrays, compression, fsync) | {f['save_s']:.1f} s, of which gathering the arrays {f['arrays_s']:.1f} s |",
        f"| the same arrays with np.savez_compressed (every member deflated, the former writer) | {f['deflate_s']:.1f} s, {mib(f['deflate_size'])} |",
        f"| read_session (decompress, check) | {f['read_s']:.1f} s |",
        f"| open_session with the same model (hash already known) / view-only | {f['open_same_s']:.2f} s / {f['open_view_s']:.2f} s |",
        f"| weights_hash, first time (GPT-2 small: 124M parameters) | {f['hash_s']:.2f} s |",
        "| largest keys, stored (raw) | " + ", ".join(f"`{k}` {mib(c)} ({mib(r)})" for k, (r, c) in top) + " |",
    ]
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="short run (under a minute): fewer repeats and steps")
    p.add_argument("--threads", type=int, default=0, help=f"torch threads (default: cores - 1 = {app_threads()}, as the app)")
    p.add_argument("--only", choices=("cache", "sampling", "inside", "fit", "file", "families"),
                   help="run one section and print its table: the KV cache comparison, sampling, or the Inside figures")
    p.add_argument("--memory-child", metavar="FOLDER", help=argparse.SUPPRESS)
    p.add_argument("--steps", type=int, default=0, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    threads = args.threads or app_threads()
    torch.set_num_threads(threads)
    if args.memory_child:
        print(json.dumps(memory_child(args.memory_child, args.steps)))
        return 0
    cfg = QUICK if args.quick else FULL
    args.prefill_len = cfg["prefill_len"]
    t0 = time.perf_counter()
    if args.only == "families":
        print(families_report(cfg, threads, t0))
        return 0
    with tempfile.TemporaryDirectory(prefix="nexttoken-bench-") as tmp:
        folder = build_model_folder(Path(tmp) / "gpt2-small-random")
        loaded = load_model(folder)
        bare = Bare(load_bare(folder))
        print(f"threads {threads}; bare attention: {bare.model.config._attn_implementation}; "
              f"engine attention: {loaded.model.config._attn_implementation}", file=sys.stderr)
        if args.only in ("cache", "sampling"):
            return only_section(args, cfg, loaded, bare, t0)
        if args.only == "file":
            steps = args.steps or 1000
            print(file_report(measure_file(loaded, steps, Path(tmp))))
            print(f"\n({time.perf_counter() - t0:.0f} s, `python benchmarks/bench_engine.py --only file --steps {steps}`)")
            return 0
        if args.only == "fit":
            f = measure_projection_fit(loaded)
            print(fit_row(f))
            return 0
        decode = {c: measure_decode(loaded, bare, c, cfg["decode_repeats"]) for c in cfg["decode_contexts"]}
        print(f"decode {decode}", file=sys.stderr)
        added = measure_added_recording(loaded, bare, min(cfg["decode_contexts"]), 3 * cfg["decode_repeats"])
        print(f"added recording {added}", file=sys.stderr)
        inside_figs = measure_inside(loaded, bare, cfg["inside_context"], cfg["inside_repeats"])
        inside_figs["added"] = added
        print(f"inside {inside_figs}", file=sys.stderr)
        if args.only != "inside":
            prefill = measure_prefill(loaded, bare, cfg["prefill_len"], cfg["prefill_repeats"])
            print(f"prefill {prefill}", file=sys.stderr)
            cache_rows = measure_cache(loaded, bare, cfg["cache_positions"], cfg["decode_repeats"], cfg["uncached_repeats"])
            print(f"cache {cache_rows}", file=sys.stderr)
            sampling_rows = measure_sampling(loaded, cfg["sampling_repeats"])
            print(f"sampling {sampling_rows}", file=sys.stderr)
            play = measure_play(loaded, bare, cfg["play_steps"])
            print(f"play {play}", file=sys.stderr)
        fit = measure_projection_fit(loaded) if args.only is None else None
        print(f"projection fit {fit}", file=sys.stderr)
        del loaded, bare
        memory = measure_memory(folder, cfg["memory_steps"], threads)
    wall = time.perf_counter() - t0
    if args.only != "inside":
        print(report(args, threads, decode, prefill, cache_rows, play, memory, sampling_rows, wall))
        print(fit_row(fit))
        print()
    else:
        print(f"Measured {datetime.date.today().isoformat()}, {os.cpu_count()} cores, torch.set_num_threads({threads}), "
              f"GPT-2 small's shape, random weights, fp32. Command: `python benchmarks/bench_engine.py --only inside` ({wall:.0f} s).\n")
    print(inside_report(decode, inside_figs, memory, cfg["inside_context"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
