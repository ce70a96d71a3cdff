"""defaults.conf (app/logic/site_defaults.py): what a school's IT sets once, read before the user's settings."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

from app.logic import site_defaults
from app.logic.site_defaults import SiteDefaults, read_site_defaults, template


def write(path: Path, body: str) -> Path:
    path.write_text("[nexttoken]\n" + body, encoding="utf-8")
    return path


def test_the_template_sets_nothing_until_a_line_is_uncommented(tmp_path):
    plain = tmp_path / "plain.conf"
    plain.write_text(template())
    assert read_site_defaults([plain]) == SiteDefaults(model=None, projector=False, hub_downloads=True)
    classroom = tmp_path / "classroom.conf"
    classroom.write_text(template("gpt2"))
    assert read_site_defaults([classroom]) == SiteDefaults(model="gpt2")
    edited = tmp_path / "edited.conf"
    edited.write_text(template().replace("# projector = no", "projector = yes").replace("# hub_downloads = yes", "hub_downloads = no"))
    assert read_site_defaults([edited]) == SiteDefaults(projector=True, hub_downloads=False)


def test_a_later_file_wins_key_by_key_and_a_missing_one_changes_nothing(tmp_path):
    bundle = write(tmp_path / "bundle.conf", "model = gpt2\nprojector = yes\n")
    system = write(tmp_path / "system.conf", "model = SmolLM2-135M-Instruct\nhub_downloads = no\n")
    assert read_site_defaults([bundle, tmp_path / "missing.conf", system]) == SiteDefaults(
        model="SmolLM2-135M-Instruct", projector=True, hub_downloads=False)
    emptied = write(tmp_path / "emptied.conf", "model =\n")
    assert read_site_defaults([bundle, emptied]).model is None  # an empty value: back to the app's own choice


def test_what_is_not_understood_is_logged_and_ignored(tmp_path, caplog):
    bad = write(tmp_path / "bad.conf", "projector = sometimes\ncolour = blue\nhub_downloads = off\n")
    broken = tmp_path / "broken.conf"
    broken.write_text("no section here\n")
    with caplog.at_level(logging.WARNING, logger="app"):
        assert read_site_defaults([bad, broken]) == SiteDefaults(hub_downloads=False)
    assert "'sometimes' is not yes or no" in caplog.text and "unknown setting 'colour'" in caplog.text
    assert "broken.conf" in caplog.text


def test_files_read_in_a_frozen_build_bundle_then_beside_the_program_then_etc(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "frozen", True, raising=False)
    monkeypatch.setattr(sys, "_MEIPASS", str(tmp_path / "_internal"), raising=False)
    monkeypatch.setattr(sys, "executable", str(tmp_path / "nexttoken.exe"))
    monkeypatch.setattr(sys, "platform", "linux")
    assert site_defaults.site_files() == [tmp_path / "_internal" / "defaults.conf", tmp_path / "defaults.conf",
                                          Path("/etc/nexttoken/defaults.conf")]
    monkeypatch.setattr(sys, "platform", "win32")
    monkeypatch.setattr(sys, "frozen", False)
    assert site_defaults.site_files() == []  # from source on Windows: nothing to read
