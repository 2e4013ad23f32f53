"""``numba``: njit kernels running the same algorithms as the C++ core.

numba is imported here only when the registry calls :func:`load` (so
``import aces_fast`` never imports it); the kernels live in
:mod:`aces_fast.backends._numba_kernels`.

JIT compilation happens on the first call of each kernel (seconds). Call
:func:`warmup` (or ``get_backend("numba").warmup()``) once before timing or
serving so no call pays it unknowingly. Set ``ACES_FAST_NUMBA_CACHE=1`` to
cache the compiled code on disk (off by default: installs may be read-only).

Uniform LOO-AUC and per-task ACES-C below the parallel threshold are one
kernel call each (``uniform_loo_auc``, ``rerank_one_c``: identical rows merged
into counts by hashing, scores computed once per distinct row); weighted
LOO-AUC sorts the scores in NumPy and runs the rest in numba; the surrogate
and ACES-O run entirely in numba (dropping rows with count 0 and merging
identical rows into counts first: the pair work is quadratic in the rows) --
ACES-O as one njit call for the whole method, Adam run included.

Read-only input arrays are passed to the kernels as writeable aliases of the
same memory (the kernels never write their inputs), so they reuse the
signatures :func:`warmup` compiled instead of compiling their own.

Threads: inputs with at least :attr:`NumbaBackend.parallel_min_work` units of
work run the ``parallel=True`` kernels (prange over columns), smaller ones the
serial build; both give identical bits. numba's ``workqueue`` threading layer
cannot run two parallel kernels at once, so under that layer a call that finds
another parallel call running uses the serial build instead (still releasing
the GIL: concurrent calls from Python threads stay safe and parallel).

Method glue (normalization, scores ``B w`` summed in ascending test order, tie
snapping, orders, ACES-C weights, warm-start logits, the top-k prefilter) runs
in numba too, in the same functions the batch path runs for each task, so
:meth:`NumbaBackend.rerank_batch` gives the per-task results bit for bit.
"""

from __future__ import annotations

import importlib
import threading
from typing import Any, Dict, List, Optional, Sequence

import numpy as np

from ..result import RerankResult
from .base import Backend, BackendUnavailableError

_UNAVAILABLE = "numba is not installed (pip install aces_fast[numba])"

_kernels: Any = None  # the kernels module, once numba imported fine
_parallel_lock = threading.Lock()
_layer: Optional[str] = None  # numba's threading layer, known after a parallel launch


def _load_kernels():
    """Import numba and the kernels once; :class:`BackendUnavailableError` says why not."""
    global _kernels
    if _kernels is None:
        try:
            importlib.import_module("numba")
        except ModuleNotFoundError as exc:
            if exc.name != "numba":
                raise BackendUnavailableError("numba", f"numba cannot be imported: {exc}") from exc
            raise BackendUnavailableError("numba", _UNAVAILABLE) from exc
        except ImportError as exc:  # installed but broken, e.g. an unsupported NumPy
            raise BackendUnavailableError("numba", f"numba cannot be imported: {exc}") from exc
        from . import _numba_kernels

        _kernels = _numba_kernels
    return _kernels


def _note_layer() -> None:
    global _layer
    if _layer is None:
        import numba

        try:
            _layer = numba.threading_layer()
        except ValueError:  # no parallel region has run yet
            pass


def _num_threads() -> int:
    import numba

    return numba.get_num_threads()


def _run(call, parallel: bool):
    """Return ``call(parallel)`` where ``call`` runs a kernel's serial (False) or
    parallel (True) build; safe from any number of Python threads."""
    if not parallel:
        return call(False)
    if _layer is not None and _layer != "workqueue":
        return call(True)
    # unknown layer (first launch) or workqueue: one parallel launch at a time;
    # a concurrent caller runs the serial build (identical results) rather than wait
    if not _parallel_lock.acquire(blocking=False):
        return call(False)
    try:
        return call(True)
    finally:
        _note_layer()
        _parallel_lock.release()


_NEVER = 1 << 62  # a parallel_min_work no input reaches
_EMPTY_I = np.empty(0, dtype=np.int64)
_EMPTY_F = np.empty(0)


