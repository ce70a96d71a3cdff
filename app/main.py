"""Entry point of the ``nexttoken`` command (the window arrives with the visualizer issue)."""

import sys


def main() -> int:
    print("nexttoken: the window is not built yet; try `python -m engine --help`.", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
