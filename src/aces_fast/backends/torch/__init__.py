"""``torch``: the kernels in PyTorch, on the input's device (CPU or CUDA).

The methods are :mod:`aces_fast._semantics` on tensors, with this backend's
kernels (modules :mod:`.loo_auc`, :mod:`.surrogate`, :mod:`.aces_o`,
:mod:`.scores`, :mod:`.dedup`; :mod:`.validate` checks tensors where they
live) and primitives; :mod:`.batch` runs the same semantics on zero-padded
batches of tasks.

Input and output types
----------------------
* A ``torch.Tensor`` pass matrix is validated where it lives and every result
  stays there: ``RerankResult`` arrays (``scores``, ``weights``, ``order``,
  ``loo_auc``, ``objective``, ``info["rows"]``), LOO-AUC values and
  ``SurrogateResult`` fields (``objective`` as a 0-d tensor) are tensors on the
  input's device. Validation follows the rules of :mod:`aces_fast._validation`
  (same errors as for NumPy input) with tensor ops on the tensor's own device,
  never through NumPy, and reads the device once: for one matrix, and for all
  the tensors of a ``rerank_batch`` together (:mod:`.validate`; zero-copy for
  contiguous ``uint8``/``bool``).
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
real data shrinks ACES-O's top-24 rows to about 6).

Host synchronizations: majority vote, ACES-C (single call and batch), CodeT,
B4 and the LOO-AUC kernel never read the device between validated input and
results: data-dependent branches compute both sides and select (``maybe``
answers True without looking), and tables have fixed sizes (score levels
bounded by n or m + 1; CodeT's and B4's consensus sets found by a stable sort
of packed row keys, one slot per row, :mod:`.dedup`) instead of
data-dependent shapes. The one read is the single call's copy-out of
ACES-C's ``fallback`` flag into a Python bool
(:func:`aces_fast._registry.host_flag`); a batch keeps its flags on the
device. Input validation reads the device once (per call, or per batch), and
the surrogate kernel once more (row de-duplication). ACES-O
reads twice per call, both before its Adam loop (the distinct-row counts and
the symmetry classes' sizes, which shape the loop's tensors); each Adam step
is then a fixed sequence of 58 aten ops (one column chunk of pair tensors)
on buffers made once -- no sort, no host read, no allocation -- with the same
arguments at every step, so that on CUDA one captured step is replayed as a
CUDA graph (:func:`.aces_o.repeat`; ``ACES_FAST_TORCH_CUDA_GRAPHS=0`` runs the
steps eagerly). Its pair
tensors hold ``chunk_elements`` entries each when given, else on CUDA a share
of the free device memory (:func:`.aces_o.pair_budget`).
tests/test_torch_sync.py counts the aten ops and host reads of every method
and kernel on CPU tensors.

Fused mode: ``TorchBackend(fused=True)`` (or ``ACES_FAST_TORCH_FUSED=1``) computes
the surrogate's pair sums in one ``torch.compile``-d computation with no pair
tensor (:mod:`.fused`; opt-in: it compiles on first use, see
docs/backends.rst, "torch: fused pair sums").

Threads: on the CPU, torch's intra-op thread pool (``torch.set_num_threads``)
applies. For the small matrices of ACES-O, one thread is usually fastest.

Batches: :meth:`TorchBackend.rerank_batch` ranks many tasks (majority vote,
ACES-C, ACES-O) as zero-padded (T, n, m) tensors on one device and returns the
columnar :class:`~aces_fast.BatchResult`, its columns on that device; the
number of ops per padded chunk does not depend on the number of tasks. Scores ``B w``
and the weight sums are rounded independently of summation order
(:func:`.scores.row_scores`, :func:`.scores.exact_sum`), so a task's majority / ACES-C
batch results equal its per-task results bit for bit, on any device. Batched
ACES-O runs the same operations with a task axis in front, which changes the
summation order inside the surrogate's matrix products: weights agree with the
per-task path to 1e-9 (measured: at most 1e-15 on random tasks, 7e-11 over
the 164 CodeGen HumanEval tasks, where the per-task path and the NumPy
reference already differ by 4e-11); top-k rows are identical, and so were
the orders on all tested data (scores differing by ~1e-11 can only swap
candidates whose scores nearly tie). As
for every backend, a task with an exact symmetry between tests (e.g. the
identity matrix) sits on an unstable point of ACES-O, where rounding decides
the outcome and no two summation orders need agree.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ... import _env, _registry
from ..._validation import as_pass_matrix, as_weights, is_torch_tensor
from ...batch_result import BatchResult
from ...result import SurrogateResult
from ..base import Backend, BackendUnavailableError

try:
    import torch

    from . import aces_o as _aces_o
    from . import dedup as _dedup
    from . import fused as _fused
    from . import loo_auc as _loo_auc
    from . import scores as _scores
    from . import surrogate as _surrogate
    from .chunks import chunk_budget
    from .columns import upload
    from .validate import (
        check_pass_stack,
        check_pass_tensor,
        check_pass_tensors,
        check_weights_tensor,
        from_numpy,
    )
except Exception as exc:  # ImportError, or a broken install failing to load its libraries
    torch = None  # type: ignore[assignment]
    _IMPORT_ERROR: BaseException | None = exc
else:
    _IMPORT_ERROR = None

#: Environment variable choosing the working dtype ("float64" or "float32").
DTYPE_ENV_VAR = _env.TORCH_DTYPE
#: Documented agreement of float32 mode with the float64 reference.
FLOAT32_RTOL = 1e-4
FLOAT32_WEIGHT_ATOL = 1e-4

_DTYPE_NAMES = ("float64", "float32")


def _parse_dtype(dtype: Any) -> torch.dtype:
    if torch is not None and dtype in (torch.float64, torch.float32):
        return dtype
    if isinstance(dtype, str) and dtype.strip().lower() in _DTYPE_NAMES:
        return getattr(torch, dtype.strip().lower())
    raise ValueError(f"torch backend dtype must be 'float64' or 'float32'; got {dtype!r}")


def to_device(x: Any, device: Any, dtype: torch.dtype) -> torch.Tensor:
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


def _to_numpy(x: Any) -> Any:
    return x.detach().cpu().numpy()


class TorchBackend(Backend):
    """PyTorch backend; see the module docstring for types, dtypes and memory.

    Parameters
    ----------
    dtype : {"float64", "float32"} or torch dtype
        Working dtype of the surrogate and ACES-O loop (default float64).
    chunk_elements : int, optional
        Cap on the entries of the largest per-chunk temporary (default 2**22
        on the CPU; on CUDA sized by the free device memory,
        :func:`.chunks.chunk_budget`).
    fused : bool, default False
        Compute the surrogate's pair sums (the surrogate kernel and every
        ACES-O Adam step) in one ``torch.compile``-d computation with no pair
        tensor (:mod:`.fused`): much faster for large pools, at the price of
        compiling (seconds) on a process's first call. ``RuntimeError`` when
        ``torch.compile`` is not supported here.
    """

    name = "torch"

    def __init__(
        self, dtype: Any = "float64", chunk_elements: int | None = None, fused: bool = False
    ):
        if not isinstance(fused, (bool, np.bool_)):
            raise TypeError(f"fused must be a bool; got {type(fused).__name__}")
        self.fused = bool(fused)
        if self.fused:
            _fused.check_compiler()
        self.dtype = _parse_dtype(dtype)
        #: cap on ACES-O's pair tensors; None: sized by the free memory on CUDA
        #: (:func:`.aces_o.pair_budget`), ``DEFAULT_CHUNK_ELEMENTS`` on the CPU
        self.pair_elements = None if chunk_elements is None else int(chunk_elements)
        if chunk_elements is not None and int(chunk_elements) < 1:
            raise ValueError(f"chunk_elements must be >= 1; got {chunk_elements}")
        #: the caller's cap, or None: :meth:`chunk_cap` sizes it per device
        self.chunk_given = self.pair_elements
        #: the cap on the CPU (the caller's, else ``DEFAULT_CHUNK_ELEMENTS``)
        self.chunk_elements = chunk_budget(torch.device("cpu"), chunk_elements)

    def chunk_cap(self, device: torch.device) -> int:
        """Entries of the largest per-chunk temporary on ``device`` (:func:`.chunks.chunk_budget`)."""
        return chunk_budget(device, self.chunk_given)

    # -- conversions -------------------------------------------------------------

    def prepare(self, B: Any) -> Any:
        """Validate a pass matrix: a tensor is checked where it lives and stays a
        (uint8) tensor there (:func:`.validate.check_pass_tensor`, one host read);
        anything else becomes the validated NumPy ``uint8`` array (outputs NumPy)."""
        if not is_torch_tensor(B):
            return as_pass_matrix(B)
        return check_pass_tensor(B)

    def prepare_batch(self, items: list[Any], start: int = 0) -> list[Any]:
        """:meth:`prepare` of every task, the tensors all at once: checked where they
        live and read once per device (:func:`.validate.check_pass_tensors`).

        The error is the one of the first invalid task, its message prefixed
        ``"task <start + index>: "``, as for any backend."""
        if all(type(B) is torch.Tensor for B in items):  # the usual batch: one route
            return check_pass_tensors(items, indices=range(start, start + len(items)))
        tensors = [t for t, B in enumerate(items) if is_torch_tensor(B)]
        if not tensors:
            return super().prepare_batch(items, start)
        out: list[Any] = list(items)
        failure: Exception | None = None
        for t, B in enumerate(items):
            if not is_torch_tensor(B):
                try:
                    out[t] = super().prepare_batch([B], start + t)[0]
                except (TypeError, ValueError) as exc:
                    failure = exc
                    tensors = [i for i in tensors if i < t]  # only those before it count
                    break
        if tensors:
            checked = check_pass_tensors(
                [items[t] for t in tensors], indices=[start + t for t in tensors]
            )
            for t, B in zip(tensors, checked):
                out[t] = B
        if failure is not None:
            raise failure
        return out

    def prepare_weights(self, w: Any, m: int) -> Any:
        """Validate weights: a tensor is checked where it lives and stays a float64
        tensor there (:func:`.validate.check_weights_tensor`, one host read); else
        NumPy float64."""
        if not is_torch_tensor(w):
            return as_weights(w, m)
        return check_weights_tensor(w, m)

    def _matrix(self, B: Any) -> tuple[torch.Tensor, bool]:
        """``(uint8 tensor, numpy_out)`` for a prepared matrix (NumPy array or tensor)."""
        numpy_out = not is_torch_tensor(B)
        t = from_numpy(np.ascontiguousarray(B)) if numpy_out else B
        if t.dtype == torch.bool:
            t = t.view(torch.uint8)
        return t, numpy_out

    def _vector(self, x: Any, like: torch.Tensor, dtype: torch.dtype) -> torch.Tensor | None:
        return None if x is None else to_device(x, like.device, dtype)

    # -- kernels (accept NumPy or tensors; output type mirrors B) -------------------

    def loo_auc(self, B, weights, tie_tol, counts=None):
        Bt, numpy_out = self._matrix(B)
        L = _loo_auc.loo_auc(
            Bt,
            self._vector(weights, Bt, torch.float64),
            tie_tol,
            self._vector(counts, Bt, torch.int64),
            self.chunk_cap(Bt.device),
        )
        return to_output(L, numpy_out)

    def _surrogate(self, Bt, weights, gamma, counts=None):
        L, J, g = _surrogate.surrogate(
            Bt,
            self._vector(weights, Bt, self.dtype),
            gamma,
            self._vector(counts, Bt, torch.int64),
            self.dtype,
            self.chunk_cap(Bt.device),
            self.fused,
        )
        return L.to(torch.float64), J.to(torch.float64), g.to(torch.float64)

    def surrogate(self, B, weights, gamma, counts=None):
        Bt, numpy_out = self._matrix(B)
        L, J, g = self._surrogate(Bt, weights, gamma, counts)
        return (to_output(L, numpy_out), float(J) if numpy_out else J, to_output(g, numpy_out))

    def _aces_o_fit(self, Bt, logits0, active, gamma, lr, steps, counts=None):
        return _aces_o.aces_o_fit(
            Bt,
            self._vector(logits0, Bt, torch.float64),
            self._vector(active, Bt, torch.bool),
            gamma,
            lr,
            steps,
            self._vector(counts, Bt, torch.int64),
            self.dtype,
            self.pair_elements,
            self.fused,
        )

    def aces_o_fit(self, B, logits0, active, gamma, lr, steps, counts=None, bins=None):
        self.no_bins(bins)
        Bt, numpy_out = self._matrix(B)
        w, obj = self._aces_o_fit(Bt, logits0, active, gamma, lr, steps, counts)
        return to_output(w, numpy_out), to_output(obj, numpy_out)

    def row_scores(self, B, w, plan=None):
        """``B @ w`` in float64, rounded independently of the summation order
        (:func:`.scores.row_scores`); any leading task dimensions."""
        Bt, numpy_out = self._matrix(B)
        return to_output(
            _scores.row_scores(Bt, self._vector(w, Bt, torch.float64), self.chunk_cap(Bt.device)),
            numpy_out,
        )

    def loo_auc_uniform(self, B):
        """``(L (m,), passers (m,), None)``: :func:`.loo_auc.loo_auc_uniform` as a
        batch of one."""
        L, passers = _loo_auc.loo_auc_uniform(B[None], chunk_elements=self.chunk_cap(B.device))
        return L[0], passers[0], None

    @staticmethod
    def column_sums(B):
        return B.sum(dim=-2, dtype=torch.int64)

    @staticmethod
    def row_sums(B):
        return B.sum(dim=-1, dtype=torch.int64)

    @staticmethod
    def row_count(B):
        # a tensor, so that divisions by it round as in the padded batch path
        return torch.full((1,), B.shape[0], dtype=torch.float64, device=B.device)

    @staticmethod
    def row_mask(B):
        return None

    @staticmethod
    def take_rows(B, rows):
        return B[rows].contiguous()

    row_groups = staticmethod(lambda B: _dedup.row_groups(B))

    def warmup(self, progress: Callable[[int, int, str], None] | None = None) -> dict[str, Any]:
        """In fused mode, compile the pair sums (:func:`.fused.warm_up`: both
        branches, a batch of one and of many, in the working dtype, on the CPU
        and on CUDA when there is one) so that no later call pays it; otherwise
        nothing to do."""
        if not self.fused:
            return {}
        devices = [torch.device("cpu")]
        if torch.cuda.is_available():
            devices.append(torch.device("cuda", torch.cuda.current_device()))
        steps: dict[str, float] = {}
        compiled = 0
        for k, dev in enumerate(devices):
            if progress is not None:
                progress(k, len(devices), f"fused pair sums on {dev.type}")
            tick = time.perf_counter()
            compiled += _fused.warm_up(self.dtype, dev)
            steps[dev.type] = round(time.perf_counter() - tick, 3)
        if progress is not None:
            progress(len(devices), len(devices), "done")
        return {"fused": True, "compiled": compiled, "steps": steps}

    def info(self) -> dict:
        return {
            "torch": torch.__version__,
            "dtype": str(self.dtype).replace("torch.", ""),
            "fused": self.fused,
            "cuda": torch.cuda.is_available(),
            "threads": torch.get_num_threads(),
        }

    # -- primitives (over the last axis; reductions keep it) ----------------------------

    @staticmethod
    def sum(x):
        """Float sum rounded independently of order and padding (:func:`.scores.exact_sum`)."""
        return _scores.exact_sum(x).unsqueeze(-1)

    @staticmethod
    def none(x):
        return ~(x != 0).any(dim=-1, keepdim=True)

    @staticmethod
    def count_nonzero(x):
        return torch.count_nonzero(x, dim=-1)

    @staticmethod
    def maybe(mask) -> bool:
        # True without looking: reading the mask would sync with the device, and the
        # semantics select per element (where), so the skipped work is only a shortcut
        return True

    @staticmethod
    def count(x):
        return x.sum(dim=-1, dtype=torch.int64)

    @staticmethod
    def where(cond, a, b):
        return torch.where(cond, a, b)

    @staticmethod
    def fmax(x, y):
        # torch.full fills on the device; torch.as_tensor(y, device=...) would copy from the host
        return torch.fmax(x, torch.full((), y, dtype=x.dtype, device=x.device))

    @staticmethod
    def log(x):
        return torch.log(x)

    @staticmethod
    def lgamma(x):
        return torch.lgamma(x)

    @staticmethod
    def to_float(x):
        return x.to(torch.float64)

    @staticmethod
    def int_power(k, exponent, top):
        # torch's pow and sqrt (vectorized, Sleef) miss the correct rounding by one
        # unit for about 0.5% of integers on an AVX-512 host: NumPy's powers of
        # 0..top, uploaded (no host wait) and gathered, give NumPy's bits
        table = np.arange(top + 1, dtype=np.float64) ** exponent
        return upload(table, k.device)[k]

    @staticmethod
    def zeros(like):
        return torch.zeros(like.shape, dtype=torch.float64, device=like.device)

    @staticmethod
    def argsort(x):
        return torch.sort(x, dim=-1, stable=True).indices

    @staticmethod
    def sort(x):
        return torch.sort(x, dim=-1).values

    @staticmethod
    def take(x, idx):
        return x.gather(-1, idx)

    @staticmethod
    def scatter(idx, values):
        return torch.empty_like(values).scatter_(-1, idx, values)

    @staticmethod
    def flip(x):
        return torch.flip(x, dims=(-1,))

    @staticmethod
    def concat(a, b):
        return torch.cat((a, b), dim=-1)

    @staticmethod
    def cummax(x):
        return torch.cummax(x, dim=-1).values

    @staticmethod
    def arange(start, stop, like):
        return torch.arange(start, stop, dtype=torch.int64, device=like.device)

    @staticmethod
    def by_distinct_keys(fn: Callable[..., Any], *keys: Any) -> Any:
        return _dedup.by_distinct_keys(fn, *keys)

    # -- methods ---------------------------------------------------------------------

    def rerank(self, B, method, values):
        """The method's semantics on tensors; results mirror ``B``'s type."""
        spec = _registry.get(method)
        Bt, numpy_out = self._matrix(B)
        return spec.pack(
            spec.run(self, Bt, values), values, self.name, _to_numpy if numpy_out else None
        )

    def rerank_batch(
        self, Bs: Sequence[Any], method: str, values: dict[str, Any], n_threads: int | None
    ) -> BatchResult | None:
        """Methods over tasks (majority vote, ACES-C, ACES-O) on zero-padded batches,
        as a columnar :class:`~aces_fast.BatchResult`; see :func:`.batch.rerank_batch`.
        ``None`` for the others (CodeT, B4)."""
        from .batch import rerank_batch

        return rerank_batch(self, Bs, method, values, n_threads)

    def rerank_stack(
        self, stack: Any, method: str, values: dict[str, Any], n_threads: int | None
    ) -> BatchResult | None:
        """:meth:`rerank_batch` of the tasks of a (T, n, m) ``uint8`` tensor, ranked
        as slices of it (:func:`.batch.rerank_stack`), checked by one reduction
        and one read. ``None`` (the caller then splits the stack into tasks,
        whose validation names the first invalid one) for anything else: a NumPy
        stack, another dtype or layout, a value other than 0 and 1, a method
        not over tasks."""
        from .batch import rerank_stack

        if not is_torch_tensor(stack) or not _registry.get(method).over_tasks:
            return None
        checked = check_pass_stack(stack)
        return None if checked is None else rerank_stack(self, checked, method, values, n_threads)

    def loo_auc_public(self, B, weights, tie_tol):
        return self.loo_auc(B, weights, tie_tol)

    def surrogate_public(self, B, weights, gamma) -> SurrogateResult:
        return SurrogateResult(*self.surrogate(B, weights, gamma))


def load() -> Backend:
    """The torch backend, working dtype from ``ACES_FAST_TORCH_DTYPE`` (default float64),
    fused pair sums when ``ACES_FAST_TORCH_FUSED=1`` (:mod:`.fused`)."""
    if torch is None:
        if isinstance(_IMPORT_ERROR, ImportError):
            reason = "torch is not installed (pip install 'aces_fast[torch]')"
        else:
            reason = f"torch failed to import: {_IMPORT_ERROR!r}"
        raise BackendUnavailableError("torch", reason)
    dtype = os.environ.get(DTYPE_ENV_VAR) or "float64"
    try:
        fused = _fused.env_fused()
    except ValueError as exc:  # ACES_FAST_TORCH_FUSED is no switch word
        raise BackendUnavailableError("torch", str(exc)) from None
    try:
        return TorchBackend(dtype=dtype, fused=fused)
    except ValueError:
        raise BackendUnavailableError(
            "torch", f"{DTYPE_ENV_VAR}={dtype!r} is not 'float64' or 'float32'"
        ) from None
    except RuntimeError as exc:  # fused mode asked for where torch.compile cannot run
        raise BackendUnavailableError("torch", str(exc)) from None