def _loo_auc(B: np.ndarray, w: Optional[np.ndarray], tie_tol: float, cnt: np.ndarray,
             parallel: bool) -> np.ndarray:
    """LOO-AUC (see :meth:`NumbaBackend.loo_auc`; ``w`` None = uniform). Uniform and
    serial: one kernel call; weighted: the sort runs in NumPy, the rest in numba."""
    k = _kernels
    m = B.shape[1]
    if w is None and not parallel:
        out = np.empty(m)
        k.uniform_loo_auc(B, cnt, out, _EMPTY_I)
        return out
    out = np.full(m, np.nan)
    keep = np.flatnonzero(cnt > 0)
    if m == 0 or keep.size == 0:
        return out
    if w is None:
        # wide blocks (the inner loops run along a block's columns), but enough
        # of them to keep every thread busy
        per_thread = -(-m // (2 * _num_threads()))
        width = min(512, max(64, -(-per_thread // 64) * 64))
        n = B.shape[0]
        dedup = n >= k.DEDUP_MIN_ROWS and n * m >= k.DEDUP_MIN_CELLS
        rs, c, _ = k.row_sums_and_reps(B, cnt, dedup)
        args = (B, True, c, *k.levels_by_count(rs, c, m), _EMPTY_I, _EMPTY_F, _EMPTY_I,
                _EMPTY_F, 0.0, width, out, _EMPTY_I)
    else:
        s = k.row_scores(B, w)
        perm = keep[np.argsort(s[keep], kind="stable")]
        args = (B, False, cnt, _EMPTY_I, _EMPTY_I, _EMPTY_I, _EMPTY_I, perm, s[perm], cnt[perm],
                w, tie_tol * float(w.sum()), 64, out, _EMPTY_I)
    _run(lambda par: (k.loo_blocks_parallel if par else k.loo_blocks)(*args), parallel)
    return out


def _surrogate(B: np.ndarray, cnt: np.ndarray, w: np.ndarray, gamma: float, parallel: bool):
    """``(L, J, grad)`` (see :meth:`NumbaBackend.surrogate`), one kernel call."""
    m = B.shape[1]
    L = np.full(m, np.nan)
    grad = np.zeros(m)
    J = _run(lambda par: _kernels.surrogate(B, w, gamma, cnt, L, grad, par), parallel)
    return L, float(J), grad


class _WriteableAlias:
    """The memory of a read-only array under a writeable array interface (see
    :func:`_for_kernels`); holds the array, so the memory outlives the alias."""

    def __init__(self, a: np.ndarray):
        self._array = a
        interface = dict(a.__array_interface__)
        interface["data"] = (interface["data"][0], False)
        self.__array_interface__ = interface


def _for_kernels(a: np.ndarray) -> np.ndarray:
    """``a`` as the kernels receive it: a writeable array over the same memory.

    numba types a read-only array as a type of its own, so a read-only input
    (``np.load(mmap_mode="r")``, ``np.broadcast_to``, arrays from other
    libraries) would JIT-compile a second copy of every kernel it reaches, for
    seconds, after :func:`warmup`. The kernels never write their inputs, so a
    read-only array is passed as a writeable alias of its memory: no copy, no
    new signature.
    """
    if a.flags.writeable:
        return a
    return np.asarray(_WriteableAlias(a))


def _as_matrix(B: Any) -> np.ndarray:
    B = np.asarray(B)
    if B.ndim != 2:
        raise ValueError(f"B must be 2-D (n, m); got shape {B.shape}")
    if B.dtype == np.bool_:
        B = B.view(np.uint8)
    return _for_kernels(np.ascontiguousarray(B, dtype=np.uint8))


def _as_vector(x: Any, size: int, name: str) -> np.ndarray:
    x = np.ascontiguousarray(x, dtype=np.float64)
    if x.shape != (size,):
        raise ValueError(f"{name} must have shape ({size},); got {x.shape}")
    return _for_kernels(x)


def _as_counts(counts: Any, n: int) -> np.ndarray:
    if counts is None:
        return np.ones(n, dtype=np.int64)
    c = np.asarray(counts)
    if c.shape != (n,):
        raise ValueError(f"counts must have shape ({n},); got {c.shape}")
    if c.dtype.kind not in "biu" or np.any(c < 0):
        raise ValueError("counts must be non-negative integer row multiplicities")
    return _for_kernels(np.ascontiguousarray(c, dtype=np.int64))


#: rerank names with a batch kernel -> method code (MAJORITY, ACES_C, ACES_C_FILTER,
#: ACES_O of ``_numba_kernels``)
_BATCH_CODES = {"majority": 0, "aces-c": 1, "aces-c-filter": 2, "aces-o": 3, "aces-o-warm": 3}


def _offsets(sizes: np.ndarray) -> np.ndarray:
    """Exclusive prefix sums: where each task's block starts in a flat output buffer."""
    out = np.zeros(sizes.shape[0], dtype=np.int64)
    np.cumsum(sizes[:-1], out=out[1:])
    return out


def _task_costs(shapes: np.ndarray, code: int, params: Dict[str, Any]) -> np.ndarray:
    """Rough serial cost per task (same units as ``parallel_min_work``)."""
    n, m = shapes[:, 0].astype(np.float64), shapes[:, 1].astype(np.float64)
    cost = n * m + n * np.log2(n + 1.0)
    if code == _BATCH_CODES["aces-o"]:
        top_k = params["top_k"]
        k = n if top_k is None else np.minimum(n, top_k)
        cost += (params["steps"] + 1) * k * m * (1.0 + k / 4.0)
    return cost


def _rerank_batch(be: "NumbaBackend", mats: List[np.ndarray], method: str, code: int,
                  params: Dict[str, Any], n_threads: Optional[int]) -> List[RerankResult]:
    """Run the batch kernels (see :meth:`NumbaBackend.rerank_batch`), split the results."""
    import numba

    k = _kernels
    T = len(mats)
    shapes = np.array([B.shape for B in mats], dtype=np.int64).reshape(T, 2)
    ns, ms = shapes[:, 0], shapes[:, 1]
    noff, moff = _offsets(ns), _offsets(ms)
    N, M = int(ns.sum()), int(ms.sum())
    aces_o = code == k.ACES_O
    steps = int(params["steps"]) if aces_o else 0
    no = steps + 1
    tie_tol = float(params.get("tie_tol", 1e-9))  # majority: majority_vote's default
    weights, scores, loo = np.empty(M), np.empty(N), np.full(M, np.nan)
    order, rows = np.empty(N, dtype=np.int64), np.empty(N, dtype=np.int64)
    fallback = np.zeros(T, dtype=np.bool_)
    objective = np.zeros(T * no) if aces_o else np.zeros(0)
    nrows = np.zeros(T, dtype=np.int64)
    cost = _task_costs(shapes, code, params)
    # largest first: with one task per thread at a time, the last ones are small
    todo = np.argsort(-cost, kind="stable")
    threads = _num_threads() if n_threads is None else min(int(n_threads),
                                                           numba.config.NUMBA_NUM_THREADS)
    # a parallel launch (even with one thread) beats a Python call per task
    parallel = T > 1 and float(cost.sum()) >= be.parallel_min_work

    if aces_o:
        top_k = params["top_k"]
        # the scalars as the per-task path hands them to numba: float64, int64, bool
        o_args = (tie_tol, float(params["gamma"]), float(params["lr"]), np.int64(steps),
                  np.int64(-1 if top_k is None else top_k), bool(params["init"] == "aces-c"))

        def run_o(t: int) -> None:
            a, b = noff[t], moff[t]
            n, m = mats[t].shape
            nrows[t] = k.rerank_one_o(mats[t], *o_args, False, weights[b:b + m],
                                      scores[a:a + n], order[a:a + n],
                                      objective[t * no:(t + 1) * no], rows[a:a + n])

        # an ACES-O task costs far more than a Python call, so Python threads share
        # them out (the kernel releases the GIL); no numba parallel region is needed
        _in_threads(run_o, todo, threads if parallel else 1)
    else:
        def one_by_one() -> None:
            for t in todo:
                a, b = noff[t], moff[t]
                n, m = mats[t].shape
                fallback[t] = k.rerank_one_c(mats[t], np.int64(code), tie_tol,
                                             weights[b:b + m], scores[a:a + n], order[a:a + n],
                                             loo[b:b + m])

        def call(par: bool) -> None:
            if not par:  # small batch, or another parallel launch running (workqueue)
                return one_by_one()
            # the matrices are read in place (no packing copy); `mats` keeps them alive
            addresses = np.array([B.ctypes.data for B in mats], dtype=np.int64)
            previous = numba.get_num_threads()
            numba.set_num_threads(threads)
            try:
                with numba.parallel_chunksize(1):  # dynamic: tasks differ in cost
                    k.rerank_tasks_c(addresses, shapes, todo, np.int64(code), tie_tol, noff,
                                     moff, weights, scores, order, loo, fallback)
            finally:
                numba.set_num_threads(previous)

        _run(call, parallel)
    return _split_results(method, params, shapes, noff, moff, weights, scores, order, loo,
                          fallback, objective, rows, nrows)


def _in_threads(fn, items: np.ndarray, threads: int) -> None:
    """``fn(item)`` for every item, on ``threads`` Python threads (the caller's included)
    taking the next item as they finish; the first exception is re-raised."""
    if threads <= 1 or len(items) <= 1:
        for item in items:
            fn(int(item))
        return
    queue = iter(items.tolist())
    lock = threading.Lock()
    errors: List[BaseException] = []

    def work() -> None:
        while not errors:
            with lock:
                item = next(queue, None)
            if item is None:
                return
            try:
                fn(item)
            except BaseException as exc:  # re-raised in the calling thread
                errors.append(exc)

    helpers = [threading.Thread(target=work, daemon=True)
               for _ in range(min(threads, len(items)) - 1)]
    for th in helpers:
        th.start()
    work()
    for th in helpers:
        th.join()
    if errors:
        raise errors[0]


def _split_results(method, params, shapes, noff, moff, weights, scores, order, loo, fallback,
                   objective, rows, nrows) -> List[RerankResult]:
    """Per-task :class:`RerankResult` views into the flat outputs, fields as the glue sets them."""
    out = []
    no = objective.shape[0] // max(1, shapes.shape[0])
    for t in range(shapes.shape[0]):
        n, m = int(shapes[t, 0]), int(shapes[t, 1])
        a, b = int(noff[t]), int(moff[t])
        common = dict(scores=scores[a:a + n], weights=weights[b:b + m], order=order[a:a + n],
                      backend="numba")
        if method == "majority":
            out.append(RerankResult(method="majority", **common))
        elif method in ("aces-c", "aces-c-filter"):
            variant = "weighted" if method == "aces-c" else "filter"
            out.append(RerankResult(method=method, loo_auc=loo[b:b + m],
                                    fallback=bool(fallback[t]), info={"variant": variant},
                                    **common))
        else:
            init = params["init"]
            info = {"gamma": params["gamma"], "lr": params["lr"], "steps": params["steps"],
                    "top_k": params["top_k"], "init": init,
                    "rows": rows[a:a + int(nrows[t])]}
            out.append(RerankResult(method="aces-o-warm" if init == "aces-c" else "aces-o",
                                    objective=objective[t * no:(t + 1) * no], info=info,
                                    **common))
    return out


class NumbaBackend(Backend):
    """Backend running the njit kernels of :mod:`._numba_kernels`."""

    name = "numba"

    #: Work (about one unit per nanosecond of serial run time: n*m for weighted
    #: LOO-AUC, n*m/8 uniform, n*m*(1 + n/4) for the surrogate, per step for
    #: ACES-O) from which the parallel build runs; below it, starting the
    #: threads costs more than they save.
    parallel_min_work: int = 1 << 16

    def __init__(self, parallel_min_work: Optional[int] = None):
        """``parallel_min_work``: override the class default (0 = always parallel)."""
        _load_kernels()
        if parallel_min_work is not None:
            self.parallel_min_work = int(parallel_min_work)

    def _parallel(self, work: float) -> bool:
        return work >= self.parallel_min_work and _num_threads() > 1

    @staticmethod
    def _surrogate_work(n: int, m: int) -> float:
        # n m for the scores and gradient, up to n^2/4 sigmoid pairs per column
        return n * m * (1.0 + n / 4.0)

    def loo_auc(self, B, weights, tie_tol, counts=None):
        B = _as_matrix(B)
        n, m = B.shape
        c = _as_counts(counts, n)
        if weights is None:
            # the uniform kernel spends a fraction of a nanosecond per cell
            return _loo_auc(B, None, 0.0, c, self._parallel(n * m // 8))
        w = _as_vector(weights, m, "weights")
        return _loo_auc(B, w, float(tie_tol), c, self._parallel(n * m))

    def surrogate(self, B, weights, gamma, counts=None):
        B = _as_matrix(B)
        n, m = B.shape
        w = _as_vector(weights, m, "weights")
        return _surrogate(B, _as_counts(counts, n), w, float(gamma),
                          self._parallel(self._surrogate_work(n, m)))

    def aces_o_fit(self, B, logits0, active, gamma, lr, steps, counts=None):
        B = _as_matrix(B)
        n, m = B.shape
        logits0 = _as_vector(logits0, m, "logits0")
        active = np.ascontiguousarray(active, dtype=np.uint8)
        if active.shape != (m,):
            raise ValueError(f"active must have shape ({m},); got {active.shape}")
        active = _for_kernels(active)
        steps = int(steps)
        if steps < 0:
            raise ValueError(f"steps must be >= 0; got {steps}")
        cnt = _as_counts(counts, n)
        work = self._surrogate_work(n, int(active.sum()))
        gamma, lr = float(gamma), float(lr)
        return _run(lambda par: _kernels.aces_o_fit(B, logits0, active, gamma, lr, steps, cnt,
                                                    par), self._parallel(work))

    # -- method glue in numba (shared with the batch kernel) ----------------------

    def row_scores(self, B, w):
        """``B @ w`` summed in ascending test order (float64 (n,)), as the batch kernel does."""
        return _kernels.row_scores(_as_matrix(B),
                                   _for_kernels(np.ascontiguousarray(w, dtype=np.float64)))

    def _weighted_result(self, B, w, method, tie_tol, **extra):
        B = _as_matrix(B)
        n, m = B.shape
        weights, scores = np.empty(m), np.empty(n)
        order = np.empty(n, dtype=np.int64)
        _kernels.finish_weighted(B, np.ascontiguousarray(w, dtype=np.float64), float(tie_tol),
                                 weights, scores, order)
        return RerankResult(scores=scores, weights=weights, order=order, method=method,
                            backend=self.name, **extra)

    def aces_c(self, B, variant="weighted", tie_tol=1e-9):
        """The whole method in one kernel call, ``_numba_kernels.rerank_one_c`` (the
        batch path runs it too); inputs large enough for the parallel LOO-AUC take
        the generic glue (same results)."""
        B = _as_matrix(B)
        n, m = B.shape
        if self._parallel(n * m // 8):
            return super().aces_c(B, variant, tie_tol)
        weights, scores, L = np.empty(m), np.empty(n), np.empty(m)
        order = np.empty(n, dtype=np.int64)
        code = _BATCH_CODES["aces-c" if variant == "weighted" else "aces-c-filter"]
        fallback = _kernels.rerank_one_c(B, code, float(tie_tol), weights, scores, order, L)
        return RerankResult(scores=scores, weights=weights, order=order,
                            method="aces-c" if variant == "weighted" else "aces-c-filter",
                            backend=self.name, loo_auc=L, fallback=bool(fallback),
                            info={"variant": variant})

    def aces_c_weights(self, B, variant, tie_tol):
        B = _as_matrix(B)
        L = self.loo_auc(B, None, tie_tol)
        w, fallback = _kernels.aces_c_from_loo(B, L, variant == "weighted")
        return w, L, bool(fallback)

    def aces_o(self, B, gamma, lr, steps, top_k, init, tie_tol=1e-9):
        """The whole method in one kernel call, ``_numba_kernels.rerank_one_o`` (the
        batch path runs it too)."""
        B = _as_matrix(B)
        n, m = B.shape
        steps = int(steps)
        if steps < 0:
            raise ValueError(f"steps must be >= 0; got {steps}")
        weights, scores = np.empty(m), np.empty(n)
        order, rows = np.empty(n, dtype=np.int64), np.empty(n, dtype=np.int64)
        objective = np.zeros(steps + 1)
        k = n if top_k is None else min(n, int(top_k))
        args = (B, float(tie_tol), float(gamma), float(lr), np.int64(steps),
                np.int64(-1 if top_k is None else top_k), bool(init == "aces-c"))
        nrows = _run(lambda par: _kernels.rerank_one_o(*args, par, weights, scores, order,
                                                       objective, rows),
                     self._parallel(self._surrogate_work(k, m)))
        info = {"gamma": gamma, "lr": lr, "steps": steps, "top_k": top_k, "init": init,
                "rows": rows[:nrows]}
        return RerankResult(scores=scores, weights=weights, order=order,
                            method="aces-o-warm" if init == "aces-c" else "aces-o",
                            backend=self.name, objective=objective, info=info)

    # -- many tasks at once ------------------------------------------------------

    def rerank_batch(self, Bs: Sequence[np.ndarray], method: str, params: Dict[str, Any],
                     n_threads: Optional[int]) -> Optional[List[RerankResult]]:
        """Rank many tasks at once (the protocol of :mod:`aces_fast.batch`).

        Majority vote and ACES-C (both variants): one ``parallel=True`` kernel,
        ``_numba_kernels.rerank_tasks_c``, with a ``prange`` over tasks, each
        task running the serial kernels; the matrices are read in place
        (their addresses and shapes are passed, nothing is packed or copied),
        largest first, one task per thread at a time (chunk size 1). ACES-O
        (both inits): each task costs far more than a Python call, so Python
        threads hand tasks to ``rerank_one_o`` (serial kernels, GIL released)
        -- no numba parallel region, so no JIT cost for one.
        ``n_threads``: threads across tasks (``None``: numba's current count;
        values above ``NUMBA_NUM_THREADS`` are capped there); numba's count is
        set for the call and restored. Small batches (under
        :attr:`parallel_min_work`) and calls that find another parallel
        launch running under the ``workqueue`` layer run the same kernel per
        task. Results equal :meth:`majority_vote` / :meth:`aces_c` /
        :meth:`aces_o` task by task bit for bit, whatever the route and thread
        count; arrays are views into a few flat buffers. Returns ``None`` for
        CodeT and B4 (the caller loops over the tasks). Cost: the sum of the
        per-task costs divided across threads.
        """
        code = _BATCH_CODES.get(method)
        if code is None:
            return None
        return _rerank_batch(self, [_as_matrix(B) for B in Bs], method, code, params,
                             n_threads)

    def warmup(self) -> Dict[str, Any]:
        """Compile every kernel (serial and parallel builds); see :func:`warmup`."""
        return warmup()

    def info(self) -> dict:
        import numba

        _note_layer()
        return {
            "numba": numba.__version__,
            "threading_layer": _layer or "not chosen yet (no parallel call; run warmup())",
            "num_threads": numba.get_num_threads(),
            "cache": _kernels.CACHE,
            "parallel_min_work": self.parallel_min_work,
        }


def warmup() -> Dict[str, Any]:
    """JIT-compile every kernel signature the backend uses, on tiny inputs.

    Covers LOO-AUC (uniform and weighted), the surrogate and ACES-O, each with
    unit and explicit counts, the method glue and the batch kernel
    (:meth:`NumbaBackend.rerank_batch`), in both the serial and the parallel
    build (the parallel run also makes numba choose its threading layer).
    Read-only inputs need nothing more: they reach the kernels as writeable
    aliases, with the same signatures. Takes about 30-40 s of CPU the first time
    in a process (about a second with ``ACES_FAST_NUMBA_CACHE=1`` and a warm
    cache), milliseconds afterwards.
    Returns :meth:`NumbaBackend.info`.

    Raises :class:`BackendUnavailableError` when numba is not installed.
    """
    _load_kernels()
    B = np.array([[1, 0, 1, 1], [0, 1, 1, 0], [1, 1, 1, 0]], dtype=np.uint8)
    m = B.shape[1]
    w = np.full(m, 1.0 / m)
    active = np.array([1, 1, 0, 1], dtype=np.uint8)
    # the serial build, then the parallel one (never used, so never compiled,
    # when numba has a single thread)
    for backend in (NumbaBackend(parallel_min_work=_NEVER), NumbaBackend(parallel_min_work=0)):
        for counts in (None, np.array([2, 0, 1])):
            backend.loo_auc(B, None, 1e-9, counts)
            backend.loo_auc(B, w, 1e-9, counts)
            backend.surrogate(B, w, 10.0, counts)
            backend.aces_o_fit(B, np.zeros(m), active, 10.0, 0.01, 2, counts)
        # the method glue and the batch kernel
        backend.majority_vote(B)
        backend.aces_c(B, "weighted")
        backend.aces_o(B, 10.0, 0.01, 2, 2, "aces-c")
        o_params = {"gamma": 10.0, "lr": 0.01, "steps": 2, "top_k": 2, "init": "aces-c",
                    "tie_tol": 1e-9}
        backend.rerank_batch([B, B[:2]], "aces-c", {"tie_tol": 1e-9}, None)
        backend.rerank_batch([B, B[:2]], "aces-o-warm", o_params, None)
    return NumbaBackend().info()


def load() -> Backend:
    _load_kernels()
    return NumbaBackend()
