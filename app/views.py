"""The window's views, by the names ``nexttoken --view`` takes, in the order of the window's tabs.
Imports nothing, so that the command line can be read before Qt is."""

VIEWS = {
    "overview": "Overview: tokens, attention, candidates, sampling, cache",
    "inside": "Inside the model: one token's path",
    "sampling": "Sampling, stage by stage",
    "cache": "The KV cache, opened",
    "branches": "Branches: every continuation taken, compared",
}

VIEW_ALIASES = {"main": "overview"}
"""Older names ``--view`` still takes, and the view each stands for."""

VIEW_BUTTONS = {"overview": "Overview", "inside": "Inside", "sampling": "Sampling", "cache": "KV cache", "branches": "Branches"}
"""Short names on the buttons that switch views (the menu bar's corner has little room)."""
