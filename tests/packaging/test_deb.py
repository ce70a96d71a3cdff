"""The .deb (packaging/deb.py, ``packaging/build.py --deb``): metadata, files, menu entry, and the app run unpacked.

Nothing is installed into this machine: the package is unpacked with ``dpkg-deb -x`` into a temporary
root. The slow tests reuse dist/nexttoken/ and the .deb while ``build.py --if-changed`` finds them current
(building both takes about 10 minutes on 2 cores).
"""

from __future__ import annotations

import os
import platform
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DESKTOP_FILE = ROOT / "packaging" / "linux" / "nexttoken.desktop"
BUILD_TIMEOUT_S = 40 * 60
SMOKE_TIMEOUT_S = 3 * 60

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux") or not shutil.which("dpkg-deb"),
                                reason="the .deb is built and checked on Debian and Ubuntu")

sys.path.insert(0, str(ROOT / "packaging"))
import deb  # noqa: E402
from build import project_version  # noqa: E402

from engine.paths import DEMO_MODEL_NAME, demo_model_dir  # noqa: E402
from tests.packaging.tools import tool  # noqa: E402


def desktop_file_validate() -> str:
    return tool("desktop-file-validate")


def test_desktop_entry_is_valid_and_names_the_command_and_icon():
    run = subprocess.run([desktop_file_validate(), str(DESKTOP_FILE)], capture_output=True, text=True)
    assert run.returncode == 0 and not run.stdout.strip(), run.stdout + run.stderr  # no errors, no hints
    entry = dict(line.split("=", 1) for line in DESKTOP_FILE.read_text().splitlines() if "=" in line)
    assert entry["Exec"].split()[0] == "nexttoken" and entry["Icon"] == "nexttoken" and entry["Comment"]


def test_desktop_file_validate_catches_a_broken_entry(tmp_path):
    broken = tmp_path / "nexttoken.desktop"
    broken.write_text(DESKTOP_FILE.read_text().replace("Type=Application\n", ""))
    assert subprocess.run([desktop_file_validate(), str(broken)], capture_output=True).returncode != 0


def test_system_packages_map_sonames_and_stop_on_an_unknown_one(monkeypatch, tmp_path):
    needs = {"libc.so.6": ["nexttoken"], "libxcb-icccm.so.4": ["_internal/PySide6/Qt/lib/libQt6XcbQpa.so.6"],
             "libgtk-3.so.0": ["_internal/PySide6/Qt/plugins/platformthemes/libqgtk3.so"]}
    monkeypatch.setattr(deb, "needed_outside", lambda app_dir: needs)
    assert deb.system_packages(tmp_path) == (["libxcb-icccm4"], ["libgtk-3-0t64 | libgtk-3-0"])
    needs["libfoo.so.1"] = ["_internal/bar.so"]
    with pytest.raises(RuntimeError, match=r"libfoo\.so\.1 \(needed by _internal/bar\.so\)"):
        deb.system_packages(tmp_path)


def test_depends_map_the_libraries_the_issue_found_unmapped_and_name_both_t64_names(monkeypatch, tmp_path):
    assert deb.SYSTEM_PACKAGES["libxcb-glx.so.0"] == "libxcb-glx0" and deb.SYSTEM_PACKAGES["libzstd.so.1"] == "libzstd1"
    needs = {"libglib-2.0.so.0": ["_internal/PySide6/Qt/lib/libQt6Core.so.6"], "libzstd.so.1": ["_internal/x.so"]}
    monkeypatch.setattr(deb, "needed_outside", lambda app_dir: needs)
    assert deb.system_packages(tmp_path) == (["libglib2.0-0t64 | libglib2.0-0", "libzstd1"], [])


def test_an_unmapped_library_is_looked_up_with_dpkg(monkeypatch, tmp_path):
    monkeypatch.setattr(deb, "needed_outside", lambda app_dir: {"libbar.so.2": ["_internal/foo.so"]})
    monkeypatch.setattr(deb, "owning_package", lambda soname: {"libbar.so.2": "libbar2"}.get(soname))
    assert deb.system_packages(tmp_path) == (["libbar2"], [])


@pytest.mark.skipif(not shutil.which("dpkg"), reason="dpkg -S needs dpkg's database")
def test_owning_package_asks_dpkg_and_drops_the_t64_suffix():
    assert deb.owning_package("libc.so.6") == "libc6"
    assert deb.owning_package("libnexttoken-nothing.so.9") is None


