"""The Flow's lines as data: box line -> text (``flow_texts``) and box line -> its wordings, longest
first (``flow_lines``), for the step's numbers.

The flow panel only draws these, each in the first wording that fits its box (``app.logic.text_fit``,
which also tries a count's shorter forms, 49,152 → 49.2k → 49k); tests read them. The lines that name
a part of the model come from ``resources/help/<language>.json`` under "flow" and their shorter
wordings under "flow_short", in their variant for the model's facts (``app.logic.model_words``),
filled with the step's numbers (``app.logic.tour.values``: the same the tour reads out); the lines
that hold only numbers are written here.
"""

from __future__ import annotations

import math

from app.logic.flow_numbers import FlowNumbers
from app.logic.help import texts
from app.logic.model_words import architecture_line, fill
from app.logic.tour import values
from app.logic.wording import percent

LINES = ("ln_final_title", "ln_final_lengths", "ln_final_rule", "embedding_position", "embedding_length",
         "lm_head_size", "lm_head_matrix", "mlp", "heads")
TITLES: dict[str, tuple[str, ...]] = {  # each box's title, its shorter wordings after it
    "tokens": ("1 · Token in", "1 · Token"),
    "embedding": ("2 · Embedding", "2 · Embed"),
    "blocks": ("3 · Blocks",),
    "kv": ("KV cache", "KV"),
    "ln_final": ("4 · Final layer norm", "4 · Final norm", "4 · Norm"),
    "lm_head": ("5 · LM head",),
    "logits": ("6 · Logits · model p", "6 · Logits"),
    "sampling": ("7 · Sampling",),
    "chosen": ("8 · Chosen token", "8 · Chosen"),
    "appended": ("9 · Appended",),
}


def flow_texts(n: FlowNumbers, language: str = "en") -> dict[str, str]:
    """Every fact-dependent line of the Flow for ``n`` ("" where the model's facts are unknown), and
    ``model``: the model in one line."""
    entries = texts(language)
    numbers = values(n)
    lines = {name: fill(entries["flow"][name], n.arch, numbers, entries["fragments"]) for name in LINES if name in entries["flow"]}
    lines["model"] = architecture_line(n.arch)
    return lines


def flow_variants(n: FlowNumbers, language: str = "en") -> dict[str, tuple[str, ...]]:
    """Each fact-dependent line of the Flow in its wordings, the one of ``flow_texts`` first, then
    the help file's shorter ones ("flow_short"); empty ones left out."""
    entries = texts(language)
    numbers = values(n)
    out = {}
    for name in LINES:
        if name not in entries["flow"]:
            continue
        shorter = entries.get("flow_short", {}).get(name, [])
        found = [fill(entry, n.arch, numbers, entries["fragments"]).strip() for entry in [entries["flow"][name], *shorter]]
        out[name] = tuple(dict.fromkeys(t for t in found if t))
    return out


