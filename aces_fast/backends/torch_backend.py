"""``torch``: the kernels and methods in PyTorch, on the input's device (CPU or CUDA).

Input and output types
----------------------
* A ``torch.Tensor`` pass matrix is validated where it lives and every result
  stays there: ``RerankResult`` arrays (``scores``, ``weights``, ``order``,
  ``loo_auc``, ``objective``, ``info["rows"]``), LOO-AUC values and
  ``SurrogateResult`` fields (``objective`` as a 0-d tensor) are tensors on the
  input's device. A CPU tensor of a NumPy-compatible dtype is validated by
  :func:`aces_fast._validation.as_pass_matrix` (zero-copy for ``uint8``/``bool``).
* Anything else (NumPy arrays, nested lists) is validated by the shared NumPy
  validators, wrapped with ``torch.from_numpy`` (no copy), computed on the CPU,
  and returned as NumPy arrays -- so ``backend="torch"`` is a drop-in for the
  other backends.
* Weights (and ``counts``, ``logits0``) may be NumPy or tensors on any device;
  they are moved to the pass matrix's device.

Dtypes and accuracy
-------------------
Returned floating arrays are float64 and order indices int64. LOO-AUC always
uses exact int64 counting (int64 scores under uniform weights, float64 scores
with the ``tie_tol * sum(w)`` tie rule for float weights) and equals the NumPy
reference bit for bit. The working dtype of the surrogate and of ACES-O's Adam
loop -- the O(steps n^2 m) part, which is where a GPU helps -- is float64 by
default and can be set to float32 (consumer GPUs run float64 up to 64x slower):
``TorchBackend(dtype="float32")`` or the environment variable
``ACES_FAST_TORCH_DTYPE=float32`` read when the backend is first loaded. In
float32 mode results are still returned as float64 but agree with the float64
reference only to ``FLOAT32_RTOL = 1e-4``: relative on surrogate values
``L_j``, absolute times ``sum(w)`` on ``J`` (which can cancel to ~0), absolute
times ``max|grad|`` on the gradient; and to ``FLOAT32_WEIGHT_ATOL = 1e-4``
absolute on ACES-O weights (90 steps, gamma 10). Measured worst cases over
random 5-40 x 5-200 matrices, gamma 1-50: 3e-6, 6e-8, 5e-6 and 2.4e-6. The
tests check these bounds. LOO-AUC and the tie-exact score snapping always run
in exact integer / float64 arithmetic and are unaffected.

Memory and synchronization
--------------------------
Kernels are vectorized across tests and chunked over columns so that no
temporary exceeds ``chunk_elements`` entries (default 2**22, 32 MiB in
float64): LOO-AUC uses (n, k) tensors, the surrogate two (k, U, U) buffers
for U distinct rows (identical rows are merged with multiplicities, which on
real data shrinks ACES-O's top-24 rows to about 6). Host synchronizations
happen only in input validation, a handful of shape-dependent branches (row
de-duplication, empty-input checks), and the final conversion to NumPy; the
Adam loop itself runs without any.

Threads: on the CPU, torch's intra-op thread pool (``torch.set_num_threads``)
applies. For the small matrices of ACES-O, one thread is usually fastest.
"""

from __future__ import annotations

import os
import warnings
from typing import Any, Optional, Tuple

import numpy as np

from .._validation import as_pass_matrix, as_weights, is_torch_tensor
from ..result import RerankResult, SurrogateResult
from .base import Backend, BackendUnavailableError

try:
    import torch
    from . import _torch_ops as ops
except Exception as exc:  # ImportError, or a broken install failing to load its libraries
    torch = None
    ops = None
    _IMPORT_ERROR: Optional[BaseException] = exc
else:
    _IMPORT_ERROR = None

#: Environment variable choosing the working dtype ("float64" or "float32").
DTYPE_ENV_VAR = "ACES_FAST_TORCH_DTYPE"
#: Documented agreement of float32 mode with the float64 reference.
FLOAT32_RTOL = 1e-4
FLOAT32_WEIGHT_ATOL = 1e-4

