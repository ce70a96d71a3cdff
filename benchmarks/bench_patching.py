"""How long activation patching of the residual stream takes: every layer x position of a prompt pair.

Loads a model (default: models/SmolLM2-135M-Instruct) and patches the clean prompt's resid_pre into
the corrupted one at every layer and position (engine.patching.patch_resid_pre: one batch of P rows
per layer, L forward passes in all), with the metric logit(clean's top token) - logit(corrupted's
top token) at the last position. Prints the time, the token count and the places that restore most.

    python benchmarks/bench_patching.py
    python benchmarks/bench_patching.py --clean "..." --corrupted "..."

A script, not a test: the figures depend on the machine and on what else it is running.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import torch  # noqa: E402

from engine import load_model  # noqa: E402
from engine.patching import patch_resid_pre  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=str(ROOT / "models" / "SmolLM2-135M-Instruct"))
    ap.add_argument("--clean", default="Question: what is the capital of France? Answer: the capital is")
    ap.add_argument("--corrupted", default="Question: what is the capital of Germany? Answer: the capital is")
    args = ap.parse_args()
    loaded = load_model(args.model)
    tok = loaded.tokenizer
    clean, corrupted = (np.array(tok.encode(text), dtype=np.int64) for text in (args.clean, args.corrupted))
    with torch.inference_mode():
        top = [int(loaded.model(input_ids=torch.from_numpy(ids)[None]).logits[0, -1].argmax()) for ids in (clean, corrupted)]
    result = patch_resid_pre(loaded.model, clean, corrupted, top[0], top[1])
    info = loaded.info
    print(f"{info.name}: {info.n_layer} layers, a {len(clean)}-token pair, {torch.get_num_threads()} threads, "
          f"load average {os.getloadavg()[0]:.1f}")
    print(f"metric: logit({tok.piece(top[0])!r}) - logit({tok.piece(top[1])!r}); clean {result.clean:.2f}, "
          f"corrupted {result.corrupted:.2f}")
    print(f"patch_resid_pre: {result.seconds:.1f} s for {info.n_layer} x {len(clean)} patches")
    restored = result.restored
    pieces = [tok.piece(int(i)) for i in clean]
    for layer in (0, info.n_layer // 2, info.n_layer - 1):
        row = ", ".join(f"{pieces[j]!r} {restored[layer, j]:.2f}" for j in np.argsort(-restored[layer])[:3])
        print(f"layer {layer}: most restored at {row}")


if __name__ == "__main__":
    main()
