"""A zip named .npz that numpy reads but nexttoken never wrote: its ``meta`` (or another member) is
raw bytes, a bytes array, an object array or the wrong shape. Each is refused with one line naming the
file, when opened in the window (ExportError, the status line) and by ``--open`` (status 2)."""

from __future__ import annotations

import zipfile

import numpy as np
import pytest

from engine.errors import ExportError
from engine.session_read import read_meta, read_session

META = b'{"format": "nexttoken-session/4", "model": {"name": "x", "source": "x"}}'


def _npy(a: np.ndarray) -> bytes:
    import io

    buf = io.BytesIO()
    np.lib.format.write_array(buf, a, allow_pickle=True)
    return buf.getvalue()


FOREIGN = {
    "meta is raw bytes": {"meta": META},  # a member without .npy: numpy hands back bytes
    "meta is a bytes array": {"meta.npy": _npy(np.array(META))},
    "meta is an object array": {"meta.npy": _npy(np.array([{"format": "nexttoken-session/4"}], dtype=object))},
    "meta is a 1-D string array": {"meta.npy": _npy(np.array([META.decode()]))},
    "another member is raw bytes": {"meta.npy": _npy(np.array(META.decode())), "prompt_ids": b"\x00" * 8},
}


def _foreign(tmp_path, members: dict[str, bytes]):
    path = tmp_path / "foreign.npz"
    with zipfile.ZipFile(path, "w") as z:
        for name, data in members.items():
            z.writestr(name, data)
    return path


@pytest.mark.parametrize("case", list(FOREIGN))
def test_a_foreign_npz_is_refused_with_one_line(tmp_path, case):
    path = _foreign(tmp_path, FOREIGN[case])
    for read in (read_session, read_meta):
        if read is read_meta and case.startswith("another"):
            continue  # read_meta looks at 'meta' alone
        with pytest.raises(ExportError) as info:
            read(path)
        assert "\n" not in str(info.value) and "foreign.npz" in str(info.value)
