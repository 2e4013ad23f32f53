"""``python -m aces_fast``: the same command line as ``aces-fast``."""

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
