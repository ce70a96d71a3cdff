"""``python -m app`` opens the nexttoken window (same as the ``nexttoken`` command)."""

import sys

from app.window.main import main

sys.exit(main())
