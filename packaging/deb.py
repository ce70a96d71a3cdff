"""Make a Debian package from the one-folder build: what a Debian or Ubuntu machine double-clicks.

    python packaging/build.py --deb      # builds dist/nexttoken/ if needed, then dist/nexttoken_<version>_<arch>.deb

What the package installs (``dpkg -r nexttoken`` removes all of it; the app writes nothing beside itself):

    /opt/nexttoken/                                   the PyInstaller folder (nexttoken + _internal/)
    /usr/bin/nexttoken                                a link to /opt/nexttoken/nexttoken
    /usr/share/man/man1/nexttoken.1.gz                its manual page (nexttoken --help)
    /usr/share/applications/nexttoken.desktop         the menu entry (packaging/linux/nexttoken.desktop)
    /usr/share/icons/hicolor/<n>x<n>/apps/nexttoken.png
    /usr/share/doc/nexttoken/copyright                what is bundled, its copyright notices and licence
    /usr/share/doc/nexttoken/changelog.gz             the (native) package's changelog
    /usr/share/doc/nexttoken/licenses/<component>/    the licence files of what is bundled
    /usr/share/lintian/overrides/nexttoken            lintian tags a bundled app in /opt carries, each explained
    /etc/nexttoken/defaults.conf                      a conffile: the defaults a school's IT sets once
                                                      (app/logic/site_defaults.py; kept on remove, gone on purge)

No maintainer scripts: Debian's triggers refresh the menu and the icon cache. Needs ``dpkg-deb``
(Debian and Ubuntu have it) and PySide6 (to draw the icon sizes with packaging/make_icon.py).
"""

from __future__ import annotations

import gzip
import hashlib
import math
import os
import platform
import re
import shutil
import subprocess
import sys
import time
from datetime import datetime, timezone
from email.utils import format_datetime
from pathlib import Path

from licences import copy_files

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from app.logic.site_defaults import SYSTEM_FILE, template  # noqa: E402  (plain Python)

LINUX = ROOT / "packaging" / "linux"
NAME = "nexttoken"
MAINTAINER = "nexttoken maintainers <maintainers@users.noreply.a-seed-d1ba04bb.example>"
SUMMARY = "watch a GPT-2 language model produce its next token"
DESCRIPTION = """\
nexttoken shows, one token at a time, what a GPT-2 language model does between
a prompt and its next token: the tokens, where each attention head looks, which
candidates the model scores, how temperature, top-k and top-p reshape them, and
how the KV cache grows. It runs offline on a small bundled GPT-2 model and can
load GPT-2 checkpoints from a folder. Python, PyTorch (CPU) and Qt are bundled
under /opt/nexttoken."""
ICON_SIZES = (16, 22, 24, 32, 48, 64, 128, 256)
# The system libraries (ELF sonames) bundled code may need and the Debian/Ubuntu packages that hold
# them. Which of them the package Depends on is found at build time: every NEEDED entry
# (readelf -d) of every ELF file in the folder that the folder does not carry. PyInstaller leaves
# out the C library, OpenGL/EGL, libxcb and Wayland on purpose (they must match the system's), and
# whatever was missing on the build machine (Qt's xcb plugin needs libxcb-icccm and libxcb-keysyms,
# absent here). A library not in this table is looked up with dpkg -S on the build machine; one that
# neither knows stops the build, naming it.
LIBC = ("libc.so.6", "libm.so.6", "libdl.so.2", "libpthread.so.0", "librt.so.1", "libresolv.so.2", "libutil.so.1",
        "ld-linux-x86-64.so.2", "ld-linux-aarch64.so.1")
