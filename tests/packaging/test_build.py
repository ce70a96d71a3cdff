"""packaging/build.py's own rules: one build at a time per checkout, and --if-changed reusing the tarball."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "packaging"))
import build  # noqa: E402

TRY_LOCK = "import fcntl, sys; fcntl.flock(open(sys.argv[1], 'a'), fcntl.LOCK_EX | fcntl.LOCK_NB)"


@pytest.mark.skipif(sys.platform == "win32", reason="fcntl: the lock is POSIX only")
def test_a_second_build_waits_while_the_first_holds_the_lock(tmp_path):
    lock = tmp_path / "build" / "build.lock"

    def other_build_gets_the_lock() -> bool:
        return subprocess.run([sys.executable, "-c", TRY_LOCK, str(lock)], capture_output=True).returncode == 0

    with build.build_lock(lock):
        assert lock.is_file()
        assert not other_build_gets_the_lock()
    assert other_build_gets_the_lock()


def installer_args(tmp_path: Path, **options) -> argparse.Namespace:
    return argparse.Namespace(tarball=True, deb=False, appimage=False, dmg=False, classroom=None, if_changed=True,
                              dist=tmp_path / "dist", work=tmp_path / "build", **options)


def test_if_changed_makes_the_tarball_only_when_the_folder_is_newer(tmp_path, monkeypatch, capsys):
    made = []

    def make_tarball(app_dir, dist, stem):
        target = build.tarball_path(dist, stem)
        target.write_bytes(b"tar")
        made.append(target)
        return target

    monkeypatch.setattr(build, "make_tarball", make_tarball)
    args = installer_args(tmp_path)
    args.dist.mkdir()
    args.work.mkdir()
    stamp = build.stamp_path(args.work)
    stamp.write_text("{}")
    build.make_installers(args, args.dist / "nexttoken")  # no tarball yet: made
    assert len(made) == 1
    build.make_installers(args, args.dist / "nexttoken")  # newer than the folder's build: kept
    assert len(made) == 1 and "up to date: " in capsys.readouterr().out
    later = time.time() + 5
    os.utime(stamp, (later, later))  # the folder was built again
    build.make_installers(args, args.dist / "nexttoken")
    assert len(made) == 2
    args.if_changed = False  # without --if-changed: always made
    build.make_installers(args, args.dist / "nexttoken")
    assert len(made) == 3


@pytest.mark.skipif(sys.platform == "win32", reason="fcntl: the lock is POSIX only")
def test_main_builds_holding_its_work_folders_lock(tmp_path, monkeypatch):
    held = []

    def locked_main(args, spec_args):
        lock = args.work / build.LOCK_NAME
        held.append(subprocess.run([sys.executable, "-c", TRY_LOCK, str(lock)], capture_output=True).returncode != 0)
        return 0

    monkeypatch.setattr(build, "locked_main", locked_main)
    (tmp_path / "work").mkdir()  # so that the other process could take the lock if main() did not hold it
    assert build.main(["--work", str(tmp_path / "work"), "--dist", str(tmp_path / "dist")]) == 0
    assert held == [True]
