"""The result of :func:`aces_fast.rerank_batch`: :class:`BatchResult`.

A batch of ``T`` tasks is held as a few flat arrays in Arrow's list layout --
the per-candidate outputs of every task one after the other in one values
array, with ``T + 1`` offsets -- plus per-task scalars as arrays of length
``T``. The ``cpp`` backend writes these arrays directly (one allocation per
column for the whole batch, none per task); item ``t``, the
:class:`~aces_fast.result.RerankResult` of task ``t``, is built only when asked
for, from slices (views) of the flat arrays.

Offsets are NumPy ``int64`` arrays on the host; the values arrays are NumPy
arrays or, from the torch backend, tensors (device-agnostic: only slicing is
used on them; a torch batch mixing tensor and array inputs has NumPy columns).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any, overload

import numpy as np

from . import _registry, _semantics
from ._types import Array
from ._validation import is_torch_tensor
from .result import RerankResult

__all__ = ["BatchResult"]


def _concat(arrays: list[Any], dtype: Any) -> Any:
    """One values array of ``arrays`` (NumPy, or torch on their device)."""
    if not arrays:
        return np.zeros(0, dtype)
    tensors = sum(is_torch_tensor(a) for a in arrays)
    if tensors == len(arrays):
        import torch

        return torch.cat([a.reshape(-1) for a in arrays])
    if tensors:  # torch gives arrays for array inputs: a mixed batch's columns are NumPy
        arrays = [host_array(a) for a in arrays]
    return np.concatenate(arrays)


def _offsets(arrays: list[Any]) -> np.ndarray:
    off = np.zeros(len(arrays) + 1, np.int64)
    np.cumsum([a.shape[0] for a in arrays], out=off[1:])
    return off


def _column(
    results: list[RerankResult], get: Callable[[RerankResult], Any], dtype: Any
) -> tuple[np.ndarray | None, np.ndarray | None]:
    """(values, offsets) of a ragged field, or (None, None) when a task lacks it."""
    arrays = [get(r) for r in results]
    if any(a is None for a in arrays):
        return None, None
    return _concat(arrays, dtype), _offsets(arrays)


class BatchResult(Sequence[RerankResult]):
    """The rankings of a batch of tasks, as flat columns; item ``t`` is task ``t``'s
    :class:`~aces_fast.result.RerankResult`.

    Behaves like the list of per-task results it replaces (``len``, indexing,
    slicing -- a slice is a list -- iteration, ``==`` against a list), and
    ``result[t]`` equals ``aces_fast.rerank(tasks[t], ...)`` bit for bit: same
    arrays (dtypes, values), flags, method, backend and info. Items are created
    on first access and kept; their arrays are views of the flat columns (do not
    write into them; an item keeps the whole batch's columns alive).

    Attributes
    ----------
    method : str
        The method name every item reports (e.g. ``"aces-o-warm"``).
    backend : str
        The backend that ran.
    n_offsets : ndarray (T + 1,) int64
        Task ``t``'s candidates are ``scores[n_offsets[t]:n_offsets[t + 1]]``.
    scores : array (N,) float64
        Every task's scores, task after task (``N = n_offsets[-1]``).
    order : array (N,) int64
        Every task's order (indices within its task), sharing ``n_offsets``.
    m_offsets : ndarray (T + 1,) int64 or None
        Task ``t``'s tests are ``weights[m_offsets[t]:m_offsets[t + 1]]``;
        ``None`` when the method has neither weights nor LOO-AUC.
    weights : array (M,) float64 or None
        Every task's test weights; ``None`` for methods without weights.
    loo_auc : array (M,) float64 or None
        Every task's LOO-AUC (ACES-C), sharing ``m_offsets``.
    fallback : ndarray (T,) bool
        Per task: ACES-C fell back to majority vote.
    objective, objective_offsets : array (K,) float64, ndarray (T + 1,) int64, or None
        ACES-O's objective curves (``steps + 1`` values per task).
    rows, rows_offsets : array (R,) int64, ndarray (T + 1,) int64, or None
        ACES-O's optimized rows per task (``info["rows"]`` of the items).

    Examples
    --------
    >>> import numpy as np
    >>> import aces_fast as af
    >>> B = np.array([[1, 1, 0, 1], [1, 1, 0, 0], [0, 0, 1, 0], [1, 1, 0, 1]])
    >>> batch = af.rerank_batch([B, B[:2]], "aces-c")
    >>> batch.n_offsets.tolist(), batch.order.tolist()
    ([0, 4, 6], [0, 3, 1, 2, 0, 1])
    >>> batch[1].order.tolist() == af.aces_c(B[:2]).order.tolist()
    True
    """

    def __init__(
        self,
        spec: Any,
        values: dict[str, Any],
        backend: str,
        *,
        n_offsets: np.ndarray,
        scores: Array,
        order: Array,
        m_offsets: np.ndarray | None = None,
        weights: Array | None = None,
        loo_auc: Array | None = None,
        fallback: np.ndarray | None = None,
        objective: Array | None = None,
        objective_offsets: np.ndarray | None = None,
        rows: Array | None = None,
        rows_offsets: np.ndarray | None = None,
        items: list[RerankResult] | None = None,
    ) -> None:
        self._spec = _registry.get(spec)
        self._values = values
        self.method = self._spec.result_name(values)
        self.backend = backend
        self.n_offsets = n_offsets
        self.scores, self.order = scores, order
        self.m_offsets, self.weights, self.loo_auc = m_offsets, weights, loo_auc
        T = len(n_offsets) - 1
        self.fallback = np.zeros(T, bool) if fallback is None else fallback
        self.objective, self.objective_offsets = objective, objective_offsets
        self.rows, self.rows_offsets = rows, rows_offsets
        # one slot per task, filled on first access (the only per-task Python objects)
        self._items: list[RerankResult | None] = [None] * T if items is None else list(items)

    @classmethod
    def from_results(
        cls, results: list[RerankResult], spec: Any, values: dict[str, Any], backend: str
    ) -> BatchResult:
        """The columns of per-task results (backends without a columnar batch path);
        the items stay the given objects."""
        if results:
            backend = results[0].backend
        scores, n_off = _column(results, lambda r: r.scores, np.float64)
        order, _ = _column(results, lambda r: r.order, np.int64)
        weights, m_off = _column(results, lambda r: r.weights, np.float64)
        loo, loo_off = _column(results, lambda r: r.loo_auc, np.float64)
        objective, o_off = _column(results, lambda r: r.objective, np.float64)
        rows, r_off = _column(results, lambda r: r.info.get("rows"), np.int64)
        assert n_off is not None  # every result has scores
        spec = _registry.get(spec)
        if not results:  # the columns the method has, empty
            weights = weights if spec.weights else None
            has_loo, _, has_objective, has_rows = spec._has
            loo, loo_off = (loo, loo_off) if has_loo else (None, None)
            objective, o_off = (objective, o_off) if has_objective else (None, None)
            rows, r_off = (rows, r_off) if has_rows else (None, None)
        return cls(
            spec,
            values,
            backend,
            n_offsets=n_off,
            scores=scores,
            order=order,
            m_offsets=m_off if weights is not None else loo_off,
            weights=weights,
            loo_auc=loo,
            fallback=np.array([bool(r.fallback) for r in results], bool),
            objective=objective,
            objective_offsets=o_off,
            rows=rows,
            rows_offsets=r_off,
            items=results,
        )

    # -- the sequence --------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._items)

    def _item(self, t: int) -> RerankResult:
        a, b = self.n_offsets[t], self.n_offsets[t + 1]
        weights = loo = objective = rows = None
        if self.m_offsets is not None:
            c, d = self.m_offsets[t], self.m_offsets[t + 1]
            weights = None if self.weights is None else self.weights[c:d]
            loo = None if self.loo_auc is None else self.loo_auc[c:d]
        if self.objective is not None and self.objective_offsets is not None:
            objective = self.objective[self.objective_offsets[t] : self.objective_offsets[t + 1]]
        if self.rows is not None and self.rows_offsets is not None:
            rows = self.rows[self.rows_offsets[t] : self.rows_offsets[t + 1]]
        # MethodSpec.pack: the same fields, info and name as the per-task path
        out = _semantics.Outputs(
            scores=self.scores[a:b],
            weights=weights,
            order=self.order[a:b],
            loo_auc=loo,
            fallback=self.fallback[t],
            objective=objective,
            rows=rows,
        )
        item = self._spec.pack(out, self._values, self.backend)
        self._items[t] = item
        return item

    @overload
    def __getitem__(self, index: int) -> RerankResult: ...

    @overload
    def __getitem__(self, index: slice) -> list[RerankResult]: ...

    def __getitem__(self, index: int | slice) -> Any:
        if isinstance(index, slice):
            return [self[t] for t in range(*index.indices(len(self)))]
        try:
            t = index.__index__()
        except AttributeError:
            raise TypeError(
                f"BatchResult indices must be integers or slices, not {type(index).__name__}"
            ) from None
        T = len(self._items)
        if t < 0:
            t += T
        if not 0 <= t < T:
            raise IndexError(f"task index {index} out of range for a batch of {T}")
        item = self._items[t]
        return item if item is not None else self._item(t)

    def __iter__(self) -> Iterator[RerankResult]:
        for t in range(len(self._items)):
            yield self[t]

    def __eq__(self, other: object) -> bool:
        # a list's equality: same length, items equal (RerankResult: identity)
        if isinstance(other, (BatchResult, list)):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # mutable, like a list

    def __repr__(self) -> str:
        return (
            f"BatchResult(method={self.method!r}, backend={self.backend!r}, "
            f"tasks={len(self)}, candidates={int(self.n_offsets[-1])})"
        )

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_spec"] = self._spec.name  # specs hold functions; the name finds it again
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        state["_spec"] = _registry.get(state["_spec"])
        self.__dict__.update(state)

    # -- columns -------------------------------------------------------------------

    def to_arrow(self) -> Any:
        """The result columns as a ``pyarrow.Table``, one row per task.

        Columns ``scores`` (list<float64>), ``order`` (list<int64>), ``weights``
        and ``loo_auc`` (list<float64>, when the method has them),
        ``fallback`` (bool), ``objective`` (list<float64>) and ``rows``
        (list<int64>) for ACES-O. The list columns wrap the flat arrays without
        a copy per task (NumPy values are shared, not copied; tensors are copied
        to the host once). Lists use int32 offsets, ``large_list`` when a column
        holds 2**31 values or more.

        Returns
        -------
        pyarrow.Table
            ``T`` rows, the columns above.

        Raises
        ------
        ImportError
            When pyarrow is not installed.

        Examples
        --------
        >>> import numpy as np
        >>> import aces_fast as af
        >>> B = np.array([[1, 1, 0, 1], [1, 1, 0, 0], [0, 0, 1, 0], [1, 1, 0, 1]])
        >>> table = af.rerank_batch([B, B[:2]], "aces-c").to_arrow()
        >>> table.column_names, table.column("order").to_pylist()
        (['scores', 'order', 'weights', 'loo_auc', 'fallback'], [[0, 3, 1, 2], [0, 1]])
        """
        try:
            import pyarrow as pa
        except ImportError:
            raise ImportError(
                "BatchResult.to_arrow needs pyarrow, which is not installed: "
                "pip install 'aces_fast[arrow]'"
            ) from None
        cols: dict[str, Any] = {
            "scores": list_array(self.scores, self.n_offsets, pa.float64()),
            "order": list_array(self.order, self.n_offsets, pa.int64()),
        }
        if self.weights is not None:
            cols["weights"] = list_array(self.weights, self.m_offsets, pa.float64())
        if self.loo_auc is not None:
            cols["loo_auc"] = list_array(self.loo_auc, self.m_offsets, pa.float64())
        cols["fallback"] = pa.array(host_array(self.fallback).astype(bool, copy=False), pa.bool_())
        if self.objective is not None:
            cols["objective"] = list_array(self.objective, self.objective_offsets, pa.float64())
        if self.rows is not None:
            cols["rows"] = list_array(self.rows, self.rows_offsets, pa.int64())
        return pa.table(cols)


def host_array(x: Any) -> np.ndarray:
    """A NumPy array of ``x`` (tensors copied to the host once)."""
    if is_torch_tensor(x):
        x = x.detach().cpu().numpy()
    return np.asarray(x)


def list_array(values: Any, offsets: Any, value_type: Any) -> Any:
    """A ``pyarrow`` list array of flat ``values`` and ``offsets`` (T + 1,).

    NumPy values already of ``value_type`` are wrapped, not copied (another
    dtype is converted once); int32 offsets (``large_list`` beyond them).
    """
    import pyarrow as pa

    off = host_array(offsets)
    vals = host_array(values).astype(value_type.to_pandas_dtype(), copy=False)
    if off.size and off[-1] > np.iinfo(np.int32).max:
        return pa.LargeListArray.from_arrays(
            pa.array(off.astype(np.int64, copy=False)), pa.array(vals, value_type)
        )
    return pa.ListArray.from_arrays(pa.array(off.astype(np.int32)), pa.array(vals, value_type))