SYSTEM_PACKAGES = {
    "libGL.so.1": "libgl1", "libEGL.so.1": "libegl1", "libGLX.so.0": "libglx0", "libOpenGL.so.0": "libopengl0",
    "libxcb.so.1": "libxcb1", "libxcb-cursor.so.0": "libxcb-cursor0", "libxcb-icccm.so.4": "libxcb-icccm4",
    "libxcb-image.so.0": "libxcb-image0", "libxcb-keysyms.so.1": "libxcb-keysyms1", "libxcb-randr.so.0": "libxcb-randr0",
    "libxcb-render.so.0": "libxcb-render0", "libxcb-render-util.so.0": "libxcb-render-util0",
    "libxcb-shape.so.0": "libxcb-shape0", "libxcb-shm.so.0": "libxcb-shm0", "libxcb-sync.so.1": "libxcb-sync1",
    "libxcb-util.so.1": "libxcb-util1", "libxcb-xfixes.so.0": "libxcb-xfixes0", "libxcb-xinerama.so.0": "libxcb-xinerama0",
    "libxcb-xinput.so.0": "libxcb-xinput0", "libxcb-xkb.so.1": "libxcb-xkb1", "libX11.so.6": "libx11-6",
    "libX11-xcb.so.1": "libx11-xcb1", "libxkbcommon.so.0": "libxkbcommon0", "libxkbcommon-x11.so.0": "libxkbcommon-x11-0",
    "libfontconfig.so.1": "libfontconfig1", "libfreetype.so.6": "libfreetype6", "libglib-2.0.so.0": "libglib2.0-0",
    "libgthread-2.0.so.0": "libglib2.0-0", "libgobject-2.0.so.0": "libglib2.0-0", "libgio-2.0.so.0": "libglib2.0-0",
    "libdbus-1.so.3": "libdbus-1-3", "libwayland-client.so.0": "libwayland-client0",
    "libwayland-cursor.so.0": "libwayland-cursor0", "libwayland-egl.so.1": "libwayland-egl1",
    "libstdc++.so.6": "libstdc++6", "libgcc_s.so.1": "libgcc-s1", "libz.so.1": "zlib1g",
    "libgtk-3.so.0": "libgtk-3-0", "libgdk-3.so.0": "libgtk-3-0",
    # Not needed from outside on this machine, but possibly on another build machine that lacks them
    # (PyInstaller bundles what it finds): X11, GTK-theme and font libraries under their Debian names.
    "libXext.so.6": "libxext6", "libXrender.so.1": "libxrender1", "libXi.so.6": "libxi6", "libSM.so.6": "libsm6",
    "libICE.so.6": "libice6", "libXau.so.6": "libxau6", "libXdmcp.so.6": "libxdmcp6", "libdrm.so.2": "libdrm2",
    "libpng16.so.16": "libpng16-16", "libharfbuzz.so.0": "libharfbuzz0b", "libexpat.so.1": "libexpat1",
    "libpango-1.0.so.0": "libpango-1.0-0", "libpangocairo-1.0.so.0": "libpangocairo-1.0-0", "libcairo.so.2": "libcairo2",
    "libcairo-gobject.so.2": "libcairo-gobject2", "libgdk_pixbuf-2.0.so.0": "libgdk-pixbuf-2.0-0",
    "libatk-1.0.so.0": "libatk1.0-0", "libgssapi_krb5.so.2": "libgssapi-krb5-2", "libkrb5.so.3": "libkrb5-3",
    "libssl.so.3": "libssl3", "libcrypto.so.3": "libssl3", "libffi.so.8": "libffi8", "libbz2.so.1.0": "libbz2-1.0",
    "liblzma.so.5": "liblzma5", "libsqlite3.so.0": "libsqlite3-0", "libuuid.so.1": "libuuid1",
    "libxcb-glx.so.0": "libxcb-glx0", "libzstd.so.1": "libzstd1",
}
# The bundled libmount and libblkid (util-linux, copied from the build machine) run sensible-pager.
ALWAYS_DEPENDS = ("sensible-utils",)
SHARED_LIBRARY = re.compile(r"\.so(\.[0-9.]+)?$")
# Libraries needed only by optional plugins: Recommends, not Depends (Qt skips a plugin it cannot load).
OPTIONAL_PLUGINS = ("plugins/platformthemes/libqgtk3.so",)  # GTK dialogs and theme on GNOME
# Packages renamed by Debian 13's and Ubuntu 24.04's 64-bit time_t transition ("t64"): Depends names
# both, "libglib2.0-0t64 | libglib2.0-0", so one .deb installs on Debian 12 and 13, Ubuntu 22.04 and 24.04.
T64_RENAMED = ("libglib2.0-0", "libgtk-3-0", "libssl3", "libatk1.0-0", "libatk-bridge2.0-0", "libpng16-16",
               "libcurl4", "libasound2", "libcups2")


