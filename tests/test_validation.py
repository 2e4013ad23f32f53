"""Input validation and backend selection: accepted inputs, zero-copy, clear errors."""

from __future__ import annotations

import sys
import types

import numpy as np
import pytest

import aces_fast as af
from aces_fast import backends as registry
from aces_fast._validation import as_pass_matrix
from helpers import EXAMPLE, npy

# ---------------------------------------------------------------------------
# accepted inputs


@pytest.mark.parametrize(
    "convert",
    [
        lambda B: B.astype(bool),
        lambda B: B.astype(np.int64),
        lambda B: B.astype(np.int8),
        lambda B: B.astype(np.float32),
        lambda B: B.astype(np.float64),
        lambda B: B.tolist(),
        lambda B: [[bool(v) for v in row] for row in B.tolist()],
        lambda B: np.asfortranarray(B),
        lambda B: np.repeat(B, 2, axis=1)[:, ::2],  # non-contiguous view
    ],
    ids=["bool", "int64", "int8", "float32", "float64", "list", "bool_list", "fortran", "strided"],
)
def test_accepted_inputs_give_same_result(backend, convert):
    want = npy(af.loo_auc(EXAMPLE, backend="numpy"))
    got = npy(af.loo_auc(convert(EXAMPLE), backend=backend))
    np.testing.assert_array_equal(got, want)
    res = af.aces_c(convert(EXAMPLE), backend=backend)
    np.testing.assert_array_equal(npy(res.order), af.aces_c(EXAMPLE, backend="numpy").order)


def test_no_copy_for_uint8_and_bool():
    B = EXAMPLE.copy()
    out = as_pass_matrix(B)
    assert out.dtype == np.uint8 and out.flags.c_contiguous
    assert np.shares_memory(out, B)
    Bb = B.astype(bool)
    out = as_pass_matrix(Bb)
    assert out.dtype == np.uint8 and np.shares_memory(out, Bb)
    np.testing.assert_array_equal(out, B)


def test_copy_when_needed():
    B = EXAMPLE.astype(np.int64)
    out = as_pass_matrix(B)
    assert out.dtype == np.uint8 and out.flags.c_contiguous
    assert not np.shares_memory(out, B)
    F = np.asfortranarray(EXAMPLE)
    out = as_pass_matrix(F)
    assert out.flags.c_contiguous
    np.testing.assert_array_equal(out, EXAMPLE)


def test_zero_tests_allowed(backend):
    B = np.zeros((3, 0), dtype=np.uint8)
    assert npy(af.loo_auc(B, backend=backend)).shape == (0,)
    res = af.aces_c(B, backend=backend)
    assert npy(res.scores).shape == (3,) and npy(res.weights).shape == (0,)


# ---------------------------------------------------------------------------
# rejected pass matrices


@pytest.mark.parametrize(
    ("bad", "exc", "match"),
    [
        (np.array([1, 0, 1]), ValueError, "must be 2-D"),
        (np.zeros((2, 2, 2)), ValueError, "must be 2-D"),
        (np.array(1), ValueError, "must be 2-D"),
        (np.array([[0, 2], [1, 0]]), ValueError, "only 0 and 1; found value 2"),
        (np.array([[0, 2], [1, 0]], dtype=np.uint8), ValueError, "only 0 and 1; found value 2"),
        (np.array([[0, -1], [1, 0]]), ValueError, "only 0 and 1; found value -1"),
        (np.array([[0.5, 1.0], [1.0, 0.0]]), ValueError, r"only 0 and 1; found value 0\.5"),
        (np.array([[np.nan, 1.0], [1.0, 0.0]]), ValueError, "NaN"),
        (np.array([[np.inf, 1.0], [1.0, 0.0]]), ValueError, "only 0 and 1; found value inf"),
        (np.zeros((0, 3)), ValueError, "empty candidate axis"),
        ([], ValueError, "must be 2-D"),
        ([[1, 0], [1]], ValueError, "rectangular"),
        (np.array([["1", "0"], ["0", "1"]]), TypeError, "dtype <U1"),
        (np.array([[1, 0], [0, 1]], dtype=object), TypeError, "dtype object"),
        (np.array([[1, 0], [0, 1]], dtype=complex), TypeError, "dtype complex128"),
        ("10", TypeError, "dtype"),
    ],
    ids=[
        "1d",
        "3d",
        "0d",
        "two",
        "uint8_two",
        "minus_one",
        "half",
        "nan",
        "inf",
        "empty_n",
        "empty_list",
        "ragged",
        "strings",
        "objects",
        "complex",
        "string",
    ],
)
def test_bad_pass_matrix(backend, bad, exc, match):
    with pytest.raises(exc, match=match):
        af.loo_auc(bad, backend=backend)
    with pytest.raises(exc, match=match):
        af.majority_vote(bad, backend=backend)


