"""The benchmark suite: every cell of :mod:`harness.cells` as a pytest-benchmark test.

Each test module names its operations (``OPS``) and defines one test taking the
``case`` parameter, generated here. A pytest-benchmark group is operation x
workload family x size x threads, so the backends and the baseline of a group
are compared side by side; the repetitions of a group (``--bench-rounds``) run
one after another, each running every implementation, so load changes on a
shared machine hit them alike.

Runs:

* ``python -m pytest benchmarks -m "not slow"``: smoke test (the project's
  addopts disable benchmarking): every cell's function runs once on one thread,
  real cells on their first problems, batch cells on a few tasks;
* ``python -m pytest benchmarks --benchmark-enable [-m "not slow"]``: measures;
  add ``--benchmark-json FILE`` for the numbers, ``--bench-rounds N`` for
  repetitions, ``-m target`` for the cells the speed goals read;
* ``MALLOC_MMAP_THRESHOLD_=131072 python -m pytest benchmarks --benchmark-enable
  --bench-memory --benchmark-json FILE``: the peak working memory of every cell
  (a separate run: the fixed mmap threshold changes allocation costs);
* ``python -m pytest benchmarks --benchmark-enable --bench-device cuda``: the
  device cells instead (:func:`harness.cells.device_cases`): ``torch-cuda``
  next to ``cpp`` on all of the host's cores; without CUDA every ``torch-cuda``
  cell is skipped with the reason.

``aces-fast bench`` runs these and prints the tables (:mod:`harness.command`).
Cells with 2 000 or more candidates, or a long estimated call, are marked
``slow``; unavailable or infeasible cells are skipped with the reason.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from .harness import cells, runtime, suite, targets, workloads
from .harness.memory import MMAP_THRESHOLD_ENV, mmap_threshold_fixed
from .harness.report import HARNESS_KEY

_SKIPPED: list[dict[str, Any]] = []
_WARMED: dict[Any, float] = {}
_RUNTIMES: dict[str, Any] = {}


def _list(cast):
    def parse(text: str) -> list[Any]:
        return [cast(s.strip()) for s in text.split(",") if s.strip()]

    return parse


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("aces_fast benchmarks")
    group.addoption(
        "--bench-rounds",
        type=int,
        default=1,
        metavar="N",
        help="repetitions of every cell, interleaved group by group (timing only)",
    )
    group.addoption(
        "--bench-memory",
        action="store_true",
        help="record each cell's peak working memory instead of timing it "
        f"(needs {'='.join(MMAP_THRESHOLD_ENV)} and --benchmark-enable)",
    )
    group.addoption(
        "--bench-ops",
        type=_list(str),
        metavar="OP,...",
        help=f"only these operations ({', '.join(cells.SELECTABLE_OPS)})",
    )
    group.addoption(
        "--bench-families",
        type=_list(str),
        metavar="FAMILY,...",
        help=f"only these workload families ({', '.join(workloads.FAMILIES)})",
    )
    group.addoption(
        "--bench-sizes",
        type=_list(str),
        metavar="NxM,...",
        help=f"only these synthetic sizes ({', '.join(cells.SIZES)})",
    )
    group.addoption(
        "--bench-impls",
        type=_list(str),
        metavar="NAME,...",
        help=f"only these implementations ({', '.join(cells.IMPLS)})",
    )
    group.addoption(
        "--bench-threads", type=_list(int), metavar="T,...", help="only these thread counts (1, 2)"
    )
    group.addoption(
        "--bench-device",
        default="cpu",
        metavar="DEVICE",
        help="cpu (the CPU matrix, default) or cuda (torch-cuda next to cpp on all cores)",
    )
    group.addoption(
        "--bench-max-call",
        type=float,
        default=300.0,
        metavar="SECONDS",
        help="skip cells estimated to take longer per timed call (default 300)",
    )


def _check_choices(config: pytest.Config, option: str, allowed: Sequence[Any]) -> None:
    chosen = config.getoption(option)
    bad = [c for c in chosen or [] if c not in allowed]
    if bad or chosen == []:
        raise pytest.UsageError(
            f"--{option.replace('_', '-')}: unknown "
            f"{', '.join(map(str, bad)) or '(empty)'}; choose from "
            f"{', '.join(map(str, allowed))}"
        )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "target: a cell one of the project's speed goals reads")
    for option, allowed in (
        ("bench_ops", cells.SELECTABLE_OPS),
        ("bench_families", workloads.FAMILIES),
        ("bench_sizes", cells.ALL_SIZES),
        ("bench_impls", cells.IMPLS + cells.DEVICE_IMPLS),
        ("bench_threads", cells.THREADS),
    ):
        _check_choices(config, option, allowed)
    if config.getoption("bench_device") not in cells.DEVICES:
        raise pytest.UsageError(
            f"--bench-device: unknown {config.getoption('bench_device')}; choose from "
            f"{', '.join(cells.DEVICES)}"
        )
    if config.getoption("bench_device") != "cpu" and config.getoption("bench_threads"):
        raise pytest.UsageError(
            "--bench-threads does not apply to a device run (cpp runs on all of the host's cores)"
        )
    if config.getoption("bench_rounds") < 1:
        raise pytest.UsageError("--bench-rounds must be >= 1")
    if config.getoption("bench_memory"):
        if not _enabled(config):
            raise pytest.UsageError(
                "--bench-memory needs --benchmark-enable (the peaks are "
                "written with the benchmark results)"
            )
        if not mmap_threshold_fixed():
            raise pytest.UsageError(
                f"--bench-memory needs {'='.join(MMAP_THRESHOLD_ENV)} in the environment "
                "(glibc reads it at start-up; without it the peak depends on what the "
                "process allocated before)"
            )


def _enabled(config: pytest.Config) -> bool:
    """Whether pytest-benchmark measures (its own rule for the two options)."""
    return not (config.getoption("benchmark_disable") and not config.getoption("benchmark_enable"))


def _mode(config: pytest.Config) -> suite.Mode:
    if not _enabled(config):
        return suite.Mode("smoke")
    if config.getoption("bench_memory"):
        return suite.Mode("memory")
    return suite.Mode(
        "timing", float(config.getoption("benchmark_max_time")), config.getoption("bench_rounds")
    )


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "case" not in metafunc.fixturenames:
        return
    config = metafunc.config
    smoke = not _enabled(config)
    ops = [
        op
        for op in metafunc.module.OPS
        if config.getoption("bench_ops") is None or op in config.getoption("bench_ops")
    ]
    threads: Sequence[int] | None = config.getoption("bench_threads")
    reps = 1 if smoke or config.getoption("bench_memory") else config.getoption("bench_rounds")
    device = config.getoption("bench_device")
    if device == "cpu":
        chosen = cells.all_cases(
            ops=ops,
            families=config.getoption("bench_families") or workloads.FAMILIES,
            sizes=config.getoption("bench_sizes"),
            impls=config.getoption("bench_impls"),
            threads=threads,
            reps=reps,
        )
    else:
        chosen = cells.device_cases(
            ops=ops,
            families=config.getoption("bench_families") or workloads.SYNTHETIC,
            sizes=config.getoption("bench_sizes"),
            impls=config.getoption("bench_impls"),
            reps=reps,
            device=device,
        )
    goals = set(targets.target_groups())
    device_goals = set(targets.device_target_cells())
    params = []
    for case in chosen:
        # the smoke run checks each path once: thread counts matter only for batches
        if smoke and case.threads > 1 and case.kind != "batch" and case.device == "cpu":
            continue
        marks = [pytest.mark.slow] if case.slow else []
        if case.device != "cpu":
            if (case.op, case.family, case.size, case.impl) in device_goals:
                marks.append(pytest.mark.target)
        elif (case.op, case.family, case.size, case.threads) in goals and case.impl != "numpy":
            marks.append(pytest.mark.target)
        case_id = case.id[len(ops[0]) + 1 :] if len(metafunc.module.OPS) == 1 else case.id
        params.append(pytest.param(case, id=case_id, marks=marks))
    metafunc.parametrize("case", params)


def _stream_cell_runs(config: pytest.Config, item: pytest.Item) -> bool:
    """Whether a streaming cell (a module with ``STREAM_CELLS``) is selected: never
    in a device run (no device variant: it would only add minutes of CPU work)
    or a memory run (it records no peak); with ``--bench-ops``, when the list
    names ``stream``; without it, unless families, sizes or implementations
    narrow the run to matrix cells. ``--bench-threads`` picks its thread counts."""
    opt = config.getoption
    if opt("bench_device") != "cpu" or opt("bench_memory"):
        return False
    ops = opt("bench_ops")
    if ops is not None and cells.STREAM_OP not in ops:
        return False
    if ops is None and (opt("bench_families") or opt("bench_sizes") or opt("bench_impls")):
        return False
    threads = getattr(item, "callspec", None) and item.callspec.params.get("threads")
    return not (threads and opt("bench_threads") and threads not in opt("bench_threads"))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Deselect the cells the options leave out that parametrization cannot: a
    device run keeps only the matrix's cells; the streaming cells follow
    :func:`_stream_cell_runs`."""
    device = config.getoption("bench_device") != "cpu"
    keep, dropped = [], []
    for item in items:
        matrix = "case" in getattr(item, "fixturenames", ())
        stream = getattr(getattr(item, "module", None), "STREAM_CELLS", False)
        out = (device and not matrix) or (stream and not _stream_cell_runs(config, item))
        (dropped if out else keep).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = keep