def deb_path(dist: Path, version: str, stem: str = NAME) -> Path:
    """Where make_deb puts the package: dist/<stem>_<version>_<arch>.deb (arch as dpkg names it).

    ``stem`` is nexttoken-classroom for the classroom variant: another file name, the same package.
    """
    return dist / f"{stem}_{version}_{architecture()}.deb"


def architecture() -> str:
    return subprocess.run(["dpkg", "--print-architecture"], capture_output=True, text=True, check=True).stdout.strip()


def make_deb(app_dir: Path, dist: Path, version: str, stem: str = NAME) -> Path:
    """Build ``deb_path(dist, version, stem)`` from the one-folder build ``app_dir``; return its path."""
    arch = architecture()
    stage = dist / "deb-root"
    shutil.rmtree(stage, ignore_errors=True)
    # Hard links where the file system allows: the stage then costs no copy of the ~870 MB folder.
    shutil.copytree(app_dir, stage / "opt" / NAME, symlinks=True, copy_function=link_or_copy)
    defuse_shebangs(stage / "opt" / NAME)
    bin_dir = stage / "usr" / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / NAME).symlink_to(Path("/opt", NAME, NAME))  # absolute: it crosses top-level folders (Policy 10.5)
    share = stage / "usr" / "share"
    (share / "applications").mkdir(parents=True)
    shutil.copy(LINUX / f"{NAME}.desktop", share / "applications" / f"{NAME}.desktop")
    (share / "lintian" / "overrides").mkdir(parents=True)  # the tags a bundled app in /opt carries, and why
    shutil.copy(LINUX / "lintian-overrides", share / "lintian" / "overrides" / NAME)
    write_icons(share / "icons" / "hicolor")
    write_manual_page(share / "man" / "man1", version)
    write_licences(share / "doc" / NAME, app_dir, version)
    write_changelog(share / "doc" / NAME, version)
    conffile = stage / SYSTEM_FILE.relative_to("/")
    conffile.parent.mkdir(parents=True)
    conffile.write_text(template(), encoding="utf-8")
    for path in [stage, *stage.rglob("*")]:  # dpkg-deb keeps modes: 755 folders, 644 data, 755 programs
        if path.is_dir() and not path.is_symlink():
            path.chmod(0o755)
        elif path.is_file() and not path.is_symlink():  # readable by every user (a 0600 model file would not be)
            path.chmod(file_mode(path))
    (stage / "DEBIAN").mkdir()
    depends, recommends = system_packages(app_dir)
    (stage / "DEBIAN" / "control").write_text(control(version, arch, installed_size_kib(stage), depends, recommends))
    (stage / "DEBIAN" / "conffiles").write_text(f"{SYSTEM_FILE}\n")
    (stage / "DEBIAN" / "md5sums").write_text(md5sums(stage, exclude={SYSTEM_FILE}))
    target = deb_path(dist, version, stem)
    subprocess.run(["dpkg-deb", "--root-owner-group", "-Zgzip", "-z6", "--build", str(stage), str(target)],
                   check=True, stdout=subprocess.DEVNULL)
    shutil.rmtree(stage)
    return target


def control(version: str, arch: str, installed_kib: int, depends: list[str], recommends: list[str]) -> str:
    """The DEBIAN/control file. The C library must be at least the build machine's."""
    glibc = platform.libc_ver()[1] or os.confstr("CS_GNU_LIBC_VERSION").split()[-1]
    long = "\n".join(" " + (line or ".") for line in DESCRIPTION.splitlines())
    return (f"Package: {NAME}\nVersion: {version}\nSection: education\nPriority: optional\n"
            f"Architecture: {arch}\nInstalled-Size: {installed_kib}\nMaintainer: {MAINTAINER}\n"
            f"Depends: {', '.join([f'libc6 (>= {glibc})', *depends, *ALWAYS_DEPENDS])}\n"
            + (f"Recommends: {', '.join(recommends)}\n" if recommends else "")
            + f"Description: {SUMMARY}\n{long}\n")


