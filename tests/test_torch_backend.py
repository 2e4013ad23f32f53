"""The ``torch`` backend: agreement with the NumPy reference, type mirroring, devices.

Only CPU is available in CI, so the code paths meant for CUDA tensors (validation
on the tensor's device, device transfers, float32 mode, column chunking) are
exercised here on CPU tensors through the same functions.
"""

from __future__ import annotations

import os
import subprocess
import sys
import warnings
from fractions import Fraction

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import aces_fast as af
import brute
from aces_fast import _semantics
from aces_fast._registry import method_params
from aces_fast._validation import as_pass_matrix, as_weights
from aces_fast.backends import BackendUnavailableError, get_backend
from aces_fast.backends import numpy as numpy_ref
from aces_fast.backends import torch as torch_backend
from aces_fast.backends.base import ArrayBackend
from aces_fast.backends.torch import (
    FLOAT32_RTOL,
    FLOAT32_WEIGHT_ATOL,
    TorchBackend,
    aces_o,
    chunks,
    surrogate,
    to_device,
    to_output,
    validate,
)
from helpers import EXAMPLE, EXAMPLE_LABELS, random_matrix

NP = numpy_ref.NumpyBackend()
TB = TorchBackend()


# tiny inputs: intra-op threads only add barrier waits (conftest.one_torch_thread)
pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _cases():
    """(name, B) pairs covering the shapes the kernels must get right."""
    rng = np.random.default_rng(7)
    B_const = random_matrix(rng, 12, 9, 0.5)
    B_const[:, 2] = 1
    B_const[:, 5] = 0
    return [
        ("spec", EXAMPLE.copy()),
        ("random", random_matrix(rng, 17, 13, 0.4)),
        ("dense", random_matrix(rng, 15, 11, 0.8)),
        ("dup_rows", random_matrix(rng, 16, 10, 0.5, dup_rows=9)),
        ("constant_cols", B_const),
        ("n1", np.array([[1, 0, 1, 1]], dtype=np.uint8)),
        ("m0", np.zeros((5, 0), dtype=np.uint8)),
        ("all_constant", np.ones((4, 3), dtype=np.uint8)),
    ]


CASES = _cases()
CASE_IDS = [name for name, _ in CASES]


def _weights(rng, m):
    w = rng.random(m)
    w[rng.random(m) < 0.3] = 0.0
    return w


def _assert_same(a, b, atol=0.0, rtol=0.0):
    np.testing.assert_allclose(
        np.asarray(a, dtype=np.float64),
        np.asarray(b, dtype=np.float64),
        rtol=rtol,
        atol=atol,
        equal_nan=True,
    )


# ---------------------------------------------------------------------------
# loading and importing


def test_load_and_info():
    be = get_backend("torch")
    assert be.name == "torch" and isinstance(be, TorchBackend)
    assert be.dtype == torch.float64
    info = be.info()
    assert info["torch"] == torch.__version__ and info["dtype"] == "float64"


