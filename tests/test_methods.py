"""Every public method on every backend against the NumPy reference (and brute force).

Exact quantities (LOO-AUC, weights and scores of closed-form methods, the
surrogate) must match the reference to 1e-12, ACES-O weights to 1e-6 (docs/contract.rst
§4). Result fields are checked on every backend.
"""

from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
import pytest
from benchmarks.harness.families import FAMILIES, family_matrix

import aces_fast as af
import brute
from aces_fast.backends import get_backend
from brute import nonconstant_mask
from helpers import EXAMPLE, EXAMPLE_LABELS, b4_tolerance, npy, random_matrix

EXACT = 1e-12
OPT = 1e-6


def cases():
    """Small matrices covering duplicates, constant columns and degenerate shapes."""
    rng = np.random.default_rng(2024)
    out = {
        "spec": EXAMPLE,
        "one_row": np.array([[1, 0, 1, 1]], dtype=np.uint8),
        "one_col": np.array([[1], [0], [0], [1], [1]], dtype=np.uint8),
        "no_cols": np.zeros((3, 0), dtype=np.uint8),
        "all_const": np.array([[1, 0, 1], [1, 0, 1], [1, 0, 1]], dtype=np.uint8),
        "identity": np.eye(5, dtype=np.uint8),
    }
    for i, (n, m, d) in enumerate([(6, 4, 0.5), (10, 7, 0.3), (15, 9, 0.6), (30, 12, 0.5)]):
        B = random_matrix(rng, n, m, density=d, dup_rows=n // 3)
        B[:, -1] = 1  # a constant column in every random case
        out[f"rand{i}"] = B
    return out


CASES = cases()
CASE_IDS = list(CASES)

_REF_CACHE = {}


def reference_aces_o(name, **kwargs):
    """``aces_o`` on the NumPy reference for case ``name``, computed once per session."""
    key = (name, tuple(sorted(kwargs.items())))
    if key not in _REF_CACHE:
        _REF_CACHE[key] = af.aces_o(CASES[name], backend="numpy", **kwargs)
    return _REF_CACHE[key]


def assert_close(got, want, atol):
    got, want = npy(got), npy(want)
    assert got.shape == want.shape
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_allclose(got, want, rtol=0, atol=atol, equal_nan=True)


def check_result_fields(res, B, backend, method, has_weights=True):
    n, m = B.shape
    scores, order = npy(res.scores), npy(res.order)
    assert res.backend == backend
    assert res.method == method
    assert scores.shape == (n,) and scores.dtype == np.float64
    assert order.shape == (n,) and order.dtype == np.int64
    assert sorted(order.tolist()) == list(range(n))
    # stable descending: scores non-increasing along order, ties by lower index
    assert order.tolist() == sorted(range(n), key=lambda i: (-scores[i], i))
    if has_weights:
        w = npy(res.weights)
        assert w.shape == (m,) and w.dtype == np.float64
        assert (w >= 0).all()
        if nonconstant_mask(B).any():
            assert w.sum() == pytest.approx(1.0, abs=1e-12)
        else:
            assert (w == 0).all()
        # constant columns carry no signal: weight exactly 0
        assert (w[~nonconstant_mask(B)] == 0).all()
    else:
        assert res.weights is None


# ---------------------------------------------------------------------------
# kernels


@pytest.mark.parametrize("name", CASE_IDS)
def test_loo_auc_uniform(backend, name):
    B = CASES[name]
    got = af.loo_auc(B, backend=backend)
    assert_close(got, af.loo_auc(B, backend="numpy"), EXACT)
    assert_close(got, brute.to_float_array(brute.loo_auc(B)), EXACT)


@pytest.mark.parametrize("name", CASE_IDS)
def test_loo_auc_weighted(backend, name):
    B = CASES[name]
    rng = np.random.default_rng(len(name))
    m = B.shape[1]
    for w in (
        rng.dirichlet(np.ones(m)) if m else np.zeros(0),
        rng.integers(0, 4, size=m) / 10.0,  # rational, ties likely
        np.full(m, 1.0 / max(m, 1)),
    ):
        assert_close(af.loo_auc(B, w, backend=backend), af.loo_auc(B, w, backend="numpy"), EXACT)


def test_loo_auc_spec_example_exact(backend):
    got = npy(af.loo_auc(EXAMPLE, backend=backend))
    np.testing.assert_allclose(
        got, [2 / 3, 2 / 3, 1 / 2, 2 / 3, 1 / 2, 2 / 5, 7 / 12, 7 / 24, 0, 0], rtol=0, atol=1e-15
    )
    got = npy(af.loo_auc(EXAMPLE, np.full(10, 0.1), backend=backend))
    np.testing.assert_allclose(
        got, [2 / 3, 2 / 3, 1 / 2, 2 / 3, 1 / 2, 2 / 5, 7 / 12, 7 / 24, 0, 0], rtol=0, atol=1e-15
    )


def test_loo_auc_float_ties_exact(backend):
    """Weights 0.1, 0.2, 0.3, 0.4: exact ties of 0.1 + 0.2 and 0.3 must count as ties."""
    B = np.array([[1, 1, 0, 1], [0, 0, 1, 0], [1, 1, 0, 0], [0, 0, 1, 1]], dtype=np.uint8)
    wq = [Fraction(k, 10) for k in (1, 2, 3, 4)]
    got = npy(af.loo_auc(B, np.array([0.1, 0.2, 0.3, 0.4]), backend=backend))
    np.testing.assert_allclose(got, brute.to_float_array(brute.loo_auc(B, wq)), rtol=0, atol=EXACT)


@pytest.mark.parametrize("name", CASE_IDS)
@pytest.mark.parametrize("gamma", [1.0, 10.0])
def test_surrogate(backend, name, gamma):
    B = CASES[name]
    m = B.shape[1]
    w = np.random.default_rng(m).dirichlet(np.ones(m)) if m else np.zeros(0)
    got = af.surrogate_loo_auc(B, w, gamma, backend=backend)
    ref = af.surrogate_loo_auc(B, w, gamma, backend="numpy")
    assert isinstance(got, af.SurrogateResult)
    assert_close(got.values, ref.values, EXACT)
    assert float(got.objective) == pytest.approx(ref.objective, abs=EXACT)
    np.testing.assert_allclose(npy(got.gradient), ref.gradient, rtol=1e-10, atol=EXACT)


def _repeat_case(seed):
    rng = np.random.default_rng(seed)
    B = random_matrix(rng, 8, 6, density=0.5)
    counts = rng.integers(0, 4, size=8).astype(np.int64)
    counts[:2] = [1, 2]
    return B, counts, np.repeat(B, counts, axis=0), rng.dirichlet(np.ones(6))


@pytest.mark.parametrize("seed", range(3))
def test_kernel_counts_equal_repeated_rows(backend, seed):
    """Row multiplicities given to the kernels act as repeated rows (0 = absent)."""
    be = get_backend(backend)
    B, counts, R, w = _repeat_case(seed)
    for weights in (None, w):
        got = npy(be.loo_auc(B, weights, 1e-9, counts))
        want = npy(be.loo_auc(R, weights, 1e-9))
        assert_close(got, want, EXACT)
        assert_close(got, af.loo_auc(R, weights, backend="numpy"), EXACT)
    L, J, g = be.surrogate(B, w, 10.0, counts)
    ref = af.surrogate_loo_auc(R, w, 10.0, backend="numpy")
    assert_close(L, ref.values, EXACT)
    assert float(J) == pytest.approx(ref.objective, abs=EXACT)
    np.testing.assert_allclose(npy(g), ref.gradient, rtol=1e-10, atol=1e-11)
    active = nonconstant_mask(R).astype(np.uint8)
    wf, obj = be.aces_o_fit(B, np.zeros(6), active, 10.0, 0.05, 10, counts)
    wr, objr = get_backend("numpy").aces_o_fit(R, np.zeros(6), active, 10.0, 0.05, 10)
    np.testing.assert_allclose(npy(wf), wr, rtol=0, atol=OPT)
    np.testing.assert_allclose(npy(obj), objr, rtol=0, atol=OPT)


# ---------------------------------------------------------------------------
# closed-form methods


@pytest.mark.parametrize("name", CASE_IDS)
def test_majority_vote(backend, name):
    B = CASES[name]
    res = af.majority_vote(B, backend=backend)
    check_result_fields(res, B, backend, "majority")
    ref = af.majority_vote(B, backend="numpy")
    assert_close(res.weights, ref.weights, EXACT)
    assert_close(res.scores, ref.scores, EXACT)
    np.testing.assert_array_equal(npy(res.order), ref.order)
    exact = brute.weighted_scores(B, brute.majority_weights(B))
    assert npy(res.order).tolist() == brute.stable_descending(exact)


@pytest.mark.parametrize(
    ("variant", "method"), [("weighted", "aces-c"), ("filter", "aces-c-filter")]
)
@pytest.mark.parametrize("name", CASE_IDS)
def test_aces_c(backend, name, variant, method):
    B = CASES[name]
    res = af.aces_c(B, variant, backend=backend)
    check_result_fields(res, B, backend, method)
    ref = af.aces_c(B, variant, backend="numpy")
    assert res.fallback == ref.fallback
    assert_close(res.loo_auc, ref.loo_auc, EXACT)
    assert_close(res.weights, ref.weights, EXACT)
    assert_close(res.scores, ref.scores, EXACT)
    np.testing.assert_array_equal(npy(res.order), ref.order)
    w_exact, fallback = brute.aces_c_weights(B, variant)
    assert res.fallback == fallback
    np.testing.assert_allclose(npy(res.weights), [float(x) for x in w_exact], rtol=0, atol=EXACT)
    assert npy(res.order).tolist() == brute.stable_descending(brute.weighted_scores(B, w_exact))


@pytest.mark.parametrize("variant", ["weighted", "filter"])
def test_aces_c_fallback_when_no_test_is_informative(backend, variant):
    # each candidate passes only its own test: every LOO-AUC is 0
    B = np.eye(5, dtype=np.uint8)
    B = np.vstack([B, np.array([[1, 1, 0, 0, 0]], dtype=np.uint8)])
    assert np.all(npy(af.loo_auc(B, backend="numpy")) <= 0.5)
    res = af.aces_c(B, variant, backend=backend)
    assert res.fallback is True
    maj = af.majority_vote(B, backend=backend)
    assert_close(res.weights, maj.weights, EXACT)
    assert_close(res.scores, maj.scores, EXACT)
    assert npy(res.order).tolist() == npy(maj.order).tolist()


def test_aces_c_spec_example(backend):
    res = af.aces_c(EXAMPLE, backend=backend)
    np.testing.assert_allclose(
        npy(res.weights), np.array([5, 5, 0, 5, 0, 0, 2, 0, 0, 0]) / 17, rtol=0, atol=1e-15
    )
    assert brute.auc(npy(res.scores).tolist(), EXAMPLE_LABELS.tolist()) == Fraction(14, 15)
    maj = af.majority_vote(EXAMPLE, backend=backend)
    assert brute.auc(npy(maj.scores).tolist(), EXAMPLE_LABELS.tolist()) == Fraction(9, 10)


def test_scores_tie_exactly_majority(backend):
    """All 2^10 rows with weights 1/10: equal pass counts must give identical floats.

    A plain ``B @ w`` separates some of these sums by rounding noise.
    """
    B = np.array(list(itertools.product([0, 1], repeat=10)), dtype=np.uint8)
    res = af.majority_vote(B, backend=backend)
    scores = npy(res.scores)
    passes = B.sum(axis=1, dtype=np.int64)
    for k in range(11):
        assert len(np.unique(scores[passes == k])) == 1
    assert len(np.unique(scores)) == 11
    np.testing.assert_array_equal(npy(res.order), np.argsort(-passes, kind="stable"))


@pytest.mark.parametrize("seed", range(3))
def test_scores_tie_exactly_aces_c(backend, seed):
    """Candidates whose exact (rational) ACES-C scores are equal get equal float scores."""
    rng = np.random.default_rng(900 + seed)
    B = random_matrix(rng, 14, 9, density=0.5)
    B[7:] = 1 - B[:7]  # complements: many equal weighted sums by different test sets
    res = af.aces_c(B, backend=backend)
    w_exact, _ = brute.aces_c_weights(B)
    exact = brute.weighted_scores(B, w_exact)
    scores = npy(res.scores)
    for i, j in itertools.combinations(range(B.shape[0]), 2):
        if exact[i] == exact[j]:
            assert scores[i] == scores[j]
        else:
            assert scores[i] != scores[j]


@pytest.mark.parametrize("method", ["aces-c", "aces-c-filter"])
def test_tie_tol_zero_orders_each_backend_by_its_own_scores(fast_backend, method):
    """docs/contract.rst §2.3: with ``tie_tol = 0`` exact ties compare as each
    backend's rounding does. Seed 40 (10 x 18) is such a case for the filter
    variant: the filter's weights 1/k summed in another order round apart, and
    the cpp order differs from the reference's (a fuzzing run found it). Scores
    still agree to 1e-12, each order is the stable sort of its own scores and
    equals the batch's, and with the default tolerance the orders agree."""
    rng = np.random.default_rng(40)
    n, m = int(rng.integers(4, 16)), int(rng.integers(3, 24))  # 10, 18
    B = (rng.random((n, m)) < 0.5).astype(np.uint8)
    ref = af.rerank(B, method, backend="numpy", tie_tol=0.0)
    res = af.rerank(B, method, backend=fast_backend, tie_tol=0.0)
    scores = npy(res.scores)
    assert_close(scores, ref.scores, EXACT)
    np.testing.assert_array_equal(npy(res.order), np.argsort(-scores, kind="stable"))
    batch = af.rerank_batch([B, B[::-1]], method, backend=fast_backend, tie_tol=0.0)
    np.testing.assert_array_equal(npy(batch[0].order), npy(res.order))
    np.testing.assert_array_equal(npy(batch[0].scores), scores)
    np.testing.assert_array_equal(
        npy(af.rerank(B, method, backend=fast_backend).order),
        af.rerank(B, method, backend="numpy").order,
    )
    if method == "aces-c-filter" and fast_backend == "cpp":
        assert not np.array_equal(npy(res.order), ref.order)  # the case is a real one


def test_every_family_is_a_01_matrix_of_its_kind():
    rng = np.random.default_rng(3)
    for family in FAMILIES:
        B = family_matrix(family, 50, 40, rng)
        assert B.shape == (50, 40) and B.dtype == np.uint8 and set(np.unique(B)) <= {0, 1}
    assert len(np.unique(family_matrix("few-rows", 50, 40, rng), axis=0)) <= 3
    assert np.unique(family_matrix("dup-cols", 50, 40, rng), axis=1).shape[1] <= 3
    varying = (family_matrix("one-col", 50, 40, rng).std(axis=0) > 0).sum()
    assert varying <= 1
    assert len(np.unique(family_matrix("all-const", 50, 40, rng))) == 1
    nested = family_matrix("nested", 50, 40, rng)
    passes = nested.sum(axis=1)
    # each row's passed tests contain those of every row that passes fewer
    for i, j in itertools.combinations(range(50), 2):
        lo, hi = (i, j) if passes[i] <= passes[j] else (j, i)
        assert np.all(nested[lo] <= nested[hi])
    with pytest.raises(ValueError, match="unknown family"):
        family_matrix("bogus", 2, 2, rng)


#: shapes across the packing's word edges (63-65, 127-129 tests), a score list
#: past the lane sort's 128 keys (200 rows), and a thin tall matrix
FAMILY_SHAPES = [(1, 65), (40, 63), (129, 64), (200, 129), (300, 7)]
EXACT_METHODS = ["majority", "codet", "codet-linear", "b4", "aces-c", "aces-c-filter"]


@pytest.mark.parametrize("family", FAMILIES)
def test_exact_methods_agree_with_the_reference_on_every_family(fast_backend, family):
    """docs/contract.rst §4 beyond the small cases above: every exact method on
    matrices of each family (tests/helpers.py) at shapes that reach the word-edge
    packing, the longer sorts and the dedup paths; LOO-AUC and ACES-C's fallback
    too. B4 within its log-gamma bound (§4), the rest to 1e-12, orders equal."""
    rng = np.random.default_rng(sum(map(ord, family)))
    for n, m in FAMILY_SHAPES:
        B = family_matrix(family, n, m, rng)
        for method in EXACT_METHODS:
            ref = af.rerank(B, method, backend="numpy")
            got = af.rerank(B, method, backend=fast_backend)
            where = f"{method} on {family} {n}x{m}"
            np.testing.assert_array_equal(npy(got.order), ref.order, err_msg=where)
            atol = b4_tolerance(n, m) if method == "b4" else EXACT
            assert_close(got.scores, ref.scores, atol)
            if ref.weights is not None:
                assert_close(got.weights, ref.weights, EXACT)
            if method.startswith("aces-c"):
                assert_close(got.loo_auc, ref.loo_auc, EXACT)
                assert bool(got.fallback) == bool(ref.fallback), where


# ---------------------------------------------------------------------------
# ACES-O


def _uniform_active(B):
    mask = nonconstant_mask(B)
    return mask / mask.sum() if mask.any() else np.zeros(B.shape[1])


@pytest.mark.parametrize(
    "name", ["spec", "one_row", "one_col", "no_cols", "all_const", "identity", "rand0", "rand3"]
)
def test_aces_o_defaults(backend, name):
    B = CASES[name]
    res = af.aces_o(B, backend=backend)
    check_result_fields(res, B, backend, "aces-o")
    ref = reference_aces_o(name)
    np.testing.assert_allclose(npy(res.weights), ref.weights, rtol=0, atol=OPT)
    np.testing.assert_allclose(npy(res.objective), ref.objective, rtol=0, atol=OPT)
    assert npy(res.objective).shape == (91,)
    # scores are B @ weights
    np.testing.assert_allclose(npy(res.scores), B @ npy(res.weights), rtol=0, atol=1e-9)


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(top_k=None),
        dict(top_k=None, init="aces-c", lr=0.05, steps=30),
        dict(top_k=4, steps=20, gamma=3.0),
        dict(top_k=1, steps=5),
        dict(init="aces-c"),
    ],
)
@pytest.mark.parametrize("name", ["spec", "rand3"])
def test_aces_o_options(backend, name, kwargs):
    B = CASES[name]
    res = af.aces_o(B, backend=backend, **kwargs)
    ref = reference_aces_o(name, **kwargs)
    check_result_fields(
        res, B, backend, "aces-o-warm" if kwargs.get("init") == "aces-c" else "aces-o"
    )
    np.testing.assert_allclose(npy(res.weights), ref.weights, rtol=0, atol=OPT)
    np.testing.assert_allclose(npy(res.objective), ref.objective, rtol=0, atol=OPT)
    assert npy(res.objective).shape == (kwargs.get("steps", 90) + 1,)


