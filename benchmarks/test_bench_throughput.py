"""Throughput at scale (issue 5): batches, small-call latency, large-pool memory.

* ``batch 200x500 <t>t``: 200 tasks of 200 x 500 ranked in one
  :func:`aces_fast.batch.rerank_batch` call with the ``cpp`` backend on 1 and 2
  threads, against the per-task loop over the public function. ``extra_info``
  holds ``tasks_per_s`` (target for ACES-C on 2 threads: 20 000).
* ``torch aces-o 200x500 1t``: batched ACES-O on the ``torch`` backend (64
  tasks, ``ACES_O_BATCH`` steps, padded batches on the CPU) against the per-task
  loop over ``aces_fast.rerank``; each runs in about a second once.
* ``latency 24x100``: one end-to-end ``aces_fast.aces_c(B, backend="cpp")`` call;
  ``extra_info`` holds the median / p90 / p99 of individually timed calls in
  microseconds (target: median <= 20 us).
* ``memory 1e6x64`` (slow): ACES-C and LOO-AUC on a million candidates;
  ``extra_info`` holds the peak resident memory above the input as a multiple of
  the input size (Linux; the high-water mark is reset before each call).

Conventions as in ``conftest.py``: every library pinned with
:func:`aces_fast.bench.thread_limit`, workloads from
:func:`aces_fast._baselines.make_pass_matrix`, with ``--benchmark-disable`` (the
default) each case runs once as a smoke test. Measure with
``python -m pytest benchmarks/test_bench_throughput.py --benchmark-enable``
(add ``-m "not slow"`` to skip the memory case).
"""

from __future__ import annotations

import functools
import time

import numpy as np
import pytest

import aces_fast as af
from aces_fast import bench
from aces_fast._peak_memory import peak_bytes, reset_peak
from aces_fast.backends import BackendUnavailableError, get_backend
from aces_fast.batch import rerank_batch

BATCH_TASKS = 200
BATCH_SHAPE = (200, 500)
LATENCY_SHAPE = (24, 100)
#: fewer ACES-O steps than the paper's 90 keep the batch case at seconds, not minutes
ACES_O_BATCH = dict(steps=30)


@pytest.fixture(autouse=True)
def _need_cpp():
    try:
        get_backend("cpp")
    except BackendUnavailableError as exc:
        pytest.skip(exc.reason)


@functools.lru_cache(maxsize=2)
def batch_tasks(count: int = BATCH_TASKS, shape=BATCH_SHAPE):
    from aces_fast._baselines import make_pass_matrix

    n, m = shape
    return tuple(make_pass_matrix(n, m, seed=7919 * k + 1) for k in range(count))


def _run(benchmark, fn, rounds=None):
    if benchmark.disabled or rounds is None:
        return benchmark(fn)
    fn()  # warm-up outside the measurement
    return benchmark.pedantic(fn, rounds=rounds, iterations=1)


def _per_second(benchmark, count):
    if not benchmark.disabled:
        benchmark.extra_info["tasks_per_s"] = round(count / benchmark.stats.stats.median)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("method", ["aces-c", "majority", "aces-c-filter"])
def test_batch_throughput(benchmark, method, threads):
    tasks = list(batch_tasks())
    benchmark.group = f"batch {BATCH_SHAPE[0]}x{BATCH_SHAPE[1]} {threads}t {method}"
    benchmark.extra_info.update(method=method, threads=threads, tasks=len(tasks), impl="batch")
    with bench.thread_limit(threads):
        out = _run(benchmark, lambda: rerank_batch(tasks, method, backend="cpp",
                                                   n_threads=threads), rounds=10)
    assert len(out) == len(tasks) and out[0].scores.shape == (BATCH_SHAPE[0],)
    _per_second(benchmark, len(tasks))


@pytest.mark.parametrize("threads", [1])
@pytest.mark.parametrize("method", ["aces-c", "majority"])
def test_loop_throughput(benchmark, method, threads):
    """Baseline for the batch: the public function called task by task."""
    tasks = list(batch_tasks())
    benchmark.group = f"batch {BATCH_SHAPE[0]}x{BATCH_SHAPE[1]} {threads}t {method}"
    benchmark.extra_info.update(method=method, threads=threads, tasks=len(tasks), impl="loop")
    with bench.thread_limit(threads):
        out = _run(benchmark, lambda: [af.rerank(B, method, backend="cpp") for B in tasks],
                   rounds=5)
    assert len(out) == len(tasks)
    _per_second(benchmark, len(tasks))


