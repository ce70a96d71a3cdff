"""nexttoken's app, in rooms by process (one import contract each, pyproject.toml):

- ``app.protocol``: the requests, results and wire format both processes share;
- ``app.host``: the engine process's side, which runs ``engine`` for the window;
- ``app.logic``: the window's state and its texts and numbers, plain Python;
- ``app.window`` and ``app.panels``: the Qt window and its views' widgets.
"""

import os

# Qt's raster engine hands every fill of 96 rows or more (and large image scaling) to a thread
# pool and waits for it. On a machine whose other cores run the model, each hand-off waits for a
# core: a plot with a grid took 15-24 ms to repaint instead of 3 ms (benchmarks/RESULTS_GUI.md).
# Set before any QApplication, so every way in (the app, tests, benchmarks) paints on one thread.
os.environ.setdefault("QT_NO_GUI_THREADPOOL", "1")