def test_control_file_fields():
    text = deb.control("1.2.3", "amd64", 4321, ["libxcb1"], ["libgtk-3-0"])
    fields = dict(re.findall(r"^([A-Za-z-]+): (.*)$", text, re.MULTILINE))
    glibc = platform.libc_ver()[1]
    assert fields["Depends"] == f"libc6 (>= {glibc}), libxcb1, sensible-utils" and fields["Recommends"] == "libgtk-3-0"
    assert (fields["Version"], fields["Architecture"], fields["Installed-Size"]) == ("1.2.3", "amd64", "4321")
    assert text.endswith("\n") and "\n \n" not in text  # a blank line in the long description ends the file


def test_copyright_file_gives_each_component_its_notices_licence_and_texts(tmp_path):
    import licences

    app_dir = tmp_path / "nexttoken"
    licences.write_licences(app_dir / "_internal" / "licenses", {DEMO_MODEL_NAME: demo_model_dir()})
    doc = tmp_path / "doc"
    deb.write_licences(doc, app_dir, "1.2.3")
    text = (doc / "copyright").read_text()
    assert text.startswith("nexttoken 1.2.3: ") and "not Debian's machine-readable format" in text
    assert "Format:" not in text  # it does not claim the machine-readable format
    paragraphs = {p.split("\n", 1)[0]: p for p in text.split("\n\n")[2:] if p.strip()}
    assert "Copyright: Copyright (c) 2026 nexttoken developers" in paragraphs["nexttoken"]
    torch = next(p for name, p in paragraphs.items() if name.startswith("torch "))
    assert "License: Apache-2.0 AND" in torch and torch.count("Copyright") >= 2 and "Texts: licenses/torch/" in torch
    for name, paragraph in paragraphs.items():
        assert "\nLicense: " in paragraph and "\nTexts: licenses/" in paragraph, name
        assert (doc / paragraph.split("\nTexts: ")[1].strip()).is_dir(), name


def test_shebangs_of_files_that_are_not_programs_are_defused_without_touching_the_build(tmp_path):
    dist, stage = tmp_path / "dist", tmp_path / "stage"
    dist.mkdir()
    (dist / "source.py").write_text("#!/usr/bin/python\nprint(1)\n")
    (dist / "tool").write_text("#!/bin/sh\necho\n")
    (dist / "tool").chmod(0o755)
    shutil.copytree(dist, stage, copy_function=deb.link_or_copy)
    assert deb.defuse_shebangs(stage) == [stage / "source.py"]
    assert (stage / "source.py").read_text() == "# /usr/bin/python\nprint(1)\n"
    assert (dist / "source.py").read_text().startswith("#!")  # the hard link was broken first
    assert (stage / "tool").read_text().startswith("#!/bin/sh")


def test_md5sums_list_every_installed_file_but_the_control_files_and_conffiles(tmp_path):
    import hashlib

    for rel, text in (("opt/nexttoken/a", "a"), ("etc/nexttoken/defaults.conf", "c"), ("DEBIAN/control", "x")):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    (tmp_path / "usr" / "bin").mkdir(parents=True)
    (tmp_path / "usr" / "bin" / "nexttoken").symlink_to("/opt/nexttoken/a")
    listed = deb.md5sums(tmp_path, exclude={Path("/etc/nexttoken/defaults.conf")})
    assert listed == f"{hashlib.md5(b'a').hexdigest()}  opt/nexttoken/a\n"


def test_only_programs_stay_executable(tmp_path):
    files = {"prog": (b"\x7fELF\x02", 0o755), "libx.so.6": (b"\x7fELF\x02", 0o755), "run.sh": (b"#!/bin/sh\n", 0o700),
             "LICENSE": (b"text", 0o755), "data.bin": (b"\x00", 0o600)}
    for name, (data, mode) in files.items():
        (tmp_path / name).write_bytes(data)
        (tmp_path / name).chmod(mode)
    modes = {name: deb.file_mode(tmp_path / name) & 0o777 for name in files}
    assert modes == {"prog": 0o755, "libx.so.6": 0o644, "run.sh": 0o744, "LICENSE": 0o644, "data.bin": 0o644}


def test_changelog_is_a_native_debian_changelog_entry(tmp_path, monkeypatch):
    import gzip

    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1796000000")
    deb.write_changelog(tmp_path, "1.2.3")
    text = gzip.decompress((tmp_path / "changelog.gz").read_bytes()).decode()
    first, *_, last = text.strip("\n").splitlines()
    assert first == "nexttoken (1.2.3) unstable; urgency=medium"
    assert re.fullmatch(r" -- .+ <[^>]+>  \w{3}, \d\d \w{3} \d{4} \d\d:\d\d:\d\d \+0000", last), last


# ---- the real package (slow) ----