@pytest.mark.parametrize("name", CASE_IDS)
def test_aces_o_zero_steps_is_uniform(backend, name):
    B = CASES[name]
    res = af.aces_o(B, steps=0, top_k=None, backend=backend)
    w = npy(res.weights)
    np.testing.assert_allclose(w, _uniform_active(B), rtol=0, atol=1e-15)
    obj = npy(res.objective)
    assert obj.shape == (1,)
    if B.shape[1]:
        start = af.surrogate_loo_auc(B, _uniform_active(B), 10.0, backend="numpy").objective
        assert obj[0] == pytest.approx(start, abs=EXACT)


@pytest.mark.parametrize("top_k", [None, 3, 8])
@pytest.mark.parametrize("init", ["uniform", "aces-c"])
def test_aces_o_objective_starts_at_initial_weights(backend, top_k, init):
    B = CASES["rand3"]
    res = af.aces_o(B, steps=7, top_k=top_k, init=init, gamma=5.0, backend=backend)
    obj = npy(res.objective)
    assert obj.shape == (8,)
    n = B.shape[0]
    keep = sorted(sorted(range(n), key=lambda i: (-int(B[i].sum()), i))[: top_k or n])
    np.testing.assert_array_equal(np.asarray(res.info["rows"]), keep)
    active = nonconstant_mask(B)
    if init == "uniform":
        w0 = _uniform_active(B)
    else:
        wc = np.array([float(x) for x in brute.aces_c_weights(B)[0]])
        w0 = np.where(active, wc + 1e-3, 0.0)
        w0 /= w0.sum()
    start = af.surrogate_loo_auc(B[keep], w0, 5.0, backend="numpy").objective
    assert obj[0] == pytest.approx(start, abs=1e-10)


