"""The .deb installed into minimal Debian 12 and 13 roots (packaging/clean_root_test.sh) and run there on xcb:
its SmolLM2 answers " Paris", a new user's first window opens it, /etc/nexttoken/defaults.conf is read,
and purge after remove leaves nothing. Then the tarball of the same build in the same roots, unpacked by
an ordinary user after only the libraries packaging/README.md names: " Paris" without network, the
first window on SmolLM2.

Slow, and only as root with debootstrap and Xvfb (.ci/run installs them) and Debian's archive reachable.
Time on this 2-core machine: the .deb as test_deb.py builds it (reused when current), then per release
a few minutes of debootstrap the first time (the roots are kept in /var/cache/nexttoken-roots, or
$NEXTTOKEN_ROOTS) and about 2 min to install, check, smoke-test and remove. Measured: 5.6 min (337 s)
for both releases with the roots cached, under a load of 10-14; expect 10-12 min without them.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.packaging.tools import missing, tool

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "packaging" / "clean_root_test.sh"
TARBALL_CHECK = ROOT / "packaging" / "linux" / "tarball_check.sh"
RELEASES = ("bookworm", "trixie")  # Debian 12, and 13 with its t64 library renames
TIMEOUT_S = 30 * 60

LINUX_ONLY = pytest.mark.skipif(not sys.platform.startswith("linux") or not shutil.which("dpkg-deb"), reason="Debian/Ubuntu only")


def tarball_libraries() -> list[str]:
    """The Debian packages packaging/linux/tarball_check.sh installs before unpacking the tarball."""
    return re.search(r'^LIBRARIES="([^"]+)"$', TARBALL_CHECK.read_text(), re.MULTILINE).group(1).split()


def test_the_readme_names_the_libraries_the_tarball_check_installs():
    readme = (ROOT / "packaging" / "README.md").read_text(encoding="utf-8")
    assert f"apt-get install {' '.join(tarball_libraries())}`" in readme


@pytest.mark.slow
@LINUX_ONLY
def test_the_deb_and_the_tarball_install_run_on_xcb_and_remove_cleanly_on_debian_12_and_13():
    tool("debootstrap"), tool("Xvfb")
    if os.geteuid() != 0:
        missing("debootstrap, chroot and mount need root")
    pytest.importorskip("PyInstaller", reason="install the packaging extra: pip install -e .[packaging]")
    build = subprocess.run([sys.executable, str(ROOT / "packaging" / "build.py"), "--if-changed", "--deb", "--tarball"],
                           cwd=ROOT, capture_output=True, text=True, timeout=TIMEOUT_S)
    assert build.returncode == 0, build.stdout[-3000:] + build.stderr[-3000:]
    [deb] = (ROOT / "dist").glob("nexttoken_*.deb")
    [tarball] = (ROOT / "dist").glob("nexttoken-*-linux-*.tar.gz")
    run = subprocess.run([str(SCRIPT), str(deb), *RELEASES], capture_output=True, text=True, timeout=TIMEOUT_S)
    output = run.stdout + run.stderr
    print(output)  # quoted in packaging/README.md
    assert run.returncode == 0, output[-6000:]
    for release in RELEASES:
        assert re.search(rf"clean_root_test: {release}: PASS", output), output[-6000:]
    assert output.count("install_check: every library under /opt/nexttoken resolves") == len(RELEASES)
    for line in ("install_check: removed; nothing of it is left but its conffile /etc/nexttoken/defaults.conf",
                 "install_check: purged after remove: /etc/nexttoken is gone",
                 "install_check: a new user's first window opened SmolLM2-135M-Instruct",
                 "install_check: with /etc/nexttoken/defaults.conf naming gpt2-tiny-demo, a new user's first window opened the demo"):
        assert output.count(line) == len(RELEASES), line
    smoke = re.findall(r'nexttoken --smoke-test on xcb in \d+ s: (\{"ok": true.*)', output)
    assert len(smoke) == len(RELEASES) and all('"model": "SmolLM2-135M-Instruct"' in s and '"greedy": "␣Paris"' in s for s in smoke)
    # the tarball, unpacked by an ordinary user after the libraries the README names
    run = subprocess.run([str(SCRIPT), str(tarball), *RELEASES], capture_output=True, text=True, timeout=TIMEOUT_S)
    output = run.stdout + run.stderr
    print(output)  # quoted in packaging/README.md
    assert run.returncode == 0, output[-6000:]
    for release in RELEASES:
        assert re.search(rf"clean_root_test: {release}: PASS", output), output[-6000:]
    for line in ("tarball_check: every library under /home/pupil/nexttoken resolves",
                 "tarball_check: pupil's first window opened SmolLM2-135M-Instruct",
                 "tarball_check: deleted the folder: nothing of the app is left outside pupil's home"):
        assert output.count(line) == len(RELEASES), line
    smoke = re.findall(r'pupil, no network: nexttoken --smoke-test on xcb in \d+ s: (\{"ok": true.*)', output)
    assert len(smoke) == len(RELEASES) and all('"model": "SmolLM2-135M-Instruct"' in s and '"greedy": "␣Paris"' in s for s in smoke)
