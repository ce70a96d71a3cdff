"""A GPT-2 with random weights and the real GPT-2 tokenizer, written as a model folder.

For tests and benchmarks: GPT-2 small's shape (the default config) or any smaller one, with no
download. The tokenizer files are the bundled demo model's (the real GPT-2 vocabulary).
"""

from __future__ import annotations

import shutil
from pathlib import Path

from . import paths

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json")  # copied from the demo model


def write_random_gpt2(folder: str | Path, seed: int = 0, **config) -> Path:
    """Save a GPT-2 with random weights (``config`` overrides GPT2Config's defaults) to ``folder``."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    folder = Path(folder)
    torch.manual_seed(seed)
    model = GPT2LMHeadModel(GPT2Config(**config))
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)
    for name in TOKENIZER_FILES:
        shutil.copy(paths.demo_model_dir() / name, folder / name)
    return folder
