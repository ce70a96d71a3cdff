"""Install the CPU build of PyTorch into the running Python, the way scripts/setup.sh and CI do.

    python scripts/torch_install.py            # install torch (the CPU build), saying which command
    python scripts/torch_install.py --print    # only print the pip command
    python scripts/torch_install.py --check    # exit 1, saying why, if the installed torch has CUDA

The rule (one function, ``pip_install_args``, so a test can check it for every system):
- Linux: the default wheel on the Python package index is the CUDA build (several GB of NVIDIA
  libraries), so install the CPU build explicitly: a local ``torch-<version>+cpu`` wheel where pip
  already finds one (its find-links: this machine and CI, offline), otherwise PyTorch's CPU index.
- Windows and macOS: the default wheels are CPU builds; plain ``torch==<version>``.

Standard library only: it runs before anything else is installed.
"""

from __future__ import annotations

import argparse
import shlex
import subprocess
import sys
from pathlib import Path
from urllib.parse import unquote, urlparse

TORCH_VERSION = "2.13.0"
CPU_INDEX = "https://download.pytorch.org/whl/cpu"


def pip_install_args(platform: str, machine: str, python_tag: str, find_links: list[str],
                     version: str = TORCH_VERSION) -> list[str]:
    """The arguments after ``python -m pip install`` that install torch ``version``'s CPU build.

    ``platform`` is a ``sys.platform`` value, ``machine`` a ``platform.machine()`` value, ``python_tag``
    like ``cp311``, ``find_links`` pip's find-links entries (folders, ``file:`` URLs or files).
    """
    if not platform.startswith("linux"):
        return [f"torch=={version}"]  # Windows, macOS: the default wheels have no CUDA
    wheel = local_cpu_wheel(find_links, machine, python_tag, version)
    if wheel is not None:
        return [str(wheel)]
    return [f"torch=={version}", "--index-url", CPU_INDEX]


def local_cpu_wheel(find_links: list[str], machine: str, python_tag: str, version: str = TORCH_VERSION) -> Path | None:
    """The first ``torch-<version>+cpu`` Linux wheel for this Python and machine among ``find_links``."""
    for entry in find_links:
        path = _local_path(entry)
        if path is None:
            continue
        candidates = sorted(path.glob("*.whl")) if path.is_dir() else [path]
        for wheel in candidates:
            if _fits(wheel.name, machine, python_tag, version) and wheel.is_file():
                return wheel
    return None


def _local_path(entry: str) -> Path | None:
    if entry.startswith("file:"):
        return Path(unquote(urlparse(entry).path))
    if "://" in entry:
        return None  # http(s): not a local wheel
    return Path(entry).expanduser()


def _fits(name: str, machine: str, python_tag: str, version: str) -> bool:
    # torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl: name-version-python-abi-platform.whl
    parts = name[: -len(".whl")].split("-") if name.endswith(".whl") else []
    if len(parts) != 5:
        return False
    dist, wheel_version, python, _abi, plat = parts
    return (dist == "torch" and wheel_version == f"{version}+cpu" and python_tag in python.split(".")
            and "linux" in plat and plat.endswith(machine))


def pip_find_links(config_text: str | None = None) -> list[str]:
    """pip's find-links entries, from ``pip config list`` output (environment and config files)."""
    if config_text is None:
        config_text = subprocess.run([sys.executable, "-m", "pip", "config", "list"],
                                     capture_output=True, text=True).stdout
    links = []
    for line in config_text.splitlines():
        key, _, value = line.partition("=")
        if key.strip().endswith(".find-links"):
            links += [v for v in shlex.split(value.strip().strip("'\"").replace("\\n", " ")) if v not in links]
    return links


def cuda_problem() -> str | None:
    """None when the installed torch is a CPU build; else a sentence saying what happened."""
    import torch

    if torch.version.cuda is None:
        return None
    return (f"torch {torch.__version__} is a CUDA build (CUDA {torch.version.cuda}): pip took the default Linux "
            "wheel and its NVIDIA libraries, several GB nexttoken does not use. Fix: "
            f"{Path(sys.executable).name} -m pip uninstall -y torch, then "
            f"{Path(sys.executable).name} scripts/torch_install.py (it installs torch=={TORCH_VERSION} "
            f"--index-url {CPU_INDEX}).")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="scripts/torch_install.py", description=__doc__.split("\n")[0])
    p.add_argument("--print", action="store_true", help="print the pip command, install nothing")
    p.add_argument("--check", action="store_true", help="check that the installed torch has no CUDA")
    args = p.parse_args(argv)
    if args.check:
        problem = cuda_problem()
        if problem:
            print(f"error: {problem}", file=sys.stderr)
            return 1
        import torch

        print(f"torch {torch.__version__}: CPU build (torch.version.cuda is None)")
        return 0
    import platform

    tag = f"cp{sys.version_info.major}{sys.version_info.minor}"
    command = [sys.executable, "-m", "pip", "install", "-q",
               *pip_install_args(sys.platform, platform.machine(), tag, pip_find_links())]
    print("installing torch: python", " ".join(command[1:]), flush=True)
    if args.print:
        return 0
    return subprocess.run(command).returncode


if __name__ == "__main__":
    sys.exit(main())
