"""packaging/appimage.py: the AppDir layout (appimagetool itself runs in the workflow only)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "packaging"))
import appimage  # noqa: E402


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="AppImages are for Linux")
def test_appdir_starts_the_folder_with_its_arguments(tmp_path):
    app = tmp_path / "nexttoken"
    (app / "_internal").mkdir(parents=True)
    (app / "nexttoken").write_text('#!/bin/sh\necho "ran with $*"\n')
    (app / "nexttoken").chmod(0o755)
    appdir = appimage.make_appdir(app, tmp_path / "AppDir", ROOT / "resources" / "icons" / "nexttoken.png")
    for name in ("AppRun", "nexttoken.desktop", "nexttoken.png", ".DirIcon", "usr/lib/nexttoken/_internal"):
        assert (appdir / name).exists(), name
    assert os.access(appdir / "AppRun", os.X_OK)
    link = tmp_path / "elsewhere" / "AppRun"
    link.parent.mkdir()
    link.symlink_to(appdir / "AppRun")  # the runtime starts AppRun from its mount point
    run = subprocess.run([str(link), "--smoke-test"], capture_output=True, text=True, timeout=30)
    assert run.stdout.strip() == "ran with --smoke-test", run.stderr


def test_without_appimagetool_the_option_says_where_to_get_it(monkeypatch):
    monkeypatch.delenv("APPIMAGETOOL", raising=False)
    monkeypatch.setenv("PATH", "")
    with pytest.raises(RuntimeError, match="appimagetool"):
        appimage.appimagetool()
