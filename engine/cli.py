"""``python -m engine``: step a prompt in the terminal and print what each step chose."""

from __future__ import annotations

import argparse
import json
import math
import sys

from .defaults import DEFAULT_PROMPT, DEFAULT_SETTINGS
from .errors import GenerationStopped, NextTokenError, SettingsError
from .prompt_file import read_prompt_file
from .tokens import clip



def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m engine",
        description="Step a language model (GPT-2, Llama, Qwen, GraniteMoe, ...) through a prompt one token at a time and print each step.",
    )
    text = p.add_mutually_exclusive_group()
    text.add_argument("--prompt", default=DEFAULT_PROMPT, help=f"text to continue (default: {DEFAULT_PROMPT!r})")
    text.add_argument("--prompt-file", metavar="PATH", help="read the prompt from this UTF-8 file instead (less its final line break)")
    p.add_argument("--model", default=None, help="model folder or hub id (default: the bundled tiny demo model)")
    p.add_argument("--steps", type=int, default=5, help="new tokens to generate (default: 5)")
    p.add_argument("--greedy", action="store_true", help="always take the most likely token")
    d = DEFAULT_SETTINGS
    p.add_argument("--temperature", type=float, default=d.temperature, help=f"0 to 100, 0 means greedy (default: {d.temperature:g})")
    p.add_argument("--top-k", type=int, default=d.top_k, help=f"keep the k most likely tokens, 0 = off (default: {d.top_k}, as the window)")
    p.add_argument("--top-p", type=float, default=d.top_p, help=f"nucleus sampling mass, 1 = off (default: {d.top_p:g})")
    p.add_argument("--repetition-penalty", type=float, default=d.repetition_penalty, help=f"1 to 10, 1 = off (default: {d.repetition_penalty:g})")
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
    return p.parse_args(argv)


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
    from .session_file import save_session
    from .loading import load_model
    from .sampling import SamplingSettings
    from .chat import ChatTurn
    from .session import Session

    settings = SamplingSettings(
        greedy=args.greedy,
        temperature=args.temperature,
        top_k=args.top_k,
        top_p=args.top_p,
        repetition_penalty=args.repetition_penalty,
        seed=args.seed,
    )
    if args.steps < 1:
        raise NextTokenError(f"--steps must be at least 1 (got {args.steps}).")  # before the model loads
    session = Session(load_model(args.model), settings, max_new_tokens=args.steps, use_cache=not args.no_cache,
                      stop_sequences=args.stop)
    if args.chat:
        session.set_chat(ChatTurn(args.system or "", args.prompt))  # --export keeps the turn
    else:
        session.set_prompt(args.prompt, truncate=args.truncate)
    if not args.json:
        print(f"model: {session.info.label}; sampling: {settings.describe()}")
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
        print(_json_row(trace) if args.json else _table_row(trace), flush=True)
    if not args.json:
        print(stop)
        print(f"text: {session.text()!r}")
    if args.export:
        path = save_session(session, args.export, inside=True)
        print(f"saved {path}", file=sys.stderr if args.json else sys.stdout)
    return 0


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


def _json_row(trace) -> str:
    r = trace.record
    return json.dumps(
        {
            "step": trace.step,
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

