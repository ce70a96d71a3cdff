"""``python -m engine``: step a prompt in the terminal and print what each step chose."""

from __future__ import annotations

import argparse
import json
import math
import sys

from dataclasses import replace

from .defaults import DEFAULT_PROMPT, DEFAULT_SETTINGS, model_settings
from .sampling import SamplingSettings
from .errors import GenerationStopped, NextTokenError, SettingsError
from .runtime import add_runtime_arguments, runtime_of
from .prompt_file import read_prompt_file
from .tokens import clip


def build_parser() -> argparse.ArgumentParser:
    """The command line's options (scripts/cli_table.py writes the README's table from them)."""
    p = argparse.ArgumentParser(
        prog="python -m engine",
        description="Step a language model through a prompt one token at a time and print each step.",
    )
    text = p.add_mutually_exclusive_group()
    text.add_argument("--prompt", default=DEFAULT_PROMPT, help=f"text to continue (default: {DEFAULT_PROMPT!r})")
    text.add_argument("--prompt-file", metavar="PATH", help="read the prompt from this UTF-8 file instead (less its final line break)")
    p.add_argument("--model", default=None, help="model folder or hub id (default: the bundled tiny demo model, gpt2-tiny-demo)")
    p.add_argument("--steps", type=int, default=5, help="new tokens to generate (default: 5)")
    p.add_argument("--greedy", action="store_true", default=None, help="always take the most likely token")
    d = DEFAULT_SETTINGS
    own = "the model's generation_config.json when it sets do_sample, else"
    p.add_argument("--temperature", type=float, default=None, help=f"0 to 100, 0 means greedy (default: {own} {d.temperature:g})")
    p.add_argument("--top-k", type=int, default=None, help=f"keep the k most likely tokens, 0 = off (default: {own} {d.top_k}, as the window)")
    p.add_argument("--top-p", type=float, default=None, help=f"nucleus sampling mass, 1 = off (default: {own} {d.top_p:g})")
    p.add_argument("--repetition-penalty", type=float, default=None, help=f"1 to 10, 1 = off (default: {own} {d.repetition_penalty:g})")
    p.add_argument("--seed", type=int, default=d.seed, help=f"seed for sampling (default: {d.seed})")
    p.add_argument("--no-cache", action="store_true",
                   help="run the whole sequence through the model at every step, as a model without a KV cache must")
    p.add_argument("--truncate", action="store_true", help="keep the last tokens of a prompt longer than the context, leaving a quarter of it (or 32 tokens) to generate")
    p.add_argument("--stop", action="append", default=[], metavar="TEXT",
                   help="stop once the generated text reaches TEXT (repeat for several; the stop message names which)")
    p.add_argument("--chat", action="store_true",
                   help="send the prompt as a user turn through the tokenizer's chat template; stops at the end of the turn")
    p.add_argument("--system", default=None, help="with --chat: a system message before the user turn")
    p.add_argument("--json", action="store_true", help="print one JSON object per step instead of a table")
    p.add_argument("--export", metavar="FILE.npz", help="save the session (see README, 'Session files')")
    p.add_argument("--describe", action="store_true",
                   help="print what the model is made of (engine.architecture.Architecture) as JSON, and exit")
    add_runtime_arguments(p)
    return p


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    return build_parser().parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        if args.prompt_file:
            args.prompt = read_prompt_file(args.prompt_file)
        return run(args)
    except SettingsError as exc:  # named as the flag that set it
        print(f"error: {exc.naming('--' + exc.setting.replace('_', '-'))}", file=sys.stderr)
        return 2
    except NextTokenError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