def _child_env():
    """Environment for a child interpreter that imports this very aces_fast."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(af.__file__)))
    return {**os.environ, "PYTHONPATH": root + os.pathsep + os.environ.get("PYTHONPATH", "")}


def test_import_aces_fast_does_not_import_torch():
    code = (
        "import sys, numpy as np, aces_fast as af; "
        "af.loo_auc(np.eye(3, dtype=np.uint8), backend='numpy'); "
        "assert 'torch' not in sys.modules, 'torch imported'"
    )
    env = _child_env()
    env.pop("ACES_FAST_BACKEND", None)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stderr


def test_missing_torch_reason():
    # sys.modules[name] = None makes "import torch" raise ImportError in the child
    code = (
        "import sys; sys.modules['torch'] = None\n"
        "from aces_fast.backends import get_backend, BackendUnavailableError\n"
        "try:\n    get_backend('torch')\nexcept BackendUnavailableError as e:\n"
        "    print(e.reason)\nelse:\n    print('loaded')\n"
    )
    env = _child_env()
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "torch is not installed (pip install 'aces_fast[torch]')"


def test_dtype_option_from_environment(monkeypatch):
    monkeypatch.setenv(torch_backend.DTYPE_ENV_VAR, "float32")
    assert torch_backend.load().dtype == torch.float32
    monkeypatch.setenv(torch_backend.DTYPE_ENV_VAR, "float16")
    with pytest.raises(BackendUnavailableError, match="ACES_FAST_TORCH_DTYPE"):
        torch_backend.load()
    with pytest.raises(ValueError, match="float64"):
        TorchBackend(dtype="half")
    with pytest.raises(ValueError, match="chunk_elements"):
        TorchBackend(chunk_elements=0)


# ---------------------------------------------------------------------------
# kernels against the NumPy reference (NumPy in -> NumPy out)


@pytest.mark.parametrize(("name", "B"), CASES, ids=CASE_IDS)
def test_loo_auc_matches_reference_exactly(name, B):
    rng = np.random.default_rng(1)
    n, m = B.shape
    w = _weights(rng, m)
    counts = rng.integers(0, 3, n)
    for weights, cnt in [(None, None), (w, None), (None, counts), (w, counts)]:
        got = TB.loo_auc(B, weights, 1e-9, cnt)
        assert isinstance(got, np.ndarray) and got.dtype == np.float64 and got.shape == (m,)
        # the same exact integer counts and the same final division: bit-identical
        np.testing.assert_array_equal(got, NP.loo_auc(B, weights, 1e-9, cnt))


def test_loo_auc_spec_example_exact_values():
    expected = [
        Fraction(2, 3),
        Fraction(2, 3),
        Fraction(1, 2),
        Fraction(2, 3),
        Fraction(1, 2),
        Fraction(2, 5),
        Fraction(7, 12),
        Fraction(7, 24),
        0,
        0,
    ]
    got = af.loo_auc(EXAMPLE, backend="torch")
    assert isinstance(got, np.ndarray)
    np.testing.assert_array_equal(got, [float(x) for x in expected])
    # float weights 1/m: the paper's rounding artefacts must not appear
    m = EXAMPLE.shape[1]
    np.testing.assert_array_equal(
        af.loo_auc(EXAMPLE, np.full(m, 1 / m), backend="torch"), [float(x) for x in expected]
    )
    res = af.aces_c(EXAMPLE, backend="torch")
    np.testing.assert_allclose(
        res.weights, np.array([5, 5, 0, 5, 0, 0, 2, 0, 0, 0]) / 17, rtol=0, atol=1e-15
    )


def test_weighted_ties_follow_tolerance_rule():
    # Test 3: passer 0 has LOO score (0.1 + 0.2 + 0.4) - 0.4 and failer 1 scores 0.3 --
    # equal in exact arithmetic, 0.30000000000000004 vs 0.3 in float64.
    B = np.array([[1, 1, 0, 1], [0, 0, 1, 0], [1, 0, 0, 0], [0, 1, 1, 0]], dtype=np.uint8)
    w = np.array([0.1, 0.2, 0.3, 0.4])
    decimal = [Fraction(x) for x in ("0.1", "0.2", "0.3", "0.4")]
    exact = brute.to_float_array(brute.loo_auc(B, decimal))
    got = TB.loo_auc(B, w, 1e-9)
    np.testing.assert_array_equal(got, exact)
    np.testing.assert_array_equal(got, NP.loo_auc(B, w, 1e-9))
    np.testing.assert_array_equal(TB.loo_auc(B, w / 10, 1e-9), got)  # scale-free
    # with the tolerance off, rounding noise decides the tie -- as in the reference
    no_tol = TB.loo_auc(B, w, 0.0)
    np.testing.assert_array_equal(no_tol, NP.loo_auc(B, w, 0.0))
    assert got[3] == 0.5 and no_tol[3] > 0.5


@pytest.mark.parametrize(("name", "B"), CASES, ids=CASE_IDS)
def test_surrogate_matches_reference(name, B):
    rng = np.random.default_rng(2)
    n, m = B.shape
    w = _weights(rng, m)
    w = w / w.sum() if w.sum() > 0 else w
    counts = rng.integers(0, 3, n)
    for cnt in (None, counts):
        L, J, g = TB.surrogate(B, w, 7.0, cnt)
        Lr, Jr, gr = NP.surrogate(B, w, 7.0, cnt)
        assert isinstance(L, np.ndarray) and isinstance(J, float) and isinstance(g, np.ndarray)
        _assert_same(L, Lr, atol=1e-12)
        assert abs(J - Jr) <= 1e-12
        _assert_same(g, gr, atol=1e-12)


@pytest.mark.parametrize(
    ("gamma", "scale"),
    [(100.0, 1.0), (1000.0, 1.0), (2.0, 50.0)],
    ids=["exp_overflow", "sigmoid_path", "large_weights"],
)
def test_surrogate_extreme_arguments(gamma, scale):
    # exp(-gamma (s_p - s_f)) overflows to inf / underflows to 0 in the first case;
    # gamma * max(w) is too large for the exp(gamma w_j) shortcut in the others.
    rng = np.random.default_rng(9)
    B = random_matrix(rng, 13, 20, 0.5, dup_rows=3)
    w = rng.random(20) * scale
    L, J, g = TB.surrogate(B, w, gamma)
    Lr, Jr, gr = NP.surrogate(B, w, gamma)
    assert np.isfinite(g).all()
    _assert_same(L, Lr, atol=1e-12)
    assert pytest.approx(Jr, rel=1e-12, abs=1e-12) == J
    np.testing.assert_allclose(g, gr, rtol=1e-12, atol=1e-9)


def _plain_objective(B, w, gamma):
    """J(w) from the definition, in differentiable torch ops, one column at a time."""
    Bt = torch.as_tensor(B, dtype=torch.float64)
    s = Bt @ w
    J = torch.zeros((), dtype=torch.float64)
    for j in range(Bt.shape[1]):
        P = Bt[:, j] == 1
        F = ~P
        if not P.any() or not F.any():
            continue
        S = s - w[j] * Bt[:, j]
        L = torch.sigmoid(gamma * (S[P][:, None] - S[F][None, :])).mean()
        J = J + w[j] * (L - 0.5)
    return J


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_surrogate_gradient_matches_autograd(seed):
    rng = np.random.default_rng(seed)
    B = random_matrix(rng, 14, 9, 0.5, dup_rows=3)
    B[:, 4] = 1  # a constant column: L nan, but its weight still shifts every score
    w = torch.tensor(rng.random(9) / 3, dtype=torch.float64, requires_grad=True)
    J = _plain_objective(B, w, 6.0)
    (auto,) = torch.autograd.grad(J, w)
    L, Jk, g = TB.surrogate(torch.from_numpy(B), w, 6.0)
    assert isinstance(g, torch.Tensor)
    assert abs(float(Jk) - J.item()) <= 1e-12
    np.testing.assert_allclose(g.numpy(), auto.numpy(), rtol=0, atol=1e-10)
    assert torch.isnan(L[4])


def test_counts_act_as_repeated_rows():
    rng = np.random.default_rng(3)
    B = random_matrix(rng, 9, 8, 0.5)
    counts = np.array([1, 0, 3, 1, 2, 0, 1, 4, 1])
    expanded = np.repeat(B, counts, axis=0)
    w = rng.random(8)
    np.testing.assert_array_equal(
        TB.loo_auc(B, None, 1e-9, counts), TB.loo_auc(expanded, None, 1e-9)
    )
    np.testing.assert_array_equal(TB.loo_auc(B, w, 1e-9, counts), TB.loo_auc(expanded, w, 1e-9))
    L, J, g = TB.surrogate(B, w, 5.0, counts)
    Le, Je, ge = TB.surrogate(expanded, w, 5.0)
    _assert_same(L, Le, atol=1e-12)
    assert abs(J - Je) <= 1e-12
    _assert_same(g, ge, atol=1e-11)


@pytest.mark.parametrize(("name", "B"), CASES, ids=CASE_IDS)
def test_aces_o_fit_matches_reference_adam(name, B):
    rng = np.random.default_rng(4)
    n, m = B.shape
    active = brute.nonconstant_mask(B).astype(np.uint8)
    logits0 = rng.normal(size=m)
    for cnt in (None, rng.integers(1, 3, n)):
        w, obj = TB.aces_o_fit(B, logits0, active, 10.0, 0.05, 25, cnt)
        wr, objr = NP.aces_o_fit(B, logits0, active, 10.0, 0.05, 25, cnt)
        assert obj.shape == (26,)
        np.testing.assert_allclose(w, wr, rtol=0, atol=1e-6)
        np.testing.assert_allclose(obj, objr, rtol=0, atol=1e-9)
        assert np.all(w[active == 0] == 0.0)


# ---------------------------------------------------------------------------
# methods through the public API against the NumPy backend


METHOD_CALLS = [
    ("majority", lambda B, be: af.majority_vote(B, backend=be)),
    ("aces-c", lambda B, be: af.aces_c(B, backend=be)),
    ("aces-c-filter", lambda B, be: af.aces_c(B, "filter", backend=be)),
    ("aces-o", lambda B, be: af.aces_o(B, lr=0.05, steps=30, top_k=6, backend=be)),
    ("aces-o-all-rows", lambda B, be: af.aces_o(B, steps=20, top_k=None, backend=be)),
    ("aces-o-warm", lambda B, be: af.aces_o(B, steps=20, init="aces-c", backend=be)),
    ("codet", lambda B, be: af.codet(B, backend=be)),
    ("codet-linear", lambda B, be: af.codet(B, 1.0, backend=be)),
    ("codet-0.3", lambda B, be: af.codet(B, 0.3, backend=be)),
    ("b4", lambda B, be: af.b4(B, backend=be)),
]


@pytest.mark.parametrize(("name", "B"), CASES, ids=CASE_IDS)
@pytest.mark.parametrize(("method", "call"), METHOD_CALLS, ids=[m for m, _ in METHOD_CALLS])
def test_methods_match_numpy_backend(name, B, method, call):
    got = call(B, "torch")
    ref = call(B, "numpy")
    assert got.backend == "torch" and got.method == ref.method
    for field in ("scores", "weights", "order", "loo_auc", "objective"):
        a, r = getattr(got, field), getattr(ref, field)
        assert (a is None) == (r is None), field
        if a is not None:
            assert isinstance(a, np.ndarray) and a.dtype == r.dtype and a.shape == r.shape, field
    atol = 1e-6 if method.startswith("aces-o") else 1e-12
    if got.weights is not None:
        np.testing.assert_allclose(got.weights, ref.weights, rtol=0, atol=atol)
    np.testing.assert_allclose(got.scores, ref.scores, rtol=1e-12, atol=atol)
    np.testing.assert_array_equal(got.order, ref.order)
    if ref.loo_auc is not None:
        np.testing.assert_array_equal(got.loo_auc, ref.loo_auc)
    if ref.objective is not None:
        np.testing.assert_allclose(got.objective, ref.objective, rtol=0, atol=1e-9)
    assert got.fallback == ref.fallback
    if "rows" in ref.info:
        np.testing.assert_array_equal(got.info["rows"], ref.info["rows"])


def test_spec_example_rankings():
    B = torch.from_numpy(EXAMPLE)
    for method, expected_auc in (("majority", Fraction(9, 10)), ("aces-c", Fraction(14, 15))):
        res = af.rerank(B, method, backend="torch")
        s = res.scores.numpy()
        pos, neg = s[EXAMPLE_LABELS == 1], s[EXAMPLE_LABELS == 0]
        auc = (pos[:, None] > neg[None, :]).sum() + 0.5 * (pos[:, None] == neg[None, :]).sum()
        assert auc / (pos.size * neg.size) == float(expected_auc)


@pytest.mark.parametrize("exponent", [0.5, 1.5, 1.0, 2.0])
def test_codet_powers_are_numpys_bits(exponent):
    # consensus sets of every size 1..60: torch's own pow (and sqrt) round some
    # sizes' powers differently from NumPy on some hosts; the scores must not
    sizes = np.arange(1, 61)
    width = 7  # 2**7 > 60 distinct rows
    codes = np.repeat(np.arange(sizes.size), sizes)
    B = ((codes[:, None] >> np.arange(width)) & 1).astype(np.uint8)
    B = np.hstack([B, np.ones((B.shape[0], 1), np.uint8) - B[:, :1]])
    got = af.codet(torch.from_numpy(B), exponent, backend="torch").scores.numpy()
    want = af.codet(B, exponent, backend="numpy").scores
    assert got.tobytes() == want.tobytes()
    # and NumPy's are its own power of each set's size
    passed = B.sum(1).astype(np.float64)
    np.testing.assert_array_equal(want, passed * np.repeat(sizes, sizes) ** exponent)


def test_scores_are_tie_exact():
    # rows 0 and 1 reach 0.3 along different float sums; rows 2 and 3 are identical
    B = np.array(
        [[1, 1, 0, 0], [0, 0, 1, 0], [0, 1, 1, 1], [0, 1, 1, 1], [1, 0, 0, 1]], dtype=np.uint8
    )
    w = np.array([0.1, 0.2, 0.3, 0.4])
    raw = TB.row_scores(B, w)
    assert raw[0] != raw[1]  # rounding noise the snapping must remove
    _, scores, order = _semantics.weighted_ranking(
        TB, torch.from_numpy(B), torch.from_numpy(w), 1e-9
    )
    assert scores[0] == scores[1] and scores[2] == scores[3]
    # stable descending: the lower index first among ties
    assert order.tolist() == [2, 3, 4, 0, 1]


def test_snap_ties_matches_base_rule():
    # the one tie rule on tensors and on NumPy arrays, against its definition
    rng = np.random.default_rng(5)
    s = np.round(rng.random(200) * 20) / 7 + rng.normal(scale=1e-13, size=200)
    got = _semantics.snap_ties(TB, torch.from_numpy(s), 1e-9).numpy()
    np.testing.assert_array_equal(got, _semantics.snap_ties(ArrayBackend, s, 1e-9))
    idx = np.argsort(s, kind="stable")  # runs of sorted neighbours <= tol apart
    run_min = s[idx].copy()
    for r in range(1, s.size):
        if s[idx[r]] - s[idx[r - 1]] <= 1e-9:
            run_min[r] = run_min[r - 1]
    want = np.empty_like(s)
    want[idx] = run_min
    np.testing.assert_array_equal(got, want)


# ---------------------------------------------------------------------------
# types: tensor in -> tensor out on the same device; NumPy/list in -> NumPy out


def test_tensor_in_tensor_out():
    B = torch.from_numpy(EXAMPLE).to(torch.float32)  # any real dtype of 0/1
    res = af.aces_o(B, steps=5, backend="torch")
    for field in ("scores", "weights", "objective"):
        t = getattr(res, field)
        assert isinstance(t, torch.Tensor) and t.device == B.device and t.dtype == torch.float64
    assert res.order.dtype == torch.int64 and isinstance(res.info["rows"], torch.Tensor)
    assert res.best == int(res.order[0])
    res = af.aces_c(B.bool(), backend="torch")
    assert isinstance(res.loo_auc, torch.Tensor) and res.loo_auc.dtype == torch.float64
    for call in (
        lambda x: af.codet(x, backend="torch"),
        lambda x: af.b4(x, backend="torch"),
        lambda x: af.majority_vote(x, backend="torch"),
    ):
        r = call(B)
        assert isinstance(r.scores, torch.Tensor) and isinstance(r.order, torch.Tensor)
    L = af.loo_auc(B, torch.ones(10), backend="torch")
    assert isinstance(L, torch.Tensor) and L.dtype == torch.float64
    sr = af.surrogate_loo_auc(B, np.full(10, 0.1), backend="torch")
    assert all(isinstance(x, torch.Tensor) for x in sr)
    assert sr.objective.ndim == 0
    ref = af.surrogate_loo_auc(EXAMPLE, np.full(10, 0.1), backend="numpy")
    assert abs(float(sr.objective) - ref.objective) <= 1e-12


def test_numpy_and_list_in_numpy_out():
    for B in (EXAMPLE, EXAMPLE.tolist(), EXAMPLE.astype(bool)):
        res = af.aces_c(B, backend="torch")
        assert all(
            isinstance(getattr(res, f), np.ndarray)
            for f in ("scores", "weights", "order", "loo_auc")
        )
        sr = af.surrogate_loo_auc(B, [0.1] * 10, backend="torch")
        assert isinstance(sr.values, np.ndarray) and isinstance(sr.objective, float)


def test_zero_copy_inputs():
    Bt = torch.from_numpy(EXAMPLE.copy())
    prepared = TB.prepare(Bt)
    assert isinstance(prepared, torch.Tensor) and prepared.data_ptr() == Bt.data_ptr()
    Bn = EXAMPLE.copy()
    Bn.setflags(write=False)  # read-only input: still no copy, no warning
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        prepared = TB.prepare(Bn)
        t, numpy_out = TB._matrix(prepared)
    assert numpy_out and np.shares_memory(t.numpy(), Bn)


def test_requires_grad_input_is_detached():
    B = torch.from_numpy(EXAMPLE).double().requires_grad_(True)
    w = torch.full((10,), 0.1, dtype=torch.float64, requires_grad=True)
    L = af.loo_auc(B, w, backend="torch")
    assert not L.requires_grad
    np.testing.assert_array_equal(L.numpy(), NP.loo_auc(EXAMPLE, np.full(10, 0.1), 1e-9))


def test_device_helpers_on_cpu():
    dev = torch.device("cpu")
    # lists, tensors, big-endian and strided arrays all arrive as native tensors
    for x in (
        np.arange(3),
        [0, 1, 2],
        torch.arange(3),
        np.arange(3, dtype=">f8"),
        np.array([0, 9, 1, 9, 2, 9])[::2],
    ):
        t = to_device(x, dev, torch.float64)
        assert t.device == dev and t.dtype == torch.float64 and t.tolist() == [0.0, 1.0, 2.0]
    assert to_device(np.arange(3)[::-1], dev, torch.int64).tolist() == [2, 1, 0]
    src = torch.arange(3, dtype=torch.float64)
    assert to_device(src, dev, torch.float64).data_ptr() == src.data_ptr()
    assert isinstance(to_output(src, True), np.ndarray)
    assert to_output(src, False) is src and to_output(None, True) is None
    # weights given as tensor with a NumPy matrix: computed where the matrix lives
    w = torch.full((10,), 0.1)
    np.testing.assert_array_equal(
        TB.loo_auc(EXAMPLE, w, 1e-9),
        NP.loo_auc(EXAMPLE, np.full(10, 0.1, np.float32).astype(np.float64), 1e-9),
    )


# ---------------------------------------------------------------------------
# chunking and float32 mode (the memory cap and the GPU speed option)


@pytest.mark.parametrize("chunk", [1, 50, 700])
def test_column_chunking_gives_same_results(chunk):
    rng = np.random.default_rng(6)
    B = random_matrix(rng, 11, 23, 0.5, dup_rows=3)
    w = rng.random(23)
    small = TorchBackend(chunk_elements=chunk)
    np.testing.assert_array_equal(small.loo_auc(B, None, 1e-9), TB.loo_auc(B, None, 1e-9))
    np.testing.assert_array_equal(small.loo_auc(B, w, 1e-9), TB.loo_auc(B, w, 1e-9))
    L, J, g = small.surrogate(B, w, 10.0)
    Lr, Jr, gr = TB.surrogate(B, w, 10.0)
    _assert_same(L, Lr, atol=1e-13)
    assert abs(J - Jr) <= 1e-13
    _assert_same(g, gr, atol=1e-12)
    assert list(chunks.column_chunks(5, 4, chunk)) == [
        (a, min(5, a + max(1, chunk // 4))) for a in range(0, 5, max(1, chunk // 4))
    ]


def test_large_pool_pair_chunks_match_one_chunk(monkeypatch):
    """ACES-O on every row (``top_k=None``): pair tensors split into column chunks of
    one or a few tests (a tiny budget) give what one chunk gives, per task and in a
    batch, and the chunks really are that small."""
    widths = []
    chunk = surrogate._Chunk
    monkeypatch.setattr(
        surrogate, "_Chunk", lambda s, a, b, ws: widths.append(b - a) or chunk(s, a, b, ws)
    )
    rng = np.random.default_rng(12)
    B = random_matrix(rng, 90, 17, 0.5, dup_rows=20)
    B = np.hstack([B, B[:, :3]])  # symmetry classes through the loop
    params = method_params("aces-o", {"top_k": None, "steps": 30})
    want = TB.rerank(B, "aces-o", params)
    U = len(np.unique(B, axis=0))
    for tests in (1, 3):
        small = TorchBackend(chunk_elements=tests * U * U)
        widths.clear()
        for got in (
            small.rerank(B, "aces-o", params),
            small.rerank_batch([B], "aces-o", params, None)[0],
        ):
            _assert_same(got.weights, want.weights, atol=1e-14)
            _assert_same(got.objective, want.objective, atol=1e-14)
            np.testing.assert_array_equal(got.order, want.order)
        assert max(widths) == tests and len(widths) >= 2 * (B.shape[1] // tests)
    assert aces_o.pair_budget(torch.device("cpu"), torch.float64, 3 * U * U) == 3 * U * U


def test_pair_budget_from_free_device_memory(monkeypatch):
    """Without a cap the pair tensors get a fixed budget on the CPU and
    ``CUDA_PAIR_MEMORY_FRACTION`` of the free memory on CUDA (two tensors)."""
    cpu = torch.device("cpu")
    assert aces_o.pair_budget(cpu, torch.float64, None) == chunks.DEFAULT_CHUNK_ELEMENTS
    assert aces_o.pair_budget(cpu, torch.float64, 5) == 5
    assert aces_o.pair_budget(cpu, torch.float64, 0) == 1
    free = 10 * 2**30
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (free, 80 * 2**30))
    cuda = torch.device("cuda")
    share = free * aces_o.CUDA_PAIR_MEMORY_FRACTION
    assert aces_o.pair_budget(cuda, torch.float64, None) == int(share) // 16
    assert aces_o.pair_budget(cuda, torch.float32, None) == int(share) // 8
    assert aces_o.pair_budget(cuda, torch.float64, 1000) == 1000  # a cap wins
    assert TorchBackend().pair_elements is None
    assert TorchBackend(chunk_elements=77).pair_elements == 77


@pytest.mark.parametrize(
    ("free", "want"),
    [
        (8 * 2**30, 8 * 2**30 // 4 // 32),  # a share of the free memory
        (2**20, chunks.DEFAULT_CHUNK_ELEMENTS),  # never under the CPU's default
        (2**50, chunks.MAX_DEVICE_CHUNK_ELEMENTS),  # nor over 2**30 entries
    ],
)
def test_chunk_budget_from_free_device_memory(monkeypatch, free, want):
    """Without a cap, chunks on CUDA are sized by the free device memory (few,
    large chunks: every chunk costs a run of kernel launches); on the CPU they
    keep the fixed default; a caller's cap wins everywhere."""
    assert chunks.CUDA_CHUNK_MEMORY_FRACTION == 0.25 and chunks.CHUNK_BYTES_PER_ELEMENT == 32
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (free, 2**51))
    cpu, cuda = torch.device("cpu"), torch.device("cuda")
    assert chunks.chunk_budget(cuda, None) == want
    assert TorchBackend().chunk_cap(cuda) == want
    assert chunks.chunk_budget(cpu, None) == chunks.DEFAULT_CHUNK_ELEMENTS
    assert TorchBackend().chunk_cap(cpu) == chunks.DEFAULT_CHUNK_ELEMENTS
    assert TorchBackend().chunk_elements == chunks.DEFAULT_CHUNK_ELEMENTS
    for device in (cpu, cuda):
        assert TorchBackend(chunk_elements=1000).chunk_cap(device) == 1000
        assert chunks.chunk_budget(device, 0) == 1


