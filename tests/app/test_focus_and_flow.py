"""The Flow borrows the prompt panel from the Overview; a focused panel hides it in the Overview. The
prompt stays on screen in the Flow whatever was focused, and the Overview gets it back as its focus
wants it (shown alone, hidden behind another panel, or above every panel)."""

from __future__ import annotations

import pytest


def prompt_shown(window) -> bool:
    return window.tokens.isVisible()


@pytest.mark.parametrize("name", ["embeddings", "attention", "candidates", "sampling", "cache", "tokens"])
def test_the_flow_shows_the_prompt_after_any_focus(window, name):
    panel = window.panel_named(name)
    window.show_view("overview")
    window.focus.toggle(panel)
    assert prompt_shown(window) == (name == "tokens")
    window.show_view("flow")
    assert prompt_shown(window) and window.tokens.parentWidget() is window.flow_view
    assert not window.tokens.expanded  # the Flow's prompt keeps its rows: the picture gets the height
    window.show_view("overview")
    assert prompt_shown(window) == (name == "tokens")  # as the focus wants it
    window.focus.toggle(None)
    assert prompt_shown(window)


def test_focus_changed_while_the_flow_is_in_front_leaves_the_flows_prompt_shown(window):
    window.show_view("flow")
    window.focus.toggle(window.attention)  # Ctrl+3 in the Flow
    assert prompt_shown(window)
    window.show_view("overview")
    assert not prompt_shown(window) and window.attention.isVisible()
    window.show_view("flow")
    window.focus.toggle(None)
    window.show_view("overview")
    assert prompt_shown(window)
