"""Every sentence the window writes about the model holds for the model on screen.

For a random small GPT-2, Llama (tied and separate LM head), Qwen2 (q/k/v biases), Qwen3, GraniteMoe
and Mixtral, every help text, glossary entry, tour stage, Flow line, Inside caption, Model dialog
row and both command lines' --help is rendered, and each phrase that claims a fact (PHRASES) is
searched in all of them: where the model's description (engine.architecture) says the fact is
false, the phrase must not be there, and the failure names the sentence that says it.
"""

from __future__ import annotations

import html
import re
from dataclasses import replace

import numpy as np
import pytest

from app.logic.flow_numbers import flow_numbers
from app.logic.flow_texts import flow_texts, flow_variants
from app.logic.help import glossary_entries, panel_help, texts
from app.logic.model_words import architecture_line, architecture_rows
from app.panels.flow_panel import box_title
from app.host.session_host import make_result
from app.logic.tour import STAGES, sentence
from engine import SamplingSettings, Session, load_model
from engine.architecture import INV_SQRT_D_HEAD
from engine.random_model import DESIGNS, write_random_model

CASES = DESIGNS

# What each model is, written from its config by hand (not by engine.architecture): the words are
# checked against these, so a description that reports a fact wrongly shows up as false sentences.
_ROTARY = dict(position="rotary", norm="RMSNorm", norm_shift=False, o_bias=False, mlp_bias=False, qkv_bias=False,
               score_rule=INV_SQRT_D_HEAD, embedding_multiplier=1.0, residual_multiplier=1.0, logits_divisor=1.0, n_kv_heads=2)
EXPECTED = {
    "gpt2": dict(position="learned", norm="LayerNorm", norm_shift=True, o_bias=True, mlp_bias=True, qkv_bias=True, mlp="dense",
                 tied_lm_head=True, score_rule=INV_SQRT_D_HEAD, embedding_multiplier=1.0, residual_multiplier=1.0,
                 logits_divisor=1.0, n_kv_heads=4),
    "llama-tied": _ROTARY | dict(mlp="gated", tied_lm_head=True),
    "llama-untied": _ROTARY | dict(mlp="gated", tied_lm_head=False),
    "qwen2": _ROTARY | dict(mlp="gated", tied_lm_head=False, qkv_bias=True),
    "qwen3": _ROTARY | dict(mlp="gated", tied_lm_head=True),
    "granitemoe": _ROTARY | dict(mlp="experts", tied_lm_head=True, score_rule="attention_multiplier", embedding_multiplier=3.0,
                                 residual_multiplier=0.5, logits_divisor=2.0),
    "mixtral": _ROTARY | dict(mlp="experts", tied_lm_head=False),
}

# (what the phrase claims, the phrase as a regular expression, whether the model makes it true)
PHRASES = (
    ("a position table is added", r"(?<!no )(?<!Rotary )position (table|row|embedding)", lambda a: not a.rotary),
    ("no position vector is added", r"[Nn]o position (vector|row)", lambda a: a.rotary),
    ("q and k are turned by position (RoPE)", r"\(RoPE|before RoPE|after RoPE|RoPE\(q\)", lambda a: a.rotary),
    ("the norm adds a learned shift", r"(?<!no )shift", lambda a: a.norm_shift),
    ("the norm is a LayerNorm", r"final layer norm|layer norm \d|minus the mean|−mean", lambda a: a.norm == "LayerNorm"),
    ("the norm is an RMSNorm", r"final RMSNorm|RMSNorm \d|÷ RMS", lambda a: a.norm == "RMSNorm"),
    ("W_O adds a bias", r"W_O, plus its bias", lambda a: a.o_bias),
    ("the MLP's projections add biases", r"and its bias", lambda a: a.mlp_bias),
    ("the MLP is 4 d wide", r"\b4d\b|4 × d\b", lambda a: a.mlp != "experts" and a.d_mlp == 4 * a.d_model),
    ("the scores are scaled by 1/√d_head", r"= 1 ?/ ?√|divided by √d_head", lambda a: a.score_rule == INV_SQRT_D_HEAD),
    ("the scores are scaled by attention_multiplier", r"attention_multiplier", lambda a: a.score_rule == "attention_multiplier"),
    ("the LM head is a matrix of its own", r"LM head matrix|matrix of its own|its own [\d,]+ × \d+ matrix|W_U",
     lambda a: not a.tied_lm_head),
    ("the LM head is tied to the embedding table", r"(?<!not )\bti(es|ed)\b|embedding table itself|matrix E itself|h · E\[",
     lambda a: a.tied_lm_head),
    ("the MLP is gated", r"(?<!not )\bgated\b|gate x · W_gate", lambda a: a.mlp in ("gated", "experts")),
    ("the MLP is a mixture of experts", r"chosen experts|router scores|mixture of experts \(|of \d+ experts", lambda a: a.experts),
    ("query heads share key/value heads", r"query heads share|heads / \d+ kv", lambda a: a.grouped),
    ("the embedding is multiplied", r"embedding multiplier|× \d+(\.\d+)?: \|x\|", lambda a: a.embedding_multiplier != 1.0),
    ("what blocks add is multiplied", r"residual multiplier", lambda a: a.residual_multiplier != 1.0),
    ("the logits are divided", r"logits scaling|logits ÷|\] ÷ ", lambda a: a.logits_divisor != 1.0),
    ("the template writes its own system message", r"writes its own|inserts its own", lambda a: bool(a.default_system)),
    ("every parameter takes part in every token", r"every parameter takes part",  # but one row of a separate embedding or position table
     lambda a: a.tied_lm_head and a.rotary and not a.experts),
)

