"""Logging that works in a windowed (frozen) build: a rotating log file, no console needed.

A windowed PyInstaller build on Windows and macOS starts with ``sys.stdout`` and ``sys.stderr`` set
to None, so the first ``sys.stdout.write``, tqdm progress bar or ``logging.StreamHandler`` write
would raise (``print`` alone skips a None stream).
``setup_logging()`` runs once, first thing in ``main()``:

- replaces a None stdout/stderr with a sink that swallows writes (os.devnull);
- sends Python logging (and ``warnings``) to ``<user log dir>/nexttoken.log``, rotated at 1 MB,
  and warnings and errors also to stderr when there is a real one (a terminal);
- records uncaught exceptions, from the GUI thread or a worker thread, in that file;
- turns off tqdm and Hugging Face progress bars (``engine.quiet``).
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from logging.handlers import RotatingFileHandler
from pathlib import Path

from .quiet import silence_libraries

APP_NAME = "nexttoken"
LOG_FILE_NAME = "nexttoken.log"
MAX_BYTES = 1_000_000
BACKUP_COUNT = 3
FORMAT = "%(asctime)s %(levelname)-7s %(threadName)s %(name)s: %(message)s"
CONSOLE_FORMAT = "%(levelname)s %(name)s: %(message)s"

_log_file: Path | None = None
_configured = False
_handlers: list[logging.Handler] = []  # what setup_logging added to the root logger
_original_hooks = (sys.excepthook, threading.excepthook)


def default_log_dir() -> Path:
    """The per-user log folder: ~/.local/state/nexttoken/log, ~/Library/Logs/nexttoken, %LOCALAPPDATA%."""
    from platformdirs import user_log_dir

    return Path(user_log_dir(APP_NAME, appauthor=False))


def setup_logging(log_dir: str | os.PathLike | None = None, level: int = logging.INFO) -> Path | None:
    """Make printing, logging and progress bars safe without a console; return the log file path.

    Returns None when no log file could be opened (a read-only home folder): the app then runs
    without one rather than failing. Calling it again does nothing and returns the same path.
    """
    global _log_file, _configured
    if _configured:
        return _log_file
    has_console = sys.stderr is not None
    _replace_missing_streams()
    silence_libraries()

    root = logging.getLogger()
    root.setLevel(level)
    if has_console:
        console = logging.StreamHandler()
        console.setLevel(logging.WARNING)
        console.setFormatter(logging.Formatter(CONSOLE_FORMAT))
        _handlers.append(console)
    folder = Path(log_dir) if log_dir is not None else default_log_dir()
    try:
        folder.mkdir(parents=True, exist_ok=True)
        handler = RotatingFileHandler(
            folder / LOG_FILE_NAME, maxBytes=MAX_BYTES, backupCount=BACKUP_COUNT, encoding="utf-8"
        )
    except OSError:
        _log_file = None
    else:
        handler.setFormatter(logging.Formatter(FORMAT))
        _handlers.append(handler)
        _log_file = folder / LOG_FILE_NAME
    for added in _handlers:
        root.addHandler(added)
    logging.captureWarnings(True)
    _install_excepthooks()
    _configured = True
    frozen = "frozen" if getattr(sys, "frozen", False) else "source"
    logging.getLogger(APP_NAME).info("started (%s, Python %s, %s)", frozen, sys.version.split()[0], sys.platform)
    return _log_file


def log_file() -> Path | None:
    """The file ``setup_logging`` writes to, or None before it ran or when no file could be opened."""
    return _log_file


def _replace_missing_streams() -> None:
    # A windowed build has no console: tqdm, .write() and StreamHandlers would raise on None.
    for name in ("stdout", "stderr"):
        if getattr(sys, name) is None:
            setattr(sys, name, open(os.devnull, "w", encoding="utf-8"))  # noqa: SIM115 (lives as long as the app)


def _install_excepthooks() -> None:
    logger = logging.getLogger(APP_NAME)
    previous_hook = sys.excepthook
    previous_thread_hook = threading.excepthook

    def log_uncaught(exc_type, exc, tb):
        if not issubclass(exc_type, KeyboardInterrupt):
            logger.critical("uncaught exception", exc_info=(exc_type, exc, tb))
        previous_hook(exc_type, exc, tb)

    def log_uncaught_in_thread(args):
        if not issubclass(args.exc_type, SystemExit):
            logger.critical(
                "uncaught exception in thread %s",
                getattr(args.thread, "name", "?"),
                exc_info=(args.exc_type, args.exc_value, args.exc_traceback),
            )
        previous_thread_hook(args)

    sys.excepthook = log_uncaught
    threading.excepthook = log_uncaught_in_thread


def _reset_for_tests() -> None:
    """Undo setup_logging (file handler, warning capture, hooks) so that a test can call it again."""
    global _log_file, _configured
    root = logging.getLogger()
    while _handlers:
        handler = _handlers.pop()
        root.removeHandler(handler)
        handler.close()
    logging.captureWarnings(False)
    sys.excepthook, threading.excepthook = _original_hooks
    _log_file, _configured = None, False
