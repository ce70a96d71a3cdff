"""Which device and dtype the local engine runs on: ``--device`` and ``--dtype`` turned into torch's,
refused in one sentence when PyTorch cannot use them."""

from __future__ import annotations

import torch

from .errors import ModelLoadError

DEFAULT_DTYPES = {"cpu": torch.float32, "cuda": torch.bfloat16, "mps": torch.float16}


def available(kind: str) -> bool:
    """Whether PyTorch sees a device of ``kind`` ("cpu", "cuda", "mps")."""
    if kind == "cuda":
        return torch.cuda.is_available()
    if kind == "mps":
        return bool(getattr(torch.backends, "mps", None)) and torch.backends.mps.is_available()
    return kind == "cpu"


def resolve(device: str, dtype: str = "") -> tuple[torch.device, torch.dtype]:
    """(device, dtype) for ``--device`` ("auto": CUDA, else MPS, else the CPU) and ``--dtype`` ("" for
    the device's default, DEFAULT_DTYPES). ModelLoadError for a device PyTorch does not see."""
    kind = next(k for k in ("cuda", "mps", "cpu") if available(k)) if device == "auto" else device
    if not available(kind):
        if kind == "cuda":
            build = "built without CUDA" if torch.version.cuda is None else f"built for CUDA {torch.version.cuda}, but no GPU is visible"
            raise ModelLoadError(f"--device cuda: PyTorch {torch.__version__} sees no CUDA GPU on this machine ({build}). "
                                 "Use --device cpu (or auto).")
        raise ModelLoadError(f"--device {kind}: PyTorch {torch.__version__} cannot use it on this machine. Use --device cpu (or auto).")
    chosen = getattr(torch, dtype) if dtype else DEFAULT_DTYPES[kind]
    if kind == "cuda" and chosen == torch.bfloat16 and not dtype and not torch.cuda.is_bf16_supported():
        chosen = torch.float16  # an older GPU without bfloat16
    return torch.device(kind), chosen


def describe(model) -> dict[str, str]:
    """ModelInfo's device fields for a loaded model: device ("cpu", "cuda:0"), device_name (the GPU's
    name, "" on the CPU) and dtype ("float32", "bfloat16")."""
    device = model.device
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else ""
    return {"device": str(device), "device_name": name, "dtype": str(model.dtype).removeprefix("torch.")}