UNSAID = {"the MLP is 4 d wide", "every parameter takes part in every token"}  # a claim no text makes any more: only searched where it would be false


def _plain(text: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", " ", text)).replace("\u2029", " ")


@pytest.fixture(scope="module")
def rendered(tmp_path_factory, qapp):
    """name -> (the model's true facts, its numbers, its result, [(where, text)]) for every case: the
    description's facts with EXPECTED's in their place."""
    out = {}
    for name, (model_type, config) in CASES.items():
        loaded = load_model(str(write_random_model(tmp_path_factory.mktemp(name) / name, model_type, seed=1, **config)))
        arch, n, result, seen = render(loaded)
        out[name] = replace(arch, **EXPECTED[name]), n, result, seen
    return out


def render(loaded) -> tuple:
    from engine.inside import inside

    session = Session(loaded, SamplingSettings(greedy=True))
    session.set_prompt("The capital of France is")
    before = make_result(session)
    session.step()
    prefill = make_result(session)
    session.step()
    result = make_result(session)
    texts_seen: list[tuple[str, str]] = []
    for key in texts()["panels"]:
        texts_seen += [(f"help {key} (before)", _plain(panel_help(key, before)[1])), (f"help {key}", _plain(panel_help(key, result)[1]))]
    texts_seen += [(f"glossary {term}", text) for term, text in glossary_entries(result).items()]
    for r in (prefill, result):
        n = flow_numbers(r, 1, 1)
        texts_seen += [(f"tour {stage} (step {n.step})", sentence(stage, n)) for stage, _box in STAGES]
        texts_seen += [(f"flow {line} (step {n.step})", text) for line, text in flow_texts(n).items()]
        texts_seen += [("flow ln_final title", box_title("ln_final", flow_texts(n)))]
        texts_seen += [(f"flow {line} wording {i} (step {n.step})", text)  # the shorter ones a small box shows
                       for line, wordings in flow_variants(n).items() for i, text in enumerate(wordings[1:], start=2)]
    arch = result.info.architecture
    texts_seen += [(f"model dialog {what}", f"{what}: {value}") for what, value in architecture_rows(arch)]
    texts_seen += [("flow model line", architecture_line(arch))]
    texts_seen += [(f"inside {where}", text) for where, text in inside_texts(result, inside(session, kv_layers=(1,)), loaded)]
    return arch, flow_numbers(result, 1, 1), result, texts_seen


def inside_texts(result, trace, loaded) -> list[tuple[str, str]]:
    """Every caption, title and sentence the Inside view shows (visible widgets only) for ``trace``."""
    from PySide6.QtWidgets import QGroupBox, QLabel

    from app.panels.inside_panel import InsidePanel
    from app.logic.state import AppState
    from app.window import theme as th

    state = AppState(th.NORMAL, th.PROJECTOR)
    panel = InsidePanel(state)
    state.set_result(result)
    state.set_layer(1)
    state.set_head(1)
    ids = {trace.token_id, trace.next_id, *(int(i) for i in trace.lens_ids.ravel())}
    panel.show_inside(trace, {i: loaded.tokenizer.piece(i) for i in ids})
    seen = []
    for box in panel.findChildren(QGroupBox):
        if box.isVisibleTo(panel):
            seen.append((f"box {box.title()[:30]}", box.title()))
    for label in panel.findChildren(QLabel):
        if label.isVisibleTo(panel) and label.text():
            seen.append((f"label {label.text()[:30]}", _plain(label.text())))
    panel.deleteLater()
    return seen


def false_sentences(arch, texts_seen) -> list[str]:
    """'where: claim: sentence' for each rendered text that claims what ``arch`` says is false."""
    wrong = []
    for claim, pattern, holds in PHRASES:
        if holds(arch):
            continue
        for where, text in texts_seen:
            if re.search(pattern, text):
                wrong.append(f"{where}: says {claim!r}, false for this model: {text}")
    return wrong


@pytest.mark.parametrize("name", list(CASES))
def test_no_sentence_claims_a_fact_the_model_does_not_have(rendered, name):
    arch, _n, _result, texts_seen = rendered[name]
    assert false_sentences(arch, texts_seen) == []
    for where, text in texts_seen:
        assert "{" not in text and "?" not in re.findall(r"\?(?=\d)", text), (where, text)


@pytest.mark.parametrize("name", list(CASES))
def test_each_true_fact_is_said_somewhere(rendered, name):
    """The phrases are not vacuous: each fact the model has is said by some rendered sentence."""
    arch, _n, _result, texts_seen = rendered[name]
    every = "\n".join(text for _where, text in texts_seen)
    said = [claim for claim, pattern, holds in PHRASES if holds(arch) and re.search(pattern, every)]
    unsaid = [claim for claim, pattern, holds in PHRASES if holds(arch) and not re.search(pattern, every) and claim not in UNSAID]
    assert unsaid == [] and said


@pytest.mark.parametrize("name", list(CASES))
def test_the_mlp_sizes_and_score_scale_are_the_models(rendered, name):
    arch, n, _result, texts_seen = rendered[name]
    every = "\n".join(text for _where, text in texts_seen)
    assert f"{arch.d_model} → {arch.d_mlp}" in every and f"{arch.d_mlp} → {arch.d_model}" in every
    scales = {float(s) for s in re.findall(r"× (0\.\d{4})", "\n".join(t for w, t in texts_seen if "label" in w))}
    assert scales == {round(arch.score_scale, 4)}  # Inside's scores: the model's own factor, whatever its rule


@pytest.mark.parametrize("name", list(CASES))
def test_the_flows_numbers_are_the_step_records(rendered, name):
    arch, n, result, _texts = rendered[name]
    rec = result.trace.record
    lines = flow_texts(n)
    x = rec.resid[-1, rec.n_new - 1].astype(np.float64)
    if arch.norm == "LayerNorm":
        x = x - x.mean()
    normalised = np.linalg.norm(x / np.sqrt((x ** 2).mean() + arch.norm_eps))
    out = np.linalg.norm(rec.final_hidden.astype(np.float64))
    assert lines["ln_final_lengths"] == f"|x| {np.linalg.norm(rec.resid[-1, rec.n_new - 1]):.1f} → {normalised:.1f} → {out:.1f}"
    assert 0.95 * np.sqrt(arch.d_model) < normalised <= np.sqrt(arch.d_model)  # about √d (less only by the epsilon)
    assert sentence("ln_final", n).endswith(f"its length is {out:.1f}.")
    embed = np.linalg.norm(rec.token_embed[-1].astype(np.float64) + rec.pos_embed[-1])
    assert f"|x| {embed:.1f}" in lines["embedding_length"]


def test_both_command_lines_name_no_family_and_the_real_default(capsys):
    from app.window.main import parse_args as window_args
    from engine.cli import parse_args as engine_args

    for parse in (window_args, engine_args):
        with pytest.raises(SystemExit):
            parse(["--help"])
    out = capsys.readouterr().out
    assert not re.search(r"GPT-2|Llama|Qwen|Granite|Mixtral", out)
    assert "SmolLM2-135M-Instruct" in out and "gpt2-tiny-demo" in out


def test_a_flipped_fact_is_named_with_its_sentence(rendered):
    """Report SmolLM2-like tying wrongly (a tied head as separate): the check names the sentences
    that became false, with the words that make them so."""
    arch, _n, _result, texts_seen = rendered["llama-tied"]
    wrong = false_sentences(replace(arch, tied_lm_head=False), texts_seen)
    assert any(w.startswith("tour lm_head") and "token embedding table itself" in w for w in wrong), wrong
    assert any(w.startswith("flow lm_head_matrix") for w in wrong)
