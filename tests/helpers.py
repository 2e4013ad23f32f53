"""Shared test data and assertions, imported by the test modules (``from helpers import ...``).

Fixtures stay in ``conftest.py``; plain values and functions live here, so a test
module says where its names come from.
"""

from __future__ import annotations

import numpy as np

#: The worked example of docs/contract.rst §6 (first three candidates correct).
EXAMPLE = np.array(
    [
        [1, 1, 1, 1, 1, 0, 1, 0, 0, 0],
        [1, 1, 0, 1, 0, 1, 0, 1, 0, 0],
        [1, 0, 1, 0, 1, 1, 0, 0, 0, 0],
        [0, 1, 1, 0, 0, 0, 0, 0, 1, 1],
        [0, 0, 0, 1, 1, 0, 0, 0, 1, 1],
        [0, 0, 0, 0, 0, 1, 1, 0, 1, 1],
        [0, 0, 0, 0, 0, 0, 0, 1, 1, 1],
        [0, 0, 0, 0, 0, 0, 0, 0, 1, 1],
    ],
    dtype=np.uint8,
)
EXAMPLE_LABELS = np.array([1, 1, 1, 0, 0, 0, 0, 0], dtype=np.uint8)


def random_matrix(rng: np.random.Generator, n: int, m: int, density: float = 0.4,
                  dup_rows: int = 0) -> np.ndarray:
    """A random 0/1 matrix, optionally with ``dup_rows`` rows copied from others."""
    B = (rng.random((n, m)) < density).astype(np.uint8)
    if dup_rows and n > 1:
        src = rng.integers(0, n, size=dup_rows)
        dst = rng.integers(0, n, size=dup_rows)
        B[dst] = B[src]
    return B


def npy(x):
    """An array result as NumPy (the torch backend hands back tensors); None stays None."""
    if x is None:
        return None
    return x.detach().cpu().numpy() if hasattr(x, "detach") else np.asarray(x)


def assert_same_result(got, want):
    """Bit-identical results: same method, backend, fallback, array types (and
    devices), dtypes, shapes, values and info."""
    assert (got.method, got.backend, got.fallback) == (want.method, want.backend, want.fallback)
    for name in ("scores", "weights", "order", "loo_auc", "objective"):
        a, b = getattr(got, name), getattr(want, name)
        assert (a is None) == (b is None), name
        if a is None:
            continue
        assert type(a) is type(b), name
        if hasattr(b, "device"):
            assert a.device == b.device, name
        a, b = npy(a), npy(b)
        assert a.dtype == b.dtype and a.shape == b.shape, name
        np.testing.assert_array_equal(a, b, err_msg=name)
    assert got.info.keys() == want.info.keys()
    for key, value in want.info.items():
        if isinstance(value, np.ndarray) or hasattr(value, "detach"):
            np.testing.assert_array_equal(npy(got.info[key]), npy(value))
        else:
            assert got.info[key] == value, key
