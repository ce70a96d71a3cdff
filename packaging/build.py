"""Build the double-click nexttoken folder with PyInstaller and say where it is, how big, how long.

    python packaging/build.py                      # dist/nexttoken/ (+ dist/nexttoken.app on macOS)
    python packaging/build.py --model-dir ~/gpt2   # also bundle a local GPT-2 folder, for offline use
    python packaging/build.py --tarball            # Linux: also dist/nexttoken-<version>-linux-<arch>.tar.gz
    python packaging/build.py --if-changed         # skip the build when nothing it depends on changed

Arguments after ``--`` go to the spec (see packaging/nexttoken.spec). PyInstaller does not
cross-compile: run this on each operating system you ship to.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import platform
import subprocess
import sys
import tarfile
import time
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SPEC = ROOT / "packaging" / "nexttoken.spec"
APP_NAME = "nexttoken"
# What a build depends on: a change to any of these files or versions makes --if-changed rebuild.
SOURCE_DIRS = ("app", "engine", "packaging", "resources")
SOURCE_FILES = ("pyproject.toml",)
PACKAGES = ("torch", "transformers", "tokenizers", "PySide6-Essentials", "pyqtgraph", "numpy", "pyinstaller",
            "pyinstaller-hooks-contrib", "huggingface_hub", "safetensors", "platformdirs")
STAMP_NAME = "nexttoken-build-stamp.json"

sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "packaging"))


def parse_args(argv: list[str] | None = None) -> tuple[argparse.Namespace, list[str]]:
    argv = list(sys.argv[1:] if argv is None else argv)
    spec_args = argv[argv.index("--") + 1:] if "--" in argv else []
    argv = argv[: argv.index("--")] if "--" in argv else argv
    p = argparse.ArgumentParser(prog="packaging/build.py", description=__doc__.split("\n")[0])
    p.add_argument("--model-dir", action="append", default=[], type=Path, metavar="PATH",
                   help="a local GPT-2 folder to bundle as resources/models/<folder name>/ (repeatable)")
    p.add_argument("--tarball", action="store_true", help="Linux: also pack the folder as a .tar.gz")
    p.add_argument("--if-changed", action="store_true",
                   help="do nothing when the last build used the same sources, packages and options")
    p.add_argument("--dist", type=Path, default=ROOT / "dist", help="output folder (default: dist/)")
    p.add_argument("--work", type=Path, default=ROOT / "build", help="PyInstaller work folder (default: build/)")
    p.add_argument("--verbose", action="store_true", help="show PyInstaller's INFO log")
    return p.parse_args(argv), spec_args


def preflight(model_dirs: list[Path]) -> list[str]:
    """Problems that make the build wrong (CUDA torch, full PySide6, bad model folder); [] if none."""
    problems = []
    import torch

    if torch.version.cuda or getattr(torch.version, "hip", None):
        problems.append(
            f"torch {torch.__version__} is a GPU build: its libraries add gigabytes. Install the CPU build "
            "(pip install torch==<version> --index-url https://download.pytorch.org/whl/cpu) and build again."
        )
    installed = {d.metadata["Name"].lower() for d in metadata.distributions()}
    if "pyside6-addons" in installed:
        problems.append("PySide6-Addons is installed (full PySide6): uninstall it, keep PySide6-Essentials.")
    if model_dirs:
        from bundle_models import check_model_dirs

        try:
            for name, folder in check_model_dirs(model_dirs).items():
                print(f"bundling {folder} as resources/models/{name}/")
        except Exception as exc:  # ModelLoadError or a name clash: one sentence each
            problems.append(str(exc))
    return problems


def fingerprint(model_dirs: list[Path], spec_args: list[str]) -> str:
    """A hash of every input of the build: source files, package versions, options, platform."""
    h = hashlib.sha256()
    files = [ROOT / f for f in SOURCE_FILES]
    for folder in SOURCE_DIRS:
        files += [f for f in (ROOT / folder).rglob("*")
                  if f.is_file() and "__pycache__" not in f.parts and f.suffix != ".md"]
    for folder in model_dirs:
        files += [f for f in Path(folder).expanduser().resolve().rglob("*") if f.is_file()]
    for f in sorted(files):
        h.update(str(f).encode())
        h.update(f.read_bytes())
    for name in PACKAGES:
        try:
            h.update(f"{name}=={metadata.version(name)}".encode())
        except metadata.PackageNotFoundError:
            h.update(f"{name} missing".encode())
    h.update(json.dumps([sys.version, platform.platform(), spec_args]).encode())
    return h.hexdigest()


def stamp_path(work: Path) -> Path:
    return work / STAMP_NAME


def is_current(app_dir: Path, work: Path, digest: str) -> bool:
    """True when ``app_dir`` holds a build made from inputs with this fingerprint."""
    try:
        stamp = json.loads(stamp_path(work).read_text())
    except (OSError, ValueError):
        return False
    return stamp.get("fingerprint") == digest and stamp.get("app_dir") == str(app_dir) and executable(app_dir).is_file()


def executable(app_dir: Path) -> Path:
    return app_dir / (APP_NAME + (".exe" if sys.platform == "win32" else ""))


def run_pyinstaller(args: argparse.Namespace, spec_args: list[str]) -> None:
    command = [
        sys.executable, "-m", "PyInstaller", "--noconfirm",
        "--distpath", str(args.dist), "--workpath", str(args.work),
        "--log-level", "INFO" if args.verbose else "WARN",
        str(SPEC),
    ]
    extra = [a for d in args.model_dir for a in ("--model-dir", str(Path(d).expanduser().resolve()))] + spec_args
    if extra:
        command += ["--", *extra]
    print("running:", " ".join(command), flush=True)
    subprocess.run(command, check=True, cwd=ROOT)


def tree_size(path: Path) -> int:
    if path.is_file() or path.is_symlink():
        return path.lstat().st_size
    return sum(f.lstat().st_size for f in path.rglob("*") if f.is_file() or f.is_symlink())


def space_report(app_dir: Path, top: int = 12) -> list[str]:
    """Lines naming what takes the space: the biggest folders/files two levels into the bundle."""
    internal = app_dir / "_internal" if (app_dir / "_internal").is_dir() else app_dir
    entries = []
    for child in list(internal.iterdir()) + [executable(app_dir)]:
        if child.is_dir() and child.name in ("torch", "PySide6", "transformers", "resources"):
            entries += [(tree_size(c), c) for c in child.iterdir()]  # one level deeper where it matters
        else:
            entries.append((tree_size(child), child))
    entries.sort(key=lambda e: e[0], reverse=True)
    libs = sum(s for s, c in entries if c.parent == internal and c.is_file() and ".so" in c.name)
    lines = [f"  {mb(size):>9}  {c.relative_to(app_dir)}" for size, c in entries[:top]]
    lines.append(f"  {mb(libs):>9}  (system and Python libraries at the top of _internal/ together)")
    return lines


def make_tarball(app_dir: Path, dist: Path) -> Path:
    version = metadata.version("nexttoken") if _installed("nexttoken") else "dev"
    target = dist / f"{APP_NAME}-{version}-linux-{platform.machine()}.tar.gz"
    with tarfile.open(target, "w:gz", compresslevel=6) as tar:
        tar.add(app_dir, arcname=APP_NAME)
    return target


def _installed(name: str) -> bool:
    try:
        metadata.version(name)
    except metadata.PackageNotFoundError:
        return False
    return True


def mb(n: int) -> str:
    return f"{n / 2**20:,.0f} MB"


def main(argv: list[str] | None = None) -> int:
    args, spec_args = parse_args(argv)
    args.dist, args.work = args.dist.resolve(), args.work.resolve()
    app_dir = args.dist / APP_NAME
    digest = fingerprint(args.model_dir, spec_args)
    if args.if_changed and is_current(app_dir, args.work, digest):
        print(f"up to date: {executable(app_dir)} (sources, packages and options unchanged)")
        return 0
    problems = preflight(args.model_dir)
    if problems:
        print("cannot build:\n  " + "\n  ".join(problems), file=sys.stderr)
        return 2
    stamp_path(args.work).unlink(missing_ok=True)
    start = time.perf_counter()
    try:
        run_pyinstaller(args, spec_args)
    except subprocess.CalledProcessError as exc:
        print(f"PyInstaller failed (exit {exc.returncode}); rerun with --verbose for its full log.", file=sys.stderr)
        return 1
    seconds = time.perf_counter() - start
    args.work.mkdir(parents=True, exist_ok=True)
    stamp_path(args.work).write_text(json.dumps({"fingerprint": digest, "app_dir": str(app_dir), "seconds": seconds}))

    print(f"\nbuilt {executable(app_dir)} in {seconds / 60:.1f} min ({seconds:.0f} s)")
    print(f"folder {app_dir}: {mb(tree_size(app_dir))}; what takes the space:")
    print("\n".join(space_report(app_dir)))
    if sys.platform == "darwin" and (args.dist / f"{APP_NAME}.app").is_dir():
        print(f"app bundle: {args.dist / (APP_NAME + '.app')}")
    if args.tarball:
        if not sys.platform.startswith("linux"):
            print("--tarball is for Linux; on Windows zip the folder, on macOS make a .dmg of the .app.")
        else:
            t0 = time.perf_counter()
            target = make_tarball(app_dir, args.dist)
            print(f"tarball {target}: {mb(target.stat().st_size)} in {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
