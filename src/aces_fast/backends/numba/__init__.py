"""``numba``: njit kernels running the same algorithms as the C++ core.

numba is imported only when the registry calls :func:`load` (so ``import
aces_fast`` -- and ``import aces_fast.backends.numba`` -- never imports it);
the kernels live in this package's modules, one per kernel family as in
``csrc/kernels/``: :mod:`.loo_auc`, :mod:`.surrogate`, :mod:`.aces_o`,
:mod:`.dedup`, :mod:`.scores`, :mod:`.semantics` (the compiled semantics)
(and :mod:`._jit`, their shared jit options).

The backend is a kernel provider: the methods are :mod:`aces_fast._semantics`
on NumPy arrays, with this backend's kernels and two primitives of its own
rounding -- ``sum`` in ascending order and the C library's ``log``
(:mod:`.scores`). For the one-pass methods (majority vote, ACES-C), whose
Python costs as much as their kernels on small inputs, numba compiles those
same semantics functions against a typed ``nx`` (:mod:`.semantics`): a call
below the parallel threshold is then one jitted call, with the same bits.

JIT compilation happens on the first call of each kernel (seconds). Call
:func:`aces_fast.warmup` (``warmup("numba")``; the CLI's ``aces-fast warmup``)
once before timing or serving so no call pays it unknowingly. The compiled
code is kept in a per-user disk cache (:mod:`._cache`: on by default, keyed by
everything that changes the generated code, safe for concurrent processes and
read-only installs; ``ACES_FAST_NUMBA_CACHE=0`` turns it off,
``ACES_FAST_NUMBA_CACHE_DIR`` moves it), so only the first process on a
machine compiles.

Uniform LOO-AUC below the parallel threshold is one kernel call
(``uniform_loo_auc``: identical rows merged into counts by hashing; the merge
also lets the scores be computed once per distinct row); weighted LOO-AUC
sorts the scores in NumPy and runs the rest in numba; the surrogate and the
ACES-O fit run entirely in numba (dropping rows with count 0 and merging
identical rows into counts first: the pair work is quadratic in the rows).

Read-only input arrays are passed to the kernels as writeable aliases of the
same memory (the kernels never write their inputs), so they reuse the
signatures :func:`warmup` compiled instead of compiling their own.

Threads: inputs with at least :attr:`NumbaBackend.parallel_min_work` units of
work run the ``parallel=True`` kernels (prange over columns), smaller ones the
serial build; both give identical bits. numba's ``workqueue`` threading layer
cannot run two parallel kernels at once, so under that layer a call that finds
another parallel call running uses the serial build instead (still releasing
the GIL: concurrent calls from Python threads stay safe and parallel).
:meth:`NumbaBackend.rerank_batch` hands the tasks to Python threads, each
running the per-task method on the serial build (majority vote and ACES-C: one
compiled call each; ACES-O: the serial kernels), which releases the GIL.
"""

from __future__ import annotations

import importlib
import threading
import time
import types
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import numpy as np

from ... import _registry, _semantics
from ..._validation import as_pass_matrix, check_zero_one
from ...result import RerankResult
from ..base import ArrayBackend, Backend, BackendUnavailableError
from . import _cancel

_UNAVAILABLE = "numba is not installed (pip install 'aces_fast[numba]')"
#: the kernel modules, in dependency order
_KERNEL_MODULES = ("_jit", "scores", "dedup", "loo_auc", "surrogate", "aces_o", "semantics")

_kernels: Any = None  # every kernel module's names in one namespace, once numba imported fine
_parallel_lock = threading.Lock()
_layer: str | None = None  # numba's threading layer, known after a parallel launch


def _load_kernels():
    """Import numba and the kernels once; :class:`BackendUnavailableError` says why not.

    Returns a namespace holding the names of every kernel module.
    """
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
        namespace = types.SimpleNamespace()
        for name in _KERNEL_MODULES:
            module = importlib.import_module(f"{__name__}.{name}")
            namespace.__dict__.update(
                (k, v) for k, v in vars(module).items() if not k.startswith("__")
            )
        _kernels = namespace
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


