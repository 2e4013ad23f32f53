"""The logistic surrogate of LOO-AUC and its analytic gradient (docs/contract.rst §3),
for a padded batch of tasks: one implementation, run by the public ``surrogate``
kernel (a batch of one) and by every step of ACES-O's Adam loop
(:mod:`.aces_o`).

:class:`Surrogate` works on buffers and views made once, so that an
evaluation dispatches a fixed sequence of ops (21 for one column chunk, 11 per
further chunk), allocates nothing large and never reads the device.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch

from .chunks import DEFAULT_CHUNK_ELEMENTS, column_chunks
from .dedup import distinct_rows_padded
from .fused import compiled_pair_terms, fused_call_ranges, runs_fused
from .pair_kernel import PairSums, runs_kernel

#: ``exp(gamma * w_j)`` stays finite below this exponent (float32 overflows at 88.7)
_EXP_SAFE = {torch.float64: 700.0, torch.float32: 80.0}


def pair_route(fused: bool, U: int, m: int, device: torch.device) -> str:
    """How a :class:`Surrogate` of ``U`` distinct rows and ``m`` tests on ``device``
    computes its pair sums: ``"kernel"`` (CUDA with Triton, switched on by
    ``ACES_FAST_TORCH_TRITON``: :func:`.pair_kernel.runs_kernel`), else
    ``"fused"`` (asked for and usable, :func:`.fused.runs_fused`), else
    ``"chunks"`` (the pair tensors, in a :class:`Workspace`)."""
    if runs_kernel(U, m, device):
        return "kernel"
    return "fused" if runs_fused(fused, U, m, device) else "chunks"


def _fresh(x: torch.Tensor) -> torch.Tensor:
    """A copy of ``x`` in a new row-major tensor (standard strides on every axis)."""
    return x.new_empty(x.shape).copy_(x)


class Workspace:
    """The two pair tensors' storage (``entries`` each), shared by every
    :class:`Surrogate` of a call (one evaluates at a time)."""

    def __init__(self, entries: int, dtype: torch.dtype, device: torch.device):
        self.sig = torch.empty(entries, dtype=dtype, device=device)
        self.dsig = torch.empty(entries, dtype=dtype, device=device)


class _Chunk:
    """Views of one column chunk ``[a, b)`` of a :class:`Surrogate`'s buffers."""

    def __init__(self, s: Surrogate, a: int, b: int, ws: Workspace):
        T, U = s.T, s.U
        k = b - a
        kT = k * T
        self.sig = ws.sig[: k * T * U * U].view(k, T, U, U)
        self.dsig = ws.dsig[: k * T * U * U].view(k, T, U, U)
        sig3, dsig3 = self.sig.view(kT, U, U), self.dsig.view(kT, U, U)
        self.sig_t, self.dsig3, self.dsig_t = sig3.transpose(1, 2), dsig3, dsig3.transpose(1, 2)
        self.x = s.x[a:b].view(k, T, 1, 1)
        self.pt_r = s.pt[a:b].view(kT, 1, U)
        self.ft_r = s.ft[a:b].view(kT, 1, U)
        self.ptl_r = s.ptl[a:b].view(kT, 1, U)
        self.sig_f_r = s.sig_f[a:b].view(kT, 1, U)
        self.sig_f_c = s.sig_f[a:b].view(kT, U, 1)
        self.dsig_f_r = s.dsig_f[a:b].view(kT, 1, U)
        self.dsig_f_c = s.dsig_f[a:b].view(kT, U, 1)
        self.dsig_p_r = s.dsig_p[a:b].view(kT, 1, U)
        self.neg_half = s.neg_half[a:b].view(kT, 1, 1)
        self.excess = s.excess[a:b].view(kT, 1, 1)
        self.D = s.D[a:b].view(kT, 1, 1)
        self.pt3, self.ft3 = s.pt[a:b], s.ft[a:b]
        self.dsig_f3, self.dsig_p3 = s.dsig_f[a:b], s.dsig_p[a:b]
        self.u = s.u[: k * T * U].view(k, T, U)
        self.u_t = self.u.permute(1, 2, 0)  # (T, U, k)
        self.wip_t = s.wip[a:b].t().unsqueeze(2)  # (T, k, 1)


