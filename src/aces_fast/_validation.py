"""Input checking and conversion shared by every public function.

The rule is: convert and validate in Python, once, with messages that name the
problem; the kernels then receive a C-contiguous ``uint8`` matrix holding only
0/1 (zero-copy when the caller already has one, or a ``bool`` matrix) and
float64 vectors of the right length.

The rules themselves -- which dtypes and shapes a pass matrix and weights may
have, and the message of each violation -- are defined once, in the section
"the rules" below, on metadata (a dtype's kind, a shape) and on the few values
a check finds (the offending value, a sum). NumPy input is checked here
(:func:`as_pass_matrix`, :func:`as_weights`); a tensor on the torch backend is
checked where it lives by :mod:`aces_fast.backends.torch.validate`, which finds
those values with tensor ops and reads them once, and raises the same errors.
The CPU backends take a CPU tensor as the NumPy array it views
(:func:`tensor_to_numpy`).
"""

from __future__ import annotations

import math
import numbers
import sys
from typing import Any

import numpy as np


def is_torch_tensor(x: Any) -> bool:
    """True when ``x`` is a ``torch.Tensor``, without importing torch."""
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(x, torch.Tensor)


_UINT8 = np.dtype(np.uint8)


def check_zero_one(B: np.ndarray, name: str = "B", top: int | None = None) -> None:
    """Raise ``ValueError`` unless a ``uint8`` matrix holds only 0 and 1.

    The value check of the zero-copy ``uint8``/``bool`` path, for computations
    that do not make it themselves: the compiled ``cpp`` kernels check inside
    their own call (same message), NumPy, numba and torch code does not.
    ``top``: the largest entry of ``B``, when a compiled scan found it (``B.max()``
    costs a microsecond even on a tiny matrix). O(n m), one pass.
    """
    if B.size:
        if top is None:
            top = int(B.max())
        if top > 1:
            raise pass_value_error(name, int(top))


# ---------------------------------------------------------------------------
# the rules: accepted dtypes and shapes, and the message of every violation


def dtype_kind(dtype: Any) -> str:
    """NumPy's kind character of a NumPy or torch dtype: ``"b"`` (bool), ``"u"``,
    ``"i"``, ``"f"``, ``"c"``, or another NumPy kind (``"O"``, ``"U"``, ...);
    ``"?"`` for a torch dtype of none of the five (quantized, bits)."""
    if isinstance(dtype, np.dtype):
        return dtype.kind
    torch = sys.modules["torch"]  # a torch dtype: torch is imported
    if dtype == torch.bool:
        return "b"
    if dtype.is_complex:
        return "c"
    if dtype.is_floating_point:
        return "f"
    try:
        return "i" if torch.iinfo(dtype).min < 0 else "u"
    except TypeError:  # no integer dtype either
        return "?"


def complex_tensor_error(name: str, dtype: Any) -> TypeError:
    return TypeError(f"{name} must be real-valued, got a tensor of dtype {dtype}")


def check_pass_dtype(kind: str, dtype: Any, name: str, *, tensor: bool = False) -> None:
    """Raise ``TypeError`` unless a pass matrix's dtype (kind ``kind``) holds numbers
    that can be 0/1: bool, integer or float (a complex tensor: real-valued)."""
    if tensor and kind == "c":
        raise complex_tensor_error(name, dtype)
    if kind not in "biuf":
        raise TypeError(f"{name} must hold 0/1 values as bool, integer or float; got dtype {dtype}")


def check_pass_shape(shape: tuple[int, ...], name: str) -> None:
    """Raise ``ValueError`` unless ``shape`` is ``(n, m)`` with ``n >= 1``."""
    if len(shape) != 2:
        raise ValueError(
            f"{name} must be 2-D with shape (n_candidates, n_tests); got shape {shape}"
        )
    if shape[0] == 0:
        raise ValueError(f"{name} has an empty candidate axis (shape {shape}); need n >= 1")


def pass_value_error(name: str, value: Any) -> ValueError:
    """The error of a pass matrix holding ``value`` (a Python number; ``None``: NaN).

    The value reported: the largest byte of a ``uint8``/``bool`` matrix, else the
    first offending entry in row-major order; NaN is reported before any other
    value."""
    if value is None:
        return ValueError(f"{name} contains NaN; a pass matrix must contain only 0 and 1")
    return ValueError(f"{name} must contain only 0 and 1; found value {value!r}")


