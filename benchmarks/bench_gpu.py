"""The engine on a GPU: parity with the CPU engine, and a traced step against a bare generate step.

For a session that is lent a GPU machine (the issue's device checks); it has never run on one. It
runs on the CPU too (``--device cpu --tiny``: a tiny random Llama, a few seconds), which is how it was
checked to run at all.

1. Parity: random weights at ``--parity-shape`` built once in float32 on the CPU; the CPU engine
   (float32) and the GPU engine (float32, then ``--dtype``) step the same greedy prompt; printed: the
   max |logit| difference at each step and whether the greedy tokens agree, in numbers.
2. Speed: at each shape of ``--shapes`` (random weights built on the device in ``--dtype``) and each
   context length of ``--tokens``, the median of ``--steps`` cached decode steps: the engine's
   ``Session.step`` through the hooks backend and the nnsight backend (eager attention, every
   StepRecord value recorded, copied to the host) against a bare step (the same weights with sdpa
   attention: forward one token against the cache, take the argmax, as ``generate`` does).

    python benchmarks/bench_gpu.py                       # cuda, bfloat16, Llama-3.2-1B and Qwen2.5-7B shapes
    python benchmarks/bench_gpu.py --device cpu --tiny   # the smoke run

Prints markdown tables. A script, not a test.
"""

from __future__ import annotations

import argparse
import copy
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import torch  # noqa: E402

from engine import SamplingSettings, Session  # noqa: E402
from engine import hf_compat  # noqa: E402
from engine.loading import step_backend, wrap_model  # noqa: E402
from engine.random_model import TINY, _write_tokenizer  # noqa: E402

# Real models' config.json shapes (random weights). rope_scaling of Llama-3.2 is left at the default.
GPU_SHAPES = {
    "Llama-3.2-1B": ("llama", dict(num_hidden_layers=16, num_attention_heads=32, num_key_value_heads=8, hidden_size=2048,
                                   intermediate_size=8192, vocab_size=128256, tie_word_embeddings=True,
                                   max_position_embeddings=131072, rms_norm_eps=1e-5,
                                   rope_parameters={"rope_type": "default", "rope_theta": 500000.0})),
    "Qwen2.5-7B": ("qwen2", dict(num_hidden_layers=28, num_attention_heads=28, num_key_value_heads=4, hidden_size=3584,
                                 intermediate_size=18944, vocab_size=152064, tie_word_embeddings=False,
                                 max_position_embeddings=32768, rms_norm_eps=1e-6,
                                 rope_parameters={"rope_type": "default", "rope_theta": 1000000.0})),
    "tiny": ("llama", TINY["llama"]),
}


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def build(name: str, folder: Path, device: torch.device, dtype: torch.dtype, seed: int = 0):
    """A transformers model of shape ``name`` with random weights, built on ``device`` in ``dtype``, and
    ``folder`` holding its config and tokenizer."""
    from transformers import AutoConfig, AutoModelForCausalLM

    model_type, config = GPU_SHAPES[name]
    ids = _write_tokenizer(folder, config["vocab_size"])
    cfg = AutoConfig.for_model(model_type, bos_token_id=ids["<|endoftext|>"], eos_token_id=ids["<|im_end|>"],
                               pad_token_id=None, **config)
    cfg.save_pretrained(folder)
    torch.manual_seed(seed)
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(cfg, dtype=dtype, attn_implementation="eager")
    return model.eval()


def engine(model, folder: Path, backend: str = "hooks"):
    loaded = wrap_model(model, folder, name=folder.name, backend=backend)
    return loaded


def greedy_run(loaded, prompt: list[int], steps: int) -> list:
    session = Session(loaded, SamplingSettings(greedy=True))
    session.set_prompt_ids(prompt)
    for _ in range(steps):
        session.step()
    return list(session.records)


