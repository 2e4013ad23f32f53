"""Parameter ranges, meta tensors and overflowing weights (issue 12, items 1 and 6).

Every integer or real parameter a method declares in the registry has a stated
range; a value beyond it -- beyond int64 included -- is a ValueError naming the
parameter and the range, on every backend, before any backend work. Weights whose
sum overflows are refused the same way everywhere; data-less ``meta`` tensors
are refused with the device named.
"""

from __future__ import annotations

import numpy as np
import pytest

import aces_fast as af
from aces_fast import _registry
from aces_fast._registry import Int, OrNone, Real

torch = pytest.importorskip("torch")

B = np.array([[1, 0, 1], [0, 1, 1], [1, 1, 0], [0, 0, 1]], dtype=np.uint8)


def _bounded_params():
    """(method, param name, checker) of every parameter with a numeric range."""
    seen = []
    for spec in _registry.specs():
        for p in spec.params:
            check = p.check.inner if isinstance(p.check, OrNone) else p.check
            if isinstance(check, (Int, Real)):
                seen.append((spec.name, p.name, check))
    return seen


BOUNDED = _bounded_params()


def test_every_numeric_parameter_has_an_upper_bound():
    assert {name for _, name, _ in BOUNDED} >= {
        "steps",
        "top_k",
        "gamma",
        "lr",
        "tie_tol",
        "bins",
        "exponent",
        "alpha",
        "beta0",
    }
    for method, name, check in BOUNDED:
        assert check.maximum is not None, (method, name)


def _beyond(check):
    if isinstance(check, Int):
        return [check.maximum + 1, 2**64, 2**200, check.minimum - 1, -(2**70)]
    return [check.maximum * 2, 10**400, float("inf"), float("nan"), -1e308]


@pytest.mark.parametrize(
    ("method", "name", "check"), BOUNDED, ids=[f"{m}-{n}" for m, n, _ in BOUNDED]
)
def test_out_of_range_is_a_value_error_naming_the_range(backend, method, name, check):
    for value in _beyond(check):
        if name == "bins" and backend != "cpp":
            continue  # refused as a backend choice before the range; see below
        with pytest.raises(ValueError, match=name) as info:
            af.rerank(B, method, backend=backend, **{name: value})
        message = str(info.value)
        if not (isinstance(value, float) and np.isnan(value)):
            assert str(check.maximum) in message, message
            assert len(message) < 200, message  # huge integers are shortened


def test_top_k_and_steps_beyond_int64():
    for kw in (
        {"top_k": 2**64},
        {"steps": 2**62},
        {"steps": 2**63 - 1},
        {"top_k": -1},
        {"steps": -1},
    ):
        for fn in (
            lambda kw=kw: af.aces_o(B, **kw),
            lambda kw=kw: af.rerank_batch([B, B], "aces-o", **kw),
        ):
            with pytest.raises(ValueError, match=next(iter(kw))):
                fn()
    # top_k = 2**63 - 1 is allowed and keeps every candidate, on every backend
    ref = af.aces_o(B, top_k=None, steps=5, backend="numpy")
    for be in af.available_backends():
        got = af.aces_o(B, top_k=2**63 - 1, steps=5, backend=be)
        np.testing.assert_allclose(got.weights, ref.weights, atol=1e-12)


@pytest.mark.parametrize("n_threads", [0, -1, 4097, 2**64, 2**200])
def test_n_threads_range(n_threads):
    with pytest.raises(ValueError, match=r"n_threads.*4096"):
        af.rerank_batch([B], "aces-c", n_threads=n_threads)


def test_n_threads_type():
    with pytest.raises(TypeError, match="n_threads"):
        af.rerank_batch([B], "aces-c", n_threads=2.0)


def test_meta_tensors_are_refused_naming_the_device(backend):
    meta = torch.zeros((4, 3), device="meta")
    w_meta = torch.ones(3, device="meta")
    calls = [
        lambda: af.rerank(meta, backend=backend),
        lambda: af.aces_c(meta, backend=backend),
        lambda: af.aces_o(meta, backend=backend),
        lambda: af.majority_vote(meta, backend=backend),
        lambda: af.codet(meta, backend=backend),
        lambda: af.b4(meta, backend=backend),
        lambda: af.loo_auc(meta, backend=backend),
        lambda: af.loo_auc(B, weights=w_meta, backend=backend),
        lambda: af.surrogate_loo_auc(B, w_meta, backend=backend),
        lambda: af.rerank_batch([meta], backend=backend),
        lambda: af.rerank_batch(torch.zeros((2, 4, 3), device="meta"), backend=backend),
    ]
    for call in calls:
        with pytest.raises((ValueError, TypeError), match="meta"):
            call()


def test_meta_tensors_in_metrics_and_helpers():
    meta4 = torch.zeros(4, device="meta")
    calls = [
        lambda: af.pass_at_k(meta4, [1, 0, 0, 1]),
        lambda: af.pass_at_k([1.0, 2.0, 3.0, 4.0], meta4),
        lambda: af.diagnostics(torch.zeros((4, 3), device="meta"), [1, 0, 0, 1]),
        lambda: af.diagnostics(B, meta4),
        lambda: af.mbr_exec(torch.zeros((4, 3), dtype=torch.int64, device="meta")),
        lambda: af.combine(meta4, np.ones(4) / 2, np.eye(4)),
        lambda: af.combine(np.arange(4.0), meta4, np.eye(4)),
        lambda: af.combine(np.arange(4.0), np.ones(4) / 2, torch.eye(4, device="meta")),
    ]
    for call in calls:
        with pytest.raises((ValueError, TypeError), match="meta"):
            call()


