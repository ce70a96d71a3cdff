"""README.md is a user's page: short, and every file it links to or shows exists (the details live in docs/)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
MOST_LINES = 160  # what it is, install, run, the views, keys, the command line, models, links


def test_the_readme_stays_a_page():
    assert len(README.splitlines()) <= MOST_LINES, "README.md grew past a page: move the details to docs/ and link them"


def test_every_file_the_readme_links_to_exists():
    targets = [t for t in re.findall(r"\]\(([^)\s]+)\)", README) if "://" not in t]
    assert targets, "no links found: the pattern no longer matches the README's links"
    missing = [t for t in targets if not (ROOT / t.split("#")[0]).exists()]
    assert not missing, f"README.md links to files that do not exist: {missing}"
