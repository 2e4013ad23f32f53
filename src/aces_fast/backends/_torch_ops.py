"""Tensor kernels of the ``torch`` backend (SPEC sections 2-3), one task at a time,
device-agnostic.

Every function takes tensors on one device (CPU or CUDA) and returns tensors on
that device; nothing here converts to or from NumPy (that is
:mod:`aces_fast.backends.torch_backend`'s job) except :func:`from_numpy`, the
zero-copy wrapper that module shares with the batch padding. Work is
vectorized across tests: Python loops run only over column *chunks* sized so
that the largest temporary holds at most ``chunk_elements`` entries, and over
ACES-O's Adam steps. The padded-batch versions of these operations (many tasks
at once) are in :mod:`aces_fast.backends._torch_batch`, which imports the
shared helpers from here (chunk sizes, exact sums and row scores, ACES-C
weights, ...).

Imported only by :mod:`aces_fast.backends.torch_backend` and
:mod:`aces_fast.backends._torch_batch`, both imported lazily, so
``import aces_fast`` never imports torch.
"""

from __future__ import annotations

import math
import warnings
from typing import Iterator, Optional, Tuple

import numpy as np
import torch

#: Default cap on the entries of the largest per-chunk temporary: (n, k) for
#: LOO-AUC, (k, n, n) for the surrogate. 2**22 float64 entries are 32 MiB.
DEFAULT_CHUNK_ELEMENTS = 1 << 22

_INTEGER_DTYPES = frozenset(
    getattr(torch, name) for name in
    ("uint8", "int8", "int16", "int32", "int64", "uint16", "uint32", "uint64")
    if hasattr(torch, name)
)