def test_float32_mode_within_documented_tolerance():
    rng = np.random.default_rng(8)
    B = random_matrix(rng, 24, 60, 0.5, dup_rows=4)
    w = rng.random(60)
    w /= w.sum()
    f32 = TorchBackend(dtype="float32")
    for gamma in (1.0, 10.0, 50.0):
        L, J, g = f32.surrogate(B, w, gamma)
        Lr, Jr, gr = TB.surrogate(B, w, gamma)  # float64, equal to the reference to 1e-12
        assert L.dtype == np.float64
        assert not np.array_equal(L, Lr)  # float32 really was used
        _assert_same(L, Lr, rtol=FLOAT32_RTOL)
        assert abs(J - Jr) <= FLOAT32_RTOL * w.sum()
        np.testing.assert_allclose(g, gr, rtol=0, atol=FLOAT32_RTOL * np.abs(gr).max())
    for lr in (0.01, 0.05):
        values = method_params("aces-o", {"lr": lr})
        got = f32.rerank(B, "aces-o", values)
        ref = TB.rerank(B, "aces-o", values)
        np.testing.assert_allclose(got.weights, ref.weights, rtol=0, atol=FLOAT32_WEIGHT_ATOL)
        assert not np.array_equal(got.weights, ref.weights)
    # LOO-AUC stays exact in float32 mode
    np.testing.assert_array_equal(f32.loo_auc(B, w, 1e-9), NP.loo_auc(B, w, 1e-9))


