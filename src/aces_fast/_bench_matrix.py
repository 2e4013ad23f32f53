"""The benchmark matrix of ``aces-fast bench`` and ``benchmarks/``: cases, workloads,
skip rules, thread pinning and timing.

A :class:`Case` is one operation x size x implementation x threads cell.
:func:`workload` makes its pass matrix, :func:`make_call` the callable to time,
:func:`skip_reason` says why a cell cannot run here (never skipped silently),
:func:`thread_limit` pins every threaded library, and :func:`measure_group`
times the implementations of one group with interleaved samples after an
untimed warm-up (numba's ``warmup()`` runs first in :func:`load_runtimes`).
Reporting and the command line live in :mod:`aces_fast.bench`.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import importlib.util
import math
import os
import sys
import time
from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

import numpy as np

# ---------------------------------------------------------------------------
# the matrix

#: operation -> (description, baseline implementation)
OPS: Dict[str, Tuple[str, str]] = {
    "loo-auc": ("LOO-AUC, uniform weights", "numpy-rankdata"),
    "loo-auc-weighted": ("LOO-AUC, float weights", "numpy-rankdata"),
    "aces-c": ("ACES-C", "numpy-rankdata"),
    "aces-o": ("ACES-O, top_k=24, 90 steps", "torch-autograd"),
    "aces-o-all": ("ACES-O, top_k=None, 90 steps", "torch-autograd"),
}
SIZES: Tuple[Tuple[int, int], ...] = ((24, 100), (200, 500), (2000, 1000), (20000, 1000))
#: sizes with at least this many candidates are marked ``slow`` in ``benchmarks/``
SLOW_ROWS = 2000
BACKENDS: Tuple[str, ...] = ("cpp", "numba", "torch", "numpy")
BASELINES: Tuple[str, ...] = ("numpy-rankdata", "torch-autograd")
IMPLS: Tuple[str, ...] = BACKENDS + BASELINES
ACES_O_STEPS = 90
ACES_O_TOP_K = 24

#: Rough single-thread throughput of a whole ACES-O run, in (passer, failer,
#: test) triples per step per second, measured on the benchmark matrices on a
#: 2-core AMD EPYC (cpp and numba profit from the duplicate rows). Used only to
#: skip calls far over the time budget, so it need not be precise.
_PAIR_RATE = {"cpp": 2e9, "numba": 2e9, "torch": 3e8, "numpy": 7e7, "torch-autograd": 1e7}
#: The pair tensor of the autograd baseline may use at most this share of RAM.
_MEM_SHARE = 0.25


@dataclass(frozen=True)
class Case:
    """One cell of the matrix."""

    op: str
    n: int
    m: int
    impl: str
    threads: int

    @property
    def size(self) -> str:
        return f"{self.n}x{self.m}"

    @property
    def group(self) -> str:
        """pytest-benchmark group: operation x size x threads (implementations compete inside)."""
        return f"{self.op} {self.size} {self.threads}t"

    @property
    def id(self) -> str:
        return f"{self.op}-{self.size}-{self.impl}-{self.threads}t"

    @property
    def is_baseline(self) -> bool:
        return self.impl in BASELINES

    @property
    def slow(self) -> bool:
        """Worth leaving out of a quick smoke run: a large size or a heavy estimate."""
        return self.n >= SLOW_ROWS or estimate_seconds(self.op, self.impl, self.n, self.m) > 2.0


def impls_for(op: str) -> Tuple[str, ...]:
    """The backends plus the operation's baseline."""
    return BACKENDS + (OPS[op][1],)


def all_cases(ops: Sequence[str] = tuple(OPS), sizes: Sequence[Tuple[int, int]] = SIZES,
              threads: Sequence[int] = (1, 2),
              impls: Optional[Sequence[str]] = None) -> List[Case]:
    """Every case of the full matrix restricted to the given axes."""
    return [Case(op, n, m, impl, t) for t in threads for op in ops for (n, m) in sizes
            for impl in impls_for(op) if impls is None or impl in impls]


