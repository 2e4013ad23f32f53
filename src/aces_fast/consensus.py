"""Consensus sets on NumPy arrays: distinct rows (the array backends' ``row_groups``
kernel, which CodeT and B4 in :mod:`aces_fast._semantics` group by) and MBR-exec.

Grouping is one ``np.unique`` over rows, O(n m log n).
"""

from __future__ import annotations

import numpy as np


def row_groups(B: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Distinct rows of a 2-D array.

    Returns ``(patterns (U, m), inverse (n,), sizes (U,))`` with
    ``patterns[inverse] == B`` and ``sizes[u]`` the number of rows equal to
    pattern ``u``.
    """
    if B.shape[1] == 0:
        n = B.shape[0]
        return B[:1], np.zeros(n, dtype=np.int64), np.array([n], dtype=np.int64)
    if B.dtype.kind in "biu":
        # Each row as one opaque value of its bytes: integers are equal exactly
        # when their bytes are, and sorting such values compares whole rows at
        # once. np.unique(axis=0) makes a structured type of m fields instead,
        # promoting each (24 x 100 uint8: 780 of CodeT's 840 us a task).
        rows = np.ascontiguousarray(B)
        keys = rows.view(np.dtype((np.void, rows.dtype.itemsize * rows.shape[1]))).reshape(-1)
        _, first, inverse, sizes = np.unique(
            keys, return_index=True, return_inverse=True, return_counts=True
        )
        return rows[first], inverse.reshape(-1).astype(np.int64), sizes.astype(np.int64)
    # floats: -0.0 equals 0.0 and NaN never equals itself, which bytes would not say
    patterns, inverse, sizes = np.unique(B, axis=0, return_inverse=True, return_counts=True)
    return patterns, inverse.reshape(-1).astype(np.int64), sizes.astype(np.int64)


def mbr_exec_scores(outputs: np.ndarray) -> np.ndarray:
    """MBR-exec: ``score_i = #{i' : O[i'] == O[i]}`` as float64 (n,)."""
    _, inverse, sizes = row_groups(outputs)
    return sizes[inverse].astype(np.float64)