def _loo_auc(
    B: np.ndarray,
    w: np.ndarray | None,
    tie_tol: float,
    cnt: np.ndarray,
    parallel: bool,
    colsum: np.ndarray = _EMPTY_I,
):
    """``(LOO-AUC (m,), rep)`` (see :meth:`NumbaBackend.loo_auc`; ``w`` None =
    uniform). Uniform and serial: one kernel call; weighted: the sort runs in
    NumPy, the rest in numba. Both merge identical rows into counts first on
    inputs large enough for that to pay (as the C++ kernels do). Uniform only:
    ``colsum`` (int64 (m,) or empty) gets the count-weighted passers per test,
    and ``rep`` the representative identical row of every row (``None`` for
    weights, or when no rows were merged)."""
    k = _kernels
    n, m = B.shape
    if w is None and not parallel:
        out = np.empty(m)
        reps = np.empty(n, dtype=np.int64)
        return out, (reps if k.uniform_loo_auc(B, cnt, out, colsum, reps) else None)
    out = np.full(m, np.nan)
    keep = np.flatnonzero(cnt > 0)
    if m == 0 or keep.size == 0:
        return out, None
    if w is None:
        # wide blocks (the inner loops run along a block's columns), but enough
        # of them to keep every thread busy
        per_thread = -(-m // (2 * _num_threads()))
        width = min(512, max(64, -(-per_thread // 64) * 64))
        dedup = n >= k.DEDUP_MIN_ROWS and n * m >= k.DEDUP_MIN_CELLS
        rs, c, rep = k.row_sums_and_reps(B, cnt, dedup)
        args = (
            B,
            True,
            c,
            *k.levels_by_count(rs, c, m),
            _EMPTY_I,
            _EMPTY_F,
            _EMPTY_I,
            _EMPTY_F,
            0.0,
            width,
            out,
            colsum,
        )
    else:
        rep = None
        if n >= k.DEDUP_MIN_ROWS and n * m >= k.DEDUP_MIN_CELLS:
            # identical rows merged into counts, as the C++ kernels do: the merge
            # per column walks the distinct rows only (wins and ties are integer
            # counts, so the values are those of the unmerged rows, bit for bit)
            _, cnt, reps = k.row_sums_and_reps(B, cnt, True)
            keep = np.flatnonzero(cnt > 0)
            s = k.row_scores_rep(B, w, reps)
        else:
            s = k.row_scores(B, w)
        perm = keep[np.argsort(s[keep], kind="stable")]
        args = (
            B,
            False,
            cnt,
            _EMPTY_I,
            _EMPTY_I,
            _EMPTY_I,
            _EMPTY_I,
            perm,
            s[perm],
            cnt[perm],
            w,
            tie_tol * float(w.sum()),
            64,
            out,
            _EMPTY_I,
        )
    _run(lambda par: (k.loo_blocks_parallel if par else k.loo_blocks)(*args), parallel)
    return out, rep


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


_UINT8 = np.dtype(np.uint8)


def _is_kernel_matrix(B: Any) -> bool:
    """Whether ``B`` reaches the kernels as it is: a writeable C-contiguous uint8
    2-D ndarray (the validated matrices of a method call)."""
    if type(B) is np.ndarray and B.dtype is _UINT8 and B.ndim == 2:
        flags = B.flags
        return flags.c_contiguous and flags.writeable
    return False


def _as_matrix(B: Any) -> np.ndarray:
    if _is_kernel_matrix(B):
        return B
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


_ONES = np.ones(0, dtype=np.int64)


def _ones(n: int) -> np.ndarray:
    """Unit row multiplicities (n,): a view of a shared read-only-by-convention
    buffer (the kernels never write their inputs)."""
    global _ONES
    if _ONES.shape[0] < n:
        _ONES = np.ones(max(n, 2 * _ONES.shape[0]), dtype=np.int64)
    return _ONES[:n]


def _as_counts(counts: Any, n: int) -> np.ndarray:
    if counts is None:
        return _ones(n)
    c = np.asarray(counts)
    if c.shape != (n,):
        raise ValueError(f"counts must have shape ({n},); got {c.shape}")
    if c.dtype.kind not in "biu" or np.any(c < 0):
        raise ValueError("counts must be non-negative integer row multiplicities")
    return _for_kernels(np.ascontiguousarray(c, dtype=np.int64))


#: a chunk of a compiled batch holds tasks up to about this much work (cost units
#: of rerank_batch: cells plus sort), so Ctrl-C and an error stop it soon
_CHUNK_WORK = float(1 << 22)


def _chunks(by_cost: np.ndarray, cost: np.ndarray, threads: int) -> list[np.ndarray]:
    """``by_cost`` (task indices, largest first) cut into consecutive chunks (int64
    arrays) of at most :data:`_CHUNK_WORK` work -- or one task, when larger -- and at
    most an eighth of the tasks per thread, so the threads end together."""
    cap = max(1, -(-len(by_cost) // (8 * max(threads, 1))))
    chunks: list[np.ndarray] = []
    start = 0
    work = 0.0
    for k in range(len(by_cost)):
        c = float(cost[by_cost[k]])
        if k > start and (work + c > _CHUNK_WORK or k - start >= cap):
            chunks.append(by_cost[start:k])
            start, work = k, 0.0
        work += c
    if start < len(by_cost):
        chunks.append(by_cost[start:])
    return chunks


def _in_threads(fn, items: np.ndarray, threads: int) -> None:
    """``fn(item)`` for every item, on ``threads`` Python threads (the caller's included)
    taking the next item as they finish; the first exception is re-raised.

    The first failure -- a ``KeyboardInterrupt`` (Ctrl-C) on the calling thread
    included -- stops the other threads at their next kernel boundary
    (:mod:`._cancel`), and they are joined before it is re-raised: no thread of the
    batch is left computing.
    """
    if threads <= 1 or len(items) <= 1:
        for item in items:
            fn(int(item))
        return
    queue = iter(items.tolist())
    lock = threading.Lock()
    errors: list[BaseException] = []
    stop = threading.Event()

    def work() -> None:
        with _cancel.stop_on(stop):
            while not stop.is_set():
                with lock:
                    item = next(queue, None)
                if item is None:
                    return
                try:
                    fn(item)
                except BaseException as exc:  # re-raised in the calling thread
                    errors.append(exc)
                    stop.set()

    helpers = [
        threading.Thread(target=work, daemon=True) for _ in range(min(threads, len(items)) - 1)
    ]
    for th in helpers:
        th.start()
    try:
        work()
        for th in helpers:
            th.join()
    except BaseException as exc:  # Ctrl-C while joining: stop the helpers, then raise
        errors.insert(0, exc)
        stop.set()
        for th in helpers:
            th.join()
    if errors:
        first = next((e for e in errors if not isinstance(e, _cancel.Stopped)), errors[0])
        raise first


def _max_threads() -> int:
    """The most threads a batch uses (numba's pool size, ``NUMBA_NUM_THREADS``)."""
    import numba

    return int(numba.config.NUMBA_NUM_THREADS)


class NumbaBackend(ArrayBackend):
    """Backend running the njit kernels of this package."""

    name = "numba"

    #: Work (about one unit per nanosecond of serial run time: n*m for weighted
    #: LOO-AUC, n*m/8 uniform, n*m*(1 + n/4) for the surrogate, per step for
    #: ACES-O) from which the parallel build runs; below it, starting the
    #: threads costs more than they save.
    parallel_min_work: int = 1 << 16

    def __init__(self, parallel_min_work: int | None = None):
        """``parallel_min_work``: override the class default (0 = always parallel)."""
        _load_kernels()
        if parallel_min_work is not None:
            self.parallel_min_work = int(parallel_min_work)

    def _parallel(self, work: float) -> bool:
        return work >= self.parallel_min_work and _num_threads() > 1

    def _parallel_uniform(self, B: np.ndarray) -> bool:
        """Whether uniform LOO-AUC on ``B`` runs the parallel build (its kernel
        spends a fraction of a nanosecond per cell: work n m / 8)."""
        return self._parallel(B.size // 8)

    @staticmethod
    def _surrogate_work(n: int, m: int) -> float:
        # n m for the scores and gradient, up to n^2/4 sigmoid pairs per column
        return n * m * (1.0 + n / 4.0)

    # -- kernels -----------------------------------------------------------------

    def loo_auc(self, B, weights, tie_tol, counts=None):
        B = _as_matrix(B)
        n, m = B.shape
        c = _as_counts(counts, n)
        if weights is None:
            return _loo_auc(B, None, 0.0, c, self._parallel_uniform(B))[0]
        w = _as_vector(weights, m, "weights")
        return _loo_auc(B, w, float(tie_tol), c, self._parallel(n * m))[0]

    def loo_auc_uniform(self, B):
        """Uniform LOO-AUC, passers per test and the representative row of every row
        (identical rows merged by the kernel), for :meth:`row_scores`."""
        B = _as_matrix(B)
        n, m = B.shape
        colsum = np.zeros(m, dtype=np.int64)
        L, rep = _loo_auc(B, None, 0.0, _ones(n), self._parallel_uniform(B), colsum)
        return L, colsum, rep

    def surrogate(self, B, weights, gamma, counts=None):
        B = _as_matrix(B)
        n, m = B.shape
        w = _as_vector(weights, m, "weights")
        return _surrogate(
            B, _as_counts(counts, n), w, float(gamma), self._parallel(self._surrogate_work(n, m))
        )

    def aces_o_fit(self, B, logits0, active, gamma, lr, steps, counts=None, bins=None):
        self.no_bins(bins)
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
        return _run(
            lambda par: _kernels.aces_o_fit(B, logits0, active, gamma, lr, steps, cnt, par),
            self._parallel(work),
        )

    def row_scores(self, B, w, plan=None):
        """``B @ w`` summed in ascending test order (float64 (n,)); with ``plan`` (the
        representative rows of :meth:`loo_auc_uniform`) each distinct row once."""
        B = _as_matrix(B)
        if type(w) is not np.ndarray or w.dtype != np.float64 or not w.flags.c_contiguous:
            w = np.ascontiguousarray(w, dtype=np.float64)
        w = _for_kernels(w)
        if plan is None:
            return _kernels.row_scores(B, w)
        return _kernels.row_scores_rep(B, w, plan)

    def row_sums(self, B):
        return _kernels.row_sums(_as_matrix(B))

    def column_sums(self, B):
        return _kernels.column_sums(_as_matrix(B))

    # the public kernels: values checked, Ctrl-C-safe like the methods

    @_cancel.ctrl_c_stays_keyboard_interrupt
    def loo_auc_public(self, B, weights, tie_tol):
        self.check_values(B)
        return super().loo_auc_public(B, weights, tie_tol)

    @_cancel.ctrl_c_stays_keyboard_interrupt
    def surrogate_public(self, B, weights, gamma):
        self.check_values(B)
        return super().surrogate_public(B, weights, gamma)

    # -- primitives with this backend's rounding ------------------------------------

    @staticmethod
    def sum(x):
        """Float sum in ascending order (a plain loop: its rounding is the code's)."""
        if type(x) is not np.ndarray or x.dtype != np.float64 or not x.flags.c_contiguous:
            x = np.ascontiguousarray(x, dtype=np.float64)
        return _kernels.ascending_sum(_for_kernels(x))

    @staticmethod
    def log(x):
        """The C library's ``log`` per entry (NumPy's vectorized log may round otherwise)."""
        return _kernels.log(_for_kernels(np.ascontiguousarray(x, dtype=np.float64)))

    # -- conversions -------------------------------------------------------------------

    def prepare(self, B):
        # No 0/1 scan here: the call that computes checks the values, in its
        # compiled entry when it has one (as the C++ kernels do), else with
        # check_values (a kernel scan: NumPy's B.max() costs more than the whole
        # scan on small matrices).
        B = as_pass_matrix(B, check_values=False)  # C-contiguous uint8 (n, m)
        return B if B.flags.writeable else _for_kernels(B)

    @staticmethod
    def check_values(B: np.ndarray) -> None:
        """ValueError unless prepared ``B`` holds only 0 and 1. O(n m)."""
        check_zero_one(B, top=_kernels.max_byte(B))

    # -- methods ---------------------------------------------------------------------

    def rerank(self, B, method, values):
        """One method call; majority vote and ACES-C (:data:`.semantics.COMPILED`) run
        their semantics compiled, as one jitted call, unless the input is large
        enough for the parallel kernels (there the Python around them is noise)."""
        try:  # what ctrl_c_stays_keyboard_interrupt does, without its call frame
            if not _is_kernel_matrix(B):
                B = _as_matrix(B)
            spec = _registry.get(method)
            compiled = _kernels.entry(spec.semantics)
            # the compiled methods are one uniform LOO-AUC pass: compiled whole
            # exactly where that pass would run serially
            if compiled is None or self._parallel_uniform(B):
                self.check_values(B)
                return spec.pack(spec.run(self, B, values), values, self.name)
            n, m = B.shape
            # loo_auc (m,) always: the compiled method alone decides whether it writes
            # it (pack reads it when the spec declares it), so no size can disagree
            out = (np.empty(n), np.empty(m), np.empty(n, dtype=np.int64), np.empty(m))
            status = compiled(B, *out, *spec.args(values))
            if status < 0:  # B holds the value -status: nothing was computed
                check_zero_one(B, top=-status)
            return spec.pack(_semantics.Outputs(*out, fallback=status), values, self.name)
        except SystemError as exc:
            _cancel.reraise(exc)

    @_cancel.ctrl_c_stays_keyboard_interrupt
    def rerank_batch(
        self, Bs: Sequence[np.ndarray], method: str, values: dict[str, Any], n_threads: int | None
    ) -> list[RerankResult] | None:
        """Rank many tasks at once (the protocol of :mod:`aces_fast.batch`).

        Methods whose semantics do their work in kernels (a spec's
        ``over_tasks``: majority vote, ACES-C, ACES-O) run on Python threads,
        largest tasks first, on the serial build: majority vote and ACES-C
        (compiled whole) in chunks of tasks, one compiled call per chunk (GIL
        released; :meth:`_compiled_batch`); ACES-O task by task, each its Adam
        fit in the serial kernels (GIL released), its Python around them holding
        the GIL for microseconds of a fit's milliseconds. ``n_threads``: threads
        across tasks (``None``: numba's thread count; values above
        ``NUMBA_NUM_THREADS`` are capped there). Small batches (under
        :attr:`parallel_min_work`) run in the calling thread. Results equal
        :meth:`rerank` task by task bit for bit, whatever the thread count.
        Every task's values are checked, each by its own task (an error names
        the lowest bad task). Returns ``None`` for the other methods (CodeT,
        B4), which the caller runs task by task. Cost: the sum of the per-task
        costs, divided across threads.
        """
        spec = _registry.get(method)
        mats = [_as_matrix(B) for B in Bs]
        if not spec.over_tasks:
            self._check_tasks(mats)  # the caller's task loop then names no task
            return None
        threads = _num_threads() if n_threads is None else min(int(n_threads), _max_threads())
        shapes = np.array([B.shape for B in mats], dtype=np.int64).reshape(len(mats), 2)
        n, m = shapes[:, 0].astype(np.float64), shapes[:, 1].astype(np.float64)
        cost = n * m + n * np.log2(n + 1.0)
        if "steps" in values:  # an Adam fit on (at most) top_k rows per task
            top_k = values.get("top_k")
            k = n if top_k is None else np.minimum(n, top_k)
            cost += (values["steps"] + 1) * k * m * (1.0 + k / 4.0)
        parallel = len(mats) > 1 and float(cost.sum()) >= self.parallel_min_work
        by_cost = np.argsort(-cost, kind="stable")
        tasks_entry = _kernels.tasks_entry(spec.semantics)
        if tasks_entry is not None:
            return self._compiled_batch(
                tasks_entry, mats, shapes, spec, values, cost, by_cost, threads if parallel else 1
            )
        results: list[Any] = [None] * len(mats)
        serial = _serial_backend()

        def run(t: int) -> None:
            results[t] = serial.rerank(mats[t], method, values)

        # largest first: with one task per thread at a time, the last ones are small.
        # Every task checks its own values (inside the compiled method, or first
        # thing in rerank), on the threads: a serial pass over all tasks up front
        # cost about a tenth of an ACES-C batch. On a bad value the batch stops,
        # and the error names the lowest bad task, as a check up front would.
        try:
            _in_threads(run, by_cost, threads if parallel else 1)
        except ValueError:
            self._check_tasks(mats)
            raise
        return results

    def _compiled_batch(
        self,
        tasks_entry: Callable[..., int],
        mats: list[np.ndarray],
        shapes: np.ndarray,
        spec: Any,
        values: dict[str, Any],
        cost: np.ndarray,
        by_cost: np.ndarray,
        threads: int,
    ) -> list[RerankResult]:
        """:meth:`rerank_batch` of a method compiled whole (:func:`.semantics.tasks_entry`):
        chunks of tasks, largest first, each chunk one compiled call on a Python
        thread (GIL released), results into shared output arrays that each task's
        result views. A task call's own Python (a few microseconds holding the
        GIL, during which the other threads' finished tasks wait) is paid per
        chunk instead. Same compiled semantics as :meth:`rerank`: the same bits.
        ``shapes``: int64 (T, 2), the tasks' (n, m)."""
        T = len(mats)
        # the matrices stay referenced by mats (and unchanged) for the whole call
        addr = np.array([B.ctypes.data for B in mats], dtype=np.int64)
        ns = np.ascontiguousarray(shapes[:, 0])
        ms = np.ascontiguousarray(shapes[:, 1])
        roff = np.zeros(T, dtype=np.int64)
        coff = np.zeros(T, dtype=np.int64)
        np.cumsum(ns[:-1], out=roff[1:])
        np.cumsum(ms[:-1], out=coff[1:])
        N, M = int(ns.sum()), int(ms.sum())
        scores, weights, loo = np.empty(N), np.empty(M), np.empty(M)
        order = np.empty(N, dtype=np.int64)
        status = np.zeros(T, dtype=np.int64)
        args = spec.args(values)
        chunks = _chunks(by_cost, cost, threads)
        bad = threading.Event()

        def run(c: int) -> None:
            if bad.is_set():  # a bad task was found: the batch raises
                return
            part = chunks[c]
            if tasks_entry(
                addr, ns, ms, roff, coff, part, scores, weights, order, loo, status, *args
            ) < len(part):
                bad.set()

        _in_threads(run, np.arange(len(chunks)), threads)
        if bad.is_set():
            self._check_tasks(mats)  # raises, naming the lowest bad task
        results: list[RerankResult] = []
        for t in range(T):
            r0, r1, c0, c1 = roff[t], roff[t] + ns[t], coff[t], coff[t] + ms[t]
            results.append(
                spec.pack(
                    _semantics.Outputs(
                        scores=scores[r0:r1],
                        weights=weights[c0:c1],
                        order=order[r0:r1],
                        loo_auc=loo[c0:c1],
                        fallback=int(status[t]),
                    ),
                    values,
                    self.name,
                )
            )
        return results

    def _check_tasks(self, mats: Sequence[np.ndarray]) -> None:
        """ValueError naming the lowest task whose matrix holds a value other than
        0 and 1 (nothing when all are valid)."""
        for t, B in enumerate(mats):
            try:
                self.check_values(B)
            except ValueError as exc:
                raise ValueError(f"task {t}: {exc}") from None

    def warmup(self, progress: Callable[[int, int, str], None] | None = None) -> dict[str, Any]:
        """Compile or load every kernel (serial and parallel builds); see :func:`warmup`."""
        return warmup(progress)

    def info(self) -> dict:
        import numba

        _note_layer()
        return {
            "numba": numba.__version__,
            "threading_layer": _layer
            or ("not chosen yet (no parallel call; run aces_fast.warmup('numba'))"),
            "num_threads": numba.get_num_threads(),
            "cache": _kernels._cache.status(),
            "parallel_min_work": self.parallel_min_work,
        }


_SERIAL: NumbaBackend | None = None


def _serial_backend() -> NumbaBackend:
    """The backend forced onto the serial kernels (for tasks on Python threads)."""
    global _SERIAL
    if _SERIAL is None:
        _SERIAL = NumbaBackend(parallel_min_work=_NEVER)
    return _SERIAL


def _dispatchers() -> list[Any]:
    """Every kernel dispatcher (numba's compiled-function objects) of this package."""
    from numba.core.registry import CPUDispatcher

    kernels = _load_kernels()
    found = {
        id(obj): obj for obj in vars(kernels).values() if isinstance(obj, CPUDispatcher)
    }  # a kernel imported by two modules counts once
    found.update((id(obj), obj) for obj in kernels.dispatchers())  # the compiled semantics
    return list(found.values())


def _compile_counts() -> tuple[int, int]:
    """(signatures compiled, signatures loaded from the disk cache) so far."""
    compiled = loaded = 0
    for d in _dispatchers():
        stats = d.stats
        compiled += sum(stats.cache_misses.values())
        loaded += sum(stats.cache_hits.values())
    return compiled, loaded


def _warmup_steps() -> list[tuple[str, Callable[[], Any]]]:
    """``(label, call)`` pairs that together reach every kernel signature: LOO-AUC
    (uniform and weighted), the surrogate and the ACES-O fit, with unit and
    explicit counts; every registered method, and the batch path of those with
    one; in the serial build and, with more than one thread, the parallel one."""
    B = np.array([[1, 0, 1, 1], [0, 1, 1, 0], [1, 1, 1, 0]], dtype=np.uint8)
    m = B.shape[1]
    w = np.full(m, 1.0 / m)
    active = np.array([1, 1, 0, 1], dtype=np.uint8)
    short = {"steps": 2, "top_k": 2}  # few Adam steps, fewer rows than B: every branch
    builds = [("serial", NumbaBackend(parallel_min_work=_NEVER))]
    if _max_threads() > 1:  # the parallel build is never used with one thread
        builds.append(("parallel", NumbaBackend(parallel_min_work=0)))
    steps: list[tuple[str, Callable[[], Any]]] = [("0/1 check", partial(builds[0][1].prepare, B))]
    for build, be in builds:
        for counts, how in ((None, ""), (np.array([2, 0, 1]), ", row counts")):
            steps += [
                (f"LOO-AUC uniform{how} ({build})", partial(be.loo_auc, B, None, 1e-9, counts)),
                (f"LOO-AUC weighted{how} ({build})", partial(be.loo_auc, B, w, 1e-9, counts)),
                (f"surrogate{how} ({build})", partial(be.surrogate, B, w, 10.0, counts)),
                (
                    f"ACES-O fit{how} ({build})",
                    partial(be.aces_o_fit, B, np.zeros(m), active, 10.0, 0.01, 2, counts),
                ),
            ]
        for spec in _registry.specs():
            names = _registry.METHOD_PARAMS[spec.name]
            values = _registry.method_params(
                spec.name, {k: v for k, v in short.items() if k in names}
            )
            steps.append((f"{spec.name} ({build})", partial(be.rerank, B, spec.name, values)))
            if spec.over_tasks:
                steps.append(
                    (
                        f"{spec.name} batch ({build})",
                        partial(be.rerank_batch, [B, B[:2]], spec.name, values, None),
                    )
                )
    return steps


def warmup(progress: Callable[[int, int, str], None] | None = None) -> dict[str, Any]:
    """Compile -- or load from the disk cache -- every kernel signature the backend uses.

    Runs :func:`_warmup_steps` on tiny inputs (read-only inputs need nothing
    more: they reach the kernels as writeable aliases, with the same
    signatures). The first time on a machine this compiles for tens of seconds;
    later processes load the compiled code from the per-user disk cache
    (:mod:`._cache`) in about a second; in a process that already ran it,
    milliseconds. ``progress(done, total, label)`` is called before each step
    and once at the end (``done == total``).

    Returns :meth:`NumbaBackend.info` plus ``compiled`` and ``loaded``: the
    kernel signatures this call compiled and loaded from the disk cache, and
    ``steps``: the seconds each step took (label -> seconds). Both count the
    distinct signatures made ready (:data:`._cache.log`: a loaded entry counts
    the helper signatures compiled into it), so a cold and a warm run report
    the same total.
    Raises :class:`BackendUnavailableError` when numba is not installed.
    """
    import numba

    kernels = _load_kernels()
    logged = len(kernels._cache.log)
    kernels._cache.reset_frames()
    steps = _warmup_steps()
    threads = numba.get_num_threads()
    numba.set_num_threads(_max_threads())  # this thread may have been limited
    seconds: dict[str, float] = {}
    try:
        for done, (label, call) in enumerate(steps):
            if progress is not None:
                progress(done, len(steps), label)
            start = time.perf_counter()
            call()
            seconds[label] = round(time.perf_counter() - start, 4)
    finally:
        numba.set_num_threads(threads)
    if progress is not None:
        progress(len(steps), len(steps), "done")
    ready: dict[tuple[str, str], str] = {}
    for name, sig, how in kernels._cache.log[logged:]:
        ready.setdefault((name, sig), how)
    compiled = sum(1 for how in ready.values() if how == "compiled")
    facts = NumbaBackend().info()
    facts.update(compiled=compiled, loaded=len(ready) - compiled, steps=seconds)
    return facts


def load() -> Backend:
    _load_kernels()
    return NumbaBackend()
