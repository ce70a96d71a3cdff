"""One table in code (engine.session_format) drives the session file's writer, its checker and the
docs: docs/SESSION_FILE.md shows exactly the generated tables, and the writer writes no array the
table does not list, each with the table's dtype."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from engine import session_format
from engine.session_format import EXPORT_KEYS, KEYS, key_for, markdown_table

DOC = Path(__file__).resolve().parents[2] / "docs" / "SESSION_FILE.md"


def _generated_blocks(text: str) -> list[str]:
    return [m.strip() for m in re.findall(r"<!-- generated: [^>]*-->\n(.*?)<!-- end generated -->", text, flags=re.S)]


def test_the_doc_shows_the_tables_the_code_generates():
    assert _generated_blocks(DOC.read_text(encoding="utf-8")) == [markdown_table(KEYS), markdown_table(EXPORT_KEYS)]


def test_the_writer_writes_what_the_table_lists(demo_model):
    from engine.session import Session
    from engine.sampling import SamplingSettings
    from engine.session_write import session_arrays

    session = Session(demo_model, SamplingSettings(greedy=True))
    session.set_prompt("The cat sat")
    session.step()
    session.step()
    arrays = session_arrays(session, inside=True)
    assert {k.name for k in KEYS} <= set(arrays)
    for name, a in arrays.items():
        key = key_for(name)
        assert key is not None, name
        assert a.dtype.kind == "U" if key.dtype == "U" else a.dtype == np.dtype(key.dtype), name
        assert a.ndim == len(key.shape), name


def test_a_name_outside_the_table_is_a_bug():
    with pytest.raises(KeyError, match="not in the session file's table"):
        session_format.typed({"logits": np.zeros(3)})