@pytest.mark.parametrize(
    "weights",
    [np.full(3, 1.7e308), np.array([1e300, 1e300, 0.0]), np.array([np.finfo(float).max, 0, 0])],
)
def test_overflowing_weight_sums_are_refused_on_every_backend(backend, weights):
    for call in (
        lambda w: af.loo_auc(B, weights=w, backend=backend),
        lambda w: af.surrogate_loo_auc(B, w, backend=backend),
    ):
        for w in (weights, torch.from_numpy(weights)):
            with pytest.raises(ValueError, match="weights sum to"):
                call(w)


def test_largest_accepted_weight_sum_agrees_with_numpy(backend):
    w = np.array([4e299, 2e299, 1e299])  # sum 7e299 <= 1e300
    ref = af.loo_auc(B, weights=w, backend="numpy")
    got = af.loo_auc(B, weights=w, backend=backend)
    np.testing.assert_allclose(got, ref, rtol=1e-12)
    np.testing.assert_allclose(got, af.loo_auc(B, weights=w / 1e299, backend="numpy"), rtol=1e-12)


@pytest.mark.parametrize("bad", ["cuda", "nope", "", "c++"])
def test_empty_batch_still_checks_the_backend_name(bad):
    with pytest.raises(ValueError, match="backend"):
        af.rerank_batch([], backend=bad)
    assert af.rerank_batch([], backend="numpy") == []


@pytest.mark.parametrize("w", [1.0, 0, np.float64(2.0), np.ones((1, 3)), [[1, 1, 1]]])
def test_scalar_or_2d_weights_are_refused_naming_the_shape(w):
    with pytest.raises((ValueError, TypeError), match=r"shape|1-D"):
        af.loo_auc(B, weights=w)


def test_mbr_exec_edges():
    np.testing.assert_array_equal(af.mbr_exec([[], []]).scores, [2.0, 2.0])
    for bad in ([], [[1, 2], [3]], [[[1]]], [[None, 1]], [[1.5, 2.0]]):
        with pytest.raises((ValueError, TypeError), match="outputs"):
            af.mbr_exec(bad)


def test_gamma_and_exponent_ranges_are_documented_and_enforced():
    assert "1e4" in af.aces_o.__doc__ and "[0, 16]" in af.codet.__doc__
    for kw in ({"gamma": 1e21}, {"gamma": 1e4 * (1 + 1e-12)}):
        with pytest.raises(ValueError, match="gamma"):
            af.aces_o(B, **kw)
        with pytest.raises(ValueError, match="gamma"):
            af.surrogate_loo_auc(B, np.ones(3), **kw)
    with pytest.raises(ValueError, match="exponent"):
        af.codet(np.zeros((3, 0)), exponent=1e300)


def test_extremes_of_the_ranges_stay_finite_and_agree(backend):
    rng = np.random.default_rng(3)
    X = (rng.random((12, 5)) < 0.5).astype(np.uint8)
    w = rng.random(5)
    ref = af.surrogate_loo_auc(X, w, gamma=1e4, backend="numpy")
    got = af.surrogate_loo_auc(X, w, gamma=1e4, backend=backend)
    assert np.isfinite(got.objective) and np.isfinite(got.gradient).all()
    np.testing.assert_allclose(got.objective, ref.objective, rtol=1e-9, atol=1e-9)
    for M in (X, np.zeros((3, 0), np.uint8), np.ones((4, 2), np.uint8)):
        for e in (0.0, 16.0):
            s = af.codet(M, exponent=e, backend=backend).scores
            assert np.isfinite(s).all()
            np.testing.assert_array_equal(s, af.codet(M, exponent=e, backend="numpy").scores)
    r = af.aces_o(X, gamma=1e4, lr=1e3, steps=3, backend=backend)
    assert np.isfinite(r.weights).all() and np.isfinite(r.objective).all()


def test_torch_takes_arrays_with_negative_strides_of_any_shape():
    """A 1 x 1 array reversed keeps its negative strides through np.ascontiguousarray
    (NumPy calls it contiguous); torch.from_numpy refused it."""
    for a in (
        np.array([[1]], np.uint8)[::-1, ::-1],
        np.array([[1, 0]], bool)[::-1, ::-1],
        np.array([[0], [1]], np.uint8)[::-1],
    ):
        for method in ("b4", "codet", "aces-c", "majority"):
            ref = af.rerank(np.ascontiguousarray(a), method, backend="numpy")
            got = af.rerank_batch([a], method, backend="torch")[0]
            np.testing.assert_allclose(got.scores, ref.scores, rtol=1e-12)
            np.testing.assert_allclose(
                af.rerank(a, method, backend="torch").scores, ref.scores, rtol=1e-12
            )
