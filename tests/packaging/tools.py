"""The Debian tools some packaging tests need, and what happens without them.

A fresh clone's ``./scripts/test.sh`` runs where only Python is installed: a test whose tool is
missing is skipped, naming the tool and its Debian package. CI must never skip them: ``.ci/run``
installs every tool in TOOLS and sets NEXTTOKEN_REQUIRE_TOOLS=1, and GitHub Actions sets CI=true;
there a missing tool fails the test instead.
"""

from __future__ import annotations

import os
import shutil

import pytest

# tool -> the Debian package that ships it
TOOLS = {
    "desktop-file-validate": "desktop-file-utils",
    "debootstrap": "debootstrap",
    "Xvfb": "xvfb",
    "lintian": "lintian",
}
REQUIRE_ENV = "NEXTTOKEN_REQUIRE_TOOLS"


def tools_required() -> bool:
    """True in CI (CI=true, as GitHub Actions sets it, or NEXTTOKEN_REQUIRE_TOOLS=1, as .ci/run sets it)."""
    return os.environ.get("CI", "").lower() == "true" or os.environ.get(REQUIRE_ENV) == "1"


def missing(why: str) -> None:
    """Skip the test with ``why`` (fast run), or fail it where the tools are required (CI)."""
    if tools_required():
        pytest.fail(f"{why} ({REQUIRE_ENV}=1 or CI=true: the tools must be there)")
    pytest.skip(why)


def tool(name: str) -> str:
    """The path of the Debian tool ``name`` (a key of TOOLS); skips or fails the test without it."""
    found = shutil.which(name)
    if not found:
        missing(f"{name} is missing: apt-get install {TOOLS[name]} (.ci/run installs it)")
    return found
