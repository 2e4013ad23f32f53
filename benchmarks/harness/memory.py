"""Peak resident memory of this process: the per-cell memory of the benchmark
suite (:func:`peak_extra_bytes`) and ``tests/test_large_pools.py``.

Linux resets the high-water mark through ``/proc/self/clear_refs``, so the peak
of one call above what was resident before it can be read from ``VmHWM``.
glibc must run with a fixed mmap threshold (``MALLOC_MMAP_THRESHOLD_=131072``
in the environment at start-up): by default it raises the threshold after the
first large free, later large blocks then come from the heap, where a freed
block may stay resident, and the peak depends on the process's allocation
history. The fixed threshold changes allocation costs, so a process that
measures memory must not also measure time.
"""

from __future__ import annotations

import os
import resource
import sys
from collections.abc import Callable
from typing import Any

#: the environment variable and value the memory-measuring process needs
MMAP_THRESHOLD_ENV = ("MALLOC_MMAP_THRESHOLD_", "131072")


def reset_peak() -> bool:
    """Reset the kernel's peak-RSS mark (Linux ``/proc/self/clear_refs``).

    Returns False where that is not possible; :func:`peak_bytes` can then only
    report the peak since the process started.
    """
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def peak_bytes(exact: bool) -> int:
    """Peak resident set size in bytes: ``VmHWM`` (since the last successful
    :func:`reset_peak`) when ``exact``, else ``ru_maxrss`` (since process start,
    so it can only over-report)."""
    if exact:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
        raise OSError("/proc/self/status has no VmHWM line")  # pragma: no cover
    scale = 1 if sys.platform == "darwin" else 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale


def mmap_threshold_fixed() -> bool:
    """Whether this process started with the fixed glibc mmap threshold."""
    name, value = MMAP_THRESHOLD_ENV
    return os.environ.get(name) == value


def peak_extra_bytes(fn: Callable[[], Any]) -> tuple[int, Any | None]:
    """``(bytes, result)``: the peak resident memory of one ``fn()`` call above what
    was resident just before it (outputs included, the inputs already resident
    excluded). Raises ``OSError`` where the peak cannot be reset (not Linux)."""
    if not reset_peak():
        raise OSError("the peak RSS can only be reset on Linux (/proc/self/clear_refs)")
    before = peak_bytes(exact=True)
    out = fn()
    return max(0, peak_bytes(exact=True) - before), out
