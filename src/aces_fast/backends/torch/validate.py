"""Tensors in: validation where they live, and zero-copy NumPy wrapping.

A tensor is checked by the rules of :mod:`aces_fast._validation` (accepted
dtypes and shapes, and every message, are defined there once) on its own
device, without a NumPy copy: the dtype and shape rules apply to metadata; the
values a rule needs (the largest byte of a ``uint8``/``bool`` matrix, the first
offending entry of another dtype, a NaN; the weights' first non-finite or
negative entry and their sum) are found with fixed-shape tensor ops into a
small int64 summary per task. The summaries of a whole batch are joined and
read from the device once (one ``tolist``); then the errors are raised on the
host, for the first invalid task, exactly as the NumPy validators would.
"""

from __future__ import annotations

import struct
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from ..._validation import (
    MAX_WEIGHT_SUM,
    check_pass_dtype,
    check_pass_shape,
    check_tensor_device,
    check_weight_findings,
    check_weights_dtype,
    check_weights_shape,
    dtype_kind,
    pass_value_error,
)


def from_numpy(a: np.ndarray) -> torch.Tensor:
    """``torch.from_numpy`` without copying, also for read-only arrays.

    torch warns that writing to a tensor over a read-only array is undefined;
    this backend never writes to its inputs, so the warning is silenced.
    """
    if any(stride < 0 for stride in a.strides):
        # NumPy calls an array with only size-1 axes contiguous whatever its strides
        # (np.ascontiguousarray returns it as it is); torch refuses any negative one
        a = a.copy()
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*not writable.*")
        return torch.from_numpy(a)


#: device types the kernels run on (float64 and int64 tensor ops everywhere)
DEVICES = ("cpu", "cuda")


def check_device(x: torch.Tensor, name: str) -> None:
    """Raise ``ValueError`` unless ``x`` lives on a device this backend computes on
    (:data:`DEVICES`); a ``meta`` tensor holds no data at all."""
    check_tensor_device(x, name)
    if x.device.type not in DEVICES:
        raise ValueError(
            f"{name} is a torch tensor on device '{x.device}'; the torch backend computes on "
            f"{' or '.join(repr(d) for d in DEVICES)} devices (its kernels need float64): "
            f"move it with {name}.cpu()"
        )


# ---------------------------------------------------------------------------
# excess: how far a matrix is from 0/1, found on the device (no host read)


def _as_bits(x: torch.Tensor) -> torch.Tensor:
    """A 0-d float tensor as the int64 bit pattern of its float64 value (exact)."""
    return x.to(torch.float64).reshape(1).view(torch.int64).reshape(())


def _from_bits(bits: int) -> float:
    return float(struct.unpack("<d", struct.pack("<q", bits))[0])