@pytest.fixture(scope="module")
def deb_file() -> Path:
    """dist/nexttoken_<version>_<arch>.deb, built (with the folder) unless both are current."""
    pytest.importorskip("PyInstaller", reason="install the packaging extra: pip install -e .[packaging]")
    build = subprocess.run([sys.executable, str(ROOT / "packaging" / "build.py"), "--if-changed", "--deb"],
                           cwd=ROOT, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S)
    assert build.returncode == 0, f"build failed:\n{build.stdout[-5000:]}\n{build.stderr[-5000:]}"
    print(build.stdout[-2000:])
    return deb.deb_path(ROOT / "dist", project_version())


@pytest.fixture(scope="module")
def unpacked(deb_file, tmp_path_factory):
    """The package unpacked into a temporary root (about 870 MB; removed after the module)."""
    root = tmp_path_factory.mktemp("deb-root")
    subprocess.run(["dpkg-deb", "-x", str(deb_file), str(root)], check=True)
    yield root
    shutil.rmtree(root, ignore_errors=True)


def field(deb_file: Path, name: str) -> str:
    return subprocess.run(["dpkg-deb", "-f", str(deb_file), name], capture_output=True, text=True, check=True).stdout.strip()


@pytest.mark.slow  # one test: the .deb's control fields, then lintian on the same file (the slow-test budget)
def test_metadata_and_lintian(deb_file, unpacked):
    assert field(deb_file, "Package") == "nexttoken"
    assert field(deb_file, "Version") == project_version()
    assert field(deb_file, "Architecture") == subprocess.run(["dpkg", "--print-architecture"], capture_output=True,
                                                             text=True).stdout.strip()
    assert re.fullmatch(r".+ <[^@ ]+@[^@ ]+>", field(deb_file, "Maintainer"))
    summary, *long = field(deb_file, "Description").splitlines()
    assert summary and len(long) >= 3
    depends = [d.strip() for d in field(deb_file, "Depends").split(",")]
    assert depends[0] == f"libc6 (>= {platform.libc_ver()[1]})"
    assert {"libxcb1", "libgl1"} <= set(depends)  # left out of every PyInstaller build: must match the system
    assert not [d for d in depends if "python" in d]
    # Installed-Size (KiB) is what the files take.
    size_kib = sum(f.lstat().st_size for f in unpacked.rglob("*") if f.is_file() or f.is_symlink()) / 1024
    assert abs(int(field(deb_file, "Installed-Size")) - size_kib) < 0.03 * size_kib
    # lintian reports only the tags packaging/linux/lintian-overrides explains (unused overrides too)
    run = subprocess.run([tool("lintian"), "--display-info", "--tag-display-limit", "0", str(deb_file)],
                         capture_output=True, text=True, timeout=30 * 60)
    print(run.stdout)
    tags = [line for line in run.stdout.splitlines() if re.match(r"[EWI]: ", line)]
    assert not tags, "\n".join(tags)
    assert run.returncode == 0, run.stderr  # 1: an error-level tag; 2: lintian itself failed


@pytest.mark.slow
def test_depends_cover_every_library_the_folder_needs_from_the_system(deb_file, unpacked):
    needs = deb.needed_outside(unpacked / "opt" / "nexttoken")
    declared = {alt.split()[0] for key in ("Depends", "Recommends") for d in field(deb_file, key).split(",")
                for alt in d.split("|") if alt.strip()}
    missing = {s: users[0] for s, users in needs.items()
               if s not in deb.LIBC and deb.SYSTEM_PACKAGES.get(s) not in declared}
    assert not missing, f"system libraries the package does not declare: {missing}"
    # The table's package names are right where this machine has the library.
    owners = debian_owners(list(needs))
    table = deb.SYSTEM_PACKAGES
    wrong = {s: (table[s], owner) for s, owner in owners.items() if s in table and owner != table[s]}
    assert not wrong, f"soname: (table, this machine) {wrong}"


def debian_owners(sonames: list[str]) -> dict[str, str]:
    """The Debian package holding each of ``sonames`` that this machine has (one dpkg -S for all)."""
    cache = subprocess.run(["/sbin/ldconfig", "-p"], capture_output=True, text=True).stdout
    real = {}
    for soname in sonames:
        path = re.search(rf"^\s+{re.escape(soname)} \(.*\) => (\S+)$", cache, re.MULTILINE)
        if path:  # the file's own name: it is found under /lib or /usr/lib (merged /usr)
            real[Path(os.path.realpath(path.group(1))).name] = soname
    found = subprocess.run(["dpkg", "-S", *real], capture_output=True, text=True).stdout if real else ""
    owners = {}
    for line in found.splitlines():
        package, _, path = line.partition(": ")
        if Path(path).name in real:
            owners[real[Path(path).name]] = package.split(":")[0]
    return owners


