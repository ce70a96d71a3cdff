"""Where the bundled resources live, from a source checkout or a PyInstaller bundle."""

from __future__ import annotations

import sys
from pathlib import Path

DEMO_MODEL_NAME = "gpt2-tiny-demo"


def resources_dir() -> Path:
    frozen_root = getattr(sys, "_MEIPASS", None)
    if frozen_root:
        return Path(frozen_root) / "resources"
    return Path(__file__).resolve().parent.parent / "resources"


def demo_model_dir() -> Path:
    return resources_dir() / "models" / DEMO_MODEL_NAME