def quick_cases(impls: Optional[Sequence[str]] = None) -> List[Case]:
    """The default ``aces-fast bench`` matrix, ~1-2 minutes on 2 cores.

    One thread: every operation at 24x100 and 200x500, plus LOO-AUC at
    20000x1000 (a target); two threads: every operation at 200x500. The
    single-threaded NumPy reference runs only in the one-thread groups up to
    200x500 (seconds per call beyond).
    """
    cases = all_cases(sizes=SIZES[:2], threads=(1,), impls=impls)
    cases += [c for c in all_cases(ops=("loo-auc",), sizes=(SIZES[3],), threads=(1,),
                                   impls=impls) if c.impl != "numpy"]
    cases += [c for c in all_cases(sizes=(SIZES[1],), threads=(2,), impls=impls)
              if c.impl != "numpy"]
    return cases


# ---------------------------------------------------------------------------
# workloads, calls, skip rules


@functools.lru_cache(maxsize=8)
def workload(n: int, m: int) -> Tuple[np.ndarray, np.ndarray]:
    """``(B uint8 (n, m), weights float64 (m,))`` for a size; fixed seeds, cached.

    The arrays are shared between calls: callers must not modify them.
    """
    from ._baselines import make_pass_matrix

    B = make_pass_matrix(n, m, seed=1000 * n + m)
    w = np.random.default_rng(n + m).random(m)
    # left writable: numba compiles separate code for read-only arrays, which
    # would put JIT time inside a measurement
    return B, w


def make_call(op: str, impl: str, B: np.ndarray, w: np.ndarray) -> Callable[[], Any]:
    """A zero-argument callable running ``op`` with ``impl`` on ``(B, w)``."""
    if op not in OPS:
        raise ValueError(f"unknown operation {op!r}; choose from {', '.join(OPS)}")
    top_k = None if op == "aces-o-all" else ACES_O_TOP_K
    if impl in BACKENDS:
        import aces_fast as af

        if op == "loo-auc":
            return lambda: af.loo_auc(B, backend=impl)
        if op == "loo-auc-weighted":
            return lambda: af.loo_auc(B, w, backend=impl)
        if op == "aces-c":
            return lambda: af.aces_c(B, backend=impl)
        return lambda: af.aces_o(B, steps=ACES_O_STEPS, top_k=top_k, backend=impl)
    from . import _baselines as bl

    if impl == "numpy-rankdata" and op.startswith("loo-auc"):
        return lambda: bl.numpy_loo_auc(B, w if op == "loo-auc-weighted" else None)
    if impl == "numpy-rankdata" and op == "aces-c":
        return lambda: bl.numpy_aces_c(B)
    if impl == "torch-autograd" and op.startswith("aces-o"):
        return lambda: bl.torch_aces_o(B, steps=ACES_O_STEPS, top_k=top_k)
    raise ValueError(f"implementation {impl!r} does not compute {op!r}")


def _pairs(op: str, n: int, m: int, B: Optional[np.ndarray]) -> float:
    """(passer, failer, test) triples in one ACES-O step on the optimized rows."""
    k = n if op == "aces-o-all" else min(n, ACES_O_TOP_K)
    if B is None:
        return 0.25 * k * k * m  # upper bound: every test splits the rows in half
    from ._baselines import top_k_rows

    c = B[top_k_rows(B, k)].sum(axis=0, dtype=np.int64).astype(np.float64)
    return float(np.dot(c, k - c))


def estimate_seconds(op: str, impl: str, n: int, m: int,
                     B: Optional[np.ndarray] = None) -> float:
    """A rough single-call time (seconds) from :data:`_PAIR_RATE`; only ACES-O
    and the NumPy reference's per-test loop can be expensive."""
    if not op.startswith("aces-o"):
        if impl == "numpy":  # one Python iteration per test
            return m * (2e-5 + 1e-7 * n)
        return 0.0
    return (ACES_O_STEPS + 1) * _pairs(op, n, m, B) / _PAIR_RATE[impl]


