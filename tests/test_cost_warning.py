"""The CostWarning before a call whose estimated work is far beyond the rest.

The warning is issued before any work starts, so turning it into an error
(``simplefilter("error")``) checks it without running the hours-long call.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import aces_fast as af
from aces_fast import _cost

RNG = np.random.default_rng(0)
BIG = (RNG.random((4000, 300)) < 0.5).astype(np.uint8)


def _raises_cost_warning(call):
    with warnings.catch_warnings():
        warnings.simplefilter("error", af.CostWarning)
        with pytest.raises(af.CostWarning) as info:
            call()
    return str(info.value)


def test_warns_before_the_exact_fit_over_thousands_of_rows(backend):
    message = _raises_cost_warning(lambda: af.aces_o(BIG, top_k=None, steps=400, backend=backend))
    # the estimate: (steps + 1) sum_j |P_j||F_j|, about 401 * 300 * 2000 * 2000
    colsum = BIG.sum(axis=0).astype(np.int64)
    expected = 401 * int((colsum * (4000 - colsum)).sum())
    assert f"{expected:.2g}" in message, message
    assert "bins=" in message and "top_k" in message, message
    assert "aces-o" in message and backend in message, message


def test_warns_in_rerank_and_rerank_batch(backend):
    for call in (
        lambda: af.rerank(BIG, "aces-o", top_k=None, steps=400, backend=backend),
        lambda: af.rerank(BIG, "aces-o-warm", top_k=None, steps=400, backend=backend),
        lambda: af.rerank_batch([BIG[:10], BIG], "aces-o", top_k=None, steps=400, backend=backend),
    ):
        message = _raises_cost_warning(call)
        assert "bins=" in message, message
    # many tasks each below the threshold but together far beyond it
    message = _raises_cost_warning(
        lambda: af.rerank_batch([BIG[:2000]] * 8, "aces-o", top_k=None, steps=400, backend=backend)
    )
    assert "summed over 8 tasks" in message, message


def test_the_warning_points_at_the_callers_line_and_comes_once(monkeypatch):
    monkeypatch.setattr(_cost, "WARN_SECONDS", 1e-12)  # a cheap call that warns
    small = np.ascontiguousarray(BIG[:30, :8])
    for call in (
        lambda: af.aces_o(small, top_k=None, steps=3, backend="numpy"),
        lambda: af.rerank(small, "aces-o", top_k=None, steps=3, backend="numpy"),
        lambda: af.rerank_batch([small, small], "aces-o", top_k=None, steps=3, backend="numpy"),
    ):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            call()
        costly = [w for w in caught if issubclass(w.category, af.CostWarning)]
        assert len(costly) == 1, [str(w.message) for w in caught]
        assert costly[0].filename == __file__


def test_no_warning_for_the_defaults_and_the_cheap_alternatives(backend):
    small = np.ascontiguousarray(BIG[:300, :40])
    with warnings.catch_warnings():
        warnings.simplefilter("error", af.CostWarning)
        af.aces_o(BIG, backend=backend)  # top_k=24: a few dozen rows
        af.aces_o(small, top_k=None, steps=5, backend=backend)
        af.rerank_batch([BIG, small], "aces-o", backend=backend)
        for method in ("aces-c", "majority", "codet", "b4"):
            af.rerank(BIG, method, backend=backend)
        if backend == "cpp":
            # the binned fit's estimate is not quadratic: never warned about
            assert _cost.aces_o_cost(BIG, {"bins": 2048, "top_k": None, "steps": 400}, True) is None


def test_the_shape_bound_decides_below_the_threshold_without_reading_b():
    class Shape:  # a shape and nothing else: reading data would fail
        shape = (100, 50)

    assert (
        _cost.aces_o_cost(Shape(), {"bins": None, "top_k": None, "steps": 90}, False).work
        == 91 * 50 * 50 * 50
    )
    _cost.warn_if_costly(
        _cost.aces_o_cost,
        "aces-o",
        af.backends.get_backend("numpy"),
        [Shape()],
        {"bins": None, "top_k": None, "steps": 90},
    )


def test_exact_estimate_uses_column_counts():
    B = np.zeros((10, 3), np.uint8)
    B[:5, 0] = 1  # 5 x 5 pairs
    B[:1, 1] = 1  # 1 x 9 pairs; column 2 constant: none
    cost = _cost.aces_o_cost(B, {"bins": None, "top_k": None, "steps": 9}, True)
    assert cost.work == 10 * (25 + 9)
    bound = _cost.aces_o_cost(B, {"bins": None, "top_k": 4, "steps": 9}, True)
    assert bound.work == 10 * 3 * 2 * 2  # top_k rows only: the shape bound
