"""ACES-C's two passes over a batch as Triton kernels, for CUDA tensors: the
uniform LOO-AUC (:func:`.loo_auc.loo_auc_uniform`) and the exact row scores
(:func:`.scores.row_scores`). Opt-in with the pair kernel's switch
(``ACES_FAST_TORCH_TRITON=1``, :mod:`.pair_kernel`; docs/backends.rst, "torch:
the Triton kernels").

Why: on an H200 a stacked batch of 2 000 ACES-C tasks of 200 x 500 took
8.7 ms on the device against 4.9 ms for cpp on 16 cores
(benchmarks/results/2026-11-30-h200.txt): its kernels make about a dozen
passes over float copies of the (T, n, m) stack (the level tables'
``index_add``, their products, a float64 copy for the scores' matmul), where
the uint8 stack itself is 200 MB, 0.04 ms of the card's bandwidth. Each kernel
here reads the stack once, as bytes:

* :func:`loo_auc_uniform` -- one program per (task, block of tests) holds the
  task's rows in score order as a (rows, tests) tile, and reads every level's
  passers off its column prefix sums (two gathers), in int32: the same
  integers as the torch path, then the same float64 expression, so **the same
  bits** as :func:`.loo_auc.loo_auc_uniform`. Tasks of at most
  :data:`MAX_ROWS` rows; longer ones take the torch path.
* :func:`row_scores` -- one program per (task, block of rows) sums the three
  exact weight slices of :func:`.scores.weight_slices` over the tests: exact
  sums in any order, so **the same bits** as :func:`.scores.row_scores`.

Opt-in until measured on a GPU (``tools/gpu_check.sh``): the arithmetic was
checked bit for bit against the torch paths under Triton's CPU interpreter
(``tools/triton_check.py``), and every launch configuration compiles for sm_90
without spilling registers (``tools/triton_aot.py``, Triton 3.6 as on the GPU
machine).
"""

from __future__ import annotations

from typing import Any

import torch

from .pair_kernel import built, launch, runs_kernel

#: the most rows (per task) the LOO-AUC kernel holds in one tile. Not 1024:
#: compiled for sm_90 (Triton 3.6, ptxas), a 1024-row tile spills 0.3 to 6 kB
#: of registers per thread to local memory in every tile width and warp count
#: tried (1 to 4 tests, 4 to 16 warps), 512 rows none (tools/triton_aot.py)
MAX_ROWS = 512
#: entries of a program's (rows, tests) tile: with 8 warps, 16 int32 counts a
#: thread per tensor, in registers (27 to 189 registers a thread on sm_90, no
#: spills). Untuned for speed: no GPU has run the kernels yet.
_TILE = 4096
_LOO_WARPS = 8
#: rows and tests of a row-scores program's tile, and its warps
_SCORE_ROWS = 16
_SCORE_TESTS = 128
_SCORE_WARPS = 4