def column_chunks(m: int, per_column: int, budget: int) -> Iterator[Tuple[int, int]]:
    """``(start, stop)`` column ranges with ``per_column * (stop - start) <= budget``.

    A chunk always holds at least one column, so a single huge column still runs.
    """
    size = max(1, budget // max(1, per_column))
    for start in range(0, m, size):
        yield start, min(m, start + size)


# ---------------------------------------------------------------------------
# NumPy input without a copy


def from_numpy(a: np.ndarray) -> "torch.Tensor":
    """``torch.from_numpy`` without copying, also for read-only arrays.

    torch warns that writing to a tensor over a read-only array is undefined;
    this backend never writes to its inputs, so the warning is silenced.
    """
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*not writable.*")
        return torch.from_numpy(a)


# ---------------------------------------------------------------------------
# validation on the tensor's own device (messages identical to _validation.py)


def _scalar(x: torch.Tensor):
    """A 0-d tensor as the Python number the NumPy validators report."""
    return x.detach().cpu().item()


def check_pass_tensor(B: torch.Tensor, name: str = "B") -> torch.Tensor:
    """Validate a pass-matrix tensor where it lives; return contiguous ``uint8`` (n, m).

    Same checks and messages as :func:`aces_fast._validation.as_pass_matrix`, run
    with tensor ops on ``B.device`` (one host synchronization per check that
    reads data). ``bool``/``uint8`` input is returned without a copy when
    contiguous. Raises TypeError for complex or non-numeric dtypes, ValueError for
    a wrong ndim, an empty candidate axis, NaN or values other than 0 and 1.
    """
    if B.is_complex():
        raise TypeError(f"{name} must be real-valued, got a tensor of dtype {B.dtype}")
    if not (B.dtype == torch.bool or B.is_floating_point() or B.dtype in _INTEGER_DTYPES):
        raise TypeError(
            f"{name} must hold 0/1 values as bool, integer or float; got dtype {B.dtype}"
        )
    shape = tuple(B.shape)
    if B.ndim != 2:
        raise ValueError(
            f"{name} must be 2-D with shape (n_candidates, n_tests); got shape {shape}"
        )
    if shape[0] == 0:
        raise ValueError(f"{name} has an empty candidate axis (shape {shape}); need n >= 1")
    B = B.detach()
    if B.dtype == torch.bool:
        return B.contiguous().view(torch.uint8)
    if B.dtype == torch.uint8:
        if B.numel() and int(B.max()) > 1:
            raise ValueError(f"{name} must contain only 0 and 1; found value {int(B.max())}")
        return B.contiguous()
    if B.numel():
        if B.is_floating_point() and bool(torch.isnan(B).any()):
            raise ValueError(f"{name} contains NaN; a pass matrix must contain only 0 and 1")
        bad = (B != 0) & (B != 1)
        if bool(bad.any()):
            value = _scalar(B[bad][0])
            raise ValueError(f"{name} must contain only 0 and 1; found value {value!r}")
    return B.to(torch.uint8).contiguous()


def check_weights_tensor(w: torch.Tensor, m: int, name: str = "weights") -> torch.Tensor:
    """Validate weights where they live; return float64 (m,) on ``w.device``.

    Same checks and messages as :func:`aces_fast._validation.as_weights`.
    """
    if w.is_complex():
        raise TypeError(f"{name} must be real-valued, got a tensor of dtype {w.dtype}")
    if not (w.dtype == torch.bool or w.is_floating_point() or w.dtype in _INTEGER_DTYPES):
        raise TypeError(f"{name} must be real numbers; got dtype {w.dtype}")
    w = w.detach().to(torch.float64).contiguous()
    if w.ndim != 1:
        raise ValueError(f"{name} must be 1-D with length m={m}; got shape {tuple(w.shape)}")
    if w.shape[0] != m:
        raise ValueError(f"{name} has length {w.shape[0]} but B has m={m} tests (columns)")
    if not bool(torch.isfinite(w).all()):
        raise ValueError(f"{name} must be finite; found NaN or infinity")
    negative = w < 0
    if bool(negative.any()):
        raise ValueError(f"{name} must be non-negative; found {_scalar(w[negative][0])!r}")
    return w


# ---------------------------------------------------------------------------
# small helpers mirroring aces_fast.backends.base


def nonconstant_mask(B: torch.Tensor) -> torch.Tensor:
    """bool (m,): True for tests some candidate passes and some fails."""
    c = B.sum(dim=0, dtype=torch.int64)
    return (c > 0) & (c < B.shape[0])


#: ``row_scores`` splits weights into slices on these grids (relative to a power of
#: two >= max|w|): 2**-26, 2**-52, 2**-78. A slice has at most 26 significant bits
#: above its grid, so sums of up to 2**26 of them are exact in float64.
_SLICE_GRIDS = (2.0**26, 2.0**52, 2.0**78)


def weight_slices(w: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
    """Split float64 ``w`` (..., m) into ``(slices (..., m, 3), scale (..., 1))``.

    ``w = scale * (slices.sum(-1) + rest)`` with ``scale`` a power of two
    >= max|w| (1 when w is all zero) and ``|rest| <= 2**-79``. Every slice is a
    multiple of its grid (see ``_SLICE_GRIDS``) and at most 2**-26 times the
    previous grid, so any 0/1 combination of up to 2**26 slices sums exactly,
    in any order. Each step (scale by a power of two, round to a grid,
    subtract) is exact. O(m).
    """
    top = w.abs().amax(dim=-1, keepdim=True)
    mant, _ = torch.frexp(top)  # top = mant * 2**e, mant in [0.5, 1)
    scale = torch.where(top > 0, top / torch.where(top > 0, mant, 1.0), 1.0)  # 2**e, exactly
    x = w / scale
    slices = []
    for grid in _SLICE_GRIDS:
        part = torch.round(x * grid) / grid
        slices.append(part)
        x = x - part
    return torch.stack(slices, dim=-1), scale


def _combine(S: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """``((S_0 + S_1) + S_2) * scale`` from exact slice sums ``S`` (..., 3)."""
    return ((S[..., 0] + S[..., 1]) + S[..., 2]) * scale


def exact_sum(w: torch.Tensor) -> torch.Tensor:
    """Sum of float64 ``w`` over its last dimension, rounded independently of order.

    The slices of :func:`weight_slices` sum exactly in any order, so the
    result depends only on the multiset of values: not on the length of the
    row (zero padding), the reduction kernel, the device or the thread count
    -- the padded batch path relies on it. Within two roundings (plus
    ``m * 2**-79 * max|w|``) of the exact sum. Shape ``w.shape[:-1]``; O(m).
    """
    if w.shape[-1] == 0:
        return w.new_zeros(w.shape[:-1])
    slices, scale = weight_slices(w)
    return _combine(slices.sum(dim=-2), scale.squeeze(-1))


def normalized(w: torch.Tensor) -> torch.Tensor:
    """``w / sum(w)`` along the last dimension (:func:`exact_sum`), or zeros where
    the sum is 0. Any leading (task) dimensions; no host sync."""
    total = exact_sum(w).unsqueeze(-1)
    return torch.where(total > 0, w / torch.where(total > 0, total, 1.0), torch.zeros_like(w))


def row_scores(B: torch.Tensor, w: torch.Tensor,
               chunk_elements: int = DEFAULT_CHUNK_ELEMENTS) -> torch.Tensor:
    """``s = B @ w`` in float64, rounded independently of summation order.

    ``B`` uint8 (..., n, m), ``w`` float64 (..., m) -> (..., n). One matmul of
    B with the three exact slices of :func:`weight_slices` gives three exact
    sums (0/1 times a slice is exact, and the partial sums are representable
    whatever order BLAS/cuBLAS adds them in); ``s = ((S_0 + S_1) + S_2) * scale``.
    So a task's scores do not depend on padding, batching, threads or the
    matmul kernel -- the batch path relies on it -- and are within two
    roundings (plus ``m * 2**-79 * scale``) of the exact sums. Needs
    m <= 2**26. Chunked over rows: temporaries of at most ``chunk_elements``
    float64 entries. O(n m).
    """
    n, m = B.shape[-2], B.shape[-1]
    out = torch.zeros(B.shape[:-1], dtype=torch.float64, device=B.device)
    if m == 0 or out.numel() == 0:
        return out
    if m > 2**26:
        raise ValueError(f"row_scores supports at most 2**26 tests; got m={m}")
    slices, scale = weight_slices(w.to(torch.float64))
    per_row = max(1, out.numel() // n * m)
    step = max(1, chunk_elements // per_row)
    for a in range(0, n, step):
        b = min(n, a + step)
        S = torch.matmul(B[..., a:b, :].to(torch.float64), slices)  # (..., b - a, 3), exact
        out[..., a:b] = _combine(S, scale)
    return out


def aces_c_weights(L: torch.Tensor, colsum: torch.Tensor, n_rows: torch.Tensor,
                   weighted: bool) -> torch.Tensor:
    """Unnormalized ACES-C weights from the uniform LOO-AUC (before any fallback).

    ``L`` float64 (..., m), ``colsum`` int64 (..., m) passers per test,
    ``n_rows`` float64 tensor broadcastable to ``L`` (candidates per task).
    ``weighted``: ``(L - 1/2) p (1 - p)`` with ``p = colsum / n_rows`` where
    ``L > 1/2`` (``nan`` is not), else 0; filter: 1 where ``L > 1/2``. The
    division is by a tensor in both the per-task and the batch path, so both
    round identically.
    """
    informative = L > 0.5
    if not weighted:
        return informative.to(torch.float64)
    p = colsum.to(torch.float64) / n_rows
    return torch.where(informative, (L - 0.5) * p * (1.0 - p), torch.zeros_like(L))


def snap_ties(s: torch.Tensor, tol: float) -> torch.Tensor:
    """Scores within ``tol`` of a sorted neighbour get their run's smallest value.

    Same rule as :func:`aces_fast.backends.base.snap_ties`. The run start of each
    sorted position is found with a cumulative max instead of boolean indexing,
    so no host synchronization is needed. O(n log n).
    """
    n = s.shape[0]
    if n < 2 or tol <= 0:
        return s
    sv, idx = torch.sort(s, stable=True)
    starts = torch.ones(n, dtype=torch.bool, device=s.device)
    starts[1:] = torch.diff(sv) > tol
    pos = torch.arange(n, device=s.device)
    run_start = torch.cummax(torch.where(starts, pos, torch.zeros_like(pos)), dim=0).values
    out = torch.empty_like(s)
    out[idx] = sv[run_start]
    return out


def descending_order(scores: torch.Tensor) -> torch.Tensor:
    """Indices sorting ``scores`` descending, ties by lower index (int64)."""
    return torch.sort(-scores, stable=True).indices


def top_k_rows(B: torch.Tensor, top_k: Optional[int]) -> torch.Tensor:
    """Ascending indices of the ``top_k`` rows with most passes (stable); all rows if None."""
    n = B.shape[0]
    if top_k is None or top_k >= n:
        return torch.arange(n, device=B.device)
    rs = B.sum(dim=1, dtype=torch.int64)
    keep = torch.sort(-rs, stable=True).indices[:top_k]
    return torch.sort(keep).values


# ---------------------------------------------------------------------------
# LOO-AUC


def loo_auc(B: torch.Tensor, weights: Optional[torch.Tensor], tie_tol: float,
            counts: Optional[torch.Tensor] = None,
            chunk_elements: int = DEFAULT_CHUNK_ELEMENTS) -> torch.Tensor:
    """LOO-AUC of every test, float64 (m,) on ``B.device``; ``nan`` for constant tests.

    Parameters
    ----------
    B : uint8 tensor (n, m) of 0/1.
    weights : float64 tensor (m,) or None
        None means uniform integer weights: scores are int64 row sums and ties
        are exact equality. Float weights tie within ``tie_tol * sum(w)``.
    counts : int64 tensor (n,), optional
        Row multiplicities (0 = absent row).

    Method: rows with equal scores share every comparison, so candidates are
    grouped by their distinct score values ``u`` (one sort; V <= n groups, and
    V <= m + 1 under uniform weights). For a chunk of k tests, one
    ``index_add`` gives the (V, k) passer multiplicities per score group; the
    failers are the rest of each group, and their prefix sums over the sorted
    groups form a (V + 1, k) table. A passer group's shifted score
    ``u - w_j`` (+/- the tolerance) is located among the ``u`` with
    ``searchsorted``; the table entries there count the failers strictly below
    and at-or-below it. Under uniform weights the shift is 1 for every test, so
    the positions are one (V,) vector shared by all tests. The comparisons are
    the NumPy reference's and the counts exact integers (int32 when they cannot
    overflow, else int64), so the values equal the reference bit for bit.
    O(n log n + n m + V m log V) time, O(chunk_elements) extra memory; no
    (n, n) tensor.
    """
    n, m = B.shape
    dev = B.device
    out = torch.full((m,), math.nan, dtype=torch.float64, device=dev)
    if m == 0:
        return out
    c = (torch.ones(n, dtype=torch.int64, device=dev) if counts is None
         else counts.to(device=dev, dtype=torch.int64))
    total = n if counts is None else int(c.sum())
    # every count and every passer x failer product below is at most total**2
    idt = torch.int32 if total * total < 2**31 else torch.int64
    if weights is None:
        s = B.sum(dim=1, dtype=torch.int64)
    else:
        w = weights.to(device=dev, dtype=torch.float64)
        s = B.to(torch.float64) @ w
        tol = tie_tol * float(w.sum())
    u, group = torch.unique(s, sorted=True, return_inverse=True)
    V = u.shape[0]
    c = c.to(idt)
    group_size = torch.zeros(V, dtype=idt, device=dev).index_add_(0, group, c)
    if weights is None:
        lo_shared = torch.searchsorted(u, u - 1, side="left")
        hi_shared = torch.searchsorted(u, u - 1, side="right")
    for a, b in column_chunks(m, n, chunk_elements):
        passers = torch.zeros((V, b - a), dtype=idt, device=dev).index_add_(
            0, group, B[:, a:b].to(idt) * c[:, None])
        prefix = torch.zeros((V + 1, b - a), dtype=idt, device=dev)
        torch.cumsum(group_size[:, None] - passers, dim=0, out=prefix[1:])
        if weights is None:
            below = prefix.index_select(0, lo_shared)
            at_or_below = prefix.index_select(0, hi_shared)
        else:
            q = u[:, None] - w[None, a:b]
            q_hi = q + tol
            q_lo = q.sub_(tol)  # in place: (u - w) - tol, the reference's rounding order
            below = prefix.gather(0, torch.searchsorted(u, q_lo, side="left"))
            at_or_below = prefix.gather(0, torch.searchsorted(u, q_hi, side="right"))
        wins = (passers * below).sum(dim=0, dtype=idt)
        ties = (passers * (at_or_below - below)).sum(dim=0, dtype=idt)
        pairs = passers.sum(dim=0, dtype=torch.int64) * prefix[V].to(torch.int64)
        value = (wins.to(torch.float64) + 0.5 * ties.to(torch.float64)) / pairs.to(torch.float64)
        out[a:b] = torch.where(pairs > 0, value, out[a:b])
    return out


# ---------------------------------------------------------------------------
# logistic surrogate and its analytic gradient


class SurrogateData:
    """What the surrogate needs from ``B`` that does not change with the weights.

    Identical rows are merged first (their multiplicities add up): the
    surrogate is a sum over row pairs, so U distinct rows cost (U/n)^2 of the
    work -- on real data the top-24 candidates have about 6 distinct rows.
    ``Bf`` is the distinct rows in the working dtype (U, m); ``passers = c * B``
    and ``failers = c * (1 - B)`` carry the multiplicities ``c`` (U, m).
    """

    def __init__(self, B: torch.Tensor, counts: Optional[torch.Tensor], dtype: torch.dtype):
        c = (torch.ones(B.shape[0], dtype=torch.int64, device=B.device) if counts is None
             else counts.to(device=B.device, dtype=torch.int64))
        if B.shape[0] > 1 and B.shape[1] > 0:
            B, inverse = torch.unique(B, dim=0, return_inverse=True)
            c = torch.zeros(B.shape[0], dtype=torch.int64, device=B.device).index_add_(
                0, inverse.reshape(-1), c)
        self.Bf = B.to(dtype)
        c = c.to(dtype)
        self.passers = self.Bf * c[:, None]
        self.failers = (1 - self.Bf) * c[:, None]
        # column-major copies: chunks slice rows of these (k, n)
        self.passers_t = self.passers.T.contiguous()
        self.failers_t = self.failers.T.contiguous()
        self.pairs = self.passers.sum(dim=0) * self.failers.sum(dim=0)
        self.valid = self.pairs > 0
        self.valid_f = self.valid.to(dtype)
        self.safe_pairs = torch.where(self.valid, self.pairs, torch.ones_like(self.pairs))
        self.inv_pairs = self.valid_f / self.safe_pairs  # 1/|P_j||F_j|, 0 for empty P_j or F_j
        self._work: dict = {}

    def work(self, k: int) -> Tuple[torch.Tensor, torch.Tensor]:
        """Two reusable (k, n, n) buffers: re-allocating megabytes every Adam step
        costs page faults that dominate small problems on the CPU."""
        if k not in self._work:
            n = self.Bf.shape[0]
            self._work[k] = (self.Bf.new_empty((k, n, n)), self.Bf.new_empty((k, n, n)))
        return self._work[k]


#: ``exp(gamma * w_j)`` stays finite below this exponent (float32 overflows at 88.7)
_EXP_SAFE = {torch.float64: 700.0, torch.float32: 80.0}


def surrogate_core(data: SurrogateData, w: torch.Tensor, gamma: float,
                   chunk_elements: int = DEFAULT_CHUNK_ELEMENTS, max_w: Optional[float] = None
                   ) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(L (m,), J (0-d), dJ/dw (m,))`` in the working dtype; see :func:`surrogate`.

    For a chunk of k tests one (k, n, n) tensor holds
    ``sigma(gamma (s_p - s_f - w_j))`` for every row pair; multiplying by the
    passer/failer multiplicity vectors (batched mat-vecs) restricts it to
    P_j x F_j. The gradient follows SPEC section 3 with
    ``c_i v_i = sum_j c_j (passers_ij sum_f failers_fj sigma'_if
    - failers_ij sum_p passers_pj sigma'_pi)``. O(n^2 m + n m) time per call,
    O(chunk_elements) extra memory.

    SPEC's hint: ``sigma(z) = 1 / (1 + E_pf e_j)`` with ``E = exp(-gamma (s_p - s_f))``
    (n x n, once per call) and ``e_j = exp(gamma w_j)`` (m), which replaces one
    exp per (test, pair) by a multiply. It is used when ``max_w`` (an upper
    bound on the weights, known without reading the device) keeps ``e_j``
    finite; ``E`` itself may overflow to inf (giving sigma = 0, correctly).
    Otherwise ``torch.sigmoid`` is used.
    """
    Bf = data.Bf
    n, m = Bf.shape
    if m == 0:
        return w.new_empty(0), w.new_zeros(()), w.new_empty(0)
    s = Bf @ w
    exp_trick = max_w is not None and gamma * max_w < _EXP_SAFE.get(w.dtype, 0.0)
    if exp_trick:
        E = torch.exp((s[None, :] - s[:, None]).mul_(gamma))
        e = torch.exp(gamma * w)
    else:
        gdiff = (s[:, None] - s[None, :]).mul_(gamma)
        gw = gamma * w
    cv = torch.zeros(n, dtype=w.dtype, device=w.device)
    Ls, Ds = [], []
    # Few, large ops per chunk: on a GPU every op is a kernel launch, and on the
    # CPU small ACES-O problems are dominated by per-op overhead.
    for a, b in column_chunks(m, n * n, chunk_elements):
        sig, dsig = data.work(b - a)
        if exp_trick:
            torch.mul(E[None, :, :], e[a:b, None, None], out=sig).add_(1.0).reciprocal_()
        else:
            torch.sub(gdiff[None, :, :], gw[a:b, None, None], out=sig).sigmoid_()
        torch.addcmul(sig, sig, sig, value=-1.0, out=dsig)  # sigma (1 - sigma)
        pt = data.passers_t[a:b]
        ft = data.failers_t[a:b]
        # batched vector x matrix products (the vector as the left operand is the
        # fast bmm path for small n)
        sig_f = torch.bmm(ft[:, None, :], sig.transpose(1, 2)).squeeze(1)    # sum_f c_f sigma_pf
        dsig_f = torch.bmm(ft[:, None, :], dsig.transpose(1, 2)).squeeze(1)  # sum_f c_f sigma'_pf
        dsig_p = torch.bmm(pt[:, None, :], dsig).squeeze(1)                  # sum_p c_p sigma'_pf
        Ls.append(torch.linalg.vecdot(pt, sig_f) / data.safe_pairs[a:b])
        Ds.append(torch.linalg.vecdot(pt, dsig_f))
        u = (pt * dsig_f).addcmul_(ft, dsig_p, value=-1.0)  # c_i u^j_i, (k, n)
        cv.addmv_(u.T, w[a:b] * data.inv_pairs[a:b])        # += sum_j c_j c_i u^j_i
    Lc = Ls[0] if len(Ls) == 1 else torch.cat(Ls)  # 0 for tests with empty P_j or F_j
    D = Ds[0] if len(Ds) == 1 else torch.cat(Ds)
    excess = (Lc - 0.5).mul_(data.valid_f)
    J = torch.dot(w, excess)
    grad = torch.addcmul(excess, w * data.inv_pairs, D, value=-gamma)
    grad.addmv_(Bf.T, cv, alpha=gamma)
    L = torch.where(data.valid, Lc, torch.full_like(Lc, math.nan))
    return L, J, grad


def surrogate(B: torch.Tensor, weights: torch.Tensor, gamma: float,
              counts: Optional[torch.Tensor] = None, dtype: torch.dtype = torch.float64,
              chunk_elements: int = DEFAULT_CHUNK_ELEMENTS
              ) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Logistic surrogate LOO-AUC, ``J`` and analytic ``dJ/dw`` (SPEC section 3).

    Parameters
    ----------
    B : uint8 tensor (n, m); weights : tensor (m,); counts : int64 tensor (n,) or None.
    dtype : working float dtype (float64, or float32 for speed on GPUs).

    Returns ``(L (m,), J (0-d), grad (m,))`` in ``dtype`` on ``B.device``;
    ``L_j = nan`` where test j has no passer or no failer (such tests add
    nothing to J). Cost O(n^2 m) time, O(chunk_elements + n m) memory.
    """
    data = SurrogateData(B, counts, dtype)
    w = weights.to(device=B.device, dtype=dtype)
    max_w = float(w.max()) if w.numel() else 0.0
    return surrogate_core(data, w, gamma, chunk_elements, max_w)


# ---------------------------------------------------------------------------
# ACES-O


def softmax_masked(logits: torch.Tensor, active: torch.Tensor) -> torch.Tensor:
    """Softmax over ``active`` entries; inactive entries get exactly 0 (exp(-inf))."""
    return torch.softmax(logits.masked_fill(~active, -math.inf), dim=0)


def adam_ascent_step(logits: torch.Tensor, dl: torch.Tensor, m1: torch.Tensor,
                     m2: torch.Tensor, t: int, lr: float, active: torch.Tensor
                     ) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Adam step ``t`` (1-based; PyTorch semantics: beta = (0.9, 0.999), eps 1e-8,
    bias correction) on the loss ``-J`` given ``dl = dJ/dlogits``; inactive
    entries keep their logits. Any shape (per task ``(m,)`` or batched ``(T, m)``),
    elementwise; returns ``(logits, m1, m2)``.
    """
    beta1, beta2, eps = 0.9, 0.999, 1e-8
    loss_grad = torch.where(active, -dl, torch.zeros_like(dl))
    m1 = beta1 * m1 + (1 - beta1) * loss_grad
    m2 = beta2 * m2 + (1 - beta2) * loss_grad * loss_grad
    bc1 = 1 - beta1 ** t
    bc2 = 1 - beta2 ** t
    denom = torch.sqrt(m2) / math.sqrt(bc2) + eps
    return torch.where(active, logits - (lr / bc1) * m1 / denom, logits), m1, m2


def aces_o_fit(B: torch.Tensor, logits0: torch.Tensor, active: torch.Tensor, gamma: float,
               lr: float, steps: int, counts: Optional[torch.Tensor] = None,
               dtype: torch.dtype = torch.float64,
               chunk_elements: int = DEFAULT_CHUNK_ELEMENTS
               ) -> Tuple[torch.Tensor, torch.Tensor]:
    """ACES-O's Adam ascent; ``(weights (m,), objective (steps + 1,))`` in ``dtype``.

    Adam with PyTorch semantics (beta = (0.9, 0.999), eps = 1e-8, bias
    correction) on the loss ``-J(softmax(logits))`` restricted to ``active``
    (bool (m,)) tests; inactive tests keep weight exactly 0. Written out by hand
    with the same operation order as :func:`aces_fast.backends.numpy_ref.aces_o_fit`.
    ``objective[t]`` is J after t updates. The loop never reads a value back to
    the host, so on CUDA the steps queue without synchronizing.
    O(steps * n^2 m).
    """
    m = B.shape[1]
    dev = B.device
    active = active.to(device=dev, dtype=torch.bool)
    objective = torch.zeros(steps + 1, dtype=dtype, device=dev)
    if not bool(active.any()):
        return torch.zeros(m, dtype=dtype, device=dev), objective
    data = SurrogateData(B, counts, dtype)
    logits = logits0.to(device=dev, dtype=dtype).clone()
    m1 = torch.zeros_like(logits)
    m2 = torch.zeros_like(logits)
    for t in range(1, steps + 2):
        w = softmax_masked(logits, active)
        _, J, g = surrogate_core(data, w, gamma, chunk_elements, max_w=1.0)  # w on the simplex
        objective[t - 1] = J
        if t == steps + 1:
            break
        dl = w * (g - torch.dot(w, g))
        logits, m1, m2 = adam_ascent_step(logits, dl, m1, m2, t, lr, active)
    return softmax_masked(logits, active), objective


# ---------------------------------------------------------------------------
# consensus sets: CodeT and B4


def _row_groups(B: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Distinct rows: ``(patterns (U, m), inverse (n,), sizes (U,))`` like consensus.row_groups."""
    if B.shape[1] == 0:
        n = B.shape[0]
        return (B[:1], torch.zeros(n, dtype=torch.int64, device=B.device),
                torch.tensor([n], dtype=torch.int64, device=B.device))
    patterns, inverse, sizes = torch.unique(B, dim=0, return_inverse=True, return_counts=True)
    return patterns, inverse.reshape(-1), sizes


def _nonconstant_columns(B: torch.Tensor) -> torch.Tensor:
    keep = nonconstant_mask(B)
    return B if bool(keep.all()) else B[:, keep]


def _per_distinct_key(keys: torch.Tensor, fn) -> torch.Tensor:
    """``fn`` on the distinct rows of int64 ``keys`` (K, r), gathered back to (K,).

    Evaluating each distinct key once makes sets with equal keys get bit-equal
    scores, whatever code path (vectorized or scalar) an elementwise op takes.
    """
    uniq, inv = torch.unique(keys, dim=0, return_inverse=True)
    return fn(uniq)[inv.reshape(-1)]


def codet_scores(B: torch.Tensor, exponent: float) -> torch.Tensor:
    """CodeT: ``(#non-constant tests passed) * (set size) ** exponent``, float64 (n,)."""
    patterns, inverse, sizes = _row_groups(_nonconstant_columns(B))
    keys = torch.stack([patterns.sum(dim=1, dtype=torch.int64), sizes.to(torch.int64)], dim=1)
    set_scores = _per_distinct_key(
        keys, lambda k: k[:, 0].to(torch.float64) * k[:, 1].to(torch.float64) ** exponent)
    return set_scores[inverse]


def _log_beta(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.lgamma(a) + torch.lgamma(b) - torch.lgamma(a + b)


def b4_scores(B: torch.Tensor, alpha: float, beta0: float) -> torch.Tensor:
    """B4 log-posterior of each candidate's consensus set, float64 (n,).

    Same formula as :func:`aces_fast.consensus.b4_scores`, vectorized over the
    distinct row patterns; block counts are exact int64.
    """
    Bn = _nonconstant_columns(B)
    N, M = Bn.shape
    patterns, inverse, sizes = _row_groups(Bn)
    col = Bn.sum(dim=0, dtype=torch.int64)
    ny = patterns.sum(dim=1, dtype=torch.int64)
    nx = sizes.to(torch.int64)
    in_y = (patterns.to(torch.int64) * col[None, :]).sum(dim=1)
    k1 = in_y - nx * ny  # ones outside x in y-columns: members of x all have a 1 there
    k0 = col.sum() - in_y

    def score(k: torch.Tensor) -> torch.Tensor:
        ny, nx, k1, k0 = (k[:, i].to(torch.float64) for i in range(4))
        n1 = (N - nx) * ny
        n0 = (N - nx) * (M - ny)
        return (_log_beta(ny + alpha, M - ny + 1) + _log_beta(nx + alpha, N - nx + 1)
                + _log_beta(k1 + 1, n1 - k1 + 1) + _log_beta(k0 + 1, n0 - k0 + beta0))

    set_scores = _per_distinct_key(torch.stack([ny, nx, k1, k0], dim=1), score)
    return set_scores[inverse]
