"""Rank many problems in one call: :func:`rerank_batch`.

A batch is a list of pass matrices of any shapes (one per problem) ranked with
the same method and parameters. Every task is validated first (an error names
the task's index), then the backend runs them all:

* the backend's ``rerank_batch(Bs, method, params, n_threads)`` gets the whole
  list at once (``cpp``: one call into C++, OpenMP across tasks, GIL released,
  for the methods with a compiled copy; ``numba``, for those same methods: the
  tasks on Python threads, in chunks of tasks each one compiled call (majority
  vote, ACES-C) or task by task in serial kernels (ACES-O), with the GIL
  released; ``torch``: padded (T, n, m)
  chunks on the input's device for those same methods). It returns a
  :class:`~aces_fast.batch_result.BatchResult` (``cpp``: its flat columns
  written by C++, no Python object per task) or a list of one
  :class:`~aces_fast.result.RerankResult` per task (made into a
  ``BatchResult`` here), or ``None`` for a method it has no batch path for;
* otherwise the tasks run one by one through the backend's ``rerank``, exactly
  as :func:`aces_fast.rerank` would run them.

Either way the results equal calling :func:`aces_fast.rerank` task by task:
bitwise, except torch's batched ACES-O, whose batched matrix products sum in
another order (weights equal to ~1e-12, orders equal).

Backend protocol (for backend authors): ``Bs`` is a list of matrices already
through :meth:`Backend.prepare` (:meth:`Backend.prepare_batch`); ``method`` a registered name
(:mod:`aces_fast._registry`); ``params`` the method's complete, validated
parameters (defaults and fixed values filled in, see
:func:`aces_fast._registry.method_params`); ``n_threads`` ``None`` (backend
default) or an int >= 1.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, TypeGuard

import numpy as np

from . import _registry
from ._cost import warn_if_costly
from ._registry import DEFAULT_METHOD, METHOD_PARAMS
from ._validation import check_int, is_torch_tensor
from .backends import resolve_backend
from .batch_result import BatchResult

__all__ = ["METHOD_PARAMS", "BatchResult", "rerank_batch"]

#: the most threads ``n_threads`` may ask for (the compiled layer's own limit)
MAX_THREADS = 4096


def _task_list(tasks: Any) -> list[Any]:
    """``tasks`` as a list; a 3-D array or tensor is a stack of equal-shape tasks."""
    if isinstance(tasks, (str, bytes)) or (
        (isinstance(tasks, np.ndarray) or is_torch_tensor(tasks)) and tasks.ndim != 3
    ):
        raise TypeError(
            "tasks must be a list (or other iterable) of 2-D pass matrices, one per "
            f"problem; got {type(tasks).__name__}"
            + (f" of shape {tasks.shape}" if hasattr(tasks, "shape") else "")
        )
    if not isinstance(tasks, Iterable):
        raise TypeError(f"tasks must be a list of 2-D pass matrices; got {type(tasks).__name__}")
    return list(tasks)


def _is_tensor_stack(tasks: Any) -> bool:
    """Whether ``tasks`` is a 3-D torch tensor: a stack the torch backend may rank
    as slices (:meth:`~aces_fast.backends.torch.TorchBackend.rerank_stack`)."""
    return is_torch_tensor(tasks) and tasks.dim() == 3


def _is_ready_stack(tasks: Any) -> TypeGuard[np.ndarray]:
    """Whether ``tasks`` is a non-empty stack (T, n, m) of tasks that need no
    conversion: exactly a numpy array, uint8, C-contiguous, ``n >= 1`` (each
    slice is then what :func:`aces_fast._validation.as_pass_matrix` returns
    unchanged; the values are checked where the tasks are ranked)."""
    return (
        type(tasks) is np.ndarray
        and tasks.ndim == 3
        and tasks.dtype == np.uint8
        and tasks.flags.c_contiguous
        and tasks.shape[0] > 0
        and tasks.shape[1] > 0
    )


def rerank_batch(
    tasks: Iterable[Any],
    method: str = DEFAULT_METHOD,
    *,
    backend: str | None = None,
    n_threads: int | None = None,
    **params: Any,
) -> BatchResult:
    """Rank the candidates of many problems with one method.

    Parameters
    ----------
    tasks : iterable of array_like, each of shape (n_t, m_t)
        One 0/1 pass matrix per problem; shapes may differ (``m_t = 0`` allowed,
        ``n_t >= 1``). A 3-D array (or tensor) is a stack of equal-shape tasks.
    method : str, default "aces-c"
        A name of :data:`aces_fast.METHODS` (see :func:`aces_fast.rerank`).
    backend : str, optional
        As everywhere (explicit > ``ACES_FAST_BACKEND`` > auto); the first task
        decides ``auto`` (a CUDA tensor picks torch).
    n_threads : int in [1, 4096], optional
        Threads across tasks for backends with a batch path (``cpp``: OpenMP,
        one task per thread at a time). ``None``: the backend's default (``cpp``:
        the OpenMP default). Results never depend on it.
    **params
        The method's parameters, e.g. ``rerank_batch(Bs, "aces-o", lr=0.05)``.

    Returns
    -------
    BatchResult
        A sequence of ``T`` :class:`~aces_fast.result.RerankResult`: ``result[t]``
        for ``tasks[t]``, equal to ``aces_fast.rerank(tasks[t], method,
        backend=..., **params)`` (built on first access). Its columns (``scores``,
        ``order`` ... with their offsets, :meth:`BatchResult.to_arrow`) hold the
        whole batch in flat arrays. Indexing, iteration, slicing (a list) and
        ``==`` against a list work as on the list of results.

    Raises
    ------
    TypeError, ValueError
        For an unknown method or parameter, or an invalid task; the message of a
        task error starts with ``"task <index>:"``. An unknown or unavailable
        ``backend`` is an error even for an empty batch.

    Warns
    -----
    aces_fast.CostWarning
        Once, before the batch runs, when its estimated work is far beyond the
        usual (ACES-O with ``top_k=None`` on large pools; the estimate is that of
        :func:`aces_fast.aces_o`).

    Notes
    -----
    With the ``cpp`` backend majority vote, ACES-C (both variants), ACES-O and
    CodeT run in one call into C++ with the GIL released; B4 runs task by
    task. A stack that needs no conversion (a C-contiguous ``uint8`` array of
    shape (T, n, m), ``n >= 1``, or on ``torch`` such a tensor) is ranked where
    it lies, without a view per task: for batches of small tasks, make the
    stack once (``np.stack``, ``torch.stack``) rather than a list
    (docs/backends.rst, "Many problems at once"). Cost: the sum of the tasks'
    costs, divided across threads.

    Examples
    --------
    >>> import numpy as np
    >>> import aces_fast as af
    >>> B = np.array([[1, 1, 0, 1], [1, 1, 0, 0], [0, 0, 1, 0], [1, 1, 0, 1]])
    >>> batch = af.rerank_batch([B, B[:2]], "aces-c")
    >>> len(batch), [r.order.tolist() for r in batch]
    (2, [[0, 3, 1, 2], [0, 1]])
    >>> batch[0].scores.tolist() == af.aces_c(B).scores.tolist()
    True
    """
    spec = _registry.get(method)
    values = spec.validate(params)
    if n_threads is not None:
        n_threads = check_int(n_threads, "n_threads", minimum=1, maximum=MAX_THREADS)
    # a stack already in the form every task would be converted to (not ACES-O,
    # whose cost warning reads each task)
    ready = spec.cost is None and (_is_ready_stack(tasks) or _is_tensor_stack(tasks))
    stack: Any = tasks if ready else None
    items = [] if stack is not None else _task_list(tasks)
    # resolved even for an empty batch: a misspelt or unavailable backend is an error
    first = (stack[0] if len(stack) else None) if stack is not None else items[0] if items else None
    be = resolve_backend(backend, first)
    if stack is not None and is_torch_tensor(stack) and be.name != "torch":
        items, stack = _task_list(stack), None  # other backends take a tensor stack's tasks
    if stack is not None:
        # ranked in place, with no view per task, by a backend that can; else
        # split into its tasks like any other batch
        rank_stack = getattr(be, "rerank_stack", None)
        ranked: BatchResult | None = (
            None if rank_stack is None else rank_stack(stack, spec.name, values, n_threads)
        )
        if ranked is not None:
            return ranked
        items = _task_list(stack)
    if not items:
        return BatchResult.from_results([], spec, values, be.name)
    Bs = be.prepare_batch(items)
    if spec.cost is not None:
        warn_if_costly(spec.cost, spec.name, be, Bs, values)
    results = be.rerank_batch(Bs, spec.name, values, n_threads)
    if isinstance(results, BatchResult):
        return results
    if results is None:
        results = [be.rerank(B, spec.name, values) for B in Bs]
    return BatchResult.from_results(results, spec, values, be.name)
