""""What am I looking at?": each panel's explanation with the current numbers filled in, and the
glossary. The texts live in one file, ``resources/help/en.json``, so that they can be corrected and
translated without touching code."""

from __future__ import annotations

import html
import json
import math
from functools import lru_cache

from engine import paths

from app.logic.model_words import fill
from app.logic.wording import human_bytes
from app.protocol.messages import SessionResult


@lru_cache(maxsize=4)
def texts(language: str = "en") -> dict:
    """The help file's contents: ``panels`` (key -> title, before, text), ``glossary`` and
    ``inside`` (the Inside view's sentences)."""
    path = paths.resources_dir() / "help" / f"{language}.json"
    return json.loads(path.read_text(encoding="utf-8"))


def words(section: str, key: str, arch, numbers: dict | None = None, language: str = "en") -> str:
    """The text ``section``/``key`` of the help file in its variant for the model ``arch`` (an
    engine.architecture.Architecture; None: unknown, a choice gives ""), filled in with its facts,
    ``numbers`` and the file's fragments (``app.logic.model_words``)."""
    entries = texts(language)
    return fill(entries[section][key], arch, numbers, entries["fragments"])


def numbers(result: SessionResult | None, layer: int = 0, head: int = 0) -> dict:
    """The current numbers a panel text may use (``{n_prompt}``, ``{chosen_prob:.1%}``…)."""
    if result is None:
        return {}
    info, trace = result.info, result.trace
    n = dict(
        vocab_size=int(info.vocab_size), d_model=int(info.d_model), n_layer=int(info.n_layer), n_head=int(info.n_head),
        n_positions=int(info.n_positions), n_prompt=len(result.prompt_ids), n_generated=len(result.records),
        layer=layer, head=head, max_entropy=math.log2(max(2, int(info.vocab_size))),
        temperature=result.settings.temperature, top_k=result.settings.top_k, top_p=result.settings.top_p,
        repetition_penalty=result.settings.repetition_penalty,
    )
    if trace is not None:
        kv = trace.record.kv
        n.update(
            chosen=trace.chosen_piece, chosen_prob=float(trace.chosen_prob), entropy=float(trace.entropy_bits),
            sampling_prob=float(trace.sampling_prob), model_prob=float(trace.model_prob),
            model_entropy=float(trace.model_entropy_bits), tokens_left=int(trace.tokens_left),
            max_sampling_entropy=float(trace.sampling_entropy_ceiling_bits),
            positions=int(kv.positions), cache_bytes=human_bytes(int(kv.total_bytes)),
            selected=trace.pieces[-1] if trace.pieces else "",
        )
    return n


def panel_help(key: str, result: SessionResult | None, layer: int = 0, head: int = 0, language: str = "en") -> tuple[str, str]:
    """(title, rich text) explaining panel ``key`` now."""
    entry = texts(language)["panels"][key]
    arch = result.info.architecture if result is not None else None
    which = "before" if result is None or result.trace is None else "text"
    filled = fill(entry[which], arch, numbers(result, layer, head), texts(language)["fragments"])
    return entry["title"], f"<p>{html.escape(filled)}</p><p><a href='glossary'>Glossary of the words used</a></p>"


def glossary_entries(result: SessionResult | None = None, language: str = "en") -> dict[str, str]:
    """Every glossary entry (term -> text) in its variant for the model of ``result`` ("" where that
    depends on a fact not known: no model yet)."""
    arch = result.info.architecture if result is not None else None
    entries, values = texts(language), numbers(result)
    return {term: fill(text, arch, values, entries["fragments"]) for term, text in entries["glossary"].items()}


def glossary_html(result: SessionResult | None = None, language: str = "en") -> str:
    """Every glossary entry for the model on screen, term in bold (an entry that needs a model not loaded: left out)."""
    items = glossary_entries(result, language)
    return "".join(f"<p><b>{html.escape(term)}</b>: {html.escape(text)}</p>" for term, text in items.items() if text)
