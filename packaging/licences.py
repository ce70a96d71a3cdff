"""The ``licenses/`` folder every bundle carries: what is inside nexttoken, under which licence, with the texts.

    licenses/README.txt              one line per component: its name, version and licence
    licenses/nexttoken/LICENSE       MIT
    licenses/Qt/LGPL-3, GPL-3        Qt 6 (PySide6-Essentials' wheel carries no licence text)
    licenses/Python/LICENSE.txt      the interpreter and standard library
    licenses/<distribution>/...      each bundled Python package's licence files from its .dist-info,
                                     at their paths there (torch/third_party/cutlass/LICENSE.txt, ...),
                                     or, for a wheel that carries none, the texts WHEEL_TEXTS names
                                     (tokenizers, PySide6_Essentials, shiboken6) with a LICENCE-NOTE.txt
    licenses/models/<name>/...       each bundled model's licence (MODEL_LICENCES below) and its own files

The spec adds the folder as data (``_internal/licenses/`` in the one-folder app, inside
``Contents/Resources`` on macOS); ``deb.py`` writes it to ``/usr/share/doc/nexttoken/licenses/``.
README.txt gives each distribution's whole licence expression (its metadata's License-Expression,
else its one-line License field, else its licence classifiers). A bundled model folder whose licence
is not known here and that has no LICENSE file stops the build, and so does a bundled distribution
with no licence text of its own that WHEEL_TEXTS does not cover.
"""

from __future__ import annotations

import platform
import re
import shutil
import sys
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TEXTS = ROOT / "packaging" / "licenses"
QT_LICENCE = "LGPL-3.0-only (Qt 6 libraries and plugins, as shipped in PySide6-Essentials)"
LICENCE_FILE = re.compile(r"(licen[cs]e|copying|notice|authors)", re.IGNORECASE)
# Bundled models: folder name -> (licence, note). A folder not listed needs a LICENSE file of its own.
MODEL_LICENCES = {
    "gpt2-tiny-demo": ("MIT (as nexttoken)",
                       "Trained for nexttoken from the Debian-packaged texts listed in MODEL_CARD.md."),
    "gpt2": ("MIT", "GPT-2 small (124M) by OpenAI, openai-community/gpt2 on the Hugging Face hub, released "
                    "under the MIT licence (https://github.com/openai/gpt-2/blob/master/LICENSE); "
                    "stored here as float16."),
    # SmolLM2, the first model of another family, comes from a PyPI wheel; its folder name goes here.
    "SmolLM2-135M-Instruct": ("Apache-2.0", "SmolLM2-135M-Instruct by Hugging Face (HuggingFaceTB)."),
}
MODEL_OWN_FILES = ("LICENSE", "LICENSE.txt", "LICENSE.md", "MODEL_CARD.md", "README.md")
# Wheels whose .dist-info carries no licence text: the texts (in packaging/licenses/) that their
# metadata's licence names, and why.
WHEEL_TEXTS = {
    "tokenizers": (("Apache-2.0",), "The tokenizers wheel carries no licence file; its metadata says Apache "
                                    "Software License. Apache-2.0 is the text from Debian's common-licenses."),
    "PySide6_Essentials": (("LGPL-3", "GPL-3"), "Used under LGPL-3.0-only, one of the licences its metadata offers "
                                                 "(LGPL-3.0-only OR GPL-2.0-only OR GPL-3.0-only); the wheel carries no text."),
    "shiboken6": (("LGPL-3", "GPL-3"), "Used under LGPL-3.0-only, one of the licences its metadata offers "
                                        "(LGPL-3.0-only OR GPL-2.0-only OR GPL-3.0-only); the wheel carries no text."),
}


def model_licence(folder: Path, name: str) -> tuple[str, str]:
    """(licence, note) of a bundled model folder; ValueError when neither the table nor the folder says."""
    if name in MODEL_LICENCES:
        return MODEL_LICENCES[name]
    if any((Path(folder) / f).is_file() for f in MODEL_OWN_FILES[:3]):
        return "see its LICENSE file", ""
    raise ValueError(f"The model folder {folder} ('{name}') has no LICENSE file and packaging/licences.py's "
                     "MODEL_LICENCES does not know it: add one of them before bundling it.")


