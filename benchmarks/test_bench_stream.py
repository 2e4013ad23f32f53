"""Streaming rerank of Parquet datasets (issue 11): tasks/s of
:func:`aces_fast.stream.rerank_dataset` next to in-memory ``rerank_batch`` on the
same problems.

* ``stream 100x50 <t>t``: ``PROBLEMS`` planted 100 x 50 problems with labels
  (:func:`benchmarks.harness.stream_scale.write_synthetic`), ACES-C on the cpp backend:
  ``memory`` = ``rerank_batch`` on the matrices already unpacked in memory (the
  kernel alone), ``local`` = the whole streaming run (read, unpack, rank,
  Pass@k, encode, write). ``extra_info`` holds ``tasks_per_s`` and, for
  ``local``, the seconds per stage of the last run.
* ``ray 2 workers`` (slow): the Ray engine on a new local cluster of 2 CPUs,
  cluster start-up excluded (``extra_info["startup_s"]``).

``aces-fast bench`` reports them as the operation ``stream`` (the streaming
table: tasks/s per thread count, the local run's seconds per stage); which of
them run: ``benchmarks/conftest.py``'s ``_stream_cell_runs``. With
``--benchmark-disable`` (the default) every case runs once on 300 problems
as a smoke test. The million-problem memory check is the slow test
``tests/test_stream.py::test_a_million_problems_in_a_gibibyte``; the README's
numbers come from ``python -m benchmarks.harness.stream_scale --problems 1000000``.
"""

from __future__ import annotations

import shutil

import pytest

pytest.importorskip("pyarrow")

from aces_fast.backends import BackendUnavailableError, get_backend
from aces_fast.batch import rerank_batch
from aces_fast.stream import rerank_dataset
from benchmarks.harness.runtime import thread_limit
from benchmarks.harness.stream_scale import read_matrices, write_synthetic

PROBLEMS = 20_000
SHAPE = (100, 50)
_SHAPE = f"{SHAPE[0]}x{SHAPE[1]}"  # as the report prints it
#: conftest.py: these cells are the ``stream`` operation's, selected by their own rule
STREAM_CELLS = True


@pytest.fixture
def benchmark_rounds(request) -> int:
    """``--bench-rounds``: timed runs of a cell (at least 3, as before the option)."""
    return int(request.config.getoption("bench_rounds"))


@pytest.fixture(autouse=True)
def _need_cpp():
    try:
        get_backend("cpp")
    except BackendUnavailableError as exc:
        pytest.skip(exc.reason)


@pytest.fixture(scope="module")
def dataset(request, tmp_path_factory):
    opt = request.config.getoption
    # addopts holds --benchmark-disable; a --benchmark-enable on the command line wins
    smoke = opt("benchmark_disable") and not opt("benchmark_enable")
    count = 300 if smoke else PROBLEMS
    path = tmp_path_factory.mktemp("stream") / "in.parquet"
    write_synthetic(path, count, *SHAPE, seed=11)
    return path, count


def _per_second(benchmark, count):
    if not benchmark.disabled:
        benchmark.extra_info["tasks_per_s"] = round(count / benchmark.stats.stats.median)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("impl", ["memory", "local"])
def test_stream_throughput(benchmark, dataset, tmp_path, impl, threads, benchmark_rounds):
    path, count = dataset
    benchmark.group = f"stream {SHAPE[0]}x{SHAPE[1]} {threads}t"
    benchmark.extra_info.update(
        kind="stream", impl=impl, threads=threads, tasks=count, shape=_SHAPE
    )
    out = tmp_path / "out.parquet"
    if impl == "memory":
        Bs = read_matrices(path)

        def fn():
            return rerank_batch(Bs, "aces-c", backend="cpp", n_threads=threads)
    else:

        def fn():
            shutil.rmtree(out, ignore_errors=True)
            return rerank_dataset(
                path, out, "aces-c", backend="cpp", n_threads=threads, progress=False
            )

    with thread_limit(threads):
        if benchmark.disabled:
            result = benchmark(fn)
        else:
            fn()  # warm-up outside the measurement
            rounds = max(3, benchmark_rounds)
            result = benchmark.pedantic(fn, rounds=rounds, iterations=1)
    if impl == "memory":
        assert len(result) == count
    else:
        assert result.written == count
        benchmark.extra_info["stages_s"] = {k: round(v, 3) for k, v in result.timings.items()}
    _per_second(benchmark, count)


@pytest.mark.slow
def test_ray_two_workers(benchmark, dataset, tmp_path):
    ray = pytest.importorskip("ray")
    import aces_fast.ray as afray

    path, count = dataset
    if ray.is_initialized():
        pytest.skip("needs to start its own 2-CPU cluster")
    afray.init(num_cpus=2)
    try:
        out = tmp_path / "out.parquet"

        def fn():
            shutil.rmtree(out, ignore_errors=True)
            return rerank_dataset(path, out, "aces-c", engine="ray", n_threads=1, progress=False)

        benchmark.group = f"stream {SHAPE[0]}x{SHAPE[1]} ray"
        benchmark.extra_info.update(
            kind="stream", impl="ray", threads=2, workers=2, tasks=count, shape=_SHAPE
        )
        result = benchmark.pedantic(fn, rounds=3, iterations=1, warmup_rounds=1)
        assert result.written == count
        _per_second(benchmark, count)
    finally:
        ray.shutdown()
