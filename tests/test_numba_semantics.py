"""numba's compiled semantics (``backends/numba/semantics.py``) against the same
semantics run in Python on the same numba kernels: identical bits, every field.

The compiled path is :mod:`aces_fast._semantics` itself, jitted against a
numba-typed ``nx``; these tests pin that it rounds, snaps ties, orders and falls
back exactly as the Python path does, on the awkward shapes, duplicate-heavy
matrices, the bundled real problems and score vectors with planted near-ties.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("numba", reason="numba is not installed")

from aces_fast import _registry, _semantics
from aces_fast.backends import numba as numba_backend
from aces_fast.backends.numba import semantics
from aces_fast.datasets import load_dataset
from helpers import EXAMPLE, assert_same_result, random_matrix

#: the registered methods whose semantics numba compiles
COMPILED_METHODS = [spec.name for spec in _registry.specs() if spec.semantics in semantics.COMPILED]


@pytest.fixture(scope="module")
def be():
    """The serial numba backend (the compiled path runs only there)."""
    numba_backend.warmup()
    return numba_backend.NumbaBackend(parallel_min_work=1 << 62)


def _matrices():
    rng = np.random.default_rng(7)
    out = [("example", EXAMPLE)]
    for n, m, dup in [
        (1, 5, 0),
        (1, 0, 0),
        (2, 1, 0),
        (7, 0, 0),
        (9, 6, 4),
        (30, 12, 12),
        (64, 40, 20),
        (200, 50, 150),
        (24, 100, 0),
        (130, 33, 0),
    ]:
        out.append((f"random-{n}x{m}-dup{dup}", random_matrix(rng, n, m, 0.45, dup)))
    constant = random_matrix(rng, 12, 8)
    constant[:, :3] = 1
    constant[:, 3:5] = 0
    out.append(("constant-columns", constant))
    out.append(("all-constant (fallback)", np.tile(np.array([[1, 0, 1]], np.uint8), (5, 1))))
    # every test's LOO-AUC <= 1/2: ACES-C falls back to majority vote
    out.append(("anti-correlated (fallback)", np.eye(6, dtype=np.uint8)))
    out.append(("identical rows", np.ones((40, 120), np.uint8)))
    return out


MATRICES = _matrices()


@pytest.mark.parametrize("method", COMPILED_METHODS)
@pytest.mark.parametrize(("name", "B"), MATRICES, ids=[name for name, _ in MATRICES])
def test_compiled_equals_python_semantics(be, method, name, B):
    spec = _registry.get(method)
    values = _registry.method_params(method)
    B = np.ascontiguousarray(B, dtype=np.uint8)
    got = be.rerank(B, spec, values)  # compiled: one jitted call
    want = spec.pack(spec.run(be, B, values), values, be.name)  # Python, same kernels
    assert_same_result(got, want)


@pytest.mark.parametrize("method", COMPILED_METHODS)
def test_compiled_equals_python_on_bundled_problems(be, method):
    spec = _registry.get(method)
    values = _registry.method_params(method)
    for ds_name in ("humaneval-gpt35", "humaneval-codegen16b"):
        for problem in load_dataset(ds_name):
            got = be.rerank(problem.B, spec, values)
            want = spec.pack(spec.run(be, problem.B, values), values, be.name)
            assert_same_result(got, want)


def test_fallback_cases_fall_back(be):
    """The fallback matrices above really take ACES-C's fallback branch."""
    values = _registry.method_params("aces-c")
    for name, B in MATRICES:
        if "fallback" in name:
            assert be.rerank(B, "aces-c", values).fallback, name


def test_compiled_path_is_taken(be):
    """A small call runs the jitted entry (its dispatcher has a compiled signature
    for the input's type), not the Python semantics."""
    call = semantics.entry(_semantics.aces_c)
    assert call is not None and call.signatures
    calls = []
    original = _semantics.aces_c
    try:  # the Python function is not reached by a compiled call
        _semantics.aces_c = lambda *a: calls.append(a) or original(*a)  # type: ignore[assignment]
        be.rerank(EXAMPLE, "aces-c", _registry.method_params("aces-c"))
    finally:
        _semantics.aces_c = original
    assert calls == []


def test_parallel_inputs_run_the_python_semantics():
    """Inputs big enough for the parallel kernels take the Python semantics (which
    launch them), with the same bits."""
    numba_backend.warmup()
    par = numba_backend.NumbaBackend(parallel_min_work=0)
    ser = numba_backend.NumbaBackend(parallel_min_work=1 << 62)
    B = random_matrix(np.random.default_rng(3), 80, 300, 0.5, dup_rows=30)
    for method in COMPILED_METHODS:
        values = _registry.method_params(method)
        assert_same_result(par.rerank(B, method, values), ser.rerank(B, method, values))


@pytest.mark.parametrize("seed", range(6))
def test_snap_and_order_compiled_equals_python(be, seed):
    """Tie snapping with planted near-ties (gaps within and beyond ``tol``), exact
    ties, -0.0 and 0.0: the compiled helper gives the Python helper's bits."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 300))
    base = rng.choice(rng.random(max(1, n // 4)), size=n)
    tol = 1e-9
    noise = rng.choice([0.0, 0.3 * tol, 0.9 * tol, 3 * tol], size=n)
    s = base + noise
    s[rng.integers(0, n, size=3)] = 0.0
    s[rng.integers(0, n, size=3)] = -0.0
    snap = semantics.compiled_namespace()["snap_and_order"]
    got = snap(semantics.NX, s, tol, None)
    want = _semantics.snap_and_order(be, s, tol)
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a, b)
        assert a.dtype == b.dtype
    assert not np.array_equal(want[0], s)  # something was snapped


def test_weights_compiled_equal_python(be):
    """ACES-C weights from LOO-AUC values with nan (constant tests), exact 1/2, both
    variants, and all-zero weights (fallback)."""
    weights = semantics.compiled_namespace()["aces_c_weights"]
    L = np.array([np.nan, 0.5, 0.75, 0.25, 1.0, np.nan])
    colsum = np.array([0, 3, 2, 5, 1, 6], dtype=np.int64)
    for Lv in (L, np.where(np.isnan(L), np.nan, 0.4)):
        for weighted in (True, False):
            got = weights(semantics.NX, Lv, colsum, 6, weighted)
            want = _semantics.aces_c_weights(be, Lv, colsum, 6, weighted)
            np.testing.assert_array_equal(got[0], want[0])
            assert bool(got[1]) == bool(want[1])


def test_uncompiled_semantics_have_no_entry():
    assert semantics.entry(_semantics.codet) is None
    assert semantics.entry(_semantics.aces_o) is None


def test_entry_checks_values_before_computing(be):
    """The compiled entry scans B first: a value v > 1 returns -v, outputs untouched."""
    bad = EXAMPLE.copy()
    bad[2, 5] = 7
    n, m = bad.shape
    out = (np.full(n, -1.0), np.full(m, -1.0), np.full(n, -1, dtype=np.int64), np.full(m, -1.0))
    call = semantics.entry(_semantics.aces_c)
    assert call(bad, *out, True, 1e-9) == -7
    for a in out:
        assert (a == -1).all()
    assert call(EXAMPLE, *out, True, 1e-9) in (0, 1)
    assert (out[2] >= 0).all()