def test_aces_o_top_k_optimizes_on_submatrix(backend):
    """With top_k, the weights are those learned on the top-k rows alone."""
    rng = np.random.default_rng(77)
    for _ in range(50):
        B = random_matrix(rng, 12, 6, density=0.5)
        rows = sorted(sorted(range(12), key=lambda i: (-int(B[i].sum()), i))[:5])
        if (nonconstant_mask(B) == nonconstant_mask(B[rows])).all():
            break
    else:  # pragma: no cover
        pytest.fail("no suitable random matrix")
    res = af.aces_o(B, top_k=5, steps=20, backend=backend)
    sub = af.aces_o(B[rows], top_k=None, steps=20, backend="numpy")
    np.testing.assert_allclose(npy(res.weights), sub.weights, rtol=0, atol=OPT)
    np.testing.assert_allclose(npy(res.scores), B @ npy(res.weights), rtol=0, atol=1e-9)


def test_aces_o_constant_columns_weight_zero(backend):
    B = CASES["rand2"].copy()
    B[:, 0] = 0
    res = af.aces_o(B, steps=25, top_k=None, lr=0.1, backend=backend)
    w = npy(res.weights)
    assert w[0] == 0 and w[-1] == 0
    assert w.sum() == pytest.approx(1.0, abs=1e-12)


