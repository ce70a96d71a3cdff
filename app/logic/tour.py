"""The presenter's tour: the stages of one step, in the order the model computes, one sentence each.

Plain Python, no Qt. The sentences' templates live in ``resources/help/<language>.json`` under
"tour" (stage -> template with ``{name}`` fields), so they can be corrected and translated; the
numbers come from ``app.logic.flow_numbers`` (the step's own record), the same the flow view draws.
"""

from __future__ import annotations

import math

from app.logic.flow_numbers import FlowNumbers
from app.logic.help import words
from app.logic.why_numbers import largest, waterfall

# (stage, the flow box it lights up), in the order the model computes
STAGES: tuple[tuple[str, str], ...] = (
    ("tokens", "tokens"),
    ("embedding", "embedding"),
    ("attention", "attention"),
    ("scores", "maths"),  # the selected head's maths (app.panels.flow_attention_strip)
    ("mlp", "mlp"),
    ("stream", "blocks"),
    ("kv", "kv"),
    ("ln_final", "ln_final"),
    ("lm_head", "lm_head"),
    ("logits", "logits"),
    ("sampling", "sampling"),
    ("draw", "chosen"),
    ("appended", "appended"),
    ("why", "chosen"),  # the chosen token's logit split into its parts (engine.attribution, asked for on this stage)
)


def quoted(piece: str) -> str:
    """A token's text between quotes, written as every view writes it (a leading space as ␣)."""
    return f"“{piece}”"


def chosen_experts(n: FlowNumbers) -> str:
    """The experts the selected block's router chose for the newest position ("experts 3, 5")."""
    if n.experts is None:
        return "the chosen experts"
    return ("expert " if len(n.experts) == 1 else "experts ") + ", ".join(str(int(e)) for e in n.experts)


def values(n: FlowNumbers) -> dict:
    """The fields a tour sentence may use, from the step's numbers (the model's facts come from
    ``app.logic.model_words.values``)."""
    L = n.layer
    kept = dict(n.kept_after)
    return dict(
        step=n.step, n_new=len(n.input_ids), token_id=n.token_id, token=quoted(n.token_piece), position=n.position,
        vocab=n.vocab, d_model=n.d_model, n_layer=n.n_layer, n_head=n.n_head, context=n.n_positions,
        token_norm=n.token_norm, pos_norm=n.pos_norm, embed_norm=n.embed_norm,
        layer=L, head=n.head, top_weight=n.top_weight, top_key=n.top_key, top_key_piece=quoted(n.top_key_piece),
        attn_norm=float(n.attn_norms[L]), mlp_norm=float(n.mlp_norms[L]),
        resid_pre=float(n.resid_norms[L]), resid_mid=float(n.mid_norms[L]), resid_post=float(n.resid_norms[L + 1]),
        final_norm=float(n.resid_norms[-1]),
        kv_added=n.kv_added, kv_positions=int(n.kv_positions.max()) if len(n.kv_positions) else 0,
        kv_megabytes=n.kv_bytes / 2**20, kv_kilobytes=n.kv_bytes / 1024,
        ln_in=n.ln_in_norm, ln_normalized=n.ln_normalized_norm, ln_out=n.ln_out_norm,
        top_piece=quoted(n.top_pieces[0]), top_logit=n.top_logits[0], top_model_prob=n.top_model_probs[0],
        settings=n.settings_text, kept=kept["top-p"], kept_top_k=kept["top-k"],
        chosen=quoted(n.chosen_piece), chosen_id=n.chosen_id, chosen_rank=n.chosen_rank,
        chosen_logit=n.chosen_logit, chosen_model_prob=n.chosen_model_prob, chosen_sampling_prob=n.chosen_sampling_prob,
        u=n.draw_u, draw_start=n.draw_start, draw_end=n.draw_end, next_position=n.context_len,
        chosen_experts=chosen_experts(n),
    )


def why_values(a) -> dict:
    """The why stage's fields from ``a`` (an engine.attribution_trace.Attribution of the chosen
    token): its logit, how many parts it splits into, the two largest pushes and the largest pull,
    each named as the Why view names it with its part ("block 23's attention (+2.82)")."""
    pushes, pulls = largest(a, 2)
    named = lambda bars, i: f"{bars[i].label} ({bars[i].value:+.2f})" if i < len(bars) else "none"  # noqa: E731
    return dict(why_logit=a.logit, why_parts=len(waterfall(a)), push_1=named(pushes, 0), push_2=named(pushes, 1),
                pull_1=named(pulls, 0))


def template_key(stage: str, n: FlowNumbers) -> str:
    """The template a stage uses for this step (the draw reads differently when greedy or chosen by
    hand); what the model is made of chooses within the template (``app.logic.model_words``)."""
    if stage == "draw":
        if n.chosen_by == "user":
            return "draw_user"
        if n.greedy or math.isnan(n.draw_u):
            return "draw_greedy"
    if stage == "tokens" and len(n.input_ids) > 1:
        return "tokens_prefill"
    return stage


def sentence(stage: str, n: FlowNumbers, language: str = "en", why=None, loaded: bool = True) -> str:
    """The tour's sentence for ``stage`` with this step's numbers, in its variant for the model;
    the why stage reads ``why``, the Attribution of this step's chosen token (None: on its way, or
    not to be had when the model is not ``loaded``: a saved session viewed without it)."""
    if stage == "why":
        key, extra = ("why", why_values(why)) if why is not None else ("why_wait" if loaded else "why_no_model", {})
        return words("tour", key, n.arch, values(n) | extra, language)
    return words("tour", template_key(stage, n), n.arch, values(n), language)


def stage_index(name_or_number: str) -> int:
    """The stage ``--tour`` names: a stage's name ("ln_final") or its number from 1; ValueError for neither."""
    names = [stage for stage, _box in STAGES]
    if name_or_number in names:
        return names.index(name_or_number)
    if name_or_number.isdigit() and 1 <= int(name_or_number) <= len(names):
        return int(name_or_number) - 1
    raise ValueError(f"no tour stage {name_or_number!r}: a number from 1 to {len(names)} or one of {', '.join(names)}")


class Tour:
    """Where the presenter is in the tour: a stage index that moves forward and back, no wrapping."""

    def __init__(self):
        self.index = 0

    @property
    def stage(self) -> str:
        return STAGES[self.index][0]

    @property
    def box(self) -> str:
        """The flow box this stage lights up."""
        return STAGES[self.index][1]

    def forward(self) -> bool:
        """Move to the next stage; False at the last one (nothing moves)."""
        if self.index + 1 >= len(STAGES):
            return False
        self.index += 1
        return True

    def back(self) -> bool:
        """Move to the previous stage; False at the first one."""
        if self.index == 0:
            return False
        self.index -= 1
        return True
