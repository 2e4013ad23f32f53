"""Evaluation metrics (docs/contract.rst §5) against enumeration and counting definitions."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

import aces_fast as af
import brute
from helpers import EXAMPLE, EXAMPLE_LABELS, random_matrix

# ---------------------------------------------------------------------------
# pass@k of a ranking


def _random_ranking(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 8))
    scores = rng.integers(0, max(1, n // 2) + 1, size=n).astype(float)  # many ties
    labels = (rng.random(n) < 0.35).astype(int)
    return scores, labels


@pytest.mark.parametrize("seed", range(40))
def test_pass_at_k_matches_enumeration(seed):
    scores, labels = _random_ranking(seed)
    n = len(scores)
    for k in range(1, n + 3):
        want = brute.pass_at_k(scores.tolist(), labels.tolist(), k)
        assert af.pass_at_k(scores, labels, k) == pytest.approx(float(want), abs=1e-12)


def test_pass_at_k_all_tied():
    labels = [0, 1, 0, 0, 1, 0]
    for k in range(1, 8):
        want = float(brute.pass_at_k([0.5] * 6, labels, k))
        assert af.pass_at_k(np.full(6, 0.5), labels, k) == pytest.approx(want, abs=1e-15)
    # closed form for k = 1: share of correct candidates
    assert af.pass_at_k(np.zeros(6), labels, 1) == pytest.approx(2 / 6, abs=1e-15)


def test_pass_at_k_no_correct_and_all_correct():
    s = np.array([3.0, 1.0, 2.0, 2.0])
    for k in (1, 2, 4, 10):
        assert af.pass_at_k(s, [0, 0, 0, 0], k) == 0.0
        assert af.pass_at_k(s, [1, 1, 1, 1], k) == 1.0


def test_pass_at_k_k_larger_than_n():
    assert af.pass_at_k([1.0, 0.0, 0.0], [0, 0, 1], 3) == 1.0
    assert af.pass_at_k([1.0, 0.0, 0.0], [0, 0, 1], 50) == 1.0
    assert af.pass_at_k([1.0, 0.0, 0.0], [0, 0, 1], 2) == pytest.approx(0.5, abs=1e-15)


def test_pass_at_k_strict_order_is_deterministic():
    s = np.array([0.1, 0.9, 0.5])
    assert af.pass_at_k(s, [0, 1, 0], 1) == 1.0
    assert af.pass_at_k(s, [1, 0, 0], 1) == 0.0
    assert af.pass_at_k(s, [1, 0, 0], 2) == 0.0
    assert af.pass_at_k(s, [1, 0, 0], 3) == 1.0


def test_pass_at_k_accepts_result_and_bool_labels():
    res = af.aces_c(EXAMPLE, backend="numpy")
    labels = EXAMPLE_LABELS.astype(bool)
    want = brute.pass_at_k(res.scores.tolist(), EXAMPLE_LABELS.tolist(), 1)
    assert af.pass_at_k(res, labels, 1) == pytest.approx(float(want), abs=1e-15)
    assert af.pass_at_k(res, labels, 1) == af.pass_at_k(res.scores, EXAMPLE_LABELS, 1)


def test_pass_at_k_bad_input():
    with pytest.raises(ValueError, match="k must be >= 1"):
        af.pass_at_k([1.0, 0.0], [1, 0], 0)
    with pytest.raises(ValueError, match="labels must have shape"):
        af.pass_at_k([1.0, 0.0], [1, 0, 1], 1)
    with pytest.raises(ValueError, match="scores must be finite"):
        af.pass_at_k([np.nan, 0.0], [1, 0], 1)
    with pytest.raises(ValueError, match="labels must contain only 0 and 1"):
        af.pass_at_k([1.0, 0.0], [2, 0], 1)


# ---------------------------------------------------------------------------
# unbiased pass@k


def test_pass_at_k_unbiased_scalar_grid():
    for n in range(1, 13):
        for c in range(n + 1):
            for k in range(1, n + 1):
                got = af.pass_at_k_unbiased(n, c, k)
                assert isinstance(got, float)
                assert got == pytest.approx(float(brute.pass_at_k_unbiased(n, c, k)), abs=1e-12)


def test_pass_at_k_unbiased_large_n_stable():
    got = af.pass_at_k_unbiased(200, 3, 10)
    assert got == pytest.approx(float(brute.pass_at_k_unbiased(200, 3, 10)), rel=1e-12)


def test_pass_at_k_unbiased_arrays():
    n = np.array([[5, 10, 20], [7, 7, 30]])
    c = np.array([[0, 3, 20], [1, 6, 2]])
    got = af.pass_at_k_unbiased(n, c, 4)
    assert got.shape == (2, 3) and got.dtype == np.float64
    want = [
        [float(brute.pass_at_k_unbiased(int(a), int(b), 4)) for a, b in zip(r1, r2)]
        for r1, r2 in zip(n, c)
    ]
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)
    # broadcasting a scalar n against an array of c
    got = af.pass_at_k_unbiased(10, np.arange(11), 3)
    np.testing.assert_allclose(
        got, [float(brute.pass_at_k_unbiased(10, c, 3)) for c in range(11)], rtol=0, atol=1e-12
    )


def test_pass_at_k_unbiased_bad_input():
    with pytest.raises(ValueError, match="n >= k"):
        af.pass_at_k_unbiased(3, 1, 5)
    with pytest.raises(ValueError, match="0 <= c <= n"):
        af.pass_at_k_unbiased(3, 4, 1)
    with pytest.raises(ValueError, match="0 <= c <= n"):
        af.pass_at_k_unbiased(3, -1, 1)
    with pytest.raises(TypeError, match="n must be integer"):
        af.pass_at_k_unbiased(3.5, 1, 1)


# ---------------------------------------------------------------------------
# diagnostics


def _diag_cases():
    rng = np.random.default_rng(31)
    out = [(EXAMPLE, EXAMPLE_LABELS)]
    for n, m in [(6, 4), (9, 7), (12, 10)]:
        B = random_matrix(rng, n, m, density=0.5)
        B[:, 0] = 1  # a constant column
        y = np.zeros(n, dtype=int)
        y[rng.choice(n, size=max(1, n // 3), replace=False)] = 1
        out.append((B, y))
    return out


@pytest.mark.parametrize("case", range(4))
def test_diagnostics_matches_counting(case):
    B, y = _diag_cases()[case]
    d = af.diagnostics(B, y)
    n, m = B.shape
    abd = brute.alpha_beta_delta(B, y.tolist())
    np.testing.assert_allclose(d.alpha, [float(a) for a, _, _ in abd], rtol=0, atol=1e-15)
    np.testing.assert_allclose(d.beta, [float(b) for _, b, _ in abd], rtol=0, atol=1e-15)
    np.testing.assert_allclose(d.delta, [float(x) for _, _, x in abd], rtol=0, atol=1e-15)
    nonconst = [not brute.is_constant(B, j) for j in range(m)]
    np.testing.assert_array_equal(d.nonconstant, nonconst)
    M = sum(nonconst)
    dbar = sum(abd[j][2] for j in range(m) if nonconst[j]) / M
    assert d.delta_bar == pytest.approx(float(dbar), abs=1e-15)
    assert d.threshold == pytest.approx(2 * math.sqrt(math.log(2) / M), abs=1e-15)
    assert d.assumption_holds == (float(dbar) > 2 * math.sqrt(math.log(2) / M))
    oracle = [max(Fraction(0), abd[j][2]) if nonconst[j] else Fraction(0) for j in range(m)]
    np.testing.assert_allclose(d.oracle_weights, [float(x) for x in oracle], rtol=0, atol=1e-15)

    def snr(w):
        num = sum(wj * dj for wj, (_, _, dj) in zip(w, abd)) ** 2
        return num / sum(wj * wj for wj in w)

    uniform = [Fraction(int(c)) for c in nonconst]
    assert d.snr == pytest.approx(float(snr(uniform)), rel=1e-12)
    assert d.snr_oracle == pytest.approx(float(snr(oracle)), rel=1e-12)
    n_minus = n - int(sum(y))
    assert (d.n_plus, d.n_minus) == (int(sum(y)), n_minus)
    assert d.bound == pytest.approx(1 - n_minus * math.exp(-float(snr(uniform)) / 2), abs=1e-12)
    shares = brute.vote_shares(B, y.tolist())
    assert d.informative == pytest.approx(float(shares["informative"]), abs=1e-15)
    assert d.uninformative == pytest.approx(float(shares["uninformative"]), abs=1e-12)
    assert d.misleading == pytest.approx(float(shares["misleading"]), abs=1e-15)


def test_diagnostics_given_weights_and_k():
    B, y = _diag_cases()[2]
    w = np.random.default_rng(0).random(B.shape[1])
    d = af.diagnostics(B, y, weights=w, k=3)
    abd = brute.alpha_beta_delta(B, y.tolist())
    delta = np.array([float(x) for _, _, x in abd])
    R = float(np.dot(w, delta) ** 2 / np.dot(w, w))
    assert d.snr == pytest.approx(R, rel=1e-12)
    n_minus = int((y == 0).sum())
    assert d.bound == pytest.approx(1 - (n_minus / 3) * math.exp(-R / 2), abs=1e-12)
    # R is invariant to scaling the weights
    assert af.diagnostics(B, y, weights=7 * w).snr == pytest.approx(R, rel=1e-12)


def test_diagnostics_spec_example_values():
    d = af.diagnostics(EXAMPLE, EXAMPLE_LABELS)
    # tests 9 and 10 are passed by every incorrect candidate only: delta = -1
    assert d.delta[8] == -1 and d.delta[9] == -1
    assert d.delta[0] == 1
    assert d.oracle_weights[8] == 0 and d.oracle_weights[0] == 1
    assert d.informative + d.uninformative + d.misleading == pytest.approx(1.0, abs=1e-15)


def test_diagnostics_one_class_only():
    B = random_matrix(np.random.default_rng(4), 5, 4, density=0.5)
    d = af.diagnostics(B, np.ones(5, dtype=int))
    assert d.n_minus == 0 and math.isnan(d.delta_bar)
    assert np.isnan(d.beta).all()
    assert math.isnan(d.informative) and not d.assumption_holds


def test_diagnostics_bad_input():
    with pytest.raises(ValueError, match="labels must have shape"):
        af.diagnostics(EXAMPLE, EXAMPLE_LABELS[:-1])
    with pytest.raises(ValueError, match="weights has length"):
        af.diagnostics(EXAMPLE, EXAMPLE_LABELS, weights=np.ones(3))
    with pytest.raises(ValueError, match="must contain only 0 and 1"):
        af.diagnostics(EXAMPLE * 2, EXAMPLE_LABELS)


def test_pass_at_k_of_method_results_on_spec_example():
    # ACES-C puts a correct candidate first on the example; majority ties at the top
    res = af.aces_c(EXAMPLE, backend="numpy")
    maj = af.majority_vote(EXAMPLE, backend="numpy")
    for k in (1, 2, 3):
        for r in (res, maj):
            want = brute.pass_at_k(r.scores.tolist(), EXAMPLE_LABELS.tolist(), k)
            assert af.pass_at_k(r, EXAMPLE_LABELS, k) == pytest.approx(float(want), abs=1e-15)
    assert res.best in (0, 1, 2)
    assert af.pass_at_k(res, EXAMPLE_LABELS, 1) == 1.0
