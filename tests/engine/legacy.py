"""Files of formats 1 and 2 (``python -m engine --export`` before branches), written as that code wrote them.

Kept only so that tests can check old files still open: engine.session_file writes format 3.
"""

from __future__ import annotations

import json

import numpy as np

from engine import sampling


def legacy_arrays(session, version: int = 2, *, inside: bool = False) -> dict[str, np.ndarray]:
    """The arrays engine.export.session_arrays wrote for ``session``'s current path (format 2; format 1
    lacks ``draw_u``)."""
    records = session.records
    prompt_len = len(session.prompt_ids)
    out: dict[str, np.ndarray] = {
        "input_ids": session.token_ids(),
        "prompt_len": np.array(prompt_len, dtype=np.int64),
        "chosen": np.array([r.chosen for r in records], dtype=np.int64),
        "logits": np.stack([r.logits for r in records]).astype(np.float32),
        "kv_len": np.array([r.kv.positions for r in records], dtype=np.int64),
        "kv_bytes": np.array([r.kv.total_bytes for r in records], dtype=np.int64),
        "resid_prefill": records[0].resid.astype(np.float32),
    }
    if version >= 2:
        out["draw_u"] = np.array([r.draw_u for r in records], dtype=np.float64)
    ids = out["input_ids"]
    out["probs"] = np.stack(
        [sampling.distribution(r.logits, ids[: prompt_len + r.step], r.settings).probs for r in records]
    ).astype(np.float32)
    for r in records:
        for layer in range(r.attn.shape[0]):
            key = f"attn_prefill_{layer}" if r.step == 0 else f"attn_step_{r.step}_{layer}"
            out[key] = r.attn[layer].astype(np.float32)
    if inside:
        from engine.inside import inside_arrays

        out.update(inside_arrays(session))
    info = session.info
    meta = {
        "format": f"nexttoken-session/{version}",
        "model": {"name": info.name, "source": info.source, "n_params": info.n_params},
        "config": {"n_layer": info.n_layer, "n_head": info.n_head, "d_model": info.d_model,
                   "n_positions": info.n_positions, "vocab_size": info.vocab_size},
        "settings": [vars(r.settings) | {"chosen_by": r.chosen_by} for r in records],
        "seed": session.settings.seed,
        "use_cache": session.use_cache,
        "text": session.text(),
        "versions": {"numpy": np.__version__},
    }
    out["meta"] = np.array(json.dumps(meta, ensure_ascii=False))
    return out
