"""Which files of a local GPT-2 folder go into the bundle, and under which name.

Shared by ``nexttoken.spec`` (to list the data files) and ``build.py`` (to check the folders before a
long build). A folder lands at ``resources/models/<name>/`` in the bundle, where
``engine.paths.bundled_model_dirs()`` finds it.
"""

from __future__ import annotations

import fnmatch
from pathlib import Path

from engine.loading import HUB_FILES, check_folder
from engine.paths import DEMO_MODEL_NAME

LEGACY_WEIGHTS = "pytorch_model.bin"  # taken only when a folder has no .safetensors
CARD_FILES = ("LICENSE", "MODEL_CARD.md")  # a model's licence and card travel with it (also in licenses/)


def bundle_name(folder: Path) -> str:
    """The name a folder gets in the bundle: its own, or the repo name for a hub-cache snapshot.

    ``~/.cache/huggingface/hub/models--openai-community--gpt2/snapshots/<hash>`` becomes ``gpt2``.
    """
    folder = Path(folder).resolve()
    if folder.parent.name == "snapshots" and folder.parent.parent.name.startswith("models--"):
        return folder.parent.parent.name.split("--")[-1]
    return folder.name


def model_files(folder: Path) -> list[Path]:
    """The files a folder contributes: those a hub download fetches (no TF/Flax/ONNX weights)."""
    files = [f for f in sorted(Path(folder).iterdir()) if f.is_file()]
    chosen = [f for f in files if f.name in CARD_FILES or any(fnmatch.fnmatch(f.name, p) for p in HUB_FILES)]
    if not any(f.suffix == ".safetensors" for f in chosen) and (Path(folder) / LEGACY_WEIGHTS).is_file():
        chosen.append(Path(folder) / LEGACY_WEIGHTS)
    return chosen


def check_model_dirs(folders: list[Path]) -> dict[str, Path]:
    """Check each folder holds a model of a supported family (engine.loading.check_folder) and has a unique name.

    Returns {bundle name: folder}; raises engine's ModelLoadError (a bad folder) or ValueError (a
    name clash), each with one sentence, on the first problem.
    """
    named: dict[str, Path] = {}
    for folder in folders:
        folder = Path(folder).expanduser().resolve()
        check_folder(folder)
        name = bundle_name(folder)
        if name == DEMO_MODEL_NAME or name in named:
            raise ValueError(f"Two bundled models would be called '{name}'; rename the folder {folder}.")
        named[name] = folder
    return named


def model_datas(folders: list[Path]) -> list[tuple[str, str]]:
    """PyInstaller ``datas`` entries (source file, destination folder) for the extra model folders."""
    datas = []
    for name, folder in check_model_dirs(folders).items():
        datas += [(str(f), f"resources/models/{name}") for f in model_files(folder)]
    return datas


def bundled_names(folders: list[Path]) -> list[str]:
    """The names of every model in the bundle: the demo model's, then the extra folders'."""
    return [DEMO_MODEL_NAME, *check_model_dirs(folders)]
