"""The session file's format (``nexttoken-session/4``) as one table: every array's dtype, shape and meaning.

The writer (``engine.session_write.session_arrays``) casts to these dtypes with ``typed``, the reader
checks every array with ``check``, and docs/SESSION_FILE.md's two tables are ``markdown_table(KEYS)``
and ``markdown_table(EXPORT_KEYS)`` (``python -m engine.session_format`` prints them; a test compares).
numpy and the standard library only.

Sizes in shapes: N nodes (every step of every branch), F forward passes, n = positions a pass computed,
R = Σ n, r = attention rows a pass kept, Q = Σ r, A = Σ r × (start + n), P prompt tokens, S steps on the current branch, L layers, H heads,
KV key/value heads (H unless grouped), d = d_model, dh = d_head (d / H unless the config gives it),
m = MLP width, V = vocabulary, e = experts chosen per token (0: no experts), K tokens in the token
table, B their bytes, k projection components;
``{s}`` in a name: one array per step s of the current branch.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from .errors import ExportError

FORMAT = "nexttoken-session/4"


@dataclass(frozen=True)
class Key:
    """One array of a session file: its ``name`` (``{s}``: one per step of the current branch), numpy
    ``dtype`` ("U": a JSON string of any length), ``shape`` (one size expression per axis: a size's
    letter, a number, or a sum such as "L + 1") and the ``meaning`` the docs show."""

    name: str
    dtype: str
    shape: tuple[str, ...]
    meaning: str

    def matches(self, name: str) -> bool:
        return re.fullmatch(re.escape(self.name).replace(r"\{s\}", r"\d+"), name) is not None

    def describe(self) -> str:
        if self.dtype == "U":
            return "JSON string"
        return f"{self.dtype} [{', '.join(self.shape)}]"


KEYS = (
    Key("meta", "U", (), "`format`; `model` (name, source, n_params, is_demo, `weights_hash` = `sha256:` over the state "
        "dict's tensors in name order); `config` (n_layer, n_head, d_model, n_positions, vocab_size, family "
        "(`engine.families`: \"GPT-2\", \"Llama\", ...), n_kv_heads, d_head, n_active_params; each of the last three "
        "0 where it is GPT-2's: n_head, d_model / n_head, n_params); `tokenizer` (eos_id, vocab_size, chat_template "
        "(true: it has one), special_ids); `chat` (null, or the system and user messages the prompt was made from "
        "with the model's chat template); `stop_sequences` (texts that stop generation); `settings` (the session's), "
        "`settings_table` (each distinct setting of the nodes), `seed`, `use_cache`, `max_new_tokens`, `dropped` "
        "(branches dropped to save memory), `prompt_text`, `text`, `versions`"),
    Key("prompt_ids", "int64", ("P",), "the prompt"),
    Key("node_parent", "int64", ("N",), "each node's parent node (−1: a prefill, hanging from the prompt)"),
    Key("node_pass", "int64", ("N",), "the forward pass the node's arrays come from"),
    Key("node_chosen", "int64", ("N",), "the token taken"),
    Key("node_chosen_by", "<U7", ("N",), "\"greedy\", \"sampled\" or \"user\""),
    Key("node_draw_u", "float64", ("N",), "the draw's u (NaN unless sampled)"),
    Key("node_settings", "int64", ("N",), "the node's sampling settings: an index into `meta.settings_table`"),
    Key("current", "int64", (), "the node on screen (−1 before the prefill)"),
    Key("path", "int64", ("S",), "the nodes from the prefill to the current one"),
    Key("pass_step", "int64", ("F",), "each pass's step"),
    Key("pass_start", "int64", ("F",), "its first position"),
    Key("pass_n", "int64", ("F",), "the positions it computed (P at the prefill, 1 at decode)"),
    Key("pass_input_ids", "int64", ("R",), "the tokens each pass fed, concatenated"),
    Key("pass_token_embed", "float32", ("R", "d"), "`hook_embed`"),
    Key("pass_pos_embed", "float32", ("R", "d"), "`hook_pos_embed`"),
    Key("pass_resid", "float32", ("L + 1", "R", "d"), "`blocks.0.hook_resid_pre`, then each block's `hook_resid_post`"),
    Key("pass_attn_r", "int64", ("F",),
        "the attention rows each pass kept: every one (n) up to 256 positions, else 24 evenly spaced ones "
        "ending at its last (a head's whole map is recomputed from `pass_resid` with the model)"),
    Key("pass_attn_rows", "int64", ("Q",), "their query positions, ascending, concatenated over passes"),
    Key("pass_attn", "float16", ("L", "H", "A"),
        "`attn.hook_pattern` rows: pass f's [L, H, r, start + n] flattened on its last two axes, concatenated"),
    Key("pass_attn_out", "float16", ("F", "L", "d"), "`hook_attn_out` at the pass's last position"),
    Key("pass_mlp_out", "float16", ("F", "L", "d"), "`hook_mlp_out` at the pass's last position"),
    Key("pass_final_hidden", "float32", ("F", "d"), "`ln_final.hook_out` at the last position"),
    Key("pass_logits", "float32", ("F", "V"), "the raw logits for the next token"),
    Key("pass_experts", "int64", ("F", "L", "e"),
        "`mlp.hook_expert_indices` at the last position: the experts each block's router chose, highest weight "
        "first (a mixture of experts; e = 0 for a dense model)"),
    Key("pass_kv_key_positions", "int64", ("F", "L"), "positions in the KV cache's keys after the pass"),
    Key("pass_kv_value_positions", "int64", ("F", "L"), "positions in the KV cache's values after the pass"),
    Key("pass_kv_total_bytes", "int64", ("F",), "the KV cache's bytes"),
    Key("pass_kv_bytes_per_value", "int64", ("F",), "bytes of one cached value"),
    Key("pass_forward_ms", "float64", ("F",), "the forward pass's time"),
    Key("pass_step_ms", "float64", ("F",), "the whole step's time"),
    Key("token_ids", "int64", ("K",), "every token shown (prompt, each node's token and its 64 best candidates), ascending"),
    Key("token_bytes_len", "int64", ("K",), "the length of each one's raw bytes"),
    Key("token_bytes", "uint8", ("B",), "their raw bytes, concatenated; a token's piece is `engine.tokens.readable(bytes)`"),
    Key("projection_mean", "float32", ("d",), "the model's PCA basis (`engine.projection`): the mean"),
    Key("projection_components", "float32", ("k", "d"), "its components"),
    Key("projection_explained", "float32", ("k",), "the variance each explains"),
    Key("input_ids", "int64", ("P + S",), "the current branch's tokens: the prompt, then each step's"),
    Key("prompt_len", "int64", (), "P"),
    Key("chosen", "int64", ("S",), "the current branch's tokens taken"),
    Key("draw_u", "float64", ("S",), "their draws' u"),
    Key("kv_len", "int64", ("S",), "the KV cache's positions after each step of the current branch"),
    Key("kv_bytes", "int64", ("S",), "its bytes"),
)

EXPORT_KEYS = (  # python -m engine --export: the current branch's distributions and its path, recomputed
    Key("probs", "float32", ("S", "V"), "the final distribution each token was drawn from"),
    Key("q_{s}", "float32", ("L", "H", "dh"),
        "the query: GPT-2's `c_attn` output, bias included, split per head (`attn.hook_q`); a RoPE family's after "
        "RoPE (and after Qwen3's per-head q_norm): the query the scores are made of (`attn.hook_rot_q`)"),
    Key("k_{s}", "float32", ("L", "KV", "dh"),
        "the key this position adds (`attn.hook_k`; a RoPE family's after RoPE, as the KV cache holds it: "
        "`attn.hook_rot_k`), one per key/value head: query head h reads key/value head h // (H / KV)"),
    Key("v_{s}", "float32", ("L", "KV", "dh"), "the value (`attn.hook_v`), one per key/value head"),
    Key("z_{s}", "float32", ("L", "H", "dh"), "the head output before W_O (`attn.hook_z`), every query head"),
    Key("scores_{s}", "float32", ("L", "H", "P + s"),
        "q · k_j × the attention module's scale for every visible position j, before softmax "
        "(`attn.hook_attn_scores` without the masked positions): 1/√dh for GPT-2 and the Llama design, "
        "GraniteMoe's attention_multiplier; query head h meets key/value head h // (H / KV)"),
    Key("attn_out_{s}", "float32", ("L", "d"),
        "attention output after W_O and its bias if any, as added to the residual stream (`hook_attn_out`; "
        "GraniteMoe's is × residual_multiplier)"),
    Key("resid_mid_{s}", "float32", ("L", "d"), "residual after the attention addition (`hook_resid_mid`)"),
    Key("mlp_out_{s}", "float32", ("L", "d"),
        "MLP output as added to the residual stream (`hook_mlp_out`; a mixture of experts': the chosen experts' "
        "weighted sum; GraniteMoe's is × residual_multiplier)"),
    Key("mlp_pre_{s}", "float32", ("L", "m"),
        "MLP hidden units before the activation (`mlp.hook_pre`): GPT-2's before GELU; a gated MLP's gate "
        "x · W_gate, before its activation. Not in the file for a mixture of experts (GraniteMoe, Mixtral): no single MLP"),
    Key("mlp_post_{s}", "float32", ("L", "m"),
        "the down projection's input (`mlp.hook_post`): GPT-2's GELU (tanh approximation); a gated MLP's "
        "act(gate) × x · W_up (act: the config's hidden_act, SiLU in these families). Not in the file for a mixture of experts"),
    Key("final_hidden", "float32", ("S", "d"),
        "the final norm's output after its weight and bias if any (GPT-2's ln_f, the others' RMSNorm: "
        "`ln_final.hook_out`), as each step recorded it"),
    Key("lens_ids_{s}", "int64", ("L + 1", "10"),
        "logit lens: the 10 highest raw logits' ids, best first, ties by lower id, of the final norm + LM head "
        "(GraniteMoe: ÷ logits_scaling) on the residual stream before block 0 and after each block; the last row "
        "is the top 10 of the step's logits"),
    Key("lens_logits_{s}", "float32", ("L + 1", "10"), "their logits"),
    Key("attr_heads_{s}", "float32", ("L", "H"),
        "direct logit attribution of step s's chosen token (engine.attribution, TransformerLens's "
        "`stack_head_results` with `apply_ln_to_stack`): each head's output z_h · W_O[h] read out through the final "
        "norm, its scale at the position held fixed, and the LM head (GraniteMoe: ÷ logits_scaling)"),
    Key("attr_attn_{s}", "float32", ("L",), "each block's attention part: its heads and its output bias b_O"),
    Key("attr_mlp_{s}", "float32", ("L",), "each block's MLP part (a mixture of experts: its chosen experts together)"),
    Key("attr_other", "float32", ("S", "5"),
        "per step: the chosen token's logit, then the parts of the token embedding, the position embedding (0 "
        "without one), the final norm's shift (0 for RMSNorm) and the LM head's bias (0 without one); with "
        "attr_attn and attr_mlp they sum to the logit"),
)

# sizes computed from arrays checked before them in KEYS' order
_DERIVED = {
    "R": lambda d: int(d["pass_n"].sum()),
    "A": lambda d: int((d["pass_attn_r"] * (d["pass_start"] + d["pass_n"])).sum()),
}


def key_for(name: str) -> Key | None:
    """The table's entry for the array called ``name`` (``q_3`` is ``q_{s}``), or None."""
    return next((k for k in KEYS + EXPORT_KEYS if k.matches(name)), None)


