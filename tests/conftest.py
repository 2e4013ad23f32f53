"""Shared fixtures: the ``backend`` fixture runs a test once per known backend.

A backend that cannot load here is skipped with the registry's reason, so a test
suite on a machine without numba or torch still runs everything else.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

# The benchmark harness (benchmarks/harness/) ships with the checkout, not the
# package; tests that check its workloads and baselines import it from here.
# The root holds no aces_fast/ folder (src/ layout), so nothing is shadowed.
_ROOT = str(Path(__file__).resolve().parents[1])
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

from aces_fast.backends import BACKEND_NAMES
from helpers import EXAMPLE, EXAMPLE_LABELS, require_backend


def _require(name: str) -> str:
    require_backend(name)
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
    return EXAMPLE.copy(), EXAMPLE_LABELS.copy()
