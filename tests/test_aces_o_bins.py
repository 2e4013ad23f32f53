"""``aces_o(..., bins=...)``: the opt-in binned surrogate reaches the public API."""

from __future__ import annotations

import numpy as np
import pytest

import aces_fast as af
from aces_fast.datasets import load_dataset
from helpers import require_backend


@pytest.fixture(scope="module")
def cpp():
    require_backend("cpp")
    return "cpp"


@pytest.mark.parametrize("init", ["uniform", "aces-c"])
def test_binned_aces_o_close_to_exact_on_real_data(cpp, init):
    ds = load_dataset("humaneval-codegen16b")
    checked = 0
    for problem in ds.problems[:40]:
        if problem.B.shape[1] == 0:
            continue
        exact = af.aces_o(problem.B, top_k=None, init=init, backend=cpp)
        approx = af.aces_o(problem.B, top_k=None, init=init, bins=2048, backend=cpp)
        np.testing.assert_allclose(approx.weights, exact.weights, atol=1e-4)
        assert approx.info["bins"] == 2048 and "bins" not in exact.info
        assert approx.method == exact.method
        checked += 1
    assert checked >= 30


def test_binned_error_shrinks_with_more_bins(cpp):
    rng = np.random.default_rng(3)
    B = (rng.random((300, 40)) < 0.4).astype(np.uint8)
    exact = af.aces_o(B, top_k=None, steps=30, backend=cpp).weights
    errors = [
        np.abs(af.aces_o(B, top_k=None, steps=30, bins=b, backend=cpp).weights - exact).max()
        for b in (64, 1024)
    ]
    assert errors[1] < errors[0]


def test_bins_rejected_off_cpp_and_when_invalid(backend):
    B = (np.random.default_rng(0).random((6, 5)) < 0.5).astype(np.uint8)
    if backend != "cpp":
        with pytest.raises(ValueError, match="cpp backend only"):
            af.aces_o(B, bins=256, backend=backend)
    with pytest.raises(ValueError, match="bins must be >= 2"):
        af.aces_o(B, bins=1, backend=backend)
    with pytest.raises(TypeError, match="bins must be an integer"):
        af.aces_o(B, bins=256.0, backend=backend)