def run(args: argparse.Namespace) -> int:
    from .session_write import save_session
    from .loading import load_model
    from .chat import ChatTurn
    from .session import Session

    if args.describe:
        print(json.dumps(load_model(args.model).info.architecture.to_dict(), indent=2, ensure_ascii=False))
        return 0
    if args.steps < 1:
        raise NextTokenError(f"--steps must be at least 1 (got {args.steps}).")  # before the model loads
    runtime = runtime_of(args)
    chosen_settings(args, ())  # a bad flag too
    loaded = load_model(args.model, runtime=runtime)
    settings, source = chosen_settings(args, loaded.info.generation)
    session = Session(loaded, settings, max_new_tokens=args.steps, use_cache=not args.no_cache,
                      stop_sequences=args.stop)
    if args.chat:
        session.set_chat(ChatTurn(args.system or "", args.prompt))  # --export keeps the turn
    else:
        session.set_prompt(args.prompt, truncate=args.truncate)
    if not args.json:
        print(f"model: {session.info.label}, on {session.info.runs_on}; sampling: {settings.describe()} ({SOURCES[source]})")
        if session.info.remote_host:
            cache = f"no KV cache: every step is a full forward pass over the text so far on {session.info.remote_host}, the time includes the network"
        else:
            cache = "KV cache" if session.use_cache else "no KV cache: every step runs the whole sequence"
        print(f"prompt: {len(session.prompt_ids)} tokens; {cache}; u: the draw's random number")
        if args.chat:
            print("chat prompt: " + " ".join(session.loaded.tokenizer.piece(i) for i in session.prompt_ids))
        print(f"{'step':>4}  {'token':<14} {'id':>6} {'prob':>7} {'u':>6}  {'top-5 alternatives':<58} {'cached':>6} {'ms':>7}")
    stop = ""
    while True:
        try:
            trace = session.step()
        except GenerationStopped as exc:
            stop = str(exc)
            break
        print(_json_row(trace, source) if args.json else _table_row(trace), flush=True)
    if not args.json:
        print(stop)
        print(f"text: {session.text()!r}")
    if args.export:
        path = save_session(session, args.export, inside=not session.info.remote_host)  # the path needs the weights
        print(f"saved {path}", file=sys.stderr if args.json else sys.stdout)
    return 0


FLAGS = ("greedy", "temperature", "top_k", "top_p", "repetition_penalty")
SOURCES = {
    "generation_config.json": "the model's generation_config.json",
    "defaults": "the defaults: the model's generation_config.json sets no do_sample",
    "command line": "as given",
}
"""Where the settings came from (``--json``'s ``settings.from``), and how the table says it."""


def chosen_settings(args: argparse.Namespace, generation) -> tuple[SamplingSettings, str]:
    """The settings to run with: the model's own (``model_settings``, from its generation_config.json)
    or the defaults, with every flag given over them; and where they came from (a key of ``SOURCES``:
    "command line" once any flag is given)."""
    base = model_settings(generation)
    given = {name: getattr(args, name) for name in FLAGS if getattr(args, name) is not None}
    settings = replace(base, seed=args.seed, **given)
    if given:
        return settings, "command line"
    return settings, "generation_config.json" if "do_sample" in dict(generation) else "defaults"


def _alternatives(trace) -> list[tuple[str, int, float]]:
    """The five most likely tokens (by penalised logit, the order of the final distribution)."""
    probs = trace.distribution.probs
    return [(piece, int(i), float(probs[i])) for piece, i in zip(trace.candidate_pieces[:5], trace.candidate_ids[:5])]


def _table_row(trace) -> str:
    alts = "  ".join(f"{piece} {_percent(p)}" for piece, _, p in _alternatives(trace))
    r = trace.record
    return (
        f"{trace.step:>4}  {clip(trace.chosen_piece, 14):<14} {trace.chosen:>6} {_percent(trace.chosen_prob):>7} "
        f"{'-' if math.isnan(r.draw_u) else f'{r.draw_u:.4f}':>6}  "
        f"{clip(alts, 58):<58} {r.kv.positions:>6} {r.step_ms:>7.1f}"
    )


def _json_row(trace, source: str) -> str:
    r = trace.record
    s = r.settings
    return json.dumps(
        {
            "step": trace.step,
            "settings": {"greedy": s.greedy, "temperature": s.temperature, "top_k": s.top_k, "top_p": s.top_p,
                         "repetition_penalty": s.repetition_penalty, "seed": s.seed, "from": source},
            "token": trace.chosen_piece,
            "id": trace.chosen,
            "prob": round(trace.chosen_prob, 6),
            "rank": trace.chosen_rank,
            "entropy_bits": round(trace.entropy_bits, 4),
            "chosen_by": r.chosen_by,
            "draw_u": None if math.isnan(r.draw_u) else r.draw_u,
            "top5": [{"token": piece, "id": i, "prob": round(p, 6)} for piece, i, p in _alternatives(trace)],
            "cached_positions": r.kv.positions,
            "kv_bytes": r.kv.total_bytes,
            "forward_ms": round(r.forward_ms, 3),
            "step_ms": round(r.step_ms, 3),
            "stop": trace.stop_reason,
            "stop_message": trace.stop_message,
        },
        ensure_ascii=False,
    )


def _percent(p: float) -> str:
    """A probability as a percentage that never rounds a possible token to 0%."""
    if p >= 0.1:
        return f"{p:.0%}" if p < 0.995 else f"{p:.1%}"
    if p >= 0.001:
        return f"{p:.1%}"
    return f"{p * 100:.1g}%" if p > 0 else "0%"

