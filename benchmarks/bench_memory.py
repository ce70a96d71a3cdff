"""How much memory does a long text take? Peak RSS of the engine's process at a prefill and 20 steps.

For SmolLM2-135M's shape and GPT-2 small's (random weights, ``engine.random_model``; GPT-2's position
table is widened to 8,212 positions so that it reaches the same lengths) and each prompt length, a
fresh child process loads the model, takes a prefill of that many tokens and 20 decode steps the way
the window's engine process does (``app.host.session_host.SessionHost``, every result pickled for the wire
by ``app.protocol.wire.Sender``, nothing written), and reports its peak resident set size
(``getrusage().ru_maxrss``) after the load, the prefill and the steps. One process per length: a peak
never comes down, so lengths must not share one.

    python benchmarks/bench_memory.py                          # 128 to 8,192 positions, both shapes (about 15 min on 2 cores)
    python benchmarks/bench_memory.py --positions 128 1000     # just these lengths
    python benchmarks/bench_memory.py --shapes SmolLM2-135M --folder models/SmolLM2-135M-Instruct  # the real weights
    python benchmarks/bench_memory.py --root /path/to/other/tree --positions 128 1000  # another tree's engine, same models
    python benchmarks/bench_memory.py --shapes SmolLM2-135M --positions 4000 --play 300  # then Play for 5 minutes

Prints a markdown table (paste it into benchmarks/RESULTS.md) and the growth from 2,000 to 4,000 and
from 4,000 to 8,192 positions where both were measured. A script, not a test: the figures depend on the
machine, the allocator and what else runs.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
POSITIONS = (128, 1000, 2000, 4000, 8192)
STEPS = 20
SHAPES = ("SmolLM2-135M", "GPT-2 small")

CHILD = r"""
import json, resource, sys, time
root, folder, positions, steps, threads = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
play_s = float(sys.argv[6])
sys.path.insert(0, root)
import numpy as np, torch
torch.set_num_threads(threads)
from app.protocol import messages as p
from app.host.session_host import SessionHost
from app.protocol.wire import Sender

def peak_mb():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: kilobytes

def rss_mb():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize() / 2**20

class Pipe:  # what the engine process writes to: the bytes are made, then dropped
    def send_bytes(self, data): bytes(memoryview(data)[:1])
    def send(self, obj): pass

sender, replies = Sender(Pipe()), []
def emit(reply):
    sender.write(sender.encode(reply, prune=isinstance(reply, p.Finished)))
    replies.append(type(reply).__name__ + ": " + getattr(reply, "error", ""))
queued = []
host = SessionHost(emit, queued.append)
out = {"positions": positions}
host.handle(p.Load(generation=1, source=folder, prompt="Hello"))  # as the window asks: by folder
loaded = host.session.loaded
rng = np.random.default_rng(0)
eos = loaded.tokenizer.eos_id
ids = rng.integers(0, loaded.info.vocab_size, positions)
ids[ids == eos] = 0
host.session.set_prompt_ids(ids.tolist())
out["load_mb"] = peak_mb()
t0 = time.perf_counter()
host.handle(p.Step(generation=2))
out["prefill_s"] = time.perf_counter() - t0
out["prefill_mb"] = peak_mb()
t0 = time.perf_counter()
for g in range(steps):
    host.handle(p.Step(generation=3 + g))
out["decode_ms"] = (time.perf_counter() - t0) / steps * 1e3
out["steps_mb"] = peak_mb()
out["steps"] = host.session.n_steps - 1
if play_s > 0:  # Play as the window runs it: each step queues the next (SessionHost._play)
    out["play"], t0, mark = [], time.perf_counter(), 0.0
    host.play_generation = 100
    queued.append(p.Play(generation=100))
    while queued and time.perf_counter() - t0 < play_s:
        host.handle(queued.pop())
        if time.perf_counter() - t0 >= mark:
            out["play"].append((round(time.perf_counter() - t0), host.session.n_steps, round(rss_mb()), round(peak_mb())))
            mark += 30
    out["play"].append((round(time.perf_counter() - t0), host.session.n_steps, round(rss_mb()), round(peak_mb())))
    out["play_stopped"] = not queued
out["replies"] = sorted(set(r for r in replies if not r.startswith(("Finished", "Progress"))))  # a long prefill tells its progress
print(json.dumps(out))
"""


def write_models(tmp: Path, shapes, folder: str | None) -> dict[str, str]:
    sys.path.insert(0, str(ROOT))
    from engine.random_model import write_random_gpt2, write_shape

    folders = {}
    for shape in shapes:
        if folder:
            folders[shape] = folder
        elif shape == "GPT-2 small":
            folders[shape] = str(write_random_gpt2(tmp / "gpt2", n_positions=max(POSITIONS) + STEPS))
        else:
            folders[shape] = str(write_shape(tmp / shape, shape))
    return folders


def measure(root: str, folder: str, positions: int, steps: int, threads: int, play_s: float = 0) -> dict:
    run = subprocess.run([sys.executable, "-c", CHILD, root, folder, str(positions), str(steps), str(threads), str(play_s)],
                         capture_output=True, text=True)
    if run.returncode != 0:
        return {"positions": positions, "error": f"exit {run.returncode}: {run.stderr.strip().splitlines()[-1:]}"}
    return json.loads(run.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--positions", type=int, nargs="+", default=list(POSITIONS))
    parser.add_argument("--shapes", nargs="+", default=list(SHAPES), choices=SHAPES)
    parser.add_argument("--steps", type=int, default=STEPS)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--root", default=str(ROOT), help="the tree whose engine runs (default: this one)")
    parser.add_argument("--folder", help="a model folder to use instead of the random shape (one shape)")
    parser.add_argument("--play", type=float, default=0, metavar="SECONDS",
                        help="after the steps, Play for this long, the RSS printed every 30 s")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        folders = write_models(Path(tmp), args.shapes, args.folder)
        print(f"engine tree: {args.root}; {args.steps} decode steps; {args.threads} torch threads\n")
        print("| shape | positions | peak RSS after load | after the prefill | after 20 steps | prefill | decode step |")
        print("|---|---:|---:|---:|---:|---:|---:|")
        for shape, folder in folders.items():
            got = {}
            for n in args.positions:
                r = measure(args.root, folder, n, args.steps, args.threads, args.play)
                got[n] = r
                if "error" in r:
                    print(f"| {shape} | {n:,} | {r['error']} | | | | |", flush=True)
                    continue
                note = f" ({'; '.join(r['replies'])})" if r["replies"] else ""
                print(f"| {shape} | {n:,} | {r['load_mb']:,.0f} MB | {r['prefill_mb']:,.0f} MB | {r['steps_mb']:,.0f} MB "
                      f"| {r['prefill_s']:.1f} s | {r['decode_ms']:.0f} ms{note} |", flush=True)
                for t, taken, now, peak in r.get("play", []):
                    print(f"|   Play, {t} s | {taken:,} steps | RSS {now:,} MB | peak {peak:,} MB | | | |", flush=True)
                if r.get("play_stopped"):
                    print("|   Play stopped by itself (the model's end of text or the context's end) | | | | | | |")
            ok = {n: r["steps_mb"] for n, r in got.items() if "error" not in r}
            if all(n in ok for n in (2000, 4000, 8192)):
                low, high = ok[4000] - ok[2000], ok[8192] - ok[4000]
                print(f"\n{shape}: rise 2,000 → 4,000 positions {low:,.0f} MB, 4,000 → 8,192 {high:,.0f} MB "
                      f"({high / low:.2f} x; linear growth is 2.10 x)\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
