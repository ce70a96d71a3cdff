"""scripts/torch_install.py: which pip command installs torch's CPU build on each system (nothing downloaded)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("torch_install", ROOT / "scripts" / "torch_install.py")
torch_install = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(torch_install)

V = torch_install.TORCH_VERSION
CPU_WHEEL = f"torch-{V}+cpu-cp311-cp311-manylinux_2_28_x86_64.whl"


@pytest.fixture
def wheels(tmp_path) -> Path:
    """A find-links folder with the CPU wheel and decoys that must not be taken."""
    for name in (CPU_WHEEL,
                 f"torch-{V}-cp311-cp311-manylinux_2_28_x86_64.whl",           # the CUDA build
                 f"torch-{V}+cpu-cp312-cp312-manylinux_2_28_x86_64.whl",       # another Python
                 f"torch-{V}+cpu-cp311-cp311-manylinux_2_28_aarch64.whl",      # another machine
                 f"torch-2.12.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl"):   # another version
        (tmp_path / name).write_bytes(b"")
    return tmp_path


def test_linux_with_a_local_cpu_wheel_installs_that_file(wheels):
    args = torch_install.pip_install_args("linux", "x86_64", "cp311", [str(wheels)])
    assert args == [str(wheels / CPU_WHEEL)]


def test_linux_finds_the_wheel_through_a_file_url(wheels):
    args = torch_install.pip_install_args("linux", "x86_64", "cp311", ["https://example.org/w", wheels.as_uri()])
    assert args == [str(wheels / CPU_WHEEL)]


def test_linux_without_a_local_wheel_uses_pytorch_cpu_index(wheels, tmp_path):
    for links in ([], [str(tmp_path / "missing")], ["https://example.org/wheels"]):
        assert torch_install.pip_install_args("linux", "x86_64", "cp311", links) == [
            f"torch=={V}", "--index-url", "https://download.pytorch.org/whl/cpu"]
    # The folder holds wheels, but none for this Python or machine.
    assert torch_install.pip_install_args("linux", "x86_64", "cp310", [str(wheels)])[1:] == [
        "--index-url", "https://download.pytorch.org/whl/cpu"]
    assert torch_install.pip_install_args("linux", "ppc64le", "cp311", [str(wheels)])[1:] == [
        "--index-url", "https://download.pytorch.org/whl/cpu"]


@pytest.mark.parametrize("platform, machine", [("darwin", "arm64"), ("win32", "AMD64")])
def test_macos_and_windows_take_the_default_wheel(wheels, platform, machine):
    assert torch_install.pip_install_args(platform, machine, "cp311", [str(wheels)]) == [f"torch=={V}"]


def test_find_links_are_read_from_pip_config_output():
    text = ("global.find-links='/opt/wheels'\n"
            ":env:.find-links='/opt/wheels file:///srv/more'\n"
            "global.extra-index-url='file:///opt/pypi/simple'\n")
    assert torch_install.pip_find_links(text) == ["/opt/wheels", "file:///srv/more"]
    assert torch_install.pip_find_links("") == []


def test_print_names_the_command_and_installs_nothing():
    run = subprocess.run([sys.executable, str(ROOT / "scripts" / "torch_install.py"), "--print"],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith("installing torch: python -m pip install")
    assert f"torch=={V}" in run.stdout or f"torch-{V}+cpu-" in run.stdout


def test_check_says_what_happened_when_torch_has_cuda(monkeypatch, capsys):
    fake = type(sys)("torch")
    fake.__version__, fake.version = f"{V}", type(sys)("torch.version")
    fake.version.cuda = "12.8"
    monkeypatch.setitem(sys.modules, "torch", fake)
    assert torch_install.main(["--check"]) == 1
    err = capsys.readouterr().err
    assert "CUDA build (CUDA 12.8)" in err and "--index-url https://download.pytorch.org/whl/cpu" in err
    fake.version.cuda = None
    assert torch_install.main(["--check"]) == 0