def write_licences(target: Path, models: dict[str, Path]) -> list[tuple[str, str, list[Path]]]:
    """Fill ``target`` (emptied first) as the module docstring says; return (component, licence, files) rows.

    ``models`` maps each bundled model's name to its folder (the demo model included).
    """
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True)
    (target / "nexttoken").mkdir()
    shutil.copyfile(ROOT / "LICENSE", target / "nexttoken" / "LICENSE")  # MIT, with its copyright line
    rows = [("nexttoken", "MIT", [target / "nexttoken" / "LICENSE"])]
    rows.append(("Qt 6", QT_LICENCE, copy_files([TEXTS / "LGPL-3", TEXTS / "GPL-3"], target / "Qt")))
    rows.append((f"Python {platform.python_version()}", "PSF-2.0 (the interpreter and standard library)",
                 copy_files(python_licence(), target / "Python")))
    for dist in runtime_distributions():
        name = dist.metadata["Name"]
        rows.append((f"{name} {dist.version}", licence_of(dist), write_distribution(dist, target / name)))
    for name, folder in models.items():
        licence, note = model_licence(folder, name)
        folder_out = target / "models" / name
        copied = copy_files([Path(folder) / f for f in MODEL_OWN_FILES], folder_out)
        folder_out.mkdir(parents=True, exist_ok=True)
        (folder_out / "LICENCE-NOTE.txt").write_text(f"{name}: {licence}\n{note}\n".rstrip() + "\n", encoding="utf-8")
        rows.append((f"model {name}", licence, [folder_out / "LICENCE-NOTE.txt", *copied]))
    lines = ["Components bundled in nexttoken and their licences; the texts are in the folders beside this file.", ""]
    lines += [f"{component}: {licence}" for component, licence, _ in rows]
    (target / "README.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return rows


def licence_datas(stage: Path, model_dirs: list[Path]) -> list[tuple[str, str]]:
    """The spec's ``datas`` entry: ``stage`` filled by write_licences, bundled as ``licenses/``."""
    from bundle_models import check_model_dirs
    from engine.paths import DEMO_MODEL_NAME, demo_model_dir

    write_licences(stage, {DEMO_MODEL_NAME: demo_model_dir(), **check_model_dirs(model_dirs)})
    return [(str(stage), "licenses")]


def python_licence() -> list[Path]:
    """The interpreter's LICENSE.txt (lib/pythonX.Y/ on Linux and macOS, the install folder on Windows)."""
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    candidates = [Path(sys.base_prefix, "lib", f"python{version}", "LICENSE.txt"), Path(sys.base_prefix, "LICENSE.txt"),
                  Path(sys.base_prefix, "LICENSE")]
    return [next((p for p in candidates if p.is_file()), candidates[0])]


def runtime_distributions() -> list[metadata.Distribution]:
    """nexttoken's run-time dependencies and theirs (no extras): the Python packages in the bundle."""
    from packaging.requirements import Requirement

    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    block = text[text.index("dependencies = ["):]
    todo = re.findall(r'^\s*"([^"]+)",', block[: block.index("]\n")], re.MULTILINE)
    seen: dict[str, metadata.Distribution] = {}
    while todo:
        req = Requirement(todo.pop())
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue
        key = re.sub(r"[-_.]+", "-", req.name).lower()
        if key in seen:
            continue
        try:
            seen[key] = dist = metadata.distribution(req.name)
        except metadata.PackageNotFoundError:
            continue  # an optional platform dependency not installed here: not bundled either
        todo += dist.requires or []
    return sorted(seen.values(), key=lambda d: d.metadata["Name"].lower())


def licence_files(dist: metadata.Distribution) -> list[tuple[Path, str]]:
    """(file, path inside the .dist-info folder) of each licence file the distribution carries."""
    found = []
    for f in dist.files or ():
        parts = f.as_posix().split("/")
        if len(parts) > 1 and parts[0].endswith(".dist-info") and LICENCE_FILE.search(f.name):
            found.append((Path(dist.locate_file(f)), "/".join(parts[1:])))
    return found


def write_distribution(dist: metadata.Distribution, folder: Path) -> list[Path]:
    """Copy a distribution's licence files into ``folder`` at their paths inside its .dist-info
    (without a leading licenses/), so no two collide; a wheel without any gets WHEEL_TEXTS' texts."""
    copied = []
    for source, inner in licence_files(dist):
        if not source.is_file():
            continue
        short = inner.removeprefix("licenses/")
        target = folder / short
        if target.exists() and target.read_bytes() != source.read_bytes():
            target = folder / inner  # two different texts of one name: keep both
        if target.exists():
            continue  # the same text twice
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target)
        copied.append(target)
    if copied:
        return copied
    name = dist.metadata["Name"]
    if name not in WHEEL_TEXTS:
        raise ValueError(f"{name} {dist.version} is bundled but carries no licence file and packaging/licences.py's "
                         "WHEEL_TEXTS does not name its texts: add them before building.")
    texts, note = WHEEL_TEXTS[name]
    copied = copy_files([TEXTS / t for t in texts], folder)
    (folder / "LICENCE-NOTE.txt").write_text(f"{name} {dist.version}: {licence_of(dist)}\n{note}\n", encoding="utf-8")
    return [folder / "LICENCE-NOTE.txt", *copied]


def licence_of(dist: metadata.Distribution) -> str:
    """The distribution's whole licence expression: License-Expression, else a one-line License
    field, else its licence classifiers joined by OR. Never shortened."""
    meta = dist.metadata
    text = (meta.get("License-Expression") or meta.get("License") or "").strip()
    if not text or "\n" in text:  # some packages paste the whole licence text into License
        classifiers = [c.split(" :: ")[-1] for c in meta.get_all("Classifier") or [] if c.startswith("License ::")]
        text = " OR ".join(classifiers) or "see the licence files"
    return text


def copy_files(files: list[Path], folder: Path) -> list[Path]:
    """Copy the ``files`` that exist into ``folder`` (a name taken twice gets its folder's name in
    front); return the copies."""
    copied = []
    for f in map(Path, files):
        if f.is_file():
            folder.mkdir(parents=True, exist_ok=True)
            target = folder / f.name
            if target.exists():
                target = folder / f"{f.parent.name}-{f.name}"
            shutil.copyfile(f, target)
            copied.append(target)
    return copied