@pytest.mark.slow
@pytest.mark.parametrize("threads", [1, 2])
def test_batch_throughput_aces_o(benchmark, threads):
    tasks = list(batch_tasks())
    benchmark.group = f"batch {BATCH_SHAPE[0]}x{BATCH_SHAPE[1]} {threads}t aces-o"
    benchmark.extra_info.update(method="aces-o", threads=threads, tasks=len(tasks),
                                **ACES_O_BATCH)
    with bench.thread_limit(threads):
        out = _run(benchmark, lambda: rerank_batch(tasks, "aces-o", backend="cpp",
                                                   n_threads=threads, **ACES_O_BATCH), rounds=3)
    assert len(out) == len(tasks)
    _per_second(benchmark, len(tasks))


#: the torch ACES-O cases take the first tasks of the batch: seconds, not minutes
TORCH_ACES_O_TASKS = 64


@pytest.mark.parametrize("impl", ["batch", "loop"])
def test_torch_aces_o_throughput(benchmark, impl):
    try:
        get_backend("torch")
    except BackendUnavailableError as exc:
        pytest.skip(exc.reason)
    tasks = list(batch_tasks())[:TORCH_ACES_O_TASKS]
    benchmark.group = f"torch aces-o {BATCH_SHAPE[0]}x{BATCH_SHAPE[1]} 1t"
    benchmark.extra_info.update(method="aces-o", threads=1, tasks=len(tasks), impl=impl,
                                **ACES_O_BATCH)
    if impl == "batch":
        def fn():
            return rerank_batch(tasks, "aces-o", backend="torch", n_threads=1, **ACES_O_BATCH)
    else:
        def fn():
            return [af.rerank(B, "aces-o", backend="torch", **ACES_O_BATCH) for B in tasks]
    with bench.thread_limit(1):
        out = _run(benchmark, fn, rounds=3)
    assert len(out) == len(tasks) and out[0].weights.shape == (BATCH_SHAPE[1],)
    _per_second(benchmark, len(tasks))


def latency_percentiles(fn, calls: int = 20000) -> dict:
    """Median / p90 / p99 in microseconds of ``calls`` individually timed calls."""
    for _ in range(200):
        fn()
    clock = time.perf_counter_ns
    samples = np.empty(calls)
    for k in range(calls):
        t0 = clock()
        fn()
        samples[k] = clock() - t0
    p50, p90, p99 = np.percentile(samples, [50, 90, 99]) / 1000.0
    return {"median_us": round(p50, 2), "p90_us": round(p90, 2), "p99_us": round(p99, 2)}


@pytest.mark.parametrize("what", ["aces_c", "majority_vote", "core.rerank"])
def test_small_call_latency(benchmark, what):
    from aces_fast import _core
    from aces_fast._baselines import make_pass_matrix

    B = make_pass_matrix(*LATENCY_SHAPE, seed=24100)
    fn = {"aces_c": lambda: af.aces_c(B, backend="cpp"),
          "majority_vote": lambda: af.majority_vote(B, backend="cpp"),
          "core.rerank": lambda: _core.rerank(
              B=B, method=_core.METHOD_CODES["aces-c"], tie_tol=1e-9, gamma=10.0, lr=0.01,
              steps=0, top_k=None, warm=False, dedup=None, n_threads=1)}[what]
    benchmark.group = f"latency {LATENCY_SHAPE[0]}x{LATENCY_SHAPE[1]} 1t"
    benchmark.extra_info.update(what=what)
    with bench.thread_limit(1):
        out = benchmark(fn)
        if not benchmark.disabled:
            benchmark.extra_info.update(latency_percentiles(fn))
    scores = out[0] if isinstance(out, tuple) else out.scores
    assert scores.shape == (LATENCY_SHAPE[0],)


@pytest.mark.slow
@pytest.mark.parametrize("what", ["aces_c", "loo_auc", "loo_auc_weighted"])
def test_large_pool_memory(benchmark, what):
    if not reset_peak():
        pytest.skip("needs Linux /proc/self/clear_refs to reset the peak RSS")
    n, m = 1_000_000, 64
    rng = np.random.default_rng(0)
    B = np.empty((n, m), np.uint8)
    for i in range(0, n, 1 << 14):
        k = min(1 << 14, n - i)
        B[i:i + k] = rng.integers(0, 2, size=(k, m), dtype=np.uint8)
    w = rng.random(m)
    fn = {"aces_c": lambda: af.aces_c(B, backend="cpp"),
          "loo_auc": lambda: af.loo_auc(B, backend="cpp"),
          "loo_auc_weighted": lambda: af.loo_auc(B, w, backend="cpp")}[what]
    benchmark.group = "memory 1e6x64"
    fn()
    reset_peak()
    before = peak_bytes(exact=True)
    fn()
    extra = peak_bytes(exact=True) - before
    benchmark.extra_info.update(what=what, input_mb=round(B.nbytes / 2**20, 1),
                                extra_mb=round(extra / 2**20, 1),
                                extra_over_input=round(extra / B.nbytes, 3))
    with bench.thread_limit(2):
        _run(benchmark, fn, rounds=3)
    assert extra < 2 * B.nbytes
