"""pytest-benchmark suite: the ``aces-fast bench`` matrix as benchmark groups.

Each test module sets ``OP`` (an operation of :data:`aces_fast.bench.OPS`) and
defines one test taking the ``case`` parameter, generated here: every size x
implementation (the aces_fast backends and the operation's baseline) x
{1, 2} threads. A group is operation x size x threads, so pytest-benchmark
compares the backends and the baseline side by side.

Cases with 2 000 or more candidates, or an estimated call over 2 s, are
marked ``slow``; unavailable or infeasible cases are skipped with the reason.
With ``--benchmark-disable`` (the project's default addopts) every case runs
once, as a smoke test: ``python -m pytest benchmarks -q -m "not slow"``. To
measure: ``python -m pytest benchmarks --benchmark-enable -m "not slow"``.
"""

from __future__ import annotations

import numpy as np
import pytest

from aces_fast import bench

#: per-call budget for skipping: generous, the ``slow`` mark keeps CI quick
MAX_CALL_S = 300.0


def pytest_generate_tests(metafunc):
    if "case" in metafunc.fixturenames:
        op = metafunc.module.OP
        params = [pytest.param(c, id=c.id.replace(f"{op}-", "", 1),
                               marks=[pytest.mark.slow] if c.slow else [])
                  for c in bench.all_cases(ops=(op,))]
        metafunc.parametrize("case", params)


@pytest.fixture(scope="session")
def runtimes(request):
    """Import every library and JIT-compile numba once, before any measurement.

    Skipped with ``--benchmark-disable``: nothing is timed then, and numba
    compiles only the kernels the smoke run calls.
    """
    if request.config.getoption("benchmark_disable"):
        return {}
    return bench.load_runtimes(bench.IMPLS)


def _check_output(case: bench.Case, out) -> None:
    """The call computed something of the right shape (guards against no-op timing)."""
    if case.op.startswith("loo-auc"):
        values = np.asarray(out)
        assert values.shape == (case.m,)
        finite = values[np.isfinite(values)]
        assert finite.size > 0 and ((finite >= 0) & (finite <= 1)).all()
        return
    weights = out[0] if isinstance(out, tuple) else out.weights
    weights = np.asarray(weights.cpu() if hasattr(weights, "cpu") else weights)
    assert weights.shape == (case.m,)
    assert abs(weights.sum() - 1.0) < 1e-9 and (weights >= 0).all()


@pytest.fixture
def run_case(benchmark, runtimes):
    """Benchmark one case inside its thread limit, or skip it with the reason."""

    def run(case: bench.Case) -> None:
        B, w = bench.workload(case.n, case.m)
        reason = bench.skip_reason(case, B, MAX_CALL_S)
        if reason is not None:
            pytest.skip(reason)
        fn = bench.make_call(case.op, case.impl, B, w)
        benchmark.group = case.group
        benchmark.extra_info.update(op=case.op, size=case.size, impl=case.impl,
                                    threads=case.threads)
        with bench.thread_limit(case.threads):
            if benchmark.disabled:
                out = benchmark(fn)
            else:
                fn()  # warm-up outside the measurement: caches, lazy imports
                if bench.estimate_seconds(case.op, case.impl, case.n, case.m, B) > 1.0:
                    out = benchmark.pedantic(fn, rounds=3, iterations=1)
                else:
                    out = benchmark(fn)
        _check_output(case, out)

    return run
