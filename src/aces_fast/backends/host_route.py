"""``auto``'s host route: a small call on a device tensor ranked by ``cpp`` in host memory.

A method call on a CUDA tensor runs on the torch backend as a fixed sequence of
kernels, a couple of hundred for ACES-C, each a launch of microseconds: measured
on an H200 (benchmarks/results/2026-11-29-h200.txt), one ACES-C call on a
200 x 500 matrix took 2.7 ms on the device (0.35 ms of it kernels) and 0.14 ms
copied to the host, ranked by ``cpp`` and copied back; on 2 000 x 1 000, 4.6 ms
against 0.74 ms; ACES-O (top 24, 200 x 500) 104 ms against 6.3 ms. So, for
calls of at most :data:`HOST_ROUTE_MAX_CELLS` cells, ``auto`` (issue 22,
item 3; docs/contract.rst §4):

1. copies the input to host memory (one device-to-host copy, which waits for
   the work queued before it, as any read of a result would),
2. validates and ranks it with ``cpp``, exactly as a NumPy input,
3. returns a :class:`~aces_fast.result.RerankResult` whose arrays are tensors on
   the input's device, with the dtypes the torch backend returns (float64
   scores, weights, LOO-AUC and objective, int64 order and ACES-O's
   ``info["rows"]``), and whose ``backend`` is ``"cpp"``, the backend that ran.

The kernels ``loo_auc`` and ``surrogate_loo_auc`` take the same route (their
outputs in one copy back, :func:`to_device`). The results are ``cpp``'s, which
every backend agrees with (docs/contract.rst §4). ``backend="torch"`` always
computes on the device; larger calls and batches stay there too.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._validation import tensor_device
from ..result import RerankResult

#: cells (n * m) up to which ``auto`` ranks a device tensor on the host: 2 Mi,
#: where the host route measured 6x faster than the device on an H200 for
#: ACES-C (0.74 ms against 4.6 ms at 2 000 x 1 000)
HOST_ROUTE_MAX_CELLS = 1 << 21

#: the result's array fields, moved to the device
_FLOAT_FIELDS = ("scores", "weights", "loo_auc", "objective")


def applies(data: Any) -> bool:
    """Whether ``data`` is a call's input for the host route: a torch tensor on a
    device other than the CPU (and ``meta``, which holds no data) with at most
    :data:`HOST_ROUTE_MAX_CELLS` entries. Reads the tensor's metadata only."""
    device = tensor_device(data)
    if device is None or device in ("cpu", "meta"):
        return False
    return bool(data.numel() <= HOST_ROUTE_MAX_CELLS)


def to_host(B: Any) -> np.ndarray:
    """The tensor ``B`` as a NumPy array in host memory (one device-to-host copy)."""
    return B.detach().cpu().numpy()


def to_device(arrays: list[Any], dtype: Any, device: Any) -> list[Any]:
    """NumPy arrays (and scalars) as tensors of ``dtype`` on ``device``, in one
    host-to-device copy: each a view of it, in its own shape (a scalar 0-d)."""
    import torch

    parts = [np.asarray(x, dtype=dtype) for x in arrays]
    dev = torch.from_numpy(np.concatenate([x.ravel() for x in parts])).to(device)
    out, start = [], 0
    for x in parts:
        out.append(dev[start : start + x.size].view(x.shape))
        start += x.size
    return out


def on_device(result: RerankResult, device: Any) -> RerankResult:
    """``result`` (a NumPy :class:`~aces_fast.result.RerankResult`) with its arrays
    as tensors on ``device``, all in one host-to-device copy: the float64 fields'
    bits and the int64 ones (order, ACES-O's rows) travel as one int64 buffer,
    each field a view of it (float64 ones reinterpreted, ``Tensor.view(dtype)``:
    the same bits). A copy costs a launch and a wait of its own, a tenth of a
    small call on a GPU (0.15-0.23 ms for ACES-C 200 x 500 on an H200,
    benchmarks/results/2026-11-30-h200.txt)."""
    import torch

    floats = [k for k in _FLOAT_FIELDS if getattr(result, k) is not None]
    info = dict(result.info)
    rows = info.get("rows")
    ints = ["order"] + (["rows"] if isinstance(rows, np.ndarray) else [])
    host = [np.asarray(getattr(result, k), dtype=np.float64).view(np.int64) for k in floats]
    host += [np.asarray(result.order if k == "order" else rows, dtype=np.int64) for k in ints]
    views = to_device(host, np.int64, device)
    moved = {k: v.view(torch.float64) for k, v in zip(floats, views)}
    moved.update(zip(ints, views[len(floats) :]))
    if "rows" in moved:
        info["rows"] = moved["rows"]
    return RerankResult(
        moved["scores"],
        moved.get("weights"),
        moved["order"],
        result.method,
        result.backend,
        loo_auc=moved.get("loo_auc"),
        fallback=result.fallback,
        objective=moved.get("objective"),
        info=info,
    )