class Surrogate:
    """J and ``dJ/dw`` of T tasks at the weights ``w`` (T, m), the gradient written
    into ``g`` (T, m); ``w`` may change between evaluations (the Adam loop's).

    ``Bf`` (T, U, m) distinct rows and ``counts`` (T, U) multiplicities in the
    working dtype (count 0: padding). Per-(test, task) tensors are test-major
    (m, T, ...) so that a column chunk of ``chunk_tests`` tests is one
    contiguous block; a chunk of k tests holds the (k, T, U, U) pair tensors
    ``sigma(gamma (s_p - s_f - w_j))`` and ``sigma'`` in ``workspace``
    (at least ``min(m, chunk_tests) T U^2`` entries each), reduced by batched
    mat-vecs over the k T (test, task) pairs: multiplying by the passer and
    failer multiplicity vectors restricts a pair tensor to ``P_j x F_j``.
    The gradient follows docs/contract.rst §3 with ``c_i u^j_i = c^P_ij
    sum_f c_f sigma'_if - c^F_ij sum_p c_p sigma'_pi``.

    ``max_w``, an upper bound on the weights known without reading the device
    (1 on the simplex), enables the hint of docs/contract.rst §3 while
    ``exp(gamma max_w)`` is finite: ``sigma = 1 / (1 + E_pf e_j)`` with ``E =
    exp(gamma (s_f - s_p))`` (U x U per task, once per evaluation; it may
    overflow to inf, giving sigma = 0 correctly) and ``e_j = exp(gamma w_j)``,
    one multiply per (test, pair) instead of an exp. Otherwise (``None``)
    ``torch.sigmoid``; the two agree to a few ulps. Padding rows and columns
    add exactly 0. O(T U^2 m) time per evaluation, O(T U m) memory besides
    the workspace.

    With ``ACES_FAST_TORCH_TRITON=1``, on CUDA with Triton, the pair sums are
    one kernel launch instead (:mod:`.pair_kernel`), whatever ``fused``.
    Otherwise with ``fused`` they are one compiled computation
    (:func:`.fused.pair_terms`). Either way there are no chunks and no pair
    tensor (``workspace`` unused), and the values agree with the eager path's
    up to summation order; :func:`pair_route` says which runs. Where neither
    applies (:func:`.fused.runs_fused`: fewer than two rows or tests, no
    compiler), the chunks run, in ``workspace``.
    """

    def __init__(
        self,
        Bf: torch.Tensor,
        counts: torch.Tensor,
        gamma: float,
        w: torch.Tensor,
        g: torch.Tensor,
        chunk_tests: int,
        workspace: Workspace,
        max_w: float | None = 1.0,
        fused: bool = False,
    ):
        T, U, m = Bf.shape
        self.T, self.U, self.gamma = T, U, gamma
        dt = Bf.dtype
        self.exp_trick = max_w is not None and gamma * max_w < _EXP_SAFE.get(dt, 0.0)
        passers = Bf * counts[:, :, None]
        failers = (1 - Bf) * counts[:, :, None]
        pairs = passers.sum(dim=1) * failers.sum(dim=1)  # (T, m), exact integers
        self.valid = pairs > 0
        safe = torch.where(self.valid, pairs, torch.ones_like(pairs)).t()
        # Fresh (row-major) tensors, not .contiguous() ones, whose size-1 axes (T = 1)
        # may keep any stride: the fused mode's compiled code is specialized on
        # strides, and would compile again for each layout.
        self.pt = _fresh(passers.permute(2, 0, 1))  # (m, T, U)
        self.ft = _fresh(failers.permute(2, 0, 1))
        # L_j = sum_p ptl_p sum_f c_f sigma_pf; excess = L - 1/2 on tests with pairs
        self.ptl = _fresh(self.pt / safe[:, :, None])
        self.neg_half = _fresh(-0.5 * self.valid.t().to(dt))
        self.inv_gamma = gamma * self.valid.t().to(dt) / safe  # gamma / |P_j||F_j|, 0 without
        self.gB = gamma * Bf  # s = gamma B w
        self.Bt = Bf.transpose(1, 2).contiguous()  # (T, m, U)
        self.s = Bf.new_empty((T, U, 1))
        self.s_row = self.s.view(T, 1, U)
        self.P = Bf.new_empty((T, U, U))  # exp(gamma (s_f - s_p)), or gamma (s_p - s_f)
        self.P4 = self.P.view(1, T, U, U)
        self.x = Bf.new_empty((m, T))  # exp(gamma w), or gamma w (test-major)
        self.excess = Bf.new_empty((m, T))
        self.wip = Bf.new_empty((m, T))  # gamma w_j / |P_j||F_j|
        self.cv = Bf.new_empty((T, U, 1))
        self.J = Bf.new_empty((T, 1, 1))
        self.w_t, self.w_col, self.w_row = w.t(), w.view(T, m, 1), w.view(T, 1, m)
        self.grad_t, self.grad3 = g.t(), g.view(T, m, 1)
        self.excess_c = self.excess.t().unsqueeze(2)  # (T, m, 1)
        route = pair_route(fused, U, m, Bf.device)
        self.kernel = PairSums(T, U, m, dt, Bf.device) if route == "kernel" else None
        self.fused = compiled_pair_terms(self.exp_trick) if route == "fused" else None
        self.chunks: list[_Chunk] = []
        if self.kernel is not None:
            self.cv_flat = self.cv.view(T, U)
            self.pair_inputs = (self.P, self.x, self.ft, self.pt, self.ptl, self.neg_half, self.wip)
            return
        if self.fused is not None:
            # no pair tensor: one call per range of tests (fused_call_ranges), on
            # tensors of their own (slices are views, which compile apart); x and
            # wip change at every evaluation, so theirs are copied in
            self.fused_calls: list[tuple[int, int, tuple[torch.Tensor, ...]]] = []
            ranges = fused_call_ranges(T * U * U, m, Bf.device)
            for a, b in ranges:
                own = len(ranges) > 1
                args = tuple(
                    _fresh(t[a:b]) if own else t
                    for t in (self.x, self.ft, self.pt, self.ptl, self.neg_half, self.wip)
                )
                self.fused_calls.append((a, b, args))
            return
        self.sig_f = Bf.new_empty((m, T, U))
        self.dsig_f = Bf.new_empty((m, T, U))
        self.dsig_p = Bf.new_empty((m, T, U))
        self.D = Bf.new_empty((m, T))
        self.u = Bf.new_empty(min(m, chunk_tests) * T * U)
        self.chunks = [_Chunk(self, a, b, workspace) for a, b in column_chunks(m, 1, chunk_tests)]

    def evaluate(self) -> torch.Tensor:
        """``J`` (T, 1, 1) at ``w`` (a buffer, overwritten by the next evaluation);
        ``g`` gets ``dJ/dw``."""
        gamma = self.gamma
        torch.bmm(self.gB, self.w_col, out=self.s)
        if self.exp_trick:
            torch.sub(self.s_row, self.s, out=self.P).exp_()
            torch.mul(self.w_t, gamma, out=self.x).exp_()
        else:
            torch.sub(self.s, self.s_row, out=self.P)
            torch.mul(self.w_t, gamma, out=self.x)
        torch.mul(self.w_t, self.inv_gamma, out=self.wip)
        if self.kernel is not None:
            self.kernel.run(
                self.pair_inputs, self.excess, self.grad_t, self.cv_flat, self.exp_trick
            )
        elif self.fused is not None:
            self._fused_sums(self.fused)
        else:
            self._chunk_sums()
        self.grad3.baddbmm_(self.Bt, self.cv)
        return torch.bmm(self.w_row, self.excess_c, out=self.J)

    def _fused_sums(self, pair_terms: Callable[..., Any]) -> None:
        """excess, the gradient's first term and cv by the compiled pair sums
        (``pair_terms``, :func:`.fused.compiled_pair_terms`), a range of tests per
        call."""
        for i, (a, b, args) in enumerate(self.fused_calls):
            x, ft, pt, ptl, neg_half, wip = args
            if x is not self.x:
                x.copy_(self.x[a:b])
                wip.copy_(self.wip[a:b])
            excess, grad0, cv = pair_terms(self.P, x, ft, pt, ptl, neg_half, wip)
            self.excess[a:b].copy_(excess)
            self.grad_t[a:b].copy_(grad0)
            if i == 0:
                self.cv.view(cv.shape).copy_(cv)
            else:
                self.cv.view(cv.shape).add_(cv)

    def _chunk_sums(self) -> None:
        """The same from the pair tensors, a chunk of tests at a time."""
        for i, c in enumerate(self.chunks):
            if self.exp_trick:
                torch.mul(self.P4, c.x, out=c.sig).add_(1.0).reciprocal_()
            else:
                torch.sub(self.P4, c.x, out=c.sig).sigmoid_()
            torch.addcmul(c.sig, c.sig, c.sig, value=-1.0, out=c.dsig)  # sigma (1 - sigma)
            torch.bmm(c.ft_r, c.sig_t, out=c.sig_f_r)  # sum_f c_f sigma_pf
            torch.bmm(c.ft_r, c.dsig_t, out=c.dsig_f_r)  # sum_f c_f sigma'_pf
            torch.bmm(c.pt_r, c.dsig3, out=c.dsig_p_r)  # sum_p c_p sigma'_pf
            torch.baddbmm(c.neg_half, c.ptl_r, c.sig_f_c, out=c.excess)  # L_j - 1/2
            torch.bmm(c.pt_r, c.dsig_f_c, out=c.D)
            # c_i u^j_i = c^P_ij sum_f c_f sigma'_if - c^F_ij sum_p c_p sigma'_pi
            torch.mul(c.pt3, c.dsig_f3, out=c.u).addcmul_(c.ft3, c.dsig_p3, value=-1.0)
            if i == 0:  # cv = sum_j gamma w_j / |P_j||F_j| c u^j
                torch.bmm(c.u_t, c.wip_t, out=self.cv)
            else:
                self.cv.baddbmm_(c.u_t, c.wip_t)
        torch.addcmul(self.excess, self.wip, self.D, value=-1.0, out=self.grad_t)

    def values(self) -> torch.Tensor:
        """The surrogate LOO-AUC ``L`` (T, m) of the last evaluation: ``nan`` for a
        test without a passer or a failer."""
        return torch.where(self.valid, self.excess.t() + 0.5, math.nan)


