"""Data shipped with nexttoken (the demo model, help texts, icons), installed as the package
``nexttoken_resources``; engine/paths.py ``resources_dir()`` is the one place that finds it."""