def _build() -> dict[str, Any]:
    import triton
    import triton.language as tl

    @triton.jit  # type: ignore[misc]
    def loo_uniform(
        B_ptr,
        sB0,
        sB1,
        sB2,
        perm_ptr,
        real_ptr,
        shift_ptr,
        adj_ptr,
        end_ptr,
        start_ptr,
        prev_ptr,
        total_ptr,
        L_ptr,
        P_ptr,
        n,
        m,
        ROWS: tl.constexpr,
        TESTS: tl.constexpr,
    ):
        t = tl.program_id(1)
        j = tl.program_id(0) * TESTS + tl.arange(0, TESTS)
        jm = j < m
        r = tl.arange(0, ROWS)
        rm = r < n
        row_off = t.to(tl.int64) * n + r  # into the (T, n) tables, sorted order
        src = tl.load(perm_ptr + row_off, mask=rm, other=0)  # the row's index in B
        real = rm & (tl.load(real_ptr + row_off, mask=rm, other=0) != 0)  # not padding
        b = tl.load(
            B_ptr + t.to(tl.int64) * sB0 + src[:, None] * sB1 + j[None, :] * sB2,
            mask=real[:, None] & jm[None, :],
            other=0,
        ).to(tl.int32)
        C = tl.cumsum(b, axis=0)  # passers among the rows up to r (inclusive)
        start = tl.load(start_ptr + row_off, mask=rm, other=0)  # first row of r's level
        prev = tl.load(prev_ptr + row_off, mask=rm, other=0)  # first row of the level below
        zero = tl.zeros((ROWS, TESTS), dtype=tl.int32)
        # C just before a row index k: C[k - 1], 0 for k = 0
        below = tl.where(
            (start > 0)[:, None],
            tl.gather(C, tl.maximum(start - 1, 0)[:, None] + zero, axis=0),
            0,
        )
        below2 = tl.where(
            (prev > 0)[:, None],
            tl.gather(C, tl.maximum(prev - 1, 0)[:, None] + zero, axis=0),
            0,
        )
        lp = C - below  # at a level's last row: its passers, p_i
        lp_prev = below - below2  # p_{i-1}
        shift = tl.load(shift_ptr + row_off, mask=rm, other=0)
        adj = tl.load(adj_ptr + row_off, mask=rm, other=0)
        end = tl.load(end_ptr + row_off, mask=rm, other=0) != 0
        x = lp + shift[:, None] + adj[:, None] * lp_prev
        twice = tl.sum(tl.where(end[:, None], x * lp, 0), axis=0).to(tl.float64)
        P = tl.sum(b, axis=0)
        Pf = P.to(tl.float64)
        total = tl.load(total_ptr + t)
        pairs = Pf * (total - Pf)
        value = (twice - Pf * Pf) * 0.5 / pairs
        out = t.to(tl.int64) * m + j
        tl.store(L_ptr + out, tl.where(pairs > 0, value, float("nan")), mask=jm)
        tl.store(P_ptr + out, P.to(tl.int64), mask=jm)

    @triton.jit  # type: ignore[misc]
    def slice_sums(
        B_ptr,
        sB0,
        sB1,
        sB2,
        S_ptr,
        scale_ptr,
        out_ptr,
        n,
        m,
        ROWS: tl.constexpr,
        TESTS: tl.constexpr,
    ):
        t = tl.program_id(1)
        r = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
        rm = r < n
        base = B_ptr + t.to(tl.int64) * sB0 + r[:, None].to(tl.int64) * sB1
        s0 = tl.zeros((ROWS,), dtype=tl.float64)
        s1 = tl.zeros((ROWS,), dtype=tl.float64)
        s2 = tl.zeros((ROWS,), dtype=tl.float64)
        for j0 in range(0, m, TESTS):
            j = j0 + tl.arange(0, TESTS)
            jm = j < m
            b = tl.load(base + j[None, :] * sB2, mask=rm[:, None] & jm[None, :], other=0)
            b = b.to(tl.float64)
            srow = S_ptr + (t.to(tl.int64) * m + j) * 3  # (T, m, 3) slices
            s0 += tl.sum(b * tl.load(srow, mask=jm, other=0.0)[None, :], axis=1)
            s1 += tl.sum(b * tl.load(srow + 1, mask=jm, other=0.0)[None, :], axis=1)
            s2 += tl.sum(b * tl.load(srow + 2, mask=jm, other=0.0)[None, :], axis=1)
        scale = tl.load(scale_ptr + t)
        tl.store(out_ptr + t.to(tl.int64) * n + r, ((s0 + s1) + s2) * scale, mask=rm)

    return {"loo_uniform": loo_uniform, "slice_sums": slice_sums}


def kernels() -> dict[str, Any]:
    """The ``triton.jit`` kernels by name (:func:`.pair_kernel.built`)."""
    return built("count_kernels", _build)


def runs_loo(B: torch.Tensor, counts: torch.Tensor | None) -> bool:
    """Whether :func:`.loo_auc.loo_auc_uniform` of ``B`` (T, n, m) takes the kernel:
    the switch on for its device (:func:`.pair_kernel.runs_kernel`), no row
    multiplicities, ``1 <= n <= MAX_ROWS``."""
    n, m = B.shape[1], B.shape[2]
    return counts is None and 1 <= n <= MAX_ROWS and runs_kernel(n, m, B.device)


def _pow2(x: int) -> int:
    return 1 << max(0, int(x) - 1).bit_length()


