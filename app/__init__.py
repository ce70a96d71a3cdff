"""nexttoken's Qt window: panels over an engine (a child process or a thread) that owns the session."""

import os

# Qt's raster engine hands every fill of 96 rows or more (and large image scaling) to a thread
# pool and waits for it. On a machine whose other cores run the model, each hand-off waits for a
# core: a plot with a grid took 15-24 ms to repaint instead of 3 ms (benchmarks/RESULTS_GUI.md).
# Set before any QApplication, so every way in (the app, tests, benchmarks) paints on one thread.
os.environ.setdefault("QT_NO_GUI_THREADPOOL", "1")
