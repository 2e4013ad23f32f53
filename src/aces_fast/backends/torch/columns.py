"""A torch batch's results as the flat columns of :class:`aces_fast.BatchResult`.

The batch computes in chunks: zero-padded (T_c, n_c, m_c) tensors, and tasks too
big to pad computed alone. :class:`Columns` collects each chunk's outputs and
gathers every field into task order with one ``index_select``; the index is
built on the host from the tasks' shapes alone, so nothing is read from the
device and the number of ops does not depend on the number of tasks.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from ... import _semantics

#: Outputs fields that become columns, and each task's length in its piece of
#: width W: per candidate n_t, per test m_t, the objective W, rows min(n_t, W)
_FIELDS = {
    "scores": "n",
    "order": "n",
    "weights": "m",
    "loo_auc": "m",
    "fallback": "one",
    "objective": "width",
    "rows": "rows",
}


def upload(a: np.ndarray, device: torch.device) -> torch.Tensor:
    """A host array as a tensor on ``device``; off the CPU through pinned memory
    with ``non_blocking``, which does not make the host wait for the device."""
    t = torch.from_numpy(np.ascontiguousarray(a))
    if device.type == "cpu":
        return t
    return t.pin_memory().to(device, non_blocking=True)


class Columns:
    """The outputs of a batch's chunks, gathered into flat columns in task order.

    Parameters
    ----------
    shapes : sequence of (n_t, m_t)
        Every task's shape, in task order.
    device : torch.device
        Where the outputs live.
    """

    def __init__(self, shapes: Sequence[tuple[int, int]], device: torch.device):
        self.n = np.array([s[0] for s in shapes], np.int64).reshape(-1)
        self.m = np.array([s[1] for s in shapes], np.int64).reshape(-1)
        self.device = device
        self._pieces: list[tuple[_semantics.Outputs, np.ndarray]] = []

    def add(self, out: _semantics.Outputs, tasks: Sequence[int], padded: bool = True) -> None:
        """The outputs of tasks ``tasks`` (in their positions along the task axis);
        ``padded=False``: one task's outputs, without a task axis."""
        if not padded:
            out = _semantics.Outputs(
                *(x.reshape(1, -1) if isinstance(x, torch.Tensor) else x for x in out)
            )
        self._pieces.append((out, np.asarray(tasks, np.int64)))

    def column(self, field: str) -> tuple[torch.Tensor | None, np.ndarray | None]:
        """``(values, offsets (T + 1,))`` of an Outputs field; ``(None, None)`` when
        the method does not have it (a piece holds no tensor there)."""
        parts = [getattr(out, field) for out, _ in self._pieces]
        if not all(isinstance(p, torch.Tensor) for p in parts):
            return None, None
        T = len(self.n)
        start = np.zeros(T, np.int64)
        length = np.zeros(T, np.int64)
        base = 0
        for part, (_, tasks) in zip(parts, self._pieces):
            width = part.shape[-1]
            start[tasks] = base + np.arange(len(tasks), dtype=np.int64) * width
            kind = _FIELDS[field]
            if kind == "n":
                length[tasks] = self.n[tasks]
            elif kind == "m":
                length[tasks] = self.m[tasks]
            elif kind == "rows":
                length[tasks] = np.minimum(self.n[tasks], width)
            else:  # "one", "width"
                length[tasks] = width
            base += part.numel()
        offsets = np.zeros(T + 1, np.int64)
        np.cumsum(length, out=offsets[1:])
        flat = torch.cat([p.reshape(-1) for p in parts]) if len(parts) > 1 else parts[0]
        shift = start - offsets[:-1]
        if offsets[-1] == flat.numel() and not shift.any():
            # already in task order, no padding (one-shape tasks, a stack): the
            # gather would be the identity, an index as long as the column built
            # on the host and uploaded for nothing
            return flat.reshape(-1), offsets
        index = np.repeat(shift, length) + np.arange(offsets[-1], dtype=np.int64)
        return flat.reshape(-1).index_select(0, upload(index, self.device)), offsets

    def fields(self) -> dict[str, Any]:
        """Every column as :class:`aces_fast.BatchResult`'s keyword arguments (tensors)."""
        cols: dict[str, Any] = {}
        for field in _FIELDS:
            cols[field], cols[f"{field}_offsets"] = self.column(field)
        return cols