_DTYPE_NAMES = ("float64", "float32")
# dtypes torch can hand to NumPy; others (bfloat16, float8) are validated in torch
_NUMPY_COMPATIBLE = (
    () if torch is None else
    (torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64,
     torch.float16, torch.float32, torch.float64, torch.complex64, torch.complex128)
)


def _parse_dtype(dtype: Any) -> "torch.dtype":
    if torch is not None and dtype in (torch.float64, torch.float32):
        return dtype
    if isinstance(dtype, str) and dtype.strip().lower() in _DTYPE_NAMES:
        return getattr(torch, dtype.strip().lower())
    raise ValueError(f"torch backend dtype must be 'float64' or 'float32'; got {dtype!r}")


def from_numpy(a: np.ndarray) -> "torch.Tensor":
    """``torch.from_numpy`` without copying, also for read-only arrays.

    torch warns that writing to a tensor over a read-only array is undefined;
    this backend never writes to its inputs, so the warning is silenced.
    """
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*not writable.*")
        return torch.from_numpy(a)


def to_device(x: Any, device: Any, dtype: "torch.dtype") -> "torch.Tensor":
    """A NumPy array, list or tensor (any device) as a tensor on ``device`` in ``dtype``.

    No copy when ``x`` already is such a tensor (or a NumPy array of ``dtype``
    and ``device`` is the CPU).
    """
    if is_torch_tensor(x):
        return x.detach().to(device=device, dtype=dtype)
    if isinstance(x, np.ndarray) and x.dtype.kind in "biuf":
        # torch.from_numpy rejects negative strides and non-native byte order
        x = np.ascontiguousarray(x, dtype=x.dtype.newbyteorder("="))
        return from_numpy(x).to(device=device, dtype=dtype)
    return torch.as_tensor(np.asarray(x), dtype=dtype, device=device)


def to_output(x: Any, numpy_out: bool) -> Any:
    """A result tensor as the caller's array type: NumPy (via the CPU) or unchanged."""
    if x is None or not numpy_out:
        return x
    return x.detach().cpu().numpy()


