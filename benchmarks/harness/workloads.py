"""The pass matrices that are benchmarked, by workload family.

* ``distinct`` -- :func:`make_distinct_matrix`: no two rows equal (checked), the
  planted model of the speed issue: 30% correct candidates; each test passes
  correct candidates with probability alpha ~ U(0.5, 1) and incorrect ones with
  beta ~ U(0, 0.6), except 20% misleading tests with alpha ~ U(0, 0.4), beta ~
  U(0.5, 1). Candidates from several models or at a high temperature look like
  this, and nothing can be deduplicated.
* ``dup-heavy`` -- :func:`make_pass_matrix`: half the rows repeat others and 5%
  of the tests are constant; the favourable case for the kernels that merge
  equal rows.
* ``real`` -- the bundled HumanEval problems (:func:`real_problems`), timed
  problem by problem.

Every matrix is deterministic in its seed, uint8, C-contiguous and writable
(numba compiles separate code for read-only arrays, which would put JIT time
inside a measurement). Cached arrays are shared: callers must not modify them.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import numpy as np

#: the synthetic families; ``real`` has named datasets instead of sizes
SYNTHETIC = ("distinct", "dup-heavy")
FAMILIES = (*SYNTHETIC, "real")
#: the bundled datasets of the ``real`` family
REAL_DATASETS = ("humaneval-codegen16b", "humaneval-gpt35")


class Planted(NamedTuple):
    """A planted pass matrix and the hidden truth it was drawn from."""

    B: np.ndarray  #: uint8 (n, m), C-contiguous, rows pairwise distinct
    correct: np.ndarray  #: bool (n,): the candidate is correct
    alpha: np.ndarray  #: float64 (m,): pass probability of a correct candidate
    beta: np.ndarray  #: float64 (m,): pass probability of an incorrect candidate
    misleading: np.ndarray  #: bool (m,): the test was drawn as misleading


def make_distinct_matrix(n: int, m: int, seed: int = 0) -> Planted:
    """A planted pass matrix without duplicate rows (and its hidden truth).

    ``round(0.3 n)`` candidates (at random positions) are correct. Test ``j``
    passes a correct candidate with probability ``alpha_j`` and an incorrect one
    with ``beta_j``: ``alpha ~ U(0.5, 1)``, ``beta ~ U(0, 0.6)`` for 80% of the
    tests, ``alpha ~ U(0, 0.4)``, ``beta ~ U(0.5, 1)`` for the other 20%
    (misleading tests, chosen at random). A row that equals an earlier one is
    drawn again from its candidate's distribution until all rows differ.

    Returns
    -------
    Planted
        ``B`` (uint8 (n, m), C-contiguous, rows pairwise distinct), ``correct``
        (bool (n,)), ``alpha``, ``beta`` (float64 (m,)), ``misleading`` (bool (m,)).

    Raises
    ------
    ValueError
        For ``n < 1``, ``m < 1``, or when ``n`` distinct rows cannot be drawn
        (``n > 2**m``, or the redraw budget runs out).

    Notes
    -----
    Time O(n m) plus the redraws, which are rare once ``2**m >> n**2``.
    """
    if n < 1 or m < 1:
        raise ValueError(f"need n >= 1 and m >= 1; got n={n}, m={m}")
    if m < 63 and n > 2**m:
        raise ValueError(f"{n} distinct rows of {m} tests do not exist (at most 2**{m})")
    rng = np.random.default_rng(seed)
    correct = np.zeros(n, dtype=bool)
    correct[rng.permutation(n)[: round(0.3 * n)]] = True
    misleading = np.zeros(m, dtype=bool)
    misleading[rng.permutation(m)[: round(0.2 * m)]] = True
    alpha = np.where(misleading, rng.uniform(0.0, 0.4, m), rng.uniform(0.5, 1.0, m))
    beta = np.where(misleading, rng.uniform(0.5, 1.0, m), rng.uniform(0.0, 0.6, m))
    p = np.where(correct[:, None], alpha[None, :], beta[None, :])
    B = (rng.random((n, m)) < p).astype(np.uint8)
    for _ in range(1000):
        _, first = np.unique(B, axis=0, return_index=True)
        repeat = np.setdiff1d(np.arange(n), first)
        if repeat.size == 0:
            return Planted(np.ascontiguousarray(B), correct, alpha, beta, misleading)
        B[repeat] = (rng.random((repeat.size, m)) < p[repeat]).astype(np.uint8)
    raise ValueError(f"could not draw {n} distinct rows of {m} tests (seed {seed})")


def make_pass_matrix(
    n: int, m: int, seed: int = 0, dup_frac: float = 0.5, const_frac: float = 0.05
) -> np.ndarray:
    """A planted pass matrix with duplicate rows and some constant columns.

    About 30% of candidates are "correct" and 70% of tests "valid"; correct
    candidates pass valid tests with probability 0.9, everything else passes
    with probability 0.3 to 0.4, so tests carry real but noisy signal. Only
    ``round(n * (1 - dup_frac))`` distinct rows are drawn; the remaining rows
    repeat them (LLM samples often behave identically). A ``const_frac`` share of
    the tests is made constant (all pass or all fail), as generated tests often are.

    Returns
    -------
    numpy.ndarray of uint8, shape (n, m), C-contiguous. Deterministic in ``seed``.
    """
    if n < 1 or m < 0:
        raise ValueError(f"need n >= 1 and m >= 0; got n={n}, m={m}")
    if not 0.0 <= dup_frac < 1.0:
        raise ValueError(f"dup_frac must be in [0, 1); got {dup_frac}")
    rng = np.random.default_rng(seed)
    n_distinct = max(1, min(n, round(n * (1.0 - dup_frac))))
    correct = rng.random(n_distinct) < 0.3
    valid = rng.random(m) < 0.7
    p = np.where(
        correct[:, None], np.where(valid[None, :], 0.9, 0.3), np.where(valid[None, :], 0.4, 0.35)
    )
    distinct = (rng.random((n_distinct, m)) < p).astype(np.uint8)
    rows = np.concatenate([np.arange(n_distinct), rng.integers(0, n_distinct, size=n - n_distinct)])
    B = distinct[rng.permutation(rows)]
    n_const = round(m * const_frac)
    if n_const:
        cols = rng.choice(m, size=n_const, replace=False)
        B[:, cols] = (rng.random(n_const) < 0.5).astype(np.uint8)
    return np.ascontiguousarray(B)


def _matrix(family: str, n: int, m: int, seed: int) -> np.ndarray:
    if family == "distinct":
        return make_distinct_matrix(n, m, seed).B
    if family == "dup-heavy":
        return make_pass_matrix(n, m, seed)
    raise ValueError(f"unknown synthetic family {family!r}; choose from {', '.join(SYNTHETIC)}")


@functools.lru_cache(maxsize=16)
def workload(family: str, n: int, m: int) -> tuple[np.ndarray, np.ndarray]:
    """``(B uint8 (n, m), weights float64 (m,))`` of a synthetic family; cached.

    The seeds depend on the size only, so the families differ by construction,
    not by seed.
    """
    B = _matrix(family, n, m, seed=1000 * n + m)
    w = np.random.default_rng(n + m).random(m)
    return B, w


@functools.lru_cache(maxsize=8)
def batch_tasks(family: str, count: int, n: int, m: int) -> tuple[np.ndarray, ...]:
    """``count`` different ``n x m`` matrices of a synthetic family (a batch); cached."""
    return tuple(_matrix(family, n, m, seed=7919 * k + 1) for k in range(count))


@functools.lru_cache(maxsize=4)
def real_problems(dataset: str) -> tuple[tuple[np.ndarray, np.ndarray], ...]:
    """``(B, weights)`` per problem of a bundled dataset, in dataset order.

    ``B`` is a writable uint8 copy of the problem's pass matrix (some problems
    have no tests: ``m = 0``); ``weights`` float64 ``(m,)`` for the weighted
    LOO-AUC, seeded by the problem's position.
    """
    import aces_fast.datasets

    if dataset not in REAL_DATASETS:
        raise ValueError(
            f"unknown real dataset {dataset!r}; choose from {', '.join(REAL_DATASETS)}"
        )
    out: list = []
    for k, problem in enumerate(aces_fast.datasets.load_dataset(dataset)):
        B = np.array(problem.B, dtype=np.uint8, order="C", copy=True)
        out.append((B, np.random.default_rng(k).random(B.shape[1])))
    return tuple(out)
