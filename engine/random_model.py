"""Models with random weights and a real byte-level tokenizer, written as model folders.

For tests and benchmarks, with no download: GPT-2 small's shape (the default config) or any smaller
one; and every other family at its real models' shapes (``SHAPES``) or a tiny one (``TINY``), built
with transformers' own config classes. The tokenizer files are the bundled demo model's (the real
GPT-2 vocabulary); a family's folder gets that vocabulary cut to the model's size, with
``<|endoftext|>`` and the chat-turn tokens ``<|im_start|>`` / ``<|im_end|>`` and a ChatML chat
template (SmolLM2's and Qwen2.5's format) as its last ids.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from . import paths

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json")  # copied from the demo model
GPT2_EOS = 50256  # the GPT-2 vocabulary's <|endoftext|>: ids below it are ordinary tokens

# Real models' shapes (their config.json values for layers, heads, widths, vocabulary, tying).
SHAPES: dict[str, tuple[str, dict]] = {
    "SmolLM2-135M": ("llama", dict(
        num_hidden_layers=30, num_attention_heads=9, num_key_value_heads=3, hidden_size=576,
        intermediate_size=1536, vocab_size=49152, tie_word_embeddings=True, max_position_embeddings=8192,
        rms_norm_eps=1e-5, rope_parameters={"rope_type": "default", "rope_theta": 100000.0})),
    "Qwen2.5-0.5B": ("qwen2", dict(
        num_hidden_layers=24, num_attention_heads=14, num_key_value_heads=2, hidden_size=896,
        intermediate_size=4864, vocab_size=151936, tie_word_embeddings=True, max_position_embeddings=32768,
        rms_norm_eps=1e-6, rope_parameters={"rope_type": "default", "rope_theta": 1000000.0})),
    "Qwen3-0.6B": ("qwen3", dict(
        num_hidden_layers=28, num_attention_heads=16, num_key_value_heads=8, hidden_size=1024, head_dim=128,
        intermediate_size=3072, vocab_size=151936, tie_word_embeddings=True, max_position_embeddings=40960,
        rms_norm_eps=1e-6, rope_parameters={"rope_type": "default", "rope_theta": 1000000.0})),
    "granite-3.1-1b-a400m": ("granitemoe", dict(
        num_hidden_layers=24, num_attention_heads=16, num_key_value_heads=8, hidden_size=1024,
        intermediate_size=512, num_local_experts=32, num_experts_per_tok=8, vocab_size=49155,
        tie_word_embeddings=True, max_position_embeddings=131072, embedding_multiplier=12.0,
        residual_multiplier=0.22, attention_multiplier=0.015625, logits_scaling=6.0)),
}

# Tiny shapes for fast tests: grouped heads (4 query / 2 key-value), untied where the family allows.
_TINY_BASE = dict(num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, hidden_size=64,
                  intermediate_size=96, vocab_size=1000, max_position_embeddings=128)
TINY: dict[str, dict] = {
    "llama": _TINY_BASE | dict(tie_word_embeddings=True),
    "qwen2": _TINY_BASE | dict(tie_word_embeddings=False),
    "qwen3": _TINY_BASE | dict(head_dim=24, tie_word_embeddings=True),
    "granitemoe": _TINY_BASE | dict(num_local_experts=6, num_experts_per_tok=2, intermediate_size=32,
                                    embedding_multiplier=3.0, residual_multiplier=0.5,
                                    attention_multiplier=0.2, logits_scaling=2.0, tie_word_embeddings=True),
    "mixtral": _TINY_BASE | dict(num_local_experts=4, num_experts_per_tok=2, intermediate_size=32,
                                 tie_word_embeddings=False),
}

CHAT_TEMPLATE = (
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
SPECIALS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")


def write_random_gpt2(folder: str | Path, seed: int = 0, **config) -> Path:
    """Save a GPT-2 with random weights (``config`` overrides GPT2Config's defaults) to ``folder``."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    folder = Path(folder)
    torch.manual_seed(seed)
    model = GPT2LMHeadModel(GPT2Config(**config))
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)
    for name in TOKENIZER_FILES:
        shutil.copy(paths.demo_model_dir() / name, folder / name)
    return folder


def set_generation_values(folder: str | Path, **values) -> Path:
    """Write ``values`` (``do_sample``, ``temperature``, ``top_k``, ``top_p``, ``repetition_penalty``)
    into ``folder``'s generation_config.json, as a model card's sampling values are; returns ``folder``."""
    path = Path(folder) / "generation_config.json"
    found = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
    path.write_text(json.dumps(found | values, indent=2) + "\n", encoding="utf-8")
    return Path(folder)


