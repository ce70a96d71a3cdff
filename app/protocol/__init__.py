"""What the window's process and the engine's process say to each other: the typed requests and
results (``messages``) and how they cross the process boundary (``wire``). Imported by both sides,
so it imports neither Qt nor torch."""
