"""``--what-if`` from the command line: the whole app, in a child process, on the demo model. After
one step the Why view's second page runs the pair: the patching map of the site ``--patch`` names
is drawn (blocks × positions, both prompts' tokens on its axes), the pair's split is drawn beside it,
and the picture is taken once both came back."""

from __future__ import annotations


from engine import paths

from .helpers import run_main_in_child

REPORT = """
page = window.why_view.patch
answer, pair = page.answer, page.compare_answer
image = page.image.image
seen.update(
    view=window.views.currentWidget() is window.why_view, page=window.why_view.pages.currentIndex(),
    steps=len(result.records), n_layer=result.n_layer, n_prompt=len(result.prompt_ids),
    drawn=None if image is None else list(image.shape), site=answer and answer.site, text=answer and answer.text,
    bottom=[t for _, t in page.plot.getAxis("bottom")._tickLevels[0]] if answer else [],
    top=[t for _, t in page.plot.getAxis("top")._tickLevels[0]] if answer else [],
    caption=page.caption.text(), pair_caption=page.compare_caption.text(),
    bars=len(page.diff_bars.opts["y"]), pair_text=pair and pair.text,
)
"""


def test_what_if_draws_the_map_and_the_pair(tmp_path):
    shot = tmp_path / "shot.png"
    # the demo model named: without --model a fresh home opens SmolLM2 where set-up fetched it (30
    # blocks patched at every position: 14 s of the fast run instead of 6)
    argv = ["--model", str(paths.demo_model_dir()), "--prompt", "The capital of France is", "--what-if", "The capital of Germany is", "--patch", "mlp_out",
            "--engine", "thread", "--size", "1280x720", "--screenshot", str(shot)]
    seen = run_main_in_child(tmp_path, argv, REPORT)
    assert seen["code"] == 0, seen
    assert seen["view"] and seen["page"] == 1 and seen["steps"] == 1, seen  # one step ran first
    assert seen["n_layer"] == 4, seen  # the demo model's
    L, P = seen["n_layer"], seen["n_prompt"]
    assert seen["drawn"] == [L, P], seen  # the map: blocks down, positions across
    assert seen["site"] == "mlp_out" and seen["text"] == seen["pair_text"] == "The capital of Germany is"
    assert "␣France" in seen["bottom"] and "␣Germany" in seen["top"], seen
    assert "block L's MLP output at position i" in seen["caption"]
    assert seen["bars"] == 2 * L and "first − second" in seen["pair_caption"], seen  # attention and MLP, each block
    assert shot.stat().st_size > 10_000
