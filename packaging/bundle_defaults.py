"""Which bundled model a build opens by default: ``nexttoken-defaults.json`` at the bundle's top.

Written at build time (the spec's ``--default-model NAME``; ``packaging/build.py --classroom DIR``
passes the GPT-2 folder's name) and read by the frozen entry point, which then starts the app with
``--model NAME`` unless the command line names a model or a session itself. Builds without the
option carry no file and open what the app opens from source (the last model used, else the demo).
Plain Python, no Qt or torch: the entry point imports it before anything heavy.
"""

from __future__ import annotations

import json
from pathlib import Path

DEFAULTS_FILE = "nexttoken-defaults.json"
CHOICE_OPTIONS = ("--model", "--open", "--smoke-test")  # the command line chooses: keep it


def defaults_datas(workpath: Path, model_names: list[str], default_model: str | None) -> list[tuple[str, str]]:
    """The spec's ``datas`` entry for the defaults file, or [] when no default model is set.

    ``model_names`` are the bundled models' names (the demo's included); the default must be one.
    """
    if default_model is None:
        return []
    if default_model not in model_names:
        raise ValueError(f"--default-model {default_model}: the bundle holds no such model ({', '.join(model_names)}).")
    target = Path(workpath) / DEFAULTS_FILE
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps({"default_model": default_model}), encoding="utf-8")
    return [(str(target), ".")]


def with_default_model(argv: list[str], bundle_dir: Path) -> list[str]:
    """``argv`` with ``--model NAME`` added when the bundle names a default and ``argv`` chooses none."""
    try:
        name = json.loads((Path(bundle_dir) / DEFAULTS_FILE).read_text(encoding="utf-8"))["default_model"]
    except (OSError, ValueError, KeyError):
        return argv
    if any(a == opt or a.startswith(opt + "=") for a in argv[1:] for opt in CHOICE_OPTIONS):
        return argv
    return [argv[0], "--model", name, *argv[1:]]
