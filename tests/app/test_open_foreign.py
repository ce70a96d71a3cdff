"""``nexttoken --open`` with a zip named .npz whose ``meta`` is raw bytes: one line, status 2."""

from __future__ import annotations

import zipfile

from app.window.main import main


def test_open_refuses_a_foreign_npz_with_status_2_and_one_line(tmp_path, capsys):
    path = tmp_path / "foreign.npz"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("meta", b'{"format": "nexttoken-session/4"}')  # numpy hands this member back as bytes
    assert main(["--open", str(path)]) == 2  # refused before any window is built
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "foreign.npz" in err[0]