def test_error_messages_show_plain_values():
    with pytest.raises(ValueError, match=r"found value 2$"):
        as_pass_matrix(np.array([[0, 2], [1, 0]]))
    with pytest.raises(ValueError, match=r"found value 0\.5$"):
        as_pass_matrix(np.array([[0.5, 1.0], [1.0, 0.0]]))
    with pytest.raises(ValueError, match=r"non-negative; found -1\.0$"):
        af.loo_auc(EXAMPLE, -np.ones(10), backend="numpy")


@pytest.mark.parametrize(
    ("w", "exc", "match"),
    [
        (np.ones(9), ValueError, "length 9 but B has m=10"),
        (np.ones((2, 5)), ValueError, "must be 1-D"),
        (-np.ones(10), ValueError, "non-negative"),
        (np.r_[np.nan, np.ones(9)], ValueError, "finite"),
        (np.r_[np.inf, np.ones(9)], ValueError, "finite"),
        (np.array(["a"] * 10), TypeError, "real numbers"),
        (np.ones(10, dtype=complex), TypeError, "real numbers"),
    ],
    ids=["short", "2d", "negative", "nan", "inf", "strings", "complex"],
)
def test_bad_weights(backend, w, exc, match):
    with pytest.raises(exc, match=match):
        af.loo_auc(EXAMPLE, w, backend=backend)
    with pytest.raises(exc, match=match):
        af.surrogate_loo_auc(EXAMPLE, w, backend=backend)


@pytest.mark.parametrize(
    ("call", "exc", "match"),
    [
        (
            lambda B, be: af.surrogate_loo_auc(B, np.ones(10) / 10, gamma=0, backend=be),
            ValueError,
            "gamma must be > 0",
        ),
        (lambda B, be: af.aces_o(B, gamma=-1.0, backend=be), ValueError, "gamma must be > 0"),
        (
            lambda B, be: af.aces_o(B, gamma=float("nan"), backend=be),
            ValueError,
            "gamma must be finite",
        ),
        (lambda B, be: af.aces_o(B, lr=-0.1, backend=be), ValueError, "lr must be >= 0"),
        (lambda B, be: af.aces_o(B, steps=-1, backend=be), ValueError, "steps must be >= 0"),
        (lambda B, be: af.aces_o(B, steps=True, backend=be), TypeError, "steps must be an integer"),
        (lambda B, be: af.aces_o(B, steps=5.0, backend=be), TypeError, "steps must be an integer"),
        (lambda B, be: af.aces_o(B, top_k=0, backend=be), ValueError, "top_k must be >= 1"),
        (lambda B, be: af.aces_o(B, top_k=2.5, backend=be), TypeError, "top_k must be an integer"),
        (lambda B, be: af.aces_o(B, init="zeros", backend=be), ValueError, "init must be"),
        (lambda B, be: af.aces_o(B, gamma="10", backend=be), TypeError, "gamma must be a real"),
        (lambda B, be: af.aces_c(B, "weigthed", backend=be), ValueError, "variant must be"),
        (lambda B, be: af.aces_c(B, tie_tol=-1e-9, backend=be), ValueError, "tie_tol must be >= 0"),
        (
            lambda B, be: af.loo_auc(B, tie_tol=np.nan, backend=be),
            ValueError,
            "tie_tol must be finite",
        ),
        (lambda B, be: af.codet(B, exponent=-1, backend=be), ValueError, "exponent must be >= 0"),
        (lambda B, be: af.b4(B, alpha=0, backend=be), ValueError, "alpha must be > 0"),
        (lambda B, be: af.b4(B, beta0=-2, backend=be), ValueError, "beta0 must be > 0"),
        (lambda B, be: af.rerank(B, "acesc", backend=be), ValueError, "unknown method 'acesc'"),
        (lambda B, be: af.rerank(B, None, backend=be), ValueError, "unknown method None"),
    ],
    ids=[
        "gamma0",
        "gamma_neg",
        "gamma_nan",
        "lr_neg",
        "steps_neg",
        "steps_bool",
        "steps_float",
        "top_k0",
        "top_k_float",
        "init",
        "gamma_str",
        "variant",
        "tie_tol_neg",
        "tie_tol_nan",
        "exponent",
        "alpha",
        "beta0",
        "method",
        "method_none",
    ],
)
def test_bad_hyperparameters(backend, call, exc, match):
    with pytest.raises(exc, match=match):
        call(EXAMPLE, backend)


