"""What the frozen app runs: the ``nexttoken`` console script's ``app.main:main``.

PyInstaller freezes a script, not an entry point, so this file stands in for the console script.
``setup_logging`` runs before ``app.main`` is imported so that a windowed build (no stdout/stderr)
is safe, and an import failure is written to the log file, even during the heavy imports;
``main()`` calls it again, which does nothing the second time. ``freeze_support`` comes first of all:
in the engine's child process (``app.engine_process``) it runs the child and exits.
"""

import multiprocessing
import sys

multiprocessing.freeze_support()  # the engine process starts this same executable: run it, not the app

from app.logs import setup_logging  # noqa: E402

setup_logging()

from app.main import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