def surrogate(
    B: torch.Tensor,
    weights: torch.Tensor,
    gamma: float,
    counts: torch.Tensor | None = None,
    dtype: torch.dtype = torch.float64,
    chunk_elements: int = DEFAULT_CHUNK_ELEMENTS,
    fused: bool = False,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Logistic surrogate LOO-AUC, ``J`` and analytic ``dJ/dw`` (docs/contract.rst §3).

    Parameters
    ----------
    B : uint8 tensor (n, m)
    weights : tensor (m,)
    gamma : float
    counts : int64 tensor (n,) or None
        Row multiplicities (default 1).
    dtype : torch.dtype
        Working float dtype (float64, or float32 for speed on GPUs).
    chunk_elements : int
        Cap on the entries of each of the two per-chunk pair tensors.
    fused : bool
        Compute the pair sums in one compiled computation (:mod:`.fused`), with
        no pair tensor (``chunk_elements`` then unused).

    Returns
    -------
    L : tensor (m,), J : 0-d tensor, grad : tensor (m,)
        In ``dtype`` on ``B.device``; ``L_j = nan`` where test j has no passer or
        no failer (such tests add nothing to J).

    Identical rows are merged first (:func:`.dedup.distinct_rows_padded`, the one
    host read: the distinct-row count U sizes the pair tensors), then a batch of
    one :class:`Surrogate` evaluates: on real data the top-24 candidates have
    about 6 distinct rows, and the pairs cost (U / n)^2 of the work. The exp
    trick needs ``max(w)`` on the host: on the CPU it is read from host memory
    (no synchronization); on a device the weights are not read and
    ``torch.sigmoid`` is used (as fast there: both are memory-bound passes over
    the pair tensor). O(n m + U^2 m) time, O(chunk_elements + n m) memory.
    """
    n, m = B.shape
    dev = B.device
    w = weights.to(device=dev, dtype=dtype).reshape(1, m)
    if m == 0:
        return w.new_empty(0), w.new_zeros(()), w.new_empty(0)
    if counts is None:
        mult, valid = None, torch.ones((1, n), dtype=torch.bool, device=dev)
    else:
        mult = counts.to(device=dev, dtype=torch.int64).reshape(1, n)
        valid = mult > 0
    Bu, c, _ = distinct_rows_padded(B.reshape(1, n, m), valid, dtype, mult)
    U = Bu.shape[1]
    chunk_tests = max(1, min(m, chunk_elements // (U * U)))
    entries = chunk_tests * U * U if pair_route(fused, U, m, dev) == "chunks" else 0
    max_w = None
    if dev.type == "cpu":
        max_w = float(w.detach().numpy().max())
    g = torch.empty_like(w)
    s = Surrogate(Bu, c, gamma, w, g, chunk_tests, Workspace(entries, dtype, dev), max_w, fused)
    J = s.evaluate()
    return s.values()[0], J.reshape(()), g[0]
