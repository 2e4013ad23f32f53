"""Tensors in: zero-copy NumPy wrapping, and validation on the tensor's own device
(the same checks and messages as :mod:`aces_fast._validation`)."""

from __future__ import annotations

import warnings

import numpy as np
import torch

from ..._validation import check_tensor_device, check_weight_sum

_INTEGER_DTYPES = frozenset(
    getattr(torch, name)
    for name in ("uint8", "int8", "int16", "int32", "int64", "uint16", "uint32", "uint64")
    if hasattr(torch, name)
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


def _scalar(x: torch.Tensor):
    """A 0-d tensor as the Python number the NumPy validators report."""
    return x.detach().cpu().item()


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


def check_pass_tensor(B: torch.Tensor, name: str = "B") -> torch.Tensor:
    """Validate a pass-matrix tensor where it lives; return contiguous ``uint8`` (n, m).

    Same checks and messages as :func:`aces_fast._validation.as_pass_matrix`, run
    with tensor ops on ``B.device`` (one host synchronization per check that
    reads data). ``bool``/``uint8`` input is returned without a copy when
    contiguous. Raises TypeError for complex or non-numeric dtypes, ValueError for
    a device it cannot compute on (:func:`check_device`), a wrong ndim, an empty
    candidate axis, NaN or values other than 0 and 1.
    """
    check_device(B, name)
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
    check_device(w, name)
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
    check_weight_sum(_scalar(w.sum()), name)
    return w
