"""What the command line needs before the package's imports run."""

from __future__ import annotations

import signal
import sys
from typing import Any

__all__ = ["exit_on_interrupt", "restore_interrupt"]


def _interrupted(signum: int, frame: Any) -> None:
    print("aces-fast: interrupted", file=sys.stderr, flush=True)
    raise SystemExit(130)


def exit_on_interrupt() -> None:
    """Until :func:`restore_interrupt`: Ctrl-C prints one line and exits 130."""
    try:
        signal.signal(signal.SIGINT, _interrupted)
    except ValueError:  # not the main thread: leave the handler alone
        pass


def restore_interrupt() -> None:
    """Python's own Ctrl-C handler (KeyboardInterrupt) again, if ours is set."""
    try:
        if signal.getsignal(signal.SIGINT) is _interrupted:
            signal.signal(signal.SIGINT, signal.default_int_handler)
    except ValueError:
        pass
