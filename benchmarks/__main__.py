"""``python -m benchmarks [options]`` from a checkout: the same as ``aces-fast bench``."""

import sys

from .harness.command import console_main

sys.exit(console_main())
