"""Where the bundled resources live: a source checkout, an installed wheel or a PyInstaller bundle."""

from __future__ import annotations

import sys
from importlib import resources
from pathlib import Path

DEMO_MODEL_NAME = "gpt2-tiny-demo"
OFFLINE_MODEL_NAME = "SmolLM2-135M-Instruct"  # written by scripts/fetch_smollm2.py (scripts/setup.sh)


def resources_dir() -> Path:
    """The folder holding ``help/``, ``icons/`` and ``models/``.

    A PyInstaller bundle has it at ``resources/`` in ``sys._MEIPASS``; a source checkout (the folder
    with pyproject.toml) reads its own ``resources/``, even when the venv has another checkout
    installed; an installed wheel carries it as the package ``nexttoken_resources``."""
    frozen_root = getattr(sys, "_MEIPASS", None)
    if frozen_root:
        return Path(frozen_root) / "resources"
    checkout = Path(__file__).resolve().parent.parent
    if (checkout / "pyproject.toml").is_file():
        return checkout / "resources"
    return Path(str(resources.files("nexttoken_resources")))


def demo_model_dir() -> Path:
    return resources_dir() / "models" / DEMO_MODEL_NAME


def app_icon_path() -> Path:
    """The 256 px PNG icon, for the window (``QIcon(str(app_icon_path()))``); .ico/.icns sit beside it."""
    return resources_dir() / "icons" / "nexttoken.png"


def bundled_model_dirs() -> list[Path]:
    """Model folders shipped in ``resources/models/``: the demo model first, then the rest by name.

    A classroom build adds checkpoints here with ``packaging/build.py --model-dir PATH``; each
    folder's name (``gpt2``, ``distilgpt2``, ...) is what the window shows and what ``--model`` takes.
    Only folders with a ``config.json`` count.
    """
    models = resources_dir() / "models"
    if not models.is_dir():
        return []
    found = sorted((d for d in models.iterdir() if (d / "config.json").is_file()), key=lambda d: d.name.lower())
    return sorted(found, key=lambda d: d.name != DEMO_MODEL_NAME)  # stable: keeps the name order


def offline_model_dir() -> Path:
    """Where scripts/fetch_smollm2.py writes SmolLM2-135M-Instruct: ``models/`` in the checkout (ignored by git)."""
    return resources_dir().parent / "models" / OFFLINE_MODEL_NAME


def offline_model() -> Path | None:
    """The SmolLM2-135M-Instruct folder: the one an installer bundles in ``resources/models/``, else the
    one scripts/fetch_smollm2.py fetched, else None (the demo is the first model then)."""
    for folder in (resources_dir() / "models" / OFFLINE_MODEL_NAME, offline_model_dir()):
        if (folder / "config.json").is_file():
            return folder
    return None
