"""nexttoken's engine: a hooked GPT-2 stepped one token at a time. Imports no Qt.

Importing the package imports nothing else: the window's process imports the torch-free modules
(``engine.info``, ``engine.trace``, ``engine.sampling``, ``engine.errors``, ``engine.paths``)
without pulling in torch. The names below are still reachable as ``from engine import Session``;
each is imported from its module on first use.
"""

from __future__ import annotations

import importlib

_LAZY = {
    "Distribution": "sampling",
    "SamplingSettings": "sampling",
    "ExportError": "errors",
    "GenerationStopped": "errors",
    "ModelLoadError": "errors",
    "NextTokenError": "errors",
    "PromptError": "errors",
    "SessionError": "errors",
    "SettingsError": "errors",
    "ModelInfo": "info",
    "LoadedModel": "loaded_model",
    "load_model": "loading",
    "Session": "session",
    "KVStats": "trace",
    "StepRecord": "trace",
    "StepTrace": "trace",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'engine' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value
