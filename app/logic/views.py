"""The window's views, by the names ``nexttoken --view`` takes, in the order of the window's tabs.
Imports nothing, so that the command line can be read before Qt is."""

VIEWS = {
    "flow": "Flow: the whole step as one picture, in the order the model computes",
    "overview": "Overview: tokens, attention, candidates, sampling, cache",
    "inside": "Inside the model: one token's path",
    "why": "Why this token: what each block and head writes into its logit",
    "sampling": "Sampling, stage by stage",
    "cache": "The KV cache, opened",
    "branches": "Branches: every continuation taken, compared",
}

VIEW_BUTTONS = {"flow": "Flow", "overview": "Overview", "inside": "Inside", "why": "Why", "sampling": "Sampling", "cache": "KV cache", "branches": "Branches"}
"""Short names on the buttons that switch views (the menu bar's corner has little room)."""

PANELS = ("tokens", "embeddings", "attention", "candidates", "sampling", "cache")
"""The Overview's panels by the names ``nexttoken --focus`` takes, in their numbered order (1 to 6)."""