def _torch_objective(torch, Bt, w, gamma):
    """J(w) by plain autograd-friendly tensor ops over an n x n x m pair tensor."""
    s = Bt @ w
    z = gamma * (s[:, None, None] - s[None, :, None] - w[None, None, :])
    pair = Bt[:, None, :] * (1 - Bt[None, :, :])  # p passes j, f fails j
    n_pairs = pair.sum(dim=(0, 1))
    valid = n_pairs > 0
    L = (torch.sigmoid(z) * pair).sum(dim=(0, 1)) / n_pairs.clamp(min=1)
    return (w * (L - 0.5))[valid].sum()


@pytest.mark.parametrize("seed", range(3))
def test_surrogate_gradient_vs_autograd(backend, seed):
    torch = pytest.importorskip("torch", reason="torch is not installed: no autograd check")
    rng = np.random.default_rng(1000 + seed)
    B = random_matrix(rng, 9, 7, density=0.5, dup_rows=2)
    B[:, 3] = 1
    w = rng.dirichlet(np.ones(7))
    wt = torch.tensor(w, dtype=torch.float64, requires_grad=True)
    J = _torch_objective(torch, torch.tensor(B, dtype=torch.float64), wt, 10.0)
    J.backward()
    got = af.surrogate_loo_auc(B, w, 10.0, backend=backend)
    assert float(got.objective) == pytest.approx(J.item(), abs=1e-12)
    np.testing.assert_allclose(npy(got.gradient), wt.grad.numpy(), rtol=1e-9, atol=1e-11)