def check_weights_dtype(kind: str, dtype: Any, name: str, *, tensor: bool = False) -> None:
    """Raise ``TypeError`` unless weights are real numbers (bool, integer or float)."""
    if tensor and kind == "c":
        raise complex_tensor_error(name, dtype)
    if kind not in "biuf":
        raise TypeError(f"{name} must be real numbers; got dtype {dtype}")


def check_weights_shape(shape: tuple[int, ...], m: int, name: str) -> None:
    """Raise ``ValueError`` unless ``shape`` is ``(m,)``."""
    if len(shape) != 1:
        raise ValueError(f"{name} must be 1-D with length m={m}; got shape {shape}")
    if shape[0] != m:
        raise ValueError(f"{name} has length {shape[0]} but B has m={m} tests (columns)")


def check_weight_findings(name: str, finite: bool, negative: Any, total: float) -> None:
    """Raise the ``ValueError`` of weights' values: not all ``finite``, a ``negative``
    one (the first, a float; ``None`` when there is none), or a sum ``total``
    beyond :data:`MAX_WEIGHT_SUM` -- checked in that order."""
    if not finite:
        raise ValueError(f"{name} must be finite; found NaN or infinity")
    if negative is not None:
        raise ValueError(f"{name} must be non-negative; found {negative!r}")
    check_weight_sum(total, name)


def tensor_device(x: Any) -> str | None:
    """The device type (``"cpu"``, ``"cuda"``, ...) of a torch tensor, else ``None``."""
    return x.device.type if is_torch_tensor(x) else None


def check_tensor_device(x: Any, name: str) -> None:
    """Raise ``ValueError`` for a tensor on the ``meta`` device: it has a shape and a
    dtype but no data, so no backend can compute with it."""
    if x.device.type == "meta":
        raise ValueError(
            f"{name} is a torch tensor on the 'meta' device, which holds no data (only a "
            "shape and a dtype); pass a tensor with data, e.g. on 'cpu' or 'cuda'"
        )


def tensor_to_numpy(x: Any, name: str, *, host_copy: bool = False) -> np.ndarray:
    """A CPU tensor as a NumPy array (no copy where the dtype allows).

    A tensor on another device is refused (``host_copy=False``: the caller's
    backend runs on the CPU and should not copy silently) or copied to the host
    (``host_copy=True``: functions computed in NumPy on small inputs, such as
    the metrics). A ``meta`` tensor is always refused.
    """
    check_tensor_device(x, name)
    if x.device.type != "cpu":
        if not host_copy:
            raise ValueError(
                f"{name} is a torch tensor on device '{x.device}', but the selected backend "
                "runs on the CPU: pass backend='torch' (or leave backend=None) to compute on "
                f"that device, or move the tensor with {name}.cpu()"
            )
        x = x.cpu()
    if x.is_complex():
        raise complex_tensor_error(name, x.dtype)
    x = x.detach()
    if x.is_floating_point() and x.element_size() < 4 and x.dtype != sys.modules["torch"].float16:
        # bfloat16 / float8 have no NumPy dtype; float32 holds every such value exactly
        x = x.float()
    try:
        return x.numpy()
    except (TypeError, RuntimeError, NotImplementedError):  # quantized and other exotic dtypes
        raise TypeError(
            f"{name} must hold bool, integer or float values; got a tensor of dtype {x.dtype}"
        ) from None