@pytest.mark.parametrize(
    ("name", "exc", "match"),
    [
        ("gpu", ValueError, "unknown backend 'gpu'"),
        ("", ValueError, "unknown backend ''"),
        (3, TypeError, "backend must be a string"),
    ],
)
def test_bad_backend_name(name, exc, match):
    with pytest.raises(exc, match=match):
        af.majority_vote(EXAMPLE, backend=name)


# ---------------------------------------------------------------------------
# backend selection rule: explicit > ACES_FAST_BACKEND > auto


def _auto_choice():
    status = af.backend_status()
    return next(name for name in ("cpp", "numba", "numpy") if status[name] is None)


def test_auto_selection(monkeypatch):
    monkeypatch.delenv(registry.ENV_VAR, raising=False)
    assert af.majority_vote(EXAMPLE).backend == _auto_choice()
    assert af.majority_vote(EXAMPLE, backend="auto").backend == _auto_choice()
    monkeypatch.setenv(registry.ENV_VAR, "auto")
    assert af.majority_vote(EXAMPLE).backend == _auto_choice()


def test_env_selects_backend(monkeypatch, backend):
    monkeypatch.setenv(registry.ENV_VAR, backend)
    assert af.majority_vote(EXAMPLE).backend == backend
    assert af.aces_c(EXAMPLE).backend == backend


def test_explicit_beats_env(monkeypatch, backend):
    other = "numpy" if backend != "numpy" else _auto_choice()
    monkeypatch.setenv(registry.ENV_VAR, other)
    assert af.majority_vote(EXAMPLE, backend=backend).backend == backend
    assert af.rerank(EXAMPLE, "aces-c", backend=backend).backend == backend


def test_env_explicit_auto_beats_env(monkeypatch):
    monkeypatch.setenv(registry.ENV_VAR, "numpy")
    assert af.majority_vote(EXAMPLE, backend="auto").backend == _auto_choice()


def test_unknown_env_backend_raises(monkeypatch):
    monkeypatch.setenv(registry.ENV_VAR, "fortran")
    with pytest.raises(ValueError, match="unknown backend 'fortran'"):
        af.majority_vote(EXAMPLE)


def _fake_backend(monkeypatch, load):
    """Register a backend module called ``fake_mod`` under the name 'numba'."""
    module = types.ModuleType("aces_fast_test_fake_backend")
    module.load = load
    monkeypatch.setitem(sys.modules, module.__name__, module)
    monkeypatch.setitem(registry._MODULES, "numba", module.__name__)
    monkeypatch.setattr(registry, "_loaded", {})
    monkeypatch.setattr(registry, "_failed", {})