@pytest.fixture(scope="session")
def runtimes(request: pytest.FixtureRequest) -> dict[str, Any]:
    """Import every library and JIT-compile numba once, before any measurement
    (smoke runs skip this: nothing is timed, numba compiles what they call)."""
    if _enabled(request.config) and not _RUNTIMES:
        impls = request.config.getoption("bench_impls") or (
            cells.IMPLS if request.config.getoption("bench_device") == "cpu" else cells.CUDA_IMPLS
        )
        _RUNTIMES.update(runtime.load_runtimes(impls))
    return _RUNTIMES


@pytest.fixture
def run_case(benchmark: Any, runtimes: dict[str, Any], request: pytest.FixtureRequest):
    """Run one cell (:func:`harness.suite.run_case`), or skip it with the reason."""
    config = request.config

    def run(case: cells.Case) -> None:
        reason = cells.skip_reason(case, config.getoption("bench_max_call"))
        if reason is not None:
            _SKIPPED.append(
                dict(
                    op=case.op,
                    family=case.family,
                    size=case.size,
                    impl=case.impl,
                    threads=case.threads,
                    kind=case.kind,
                    reason=reason,
                )
            )
            pytest.skip(reason)
        suite.run_case(case, benchmark, _mode(config), _WARMED)

    return run


def pytest_benchmark_update_json(
    config: pytest.Config, benchmarks: Any, output_json: dict[str, Any]
) -> None:
    """Add the harness's facts to the ``--benchmark-json`` output (a device run
    adds its GPU under ``device``)."""
    device = config.getoption("bench_device")
    extra = {} if device == "cpu" else {"device": runtime.device_info(device)}
    output_json[HARNESS_KEY] = {
        **extra,
        "mode": _mode(config).name,
        "rounds": config.getoption("bench_rounds"),
        "max_time_s": float(config.getoption("benchmark_max_time")),
        "mmap_threshold_fixed": mmap_threshold_fixed(),
        "machine": runtime.machine_info(),
        "versions": runtime.versions(),
        "runtimes": dict(_RUNTIMES),
        "thread_libraries": runtime.thread_libraries(),
        "thread_pinning": "threadpoolctl (BLAS/OpenMP) + torch.set_num_threads + "
        "numba.set_num_threads + cpp backend n_threads, per cell",
        "skipped": list(_SKIPPED),
    }
