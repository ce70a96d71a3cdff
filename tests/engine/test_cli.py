"""The terminal: `python -m engine` prints a table or JSON offline and exits non-zero on bad input."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from engine.cli import main
from engine.session_read import read_session


def test_table_with_the_bundled_model(capsys):
    assert main(["--prompt", "The cat sat on the", "--steps", "5", "--greedy"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("model: gpt2-tiny-demo (tiny demo model")
    header = out[2]
    for column in ("step", "token", "id", "prob", "top-5 alternatives", "cached", "ms"):
        assert column in header
    rows = out[3:8]
    assert [int(r.split()[0]) for r in rows] == [0, 1, 2, 3, 4]
    assert [int(r.split()[-2]) for r in rows] == [5, 6, 7, 8, 9]  # cached positions
    assert out[8] == "Stopped: reached the limit of 5 new tokens."
    assert out[9].startswith("text: 'The cat sat on the")


def test_json_rows_match_a_direct_session(capsys, demo_model):
    from engine import SamplingSettings, Session

    assert main(["--steps", "3", "--json", "--temperature", "0.7", "--top-k", "10", "--seed", "4"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    session = Session(demo_model, SamplingSettings(temperature=0.7, top_k=10, seed=4))
    session.set_prompt("The cat sat on the")
    for row in rows:
        trace = session.step()
        assert row["id"] == trace.chosen and row["prob"] == pytest.approx(trace.chosen_prob, abs=1e-6)
        assert row["draw_u"] == trace.record.draw_u  # the u that drew it, exactly
        assert [alt["id"] for alt in row["top5"]] == trace.candidate_ids[:5].tolist()
    assert rows[-1]["stop"] == "max_new_tokens"


def test_export_keys_shapes_and_values(tmp_path, capsys, demo_model):
    path = tmp_path / "run.npz"
    assert main(["--steps", "4", "--seed", "9", "--top-p", "0.9", "--export", str(path)]) == 0
    saved = read_session(path)
    data, meta = saved.arrays, saved.meta
    P, S, L, H, V, d = 5, 4, 4, 4, 50257, 256
    assert data["input_ids"].shape == (P + S,) and int(data["prompt_len"]) == P
    assert data["chosen"].tolist() == data["input_ids"][P:].tolist() == data["node_chosen"].tolist()
    assert data["pass_logits"].shape == data["probs"].shape == (S, V)
    assert data["pass_logits"].dtype == data["probs"].dtype == np.float32
    assert data["pass_attn"].shape == (L, H, P * P + sum(P + s for s in range(1, S))) and data["pass_attn"].dtype == np.float16
    assert data["pass_attn_r"].tolist() == [P, 1, 1, 1] and data["pass_attn_rows"].tolist() == [*range(P), P, P + 1, P + 2]
    assert data["pass_resid"].shape == (L + 1, P + S - 1, d)
    assert data["kv_len"].tolist() == [5, 6, 7, 8]
    assert data["kv_bytes"].tolist() == [2 * L * n * d * 4 for n in (5, 6, 7, 8)]
    assert meta["format"] == "nexttoken-session/4" and meta["model"]["name"] == "gpt2-tiny-demo" and meta["seed"] == 9
    assert meta["settings_table"][0]["top_p"] == 0.9 and "transformers" in meta["versions"]
    for s in range(S):  # every chosen token was possible under the distribution it came from
        assert data["probs"][s, data["chosen"][s]] > 0
        np.testing.assert_allclose(data["probs"][s].sum(), 1, atol=1e-5)


@pytest.mark.parametrize(
    "args, words",
    [
        (["--temperature", "-1"], "--temperature must be between 0 and 100"),
        (["--top-p", "2"], "--top-p must be between 0.01 and 1 (1 means off) (got 2.0)"),  # the flag, not "top p"
        (["--repetition-penalty", "0.5"], "--repetition-penalty must be between 1 and 10"),
        (["--seed", "-1"], "--seed must be a whole number from 0"),
        (["--prompt", ""], "The prompt is empty"),
        (["--steps", "0"], "--steps must be at least 1"),
        (["--model", "/no/such/folder"], "does not exist"),
        (["--prompt", " x" * 300], "at most 256 tokens"),
    ],
)
def test_bad_input_exits_non_zero_with_one_line(capsys, args, words):
    assert main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and words in err[0]


@pytest.mark.slow  # over 5 s
def test_module_entry_point_runs_offline():
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    done = subprocess.run(
        [sys.executable, "-m", "engine", "--prompt", "The cat sat on the", "--steps", "5"],
        capture_output=True, text=True, env=env, timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    assert len([line for line in done.stdout.splitlines() if line[:4].strip().isdigit()]) == 5


def test_no_cache_run_writes_the_same_keys(tmp_path, capsys):
    cached, uncached = tmp_path / "cached.npz", tmp_path / "uncached.npz"
    assert main(["--steps", "4", "--greedy", "--export", str(cached)]) == 0
    capsys.readouterr()
    assert main(["--steps", "4", "--greedy", "--no-cache", "--export", str(uncached)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert "no KV cache: every step runs the whole sequence" in out[1]
    rows = out[3:7]
    assert [r.split()[-2] for r in rows] == ["0"] * 4  # nothing cached
    assert all(float(r.split()[-1]) > 0 for r in rows)  # the time per step
    assert all(r.split()[4] == "-" for r in rows)  # greedy: no u drawn
    a, b = read_session(cached).arrays, read_session(uncached).arrays
    assert set(a) == set(b)
    assert b["chosen"].tolist() == a["chosen"].tolist()
    assert b["kv_len"].tolist() == b["kv_bytes"].tolist() == [0] * 4 and a["kv_len"].tolist() == [5, 6, 7, 8]
    assert a["meta"]["use_cache"] is True and b["meta"]["use_cache"] is False
    for key in a:
        if key.startswith(("pass_logits", "probs", "pass_attn", "pass_resid")):
            np.testing.assert_allclose(b[key].astype(np.float32), a[key].astype(np.float32), atol=1e-3 if "attn" in key else 1e-5, rtol=0, err_msg=key)


def test_table_shows_the_draw_u(capsys):
    assert main(["--steps", "3", "--seed", "5"]) == 0
    rows = capsys.readouterr().out.splitlines()[3:6]
    us = [float(r.split()[4]) for r in rows]
    assert all(0 <= u < 1 for u in us) and len(set(us)) == 3


def test_prompt_file_is_the_prompt_less_its_final_line_break(tmp_path, capsys):
    path = tmp_path / "prompt.txt"
    path.write_text("The cat sat on the\n", encoding="utf-8")
    assert main(["--prompt-file", str(path), "--steps", "1", "--greedy", "--json"]) == 0
    from_file = json.loads(capsys.readouterr().out.splitlines()[0])
    assert main(["--prompt", "The cat sat on the", "--steps", "1", "--greedy", "--json"]) == 0
    typed = json.loads(capsys.readouterr().out.splitlines()[0])
    assert [from_file[k] for k in ("id", "prob", "top5")] == [typed[k] for k in ("id", "prob", "top5")]
    assert main(["--prompt-file", str(tmp_path / "missing.txt")]) == 2
    assert capsys.readouterr().err.startswith("error: Cannot read the prompt file")
    path.write_bytes(b"\xff\xfe")
    assert main(["--prompt-file", str(path)]) == 2
    assert "is not UTF-8 text" in capsys.readouterr().err
