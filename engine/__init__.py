"""nexttoken's engine: a hooked GPT-2 stepped one token at a time. Imports no Qt."""

from .errors import (
    ExportError,
    GenerationStopped,
    ModelLoadError,
    NextTokenError,
    PromptError,
    SessionError,
    SettingsError,
)
from .loading import LoadedModel, ModelInfo, load_model
from .sampling import Distribution, SamplingSettings
from .session import Session
from .trace import KVStats, StepRecord, StepTrace

__all__ = [
    "Distribution",
    "ExportError",
    "GenerationStopped",
    "KVStats",
    "LoadedModel",
    "ModelInfo",
    "ModelLoadError",
    "NextTokenError",
    "PromptError",
    "SamplingSettings",
    "Session",
    "SessionError",
    "SettingsError",
    "StepRecord",
    "StepTrace",
    "load_model",
]