def parity(shape: str, device: torch.device, dtype: torch.dtype, steps: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / shape
        cpu_model = build(shape, folder, torch.device("cpu"), torch.float32)
        prompt = list(range(100, 164))
        cpu = greedy_run(engine(cpu_model, folder), prompt, steps)
        print(f"\n### Parity: {shape} random weights, {len(prompt)}-token prompt, {steps} greedy steps, CPU float32 as reference\n")
        print("| engine | max abs logit difference (per step, worst) | greedy tokens agreeing |")
        print("|---|---|---|")
        for run_dtype in dict.fromkeys((torch.float32, dtype)):
            gpu_model = copy.deepcopy(cpu_model).to(device, run_dtype)
            other = greedy_run(engine(gpu_model, folder), prompt, steps)
            worst = max(float(np.abs(a.logits - b.logits).max()) for a, b in zip(cpu, other))
            agree = sum(a.chosen == b.chosen for a, b in zip(cpu, other))
            print(f"| {device.type} {str(run_dtype).removeprefix('torch.')} | {worst:.3g} | {agree} of {steps} |")
            del gpu_model, other
            if device.type == "cuda":
                torch.cuda.empty_cache()


def speed(shape: str, device: torch.device, dtype: torch.dtype, contexts: list[int], steps: int) -> None:
    from transformers import AutoModelForCausalLM

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / shape
        model = build(shape, folder, device, dtype)
        loaded = {"hooks": engine(model, folder)}
        loaded["nnsight"] = type(loaded["hooks"])(model=model, tokenizer=loaded["hooks"].tokenizer, info=loaded["hooks"].info,
                                                  backend=step_backend("nnsight", model, loaded["hooks"].tokenizer.hf))
        bare = AutoModelForCausalLM.from_config(copy.deepcopy(model.config), dtype=dtype, attn_implementation="sdpa")
        bare.load_state_dict(model.state_dict())
        bare = bare.to(device).eval()
        print(f"\n### {shape}, {device.type} {str(dtype).removeprefix('torch.')}: a cached decode step (median of {steps})\n")
        print("| context | bare (sdpa, argmax) | hooks backend | nnsight backend | hooks / bare | nnsight / bare |")
        print("|---|---|---|---|---|---|")
        for context in contexts:
            prompt = list(range(100, 100 + context))
            times = {}
            for name, lm in loaded.items():
                session = Session(lm, SamplingSettings(greedy=True))
                session.set_prompt_ids(prompt)
                session.step()
                ms = []
                for _ in range(steps):
                    sync(device)
                    t0 = time.perf_counter()
                    session.step()
                    sync(device)
                    ms.append((time.perf_counter() - t0) * 1e3)
                times[name] = statistics.median(ms)
            with torch.inference_mode():
                logits, cache = hf_compat.forward(bare, torch.tensor([prompt]), None)
                token = logits[0, -1].argmax()
                ms = []
                for _ in range(steps):
                    sync(device)
                    t0 = time.perf_counter()
                    logits, cache = hf_compat.forward(bare, token.view(1, 1), cache)
                    token = logits[0, -1].argmax()
                    int(token)  # the host needs the token to go on, as generate's stopping check does
                    ms.append((time.perf_counter() - t0) * 1e3)
                times["bare"] = statistics.median(ms)
            b = times["bare"]
            print(f"| {context:,} | {b:.1f} ms | {times['hooks']:.1f} ms | {times['nnsight']:.1f} ms | "
                  f"{times['hooks'] / b:.2f}x | {times['nnsight'] / b:.2f}x |")
        del model, bare, loaded
        if device.type == "cuda":
            torch.cuda.empty_cache()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="cuda")
    p.add_argument("--dtype", default="bfloat16")
    p.add_argument("--shapes", default="Llama-3.2-1B,Qwen2.5-7B")
    p.add_argument("--parity-shape", default="Llama-3.2-1B")
    p.add_argument("--tokens", default="128,1000")
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--tiny", action="store_true", help="the tiny random Llama everywhere (a smoke run)")
    args = p.parse_args()
    device, dtype = torch.device(args.device), getattr(torch, args.dtype)
    shapes = ["tiny"] if args.tiny else args.shapes.split(",")
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU"
    print(f"{name}, torch {torch.__version__}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    parity("tiny" if args.tiny else args.parity_shape, device, dtype, args.steps)
    for shape in shapes:
        speed(shape, device, dtype, [int(t) for t in args.tokens.split(",")], args.steps)
    return 0


if __name__ == "__main__":
    sys.exit(main())
