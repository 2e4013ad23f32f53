"""Consensus sets on NumPy arrays (:func:`aces_fast.consensus.row_groups`): the
grouping CodeT, B4 and MBR-exec share on the numpy, cpp and numba backends.

Integer and boolean rows are grouped by their bytes (one opaque value a row),
floats by value; either way the groups are those of ``np.unique(axis=0)``.
"""

from __future__ import annotations

import numpy as np
import pytest

import aces_fast as af
from aces_fast.consensus import mbr_exec_scores, row_groups


def _reference(B):
    patterns, inverse, sizes = np.unique(B, axis=0, return_inverse=True, return_counts=True)
    return patterns, inverse.reshape(-1), sizes


def _check(B):
    patterns, inverse, sizes = row_groups(B)
    ref_patterns, ref_inverse, ref_sizes = _reference(B)
    assert inverse.dtype == sizes.dtype == np.int64
    assert len(patterns) == len(sizes) == len(ref_patterns)
    np.testing.assert_array_equal(patterns[inverse], B)  # every row is its pattern
    np.testing.assert_array_equal(np.bincount(inverse, minlength=len(sizes)), sizes)
    # the same partition of the rows as np.unique's
    pairs = {(int(a), int(b)) for a, b in zip(inverse, ref_inverse)}
    assert len(pairs) == len(ref_sizes)
    assert sorted(sizes.tolist()) == sorted(ref_sizes.tolist())


@pytest.mark.parametrize(
    "dtype", [np.uint8, np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint64]
)
@pytest.mark.parametrize(("n", "m"), [(1, 1), (1, 7), (5, 1), (24, 100), (300, 9), (64, 64)])
def test_integer_rows_group_as_np_unique_does(dtype, n, m):
    rng = np.random.default_rng(n * 100 + m)
    B = rng.integers(-3 if np.dtype(dtype).kind == "i" else 0, 3, (n, m)).astype(dtype)
    if n > 3:
        B[rng.integers(0, n, n // 2)] = B[rng.integers(0, n, n // 2)]  # repeated rows
    _check(B)


def test_strided_and_non_binary_rows():
    """A column slice (not contiguous) groups by its values; bytes 1 and 255 are
    different values, as for np.unique."""
    base = np.array([[1, 0, 1, 9], [1, 5, 1, 7], [255, 0, 1, 3], [1, 0, 1, 2]], np.uint8)
    B = base[:, :3]
    _check(B)
    _, inverse, sizes = row_groups(B)
    assert inverse[0] == inverse[3] != inverse[2] and len(sizes) == 3


def test_float_rows_group_by_value():
    """-0.0 equals 0.0 (their bytes differ), as np.unique says."""
    B = np.array([[0.0, 1.5], [-0.0, 1.5], [2.0, 1.5]])
    _check(B)
    _, inverse, sizes = row_groups(B)
    assert inverse[0] == inverse[1] and sorted(sizes.tolist()) == [1, 2]


def test_no_columns_is_one_group():
    patterns, inverse, sizes = row_groups(np.zeros((4, 0), np.uint8))
    assert patterns.shape == (1, 0) and inverse.tolist() == [0] * 4 and sizes.tolist() == [4]


def test_mbr_exec_counts_equal_output_rows():
    outputs = np.array([[3, -1], [2, 2], [3, -1], [3, -1], [2, 2], [0, 0]], np.int64)
    np.testing.assert_array_equal(mbr_exec_scores(outputs), [3, 2, 3, 3, 2, 1])


@pytest.mark.parametrize("backend", ["numpy", "cpp"])
def test_consensus_methods_equal_the_brute_force(backend):
    """CodeT and B4 group rows here on the numpy and cpp backends: their scores
    equal the brute-force definitions (tests/brute.py, which groups rows as
    Python tuples) on matrices with repeated rows, shared by the whole
    batch and one task at a time."""
    import brute
    from helpers import require_backend

    require_backend(backend)
    rng = np.random.default_rng(7)
    tasks = []
    for n, m in [(24, 100), (60, 12), (7, 3), (1, 4)]:
        B = (rng.random((n, m)) < 0.5).astype(np.uint8)
        B[1::3] = B[0]
        tasks.append(B)
    for method, ref in [("codet", brute.codet), ("codet-linear", brute.codet), ("b4", brute.b4)]:
        want = [ref(B, 1.0) if method == "codet-linear" else ref(B) for B in tasks]
        batch = af.rerank_batch(tasks, method, backend=backend)
        for B, w, res in zip(tasks, want, batch):
            one = af.rerank(B, method, backend=backend)
            for got in (one, res):
                np.testing.assert_allclose(got.scores, w, rtol=1e-12, atol=1e-9)