def _available_memory() -> float:
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return float(line.split()[1]) * 1024
    except OSError:
        pass
    return 4e9


def skip_reason(case: Case, B: Optional[np.ndarray] = None,
                max_call_s: float = 60.0) -> Optional[str]:
    """Why ``case`` cannot or should not run here (``None`` when it runs).

    Reasons: an unavailable backend or missing baseline dependency; the
    autograd baseline's ``(k, k, m)`` float64 pair tensors exceeding a quarter of
    the available memory; an estimated call time over ``max_call_s``.
    """
    if case.impl in BACKENDS:
        from .backends import BackendUnavailableError, get_backend

        try:
            get_backend(case.impl)
        except BackendUnavailableError as exc:
            return f"backend {case.impl} unavailable: {exc.reason}"
    elif case.impl == "torch-autograd":
        if importlib.util.find_spec("torch") is None:
            return "baseline (b) needs torch, which is not installed"
        from ._baselines import torch_aces_o_bytes

        k = case.n if case.op == "aces-o-all" else min(case.n, ACES_O_TOP_K)
        need = torch_aces_o_bytes(k, case.m)
        budget = _MEM_SHARE * _available_memory()
        if need > budget:
            return (f"infeasible: the autograd pair tensors (k x k x m float64, k={k}) need "
                    f"~{need / 1e9:.0f} GB, over {budget / 1e9:.1f} GB (O(k^2 m) memory)")
    elif case.impl == "numpy-rankdata":
        if importlib.util.find_spec("scipy") is None:
            return "baseline (a) needs scipy, which is not installed"
    est = estimate_seconds(case.op, case.impl, case.n, case.m, B)
    if est > max_call_s:
        why = (f"{ACES_O_STEPS + 1} steps x {_pairs(case.op, case.n, case.m, B):.2g} "
               "pair-test triples, O(k^2 m) per step" if case.op.startswith("aces-o")
               else "one Python iteration per test")
        return (f"over the time budget: ~{est:.3g} s per call estimated ({why}) "
                f"> {max_call_s:g} s (--max-call)")
    return None


# ---------------------------------------------------------------------------
# threads


def load_runtimes(impls: Sequence[str]) -> Dict[str, Any]:
    """Import what the implementations use and JIT-compile numba; return warm-up facts.

    Must run before :func:`thread_limit` so threadpoolctl sees every OpenMP and
    BLAS library, and before any timing so no import or JIT cost is measured.
    """
    facts: Dict[str, Any] = {}
    from .backends import BackendUnavailableError, get_backend

    for name in impls:
        if name in BACKENDS:
            try:
                get_backend(name)
            except BackendUnavailableError:
                continue
            if name == "numba":
                from .backends import numba as numba_backend

                warm = getattr(numba_backend, "warmup", None)
                if warm is not None:
                    t0 = time.perf_counter()
                    warm()
                    facts["numba_warmup_s"] = time.perf_counter() - t0
    for impl, module in (("torch-autograd", "torch"), ("numpy-rankdata", "scipy.stats")):
        if impl in impls:
            with contextlib.suppress(ImportError):
                importlib.import_module(module)
    return facts