@pytest.mark.slow  # dpkg -S over the whole table: about 7 s
def test_system_package_names_are_those_of_this_machine():
    owners = debian_owners(list(deb.SYSTEM_PACKAGES))
    wrong = {s: (deb.SYSTEM_PACKAGES[s], owner) for s, owner in owners.items() if owner != deb.SYSTEM_PACKAGES[s]}
    assert not wrong, f"soname: (table, this machine) {wrong}"


@pytest.mark.slow
def test_file_list_licences_conffile_and_menu_entry(deb_file, unpacked):
    listing = subprocess.run(["dpkg-deb", "-c", str(deb_file)], capture_output=True, text=True, check=True).stdout
    paths = [line.split(None, 5)[5].removeprefix("./") for line in listing.splitlines()]
    assert {p.split("/")[0] for p in paths if p} == {"etc", "opt", "usr"}  # etc: the defaults.conf conffile
    assert "opt/nexttoken/nexttoken" in paths
    assert "opt/nexttoken/_internal/resources/models/gpt2-tiny-demo/config.json" in paths
    assert "usr/bin/nexttoken -> /opt/nexttoken/nexttoken" in paths and "usr/share/man/man1/nexttoken.1.gz" in paths
    assert "usr/share/applications/nexttoken.desktop" in paths
    for n in (16, 32, 48, 64, 128, 256):
        assert f"usr/share/icons/hicolor/{n}x{n}/apps/nexttoken.png" in paths
    doc = unpacked / "usr" / "share" / "doc" / "nexttoken"
    copyright_text = (doc / "copyright").read_text()
    assert "LGPL-3.0" in copyright_text and "torch" in copyright_text
    for licence in ("Qt/LGPL-3", "Python/LICENSE.txt", "nexttoken/LICENSE"):
        assert (doc / "licenses" / licence).is_file(), licence
    assert list((doc / "licenses" / "torch").iterdir()) and "PySide6_Essentials" in copyright_text
    assert os.access(unpacked / "opt" / "nexttoken" / "nexttoken", os.X_OK)
    # SmolLM2-135M-Instruct inside, with its licence and card; the defaults file a conffile in /etc
    smollm2 = "opt/nexttoken/_internal/resources/models/SmolLM2-135M-Instruct"
    assert {f"{smollm2}/model.safetensors", f"{smollm2}/generation_config.json", f"{smollm2}/tokenizer.json"} <= set(paths)
    assert (doc / "licenses" / "models" / "SmolLM2-135M-Instruct" / "LICENSE").read_text().count("Apache License") >= 1
    assert "dequantized" in (doc / "licenses" / "models" / "SmolLM2-135M-Instruct" / "MODEL_CARD.md").read_text()
    assert "etc/nexttoken/defaults.conf" in paths and "usr/share/doc/nexttoken/changelog.gz" in paths
    conffiles = subprocess.run(["dpkg-deb", "--ctrl-tarfile", str(deb_file)], capture_output=True, check=True).stdout
    assert b"./conffiles" in conffiles
    entry = unpacked / "usr" / "share" / "applications" / "nexttoken.desktop"
    run = subprocess.run([desktop_file_validate(), str(entry)], capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr


def test_every_lintian_override_says_why():
    overrides = (ROOT / "packaging" / "linux" / "lintian-overrides").read_text()
    lines = overrides.splitlines()
    assert any(line.startswith("nexttoken: ") for line in lines)
    for i, line in enumerate(lines):  # every override follows a comment that says why (several may share one)
        if line.startswith("nexttoken: "):
            before = next(x for x in reversed(lines[:i]) if not x.startswith("nexttoken: "))
            assert before.startswith("# "), line


@pytest.mark.slow
def test_unpacked_command_runs_the_smoke_test_and_writes_nothing_beside_itself(unpacked, tmp_path):
    before = sorted(p.relative_to(unpacked) for p in (unpacked / "opt").rglob("*"))
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen", "HF_HUB_OFFLINE": "1", "HOME": str(tmp_path),
           "XDG_STATE_HOME": str(tmp_path / "state"), "XDG_CONFIG_HOME": str(tmp_path / "config"),
           "XDG_CACHE_HOME": str(tmp_path / "cache")}
    env.pop("PYTHONPATH", None)
    run = subprocess.run([str(unpacked / "opt" / "nexttoken" / "nexttoken"), "--smoke-test"], env=env,
                         capture_output=True, text=True, timeout=SMOKE_TIMEOUT_S)
    assert run.returncode == 0, (run.stdout + run.stderr)[-5000:]
    assert '"ok": true' in run.stdout.splitlines()[-1]
    # Removing the package removes all of it: the app leaves nothing in /opt/nexttoken.
    assert sorted(p.relative_to(unpacked) for p in (unpacked / "opt").rglob("*")) == before
