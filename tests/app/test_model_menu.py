"""The Model menu lists every model a build bundles (resources/models/): the installers' SmolLM2 once,
as bundled, the demo, GPT-2 small when the classroom build carries it, and any other bundled folder."""

from __future__ import annotations

import sys

from app.logic import site_defaults
from engine import paths


def model_menu_texts(window) -> list[str]:
    [menu] = [a.menu() for a in window.menuBar().actions() if a.text() == "&Model"]
    return [a.text() for a in menu.actions() if a.text()]


def test_every_bundled_model_is_in_the_model_menu(make_window, tmp_path, monkeypatch):
    real = paths.resources_dir()
    bundle = tmp_path / "resources"
    bundle.mkdir()
    for name in real.iterdir():
        if name.name != "models":
            (bundle / name.name).symlink_to(name)
    for name in (paths.OFFLINE_MODEL_NAME, "gpt2", "my-checkpoint"):
        (bundle / "models" / name).mkdir(parents=True)
        (bundle / "models" / name / "config.json").write_text("{}")
    (bundle / "models" / paths.DEMO_MODEL_NAME).symlink_to(paths.demo_model_dir())
    monkeypatch.setattr(sys, "_MEIPASS", str(tmp_path), raising=False)  # as in a frozen build
    texts = model_menu_texts(make_window())
    assert texts[:3] == [f"{paths.OFFLINE_MODEL_NAME} (bundled)", "Tiny demo model (bundled)", "GPT-2 small (124M, bundled)"]
    assert texts.count(f"{paths.OFFLINE_MODEL_NAME} (bundled)") == 1 and "my-checkpoint (bundled)" in texts


def test_no_hub_download_is_offered_when_defaults_conf_says_so(make_window, tmp_path, monkeypatch):
    conf = tmp_path / "defaults.conf"
    conf.write_text("[nexttoken]\nhub_downloads = no\n")
    monkeypatch.setattr(site_defaults, "site_files", lambda: [conf])
    assert not [t for t in model_menu_texts(make_window()) if t.startswith("GPT-2 small")]