def test_aces_o_matches_torch_adam(backend):
    """A few steps of ACES-O equal torch.optim.Adam on -J(softmax(logits)) by autograd."""
    torch = pytest.importorskip("torch", reason="torch is not installed: no autograd check")
    B = CASES["rand2"]
    active = torch.tensor(nonconstant_mask(B))
    Bt = torch.tensor(B, dtype=torch.float64)
    logits = torch.zeros(B.shape[1], dtype=torch.float64, requires_grad=True)
    opt = torch.optim.Adam([logits], lr=0.05, betas=(0.9, 0.999), eps=1e-8)

    def weights():
        w = torch.zeros_like(logits)
        return w.masked_scatter(active, torch.softmax(logits[active], dim=0))

    objective = []
    for _ in range(12):
        opt.zero_grad()
        J = _torch_objective(torch, Bt, weights(), 10.0)
        objective.append(J.item())
        (-J).backward()
        opt.step()
    with torch.no_grad():
        objective.append(_torch_objective(torch, Bt, weights(), 10.0).item())
        w_torch = weights().numpy()
    res = af.aces_o(B, lr=0.05, steps=12, top_k=None, backend=backend)
    np.testing.assert_allclose(npy(res.weights), w_torch, rtol=0, atol=OPT)
    np.testing.assert_allclose(npy(res.objective), objective, rtol=0, atol=OPT)