def as_pass_matrix(
    B: Any, name: str = "B", *, check_values: bool = True, host_copy: bool = False
) -> np.ndarray:
    """Validate a pass matrix and return it as a C-contiguous ``uint8`` array.

    Parameters
    ----------
    B : array_like, shape (n, m)
        ``B[i, j] = 1`` iff candidate ``i`` passes test ``j``. Accepted: NumPy
        arrays of bool, any integer or float dtype holding only 0 and 1, nested
        lists, CPU torch tensors. ``m = 0`` (no tests) is allowed; ``n = 0`` is not.
    check_values : bool, default True
        Check that a ``uint8`` or ``bool`` input holds only 0 and 1
        (:func:`check_zero_one`). ``False`` for callers whose next step checks it
        anyway (the compiled kernels do, within their call); every other dtype is
        converted value by value and always checked.
    host_copy : bool, default False
        Copy a tensor on another device (CUDA) to the host instead of refusing it
        (for functions computed in NumPy whatever the backend).

    Returns
    -------
    numpy.ndarray of uint8, shape (n, m), C-contiguous.
        A view of ``B`` (no copy) when ``B`` is already a C-contiguous ``uint8`` or
        ``bool`` array.

    Raises
    ------
    TypeError
        For non-numeric input (strings, objects, complex numbers).
    ValueError
        For a wrong number of dimensions, an empty candidate axis, NaN, or any
        value other than 0 and 1.
    """
    if (
        type(B) is np.ndarray
        and B.dtype is _UINT8
        and B.ndim == 2
        and B.shape[0]
        and B.flags.c_contiguous
    ):  # the common case, checked in the fewest steps
        if check_values:
            check_zero_one(B, name)
        return B
    if is_torch_tensor(B):
        B = tensor_to_numpy(B, name, host_copy=host_copy)
    if not isinstance(B, np.ndarray):
        try:
            B = np.asarray(B)
        except ValueError as exc:  # ragged nested lists
            raise ValueError(f"{name} must be a rectangular (n, m) array: {exc}") from None
    check_pass_dtype(B.dtype.kind, B.dtype, name)
    check_pass_shape(B.shape, name)
    if B.dtype == np.uint8 or B.dtype == np.bool_:
        # zero-copy; a bool array's bytes can hold other values too (views of
        # other data), so it is checked like uint8
        B = np.ascontiguousarray(B)
        if B.dtype == np.bool_:
            B = B.view(np.uint8)
        if check_values:
            check_zero_one(B, name)
        return B
    if B.dtype.kind == "f" and B.size and np.isnan(B).any():
        raise pass_value_error(name, None)
    if B.size:
        bad = (B != 0) & (B != 1)
        if bad.any():
            raise pass_value_error(name, B[bad].flat[0].item())
    return np.ascontiguousarray(B, dtype=np.uint8)


def as_weights(w: Any, m: int, name: str = "weights", *, host_copy: bool = False) -> np.ndarray:
    """Validate non-negative finite test weights of length ``m`` as float64 (m,).

    Their sum must be finite too (``np.full(2, 1.7e308)`` is refused): every
    backend forms scores ``B @ w`` and the tie tolerance ``tie_tol * sum(w)``,
    which would overflow to infinity. Raises TypeError for a non-numeric dtype,
    ValueError for another shape (a scalar included), NaN, infinity, a negative
    value or an overflowing sum. O(m).
    """
    if is_torch_tensor(w):
        w = tensor_to_numpy(w, name, host_copy=host_copy)
    arr = np.asarray(w)
    check_weights_dtype(arr.dtype.kind, arr.dtype, name)
    check_weights_shape(arr.shape, m, name)
    arr = np.ascontiguousarray(arr, dtype=np.float64)
    check_weight_values(arr, name)
    return arr


def check_weight_values(arr: np.ndarray, name: str = "weights") -> None:
    """The value checks of :func:`as_weights` on a float64 (m,) array
    (:func:`check_weight_findings`)."""
    finite = bool(np.isfinite(arr).all())
    negative = arr < 0
    first = arr[negative][0].item() if finite and negative.any() else None
    with np.errstate(over="ignore", invalid="ignore"):
        total = float(arr.sum())
    check_weight_findings(name, finite, first, total)


#: The largest sum of weights accepted. Scores ``B @ w`` (at most the sum) and the
#: tie tolerance then stay finite in any summation order, and so do the surrogate's
#: ``gamma * s`` and gradient (bounded by ``1 + gamma * sum(w)``) for every
#: ``gamma`` the validators accept (<= 1e4).
MAX_WEIGHT_SUM = 1e300


def check_weight_sum(total: float, name: str = "weights") -> None:
    """Raise ``ValueError`` when non-negative weights sum to more than
    :data:`MAX_WEIGHT_SUM` (or overflow)."""
    if not total <= MAX_WEIGHT_SUM:
        raise ValueError(
            f"{name} sum to {total!r}, beyond {MAX_WEIGHT_SUM:g}: scores B @ w "
            "would overflow; rescale the weights (every result but the "
            "surrogate's is scale-invariant)"
        )


