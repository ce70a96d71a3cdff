"""Make an AppImage from the one-folder build: one file that runs on any Linux with a new enough glibc.

    python packaging/build.py --appimage    # needs appimagetool on PATH (or $APPIMAGETOOL)

The AppDir is the folder at ``usr/lib/nexttoken/`` with an ``AppRun`` that starts it, the menu entry
and the icon at the top, as the AppImage specification asks. appimagetool packs it with the static
type-2 runtime, which needs no libfuse2; where FUSE is missing altogether the file still runs with
``--appimage-extract-and-run``. The system libraries the folder needs (OpenGL, libxcb, fontconfig:
the .deb's Depends) are expected on the system, as for every AppImage.

Neither Debian nor PyPI ships appimagetool or the runtime reachable from the build machine that
wrote this, so the AppImage is made in the GitHub workflow only (packaging/README.md).
"""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
from pathlib import Path

from deb import link_or_copy

ROOT = Path(__file__).resolve().parent.parent
NAME = "nexttoken"
APP_RUN = """\
#!/bin/sh
# AppImage entry: start the one-folder nexttoken inside this image.
here=$(dirname "$(readlink -f "$0")")
exec "$here/usr/lib/nexttoken/nexttoken" "$@"
"""


def make_appdir(app_dir: Path, appdir: Path, icon_png: Path) -> Path:
    """Lay out ``appdir`` from the one-folder build ``app_dir`` (hard links where possible); return it."""
    shutil.rmtree(appdir, ignore_errors=True)
    shutil.copytree(app_dir, appdir / "usr" / "lib" / NAME, symlinks=True, copy_function=link_or_copy)
    (appdir / "AppRun").write_text(APP_RUN, encoding="utf-8")
    (appdir / "AppRun").chmod(0o755)
    shutil.copy(ROOT / "packaging" / "linux" / f"{NAME}.desktop", appdir / f"{NAME}.desktop")
    shutil.copy(icon_png, appdir / f"{NAME}.png")
    (appdir / ".DirIcon").symlink_to(f"{NAME}.png")
    return appdir


def appimagetool() -> str:
    """The appimagetool command ($APPIMAGETOOL, else on PATH); RuntimeError saying where to get it."""
    found = os.environ.get("APPIMAGETOOL") or shutil.which("appimagetool")
    if not found:
        raise RuntimeError("--appimage needs appimagetool (https://github.com/AppImage/appimagetool/releases): "
                           "put it on PATH or name it in $APPIMAGETOOL")
    return found


def make_appimage(app_dir: Path, dist: Path, version: str, stem: str = NAME) -> Path:
    """dist/<stem>-<version>-<arch>.AppImage from the one-folder build ``app_dir``."""
    tool = appimagetool()
    appdir = make_appdir(app_dir, dist / "AppDir", ROOT / "resources" / "icons" / f"{NAME}.png")
    target = dist / f"{stem}-{version}-{platform.machine()}.AppImage"
    env = {**os.environ, "ARCH": platform.machine(), "APPIMAGE_EXTRACT_AND_RUN": "1"}  # the tool is an AppImage too
    subprocess.run([tool, "--no-appstream", str(appdir), str(target)], check=True, env=env)
    shutil.rmtree(appdir)
    return target