def file_mode(path: Path) -> int:
    """A file's mode in the package: readable by all; executable only for programs (ELF executables and
    scripts), not for shared libraries or the data files that wheels ship with an execute bit."""
    mode = path.stat().st_mode | 0o644
    if mode & 0o111:
        with open(path, "rb") as f:
            head = f.read(4)
        if (head != b"\x7fELF" and head[:2] != b"#!") or SHARED_LIBRARY.search(path.name):
            mode &= ~0o111
    return mode


def needed_outside(app_dir: Path) -> dict[str, list[str]]:
    """Sonames that ELF files in ``app_dir`` need and the folder does not carry -> the files needing them."""
    carried = {p.name for p in app_dir.rglob("*")}
    needs: dict[str, list[str]] = {}
    for path in sorted(app_dir.rglob("*")):
        if path.is_symlink() or not path.is_file():
            continue
        with open(path, "rb") as f:
            if f.read(4) != b"\x7fELF":
                continue
        dynamic = subprocess.run(["readelf", "-d", str(path)], capture_output=True, text=True, check=True).stdout
        for soname in re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", dynamic):
            if soname not in carried:
                needs.setdefault(soname, []).append(path.relative_to(app_dir).as_posix())
    return needs


def system_packages(app_dir: Path) -> tuple[list[str], list[str]]:
    """(Depends, Recommends) without libc6: the packages holding the libraries the folder needs.

    A soname not in SYSTEM_PACKAGES is looked up with ``dpkg -S`` (the build machine's package); one
    that neither knows raises RuntimeError naming it. t64-renamed packages get both names as alternatives.
    """
    depends, recommends = set(), set()
    unknown = []
    for soname, users in needed_outside(app_dir).items():
        if soname in LIBC:
            continue
        package = SYSTEM_PACKAGES.get(soname) or owning_package(soname)
        if package is None:
            unknown.append(f"{soname} (needed by {users[0]})")
            continue
        optional = all(any(u.endswith(p) for p in OPTIONAL_PLUGINS) for u in users)
        (recommends if optional else depends).add(package)
    if unknown:
        raise RuntimeError("system libraries that neither packaging/deb.py's SYSTEM_PACKAGES nor dpkg -S on this "
                           "machine knows: " + ", ".join(unknown))
    return [with_t64(p) for p in sorted(depends)], [with_t64(p) for p in sorted(recommends - depends)]


def owning_package(soname: str) -> str | None:
    """The Debian package that holds ``soname`` on this machine (``dpkg -S``, t64 suffix dropped), or None."""
    found = subprocess.run(["dpkg", "-S", f"*/{soname}"], capture_output=True, text=True).stdout
    for line in found.splitlines():
        owners, _, path = line.partition(": ")
        if Path(path).name == soname:
            return re.sub(r"t64$", "", owners.split(", ")[0].split(":")[0])
    return None


def with_t64(package: str) -> str:
    """``libfoo1t64 | libfoo1`` for a package that Debian 13 and Ubuntu 24.04 renamed, else ``package``."""
    return f"{package}t64 | {package}" if package in T64_RENAMED else package


def md5sums(stage: Path, exclude: set[Path]) -> str:
    """DEBIAN/md5sums: "<md5>  <path>" for every file dpkg installs (not the conffiles, which dpkg tracks itself)."""
    lines = []
    for path in sorted(stage.rglob("*")):
        rel = path.relative_to(stage)
        if path.is_symlink() or not path.is_file() or rel.parts[0] == "DEBIAN" or Path("/", rel) in exclude:
            continue
        digest = hashlib.md5(usedforsecurity=False)
        with open(path, "rb") as f:
            while chunk := f.read(1 << 20):
                digest.update(chunk)
        lines.append(f"{digest.hexdigest()}  {rel.as_posix()}\n")
    return "".join(lines)


