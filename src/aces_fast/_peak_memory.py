"""Peak resident memory of this process, for the large-pool memory benchmarks and
tests (``benchmarks/test_bench_throughput.py``, ``tests/test_large_pools.py``).
"""

from __future__ import annotations

import resource
import sys


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