# ---------------------------------------------------------------------------
# bad input


BAD_MATRICES = [
    ("nan", lambda: torch.tensor([[0.0, float("nan")], [1.0, 0.0]]), ValueError, "NaN"),
    ("two_float", lambda: torch.tensor([[0.0, 2.0], [1.0, 0.0]]), ValueError, "only 0 and 1"),
    (
        "two_uint8",
        lambda: torch.tensor([[0, 2], [1, 0]], dtype=torch.uint8),
        ValueError,
        "found value 2",
    ),
    ("minus_one_int", lambda: torch.tensor([[0, -1], [1, 0]]), ValueError, "only 0 and 1"),
    ("three_d", lambda: torch.zeros((2, 2, 2)), ValueError, "2-D"),
    ("one_d", lambda: torch.zeros(4), ValueError, "2-D"),
    ("no_candidates", lambda: torch.zeros((0, 3)), ValueError, "empty candidate axis"),
    ("complex", lambda: torch.zeros((2, 2), dtype=torch.complex64), TypeError, "real"),
]


@pytest.mark.parametrize(
    ("name", "make", "exc", "match"), BAD_MATRICES, ids=[b[0] for b in BAD_MATRICES]
)
def test_bad_matrix_errors(name, make, exc, match):
    with pytest.raises(exc, match=match):
        af.aces_c(make(), backend="torch")
    # the on-device validator (used for CUDA tensors) says exactly what the NumPy one says
    with pytest.raises(exc) as on_device:
        validate.check_pass_tensor(make())
    with pytest.raises(exc) as on_host:
        as_pass_matrix(make())
    assert str(on_device.value) == str(on_host.value)