def flow_lines(n: FlowNumbers, language: str = "en") -> dict[str, tuple[str, ...]]:
    """Every line the Flow writes for ``n``, as its wordings longest first: the help file's
    (``flow_variants``) and the lines of numbers (box_line keys: ``tokens_1`` ... ``appended_2``,
    ``block``, ``attention``, ``title_<box>``)."""
    lines = dict(flow_variants(n, language))
    for box, wordings in TITLES.items():
        lines[f"title_{box}"] = wordings
    lines["title_blocks"] = (f"3 · Blocks × {n.n_layer}", "3 · Blocks", f"Blocks × {n.n_layer}", "Blocks")
    if lines.get("ln_final_title"):
        lines["title_ln_final"] = lines["ln_final_title"] + ("4 · Norm",)
    piece = n.token_piece
    if len(n.input_ids) > 1:
        lines["tokens_1"] = (f"{len(n.input_ids)} prompt tokens at once", f"{len(n.input_ids)} prompt tokens", f"{len(n.input_ids)} tokens")
        lines["tokens_2"] = (f"newest: {n.token_id} {piece}", f"{n.token_id} {piece}", piece)
    else:
        lines["tokens_1"] = (f"{n.token_id} {piece}", piece)
        lines["tokens_2"] = (f"step {n.step}",)
    lines["tokens_3"] = (f"position {n.position}", f"pos. {n.position}")
    lines["embedding_1"] = (f"token row {n.token_id}", f"row {n.token_id}")
    L = n.layer
    a, b, c = n.resid_norms[L], n.mid_norms[L], n.resid_norms[L + 1]
    lines["block"] = (f"Block {L}: |x| {a:.1f} → {b:.1f} → {c:.1f}", f"Block {L}: {a:.1f} → {b:.1f} → {c:.1f}",
                      f"Block {L}: {a:.0f} → {b:.0f} → {c:.0f}", f"Block {L}: |x| → {c:.1f}", f"Block {L}")
    w, key, adds = f"{n.top_weight:.0%}", n.top_key_piece, n.attn_norms[L]
    lines["attention"] = (f"attn head {n.head}: {w} → {key} · adds {adds:.1f}", f"head {n.head}: {w} → {key} · adds {adds:.1f}",
                          f"head {n.head}: {w} → {key}", f"head {n.head}: {w} → position {n.top_key}",
                          f"head {n.head}: {w} → pos. {n.top_key}", f"{w} → pos. {n.top_key}")
    kept = dict(n.kept_after)
    st = n.settings
    k = st.top_k or "off"
    lines["sampling_rows"] = (  # one wording set per row, the stages in order (the panel shows the last it has room for)
        (f"{n.vocab:,} tokens", f"{n.vocab:,}"),
        (f"penalty {st.repetition_penalty:g}: {kept['penalty']:,}", f"penalty: {kept['penalty']:,}"),
        ("greedy: the top one", "greedy") if n.greedy else
        (f"temperature {st.temperature:g}: {kept['temperature']:,}", f"temp. {st.temperature:g}: {kept['temperature']:,}",
         f"T {st.temperature:g}: {kept['temperature']:,}"),
        (f"top-k {k}: {kept['top-k']:,} left", f"top-k {k}: {kept['top-k']:,}"),
        (f"top-p {st.top_p:g}: {kept['top-p']:,} left", f"top-p {st.top_p:g}: {kept['top-p']:,}") if st.top_p < 1 else
        (f"top-p off: {kept['top-p']:,} left", f"top-p off: {kept['top-p']:,}"),
    )
    lines["chosen_1"] = (f"{n.chosen_piece}  id {n.chosen_id}", n.chosen_piece, f"id {n.chosen_id}")
    if n.chosen_by == "user":
        lines["chosen_2"] = ("chosen by you", "by you")
    elif n.greedy or math.isnan(n.draw_u):
        lines["chosen_2"] = (f"greedy: rank {n.chosen_rank} by logit", f"greedy: rank {n.chosen_rank}", f"rank {n.chosen_rank}")
    else:
        lines["chosen_2"] = (f"u = {n.draw_u:.3f} in [{n.draw_start:.3f}, {n.draw_end:.3f})",
                             f"u {n.draw_u:.3f} in [{n.draw_start:.3f}, {n.draw_end:.3f})", f"u = {n.draw_u:.3f}")
    lines["chosen_3"] = (f"sampling p {percent(n.chosen_sampling_prob)}", f"sampling {percent(n.chosen_sampling_prob)}")
    lines["chosen_4"] = (f"model p {percent(n.chosen_model_prob)}", f"model {percent(n.chosen_model_prob)}")
    lines["appended_2"] = (f"next step: position {n.context_len}", f"next: position {n.context_len}", f"next: pos. {n.context_len}")
    return lines


def logit_numbers(logit: float, prob: float) -> tuple[str, ...]:
    """A logits row's numbers, longest first."""
    return (f"{logit:.1f} · {percent(prob)}", percent(prob))
