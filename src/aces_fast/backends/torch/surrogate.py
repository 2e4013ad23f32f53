"""The logistic surrogate of LOO-AUC and its analytic gradient, per task (the
``surrogate`` kernel; ACES-O's Adam loop runs its own buffered copy with a task
axis, :class:`.aces_o._Surrogate`)."""

from __future__ import annotations

import math

import torch

from .chunks import DEFAULT_CHUNK_ELEMENTS, column_chunks


class SurrogateData:
    """What the surrogate needs from ``B`` that does not change with the weights.

    Identical rows are merged first (their multiplicities add up): the
    surrogate is a sum over row pairs, so U distinct rows cost (U/n)^2 of the
    work -- on real data the top-24 candidates have about 6 distinct rows.
    ``Bf`` is the distinct rows in the working dtype (U, m); ``passers = c * B``
    and ``failers = c * (1 - B)`` carry the multiplicities ``c`` (U, m).
    """

    def __init__(self, B: torch.Tensor, counts: torch.Tensor | None, dtype: torch.dtype):
        c = (
            torch.ones(B.shape[0], dtype=torch.int64, device=B.device)
            if counts is None
            else counts.to(device=B.device, dtype=torch.int64)
        )
        if B.shape[0] > 1 and B.shape[1] > 0:
            B, inverse = torch.unique(B, dim=0, return_inverse=True)
            c = torch.zeros(B.shape[0], dtype=torch.int64, device=B.device).index_add_(
                0, inverse.reshape(-1), c
            )
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

    def work(self, k: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Two reusable (k, n, n) buffers: re-allocating megabytes every Adam step
        costs page faults that dominate small problems on the CPU."""
        if k not in self._work:
            n = self.Bf.shape[0]
            self._work[k] = (self.Bf.new_empty((k, n, n)), self.Bf.new_empty((k, n, n)))
        return self._work[k]


#: ``exp(gamma * w_j)`` stays finite below this exponent (float32 overflows at 88.7)
_EXP_SAFE = {torch.float64: 700.0, torch.float32: 80.0}


def surrogate_core(
    data: SurrogateData,
    w: torch.Tensor,
    gamma: float,
    chunk_elements: int = DEFAULT_CHUNK_ELEMENTS,
    max_w: float | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(L (m,), J (0-d), dJ/dw (m,))`` in the working dtype; see :func:`surrogate`.

    For a chunk of k tests one (k, n, n) tensor holds
    ``sigma(gamma (s_p - s_f - w_j))`` for every row pair; multiplying by the
    passer/failer multiplicity vectors (batched mat-vecs) restricts it to
    P_j x F_j. The gradient follows docs/contract.rst §3 with
    ``c_i v_i = sum_j c_j (passers_ij sum_f failers_fj sigma'_if
    - failers_ij sum_p passers_pj sigma'_pi)``. O(n^2 m + n m) time per call,
    O(chunk_elements) extra memory.

    the hint of docs/contract.rst §3: ``sigma(z) = 1 / (1 + E_pf e_j)`` with ``E = exp(-gamma (s_p - s_f))``
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
        sig_f = torch.bmm(ft[:, None, :], sig.transpose(1, 2)).squeeze(1)  # sum_f c_f sigma_pf
        dsig_f = torch.bmm(ft[:, None, :], dsig.transpose(1, 2)).squeeze(1)  # sum_f c_f sigma'_pf
        dsig_p = torch.bmm(pt[:, None, :], dsig).squeeze(1)  # sum_p c_p sigma'_pf
        Ls.append(torch.linalg.vecdot(pt, sig_f) / data.safe_pairs[a:b])
        Ds.append(torch.linalg.vecdot(pt, dsig_f))
        u = (pt * dsig_f).addcmul_(ft, dsig_p, value=-1.0)  # c_i u^j_i, (k, n)
        cv.addmv_(u.T, w[a:b] * data.inv_pairs[a:b])  # += sum_j c_j c_i u^j_i
    Lc = Ls[0] if len(Ls) == 1 else torch.cat(Ls)  # 0 for tests with empty P_j or F_j
    D = Ds[0] if len(Ds) == 1 else torch.cat(Ds)
    excess = (Lc - 0.5).mul_(data.valid_f)
    J = torch.dot(w, excess)
    grad = torch.addcmul(excess, w * data.inv_pairs, D, value=-gamma)
    grad.addmv_(Bf.T, cv, alpha=gamma)
    L = torch.where(data.valid, Lc, torch.full_like(Lc, math.nan))
    return L, J, grad


def surrogate(
    B: torch.Tensor,
    weights: torch.Tensor,
    gamma: float,
    counts: torch.Tensor | None = None,
    dtype: torch.dtype = torch.float64,
    chunk_elements: int = DEFAULT_CHUNK_ELEMENTS,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Logistic surrogate LOO-AUC, ``J`` and analytic ``dJ/dw`` (docs/contract.rst §3).

    Parameters
    ----------
    B : uint8 tensor (n, m); weights : tensor (m,); counts : int64 tensor (n,) or None.
    dtype : working float dtype (float64, or float32 for speed on GPUs).

    Returns ``(L (m,), J (0-d), grad (m,))`` in ``dtype`` on ``B.device``;
    ``L_j = nan`` where test j has no passer or no failer (such tests add
    nothing to J). Cost O(n^2 m) time, O(chunk_elements + n m) memory.

    The exp trick of :func:`surrogate_core` needs ``max(w)`` on the host. On
    the CPU it is read from host memory (no synchronization); on a device the
    weights are not read and ``torch.sigmoid`` is used (as fast there: both
    are memory-bound passes over the (k, n, n) pair tensor). The two agree to
    a few ulps.
    """
    data = SurrogateData(B, counts, dtype)
    w = weights.to(device=B.device, dtype=dtype)
    max_w = None
    if w.device.type == "cpu":
        max_w = float(w.detach().numpy().max()) if w.numel() else 0.0
    return surrogate_core(data, w, gamma, chunk_elements, max_w)
