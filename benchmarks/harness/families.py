"""Families of random pass matrices that reach different kernel paths, shared by
the tests (``tests/test_methods.py``: every exact method on every backend over
each family) and the GPU parity check (``tools/gpu_parity.py``), so both draw
the same kinds of data.

These are fuzzing inputs, not benchmark workloads (:mod:`.workloads` holds
those): each family stresses one path -- deduplication, tied weights, constant
columns, many score levels, a single informative test.
"""

from __future__ import annotations

import numpy as np

#: the families :func:`family_matrix` draws from
FAMILIES = (
    "bernoulli",
    "planted",
    "few-rows",
    "dup-cols",
    "const-cols",
    "all-const",
    "nested",
    "one-col",
    "near-identity",
)


def family_matrix(family: str, n: int, m: int, rng: np.random.Generator) -> np.ndarray:
    """A 0/1 uint8 ``(n, m)`` matrix of one of :data:`FAMILIES`: the shapes of data
    that reach different kernel paths (a differential fuzzing run's generator).

    ``few-rows``: at most three distinct rows (dedup); ``dup-cols``: at most
    three distinct columns (tied weights); ``const-cols``: about half the columns
    constant; ``nested``: each row passes the tests under its own threshold (many
    distinct score levels); ``one-col``: a single non-constant column;
    ``near-identity``: one pass per row plus 5% noise.
    """
    if family == "bernoulli":
        B = rng.random((n, m)) < rng.choice([0.02, 0.3, 0.5, 0.9, 0.99])
    elif family == "planted":
        y = rng.random(n) < 0.3
        right = rng.random(m) < 0.7
        B = rng.random((n, m)) < np.where(right, np.where(y[:, None], 0.95, 0.2), 0.5)
    elif family == "few-rows":
        rows = rng.random((int(rng.integers(1, 4)), m)) < 0.5
        B = rows[rng.integers(0, len(rows), n)]
    elif family == "dup-cols":
        cols = rng.random((n, int(rng.integers(1, 4)))) < 0.5
        B = cols[:, rng.integers(0, cols.shape[1], m)]
    elif family == "const-cols":
        B = rng.random((n, m)) < 0.5
        const = rng.random(m) < 0.5
        B[:, const] = rng.random(int(const.sum())) < 0.5
    elif family == "all-const":
        B = np.full((n, m), bool(rng.integers(0, 2)))
    elif family == "nested":
        B = rng.random(m)[None, :] < rng.random(n)[:, None]
    elif family == "one-col":
        B = np.zeros((n, m), bool)
        B[:, rng.integers(0, m)] = rng.random(n) < 0.5
    elif family == "near-identity":
        B = (rng.integers(0, max(n, m), (n, 1)) == np.arange(m)) | (rng.random((n, m)) < 0.05)
    else:
        raise ValueError(f"unknown family {family!r}")
    return np.ascontiguousarray(B, dtype=np.uint8)