def write_random_model(folder: str | Path, model_type: str, seed: int = 0, **config) -> Path:
    """Save a model of ``model_type`` ("llama", "qwen2", "qwen3", "granitemoe", "mixtral", "gpt2") with
    random weights to ``folder``: ``config`` (e.g. ``SHAPES[name][1]`` or ``TINY[model_type]``)
    over the config class's defaults, with the tokenizer described in the module docstring."""
    if model_type == "gpt2":
        return write_random_gpt2(folder, seed, **config)
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    folder = Path(folder)
    vocab = config["vocab_size"]
    ids = _write_tokenizer(folder, vocab)
    cfg = AutoConfig.for_model(model_type, bos_token_id=ids["<|endoftext|>"], eos_token_id=ids["<|im_end|>"],
                               pad_token_id=None, **config)
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(cfg, dtype=torch.float32)
    model.generation_config.eos_token_id = ids["<|im_end|>"]
    model.save_pretrained(folder)
    return folder


def random_loaded(folder: str | Path, model_type: str, seed: int = 0, **config):
    """A LoadedModel of ``model_type`` with random weights built in memory (no weights written: a real
    shape's float32 weights are gigabytes); ``folder`` receives its tokenizer and config only."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    from .loading import wrap_model

    folder = Path(folder)
    ids = _write_tokenizer(folder, config["vocab_size"])
    cfg = AutoConfig.for_model(model_type, bos_token_id=ids["<|endoftext|>"], eos_token_id=ids["<|im_end|>"],
                               pad_token_id=None, **config)
    cfg.save_pretrained(folder)
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(cfg, dtype=torch.float32, attn_implementation="eager")
    return wrap_model(model, folder, name=folder.name)


def write_shape(folder: str | Path, name: str, seed: int = 0, **overrides) -> Path:
    """A random model at the real model ``name``'s shape (a key of SHAPES), ``overrides`` applied."""
    model_type, config = SHAPES[name]
    return write_random_model(folder, model_type, seed, **(config | overrides))


def _write_tokenizer(folder: Path, vocab: int) -> dict[str, int]:
    """The demo's GPT-2 tokenizer cut to ``vocab`` ids (merges kept only where their parts and result
    are kept), the three special tokens after the ordinary ones; returns the special tokens' ids."""
    folder.mkdir(parents=True, exist_ok=True)
    tok = json.loads((paths.demo_model_dir() / "tokenizer.json").read_text(encoding="utf-8"))
    n_plain = min(GPT2_EOS, vocab - len(SPECIALS))
    model = tok["model"]
    kept = {piece: i for piece, i in model["vocab"].items() if i < n_plain}
    model["merges"] = [m for m in model["merges"] if m[0] in kept and m[1] in kept and m[0] + m[1] in kept]
    ids = {special: n_plain + i for i, special in enumerate(SPECIALS)}
    model["vocab"] = kept | ids
    tok["added_tokens"] = [dict(id=i, content=s, single_word=False, lstrip=False, rstrip=False, normalized=False, special=True)
                           for s, i in ids.items()]
    (folder / "tokenizer.json").write_text(json.dumps(tok, ensure_ascii=False), encoding="utf-8")
    tokenizer_config = {
        "backend": "tokenizers", "tokenizer_class": "GPT2Tokenizer", "add_prefix_space": False,
        "bos_token": "<|endoftext|>", "eos_token": "<|im_end|>", "unk_token": None, "pad_token": None,
        "model_max_length": 1 << 30, "chat_template": CHAT_TEMPLATE,
        # as save_pretrained writes them: without it transformers reads the whole tokenizer.json in
        # Python a second time (the demo's full vocabulary loaded in 0.37 s without it, 0.11 s with)
        "added_tokens_decoder": {str(token["id"]): {k: v for k, v in token.items() if k != "id"} for token in tok["added_tokens"]},
    }
    (folder / "tokenizer_config.json").write_text(json.dumps(tokenizer_config, indent=2), encoding="utf-8")
    return ids


DESIGNS = {
    "gpt2": ("gpt2", dict(n_layer=2, n_head=4, n_embd=64, n_positions=64)),
    "llama-tied": ("llama", TINY["llama"]),
    "llama-untied": ("llama", TINY["llama"] | dict(tie_word_embeddings=False)),
    "qwen2": ("qwen2", TINY["qwen2"]),
    "qwen3": ("qwen3", TINY["qwen3"]),
    "granitemoe": ("granitemoe", TINY["granitemoe"]),
    "mixtral": ("mixtral", TINY["mixtral"]),
}
"""(model type, config) of one tiny random model per design the words about a model must hold for:
each family, and a Llama with and without a tied LM head (tests/app/test_true_words.py,
tests/engine/test_architecture.py)."""
