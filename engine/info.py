"""What the window knows about a loaded model. Standard library only: the window's process reads it."""

from __future__ import annotations

from dataclasses import dataclass

from .architecture import Architecture


@dataclass(frozen=True)
class ModelInfo:
    """A loaded model's name, where it came from, its shape and its size."""

    name: str
    source: str
    n_layer: int
    n_head: int
    d_model: int
    n_positions: int
    vocab_size: int
    n_params: int
    is_demo: bool
    family: str = "GPT-2"  # engine.families.Family.name
    n_kv_heads: int = 0  # key/value heads (fewer than n_head with grouped heads); 0: n_head
    d_head: int = 0  # 0: d_model // n_head
    n_active_params: int = 0  # parameters each token runs through (a mixture of experts: fewer); 0: n_params
    chat_template: bool = False  # the tokenizer has a chat template (engine.chat): chat turns are possible
    special_ids: tuple[int, ...] = ()  # the tokenizer's special tokens (<|im_start|>, <|im_end|>, ...), ascending
    backend: str = "hooks"  # what records each step (engine.runtime.BACKENDS): engine.hooks, or nnsight's tracing
    device: str = "cpu"  # where the weights are ("cpu", "cuda:0", "mps"; "meta" for a remote model: none here)
    device_name: str = ""  # the GPU's name ("" on the CPU)
    dtype: str = "float32"  # the weights' dtype
    remote_host: str = ""  # the nnsight server each step is sent to ("" when steps run here)
    generation: tuple[tuple[str, object], ...] = ()  # the sampling values its generation_config.json sets (engine.defaults)
    architecture: Architecture | None = None  # what the model is made of (engine.architecture); None: not known

    @property
    def kv_heads(self) -> int:
        return self.n_kv_heads or self.n_head

    @property
    def head_dim(self) -> int:
        return self.d_head or self.d_model // self.n_head

    def kv_widths(self) -> tuple[int, int]:
        """Values the KV cache holds per position, layer and keys-or-values (kv_heads x head_dim), and
        what full heads would hold (n_head x head_dim); each 0 where that is d_model (GPT-2: KVStats's default)."""
        kv, full = self.kv_heads * self.head_dim, self.n_head * self.head_dim
        return (0 if kv == self.d_model else kv), (0 if full == self.d_model else full)

    @property
    def runs_on(self) -> str:
        """Where the model runs and what records its steps: "cpu, float32, forward hooks",
        "cuda:0 (NVIDIA H200), bfloat16, nnsight's tracing", or the remote server."""
        if self.remote_host:
            return f"{self.remote_host} through nnsight (the weights stay on the server; each step is one request)"
        device = f"{self.device} ({self.device_name})" if self.device_name else self.device
        return f"{device}, {self.dtype}, " + ("nnsight's tracing" if self.backend == "nnsight" else "forward hooks")

    @property
    def label(self) -> str:
        size = _count(self.n_params)
        if self.n_active_params and self.n_active_params != self.n_params:
            size += f" ({_count(self.n_active_params)} active per token)"
        demo = "tiny demo model, " if self.is_demo else ""
        family = "" if self.family == "GPT-2" else f"{self.family}, "
        heads = f"{self.n_head} heads" if self.kv_heads == self.n_head else f"{self.n_head} heads sharing {self.kv_heads} key/value heads"
        return f"{self.name} ({family}{demo}{self.n_layer} layers, {heads}, {size} parameters)"


def _count(n: int) -> str:
    """1,340,000,000 -> "1.34B", 135,000,000 -> "135M", 126,000 -> "126K"."""
    if n >= 1e9:
        return f"{n / 1e9:.2f}B"
    return f"{n / 1e6:.0f}M" if n >= 1e6 else f"{n / 1e3:.0f}K"