def _first(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """The entry of ``x`` at the first True of ``mask`` (row-major; ``x``'s first
    entry when there is none), 0-d. A gather: indexing with a 0-d tensor would
    read the index on the host."""
    index = mask.reshape(-1).to(torch.uint8).argmax()
    return x.reshape(-1).gather(0, index.reshape(1)).reshape(())


def _largest_bytes(mats: list[torch.Tensor]) -> list[torch.Tensor]:
    """The largest entry (0-d) of each non-empty ``uint8`` matrix: one fused
    multi-tensor reduction where torch has it (``_foreach_max``)."""
    foreach_max = getattr(torch, "_foreach_max", None)  # torch >= 2.4
    if foreach_max is not None:
        try:
            return list(foreach_max(mats))
        except (RuntimeError, NotImplementedError):  # a build without it for uint8
            pass
    return [B.max() for B in mats]


class _Task:
    """A pass-matrix tensor through the metadata rules, its values still to read.

    ``excess()`` is a float64 0-d tensor, ``<= 0`` exactly when every entry is
    0 or 1 (NaN otherwise included): the largest byte minus 1 for ``uint8`` and
    ``bool`` (checked like ``uint8``: a bool tensor's bytes may hold other
    values), ``max(-min, max - 1)`` for integers, and for floats the largest
    ``|x - uint8(x)|`` (non-zero for a fraction, a negative, an out-of-range
    value, inf or NaN, whatever the conversion makes of them) or the largest
    ``uint8(x)`` minus 1. ``value()`` finds what the message reports, only
    for an invalid matrix.
    """

    def __init__(self, index: int, B: torch.Tensor, name: str):
        check_device(B, name)
        kind = dtype_kind(B.dtype)
        check_pass_dtype(kind, B.dtype, name, tensor=True)
        check_pass_shape(tuple(B.shape), name)
        B = B.detach()
        self.index, self.name = index, name
        self.bytes = kind == "b" or B.dtype == torch.uint8  # checked by the largest byte
        if kind == "b":
            B = B.view(torch.uint8)
        elif kind == "u" and not self.bytes:
            B = B.to(torch.int64)  # uint16/32/64: few tensor ops support them
        self.source = B
        self.empty = B.numel() == 0
        self.converted = None if self.bytes else B.to(torch.uint8)

    def result(self) -> torch.Tensor:
        """The validated matrix: contiguous ``uint8`` (n, m) (no copy when it already is)."""
        return (self.source if self.converted is None else self.converted).contiguous()

    def excess(self) -> torch.Tensor:
        B, u = self.source, self.converted
        assert u is not None, "bytes are checked together (_largest_bytes)"
        if B.is_floating_point():
            off = torch.sub(B, u, out=torch.empty_like(B)).abs_().amax().to(torch.float64)
            return torch.maximum(off, u.amax().to(torch.float64) - 1)
        low, high = torch.aminmax(B)  # as float64: -low overflows for the smallest integer
        return torch.maximum(-low.to(torch.float64), high.to(torch.float64) - 1)

    def value(self) -> Any:
        """What the error reports (``None``: NaN): the first entry that is neither 0
        nor 1 (row-major). One more host read, on the error path only."""
        flat = self.source.reshape(-1)
        first = _first(flat, (flat != 0) & (flat != 1))
        if not flat.is_floating_point():
            return int(first.to(torch.int64).item())
        nan, bits = torch.stack((torch.isnan(flat).any().to(torch.int64), _as_bits(first))).tolist()
        return None if nan else _from_bits(bits)


def _read_excess(group: list[_Task]) -> list[tuple[_Task, float]]:
    """``(task, excess)`` of non-empty tasks on one device, read from it at once."""
    if len(group) == 1:  # a single call: the fewest ops
        task = group[0]
        x = task.source.max() if task.bytes else task.excess()
        return [(task, float(x.item()) - task.bytes)]  # the one host read
    byte_tasks = [task for task in group if task.bytes]
    value_tasks = [task for task in group if not task.bytes]
    parts = [task.excess().reshape(1) for task in value_tasks]
    if byte_tasks:
        largest = torch.stack(_largest_bytes([task.source for task in byte_tasks]))
        parts.insert(0, largest.to(torch.float64) - 1)
    excess = torch.cat(parts).tolist()  # the one host read
    return list(zip(byte_tasks + value_tasks, excess))


def _ready_bytes(Bs: Sequence[Any]) -> list[torch.Tensor] | None:
    """The common batch, checked for a few attribute reads per matrix: every matrix
    a plain, contiguous, 2-D ``uint8`` tensor with candidates, all on one device
    the backend computes on, their largest byte at most 1 (one multi-tensor
    reduction, one read). ``None`` when any matrix needs the full rules (which
    then find and report what is wrong). A single matrix takes the full path,
    as cheap for one.

    Measured on an H200: the full rules cost about 19 us of Python per matrix,
    38 ms of a 46 ms batch of 2 000 ACES-C tasks whose kernels took 8 ms.
    """
    if len(Bs) < 2 or not isinstance(Bs[0], torch.Tensor):
        return None
    first, u8 = Bs[0], torch.uint8
    if first.device.type not in DEVICES:
        return None
    # the device as two plain values: comparing torch.device objects costs more
    cuda, index = first.is_cuda, first.get_device()
    for B in Bs:
        if (
            type(B) is not torch.Tensor
            or B.dtype != u8
            or B.is_cuda != cuda
            or B.get_device() != index
            or len(shape := B.shape) != 2
            or shape[0] == 0
            or not B.is_contiguous()
        ):
            return None
    mats = [B for B in Bs if B.numel()]
    if mats and int(torch.stack(_largest_bytes(mats)).max().item()) > 1:  # the one host read
        return None
    return list(Bs)


def check_pass_stack(stack: torch.Tensor) -> torch.Tensor | None:
    """A stack of tasks (T, n, m) checked whole: the same tensor when it is a
    plain, contiguous ``uint8`` tensor with ``T, n >= 1`` on a device the backend
    computes on, all 0/1 (one reduction, one read); ``None`` otherwise, for the
    caller to split it into tasks, whose checks name the first invalid one."""
    if (
        type(stack) is not torch.Tensor
        or stack.dtype != torch.uint8
        or stack.dim() != 3
        or stack.shape[0] == 0
        or stack.shape[1] == 0
        or not stack.is_contiguous()
        or stack.device.type not in DEVICES
    ):
        return None
    if stack.numel() and int(stack.max().item()) > 1:  # the one host read
        return None
    return stack


def _prefixed(exc: Exception, index: int | None) -> Exception:
    if index is None:
        return exc
    return type(exc)(f"task {index}: {exc}")


def check_pass_tensors(
    Bs: Sequence[torch.Tensor], name: str = "B", indices: Sequence[int] | None = None
) -> list[torch.Tensor]:
    """Validate pass-matrix tensors where they live, reading each device once.

    Parameters
    ----------
    Bs : sequence of torch.Tensor
        Pass matrices, each (n_t, m_t), of any real dtype, on ``cpu`` or ``cuda``.
    name : str
        The argument's name in messages.
    indices : sequence of int, optional
        Each matrix's index in the caller's batch: a message starts with
        ``"task <index>: "``. ``None``: no prefix (one matrix).

    Returns
    -------
    list of torch.Tensor
        Contiguous ``uint8`` (n_t, m_t) on each input's device; a contiguous
        ``uint8`` or ``bool`` input is returned without a copy (a view).

    Raises
    ------
    TypeError, ValueError
        The error :func:`aces_fast._validation.as_pass_matrix` raises for the
        first invalid matrix (by position): complex or non-numeric dtype, a
        device the backend cannot compute on, wrong ndim, no candidates, NaN,
        a value other than 0 and 1.

    Notes
    -----
    Metadata rules first, on the host, up to the first matrix that breaks one;
    then every matrix before it gets its ``excess`` (the largest byte of all
    ``uint8``/``bool`` ones in one multi-tensor reduction; a few fixed-shape
    ops for each other one), joined into one float64 vector per device and
    read once. Only an invalid matrix costs one more read (the value its
    message names). A batch of plain contiguous ``uint8`` matrices on one
    device is checked without the per-matrix rule objects (:func:`_ready_bytes`).
    O(total cells).
    """
    ready = _ready_bytes(Bs)
    if ready is not None:
        return ready
    tasks: list[_Task] = []
    failure: tuple[int, Exception] | None = None
    for t, B in enumerate(Bs):
        try:
            tasks.append(_Task(t, B, name))
        except (TypeError, ValueError) as exc:
            failure = (t, exc)
            break
    by_device: dict[torch.device, list[_Task]] = {}
    for task in tasks:
        if not task.empty:
            by_device.setdefault(task.source.device, []).append(task)
    invalid: list[tuple[_Task, float]] = []
    for group in by_device.values():
        invalid += [(task, x) for task, x in _read_excess(group) if not x <= 0]
    if invalid:
        task, x = min(invalid, key=lambda found: found[0].index)
        if failure is None or task.index < failure[0]:
            value = int(x) + 1 if task.bytes else task.value()
            failure = (task.index, pass_value_error(task.name, value))
    if failure is not None:
        t, error = failure
        raise _prefixed(error, None if indices is None else indices[t]) from None
    return [task.result() for task in tasks]


def check_pass_tensor(B: torch.Tensor, name: str = "B") -> torch.Tensor:
    """Validate one pass-matrix tensor where it lives; return contiguous ``uint8`` (n, m).

    :func:`check_pass_tensors` of one matrix: the checks and messages of
    :func:`aces_fast._validation.as_pass_matrix`, one host read (none for an
    empty matrix or an invalid dtype or shape). ``bool``/``uint8`` input is
    returned without a copy when contiguous.
    """
    return check_pass_tensors([B], name)[0]


def check_weights_tensor(w: torch.Tensor, m: int, name: str = "weights") -> torch.Tensor:
    """Validate weights where they live; return float64 (m,) on ``w.device``.

    The checks and messages of :func:`aces_fast._validation.as_weights`, by its
    rules (:func:`~aces_fast._validation.check_weight_findings`). Valid weights
    cost one host read: their sum and minimum, found on the device together
    (a sum within :data:`~aces_fast._validation.MAX_WEIGHT_SUM` and a minimum
    >= 0 also rule out NaN and infinity); only invalid ones are read again,
    for what the message names. O(m).
    """
    check_device(w, name)
    kind = dtype_kind(w.dtype)
    check_weights_dtype(kind, w.dtype, name, tensor=True)
    check_weights_shape(tuple(w.shape), m, name)
    w = w.detach().to(torch.float64).contiguous()
    if m == 0:
        return w
    total, low = torch.stack((w.sum(), w.amin())).tolist()  # the one host read
    if total <= MAX_WEIGHT_SUM and low >= 0:
        return w
    negative = w < 0
    finite, has_negative, first = torch.stack(
        (
            torch.isfinite(w).all().to(torch.float64),
            negative.any().to(torch.float64),
            _first(w, negative),
        )
    ).tolist()
    check_weight_findings(name, bool(finite), first if has_negative else None, total)
    raise AssertionError(f"{name}: invalid weights passed every rule")  # pragma: no cover