class TorchBackend(Backend):
    """PyTorch backend; see the module docstring for types, dtypes and memory.

    Parameters
    ----------
    dtype : {"float64", "float32"} or torch dtype
        Working dtype of the surrogate and ACES-O loop (default float64).
    chunk_elements : int, optional
        Cap on the entries of the largest per-chunk temporary (default 2**22).
    """

    name = "torch"

    def __init__(self, dtype: Any = "float64", chunk_elements: Optional[int] = None):
        self.dtype = _parse_dtype(dtype)
        if chunk_elements is None:
            chunk_elements = ops.DEFAULT_CHUNK_ELEMENTS
        if int(chunk_elements) < 1:
            raise ValueError(f"chunk_elements must be >= 1; got {chunk_elements}")
        self.chunk_elements = int(chunk_elements)

    # -- conversions -------------------------------------------------------------

    def prepare(self, B: Any) -> Any:
        """Validate a pass matrix: a tensor stays a (uint8) tensor on its device,
        anything else becomes the validated NumPy ``uint8`` array (outputs NumPy)."""
        if not is_torch_tensor(B):
            return as_pass_matrix(B)
        if B.device.type == "cpu" and B.dtype in _NUMPY_COMPATIBLE:
            return from_numpy(as_pass_matrix(B))
        return ops.check_pass_tensor(B)

    def prepare_weights(self, w: Any, m: int) -> Any:
        """Validate weights: a tensor stays a float64 tensor on its device, else NumPy float64."""
        if not is_torch_tensor(w):
            return as_weights(w, m)
        if w.device.type == "cpu" and w.dtype in _NUMPY_COMPATIBLE:
            return from_numpy(as_weights(w, m))
        return ops.check_weights_tensor(w, m)

    def _matrix(self, B: Any) -> Tuple["torch.Tensor", bool]:
        """``(uint8 tensor, numpy_out)`` for a prepared matrix (NumPy array or tensor)."""
        numpy_out = not is_torch_tensor(B)
        t = from_numpy(np.ascontiguousarray(B)) if numpy_out else B
        if t.dtype == torch.bool:
            t = t.view(torch.uint8)
        return t, numpy_out

    def _vector(self, x: Any, like: "torch.Tensor", dtype: "torch.dtype"
                ) -> Optional["torch.Tensor"]:
        return None if x is None else to_device(x, like.device, dtype)

    # -- kernels (accept NumPy or tensors; output type mirrors B) -------------------

    def loo_auc(self, B, weights, tie_tol, counts=None):
        Bt, numpy_out = self._matrix(B)
        L = ops.loo_auc(Bt, self._vector(weights, Bt, torch.float64), tie_tol,
                        self._vector(counts, Bt, torch.int64), self.chunk_elements)
        return to_output(L, numpy_out)

    def _surrogate(self, Bt, weights, gamma, counts=None):
        L, J, g = ops.surrogate(Bt, self._vector(weights, Bt, self.dtype), gamma,
                                self._vector(counts, Bt, torch.int64), self.dtype,
                                self.chunk_elements)
        return L.to(torch.float64), J.to(torch.float64), g.to(torch.float64)

    def surrogate(self, B, weights, gamma, counts=None):
        Bt, numpy_out = self._matrix(B)
        L, J, g = self._surrogate(Bt, weights, gamma, counts)
        return (to_output(L, numpy_out), float(J) if numpy_out else J,
                to_output(g, numpy_out))

    def _aces_o_fit(self, Bt, logits0, active, gamma, lr, steps, counts=None):
        w, obj = ops.aces_o_fit(Bt, self._vector(logits0, Bt, torch.float64),
                                self._vector(active, Bt, torch.bool), gamma, lr, steps,
                                self._vector(counts, Bt, torch.int64), self.dtype,
                                self.chunk_elements)
        return w.to(torch.float64), obj.to(torch.float64)

    def aces_o_fit(self, B, logits0, active, gamma, lr, steps, counts=None):
        Bt, numpy_out = self._matrix(B)
        w, obj = self._aces_o_fit(Bt, logits0, active, gamma, lr, steps, counts)
        return to_output(w, numpy_out), to_output(obj, numpy_out)

    def row_scores(self, B, w):
        Bt, numpy_out = self._matrix(B)
        return to_output(Bt.to(torch.float64) @ self._vector(w, Bt, torch.float64), numpy_out)

    def info(self) -> dict:
        return {"torch": torch.__version__, "dtype": str(self.dtype).replace("torch.", ""),
                "cuda": torch.cuda.is_available(), "threads": torch.get_num_threads()}

    # -- method glue on tensors (mirrors base.Backend's NumPy glue) ---------------

    def _result(self, scores, weights, method, numpy_out, **extra) -> RerankResult:
        order = ops.descending_order(scores)
        for key in ("loo_auc", "objective"):
            extra[key] = to_output(extra.get(key), numpy_out)
        info = extra.pop("info", {})
        if "rows" in info:
            info = {**info, "rows": to_output(info["rows"], numpy_out)}
        return RerankResult(scores=to_output(scores, numpy_out),
                            weights=to_output(weights, numpy_out),
                            order=to_output(order, numpy_out), method=method,
                            backend=self.name, info=info, **extra)

    def _weighted_result(self, Bt, w, method, tie_tol, numpy_out, **extra) -> RerankResult:
        w = ops.normalized(w)
        tol = tie_tol * float(w.sum())
        scores = ops.snap_ties(Bt.to(torch.float64) @ w, tol)
        return self._result(scores, w, method, numpy_out, **extra)

    def _aces_c_weights(self, Bt, variant, tie_tol):
        L = ops.loo_auc(Bt, None, tie_tol, None, self.chunk_elements)
        informative = L > 0.5  # nan (constant column) compares False
        if variant == "weighted":
            p = Bt.sum(dim=0, dtype=torch.int64).to(torch.float64) / Bt.shape[0]
            w = torch.where(informative, (L - 0.5) * p * (1.0 - p), torch.zeros_like(L))
        else:
            w = informative.to(torch.float64)
        fallback = not bool((w > 0).any())
        if fallback:
            w = ops.nonconstant_mask(Bt).to(torch.float64)
        return w, L, fallback

    def majority_vote(self, B, tie_tol: float = 1e-9) -> RerankResult:
        Bt, numpy_out = self._matrix(B)
        w = ops.nonconstant_mask(Bt).to(torch.float64)
        return self._weighted_result(Bt, w, "majority", tie_tol, numpy_out)

    def aces_c_weights(self, B, variant, tie_tol):
        Bt, numpy_out = self._matrix(B)
        w, L, fallback = self._aces_c_weights(Bt, variant, tie_tol)
        return to_output(w, numpy_out), to_output(L, numpy_out), fallback

    def aces_c(self, B, variant: str = "weighted", tie_tol: float = 1e-9) -> RerankResult:
        Bt, numpy_out = self._matrix(B)
        w, L, fallback = self._aces_c_weights(Bt, variant, tie_tol)
        method = "aces-c" if variant == "weighted" else "aces-c-filter"
        return self._weighted_result(Bt, w, method, tie_tol, numpy_out, loo_auc=L,
                                     fallback=fallback, info={"variant": variant})

    def aces_o(self, B, gamma, lr, steps, top_k, init, tie_tol: float = 1e-9) -> RerankResult:
        Bt, numpy_out = self._matrix(B)
        active = ops.nonconstant_mask(Bt)
        logits0 = torch.zeros(Bt.shape[1], dtype=torch.float64, device=Bt.device)
        if init == "aces-c":
            wc, _, _ = self._aces_c_weights(Bt, "weighted", tie_tol)
            logits0 = torch.where(active, torch.log(ops.normalized(wc) + 1e-3), logits0)
        rows = ops.top_k_rows(Bt, top_k)
        Bk = Bt if rows.shape[0] == Bt.shape[0] else Bt[rows].contiguous()
        w, objective = self._aces_o_fit(Bk, logits0, active, gamma, lr, steps)
        info = {"gamma": gamma, "lr": lr, "steps": steps, "top_k": top_k, "init": init,
                "rows": rows}
        method = "aces-o-warm" if init == "aces-c" else "aces-o"
        return self._weighted_result(Bt, w, method, tie_tol, numpy_out,
                                     objective=objective, info=info)

    def codet(self, B, exponent: float) -> RerankResult:
        Bt, numpy_out = self._matrix(B)
        scores = ops.codet_scores(Bt, exponent)
        method = "codet" if exponent == 0.5 else "codet-linear" if exponent == 1 else "codet"
        return self._result(scores, None, method, numpy_out, info={"exponent": exponent})

    def b4(self, B, alpha: float, beta0: float) -> RerankResult:
        Bt, numpy_out = self._matrix(B)
        scores = ops.b4_scores(Bt, alpha, beta0)
        return self._result(scores, None, "b4", numpy_out,
                            info={"alpha": alpha, "beta0": beta0})

    def loo_auc_public(self, B, weights, tie_tol):
        return self.loo_auc(B, weights, tie_tol)

    def surrogate_public(self, B, weights, gamma) -> SurrogateResult:
        return SurrogateResult(*self.surrogate(B, weights, gamma))


def load() -> Backend:
    """The torch backend, working dtype from ``ACES_FAST_TORCH_DTYPE`` (default float64)."""
    if torch is None:
        if isinstance(_IMPORT_ERROR, ImportError):
            reason = "torch is not installed (pip install aces_fast[torch])"
        else:
            reason = f"torch failed to import: {_IMPORT_ERROR!r}"
        raise BackendUnavailableError("torch", reason)
    dtype = os.environ.get(DTYPE_ENV_VAR) or "float64"
    try:
        return TorchBackend(dtype=dtype)
    except ValueError:
        raise BackendUnavailableError(
            "torch", f"{DTYPE_ENV_VAR}={dtype!r} is not 'float64' or 'float32'") from None