# ---------------------------------------------------------------------------
# consensus methods


@pytest.mark.parametrize(("exponent", "method"), [(0.5, "codet"), (1.0, "codet-linear")])
@pytest.mark.parametrize("name", CASE_IDS)
def test_codet(backend, name, exponent, method):
    B = CASES[name]
    res = af.codet(B, exponent, backend=backend)
    check_result_fields(res, B, backend, method, has_weights=False)
    np.testing.assert_allclose(npy(res.scores), brute.codet(B, exponent), rtol=EXACT, atol=0)
    assert_close(res.scores, af.codet(B, exponent, backend="numpy").scores, EXACT)


@pytest.mark.parametrize("name", CASE_IDS)
def test_b4(backend, name):
    B = CASES[name]
    res = af.b4(B, backend=backend)
    check_result_fields(res, B, backend, "b4", has_weights=False)
    np.testing.assert_allclose(npy(res.scores), brute.b4(B), rtol=EXACT, atol=1e-9)
    np.testing.assert_allclose(
        npy(res.scores), af.b4(B, backend="numpy").scores, rtol=EXACT, atol=1e-9
    )
    res = af.b4(B, alpha=2.0, beta0=5.0, backend=backend)
    np.testing.assert_allclose(npy(res.scores), brute.b4(B, 2.0, 5.0), rtol=EXACT, atol=1e-9)


