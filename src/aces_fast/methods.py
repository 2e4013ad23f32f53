"""Public ranking methods (docs/contract.rst §3) and the kernels they are built on.

Every function validates its input, picks a backend by the rule of
docs/contract.rst §4 (``backend=None`` -> ``ACES_FAST_BACKEND`` -> auto) and returns a
:class:`~aces_fast.result.RerankResult` (or an array for the kernels).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

import numpy as np

from . import _registry, _semantics, consensus
from ._cost import warn_if_costly
from ._registry import (
    ACES_C,
    ACES_C_FILTER,
    ACES_O,
    B4,
    CODET,
    DEFAULT_METHOD,
    GAMMA,
    MAJORITY,
    TIE_TOL,
    MethodSpec,
)
from ._types import Array
from ._validation import as_scores, check_real, is_torch_tensor, tensor_to_numpy
from .backends import call_backend, check_backend_choice, host_route
from .backends.base import ArrayBackend, Backend
from .result import RerankResult, SurrogateResult


def _setup(B: Any, backend: str | None) -> tuple[Backend, Any, Any]:
    """A call's backend, validated input, and the device its outputs go back to:
    ``None`` unless ``auto`` takes a small device tensor to the host
    (:mod:`.backends.host_route`)."""
    be, on_host = call_backend(backend, B)
    if on_host:
        return be, be.prepare(host_route.to_host(B)), B.device
    return be, be.prepare(B), None


def _kernel_weights(be: Backend, weights: Any, m: int, device: Any) -> Any:
    """Weights validated for ``be``; on the host route a tensor is copied out first."""
    if device is not None and is_torch_tensor(weights):
        weights = host_route.to_host(weights)
    return be.prepare_weights(weights, m)


def _run(spec: MethodSpec, B: Any, backend: str | None, params: dict[str, Any]) -> RerankResult:
    """Validate ``params`` (once, here), pick the backend (``auto`` ranks a small
    device tensor on the host: :mod:`.backends.host_route`), validate ``B``, warn
    before a call far beyond the usual cost (:mod:`aces_fast._cost`), rank."""
    values = spec.validate(params)
    be, Bv, device = _setup(B, backend)
    if spec.cost is not None:
        warn_if_costly(spec.cost, spec.name, be, (Bv,), values, stacklevel=4)
    result = be.rerank(Bv, spec, values)
    return result if device is None else host_route.on_device(result, device)


def loo_auc(
    B: Any, weights: Any = None, *, tie_tol: float = TIE_TOL.default, backend: str | None = None
) -> Array:
    """Leave-one-out AUC of every test (docs/contract.rst §2).

    ``LOO-AUC_j(w) = AUC(s - w_j B[:, j], B[:, j])`` with ``s = B @ w``: how well
    the other tests' weighted votes separate the candidates that pass test ``j``
    from those that fail it.

    Parameters
    ----------
    B : array_like, shape (n, m)
        0/1 pass matrix (bool, integer or float dtype; nested lists; torch tensor).
    weights : array_like, shape (m,), optional
        Non-negative finite test weights whose sum is at most 1e300 (the result
        does not depend on their scale); ``None`` means uniform (exact integer sums).
    tie_tol : float in [0, 1], default 1e-9
        With float weights, two leave-one-out scores tie when they differ by at
        most ``tie_tol * sum(weights)`` (so rounding noise never breaks a tie).
    backend : str, optional
        ``"cpp"``, ``"numba"``, ``"torch"``, ``"numpy"`` or ``"auto"``.

    Returns
    -------
    numpy.ndarray, shape (m,), float64
        Values in [0, 1]; ``nan`` for constant tests (all pass or all fail).

    Notes
    -----
    One sort of the scores serves all tests, then a merge per test:
    O(n log n + n m) time, O(n + m) extra memory besides an optional uint8 copy.

    Examples
    --------
    >>> import numpy as np
    >>> import aces_fast as af
    >>> B = np.array([[1, 1, 0, 1], [1, 1, 0, 0], [0, 0, 1, 0], [1, 1, 0, 1]])
    >>> af.loo_auc(B).round(3).tolist()
    [0.833, 0.833, 0.0, 0.75]
    """
    tie_tol = TIE_TOL.validate(tie_tol)
    be, Bv, device = _setup(B, backend)
    w = None if weights is None else _kernel_weights(be, weights, Bv.shape[1], device)
    L = be.loo_auc_public(Bv, w, tie_tol)
    return L if device is None else host_route.to_device([L], np.float64, device)[0]


def surrogate_loo_auc(
    B: Any, weights: Any, gamma: float = GAMMA.default, *, backend: str | None = None
) -> SurrogateResult:
    """Logistic surrogate of LOO-AUC, the ACES-O objective and its gradient.

    ``L_j(w) = mean_{p in P_j, f in F_j} sigmoid(gamma (s_p - s_f - w_j))`` and
    ``J(w) = sum_j w_j (L_j(w) - 1/2)`` over tests with passers and failers.

    Parameters
    ----------
    B : array_like, shape (n, m)
        0/1 pass matrix, ``n >= 1`` candidates by ``m`` tests (bool, integer or
        float dtype; nested lists; torch tensor).
    weights : array_like, shape (m,)
        Non-negative finite weights summing to at most 1e300 (ACES-O uses weights
        on the simplex).
    gamma : float in (0, 1e4], default 10
        Sigmoid sharpness. The values are smooth in ``gamma * w``; backends agree
        to about ``1e-16 * gamma * sum(weights)`` (the rounding of the scores,
        amplified by the sigmoid's slope).
    backend : str, optional
        ``"cpp"``, ``"numba"``, ``"torch"``, ``"numpy"`` or ``"auto"``; ``None``
        applies ``ACES_FAST_BACKEND``, else ``"auto"`` (docs/contract.rst §4).

    Returns
    -------
    SurrogateResult
        ``(values (m,) float64, objective float, gradient (m,) float64)`` with
        ``gradient = dJ/dw`` computed analytically in ``O(sum_j |P_j||F_j| + n m)``.

    Examples
    --------
    >>> import numpy as np
    >>> import aces_fast as af
    >>> B = np.array([[1, 1, 0, 1], [1, 1, 0, 0], [0, 0, 1, 0], [1, 1, 0, 1]])
    >>> sur = af.surrogate_loo_auc(B, np.full(4, 0.25))
    >>> sur.values.round(3).tolist(), round(sur.objective, 4)
    ([0.783, 0.783, 0.003, 0.712], 0.07)
    """
    gamma = GAMMA.validate(gamma)
    be, Bv, device = _setup(B, backend)
    w = _kernel_weights(be, weights, Bv.shape[1], device)
    out = be.surrogate_public(Bv, w, gamma)
    if device is None:
        return out
    return SurrogateResult(*host_route.to_device(list(out), np.float64, device))


def majority_vote(B: Any, *, backend: str | None = None) -> RerankResult:
    """Rank candidates by the number of non-constant tests they pass.

    Weights are uniform over non-constant tests (normalized to sum 1), so
    ``scores`` are pass fractions (docs/contract.rst §3.1). O(n m).

    Parameters
    ----------
    B : array_like, shape (n, m)
        0/1 pass matrix, ``n >= 1`` candidates by ``m`` tests (bool, integer or
        float dtype; nested lists; torch tensor).
    backend : str, optional
        ``"cpp"``, ``"numba"``, ``"torch"``, ``"numpy"`` or ``"auto"``; ``None``
        applies ``ACES_FAST_BACKEND``, else ``"auto"`` (docs/contract.rst §4).

    Returns
    -------
    RerankResult
        ``scores`` (n,) float64, ``order`` (n,) int64 (best first, ties by
        index), ``weights`` (m,) float64.

    Examples
    --------
    >>> import numpy as np
    >>> import aces_fast as af
    >>> B = np.array([[1, 1, 0, 1], [1, 1, 0, 0], [0, 0, 1, 0], [1, 1, 0, 1]])
    >>> res = af.majority_vote(B)
    >>> res.order.tolist(), res.scores.tolist()
    ([0, 3, 1, 2], [0.75, 0.5, 0.25, 0.75])
    """
    return _run(MAJORITY, B, backend, {})


#: ``aces_c``'s variants: the value of ``variant`` -> the method it runs
#: NumPy primitives for the orders of the NumPy-only methods (mbr_exec, combine)
_NUMPY_OPS = ArrayBackend()

_ACES_C_VARIANTS = {spec.fixed["variant"]: spec for spec in (ACES_C, ACES_C_FILTER)}


def aces_c(
    B: Any,
    variant: str = ACES_C.fixed["variant"],
    *,
    tie_tol: float = ACES_C.default("tie_tol"),
    backend: str | None = None,
) -> RerankResult:
    """ACES-C: closed-form test weights from uniform-weight LOO-AUC.

    ``variant="weighted"``: ``w_j = max(0, LOO-AUC_j(1) - 1/2) * p_j (1 - p_j)``
    with ``p_j`` the pass rate of test ``j``; ``variant="filter"``: ``w_j = 1`` where
    ``LOO-AUC_j(1) > 1/2``. If every weight is 0 the result falls back to majority
    vote and says so (``result.fallback``). Weights are normalized to sum 1.
    Cost: one LOO-AUC pass, O(n log n + n m).

    Parameters
    ----------
    B : array_like, shape (n, m)
        0/1 pass matrix, ``n >= 1`` candidates by ``m`` tests (bool, integer or
        float dtype; nested lists; torch tensor).
    variant : {"weighted", "filter"}, default "weighted"
        The weight formula above (``rerank`` names: ``"aces-c"``, ``"aces-c-filter"``).
    tie_tol : float in [0, 1], default 1e-9
        Scores within ``tie_tol * sum(w)`` tie (see :func:`loo_auc`).
    backend : str, optional
        ``"cpp"``, ``"numba"``, ``"torch"``, ``"numpy"`` or ``"auto"``; ``None``
        applies ``ACES_FAST_BACKEND``, else ``"auto"`` (docs/contract.rst §4).

    Returns
    -------
    RerankResult
        ``scores`` (n,) float64, ``order`` (n,) int64 (best first), ``weights``
        (m,) float64 summing to 1, and ``loo_auc`` (m,) float64: the uniform
        LOO-AUC.

    Examples
    --------
    >>> import numpy as np
    >>> import aces_fast as af
    >>> B = np.array([[1, 1, 0, 1], [1, 1, 0, 0], [0, 0, 1, 0], [1, 1, 0, 1]])
    >>> res = af.aces_c(B)
    >>> res.order.tolist()
    [0, 3, 1, 2]
    >>> res.weights.round(3).tolist()
    [0.333, 0.333, 0.0, 0.333]
    >>> af.aces_c(B, variant="filter").weights.round(3).tolist()
    [0.333, 0.333, 0.0, 0.333]
    """
    spec = _ACES_C_VARIANTS.get(variant) if isinstance(variant, str) else None
    if spec is None:
        allowed = " or ".join(repr(v) for v in _ACES_C_VARIANTS)
        raise ValueError(f"variant must be {allowed}; got {variant!r}")
    return _run(spec, B, backend, {"tie_tol": tie_tol})


def aces_o(
    B: Any,
    gamma: float = ACES_O.default("gamma"),
    lr: float = ACES_O.default("lr"),
    steps: int = ACES_O.default("steps"),
    top_k: int | None = ACES_O.default("top_k"),
    init: str = ACES_O.default("init"),
    *,
    tie_tol: float = ACES_O.default("tie_tol"),
    bins: int | None = ACES_O.default("bins"),
    backend: str | None = None,
) -> RerankResult:
    """ACES-O: test weights on the simplex maximizing the surrogate LOO-AUC objective.

    Maximizes ``J(w) = sum_j w_j (L_j(w) - 1/2)`` over ``w = softmax(l)`` (constant
    tests keep weight 0) with ``steps`` Adam steps (PyTorch semantics) at rate
    ``lr``, on the ``top_k`` candidates with the most passes (stable; ``None``
    keeps all), then scores every candidate with the learned weights.

    Parameters
    ----------
    B : array_like, shape (n, m)
        0/1 pass matrix, ``n >= 1`` candidates by ``m`` tests (bool, integer or
        float dtype; nested lists; torch tensor).
    gamma : float in (0, 1e4], default 10
        Sigmoid sharpness of the surrogate.
    lr : float in [0, 1000], default 0.01
        Adam learning rate (the paper used 0.05 on HumanEval+ and MBPP).
    steps : int in [0, 10**6], default 90
        Adam steps.
    top_k : int in [1, 2**63 - 1] or None, default 24
        Candidates kept for the optimization (the paper used 32 on MBPP); any
        value >= n, or ``None``, keeps every candidate.
    init : {"uniform", "aces-c"}
        Start from equal logits, or from ``log(w_C + 1e-3)`` with ``w_C`` the
        normalized ACES-C weights (a warm start that avoids following a wrong
        majority of tests).
    tie_tol : float in [0, 1], default 1e-9
        Scores within ``tie_tol * sum(w)`` tie (see :func:`loo_auc`).
    bins : int in [2, 65536], optional
        Opt-in approximation for large candidate pools (``top_k=None`` with
        thousands of rows), ``cpp`` backend only: pair sums of the surrogate are
        computed on a grid of ``bins`` score nodes (histogram convolutions), cost
        O(n m + m bins log bins) per step instead of ``O(sum_j |P_j||F_j|)``. The
        surrogate's error is at most ``gamma^2 h^2 / (24 sqrt 3)`` for grid
        spacing ``h`` (see ``aces_fast._core.binned_error_bound``); at
        ``bins=2048`` ACES-O weights agree with the exact run to about 1e-4.
        ``None`` (default) is exact.
    backend : str, optional
        ``"cpp"``, ``"numba"``, ``"torch"``, ``"numpy"`` or ``"auto"``; ``None``
        applies ``ACES_FAST_BACKEND``, else ``"auto"`` (docs/contract.rst §4).

    Returns
    -------
    RerankResult
        ``scores`` (n,) float64, ``order`` (n,) int64, ``weights`` (m,) float64
        on the simplex; ``objective`` (steps + 1,) float64 holds ``J`` at the
        start and after each step; ``info["rows"]`` the optimized rows.

    Warns
    -----
    aces_fast.CostWarning
        Once, before starting, when the exact fit's estimated work -- ``(steps + 1)
        * sum_j |P_j||F_j|`` sigmoid pair terms on the ``k`` optimized rows, at
        most ``(steps + 1) m k^2 / 4`` -- would take over a minute at the backend's
        nominal speed (e.g. ``top_k=None`` with ``steps=400`` on 4000 x 300: about
        5e11 terms). The message gives the estimate and the cheaper ``bins=``.

    Notes
    -----
    Cost: ``O(steps * (sum_j |P_j||F_j| + k m))`` on the ``k = top_k`` rows.

    Examples
    --------
    >>> import numpy as np
    >>> import aces_fast as af
    >>> B = np.array([[1, 1, 0, 1], [1, 1, 0, 0], [0, 0, 1, 0], [1, 1, 0, 1]])
    >>> res = af.aces_o(B)
    >>> res.order.tolist(), len(res.objective)
    ([0, 3, 1, 2], 91)
    >>> bool(res.objective[-1] > res.objective[0])  # the fit improved J
    True
    """
    return _run(
        ACES_O,
        B,
        backend,
        {
            "gamma": gamma,
            "lr": lr,
            "steps": steps,
            "top_k": top_k,
            "init": init,
            "tie_tol": tie_tol,
            "bins": bins,
        },
    )


def codet(
    B: Any, exponent: float = CODET.default("exponent"), *, backend: str | None = None
) -> RerankResult:
    """CodeT dual agreement in pass-matrix form.

    Candidates with identical rows form a consensus set scoring
    ``(#non-constant tests passed) * (set size) ** exponent`` (0.5 as in CodeT's
    released code, 1 for the paper's linear form). O(n m log n).

    Parameters
    ----------
    B : array_like, shape (n, m)
        0/1 pass matrix, ``n >= 1`` candidates by ``m`` tests (bool, integer or
        float dtype; nested lists; torch tensor).
    exponent : float in [0, 16], default 0.5
        Power of the consensus set's size (larger powers overflow float64);
        ``rerank`` names ``"codet"`` (0.5) and ``"codet-linear"`` (1).
    backend : str, optional
        ``"cpp"``, ``"numba"``, ``"torch"``, ``"numpy"`` or ``"auto"``; ``None``
        applies ``ACES_FAST_BACKEND``, else ``"auto"`` (docs/contract.rst §4).

    Returns
    -------
    RerankResult
        ``scores`` (n,) float64 (each candidate its set's score), ``order``
        (n,) int64; ``weights`` is ``None``.

    Examples
    --------
    >>> import numpy as np
    >>> import aces_fast as af
    >>> B = np.array([[1, 1, 0, 1], [1, 1, 0, 0], [0, 0, 1, 0], [1, 1, 0, 1]])
    >>> res = af.codet(B)  # rows 0 and 3 agree: a set of size 2
    >>> res.order.tolist(), res.scores.round(3).tolist()
    ([0, 3, 1, 2], [4.243, 2.0, 1.0, 4.243])
    >>> af.codet(B, exponent=1).scores.tolist()
    [6.0, 2.0, 1.0, 6.0]
    """
    return _run(CODET, B, backend, {"exponent": exponent})


def b4(
    B: Any,
    alpha: float = B4.default("alpha"),
    beta0: float = B4.default("beta0"),
    *,
    backend: str | None = None,
) -> RerankResult:
    """B4 (Chen et al., ASE 2024): Bayesian posterior of each consensus set.

    Candidates with identical rows form a consensus set; each set scores the
    log posterior of "its passed tests are the correct ones" under Beta priors
    on how often a correct and an incorrect program pass a test (the formula is
    docs/contract.rst §3.5). O(n m log n).

    Parameters
    ----------
    B : array_like, shape (n, m)
        0/1 pass matrix, ``n >= 1`` candidates by ``m`` tests (bool, integer or
        float dtype; nested lists; torch tensor).
    alpha : float in (0, 1e8], default 1e3
        The Beta prior parameter ``a``.
    beta0 : float in (0, 1e8], default 1e4
        The Beta prior parameter ``b``. Beyond 1e8 the log-Beta terms (of size
        ``a log a``) cancel to rounding noise.
    backend : str, optional
        ``"cpp"``, ``"numba"``, ``"torch"``, ``"numpy"`` or ``"auto"``; ``None``
        applies ``ACES_FAST_BACKEND``, else ``"auto"`` (docs/contract.rst §4).

    Returns
    -------
    RerankResult
        ``scores`` (n,) float64 (log posteriors, each candidate its set's),
        ``order`` (n,) int64; ``weights`` is ``None``.

    Examples
    --------
    >>> import numpy as np
    >>> import aces_fast as af
    >>> B = np.array([[1, 1, 0, 1], [1, 1, 0, 0], [0, 0, 1, 0], [1, 1, 0, 1]])
    >>> af.b4(B).order.tolist()
    [0, 3, 1, 2]
    """
    return _run(B4, B, backend, {"alpha": alpha, "beta0": beta0})


def mbr_exec(outputs: Any, *, backend: str | None = None) -> RerankResult:
    """MBR-exec: score each candidate by how many candidates produce identical outputs.

    Parameters
    ----------
    outputs : array_like, shape (n, t)
        ``outputs[i, t]`` = hash (any integer, or string) of candidate ``i``'s
        output on input ``t``; ``n >= 1``. With ``t = 0`` every candidate scores
        ``n``. Tensors on any device are copied to the host.

    backend : str, optional
        Validated only; grouping identical rows runs in NumPy (O(n t log n)).

    Returns
    -------
    RerankResult
        ``scores`` (n,) float64 with ``scores[i] = #{i' : outputs[i'] ==
        outputs[i]}`` (including ``i``), ``order`` (n,) int64; ``weights`` is
        ``None``.

    Examples
    --------
    >>> import aces_fast as af
    >>> res = af.mbr_exec([[1, 7], [1, 7], [2, 7]])  # candidates 0 and 1 agree
    >>> res.scores.tolist(), res.order.tolist()
    ([2.0, 2.0, 1.0], [0, 1, 2])
    """
    ran = check_backend_choice(backend)
    if is_torch_tensor(outputs):
        outputs = tensor_to_numpy(outputs, "outputs", host_copy=True)
    try:
        O = np.asarray(outputs)
    except ValueError as exc:  # ragged nested lists
        raise ValueError(f"outputs must be a rectangular (n, t) array: {exc}") from None
    if O.ndim != 2 or O.shape[0] == 0:
        raise ValueError(f"outputs must have shape (n >= 1, t); got {O.shape}")
    if O.shape[1] == 0:
        # no inputs: every candidate's (empty) outputs agree -- whatever dtype NumPy
        # gave the empty rows (float64 for ``[[], []]``)
        O = np.zeros(O.shape, dtype=np.int64)
    if O.dtype == object or O.dtype.kind not in "biuUS":
        raise TypeError(f"outputs must be integer hashes (or strings); got dtype {O.dtype}")
    scores = consensus.mbr_exec_scores(O)
    return RerankResult(
        scores=scores,
        weights=None,
        order=_semantics.descending_order(_NUMPY_OPS, scores),
        method="mbr-exec",
        backend=ran,
    )


def combine(
    scores: Any,
    quality: Any,
    consensus_matrix: Any,
    alpha: float = 0.5,
    beta: float = 0.5,
    *,
    backend: str | None = None,
) -> RerankResult:
    """Combine test-based scores with static signals (the paper's ACES + DS^3).

    ``r = (alpha I + (1 - alpha) P) (beta s_hat + (1 - beta) q)`` where ``s_hat`` is
    ``scores`` rescaled to [0, 1] (all zeros when every score is equal). Tensors on
    any device are copied to the host.

    Parameters
    ----------
    scores : RerankResult or array_like, shape (n,)
        Finite real scores (any magnitude).
    quality : array_like, shape (n,), values in [0, 1]
        Per-candidate static quality ``q``.
    consensus_matrix : array_like, shape (n, n), values in [0, 1]
        Pairwise consensus ``P``.
    alpha, beta : float in [0, 1], default 0.5
        Mixing weights of the formula above.
    backend : str, optional
        Validated only; the O(n^2) product runs in NumPy.

    Returns
    -------
    RerankResult
        ``scores`` (n,) float64 (``r``), ``order`` (n,) int64; ``weights`` is
        ``None``; ``method`` is ``"combine(<method of scores>)"`` for a result.

    Examples
    --------
    >>> import numpy as np
    >>> import aces_fast as af
    >>> res = af.combine([3.0, 1.0, 2.0], [0.5, 1.0, 0.0], np.eye(3))
    >>> res.scores.tolist(), res.order.tolist()
    ([0.75, 0.5, 0.25], [0, 1, 2])
    """
    ran = check_backend_choice(backend)
    base = scores.method if isinstance(scores, RerankResult) else None
    s = as_scores(scores.scores if isinstance(scores, RerankResult) else scores)
    n = s.shape[0]
    q = as_scores(quality, "quality")
    if q.shape != (n,):
        raise ValueError(f"quality must have shape ({n},); got {q.shape}")
    if is_torch_tensor(consensus_matrix):
        consensus_matrix = tensor_to_numpy(consensus_matrix, "consensus_matrix", host_copy=True)
    P = np.asarray(consensus_matrix)
    if P.dtype == object or P.dtype.kind not in "biuf":
        raise TypeError(f"consensus_matrix must be real; got dtype {P.dtype}")
    if P.shape != (n, n):
        raise ValueError(f"consensus_matrix must have shape ({n}, {n}); got {P.shape}")
    P = P.astype(np.float64)
    for name, arr in (("quality", q), ("consensus_matrix", P)):
        if not np.isfinite(arr).all() or (arr < 0).any() or (arr > 1).any():
            raise ValueError(f"{name} must have finite values in [0, 1]")
    alpha = check_real(alpha, "alpha", lo=0.0, hi=1.0)
    beta = check_real(beta, "beta", lo=0.0, hi=1.0)
    lo, hi = s.min(), s.max()
    if hi > lo:
        # halves: the span of finite scores can overflow (-1e308 .. 1e308), theirs
        # cannot; halving is exact, so the result is the same whenever both fit
        with np.errstate(over="ignore"):
            span = hi - lo
        s_hat = (s - lo) / span if np.isfinite(span) else (s / 2 - lo / 2) / (hi / 2 - lo / 2)
    else:
        s_hat = np.zeros(n)
    r = alpha * (beta * s_hat + (1 - beta) * q) + (1 - alpha) * (
        P @ (beta * s_hat + (1 - beta) * q)
    )
    method = f"combine({base})" if base else "combine"
    return RerankResult(
        scores=r,
        weights=None,
        order=_semantics.descending_order(_NUMPY_OPS, r),
        method=method,
        backend=ran,
        info={"alpha": alpha, "beta": beta},
    )


class _Methods(Mapping[str, Callable[..., RerankResult]]):
    """``rerank`` name -> a callable ``(B, *, backend=None, **params)``: a live view of
    the registered methods (:mod:`aces_fast._registry`), in table order."""

    def __getitem__(self, name: str) -> Callable[..., RerankResult]:
        if name not in _registry.names():
            raise KeyError(name)
        spec = _registry.get(name)

        def call(B: Any, *, backend: str | None = None, **params: Any) -> RerankResult:
            return _run(spec, B, backend, params)

        call.__name__ = call.__qualname__ = spec.name.replace("-", "_")
        call.__doc__ = spec.summary
        return call

    def __iter__(self) -> Iterator[str]:
        return iter(_registry.names())

    def __len__(self) -> int:
        return len(_registry.names())

    def __repr__(self) -> str:
        return f"METHODS({', '.join(self)})"


#: ``rerank`` method names -> callables taking ``(B, backend=..., **params)``.
METHODS: Mapping[str, Callable[..., RerankResult]] = _Methods()


def rerank(
    B: Any, method: str = DEFAULT_METHOD, *, backend: str | None = None, **params: Any
) -> RerankResult:
    """Rank candidates with the method called ``method``.

    Names (:data:`METHODS`): ``"majority"``, ``"codet"`` (exponent 0.5),
    ``"codet-linear"`` (exponent 1), ``"b4"``, ``"aces-c"``, ``"aces-c-filter"``,
    ``"aces-o"``, ``"aces-o-warm"`` (ACES-O with ``init="aces-c"``). ``params``
    go to the method, e.g. ``rerank(B, "aces-o", lr=0.05, top_k=32)``; an
    unknown one is a TypeError.

    Parameters
    ----------
    B : array_like, shape (n, m)
        0/1 pass matrix, ``n >= 1`` candidates by ``m`` tests (bool, integer or
        float dtype; nested lists; torch tensor).
    method : str, default "aces-c"
        One of the names above.
    backend : str, optional
        ``"cpp"``, ``"numba"``, ``"torch"``, ``"numpy"`` or ``"auto"``; ``None``
        applies ``ACES_FAST_BACKEND``, else ``"auto"`` (docs/contract.rst §4).
    **params
        The method's parameters (see its function, e.g. :func:`aces_o`).

    Returns
    -------
    RerankResult
        ``scores`` (n,) float64, ``order`` (n,) int64 (best first), ``weights``
        (m,) float64 or ``None``, as the method's own function returns.

    Examples
    --------
    >>> import numpy as np
    >>> import aces_fast as af
    >>> B = np.array([[1, 1, 0, 1], [1, 1, 0, 0], [0, 0, 1, 0], [1, 1, 0, 1]])
    >>> af.rerank(B, "aces-c").order.tolist()
    [0, 3, 1, 2]
    >>> af.rerank(B, "codet-linear").scores.tolist()
    [6.0, 2.0, 1.0, 6.0]
    """
    return _run(_registry.get(method), B, backend, params)
