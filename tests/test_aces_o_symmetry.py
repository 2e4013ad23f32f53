"""ACES-O at symmetric tests: the weights are a property of the input, not of the
backend (docs/contract.rst §7.5).

Where two tests' gradients are equal in exact arithmetic, the symmetric point
can be an unstable equilibrium that grows each backend's rounding noise into an
O(1) difference of its own direction; the symmetry classes keep such tests
exactly equal on every backend and path. Every
backend is compared with the numpy reference on the two matrices of issue 12
and on families of random symmetric matrices (duplicate columns, columns
exchanged by a permutation of the candidates).
"""

from __future__ import annotations

import os
import subprocess
import sys
from functools import cache

import numpy as np
import pytest

import aces_fast as af

#: the two matrices of issue 12 on which the backends used to disagree
ISSUE_EXAMPLES = {
    "two-tests": np.array([[1, 0], [0, 0], [1, 0], [1, 0], [1, 0], [0, 1], [1, 1]], dtype=np.uint8),
    "three-symmetric": np.array(
        [[0, 0, 0], [0, 0, 1], [0, 1, 0], [0, 0, 0], [1, 0, 0]], dtype=np.uint8
    ),
}


def _np(x) -> np.ndarray:
    return np.asarray(x.detach().cpu().numpy() if hasattr(x, "detach") else x)