def as_labels(y: Any, n: int, name: str = "labels") -> np.ndarray:
    """Validate 0/1 labels of length ``n``; returns a bool array (n,).

    Tensors on any device are copied to the host (labels are small)."""
    if is_torch_tensor(y):
        y = tensor_to_numpy(y, name, host_copy=True)
    arr = np.asarray(y)
    if arr.dtype == object or arr.dtype.kind not in "biuf":
        raise TypeError(f"{name} must hold 0/1 values; got dtype {arr.dtype}")
    if arr.ndim != 1 or arr.shape[0] != n:
        raise ValueError(f"{name} must have shape ({n},); got shape {arr.shape}")
    if arr.dtype.kind == "f" and np.isnan(arr).any():
        raise ValueError(f"{name} contains NaN")
    if ((arr != 0) & (arr != 1)).any():
        raise ValueError(f"{name} must contain only 0 and 1")
    return arr.astype(bool)


def as_scores(s: Any, name: str = "scores") -> np.ndarray:
    """Validate finite real scores as float64 (n,), n >= 1.

    Tensors on any device are copied to the host (a torch backend's result on
    CUDA is a valid input)."""
    if is_torch_tensor(s):
        s = tensor_to_numpy(s, name, host_copy=True)
    arr = np.asarray(s)
    if arr.dtype == object or arr.dtype.kind not in "biuf":
        raise TypeError(f"{name} must be real numbers; got dtype {arr.dtype}")
    if arr.ndim != 1 or arr.shape[0] == 0:
        raise ValueError(f"{name} must be 1-D and non-empty; got shape {arr.shape}")
    arr = arr.astype(np.float64, copy=False)
    if not np.isfinite(arr).all():
        raise ValueError(f"{name} must be finite; found NaN or infinity")
    return arr


def _bounds(lo: Any, hi: Any, lo_open: bool = False) -> str:
    if lo is None:
        return "" if hi is None else f"<= {hi}"
    low = f"> {lo}" if lo_open else f">= {lo}"
    return low if hi is None else f"{low} and <= {hi}"


def _show(x: Any) -> str:
    """``repr(x)``, shortened for huge integers (2**1000 has 302 digits)."""
    text = repr(x)
    return text if len(text) <= 40 else f"{text[:12]}...{text[-6:]} ({len(text)} characters)"


def check_real(
    x: Any,
    name: str,
    *,
    positive: bool = False,
    nonneg: bool = False,
    lo: float | None = None,
    hi: float | None = None,
) -> float:
    """Validate a finite real scalar hyperparameter and return it as ``float``.

    ``positive``: > 0; ``nonneg``: >= 0; ``lo`` / ``hi``: inclusive bounds. The
    error names the parameter and its whole allowed range.
    """
    # a plain float skips the (slow) ABC check: small calls pay for every check
    if type(x) is not float and (isinstance(x, bool) or not isinstance(x, numbers.Real)):
        raise TypeError(f"{name} must be a real number; got {type(x).__name__}")
    try:
        v = float(x)
    except OverflowError:  # an int beyond float64's range
        v = -math.inf if x < 0 else math.inf  # type: ignore[operator]
    low = 0 if (positive or nonneg) else lo
    if not math.isfinite(v):
        bounds = "" if low is None and hi is None else " " + _bounds(low, hi, positive)
        raise ValueError(f"{name} must be finite{bounds}; got {_show(x)}")
    if (positive and v <= 0) or (low is not None and v < low) or (hi is not None and v > hi):
        raise ValueError(f"{name} must be {_bounds(low, hi, positive)}; got {_show(x)}")
    return v


def check_int(x: Any, name: str, *, minimum: int = 0, maximum: int | None = None) -> int:
    """Validate an integer hyperparameter in ``[minimum, maximum]`` (``bool``
    rejected) and return it as ``int``; the error names the allowed range."""
    if isinstance(x, bool) or not isinstance(x, numbers.Integral):
        raise TypeError(f"{name} must be an integer; got {type(x).__name__}")
    v = int(x)
    if v < minimum or (maximum is not None and v > maximum):
        raise ValueError(f"{name} must be {_bounds(minimum, maximum)}; got {_show(v)}")
    return v
