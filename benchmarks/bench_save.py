"""Saving while stepping: a session of GPT-2 small's shape is saved through the session host (the
engine process's code) while the host goes on stepping; prints whether a step completed during the
write and the timings.

    python benchmarks/bench_save.py                 # 1,000 steps (a few minutes to build on 2 cores)
    python benchmarks/bench_save.py --steps 200     # quicker

The host takes a snapshot (on its own thread, as for every request) and app/host/saver.py writes it on
another; meanwhile this script sends Back and Step requests (the context is nearly full after 1,000
steps, so each Step recomputes the newest position). A script, not a test: the figures depend on the
machine and on what else it runs.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from app.protocol import messages as p  # noqa: E402
from app.logic import wording  # noqa: E402
from app.host.session_host import SessionHost  # noqa: E402
from app.host.torch_threads import ENGINE_TORCH_THREADS  # noqa: E402
from engine import SamplingSettings, Session, load_model  # noqa: E402
from engine.random_model import write_random_gpt2  # noqa: E402

PROMPT = " The cat sat on the mat and the dog ran away from the house."  # 15 tokens


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=1000, help="steps in the saved session (default 1,000)")
    args = parser.parse_args(argv)
    torch.set_num_threads(ENGINE_TORCH_THREADS)
    t_all = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="nexttoken-bench-save-") as tmp:
        loaded = load_model(write_random_gpt2(Path(tmp) / "gpt2-small-random"))
        loaded.weights_hash, loaded.projection  # once per model in the app too, before any save
        session = Session(loaded, SamplingSettings(temperature=1.0, top_k=50, seed=0))
        session.set_prompt(PROMPT)
        t0 = time.perf_counter()
        for _ in range(args.steps):
            session.step()
        build_s = time.perf_counter() - t0

        sent: list[tuple] = []
        again: list[p.Request] = []
        host = SessionHost(sent.append, again.append)
        host.session = session  # as a Load would leave it
        generation = 0

        def send(request_type, **kw):
            nonlocal generation
            generation += 1
            t = time.perf_counter()
            host.handle(request_type(generation=generation, **kw))
            return time.perf_counter() - t, sent[-1]

        step_s = [send(p.Step if i % 2 else p.Back)[0] for i in range(6)][1::2]  # Back, Step, ...: before the save
        path = Path(tmp) / "session.npz"
        t_save = time.perf_counter()
        request_s, saving = send(p.SaveSession, path=str(path))
        during: list[float] = []
        while host.saver.pending:
            send(p.Back)
            took, reply = send(p.Step)
            if host.saver.pending and isinstance(reply, p.Finished) and isinstance(reply.result.request, p.Step):
                during.append(took)
        host.close()
        write_s = time.perf_counter() - t_save
        (written,) = again
        host.handle(written)
        saved = wording.result_status(sent[-1].result)
        size = path.stat().st_size
    print(f"session: {args.steps:,} steps of GPT-2 small's shape (random weights), built in {build_s:.0f} s")
    print(f"Save request (snapshot, then queued): {request_s * 1e3:.0f} ms on the host's thread: \"{wording.result_status(saving.result)}\"")
    print(f"file written {write_s:.1f} s after the request ({size / 2**20:.0f} MiB): \"{saved}\"")
    print(f"steps completed during the write: {len(during)}"
          + (f" (median {statistics.median(during) * 1e3:.0f} ms, longest {max(during) * 1e3:.0f} ms)" if during else ""))
    print(f"step before the save: median {statistics.median(step_s) * 1e3:.0f} ms")
    print("a step completed during the write: " + ("yes" if during else "NO"))
    print(f"({time.perf_counter() - t_all:.0f} s, `python benchmarks/bench_save.py --steps {args.steps}`)")
    return 0 if during else 1


if __name__ == "__main__":
    sys.exit(main())
