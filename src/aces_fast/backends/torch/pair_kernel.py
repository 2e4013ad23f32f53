"""The surrogate's pair sums as one Triton kernel per evaluation, for CUDA
tensors: an opt-in route of the torch backend (``ACES_FAST_TORCH_TRITON=1``;
docs/backends.rst, "torch: the Triton kernels").

Why: an evaluation of the surrogate (docs/contract.rst §3.3) costs O(T U^2 m)
for T tasks of U distinct rows and m tests. The eager path
(:class:`.surrogate.Surrogate`) materializes (k, T, U, U) pair tensors and
reduces them with batched mat-vecs, about eight passes over memory per pair;
the compiled path (:mod:`.fused`) needs ``torch.compile`` and still spreads
the three reductions over several generated kernels. On an H200 (torch 2.11,
benchmarks/results/2026-11-30-h200.txt) ACES-O ``top_k=None`` at 2 000 x 1 000
took 7.65 s eager and 1.59 s compiled (float64), and a batch of 200 ACES-O
tasks of 200 x 500 ran 0.42x (eager) and 0.87x (compiled) the 16-core CPU.

Here one program owns ``TESTS`` tests (or one) of one task and walks its
U x U pair table in (``ROWS``, ``COLS``) tiles: the sigmoid is computed in
registers and reduced at once along both axes (row sums over failers, column
sums over passers), so no pair value ever reaches memory. Column sums are
carried across row tiles in a (m, T, U) buffer that only the owning program
touches, and a last loop turns them into the gradient's per-row terms: no
atomics, so the same inputs give the same bits on every run. The values equal
the eager path's up to summation order.

Opt-in until measured on a GPU: its arithmetic was checked against the eager
path under Triton's CPU interpreter (``tools/triton_check.py``), its speed not
yet (``tools/gpu_check.sh`` runs both when a GPU is lent). Triton is imported
on first use only; without it the switch is ignored and CUDA tensors take the
eager path.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import torch

from ... import _env
from ..._env import flag

#: "1" (or another on word, :func:`aces_fast._env.flag`) sends CUDA tensors' pair
#: sums to the kernel where Triton is importable; unset or an off word, the other
#: routes. Read at every surrogate.
TRITON_ENV_VAR = _env.TORCH_TRITON

#: A tile of one program: ``TESTS`` tests x ``ROWS`` passer rows x ``COLS`` failer
#: columns of one task (fixed, so that a task's sums are grouped the same way
#: whatever the batch's padding)
ROWS = 32
COLS = 32
#: tests per program when the grid has programs to spare, else one. With 4, a
#: float64 tile is 4 096 values: 8 warps keep each thread's share (16) in
#: registers; with one, 4 warps. Untuned: no GPU has run the kernel yet.
TESTS = 4
#: programs from which ``TESTS`` tests share one (the pair table then read once
#: for them): enough to fill a GPU's multiprocessors several times over
_SHARED_TESTS_FROM = 2048

_lock = threading.Lock()
_kernels: dict[str, Any] = {}


def triton_available() -> bool:
    """Whether Triton imports (once per process; ``False`` without it)."""
    with _lock:
        if "ok" not in _kernels:
            try:
                import triton
                import triton.language  # noqa: F401

                _kernels["ok"] = True
            except Exception:  # no Triton, or one that does not load here
                _kernels["ok"] = False
        return bool(_kernels["ok"])


def env_kernel() -> bool:
    """Whether ``ACES_FAST_TORCH_TRITON`` asks for the kernel (read now; a value that
    is no switch word raises ``ValueError``)."""
    return flag(TRITON_ENV_VAR, False)


def runs_kernel(U: int, m: int, device: torch.device) -> bool:
    """Whether a surrogate of ``U`` distinct rows and ``m`` tests on ``device`` uses
    the kernel: CUDA, ``U, m >= 1``, :func:`env_kernel`, Triton importable."""
    if device.type != "cuda" or min(U, m) < 1 or not env_kernel():
        return False
    return triton_available()


def _build() -> Any:
    """The ``triton.jit`` kernel, defined on first use (Triton imported lazily)."""
    import triton
    import triton.language as tl

    @triton.jit  # type: ignore[misc]
    def pair_sums(
        P_ptr,
        x_ptr,
        ft_ptr,
        pt_ptr,
        ptl_ptr,
        nh_ptr,
        wip_ptr,
        excess_ptr,
        grad_ptr,
        grad_s0,
        grad_s1,
        uw_ptr,
        col_ptr,
        T,
        U,
        m,
        EXP_TRICK: tl.constexpr,
        TESTS: tl.constexpr,
        ROWS: tl.constexpr,
        COLS: tl.constexpr,
    ):
        t = tl.program_id(1)
        j = tl.program_id(0) * TESTS + tl.arange(0, TESTS)
        jm = j < m
        jt = j * T + t  # (TESTS,): index into (m, T)
        base = jt.to(tl.int64) * U  # offsets into (m, T, U)
        pbase = t.to(tl.int64) * U * U  # the task's U x U table
        x = tl.load(x_ptr + jt, mask=jm, other=0.0)
        x3 = x[:, None, None]
        ex = tl.zeros((TESTS,), dtype=x.dtype)  # sum_p ptl_p sum_f c_f sigma_pf
        dd = tl.zeros((TESTS,), dtype=x.dtype)  # D_j = sum_p c_p sum_f c_f sigma'_pf
        for p0 in range(0, U, ROWS):
            p = p0 + tl.arange(0, ROWS)
            pm = p < U
            m_jp = jm[:, None] & pm[None, :]
            o_jp = base[:, None] + p[None, :]
            pt = tl.load(pt_ptr + o_jp, mask=m_jp, other=0.0)  # (TESTS, ROWS)
            ptl = tl.load(ptl_ptr + o_jp, mask=m_jp, other=0.0)
            rs = tl.zeros((TESTS, ROWS), dtype=x.dtype)  # sum_f c_f sigma_pf
            rd = tl.zeros((TESTS, ROWS), dtype=x.dtype)  # sum_f c_f sigma'_pf
            for f0 in range(0, U, COLS):
                f = f0 + tl.arange(0, COLS)
                fm = f < U
                m_jf = jm[:, None] & fm[None, :]
                o_jf = base[:, None] + f[None, :]
                ft = tl.load(ft_ptr + o_jf, mask=m_jf, other=0.0)  # (TESTS, COLS)
                Pt = tl.load(
                    P_ptr + pbase + p[:, None].to(tl.int64) * U + f[None, :],
                    mask=pm[:, None] & fm[None, :],
                    other=0.0,
                )
                if EXP_TRICK:  # sigma = 1 / (1 + exp(s_f - s_p) exp(gamma w_j))
                    sig = 1.0 / (1.0 + Pt[None, :, :] * x3)
                else:  # sigma(gamma (s_p - s_f) - gamma w_j)
                    sig = 1.0 / (1.0 + tl.exp(x3 - Pt[None, :, :]))
                dsig = sig - sig * sig
                ft3 = ft[:, None, :]
                rs += tl.sum(sig * ft3, axis=2)
                rd += tl.sum(dsig * ft3, axis=2)
                cp = tl.sum(dsig * pt[:, :, None], axis=1)  # (TESTS, COLS): sum_p c_p sigma'_pf
                # the buffer holds the earlier row tiles' sums; this program alone
                # reads and writes these entries, in this order (the barrier)
                prev = tl.load(col_ptr + o_jf, mask=m_jf & (p0 > 0), other=0.0)
                tl.store(col_ptr + o_jf, prev + cp, mask=m_jf)
                tl.debug_barrier()
            ex += tl.sum(ptl * rs, axis=1)
            dd += tl.sum(pt * rd, axis=1)
            tl.store(uw_ptr + o_jp, pt * rd, mask=m_jp)  # c^P sum_f c_f sigma'
        tl.debug_barrier()
        excess = ex + tl.load(nh_ptr + jt, mask=jm, other=0.0)
        wip = tl.load(wip_ptr + jt, mask=jm, other=0.0)
        tl.store(excess_ptr + jt, excess, mask=jm)
        tl.store(grad_ptr + j * grad_s0 + t * grad_s1, excess - wip * dd, mask=jm)
        for i0 in range(0, U, ROWS):
            i = i0 + tl.arange(0, ROWS)
            m_ji = jm[:, None] & (i < U)[None, :]
            o_ji = base[:, None] + i[None, :]
            u1 = tl.load(uw_ptr + o_ji, mask=m_ji, other=0.0)
            col = tl.load(col_ptr + o_ji, mask=m_ji, other=0.0)
            ft = tl.load(ft_ptr + o_ji, mask=m_ji, other=0.0)
            # wip_j c_i u^j_i, c_i u^j_i = c^P sum_f c_f sigma' - c^F sum_p c_p sigma'
            tl.store(uw_ptr + o_ji, wip[:, None] * (u1 - ft * col), mask=m_ji)

    return pair_sums


def built(name: str, build: Any) -> Any:
    """``build()``'s result, made once per process under ``name``: the Triton
    kernels of this module and :mod:`.count_kernels` are defined on first use
    (Triton imported lazily), each compiled on its first launch."""
    with _lock:
        fn = _kernels.get(name)
        if fn is None:
            fn = _kernels[name] = build()
        return fn


def kernel() -> Any:
    """The pair-sums kernel (:func:`built`)."""
    return built("pair_sums", _build)


def tests_per_program(T: int, m: int) -> int:
    """Tests one program takes: ``TESTS`` when the grid would still hold
    ``_SHARED_TESTS_FROM`` programs, else 1 (more, smaller programs fill the GPU)."""
    return TESTS if T * -(-m // TESTS) >= _SHARED_TESTS_FROM else 1


def pair_config(tests: int, exp_trick: bool) -> dict[str, Any]:
    """The pair kernel's compile-time parameters for ``tests`` tests per program
    (:func:`tests_per_program`): what :class:`PairSums` launches, and what
    tools/triton_aot.py compiles. On sm_90 (Triton 3.6) these take 64 to 232
    registers a thread and spill none."""
    return {
        "EXP_TRICK": bool(exp_trick),
        "TESTS": tests,
        "ROWS": ROWS,
        "COLS": COLS,
        "num_warps": 8 if tests > 1 else 4,
    }


class PairSums:
    """One evaluation's pair sums of T tasks by the kernel, into buffers made once
    (what a CUDA graph replays): :meth:`run` takes the tensor arguments of
    :func:`.fused.pair_terms` (``P`` (T, U, U), ``x``, ``neg_half``, ``wip``
    (m, T), ``ft``, ``pt``, ``ptl`` (m, T, U), all contiguous) and writes
    ``excess`` (m, T), ``grad`` (m, T, any strides) and ``cv`` (T, U).

    One kernel launch plus one reduction over tests (``cv``); O(T U^2 m) time,
    O(T U m) memory (two buffers), nothing read back to the host.

    ``tests`` and ``tile`` (``ROWS``, ``COLS``, ``num_warps``) replace
    :func:`tests_per_program`'s and :func:`pair_config`'s choices, for the
    tools that check and time other tilings (tools/triton_check.py,
    tools/triton_sweep.py); the sums then group in another order (the same
    values to rounding).
    """

    def __init__(
        self,
        T: int,
        U: int,
        m: int,
        dtype: torch.dtype,
        device: torch.device,
        *,
        tests: int | None = None,
        tile: dict[str, int] | None = None,
    ):
        self.T, self.U, self.m = T, U, m
        self.uw = torch.empty((m, T, U), dtype=dtype, device=device)
        self.col = torch.empty((m, T, U), dtype=dtype, device=device)
        self.tests = tests_per_program(T, m) if tests is None else tests
        self.grid = (-(-m // self.tests), T)
        self.tile = dict(tile or {})

    def run(
        self,
        inputs: Sequence[torch.Tensor],
        excess: torch.Tensor,
        grad: torch.Tensor,
        cv: torch.Tensor,
        exp_trick: bool,
    ) -> None:
        """The sums of ``inputs`` (:func:`.fused.pair_terms`'s seven tensors, in its
        order) into ``excess``, ``grad`` and ``cv``."""
        launch(
            "pair", kernel(), self.grid,
            *inputs, excess, grad, grad.stride(0), grad.stride(1), self.uw, self.col,
            self.T, self.U, self.m, **{**pair_config(self.tests, exp_trick), **self.tile},
        )  # fmt: skip
        torch.sum(self.uw, dim=0, out=cv)


def launch(what: str, fn: Any, grid: tuple[int, ...], *args: Any, **kwargs: Any) -> None:
    """``fn[grid](*args, **kwargs)``: a Triton kernel's launch (compiled on its first
    one), a failure of Triton's own (no compiler, too old a GPU, a Triton bug)
    raised as a ``RuntimeError`` that names the ``what`` kernel and the switch
    that turned it on, its error chained; any other error (a CUDA error, out of
    memory) as it is."""
    try:
        fn[grid](*args, **kwargs)
    except Exception as exc:
        if not type(exc).__module__.startswith("triton"):
            raise
        text = str(exc).strip()
        raise RuntimeError(
            f"the torch backend's Triton {what} kernel failed ({type(exc).__name__}: "
            f"{text.splitlines()[0] if text else ''}); unset {TRITON_ENV_VAR} to use the "
            "default path"
        ) from exc
