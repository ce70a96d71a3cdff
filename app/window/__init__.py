"""The window's process, Qt side: the main window and its entry point, the controller that talks to
the engine (a child process, or a thread with ``--engine thread``), paint scheduling, the player,
actions, dialogs and the theme. The views' widgets are in ``app.panels``. Imports no torch."""
