"""The bundle's own ``defaults.conf`` (inside ``_internal/``): which bundled model a build opens by default.

Written at build time from app/logic/site_defaults.py's template, the lowest of the defaults files the app
reads at start: every key commented out in a plain build (a new user's first window then opens the
bundled SmolLM2-135M-Instruct), ``model = gpt2`` in the classroom variant (the spec's
``--default-model NAME``; ``packaging/build.py --classroom DIR`` passes the GPT-2 folder's name). A
user's last model and the command line still win, and /etc/nexttoken/defaults.conf (the .deb) or the
file beside nexttoken.exe (Windows) overrides it for every user of a machine.
"""

from __future__ import annotations

from pathlib import Path

from app.logic.site_defaults import FILE_NAME, template


def defaults_datas(workpath: Path, model_names: list[str], default_model: str | None) -> list[tuple[str, str]]:
    """The spec's ``datas`` entry for the bundle's defaults.conf (at the bundle's top).

    ``model_names`` are the bundled models' names (the demo's included); a default must be one of them.
    """
    if default_model is not None and default_model not in model_names:
        raise ValueError(f"--default-model {default_model}: the bundle holds no such model ({', '.join(model_names)}).")
    target = Path(workpath) / FILE_NAME
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(template(default_model), encoding="utf-8")
    return [(str(target), ".")]