@contextlib.contextmanager
def thread_limit(n: int) -> Iterator[Dict[str, Any]]:
    """Pin every threaded library in this process to ``n`` threads, then restore.

    threadpoolctl (if installed) limits the loaded BLAS and OpenMP runtimes;
    torch, numba and the cpp backend are set directly. ``OMP_NUM_THREADS`` and
    friends are set for libraries loaded later and for subprocesses. Yields a
    dict saying what was pinned.
    """
    if n < 1:
        raise ValueError(f"threads must be >= 1; got {n}")
    how: Dict[str, Any] = {"threads": n}
    with contextlib.ExitStack() as stack:
        env_keys = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
        saved_env = {k: os.environ.get(k) for k in env_keys}

        def restore_env() -> None:
            for k, v in saved_env.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v

        stack.callback(restore_env)
        for k in env_keys:
            os.environ[k] = str(n)
        try:
            from threadpoolctl import threadpool_limits

            stack.enter_context(threadpool_limits(limits=n))
            how["threadpoolctl"] = True
        except ImportError:
            how["threadpoolctl"] = False
        torch = sys.modules.get("torch")
        if torch is not None:
            old = torch.get_num_threads()
            torch.set_num_threads(n)
            stack.callback(torch.set_num_threads, old)
            how["torch"] = n
        numba = sys.modules.get("numba")
        if numba is not None:
            old_nb = numba.get_num_threads()
            nb = min(n, numba.config.NUMBA_NUM_THREADS)
            numba.set_num_threads(nb)
            stack.callback(numba.set_num_threads, old_nb)
            how["numba"] = nb
        from .backends import BackendUnavailableError, get_backend

        try:
            cpp = get_backend("cpp")
            old_cpp = cpp.n_threads
            cpp.n_threads = n
            stack.callback(setattr, cpp, "n_threads", old_cpp)
            how["cpp"] = n
        except BackendUnavailableError:
            pass
        yield how


# ---------------------------------------------------------------------------
# timing


@dataclass
class Timing:
    """Median seconds per call over ``repeats`` samples of ``number`` calls each."""

    median_s: float
    min_s: float
    repeats: int
    number: int


def _plan(first: float, min_time: float, max_repeats: int, long_call: float,
          single_call: float) -> Tuple[int, int]:
    """``(number, repeats)`` for a call whose warm-up took ``first`` seconds.

    Calls shorter than 10 ms are batched into samples of ~10 ms (so the cold
    caches left by the previous implementation of an interleaved group touch only
    the first call of a sample, and timer overhead vanishes); enough samples to
    fill ``min_time`` (at least 3, at most ``max_repeats``); one sample for a call
    of ``long_call`` seconds or more; none (the warm-up is the sample) from
    ``single_call`` seconds on, where a second call would only double the run time.
    """
    number = max(1, min(10000, int(1e-2 / max(first, 1e-9))))
    if first >= single_call:
        return 1, 0
    if first >= long_call:
        return number, 1
    return number, int(min(max_repeats, max(3, math.ceil(min_time / max(first * number,
                                                                          1e-9)))))


def measure_group(fns: Sequence[Callable[[], Any]], min_time: float = 0.3,
                  max_repeats: int = 101, long_call: float = 2.0,
                  single_call: float = 20.0) -> List[Timing]:
    """Time several callables, interleaving their samples round-robin.

    Each callable gets an untimed warm-up call (lazy imports, caches, any JIT
    left after :func:`load_runtimes`) that sizes its run (:func:`_plan`); then
    one sample of each is taken in turn until each has its count. On a shared
    machine, load changes then hit every implementation of a group alike, which
    keeps the speed-ups honest. The median of the samples is reported.
    """
    plans, samples = [], []
    for fn in fns:
        t0 = time.perf_counter()
        fn()
        first = time.perf_counter() - t0
        plans.append(_plan(first, min_time, max_repeats, long_call, single_call))
        samples.append([] if plans[-1][1] else [first])
    for r in range(max((p[1] for p in plans), default=0)):
        for fn, (number, repeats), got in zip(fns, plans, samples):
            if r < repeats:
                t0 = time.perf_counter()
                for _ in range(number):
                    fn()
                got.append((time.perf_counter() - t0) / number)
    return [Timing(float(np.median(got)), float(min(got)), len(got), number)
            for got, (number, _) in zip(samples, plans)]


def measure(fn: Callable[[], Any], min_time: float = 0.3, max_repeats: int = 101,
            long_call: float = 2.0, single_call: float = 20.0) -> Timing:
    """Time one callable with an adaptive repeat count (see :func:`measure_group`)."""
    return measure_group([fn], min_time, max_repeats, long_call, single_call)[0]