def installed_size_kib(stage: Path) -> int:
    """Installed-Size as dpkg-gencontrol counts it: each file rounded up to KiB, 1 per folder or link."""
    total = 0
    for path in stage.rglob("*"):
        if path.is_symlink() or path.is_dir():
            total += 1
        else:
            total += math.ceil(path.stat().st_size / 1024)
    return total


def write_icons(hicolor: Path) -> None:
    """The icon drawn at each size (packaging/make_icon.py draws it; no scaled-down blur)."""
    sys.path.insert(0, str(ROOT / "packaging"))
    from make_icon import draw, png_bytes
    from PySide6.QtGui import QGuiApplication

    app = QGuiApplication.instance() or QGuiApplication([NAME])  # noqa: F841 (fonts need it)
    for n in ICON_SIZES:
        folder = hicolor / f"{n}x{n}" / "apps"
        folder.mkdir(parents=True)
        (folder / f"{NAME}.png").write_bytes(png_bytes(draw(n)))


COPYRIGHT_LINE = re.compile(r"^\s*(?:copyright\b|\(c\)|©).{0,20}?\b(?:19|20)\d\d\b.*$", re.IGNORECASE | re.MULTILINE)
NOTICES_SHOWN = 4  # copyright lines quoted per component; the texts beside it have every one
COPYRIGHT_HEAD = """\
{name} {version}: what this package bundles, who holds the copyright and under which licence.

This is a plain-text copyright file, not Debian's machine-readable format: most of the bundled
Python packages live inside one file (the archive at the end of /opt/nexttoken/nexttoken), so
no file pattern could tell their files apart. nexttoken bundles Python, PyTorch (CPU), Qt
(through PySide6) and the Python packages below in /opt/nexttoken/_internal/. The Qt libraries
are separate shared objects there (libQt6*.so), which a user may replace with compatible builds
of their own (LGPL-3.0). Each component's licence texts are in
/usr/share/doc/nexttoken/licenses/<the folder named below>/; on Debian systems the
GNU licences and Apache-2.0 are also in /usr/share/common-licenses/ (LGPL-3, GPL-3,
Apache-2.0).
"""


def write_licences(doc: Path, app_dir: Path, version: str) -> None:
    """/usr/share/doc/nexttoken/: copyright (a paragraph per component: its copyright lines, licence and
    texts) and licenses/ (the bundle's, plus the copyright files of the system libraries it carries)."""
    licences = doc / "licenses"
    shutil.copytree(app_dir / "_internal" / "licenses", licences)  # packaging/licences.py wrote it at build time
    rows = [line.split(": ", 1) for line in (licences / "README.txt").read_text(encoding="utf-8").splitlines()[2:] if ": " in line]
    paragraphs = [(component, licence, licences / folder_of(component)) for component, licence in rows]
    for package, libraries in system_library_packages(app_dir).items():
        copy_files([Path("/usr/share/doc", package, "copyright")], licences / "system" / package)
        paragraphs.append((f"{', '.join(libraries)} (from the build machine's Debian/Ubuntu package {package})",
                           "see its copyright file", licences / "system" / package))
    lines = [COPYRIGHT_HEAD.format(name=NAME, version=version)]
    for component, licence, folder in paragraphs:
        notices = copyright_notices(folder)
        shown = notices[:NOTICES_SHOWN] + ([f"... and {len(notices) - NOTICES_SHOWN} more in the texts"]
                                           if len(notices) > NOTICES_SHOWN else [])
        lines += [component, "Copyright: " + ("\n           ".join(shown) or "not stated in its licence texts"),
                  f"License: {licence}", f"Texts: licenses/{folder.relative_to(licences).as_posix()}/", ""]
    (doc / "copyright").write_text("\n".join(lines), encoding="utf-8")


def copyright_notices(folder: Path) -> list[str]:
    """The distinct copyright lines ("Copyright (c) 2016 ...") in the texts under ``folder``, in file order."""
    found: dict[str, None] = {}
    for f in sorted(p for p in folder.rglob("*") if p.is_file()):
        for line in COPYRIGHT_LINE.findall(f.read_text(encoding="utf-8", errors="replace")):
            found.setdefault(" ".join(line.split()), None)
    return list(found)


