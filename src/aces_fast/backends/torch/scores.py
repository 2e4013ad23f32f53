"""Row scores ``B w`` and weight sums rounded independently of summation order.

Exact sums are what let a task's scores and weight sums be the same bits in a
zero-padded batch, on any device, whatever the thread count (the padded batch
path relies on it); :func:`exact_sum` is the torch backend's ``sum`` primitive.
"""

from __future__ import annotations

import torch

from . import count_kernels
from .chunks import DEFAULT_CHUNK_ELEMENTS

#: ``row_scores`` splits weights into slices on these grids (relative to a power of
#: two >= max|w|): 2**-26, 2**-52, 2**-78. A slice has at most 26 significant bits
#: above its grid, so sums of up to 2**26 of them are exact in float64.
_SLICE_GRIDS = (2.0**26, 2.0**52, 2.0**78)


def weight_slices(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
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


def row_scores(
    B: torch.Tensor, w: torch.Tensor, chunk_elements: int = DEFAULT_CHUNK_ELEMENTS
) -> torch.Tensor:
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
    if count_kernels.runs_scores(B, w):  # one read of B, no float64 copy; the same bits
        return count_kernels.row_scores(B, slices, scale)
    per_row = max(1, out.numel() // n * m)
    step = max(1, chunk_elements // per_row)
    for a in range(0, n, step):
        b = min(n, a + step)
        S = torch.matmul(B[..., a:b, :].to(torch.float64), slices)  # (..., b - a, 3), exact
        out[..., a:b] = _combine(S, scale)
    return out
