"""Consensus-set rankers on NumPy arrays: CodeT, B4 and MBR-exec (SPEC section 3).

These group candidates by identical rows, so their cost is one ``np.unique`` over
rows (O(n m log n)) plus O(U m) for U distinct rows; no backend kernel is needed.
Constant tests are dropped first (SPEC section 1: they carry no signal).
"""

from __future__ import annotations

import math
from typing import Tuple

import numpy as np


def _nonconstant(B: np.ndarray) -> np.ndarray:
    c = B.sum(axis=0, dtype=np.int64)
    keep = (c > 0) & (c < B.shape[0])
    return B if keep.all() else B[:, keep]


def row_groups(B: np.ndarray) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Distinct rows of a 2-D array.

    Returns ``(patterns (U, m), inverse (n,), sizes (U,))`` with
    ``patterns[inverse] == B`` and ``sizes[u]`` the number of rows equal to
    pattern ``u``.
    """
    if B.shape[1] == 0:
        n = B.shape[0]
        return B[:1], np.zeros(n, dtype=np.int64), np.array([n], dtype=np.int64)
    patterns, inverse, sizes = np.unique(B, axis=0, return_inverse=True, return_counts=True)
    return patterns, inverse.reshape(-1).astype(np.int64), sizes.astype(np.int64)


def codet_scores(B: np.ndarray, exponent: float = 0.5) -> np.ndarray:
    """CodeT in pass-matrix form, float64 (n,).

    A consensus set (candidates with identical rows) scores
    ``(#tests its row passes) * (#candidates in the set) ** exponent``; every
    member gets the set's score.
    """
    Bn = _nonconstant(B)
    patterns, inverse, sizes = row_groups(Bn)
    set_scores = patterns.sum(axis=1, dtype=np.int64) * sizes.astype(np.float64) ** exponent
    return set_scores[inverse]


def _log_beta(a: float, b: float) -> float:
    return math.lgamma(a) + math.lgamma(b) - math.lgamma(a + b)


def b4_scores(B: np.ndarray, alpha: float = 1e3, beta0: float = 1e4) -> np.ndarray:
    """B4 (Chen et al., ASE 2024) log-posterior score of each candidate's set, float64 (n,).

    For a distinct row pattern ``y`` with consensus set ``x``, ``N = n``,
    ``M`` = number of non-constant tests::

        lnB(|y|+a, M-|y|+1) + lnB(|x|+a, N-|x|+1)
          + lnB(k1+1, n1-k1+1) + lnB(k0+1, n0-k0+b)

    where block E1 = rows outside ``x`` x tests in ``y`` has ``k1`` ones in
    ``n1`` cells and E0 = rows outside ``x`` x tests outside ``y`` has ``k0`` ones
    in ``n0`` cells. ``a = alpha``, ``b = beta0``.
    """
    Bn = _nonconstant(B)
    N, M = Bn.shape
    patterns, inverse, sizes = row_groups(Bn)
    col = Bn.sum(axis=0, dtype=np.int64)
    set_scores = np.empty(patterns.shape[0])
    for u in range(patterns.shape[0]):
        y = patterns[u].astype(bool)
        ny, nx = int(y.sum()), int(sizes[u])
        # ones outside x: in y-columns every member of x has a 1, elsewhere a 0
        k1 = int(col[y].sum()) - nx * ny
        k0 = int(col[~y].sum())
        n1 = (N - nx) * ny
        n0 = (N - nx) * (M - ny)
        set_scores[u] = (_log_beta(ny + alpha, M - ny + 1) + _log_beta(nx + alpha, N - nx + 1)
                         + _log_beta(k1 + 1, n1 - k1 + 1) + _log_beta(k0 + 1, n0 - k0 + beta0))
    return set_scores[inverse]


def mbr_exec_scores(outputs: np.ndarray) -> np.ndarray:
    """MBR-exec: ``score_i = #{i' : O[i'] == O[i]}`` as float64 (n,)."""
    _, inverse, sizes = row_groups(outputs)
    return sizes[inverse].astype(np.float64)
