"""What the Why view costs when it is open: one direct logit attribution, against the step it explains.

Loads a model (default: models/SmolLM2-135M-Instruct), sets the prompt, and at the prefill and at
each of ``--steps`` decode steps times, interleaved: the traced step itself (Session.step), the
attribution of the chosen token (engine.attribution.attribute: one recompute of the newest position
against a copy of the KV cache, then the readout), the same with a second candidate ("rather
than"), and the Inside view's recompute (engine.inside.inside) for comparison. The Why view adds
nothing to a step while it is closed: attribute runs only when the view asks.

    python benchmarks/bench_attribution.py
    python benchmarks/bench_attribution.py --model resources/models/gpt2-tiny-demo --steps 20

Prints a markdown table (paste it into benchmarks/RESULTS.md). A script, not a test.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import torch  # noqa: E402

from engine import SamplingSettings, Session, load_model  # noqa: E402
from engine.attribution import attribute  # noqa: E402
from engine.inside import inside  # noqa: E402


def timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1e3


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=str(ROOT / "models" / "SmolLM2-135M-Instruct"))
    ap.add_argument("--prompt", default="The capital of France is")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--repeats", type=int, default=3, help="timings of each figure per step")
    args = ap.parse_args()
    torch.set_num_threads(max(1, torch.get_num_threads()))
    loaded = load_model(args.model)
    session = Session(loaded, SamplingSettings(greedy=True))
    session.set_prompt(args.prompt)
    rows = {"step": [], "attribute": [], "versus": [], "inside": []}
    worst = 0.0
    for s in range(args.steps + 1):
        rows["step"].append(timed(session.step))
        record = session.records[-1]
        first, second = (int(i) for i in np.argsort(-record.logits)[:2])
        for _ in range(args.repeats):
            rows["attribute"].append(timed(lambda: attribute(session)))
            rows["versus"].append(timed(lambda: attribute(session, target=first, versus=second)))
            rows["inside"].append(timed(lambda: inside(session)))
        a = attribute(session)
        worst = max(worst, abs(a.total - a.logit) / sum(abs(v) for _, v in a.parts()))
    info = loaded.info
    print(f"{info.name}: {info.n_layer} layers, {info.n_head} heads, prompt {args.prompt!r} "
          f"({len(session.prompt_ids)} tokens), {args.steps} decode steps, {torch.get_num_threads()} threads, "
          f"load average {os.getloadavg()[0]:.1f} at the end\n")
    print("| what | median ms | min ms | max ms |")
    print("|---|---:|---:|---:|")
    names = {"step": "Session.step (the traced step, prefill included)",
             "attribute": "attribute: the chosen token's logit, every part, every head's sources",
             "versus": "attribute: one candidate rather than another",
             "inside": "inside: the Inside view's recompute, for comparison"}
    for key, values in rows.items():
        print(f"| {names[key]} | {statistics.median(values):.1f} | {min(values):.1f} | {max(values):.1f} |")
    print(f"\nlargest |Σ parts - logit| / Σ |parts| over the steps: {worst:.1e}")


if __name__ == "__main__":
    main()
