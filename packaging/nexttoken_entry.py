"""What the frozen app runs: the ``nexttoken`` console script's ``app.window.main:main``.

PyInstaller freezes a script, not an entry point, so this file stands in for the console script.
``setup_logging`` runs before ``app.window.main`` is imported so that a windowed build (no stdout/stderr)
is safe, and an import failure is written to the log file, even during the heavy imports;
``main()`` calls it again, which does nothing the second time. ``freeze_support`` comes first of all:
in the engine's child process (``app.window.engine_process``) it runs the child and exits. A classroom build
names the model it opens by default in the bundle's defaults.conf (packaging/bundle_defaults.py),
which the app reads itself (app/logic/site_defaults.py).

``--smoke-test`` must end on its own whatever happens, since CI waits for it: any exception is
printed (and logged) and exits 1 (a windowed PyInstaller executable would otherwise show a modal
dialog and never exit), and a watchdog ends the process with 3 after SMOKE_LIMIT_S seconds.
"""

import multiprocessing
import os
import sys
import threading
import traceback

SMOKE_LIMIT_S = 240

multiprocessing.freeze_support()  # the engine process starts this same executable: run it, not the app


def _smoke_failed(kind, value, tb) -> None:
    text = "".join(traceback.format_exception(kind, value, tb))
    for stream in (sys.stderr, sys.__stderr__):
        try:
            stream.write(f"smoke test failed:\n{text}")
            stream.flush()
        except Exception:  # noqa: S110 (no stream in a windowed build: the log below still has it)
            pass
    try:
        import logging

        logging.getLogger("nexttoken").error("smoke test failed:\n%s", text)
        logging.shutdown()
    finally:
        os._exit(1)


def _smoke_timed_out() -> None:
    _smoke_failed(TimeoutError, TimeoutError(f"no result after {SMOKE_LIMIT_S} s"), None)


if "--smoke-test" in sys.argv:
    watchdog = threading.Timer(SMOKE_LIMIT_S, _smoke_timed_out)
    watchdog.daemon = True
    watchdog.start()

try:
    from engine.logs import setup_logging

    setup_logging()

    from app.window.main import main
except Exception:
    if "--smoke-test" not in sys.argv:
        raise
    _smoke_failed(*sys.exc_info())

if __name__ == "__main__":
    if "--smoke-test" in sys.argv:
        sys.excepthook = _smoke_failed  # an exception in a Qt slot during the smoke test ends it too
        try:
            code = main()
        except SystemExit:
            raise
        except BaseException:
            _smoke_failed(*sys.exc_info())
        sys.exit(code)
    sys.exit(main())