def test_on_device_validator_accepts_and_converts():
    for dtype in (
        torch.bool,
        torch.uint8,
        torch.int64,
        torch.float32,
        torch.float64,
        torch.bfloat16,
    ):
        B = torch.from_numpy(EXAMPLE).to(dtype)
        out = validate.check_pass_tensor(B)
        assert out.dtype == torch.uint8 and out.is_contiguous()
        np.testing.assert_array_equal(out.numpy(), EXAMPLE)
    # bfloat16 has no NumPy twin: the backend validates it in torch
    res = af.loo_auc(torch.from_numpy(EXAMPLE).to(torch.bfloat16), backend="torch")
    np.testing.assert_array_equal(res.numpy(), NP.loo_auc(EXAMPLE, None, 1e-9))
    with pytest.raises(ValueError, match=r"found value .*2\.0"):
        validate.check_pass_tensor(torch.tensor([[0.0, 2.0]], dtype=torch.bfloat16))


BAD_WEIGHTS = [
    ("short", lambda: torch.ones(9), ValueError, "length 9"),
    ("two_d", lambda: torch.ones((10, 1)), ValueError, "1-D"),
    ("nan", lambda: torch.full((10,), float("nan")), ValueError, "finite"),
    ("negative", lambda: -torch.ones(10), ValueError, "non-negative"),
    ("complex", lambda: torch.ones(10, dtype=torch.complex64), TypeError, "real"),
]


@pytest.mark.parametrize(
    ("name", "make", "exc", "match"), BAD_WEIGHTS, ids=[b[0] for b in BAD_WEIGHTS]
)
def test_bad_weights_errors(name, make, exc, match):
    with pytest.raises(exc, match=match):
        af.loo_auc(torch.from_numpy(EXAMPLE), make(), backend="torch")
    with pytest.raises(exc, match=match):
        af.surrogate_loo_auc(EXAMPLE, make(), backend="torch")
    with pytest.raises(exc) as on_device:
        validate.check_weights_tensor(make(), 10)
    with pytest.raises(exc) as on_host:
        as_weights(make(), 10)
    assert str(on_device.value) == str(on_host.value)
    with pytest.raises(exc, match=match):
        af.loo_auc(EXAMPLE, make().numpy(), backend="torch")
