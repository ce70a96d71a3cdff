"""Download GPT-2 small at a pinned revision, check it, and store it as float16: the classroom variant's model.

    python packaging/fetch_gpt2.py build/models/gpt2     # then: packaging/build.py --classroom build/models/gpt2

Needs the network (the GitHub workflow runs it; this machine cannot reach the hub). The weights'
sha256 must equal ``WEIGHTS_SHA256`` (the hub's LFS id of model.safetensors at ``REVISION``), else
nothing is written. Floating-point tensors are stored as float16 (about 250 MB instead of 523 MB);
``to_float16`` is what the tests run on a random GPT-2-small-shaped folder.
"""

from __future__ import annotations

import argparse
import hashlib
import shutil
import sys
from pathlib import Path

REPO = "openai-community/gpt2"
REVISION = "607a30d783dfa663caf39e06633721c8d4cfcd7e"
WEIGHTS = "model.safetensors"
WEIGHTS_SHA256 = "248dfc3911869ec493c76e65bf2fcf7f615828b0254c12b473182f0f81d3a707"  # 548,105,171 bytes
OTHER_FILES = ("config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json", "vocab.json",
               "merges.txt")


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def check_sha256(path: Path, expected: str) -> None:
    """ValueError naming the file when its sha256 is not ``expected``."""
    found = sha256(path)
    if found != expected:
        raise ValueError(f"{path}: sha256 {found}, expected {expected} (packaging/fetch_gpt2.py): not using it")


def to_float16(source: Path, target: Path) -> Path:
    """Write ``source``'s safetensors weights to ``target`` with every floating-point tensor as float16."""
    import torch
    from safetensors.torch import load_file, save_file

    tensors = load_file(str(source))
    half = {k: (t.to(torch.float16) if t.is_floating_point() else t).contiguous() for k, t in tensors.items()}
    save_file(half, str(target), metadata={"format": "pt"})
    Path(target).chmod(0o644)  # save_file leaves 0600: every user of an installed app must read it
    return target


def fetch(folder: Path) -> Path:
    """Download into ``folder`` (files at REVISION, weights checked, then float16); return it."""
    from huggingface_hub import hf_hub_download

    folder.mkdir(parents=True, exist_ok=True)
    weights = Path(hf_hub_download(REPO, WEIGHTS, revision=REVISION))
    check_sha256(weights, WEIGHTS_SHA256)
    to_float16(weights, folder / WEIGHTS)
    for name in OTHER_FILES:
        shutil.copyfile(hf_hub_download(REPO, name, revision=REVISION), folder / name)
    return folder


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="packaging/fetch_gpt2.py", description=__doc__.split("\n")[0])
    p.add_argument("folder", type=Path, help="where to write the model (its name should be gpt2)")
    folder = fetch(p.parse_args(argv).folder)
    size = sum(f.stat().st_size for f in folder.iterdir())
    print(f"{REPO}@{REVISION[:12]} in {folder}: {size / 2**20:,.0f} MB (weights float16, sha256 checked)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
