"""How the torch kernels bound their temporaries: column chunks of a budget of entries."""

from __future__ import annotations

from collections.abc import Iterator

#: Default cap on the entries of the largest per-chunk temporary: (n, k) for
#: LOO-AUC, (k, n, n) for the surrogate. 2**22 float64 entries are 32 MiB.
DEFAULT_CHUNK_ELEMENTS = 1 << 22


def column_chunks(m: int, per_column: int, budget: int) -> Iterator[tuple[int, int]]:
    """``(start, stop)`` column ranges with ``per_column * (stop - start) <= budget``.

    A chunk always holds at least one column, so a single huge column still runs.
    """
    size = max(1, budget // max(1, per_column))
    for start in range(0, m, size):
        yield start, min(m, start + size)
