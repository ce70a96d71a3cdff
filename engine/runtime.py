"""Where the engine runs the model and how it records a step: the ``--device``, ``--dtype``,
``--backend``, ``--remote`` and ``--nnsight-host`` options. Standard library only: the window's
process builds one and sends it with each load.

The NDIF API key is not here, on purpose: this object travels in requests and its fields reach the
log. nnsight reads the key itself, from the environment (``NDIF_API_KEY``) or its own user config
(``~/.config/nnsight/config.yaml``), when it sends a step.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from .errors import NextTokenError

DEVICES = ("auto", "cpu", "cuda", "mps")
DTYPES = ("float32", "bfloat16", "float16")
BACKENDS = ("hooks", "nnsight")
NDIF_HOST = "https://api.ndif.us"  # nnsight's own default (its config.yaml)


@dataclass(frozen=True)
class Runtime:
    """How a model is loaded and stepped.

    device: "auto" (a CUDA GPU, else Apple's MPS, else the CPU, whichever PyTorch sees first), "cpu",
        "cuda" or "mps".
    dtype: the weights' dtype; "" for the device's default (float32 on the CPU, bfloat16 on CUDA,
        float16 on MPS). Recorded values reach the window in float32 (float16 where the step keeps
        float16) whatever it is.
    backend: "hooks" (engine.hooks: forward hooks on the local model) or "nnsight" (nnsight's
        tracing, engine.nnsight_backend: the same hook names, read through nnsight's interface).
    remote: with the nnsight backend, send each step to NDIF (or ``host``) instead of running it here;
        the model is then named by its hub id and no weights are loaded locally.
    host: the nnsight server to send remote steps to; "" for NDIF.
    """

    device: str = "auto"
    dtype: str = ""
    backend: str = "hooks"
    remote: bool = False
    host: str = ""

    def __post_init__(self):
        if self.device not in DEVICES:
            raise ValueError(f"device must be one of {', '.join(DEVICES)} (got {self.device!r})")
        if self.dtype not in ("", *DTYPES):
            raise ValueError(f"dtype must be one of {', '.join(DTYPES)} (got {self.dtype!r})")
        if self.backend not in BACKENDS:
            raise ValueError(f"backend must be one of {', '.join(BACKENDS)} (got {self.backend!r})")
        if (self.remote or self.host) and self.backend != "nnsight":
            raise ValueError("--remote and --nnsight-host need --backend nnsight: remote steps run through nnsight")

    @property
    def is_remote(self) -> bool:
        return self.remote or bool(self.host)

    @property
    def remote_host(self) -> str:
        """The server a remote step goes to ("" when steps run here)."""
        return (self.host or NDIF_HOST) if self.is_remote else ""


CPU = Runtime(device="cpu")  # the engine's default where no command line chose (tests, the API) and the window's fallback


def add_runtime_arguments(p: argparse.ArgumentParser) -> None:
    """--device, --dtype, --backend, --remote and --nnsight-host (engine.runtime), for both command lines."""
    p.add_argument("--device", choices=DEVICES, default="auto",
                   help="where the model runs: auto picks a CUDA GPU (else MPS) when PyTorch sees one (default: auto)")
    p.add_argument("--dtype", choices=DTYPES, default=None,
                   help="the weights' dtype (default: float32 on the CPU, bfloat16 on CUDA, float16 on MPS)")
    p.add_argument("--backend", choices=BACKENDS, default="hooks",
                   help="what records each step: forward hooks, or nnsight's tracing (pip install 'nexttoken[nnsight]') (default: hooks)")
    p.add_argument("--remote", action="store_true",
                   help="with --backend nnsight: send each step to NDIF (model named by hub id; API key from NDIF_API_KEY)")
    p.add_argument("--nnsight-host", metavar="URL", default="",
                   help="with --backend nnsight: send each step to this nnsight server instead of NDIF")


def runtime_of(args: argparse.Namespace) -> Runtime:
    """The Runtime the parsed runtime arguments ask for; NextTokenError for a combination that cannot run."""
    try:
        return Runtime(device=args.device, dtype=args.dtype or "", backend=args.backend, remote=args.remote,
                       host=args.nnsight_host)
    except ValueError as exc:
        raise NextTokenError(f"{exc}.") from exc
