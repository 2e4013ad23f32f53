"""Shared fixtures: the ``backend`` fixture runs a test once per known backend.

A backend that cannot load here is skipped with the registry's reason, so a test
suite on a machine without numba or torch still runs everything else.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

# The benchmark harness (benchmarks/harness/) ships with the checkout, not the
# package; tests that check its workloads and baselines import it from here.
# The root holds no aces_fast/ folder (src/ layout), so nothing is shadowed.
_ROOT = str(Path(__file__).resolve().parents[1])
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

from aces_fast.backends import BACKEND_NAMES, BackendUnavailableError, get_backend

#: The worked example of SPEC section 6 (first three candidates correct).
SPEC_EXAMPLE = np.array(
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
SPEC_LABELS = np.array([1, 1, 1, 0, 0, 0, 0, 0], dtype=np.uint8)


def _require(name: str) -> str:
    try:
        get_backend(name)
    except BackendUnavailableError as exc:
        pytest.skip(exc.reason)
    return name


@pytest.fixture(params=list(BACKEND_NAMES))
def backend(request) -> str:
    """Every backend name (cpp, numba, torch, numpy); absent ones are skipped."""
    return _require(request.param)


@pytest.fixture(params=[b for b in BACKEND_NAMES if b != "numpy"])
def fast_backend(request) -> str:
    """Every backend except the NumPy reference (to compare against it)."""
    return _require(request.param)


@pytest.fixture(scope="module")
def one_torch_thread():
    """One torch intra-op thread for a test module (its inputs are tiny, and the
    threads' barrier waits cost seconds on a busy machine); restored afterwards."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture
def spec_example():
    return SPEC_EXAMPLE.copy(), SPEC_LABELS.copy()


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
