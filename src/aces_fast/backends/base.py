"""The backend interface, and the NumPy array primitives shared by the array backends.

A backend is the ``nx`` that :mod:`aces_fast._semantics` computes every method
against. It supplies

* kernels (docs/contract.rst §2–§3): :meth:`Backend.loo_auc`, :meth:`Backend.surrogate`,
  :meth:`Backend.aces_o_fit`, and the smaller ones the semantics call --
  ``loo_auc_uniform``, ``row_scores``, ``column_sums``, ``row_sums``,
  ``row_groups`` (distinct rows), ``take_rows``, ``row_count``, ``row_mask``;
* array primitives over the last axis -- ``sum`` (its rounding is the
  backend's: NumPy pairwise, numba ascending, torch exact), ``count``,
  ``none``, ``count_nonzero``, ``where``, ``fmax``, ``log``, ``lgamma``, ``to_float``, ``zeros``,
  ``argsort`` (stable),
  ``sort``, ``take``, ``scatter``, ``flip``, ``concat``, ``cummax``, ``arange``,
  ``by_distinct_keys``, ``maybe``;
* :meth:`Backend.rerank` / :meth:`Backend.rerank_batch`: run a registered
  method (by default its semantics on this backend; ``cpp`` calls its compiled
  copy) and pack the :class:`~aces_fast.result.RerankResult`.

:class:`ArrayBackend` implements the primitives and the small kernels in NumPy
for the backends working on NumPy arrays (``cpp``, ``numba``, ``numpy``).

Arguments reaching a backend are already validated: ``B`` is a C-contiguous
``uint8`` (n, m) array of 0/1 with n >= 1, weights are finite non-negative
float64 (m,), method parameters are complete and checked (see
:meth:`aces_fast._registry.MethodSpec.validate`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from .. import _registry, consensus
from .._validation import as_pass_matrix, as_weights
from ..result import RerankResult, SurrogateResult

if TYPE_CHECKING:
    from .._ops import ArrayOps
    from ..batch_result import BatchResult

try:  # the C function behind np.count_nonzero: its Python wrapper costs 4x the count
    # on the short vectors of a microsecond-scale call
    from numpy._core.multiarray import count_nonzero as _count_nonzero
except ImportError:  # pragma: no cover - NumPy < 2
    _count_nonzero = np.count_nonzero


class BackendUnavailableError(RuntimeError):
    """A backend was requested that cannot run here; ``reason`` says why."""

    def __init__(self, name: str, reason: str):
        super().__init__(f"backend {name!r} is unavailable: {reason}")
        self.name = name
        self.reason = reason


class Backend:
    """Base class: the kernels a backend implements, and the method entry points."""

    #: registry name of the backend
    name: str = "base"

    # -- kernels ---------------------------------------------------------------

    def loo_auc(
        self, B: Any, weights: Any | None, tie_tol: float, counts: Any | None = None
    ) -> Any:
        """LOO-AUC of every column: float64 (m,), ``nan`` for constant columns.

        ``weights=None`` means uniform integer weights. ``counts`` (int64 (n,))
        gives row multiplicities: a row with count c acts as c identical rows.
        """
        raise NotImplementedError

    def surrogate(
        self, B: Any, weights: Any, gamma: float, counts: Any | None = None
    ) -> tuple[Any, Any, Any]:
        """``(L (m,), J, dJ/dw (m,))`` of docs/contract.rst §3; ``L_j = nan`` if P_j or F_j is empty."""
        raise NotImplementedError

    def aces_o_fit(
        self,
        B: Any,
        logits0: Any,
        active: Any,
        gamma: float,
        lr: float,
        steps: int,
        counts: Any | None = None,
        bins: int | None = None,
    ) -> tuple[Any, Any]:
        """Run ACES-O's Adam ascent on ``B``; return ``(weights (m,), objective (steps+1,))``.

        ``bins``: the binned surrogate approximation, which only the ``cpp``
        backend implements.
        """
        raise NotImplementedError

    def loo_auc_uniform(self, B: Any) -> tuple[Any, Any, Any]:
        """Uniform-weight LOO-AUC: ``(L (m,), passers per test int64 (m,), plan)``;
        ``plan`` is handed back to ``row_scores`` (what the kernel learnt about
        ``B``, e.g. identical rows), ``None`` when there is nothing to share."""
        raise NotImplementedError

    def no_bins(self, bins: int | None) -> None:
        """Raise the error of a backend without the binned surrogate when ``bins`` is set."""
        if bins is not None:
            raise ValueError(
                "bins= (the binned surrogate approximation) is implemented by the "
                f"cpp backend only; the selected backend is {self.name!r}"
            )

    # -- conversions (overridden by device backends) ----------------------------

    def prepare(self, B: Any) -> Any:
        """Validate the user's pass matrix into this backend's working form."""
        return as_pass_matrix(B)

    def prepare_batch(self, items: list[Any], start: int = 0) -> list[Any]:
        """:meth:`prepare` of every task of a batch; the message of an error starts
        with ``"task <index>:"`` (``start`` + the position in ``items``)."""
        Bs = []
        for t, B in enumerate(items, start):
            try:
                Bs.append(self.prepare(B))
            except TypeError as exc:
                raise TypeError(f"task {t}: {exc}") from None
            except ValueError as exc:
                raise ValueError(f"task {t}: {exc}") from None
        return Bs

    def prepare_weights(self, w: Any, m: int) -> Any:
        """Validate user weights for an ``m``-test matrix into float64 (m,)."""
        return as_weights(w, m)

    # -- methods -----------------------------------------------------------------

    def rerank(self, B: Any, method: Any, values: dict[str, Any]) -> RerankResult:
        """Rank one prepared matrix with registered method ``method`` (a name or its
        spec); ``values``: its complete, validated parameters
        (:func:`aces_fast._registry.method_params`)."""
        spec = _registry.get(method)
        # every concrete backend is an ArrayOps (tests/test_backend_protocol.py)
        return spec.pack(spec.run(cast("ArrayOps", self), B, values), values, self.name)

    def rerank_batch(
        self, Bs: Sequence[Any], method: str, values: dict[str, Any], n_threads: int | None
    ) -> BatchResult | list[RerankResult] | None:
        """Rank many prepared matrices at once -- a :class:`~aces_fast.BatchResult`, or
        the list of per-task results -- or ``None`` when this backend has no faster
        way than :meth:`rerank` per task (see :mod:`aces_fast.batch`)."""
        return None

    # -- public kernels with result packaging ----------------------------------

    def loo_auc_public(self, B: Any, weights: Any | None, tie_tol: float) -> Any:
        return self.loo_auc(B, weights, tie_tol)

    def surrogate_public(self, B: Any, weights: Any, gamma: float) -> SurrogateResult:
        L, J, g = self.surrogate(B, weights, gamma)
        return SurrogateResult(L, float(J), g)

    def info(self) -> dict[str, Any]:
        """Versions and settings reported by :func:`aces_fast.show_config`."""
        return {}

    def warmup(self, progress: Callable[[int, int, str], None] | None = None) -> dict[str, Any]:
        """Compile or load whatever the first calls would (JIT backends); no-op here.

        Call before timing or serving so no measured call pays one-off costs
        (public: :func:`aces_fast.warmup`). ``progress(done, total, label)`` is
        called before each step and once at the end. Returns facts about the work
        done (empty when there was none to do).
        """
        return {}


class ArrayBackend(Backend):
    """A backend on NumPy arrays: primitives and small kernels in NumPy.

    Per-task arrays only (no task axis): reductions over the last axis of a
    1-D array return NumPy scalars.
    """

    # -- small kernels -------------------------------------------------------------

    def loo_auc_uniform(self, B: np.ndarray) -> tuple[Any, Any, Any]:
        return self.loo_auc(B, None, 0.0), self.column_sums(B), None

    @staticmethod
    def column_sums(B: np.ndarray) -> np.ndarray:
        """Passing candidates per test, int64 (m,)."""
        return np.asarray(B.sum(axis=0, dtype=np.int64))

    @staticmethod
    def row_sums(B: np.ndarray) -> np.ndarray:
        """Passes per candidate, int64 (n,)."""
        return np.asarray(B.sum(axis=1, dtype=np.int64))

    @staticmethod
    def row_count(B: np.ndarray) -> int:
        return int(B.shape[0])

    @staticmethod
    def row_mask(B: np.ndarray) -> None:
        return None

    @staticmethod
    def take_rows(B: np.ndarray, rows: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(B[rows])

    @staticmethod
    def row_groups(B: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return consensus.row_groups(B)

    def row_scores(self, B: np.ndarray, w: np.ndarray, plan: Any = None) -> np.ndarray:
        """``B @ w`` as float64 (n,), O(n m).

        ``B @ w`` on a uint8 matrix first casts all of ``B`` to float64 (8x the
        input); blocks of rows keep that temporary at about 32 MiB.
        """
        n, m = B.shape
        rows = max(1, (1 << 22) // max(m, 1))
        if n <= rows:
            return np.asarray(B @ w)
        out = np.empty(n)
        for start in range(0, n, rows):
            out[start : start + rows] = B[start : start + rows] @ w
        return out

    # -- primitives (over the last axis) -------------------------------------------

    @staticmethod
    def sum(x: np.ndarray) -> Any:
        """Float sum, pairwise (NumPy's reduction)."""
        return x.sum(axis=-1) if x.ndim == 1 else x.sum(axis=-1, keepdims=True)

    @staticmethod
    def none(x: np.ndarray) -> Any:
        """No non-zero entry along the last axis (a bool per task)."""
        return _count_nonzero(x) == 0 if x.ndim == 1 else ~x.any(axis=-1, keepdims=True)

    @staticmethod
    def count_nonzero(x: np.ndarray) -> Any:
        """Non-zero entries along the last axis (int per task)."""
        return _count_nonzero(x) if x.ndim == 1 else np.count_nonzero(x, axis=-1)

    @staticmethod
    def maybe(mask: Any) -> bool:
        """Whether ``mask`` (any shape) may hold a True (here: whether it does)."""
        return mask if type(mask) is bool else bool(_count_nonzero(mask))

    @staticmethod
    def count(x: np.ndarray) -> Any:
        """Exact integer sum (int64)."""
        return x.sum(axis=-1, dtype=np.int64)

    @staticmethod
    def where(cond: Any, a: Any, b: Any) -> Any:
        """``np.where``; a scalar condition picks ``a`` or ``b`` as they are."""
        if type(cond) is bool or type(cond) is np.bool_:
            return a if cond else b
        return np.where(cond, a, b)

    fmax = staticmethod(np.fmax)
    log = staticmethod(np.log)

    @staticmethod
    def lgamma(x: np.ndarray) -> np.ndarray:
        # math.lgamma element by element: CPython's own lgamma, whose rounding
        # differs from the C library's in about 45% of arguments (B4's scores
        # are defined by it, which is why B4 has no compiled copy)
        return np.array([math.lgamma(v) for v in x.tolist()], dtype=np.float64)

    @staticmethod
    def to_float(x: Any) -> Any:
        return np.asarray(x, dtype=np.float64)

    @staticmethod
    def int_power(k: Any, exponent: float, top: int) -> Any:
        return np.asarray(k, dtype=np.float64) ** exponent

    @staticmethod
    def zeros(like: np.ndarray) -> np.ndarray:
        return np.zeros(like.shape)

    @staticmethod
    def argsort(x: np.ndarray) -> np.ndarray:
        """Stable ascending order, int64."""
        return x.argsort(axis=-1, kind="stable")  # the method: a third of np.argsort's overhead

    @staticmethod
    def sort(x: np.ndarray) -> np.ndarray:
        return np.sort(x, axis=-1)

    @staticmethod
    def take(x: np.ndarray, idx: np.ndarray) -> np.ndarray:
        return x[idx] if x.ndim == 1 else np.take_along_axis(x, idx, axis=-1)

    @staticmethod
    def scatter(idx: np.ndarray, values: np.ndarray) -> np.ndarray:
        """``out`` with ``out[..., idx] = values`` (``idx`` a permutation)."""
        out = np.empty_like(values)
        if values.ndim == 1:
            out[idx] = values
        else:
            np.put_along_axis(out, idx, values, axis=-1)
        return out

    @staticmethod
    def flip(x: np.ndarray) -> np.ndarray:
        return x[..., ::-1]

    @staticmethod
    def concat(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return np.concatenate((a, b), axis=-1)

    @staticmethod
    def cummax(x: np.ndarray) -> np.ndarray:
        return np.maximum.accumulate(x, axis=-1)

    @staticmethod
    def arange(start: int, stop: int, like: Any = None) -> np.ndarray:
        return np.arange(start, stop, dtype=np.int64)

    @staticmethod
    def by_distinct_keys(fn: Callable[..., np.ndarray], *keys: np.ndarray) -> np.ndarray:
        """``fn(*keys)``, evaluated on every key (the device backends evaluate each
        distinct key once, so equal keys get bit-equal results)."""
        return fn(*keys)