@pytest.mark.parametrize(
    ("alpha", "beta0"), [(1e3, 1e4), (0.1, 0.1), (1e8, 1e8), (9e6, 1.4e3), (3.0, 1e8)]
)
def test_b4_agrees_within_the_rounding_of_its_log_gamma_terms(fast_backend, alpha, beta0):
    """docs/contract.rst §4: B4's log-Beta terms cancel, leaving the rounding of
    ``lgamma`` at the scale ``L = lnΓ(N M + a + b + 2)``: cpp and numba call the C
    library's ``lgamma`` as the reference does (same bits), torch its own (within
    1e-14 L). A fuzzing run found torch 1.4e-11 off at the default priors and
    1.2e-6 at 1e8, beyond the 1e-12 once promised for every backend."""
    rng = np.random.default_rng(11)
    for n, m in ((1, 2), (6, 4), (66, 216), (250, 300)):
        B = (rng.random((n, m)) < rng.uniform(0.1, 0.9)).astype(np.uint8)
        want = af.b4(B, alpha=alpha, beta0=beta0, backend="numpy").scores
        got = npy(af.b4(B, alpha=alpha, beta0=beta0, backend=fast_backend).scores)
        if fast_backend == "torch":
            atol = b4_tolerance(n, m, alpha, beta0)
            np.testing.assert_allclose(got, want, rtol=0, atol=atol)
        else:
            np.testing.assert_array_equal(got, want)


def test_mbr_exec():
    rng = np.random.default_rng(5)
    O = rng.integers(0, 3, size=(12, 3))
    res = af.mbr_exec(O)
    np.testing.assert_array_equal(res.scores, brute.mbr_exec(O))
    assert res.weights is None and res.method == "mbr-exec"
    assert res.order.tolist() == brute.stable_descending(brute.mbr_exec(O))
    S = np.array([["a", "b"], ["a", "c"], ["a", "b"]])
    np.testing.assert_array_equal(af.mbr_exec(S).scores, [2, 1, 2])


def test_combine():
    rng = np.random.default_rng(6)
    n = 6
    s = rng.integers(0, 5, size=n).astype(float)
    q = rng.random(n)
    P = rng.random((n, n))
    res = af.combine(s, q, P, alpha=0.3, beta=0.6)
    s_hat = (s - s.min()) / (s.max() - s.min())
    x = 0.6 * s_hat + 0.4 * q
    want = [0.3 * x[i] + 0.7 * sum(P[i, j] * x[j] for j in range(n)) for i in range(n)]
    np.testing.assert_allclose(res.scores, want, rtol=1e-12)
    assert res.order.tolist() == brute.stable_descending(want)
    base = af.majority_vote(EXAMPLE, backend="numpy")
    assert af.combine(base, np.ones(8) / 2, np.eye(8)).method == "combine(majority)"


