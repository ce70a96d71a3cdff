"""What does tracing through nnsight cost? The nnsight backend's step against the hooks backend's, on SmolLM2.

Loads ``models/SmolLM2-135M-Instruct`` (the real weights, converted by scripts/setup.sh) twice, on the
CPU in float32: with ``--backend hooks`` (engine.hooks' forward hooks) and ``--backend nnsight``
(nnsight's tracing of the same kind of model, engine.nnsight_backend). Both record the same
StepRecord. In one process, interleaved repeat by repeat, it times the prefill of a prompt of
``--tokens`` tokens and the cached decode steps after it, and reports medians and their ratio; then
the remote request's path run here (nnsight's serialization and a full pass over the text, no
cache: what every remote step costs before the network), against the hooks backend without a cache.

    python benchmarks/bench_nnsight.py                 # 128-token prompt, 16 decode steps, 5 repeats
    python benchmarks/bench_nnsight.py --tokens 512 --repeats 3

A script, not a test: the figures depend on the machine and on what else it is running.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402

from engine import SamplingSettings, Session, load_model  # noqa: E402
from engine.loading import LoadedModel  # noqa: E402
from engine.nnsight_backend import NnsightBackend  # noqa: E402
from engine.runtime import Runtime  # noqa: E402

MODEL = ROOT / "models" / "SmolLM2-135M-Instruct"
TEXT = ("The history of the printing press begins in the fifteenth century, when movable type changed how books "
        "were made, sold and read across Europe, and later the whole world. ")


def prompt_of(loaded, tokens: int) -> list[int]:
    ids = loaded.tokenizer.encode(TEXT * (tokens // 20 + 2))
    return ids[:tokens]


def run(loaded, prompt: list[int], steps: int, *, use_cache: bool = True) -> tuple[float, list[float], list[float]]:
    """(prefill step ms, decode step_ms list, decode forward_ms list) of one session."""
    session = Session(loaded, SamplingSettings(greedy=True), use_cache=use_cache)
    session.set_prompt_ids(prompt)
    session.step()
    prefill = session.records[0].step_ms
    for _ in range(steps):
        session.step()
    decode = [r.step_ms for r in session.records[1:]]
    forward = [r.forward_ms for r in session.records[1:]]
    return prefill, decode, forward


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tokens", type=int, default=128)
    p.add_argument("--steps", type=int, default=16)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--remote-steps", type=int, default=4, help="decode steps of the remote request's path (no cache)")
    args = p.parse_args()
    torch.set_num_threads(max(1, (os.cpu_count() or 2) - 1))  # the app's setting
    import nnsight

    print(f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, torch {torch.__version__} "
          f"({torch.get_num_threads()} threads), nnsight {nnsight.__version__}, load average {os.getloadavg()[0]:.1f}")
    loaded = {b: load_model(str(MODEL), runtime=Runtime(device="cpu", backend=b)) for b in ("hooks", "nnsight")}
    prompt = prompt_of(loaded["hooks"], args.tokens)
    prefill = {b: [] for b in loaded}
    decode = {b: [] for b in loaded}
    for _ in range(args.repeats):
        for b, lm in loaded.items():  # interleaved: a slower minute of the machine hits both
            pre, dec, _ = run(lm, prompt, args.steps)
            prefill[b].append(pre)
            decode[b].extend(dec)
    print(f"\nSmolLM2-135M-Instruct, CPU float32, prompt {len(prompt)} tokens, {args.steps} decode steps x {args.repeats} repeats "
          "(step_ms: forward pass, recording and sampling; medians)\n")
    print("| step | hooks | nnsight | nnsight / hooks |")
    print("|---|---|---|---|")
    for name, table in (("prefill", prefill), ("decode (cached)", decode)):
        h, n = statistics.median(table["hooks"]), statistics.median(table["nnsight"])
        print(f"| {name} | {h:.1f} ms | {n:.1f} ms | {n / h:.2f}x |")

    local = loaded["nnsight"]
    simulated = LoadedModel(model=local.model, tokenizer=local.tokenizer, info=local.info,
                            backend=NnsightBackend(local.backend.lm, simulate=True))
    remote = {"hooks, no cache": [], "remote request run here": []}
    remote_prefill = {k: [] for k in remote}
    for _ in range(max(1, args.repeats // 2)):
        for name, lm in (("hooks, no cache", loaded["hooks"]), ("remote request run here", simulated)):
            pre, dec, _ = run(lm, prompt, args.remote_steps, use_cache=False)
            remote_prefill[name].append(pre)
            remote[name].extend(dec)
    print(f"\nWithout a cache (every step a full pass over the text so far), {args.remote_steps} decode steps:\n")
    print("| step | hooks, no cache | remote request run here (serialized, no network) | ratio |")
    print("|---|---|---|---|")
    for name, table in (("prefill", remote_prefill), ("decode", remote)):
        h, n = statistics.median(table["hooks, no cache"]), statistics.median(table["remote request run here"])
        print(f"| {name} | {h:.1f} ms | {n:.1f} ms | {n / h:.2f}x |")
    tiny_overhead(args.repeats)
    print(f"\nload average after: {os.getloadavg()[0]:.1f}; {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")


def tiny_overhead(repeats: int) -> None:
    """nnsight's fixed cost per traced step, where the forward pass itself costs almost nothing: a tiny
    random Llama (engine.random_model.TINY: 2 layers, d 64), cached decode steps."""
    import tempfile

    from engine.random_model import TINY, write_random_model

    with tempfile.TemporaryDirectory() as tmp:
        folder = write_random_model(Path(tmp) / "tiny-llama", "llama", **TINY["llama"])
        loaded = {b: load_model(str(folder), runtime=Runtime(device="cpu", backend=b)) for b in ("hooks", "nnsight")}
        decode = {b: [] for b in loaded}
        for _ in range(repeats):
            for b, lm in loaded.items():
                decode[b].extend(run(lm, list(range(5, 37)), 16)[1])
    h, n = statistics.median(decode["hooks"]), statistics.median(decode["nnsight"])
    print(f"\nA tiny random Llama (2 layers, d 64; the forward pass costs almost nothing), 32-token prompt, cached decode "
          f"step: hooks {h:.1f} ms, nnsight {n:.1f} ms: tracing adds {n - h:.1f} ms a step")
    return 0


if __name__ == "__main__":
    sys.exit(main())
