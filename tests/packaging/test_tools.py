"""tests/packaging/tools.py: a missing Debian tool skips its test in a fresh clone, naming the tool, and
fails it in CI; .ci/run installs every one of them and asks for them."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.packaging import tools

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def no_tools(monkeypatch):
    monkeypatch.setattr(shutil, "which", lambda name: None)
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv(tools.REQUIRE_ENV, raising=False)
    return monkeypatch


def test_a_missing_tool_skips_naming_the_tool_and_its_package(no_tools):
    with pytest.raises(pytest.skip.Exception, match="lintian is missing: apt-get install lintian"):
        tools.tool("lintian")
    with pytest.raises(pytest.skip.Exception, match="desktop-file-validate is missing: apt-get install desktop-file-utils"):
        tools.tool("desktop-file-validate")


@pytest.mark.parametrize("variable, value", [("CI", "true"), (tools.REQUIRE_ENV, "1")])
def test_in_ci_a_missing_tool_fails(no_tools, variable, value):
    no_tools.setenv(variable, value)
    with pytest.raises(pytest.fail.Exception, match="Xvfb is missing"):
        tools.tool("Xvfb")


def test_a_present_tool_is_its_path(monkeypatch):
    monkeypatch.setattr(shutil, "which", lambda name: f"/usr/bin/{name}")
    assert tools.tool("debootstrap") == "/usr/bin/debootstrap"


def test_ci_run_installs_every_tool_and_requires_them():
    text = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    for name, package in tools.TOOLS.items():
        assert f"{name}:{package}" in text, name
    assert f"export {tools.REQUIRE_ENV}=1" in text
    assert text.index(f"export {tools.REQUIRE_ENV}=1") < text.index("./scripts/test.sh --all")
