"""Model → About this model, the empty System field's grey text, --tour STAGE and the small
wording rules the teacher's screen reads (KiB, percentages)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from app.logic.model_words import architecture_rows, system_placeholder
from app.logic.wording import human_bytes
from app.logic.tour import STAGES, stage_index
from app.logic.wording import percent


@pytest.fixture(scope="module")
def arch(tiny_model):
    return tiny_model.info.architecture


def test_the_dialog_shows_the_descriptions_rows(qtbot, tiny_model, arch):
    from app.window.model_dialog import ModelDialog

    dialog = ModelDialog()
    qtbot.addWidget(dialog)
    dialog.show_model(tiny_model.info)
    assert dialog.rows() == architecture_rows(arch)
    rows = dict(dialog.rows())
    assert rows["position"].startswith("a learned table") and rows["LM head"].endswith("(tied)")
    assert rows["MLP"] == f"{arch.d_model} → {arch.d_mlp}, GELU, {arch.d_mlp} → {arch.d_model}"
    separate = dict(architecture_rows(replace(arch, tied_lm_head=False, position="rotary", rope_dims=16, rope_base=1e4)))
    assert separate["LM head"] == "a matrix of its own (not tied)" and "RoPE" in separate["position"]


def test_the_empty_system_field_says_what_the_template_writes(arch):
    smol = replace(arch, chat_template=True, default_system="You are a helpful AI assistant named SmolLM, trained by Hugging Face")
    assert system_placeholder(smol)[0] == ("Empty: the model's chat template writes its own system message: "
                                        "“You are a helpful AI assistant named SmolLM, trained by Hugging Face”")
    assert "adds none" in system_placeholder(replace(arch, chat_template=True, default_system=""))[0]
    assert system_placeholder(None) == ("System message (optional)",)


@pytest.mark.parametrize("width", [250, 350, 520, 1600])
def test_the_empty_system_fields_text_fits_it_whole(qtbot, arch, width):
    """At 1280 x 720 in projector mode the field is about 350 px: its grey text is a shorter wording,
    never one cut with an ellipsis, and the whole sentence is in its tooltip."""
    from app.panels.fitted_text import PlaceholderFitEdit
    from app.window import theme as th

    smol = replace(arch, chat_template=True, default_system="You are a helpful AI assistant named SmolLM, trained by Hugging Face")
    wordings = system_placeholder(smol)
    edit = PlaceholderFitEdit(wordings)
    qtbot.addWidget(edit)
    edit.setFont(th.PROJECTOR.font())
    edit.resize(width, 40)
    edit.show()
    shown = edit.placeholderText()
    assert shown in wordings and "…" not in shown
    assert edit.fontMetrics().horizontalAdvance(shown) <= edit.contentsRect().width() - 8
    assert (shown == wordings[0]) == (width == 1600) and wordings[0] in edit.toolTip()


def test_tour_stages_by_name_or_number():
    assert stage_index("ln_final") == [s for s, _ in STAGES].index("ln_final")
    assert stage_index("1") == 0 and stage_index(str(len(STAGES))) == len(STAGES) - 1
    for wrong in ("0", str(len(STAGES) + 1), "norm"):
        with pytest.raises(ValueError, match="no tour stage"):
            stage_index(wrong)


def test_bytes_are_powers_of_1024_and_small_probabilities_keep_their_figures():
    assert human_bytes(414_720) == "405.0 KiB" and human_bytes(3 << 20) == "3.0 MiB" and human_bytes(1000) == "1000 B"
    assert percent(0.00004) == "0.004%" and percent(0.123) == "12.3%" and percent(0.0) == "0.0%"


def test_the_command_line_takes_a_tour_stage():
    from app.window.main import parse_args

    assert parse_args(["--tour", "lm_head"]).tour == stage_index("lm_head")
    assert parse_args(["--tour", "7"]).tour == 6 and parse_args([]).tour is None
    with pytest.raises(SystemExit):
        parse_args(["--tour", "norm"])
