"""Grouping items of similar shape into padded chunks of a budget."""

from __future__ import annotations

from collections.abc import Sequence


def shape_chunks(
    shapes: Sequence[tuple[int, int]], budget: int, max_waste: float | None = None, slack: int = 0
) -> list[list[int]]:
    """Group indices of ``(rows, cols)`` sizes, sorted, into chunks of at most ``budget``
    padded cells (``len(chunk) * max rows * max cols``).

    Sorting by (rows, cols) keeps similar items together, so little of a chunk is
    padding; an item alone over the budget forms its own chunk. With
    ``max_waste``, a chunk also closes before its padded cells would exceed
    ``max_waste`` times its items' own cells plus ``slack`` (the cells whose
    cost per-operation overhead hides anyway). O(T log T).
    """
    order = sorted(range(len(shapes)), key=lambda t: (shapes[t][0], shapes[t][1]))
    chunks: list[list[int]] = []
    current: list[int] = []
    n_max = m_max = own = 0
    for t in order:
        n, m = shapes[t]
        nn, mm = max(n_max, n), max(m_max, m)
        padded = (len(current) + 1) * nn * max(mm, 1)
        if current and (
            padded > budget
            or (max_waste is not None and padded > max_waste * (own + n * m) + slack)
        ):
            chunks.append(current)
            current, nn, mm, own = [], n, m, 0
        current.append(t)
        n_max, m_max, own = nn, mm, own + n * m
    if current:
        chunks.append(current)
    return chunks