def symmetric_matrix(rng: np.random.Generator):
    """A random 0/1 matrix of 2-8 rows and 1-6 tests with symmetric tests, and the
    pairs of its tests ``(j, k)`` that are symmetric.

    Rows ``R`` (r x m), then ``B`` stacks ``R[:, s^0], R[:, s^1], ...`` for a random
    column permutation ``s`` of order ``q``: column ``s[j]`` of ``B`` is column
    ``j`` with its blocks of rows rotated, so the tests of each cycle of ``s``
    are exchanged by a permutation of the candidates. Sometimes one column is
    duplicated instead
    (which breaks the permutation symmetry); the rows are shuffled.
    """
    m = int(rng.integers(1, 7))
    perm = rng.permutation(m)
    q, p = 1, perm.copy()
    while not np.array_equal(p, np.arange(m)):  # the order of perm (at most 6)
        p, q = p[perm], q + 1
    r = int(rng.integers(1, 8 // q + 1))
    R = (rng.random((r, m)) < rng.uniform(0.2, 0.8)).astype(np.uint8)
    blocks, cols = [], np.arange(m)
    for _ in range(q):
        blocks.append(R[:, cols])
        cols = cols[perm]
    B = np.vstack(blocks)
    if B.shape[0] < 2:  # q = 1: no symmetry to keep, but two rows
        B = np.vstack([B, 1 - B])
    pairs = [(j, int(perm[j])) for j in range(m)]
    if m < 6 and rng.random() < 0.3:  # a duplicate (breaks the permutation symmetry)
        src = int(rng.integers(m))
        B = np.hstack([B, B[:, [src]]])
        pairs = [(m, src)]
    return np.ascontiguousarray(B[rng.permutation(B.shape[0])]), pairs


def random_matrix(rng: np.random.Generator) -> np.ndarray:
    """A random 0/1 matrix of 2-8 rows and 1-6 tests (as in issue 12's 1,500)."""
    n, m = int(rng.integers(2, 9)), int(rng.integers(1, 7))
    return (rng.random((n, m)) < rng.uniform(0.2, 0.8)).astype(np.uint8)


@cache
def _family(kind: str, count: int, seed: int):
    rng = np.random.default_rng(seed)
    if kind == "symmetric":
        return tuple(symmetric_matrix(rng)[0] for _ in range(count))
    return tuple(random_matrix(rng) for _ in range(count))


@cache
def _reference(kind: str, count: int, seed: int):
    return tuple(af.aces_o(B, backend="numpy") for B in _family(kind, count, seed))


def _agree(kind: str, count: int, seed: int, backend: str) -> None:
    refs = _reference(kind, count, seed)
    for B, ref in zip(_family(kind, count, seed), refs):
        got = af.aces_o(B, backend=backend)
        np.testing.assert_allclose(
            _np(got.weights),
            ref.weights,
            rtol=0,
            atol=1e-9,
            err_msg=f"{backend} weights on {B.tolist()}",
        )
        assert _np(got.order).tolist() == _np(ref.order).tolist(), B.tolist()


@pytest.mark.parametrize("name", list(ISSUE_EXAMPLES))
def test_issue_examples_match_reference(backend, name):
    B = ISSUE_EXAMPLES[name]
    ref = af.aces_o(B, backend="numpy")
    got = af.aces_o(B, backend=backend)
    np.testing.assert_allclose(_np(got.weights), ref.weights, rtol=0, atol=1e-12)
    np.testing.assert_allclose(_np(got.objective), ref.objective, rtol=0, atol=1e-12)
    assert _np(got.order).tolist() == _np(ref.order).tolist()


def test_issue_examples_stay_uniform(backend):
    """Both examples start at a point where the tests' gradients are equal in exact
    arithmetic, so exact Adam never separates them: the weights stay uniform."""
    for B in ISSUE_EXAMPLES.values():
        w = _np(af.aces_o(B, backend=backend).weights)
        assert np.all(w == w[0]), (B.tolist(), w)
        assert w[0] == pytest.approx(1.0 / B.shape[1], abs=1e-15)


@pytest.mark.parametrize("kind", ["symmetric", "random"])
def test_families_match_reference(fast_backend, kind):
    _agree(kind, 150, 12, fast_backend)


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["symmetric", "random"])
def test_families_match_reference_1500(fast_backend, kind):
    """Issue 12's size: 1,500 small matrices of each family."""
    _agree(kind, 1500, 1200, fast_backend)


def test_symmetric_tests_get_equal_weights(backend):
    """Tests exchanged by a permutation of the candidates (and duplicate tests)
    get bit-identical weights on every backend."""
    rng = np.random.default_rng(13)
    for _ in range(150):
        B, pairs = symmetric_matrix(rng)
        w = _np(af.aces_o(B, backend=backend).weights)
        for j, k in pairs:
            assert w[j] == w[k], (B.tolist(), pairs, w)


@pytest.mark.parametrize("init", ["uniform", "aces-c"])
def test_duplicate_columns_exactly_equal(backend, init):
    rng = np.random.default_rng(5)
    for _ in range(40):
        n, m = int(rng.integers(3, 12)), int(rng.integers(1, 5))
        A = (rng.random((n, m)) < 0.5).astype(np.uint8)
        dup = rng.integers(0, m, size=int(rng.integers(1, 4)))
        B = np.ascontiguousarray(np.hstack([A, A[:, dup]]))
        w = _np(af.aces_o(B, init=init, top_k=None, backend=backend).weights)
        for k, j in enumerate(dup):
            assert w[m + k] == w[j], (B.tolist(), w)


def test_binned_duplicate_columns_exactly_equal():
    """The binned fit (cpp only) runs the same optimizer (adam.hpp)."""
    if "cpp" not in af.available_backends():
        pytest.skip("cpp backend not available")
    rng = np.random.default_rng(6)
    for _ in range(20):
        A = (rng.random((40, 4)) < 0.5).astype(np.uint8)
        B = np.ascontiguousarray(np.hstack([A, A[:, [0, 0, 2]]]))
        w = _np(af.aces_o(B, bins=256, top_k=None, backend="cpp").weights)
        assert w[4] == w[0] and w[5] == w[0] and w[6] == w[2], w
    w = _np(af.aces_o(ISSUE_EXAMPLES["three-symmetric"], bins=64, backend="cpp").weights)
    assert np.all(w == w[0])


@pytest.mark.parametrize("kind", ["symmetric", "random"])
def test_batch_matches_per_task(fast_backend, kind):
    """rerank_batch's ACES-O (cpp's task loop, numba's threads, torch's padded
    batches) takes the same snapping decisions as the per-task call."""
    Bs = list(_family(kind, 60, 7)) + list(ISSUE_EXAMPLES.values())
    batch = af.rerank_batch(Bs, "aces-o", backend=fast_backend)
    for B, got in zip(Bs, batch):
        ref = af.rerank(B, "aces-o", backend=fast_backend)
        np.testing.assert_allclose(
            _np(got.weights), _np(ref.weights), rtol=0, atol=1e-12, err_msg=str(B.tolist())
        )
        assert _np(got.order).tolist() == _np(ref.order).tolist(), B.tolist()


_DIGEST = """
import hashlib, sys
import numpy as np
for name in sys.argv[1:]:
    __import__(name)
import aces_fast as af
from aces_fast.datasets import load_dataset
h = hashlib.sha256()
for prob in list(load_dataset("humaneval-gpt35"))[:40]:
    r = af.aces_o(prob.B, backend="numpy")
    h.update(np.ascontiguousarray(r.weights).tobytes())
    h.update(np.ascontiguousarray(r.objective).tobytes())
print(h.hexdigest())
"""


def _numpy_digest(threads: str, imports) -> str:
    env = dict(
        os.environ, OPENBLAS_NUM_THREADS=threads, OMP_NUM_THREADS=threads, MKL_NUM_THREADS=threads
    )
    out = subprocess.run(
        [sys.executable, "-c", _DIGEST, *imports],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    return out.stdout.strip()


def test_numpy_reference_deterministic():
    """The reference's ACES-O sums use no BLAS: the same bits with one or two
    BLAS threads and after importing the other backends' libraries."""
    imports = [
        name
        for name in ("torch", "numba")
        if __import__("importlib.util").util.find_spec(name) is not None
    ]
    first = _numpy_digest("1", [])
    assert _numpy_digest("2", imports) == first


def test_snap_rule_of_reference():
    """The reference's snapping (docs/contract.rst §7.5): within a class, runs of
    neighbours at most tol apart take the run's smallest value; runs of one
    leave the classes; NaN and infinities join no run; other classes untouched."""
    from aces_fast.backends.numpy import snap_classes

    x = np.array(
        [1.0 + 5e-11, 0.0, 3.0, 1.0, 1e-12, 2e-12 + 9e-11, np.nan, np.inf, np.inf, 7.0, 7.0]
    )
    classes = snap_classes(x, [np.arange(9)], 1e-10)
    assert sorted(map(sorted, map(list, classes))) == [[0, 3], [1, 4, 5]]
    assert x[0] == x[3] == 1.0 and x[1] == x[4] == x[5] == 0.0 and x[2] == 3.0
    assert np.isnan(x[6]) and x[7] == x[8] == np.inf
    assert x[9] == x[10] == 7.0  # outside every class
    y = np.array([0.0, 2e-10, 4e-10])  # a chain: each neighbour within tol
    assert [list(c) for c in snap_classes(y, [np.arange(3)], 2.5e-10)] == [[0, 1, 2]]
    assert np.all(y == 0.0)


def test_asymmetric_tests_still_separate(backend, spec_example):
    """Snapping only holds tests together whose gradients agree: on the worked
    example (§6) ACES-O moves away from uniform weights, as the reference does."""
    B, _ = spec_example
    w = _np(af.aces_o(B, backend=backend).weights)
    assert np.ptp(w) > 0.05
    np.testing.assert_allclose(w, af.aces_o(B, backend="numpy").weights, rtol=0, atol=1e-9)
