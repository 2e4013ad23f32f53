"""Many cheap tasks at once on the ``numba`` backend: the semantics over a task axis.

Methods that make one pass over each task (majority vote, ACES-C: no Adam fit)
cost tens of microseconds per task, as much in Python as in the kernels. Run
task by task on Python threads, each task's dozen kernel calls hand the GIL
back and forth between the threads, so two threads ran slower than one. Here
the tasks are grouped by shape (:func:`..shapes.shape_chunks`) and each
group runs the method's semantics (:mod:`aces_fast._semantics`, the same
functions as per task) once, on :class:`TaskList` as the backend: every kernel
is one call over all the group's tasks (:mod:`.tasks`, prange over tasks, the
GIL released), every primitive one NumPy call on (T, n_max) or (T, m_max)
arrays. Python work is per group, not per task.

The matrices are not copied or padded: the kernels read them from a
``numba.typed.List``. The per-candidate and per-test arrays are padded with
the values that leave a task's own entries unchanged: padded candidates are
masked out by :meth:`TaskList.row_mask` (ordered last, cut off), padded tests
have LOO-AUC ``nan``, no passers and weight 0, so they add exactly 0 to every
sum. Every task's result equals :meth:`NumbaBackend.rerank` bit for bit.
"""

from __future__ import annotations

from typing import Any, Dict, List, Sequence

import numpy as np

from ... import _registry
from ...result import RerankResult
from ..base import ArrayBackend
from ..shapes import shape_chunks

#: Cells (T n_max m_max) of a group: each group is a few kernel calls that Ctrl-C
#: cannot interrupt, ~10 ms on one thread at this size.
GROUP_CELLS = 1 << 25
#: A group closes before its padded cells exceed this many times its tasks' own.
MAX_WASTE = 2.0


class TaskGroup:
    """The pass matrices of a group as the semantics see ``B``: ``shape`` (T, n_max,
    m_max), ``mats`` a typed list of the (n_t, m_t) matrices, ``n``/``m`` int64 (T,)."""

    def __init__(self, mats: Sequence[np.ndarray]):
        from numba.typed import List

        self.mats = List(mats)
        shapes = np.array([B.shape for B in mats], dtype=np.int64).reshape(len(mats), 2)
        self.n, self.m = shapes[:, 0].copy(), shapes[:, 1].copy()
        self.shape = (len(mats), int(self.n.max()), int(self.m.max()))


class TaskList(ArrayBackend):
    """The backend the semantics see for a :class:`TaskGroup`: its kernels over
    tasks (:mod:`.tasks`), per-task row counts and masks, the numba backend's
    ascending ``sum``; the other primitives are :class:`ArrayBackend`'s, over
    the last axis."""

    name = "numba"

    def __init__(self, kernels: Any, run: Any, parallel: bool):
        self._k = kernels
        self._run = run  # numba backend's launcher of a serial or parallel build
        self._parallel = parallel

    def _launch(self, serial: Any, parallel: Any, *args: Any) -> None:
        self._run(lambda par: (parallel if par else serial)(*args), self._parallel)

    def row_count(self, B):
        return B.n[:, None]

    def row_mask(self, B):
        T, n_max, _ = B.shape
        if bool((B.n == n_max).all()):
            return None
        return np.arange(n_max)[None, :] < B.n[:, None]

    def loo_auc_uniform(self, B):
        """``(L (T, m_max), passers (T, m_max), plan)``; the plan holds the tasks'
        packed rows (:func:`.tasks.tasks_loo_auc_uniform`) for :meth:`row_scores`."""
        T, n_max, m_max = B.shape
        L = np.full((T, m_max), np.nan)
        colsum = np.zeros((T, m_max), dtype=np.int64)
        rep = np.zeros((T, n_max), dtype=np.int64)  # scratch: the packed rows serve the scores
        words = np.zeros((T, -(-n_max // 64), m_max), dtype=np.uint64)
        self._launch(self._k.tasks_loo_auc_uniform, self._k.tasks_loo_auc_uniform_parallel,
                     B.mats, L, colsum, rep, words)
        return L, colsum, words

    def row_scores(self, B, w, plan=None):
        T, n_max, _ = B.shape
        w = np.ascontiguousarray(w, dtype=np.float64)
        s = np.zeros((T, n_max))
        if plan is None:
            self._launch(self._k.tasks_row_scores, self._k.tasks_row_scores_parallel, B.mats,
                         w, s)
        else:
            self._launch(self._k.tasks_packed_row_scores,
                         self._k.tasks_packed_row_scores_parallel, B.n, B.m, plan, w, s)
        return s

    def column_sums(self, B):
        T, _, m_max = B.shape
        out = np.zeros((T, m_max), dtype=np.int64)
        self._launch(self._k.tasks_column_sums, self._k.tasks_column_sums_parallel, B.mats,
                     out)
        return out

    def argsort(self, x):
        """Stable ascending order along the last axis, int64: NumPy's (vectorized)
        unstable sort, then equal keys put in index order -- the stable order. On
        (T, n) arrays NumPy's stable sort costs several times more per row than on
        one row."""
        if x.ndim != 2 or x.dtype != np.float64:
            return x.argsort(axis=-1, kind="stable")
        x = np.ascontiguousarray(x)
        order = x.argsort(axis=-1)
        self._k.order_ties_by_index(x, order)
        return order

    def sum(self, x):
        """Row sums in ascending order, (T, 1) (the numba backend's rounding)."""
        return self._k.ascending_row_sums(np.ascontiguousarray(x, dtype=np.float64))


def rerank_tasks(be: Any, kernels: Any, run: Any, mats: List[np.ndarray],
                 spec: "_registry.MethodSpec", values: Dict[str, Any], threads: int
                 ) -> List[RerankResult]:
    """Rank kernel-ready matrices ``mats`` with a one-pass method ``spec`` on the numba
    backend ``be`` (``kernels``: its kernel namespace, ``run``: its launcher).

    Groups of similar shape (at most :data:`GROUP_CELLS` padded cells) run the
    semantics on :class:`TaskList`, the kernels across ``threads`` threads (the
    parallel build when ``threads > 1``); a task alone in its group runs through
    ``be.rerank`` (whose kernels go parallel by size). Returns one result per
    task, equal to ``be.rerank`` task by task bit for bit. Cost: the per-task
    costs, the kernels divided across threads, plus O(number of groups) Python.
    """
    results: List[Any] = [None] * len(mats)
    shapes = [B.shape for B in mats]
    for group in shape_chunks(shapes, GROUP_CELLS, MAX_WASTE, slack=be.parallel_min_work):
        if len(group) == 1:
            t = group[0]
            results[t] = be.rerank(mats[t], spec, values)
            continue
        tasks = TaskGroup([mats[t] for t in group])
        cells = float(np.dot(tasks.n, tasks.m))
        nx = TaskList(kernels, run, threads > 1 and cells >= be.parallel_min_work)
        # padded candidates are -inf in the tie snapping: their gaps are nan (-inf - -inf)
        with np.errstate(invalid="ignore"):
            out = spec.run(nx, tasks, values)
        for k, t in enumerate(group):
            results[t] = spec.pack(out.task(k, *shapes[t]), values, be.name)
    return results