def test_unavailable_backend_says_why(monkeypatch):
    def load():
        raise af.BackendUnavailableError("numba", "numba is too old (0.1); need >= 0.59")

    _fake_backend(monkeypatch, load)
    with pytest.raises(af.BackendUnavailableError, match="too old") as info:
        af.majority_vote(EXAMPLE, backend="numba")
    assert info.value.name == "numba"
    assert info.value.reason == "numba is too old (0.1); need >= 0.59"
    assert "numba" in str(info.value) and "unavailable" in str(info.value)
    # asked again: same error (the failure is remembered), and the status reports it
    with pytest.raises(af.BackendUnavailableError, match="too old"):
        af.loo_auc(EXAMPLE, backend="numba")
    assert af.backend_status()["numba"] == "numba is too old (0.1); need >= 0.59"
    assert "numba" not in af.available_backends()
    monkeypatch.setenv(registry.ENV_VAR, "numba")
    with pytest.raises(af.BackendUnavailableError, match="too old"):
        af.majority_vote(EXAMPLE)


def test_missing_module_is_unavailable_not_importerror(monkeypatch):
    monkeypatch.setitem(registry._MODULES, "numba", "aces_fast.backends._no_such_module")
    monkeypatch.setattr(registry, "_loaded", {})
    monkeypatch.setattr(registry, "_failed", {})
    with pytest.raises(af.BackendUnavailableError, match="import failed"):
        af.majority_vote(EXAMPLE, backend="numba")


# ---------------------------------------------------------------------------
# torch tensors on the numpy backend


def test_cpu_tensor_on_numpy_backend():
    torch = pytest.importorskip("torch", reason="torch is not installed")
    want = af.loo_auc(EXAMPLE, backend="numpy")
    for dtype in (torch.uint8, torch.bool, torch.float32, torch.int64):
        t = torch.tensor(EXAMPLE).to(dtype)
        np.testing.assert_array_equal(af.loo_auc(t, backend="numpy"), want)
        res = af.aces_c(t, backend="numpy")
        assert isinstance(res.scores, np.ndarray) and res.backend == "numpy"
    t = torch.tensor(EXAMPLE)
    assert np.shares_memory(as_pass_matrix(t), t.numpy())
    w = torch.full((10,), 0.1, dtype=torch.float64)
    np.testing.assert_array_equal(af.loo_auc(EXAMPLE, w, backend="numpy"), want)
    with pytest.raises(TypeError, match="real-valued"):
        af.loo_auc(torch.tensor(EXAMPLE, dtype=torch.complex64), backend="numpy")
    with pytest.raises(ValueError, match="only 0 and 1"):
        af.loo_auc(torch.tensor(EXAMPLE) * 2, backend="numpy")


def test_bfloat16_tensor_on_numpy_backend():
    torch = pytest.importorskip("torch", reason="torch is not installed")
    t = torch.tensor(EXAMPLE).to(torch.bfloat16)
    np.testing.assert_array_equal(
        af.loo_auc(t, backend="numpy"), af.loo_auc(EXAMPLE, backend="numpy")
    )


def test_every_path_checks_uint8_and_bool_values(backend):
    # the zero-copy path: cpp (and numba's compiled methods) check inside the
    # compiled call, the other backends and paths before computing; same message
    bad = EXAMPLE.copy()
    bad[3, 4] = 2
    calls = [
        (lambda B: af.loo_auc(B, backend=backend), ""),
        (lambda B: af.surrogate_loo_auc(B, np.ones(B.shape[1]), backend=backend), ""),
        (lambda B: af.majority_vote(B, backend=backend), ""),
        (lambda B: af.aces_c(B, backend=backend), ""),
        (lambda B: af.aces_c(B, "filter", backend=backend), ""),
        (lambda B: af.aces_o(B, steps=2, backend=backend), ""),
        (lambda B: af.codet(B, backend=backend), ""),
        (lambda B: af.b4(B, backend=backend), ""),
        (lambda B: af.rerank_batch([EXAMPLE, B], "codet", backend=backend), "task 1: "),
        (lambda B: af.rerank_batch([EXAMPLE, B], "aces-c", backend=backend), "task 1: "),
    ]
    if backend == "cpp":
        calls.append((lambda B: af.aces_o(B, steps=2, bins=64, backend=backend), ""))
    for call, prefix in calls:
        call(EXAMPLE)
        for B in (bad, bad.view(np.bool_)):
            with pytest.raises(
                ValueError, match=f"^{prefix}B must contain only 0 and 1; found value 2$"
            ):
                call(B)
