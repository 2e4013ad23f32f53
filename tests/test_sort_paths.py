"""The compiled ranking order (csrc/methods/methods.cpp, snap_and_order): fewer
than 32 distinct rows are placed by counting, for each score, the scores below
it and the equal ones before it (rank_sort); more are sorted by radix passes on
their highest differing bits plus insertion, or, when many scores agree on
those bits (a narrow band of scores next to an outlier), by radix passes over
every byte. The order is then the sorted list reversed when no two scores tie
(and no row repeats), else a counting sort of the tie groups.
Every path must give the stable descending order of the scores, equal to the
NumPy reference's.
"""

from __future__ import annotations

import numpy as np
import pytest

import aces_fast as af

METHODS = ("aces-c", "aces-c-filter", "majority")


def narrow_band(rng, n, m_common, m_rare):
    """One all-fail row; every other row passes m_common columns and all but a
    few of m_rare near-constant ones: the scores crowd into a band far from 0."""
    B = np.ones((n, m_common + m_rare), np.uint8)
    B[0] = 0
    for j in range(m_common, m_common + m_rare):
        B[rng.integers(1, n, int(rng.integers(1, 4))), j] = 0
    return B


def check(B):
    for method in METHODS:
        got = af.rerank(B, method, backend="cpp")
        ref = af.rerank(B, method, backend="numpy")
        scores, order = np.asarray(got.scores), np.asarray(got.order)
        # the stable descending order of the returned (snapped) scores
        np.testing.assert_array_equal(order, np.lexsort((np.arange(B.shape[0]), -scores)))
        np.testing.assert_array_equal(order, np.asarray(ref.order))


@pytest.mark.parametrize("seed", range(8))
def test_order_of_crowded_scores(seed):
    rng = np.random.default_rng(seed)
    check(
        narrow_band(
            rng, int(rng.integers(60, 300)), int(rng.integers(20, 200)), int(rng.integers(20, 300))
        )
    )


@pytest.mark.parametrize("n", [5, 31, 32, 33, 200, 700])
def test_order_of_spread_scores(n):
    rng = np.random.default_rng(n)
    B = (rng.random((n, 300)) < rng.uniform(0.2, 0.8, n)[:, None]).astype(np.uint8)
    B[rng.integers(0, n, n // 4)] = B[rng.integers(0, n, n // 4)]  # repeated rows: tied scores
    check(B)


@pytest.mark.parametrize("n", [1, 2, 3, 8, 17, 31])
@pytest.mark.parametrize("m", [1, 3, 40])
def test_order_of_few_rows_with_ties(n, m):
    # few tests: most scores tie (rank_sort's equal keys keep the row order)
    rng = np.random.default_rng(100 * n + m)
    for _ in range(5):
        check((rng.random((n, m)) < 0.5).astype(np.uint8))