def write_manual_page(folder: Path, version: str) -> None:
    """usr/share/man/man1/nexttoken.1.gz: the summary, then ``nexttoken --help`` as it prints it."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "QT_QPA_PLATFORM": "offscreen", "COLUMNS": "78"}
    usage = subprocess.run([sys.executable, "-m", "app", "--help"], cwd=ROOT, env=env, capture_output=True, text=True,
                           check=True).stdout
    usage = usage.replace("\u2192", "->").replace("\\", "\\e")
    body = "\n".join(("\\&" + line) if line.startswith((".", "'")) else line for line in usage.splitlines())
    long = " ".join(DESCRIPTION.split())
    text = (f'.TH NEXTTOKEN 1 "" "nexttoken {version}" "User Commands"\n.SH NAME\nnexttoken \\- {SUMMARY}\n'
            f".SH DESCRIPTION\n{long}\n.SH OPTIONS\n.nf\n{body}\n.fi\n")
    folder.mkdir(parents=True)
    with open(folder / f"{NAME}.1.gz", "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=9, mtime=0,
                                                                  filename="") as out:
        out.write(text.encode("utf-8"))


def write_changelog(doc: Path, version: str) -> None:
    """usr/share/doc/nexttoken/changelog.gz: a native package's changelog, one entry for this version."""
    when = datetime.fromtimestamp(int(os.environ.get("SOURCE_DATE_EPOCH", time.time())), timezone.utc)
    text = (f"{NAME} ({version}) unstable; urgency=medium\n\n"
            f"  * Built from the nexttoken sources by packaging/deb.py.\n\n"
            f" -- {MAINTAINER}  {format_datetime(when)}\n")
    with open(doc / "changelog.gz", "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=9, mtime=0,
                                                               filename="") as out:
        out.write(text.encode("utf-8"))


def folder_of(component: str) -> str:
    """The licenses/ folder of a README.txt component: "torch 2.13.0" -> torch, "model gpt2" -> models/gpt2."""
    if component.startswith("model "):
        return "models/" + component.removeprefix("model ")
    return {"Qt 6": "Qt"}.get(component, component.split(" ")[0])


def system_library_packages(app_dir: Path) -> dict[str, list[str]]:
    """Debian packages of the build machine that PyInstaller copied libraries from -> those libraries."""
    libraries = sorted(p.name for p in (app_dir / "_internal").glob("*.so*"))
    found = subprocess.run(["dpkg", "-S", *libraries], capture_output=True, text=True).stdout  # exit 1: some unknown
    packages: dict[str, list[str]] = {}
    for line in found.splitlines():
        owners, _, path = line.partition(": ")
        if Path(path).name in libraries:
            for owner in owners.split(", "):
                names = packages.setdefault(owner.split(":")[0], [])
                if Path(path).name not in names:
                    names.append(Path(path).name)
    return dict(sorted(packages.items()))


def defuse_shebangs(folder: Path) -> list[Path]:
    """Turn the "#!" of every non-executable file under ``folder`` into "# " (same length, same lines).

    The Python sources torch and transformers bundle (read for TorchScript, never run as programs)
    keep their upstream "#!/usr/bin/python" lines, which lintian reads as scripts with a wrong
    interpreter. The stage holds hard links to dist/: a changed file is written anew, not in place.
    """
    changed = []
    for path in sorted(folder.rglob("*")):
        if path.is_symlink() or not path.is_file() or path.stat().st_mode & 0o111:
            continue
        with open(path, "rb") as f:
            if f.read(2) != b"#!":
                continue
        data, mode = path.read_bytes(), path.stat().st_mode
        path.unlink()  # break the hard link to dist/
        path.write_bytes(b"# " + data[2:])
        path.chmod(mode)
        changed.append(path)
    return changed


def link_or_copy(src: str, dst: str) -> None:
    """A hard link where the file system allows one (no second copy of 900 MB), else a copy."""
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)