def loo_config(n: int, m: int) -> dict[str, int]:
    """The LOO-AUC kernel's compile-time parameters for tasks of ``n`` rows
    (``1 <= n <= MAX_ROWS``) and ``m`` tests: ``ROWS`` (``n`` rounded up to a
    power of two), ``TESTS`` (a tile of at most ``_TILE`` entries) and
    ``num_warps``. What the package launches, and what tools/triton_aot.py
    compiles."""
    rows = _pow2(n)
    return {
        "ROWS": rows,
        "TESTS": max(1, min(_pow2(m), _TILE // rows)),
        "num_warps": _LOO_WARPS,
    }


def scores_config() -> dict[str, int]:
    """The row-score kernel's compile-time parameters (one for every shape)."""
    return {"ROWS": _SCORE_ROWS, "TESTS": _SCORE_TESTS, "num_warps": _SCORE_WARPS}


def loo_auc_uniform(
    B: torch.Tensor,
    perm: torch.Tensor,
    level: torch.Tensor,
    first: torch.Tensor,
    real: torch.Tensor,
    shift: torch.Tensor,
    adjacent: torch.Tensor,
    total: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(L (T, m) float64, passers (T, m) int64)`` from the level tables of
    :func:`.loo_auc.loo_auc_uniform` (its Notes): ``perm`` (T, n) the rows in
    score order, ``level`` / ``first`` / ``real`` (T, n) of the sorted rows,
    ``shift`` / ``adjacent`` (T, levels) per level, ``total`` (T, 1) rows per
    task. A level's rows are consecutive in score order, so its passers are
    differences of column prefix sums at its ends. O(T n m) reads of ``B``
    (uint8, any strides), int32 counts; the same bits as the torch path."""
    T, n, m = B.shape
    dev = B.device
    idx = torch.arange(n, device=dev).expand(T, n)
    start = torch.where(first, idx, 0).cummax(dim=1).values  # first row of each row's level
    # the first row of the level below: the start of the row just before ours
    before = (start - 1).clamp_min(0)
    prev = torch.where(start > 0, start.gather(1, before), 0)
    # a level's last row: the next row starts a level, is padding (sorted last,
    # in the spare level), or there is none
    end = real.clone()
    end[:, :-1] &= first[:, 1:] | ~real[:, 1:]
    lvl = level.clamp_max(shift.shape[1] - 1)
    shift_r = torch.where(real, shift.gather(1, lvl), 0).to(torch.int32)
    adj_r = torch.where(real, adjacent.gather(1, lvl), 0).to(torch.int32)
    L = torch.empty((T, m), dtype=torch.float64, device=dev)
    P = torch.empty((T, m), dtype=torch.int64, device=dev)
    config = loo_config(n, m)
    launch(
        "LOO-AUC",
        kernels()["loo_uniform"],
        (-(-m // config["TESTS"]), T),
        B,
        B.stride(0),
        B.stride(1),
        B.stride(2),
        perm.contiguous(),
        real.to(torch.int8).contiguous(),
        shift_r.contiguous(),
        adj_r.contiguous(),
        end.to(torch.int8).contiguous(),
        start.to(torch.int32).contiguous(),
        prev.to(torch.int32).contiguous(),
        total.reshape(T).to(torch.float64).contiguous(),
        L,
        P,
        n,
        m,
        **config,
    )
    return L, P


def runs_scores(B: torch.Tensor, w: torch.Tensor) -> bool:
    """Whether :func:`.scores.row_scores` of ``B`` (..., n, m) and ``w`` takes the
    kernel: at most one leading (task) dimension, ``w`` (m,) or one row per task,
    and the switch on for the device."""
    n, m = B.shape[-2], B.shape[-1]
    fits = w.dim() == 1 or tuple(w.shape[:-1]) == tuple(B.shape[:-2])
    return B.dim() <= 3 and fits and runs_kernel(n, m, B.device)


def row_scores(B: torch.Tensor, slices: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """``((S_0 + S_1) + S_2) * scale`` with ``S_k = B @ slices[..., k]``, float64
    (..., n), for uint8 ``B`` (..., n, m) (at most one leading dimension) and the
    exact slices (..., m, 3) and scale (..., 1) of :func:`.scores.weight_slices`
    (of one weight vector, or of one per task).
    Each sum is exact in any order, so the bits equal :func:`.scores.row_scores`'.
    One read of ``B``; O(n m) per task."""
    Bt = B if B.dim() == 3 else B[None]
    T, n, m = Bt.shape
    out = torch.empty((T, n), dtype=torch.float64, device=B.device)
    # one weight vector for every task (w (m,)) is the same slices for each
    S = slices.reshape(-1, m, 3).expand(T, m, 3).to(torch.float64).contiguous()
    sc = scale.reshape(-1).expand(T).to(torch.float64).contiguous()
    config = scores_config()
    launch(
        "row-score",
        kernels()["slice_sums"],
        (-(-n // config["ROWS"]), T),
        Bt,
        Bt.stride(0),
        Bt.stride(1),
        Bt.stride(2),
        S,
        sc,
        out,
        n,
        m,
        **config,
    )
    return out.reshape(B.shape[:-1])