def typed(arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """``arrays`` cast to the table's dtypes (the writer's last stage); a name outside the table is a bug."""
    out = {}
    for name, value in arrays.items():
        key = key_for(name)
        if key is None:
            raise KeyError(f"{name!r} is not in the session file's table (engine.session_format)")
        a = np.asarray(value)
        out[name] = a if key.dtype == "U" else a.astype(key.dtype, copy=False)
    return out


def check(name: str, d: dict[str, np.ndarray], sizes: dict[str, int]) -> dict[str, int]:
    """Check every array of ``d`` against the table: each of KEYS present, each of EXPORT_KEYS for every
    step or for none, each with its dtype and shape. ``sizes`` holds those the meta gives (L, H, d, V);
    a size first met in a shape is read from that array. Returns every size; ExportError of one line
    naming the first array that does not fit."""
    sizes = dict(sizes)
    for key in KEYS:
        if key.name not in d:
            raise ExportError(f"{name} is not a complete {FORMAT} file: it lacks '{key.name}'.")
        _fit(name, key, key.name, d, sizes, {})
    steps = range(sizes["S"])
    for key in EXPORT_KEYS:
        names = [key.name.format(s=s) for s in steps] if "{s}" in key.name else [key.name]
        present = [n in d for n in names]
        if any(present) and not all(present):
            raise ExportError(f"{name}: '{names[present.index(False)]}' is missing (the file has '{key.name}' for other steps).")
        if all(present):
            for s, array_name in enumerate(names):
                _fit(name, key, array_name, d, sizes, {"s": s})
    return sizes


def _fit(name: str, key: Key, array_name: str, d: dict, sizes: dict[str, int], local: dict[str, int]) -> None:
    a = d[array_name]
    ok = a.dtype.kind == "U" if key.dtype == "U" else a.dtype == np.dtype(key.dtype)
    ok = ok and a.ndim == len(key.shape)
    if ok:
        for expression, got in zip(key.shape, a.shape):
            if expression in _DERIVED and expression not in sizes:
                sizes[expression] = _DERIVED[expression](d)
            if expression.isalpha() and expression not in sizes and expression not in local:
                sizes[expression] = got  # the first array that has this size tells it
            if _size(expression, sizes | local) != got:
                ok = False
                break
    if not ok:
        want = "[" + ", ".join(str(_size(e, sizes | local)) if _known(e, sizes | local) else "any" for e in key.shape) + "]"
        dtype = "a string" if key.dtype == "U" else key.dtype
        raise ExportError(f"{name}: '{array_name}' should be {dtype} {want}, found {a.dtype} {list(a.shape)}.")


def _size(expression: str, sizes: dict[str, int]) -> int:
    return sum(int(term) if term.isdigit() else sizes[term] for term in expression.split(" + "))


def _known(expression: str, sizes: dict[str, int]) -> bool:
    return all(term.isdigit() or term in sizes for term in expression.split(" + "))


def markdown_table(keys: tuple[Key, ...]) -> str:
    """The docs' table of ``keys``: one row each, | key | dtype, shape | meaning |."""
    rows = ["| key | dtype, shape | meaning |", "|---|---|---|"]
    rows += [f"| `{k.name}` | {k.describe()} | {k.meaning} |" for k in keys]
    return "\n".join(rows)


if __name__ == "__main__":
    print(markdown_table(KEYS), markdown_table(EXPORT_KEYS), sep="\n\n")
