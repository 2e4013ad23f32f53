"""What one benchmark test does with the pytest-benchmark fixture: the only timing
mechanism of the project (``aces-fast bench`` runs this suite and reads its JSON).

Three modes, chosen by the pytest options:

* smoke (``--benchmark-disable``, the default of a plain ``pytest`` run): each
  cell's function runs once and its output is checked; nothing is timed;
* timing (``--benchmark-enable``): an untimed warm-up call (first repetition of
  a cell only; lazy imports and caches), then pytest-benchmark times the call.
  Calls whose warm-up took 0.1 s or more are timed in a fixed number of rounds,
  about 3 samples over all repetitions of the cell; the rest with
  pytest-benchmark's calibrated rounds;
* memory (``--bench-memory``): one warm-up call, then one call whose peak
  resident memory above the resident memory before it is recorded
  (:func:`.memory.peak_extra_bytes`); its time is not meaningful.

A ``real`` cell times every problem of a dataset one call at a time
(``benchmark.pedantic`` with a setup that hands out the problems in turn, each
problem ``repeats`` times) and records the per-problem latency distribution: the
median over problems of each problem's median time, and the 99th percentile.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .cells import Case, input_bytes, inputs, make_call
from .memory import peak_extra_bytes
from .runtime import thread_limit

#: smoke runs use this many batch tasks and real problems (they check the
#: plumbing, not the speed)
SMOKE_BATCH_TASKS = 4
SMOKE_PROBLEMS = 4
#: most repetitions of each problem in one real-cell measurement
MAX_PROBLEM_REPEATS = 20


class Mode:
    """How the suite runs: ``smoke``, ``timing`` or ``memory``, the
    pytest-benchmark time budget per measurement (``max_time`` seconds) and the
    repetitions of each cell (``reps``)."""

    def __init__(self, name: str, max_time: float = 1.0, reps: int = 1):
        if name not in ("smoke", "timing", "memory"):
            raise ValueError(f"unknown mode {name!r}")
        self.name = name
        self.max_time = max_time
        self.reps = reps


def _host(x: Any) -> np.ndarray:
    """An output array on the host (a torch tensor may live on a GPU)."""
    return np.asarray(x.detach().cpu() if hasattr(x, "detach") else x)


def check_output(case: Case, out: Any, B: Any) -> None:
    """The call computed something of the right shape (guards against timing a no-op)."""
    if case.kind == "batch":
        assert isinstance(out, Sequence) and len(out) == len(B)  # a BatchResult
        n, m = B[0].shape
        assert tuple(out[0].scores.shape) == (n,) and _host(out[0].weights).shape == (m,)
        return
    n, m = B.shape
    if case.op.startswith("loo-auc"):
        values = _host(out)
        assert values.shape == (m,)
        finite = values[np.isfinite(values)]
        assert ((finite >= 0) & (finite <= 1)).all()
        return
    weights = out[0] if isinstance(out, tuple) else out.weights
    weights = _host(weights)
    assert weights.shape == (m,) and (weights >= 0).all()
    total = float(weights.sum())
    assert total == 0.0 or abs(total - 1.0) < 1e-9


def _timed(benchmark: Any, fn: Callable[[], Any], warm_s: float, reps: int) -> Any:
    """Time ``fn``: calibrated rounds for calls under 0.1 s, else a fixed count
    giving about 3 samples over the cell's ``reps`` repetitions."""
    if warm_s >= 0.1:
        return benchmark.pedantic(fn, rounds=max(1, -(-3 // reps)), iterations=1)
    return benchmark(fn)


def _warm(fn: Callable[[], Any], warmed: dict[Any, float], key: Any) -> tuple[float, Any]:
    """Run ``fn`` once untimed unless ``key`` was warmed: ``(its duration, its result
    or None)``. The duration only plans the measurement."""
    if key in warmed:
        return warmed[key], None
    t0 = time.perf_counter()
    out = fn()
    warmed[key] = time.perf_counter() - t0
    return warmed[key], out


def run_case(case: Case, benchmark: Any, mode: Mode, warmed: dict[Any, float]) -> None:
    """Run one cell (see the module docstring); results go to ``benchmark.extra_info``.

    The library's :class:`~aces_fast.CostWarning` is silenced here: the large cells
    are costly on purpose (the warning tells users what the suite measures), and
    the test configuration turns every warning into an error."""
    from aces_fast import CostWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CostWarning)
        _run_case(case, benchmark, mode, warmed)


def _run_case(case: Case, benchmark: Any, mode: Mode, warmed: dict[Any, float]) -> None:
    benchmark.group = case.group
    benchmark.extra_info.update(
        op=case.op,
        family=case.family,
        size=case.size,
        impl=case.impl,
        threads=case.threads,
        rep=case.rep,
        kind=case.kind,
    )
    if case.kind == "real":
        _run_real(case, benchmark, mode, warmed)
        return
    if case.kind == "batch":
        B, w = (inputs(case, SMOKE_BATCH_TASKS) if mode.name == "smoke" else inputs(case))[0]
        benchmark.extra_info["tasks"] = len(B)
    else:
        B, w = inputs(case)[0]
    fn = make_call(case.op, case.impl, B, w, threads=case.threads)
    with thread_limit(case.threads):
        if mode.name == "smoke":
            out = benchmark(fn)
        elif mode.name == "memory":
            fn()
            peak: list[int] = []

            def measured() -> Any:
                extra, result = peak_extra_bytes(fn)
                peak.append(extra)
                return result

            out = benchmark.pedantic(measured, rounds=1, iterations=1)
            benchmark.extra_info.update(peak_extra_bytes=peak[0], input_bytes=input_bytes(B))
        else:
            out = _timed(benchmark, fn, _warm(fn, warmed, case.cell)[0], mode.reps)
    check_output(case, out, B)


def _run_real(case: Case, benchmark: Any, mode: Mode, warmed: dict[Any, float]) -> None:
    problems = inputs(case)
    if mode.name == "smoke":
        problems = problems[:SMOKE_PROBLEMS]
    fns = [make_call(case.op, case.impl, B, w) for B, w in problems]
    benchmark.extra_info["problems"] = len(problems)

    def sweep() -> list[Any]:
        return [fn() for fn in fns]

    with thread_limit(case.threads):
        if mode.name == "smoke":
            outs = benchmark(sweep)
        elif mode.name == "memory":
            sweep()
            peaks: list[int] = []

            def measured() -> list[Any]:
                results = []
                for fn in fns:
                    extra, result = peak_extra_bytes(fn)
                    peaks.append(extra)
                    results.append(result)
                return results

            outs = benchmark.pedantic(measured, rounds=1, iterations=1)
            worst = int(np.argmax(peaks))
            benchmark.extra_info.update(
                peak_extra_bytes=peaks[worst], input_bytes=problems[worst][0].nbytes
            )
        else:
            sweep_s, outs = _warm(sweep, warmed, case.cell)  # outputs checked once per cell
            repeats = int(min(MAX_PROBLEM_REPEATS, max(1, mode.max_time // max(sweep_s, 1e-9))))
            order = [i for _ in range(repeats) for i in range(len(fns))]
            handed: list[int] = []

            def setup() -> Any:
                i = order[len(handed)]
                handed.append(i)
                return (fns[i],), {}

            benchmark.pedantic(lambda fn: fn(), setup=setup, rounds=len(order))
            data = list(benchmark.stats.stats.data)
            per_problem = [
                float(np.median([t for t, i in zip(data, handed) if i == k]))
                for k in range(len(fns))
            ]
            benchmark.extra_info.update(
                repeats_per_problem=repeats,
                problem_median_s=float(np.median(per_problem)),
                problem_p99_s=float(np.percentile(per_problem, 99)),
                problem_max_s=float(max(per_problem)),
            )
    for out, (B, _) in zip(outs or [], problems):
        check_output(case, out, B)
