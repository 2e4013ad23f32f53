"""Shared fixtures: the ``backend`` fixture runs a test once per known backend.

A backend that cannot load here is skipped with the registry's reason, so a test
suite on a machine without numba or torch still runs everything else.
"""

from __future__ import annotations

import numpy as np
import pytest

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
