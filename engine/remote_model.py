"""A model that runs on a remote nnsight server (``--backend nnsight --remote``): only its config and
tokenizer are here.

nnsight builds the architecture on the meta device (no weights), from the hub id's config, so the
module paths of a request are the server's; each step is sent there (engine.nnsight_backend). The
weights never reach this machine: what needs them here (the Inside view's recomputation, the PCA
basis, the weights' hash a session file names) is refused or named by the hub id instead.
"""

from __future__ import annotations

from . import chat, families
from .errors import ModelLoadError
from .info import ModelInfo
from .runtime import Runtime
from .tokens import Tokenizer


def remote_parts(source: str, runtime: Runtime):
    """(meta model, tokenizer, info, backend) of hub id ``source``, its steps going to
    ``runtime.remote_host``; engine.loading checks the source and the tokenizer and wraps them."""
    try:
        from .nnsight_backend import NnsightBackend
        from nnsight.modeling.transformers import TransformersModel
    except ImportError as exc:
        raise ModelLoadError(f"--remote needs the nnsight package ({exc}): pip install 'nexttoken[nnsight]'.") from exc
    try:
        from transformers import AutoTokenizer

        hf_tokenizer = AutoTokenizer.from_pretrained(str(source))
        lm = TransformersModel(str(source), task="text-generation", tokenizer=hf_tokenizer,
                               attn_implementation="eager")  # the architecture on the meta device: no weights
    except Exception as exc:  # the hub unreachable, no such repository, a config transformers cannot build
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise ModelLoadError(f"The config and tokenizer of {source} could not be read ({first}).") from exc
    model = lm._module  # the meta-device architecture nnsight built (module paths and config only)
    try:
        family = families.family_of(model)
    except ValueError as exc:
        raise ModelLoadError(str(exc)) from exc
    tokenizer = Tokenizer(lm.tokenizer)
    cfg = model.config
    total, active = families.parameter_counts(model)
    n_head = cfg.num_attention_heads
    kv_heads = getattr(cfg, "num_key_value_heads", None) or n_head
    d_head = getattr(cfg, "head_dim", None) or cfg.hidden_size // n_head
    info = ModelInfo(
        name=str(source), source=str(source), n_layer=cfg.num_hidden_layers, n_head=n_head, d_model=cfg.hidden_size,
        n_positions=cfg.max_position_embeddings, vocab_size=cfg.vocab_size, n_params=total, is_demo=False,
        n_active_params=0 if active == total else active, family=family.name,
        n_kv_heads=0 if kv_heads == n_head else kv_heads, d_head=0 if d_head == cfg.hidden_size // n_head else d_head,
        chat_template=chat.has_chat_template(tokenizer), special_ids=chat.special_ids(tokenizer),
        backend="nnsight", device="meta", dtype=str(getattr(cfg, "dtype", "") or "").removeprefix("torch.") or "bfloat16",
        remote_host=runtime.remote_host,
    )
    return model, tokenizer, info, NnsightBackend(lm, runtime.remote_host)