# ---------------------------------------------------------------------------
# rerank dispatch


DIRECT = {
    "majority": lambda B, be: af.majority_vote(B, backend=be),
    "aces-c": lambda B, be: af.aces_c(B, "weighted", backend=be),
    "aces-c-filter": lambda B, be: af.aces_c(B, "filter", backend=be),
    "aces-o": lambda B, be: af.aces_o(B, backend=be),
    "aces-o-warm": lambda B, be: af.aces_o(B, init="aces-c", backend=be),
    "codet": lambda B, be: af.codet(B, 0.5, backend=be),
    "codet-linear": lambda B, be: af.codet(B, 1.0, backend=be),
    "b4": lambda B, be: af.b4(B, backend=be),
}


def test_every_method_name_has_a_direct_equivalent():
    assert set(af.METHODS) == set(DIRECT)


@pytest.mark.parametrize("method", list(DIRECT))
def test_rerank_dispatch(backend, method):
    B = CASES["rand2"]
    res = af.rerank(B, method, backend=backend)
    direct = DIRECT[method](B, backend)
    assert res.backend == backend
    assert res.method == direct.method
    np.testing.assert_array_equal(npy(res.scores), npy(direct.scores))
    np.testing.assert_array_equal(npy(res.order), npy(direct.order))
    check_result_fields(res, B, backend, res.method, has_weights=res.weights is not None)


def test_rerank_method_name_is_the_requested_name(backend):
    B = CASES["rand1"]
    for name in af.METHODS:
        assert (
            af.rerank(B, name, backend=backend, **({"steps": 2} if "aces-o" in name else {})).method
            == name
        )


def test_rerank_passes_parameters(backend):
    B = CASES["rand3"]
    a = af.rerank(B, "aces-o", lr=0.05, top_k=5, steps=10, backend=backend)
    b = af.aces_o(B, lr=0.05, top_k=5, steps=10, backend=backend)
    np.testing.assert_array_equal(npy(a.weights), npy(b.weights))
    assert a.info["top_k"] == 5 and a.info["lr"] == 0.05
    c = af.rerank(B, "codet", exponent=2.0, backend=backend)
    np.testing.assert_allclose(npy(c.scores), brute.codet(B, 2.0), rtol=EXACT)


@pytest.mark.parametrize("choice", [None, "numpy", "auto"])
def test_every_computing_function_accepts_backend(choice):
    s = np.array([2.0, 1.0, 1.0])
    assert af.pass_at_k(s, [0, 1, 0], 1, backend=choice) == 0.0
    assert af.pass_at_k_unbiased(5, 2, 1, backend=choice) == pytest.approx(0.4)
    assert af.diagnostics(EXAMPLE, EXAMPLE_LABELS, backend=choice).n_plus == 3
    assert af.mbr_exec(np.eye(3, dtype=int), backend=choice).backend == "numpy"
    assert af.combine(s, np.zeros(3), np.eye(3), backend=choice).backend == "numpy"


def test_numpy_computed_functions_reject_unknown_backend():
    s = np.array([2.0, 1.0, 1.0])
    for call in (
        lambda: af.pass_at_k(s, [0, 1, 0], 1, backend="fortran"),
        lambda: af.pass_at_k_unbiased(5, 2, 1, backend="fortran"),
        lambda: af.diagnostics(EXAMPLE, EXAMPLE_LABELS, backend="fortran"),
        lambda: af.mbr_exec(np.eye(3, dtype=int), backend="fortran"),
        lambda: af.combine(s, np.zeros(3), np.eye(3), backend="fortran"),
    ):
        with pytest.raises(ValueError, match="unknown backend 'fortran'"):
            call()


def test_result_top_and_best(backend):
    res = af.aces_c(EXAMPLE, backend=backend)
    order = npy(res.order)
    assert res.best == int(order[0])
    assert npy(res.top(3)).tolist() == order[:3].tolist()
    assert "aces-c" in repr(res) and backend in repr(res)
