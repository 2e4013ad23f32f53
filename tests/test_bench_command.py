"""``aces-fast bench`` and the benchmark harness in the checkout's ``benchmarks/``:
the matrix of cells, skip rules, the report built from pytest-benchmark JSON, the
speed goals, and the command from a checkout and from outside one.

Nothing here asserts a speed: timings are reported by the command, not tested.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

import aces_fast

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # the harness is importable from the checkout only
    sys.path.insert(0, str(ROOT))

from benchmarks.harness import cells, command, report, runtime, targets, workloads


def run_bench(*args: str, cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess:
    """``python -m aces_fast bench ARGS`` in a fresh interpreter, from ``cwd``."""
    env = dict(os.environ)
    env.pop("ACES_FAST_BACKEND", None)
    return subprocess.run(
        [sys.executable, "-m", "aces_fast", "bench", *args],
        cwd=str(cwd),
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


# ---------------------------------------------------------------------------
# the package ships no benchmark code


def test_the_installed_package_has_no_benchmark_code_or_targets():
    for name in (
        "aces_fast.bench",
        "aces_fast._bench_matrix",
        "aces_fast._baselines",
        "aces_fast._peak_memory",
    ):
        assert importlib.util.find_spec(name) is None, name
    package = Path(aces_fast.__file__).parent
    for path in package.rglob("*.py"):
        text = path.read_text()
        for marker in ("numpy-rankdata", "torch-autograd", "evaluate_targets"):
            assert marker not in text, f"{path.name} mentions {marker!r}"


# ---------------------------------------------------------------------------
# the matrix


def test_matrix_covers_every_operation_family_and_baseline():
    cases = cells.all_cases()
    groups = {}
    for c in cases:
        groups.setdefault((c.op, c.family, c.size, c.threads), set()).add(c.impl)
    for op in cells.CALL_OPS:
        for family in workloads.SYNTHETIC:
            for size in cells.SIZES:
                assert groups[(op, family, size, 1)] == set(cells.impls_for(op))
        for dataset in workloads.REAL_DATASETS:
            assert groups[(op, "real", dataset, 1)] == set(cells.impls_for(op))
            assert (op, "real", dataset, 2) not in groups  # problems too small to split
        # the baseline competes in every group of the operation, 1 and 2 threads
        assert cells.CALL_OPS[op][1] in groups[(op, "distinct", "200x500", 2)]
        assert "numpy" not in groups[(op, "distinct", "200x500", 2)]  # reference: 1 thread
    for op in cells.BATCH_OPS:
        for family in workloads.SYNTHETIC:
            for threads in (1, 2):
                assert groups[(op, family, "200x500", threads)] == set(cells.BATCH_BACKENDS)
        assert not any(g[0] == op and g[1] == "real" for g in groups)


def test_repetitions_are_interleaved_group_by_group():
    cases = cells.all_cases(
        ops=("aces-c",),
        families=("distinct",),
        sizes=("200x500",),
        impls=("cpp", "numpy-rankdata"),
        threads=(1,),
        reps=3,
    )
    assert [(c.rep, c.impl) for c in cases] == [
        (r, i) for r in range(3) for i in ("cpp", "numpy-rankdata")
    ]
    assert len({c.id for c in cases}) == 6 and len({c.cell for c in cases}) == 2
    assert {c.group for c in cases} == {"aces-c distinct 200x500 1t"}


def test_slow_cells_and_target_groups():
    big = cells.Case("loo-auc", "distinct", "20000x1000", "cpp", 1)
    assert big.slow and big.kind == "call" and big.shape == (20000, 1000)
    assert ("loo-auc", "distinct", "20000x1000", 1) in targets.target_groups()
    assert not cells.Case("aces-c", "distinct", "24x100", "cpp", 1).slow
    # the NumPy reference's ACES-O on every bundled problem takes tens of seconds
    assert cells.Case("aces-o", "real", "humaneval-codegen16b", "numpy", 1).slow
    assert cells.Case("aces-c", "real", "humaneval-gpt35", "cpp", 1).kind == "real"
    assert cells.Case("batch-aces-c", "distinct", "200x500", "cpp", 2).kind == "batch"
    with pytest.raises(ValueError, match="200x500"):
        cells.parse_size("200by500")


def test_infeasible_and_over_budget_cells_are_skipped_with_a_reason():
    pytest.importorskip("torch")
    reason = cells.skip_reason(
        cells.Case("aces-o-all", "distinct", "2000x1000", "torch-autograd", 1)
    )
    assert reason is not None and "GB" in reason and "O(k^2 m)" in reason
    reason = cells.skip_reason(cells.Case("aces-o-all", "dup-heavy", "2000x1000", "numpy", 1))
    assert reason is not None and "estimated" in reason and "budget" in reason
    # the paper's top_k=24 keeps the autograd baseline feasible at any size
    assert (
        cells.skip_reason(cells.Case("aces-o", "distinct", "2000x1000", "torch-autograd", 1))
        is None
    )


def test_unavailable_backend_is_skipped_with_the_library_reason(monkeypatch):
    def refuse(name):
        raise aces_fast.BackendUnavailableError(name, "not built here")

    monkeypatch.setattr(runtime, "_backend", refuse)
    reason = cells.skip_reason(cells.Case("loo-auc", "distinct", "24x100", "cpp", 1))
    assert reason == "backend cpp unavailable: not built here"


def test_make_call_computes_the_operation():
    B, w = workloads.workload("distinct", 24, 100)
    L = cells.make_call("loo-auc", "numpy-rankdata", B, w)()
    np.testing.assert_allclose(L, aces_fast.loo_auc(B, backend="numpy"), atol=1e-12)
    weights, scores = cells.make_call("aces-c", "numpy-rankdata", B, w)()
    assert weights.sum() == pytest.approx(1.0) and scores.shape == (24,)
    res = cells.make_call("aces-o", "numpy", B, w)()
    assert res.backend == "numpy" and res.weights.shape == (100,)
    tasks = workloads.batch_tasks("distinct", 3, 20, 30)
    out = cells.make_call("batch-aces-c", "numpy", tasks, threads=1)()
    assert len(out) == 3 and out[1].scores.shape == (20,)
    with pytest.raises(ValueError, match="does not compute"):
        cells.make_call("aces-o", "numpy-rankdata", B, w)
    with pytest.raises(ValueError, match="unknown operation"):
        cells.make_call("nope", "numpy", B, w)
    with pytest.raises(ValueError, match="no batch path"):
        cells.make_call("batch-aces-c", "torch-autograd", tasks)


def test_costly_cells_run_without_the_cost_warning(monkeypatch):
    # The suite's largest cells are estimated to take minutes, which makes the
    # library warn; under the test configuration (every warning an error) the
    # cell must still run. A zero threshold makes every costed call warn.
    from benchmarks.harness import suite

    from aces_fast import CostWarning, _cost

    monkeypatch.setattr(_cost, "WARN_SECONDS", 0.0)
    B, w = workloads.workload("distinct", 24, 100)
    with pytest.warns(CostWarning):
        cells.make_call("aces-o", "numpy", B, w)()

    class Benchmark:
        group = None

        def __init__(self):
            self.extra_info = {}

        def __call__(self, fn):
            return fn()

    case = cells.Case(op="aces-o", family="distinct", size="24x100", impl="numpy", threads=1, rep=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        suite.run_case(case, Benchmark(), suite.Mode("smoke"), {})


def _fake_sysfs(root: Path, cores: dict[int, tuple[int, str]], nodes: dict[int, str]) -> None:
    """A sysfs tree: cpu -> (package, siblings list), node -> cpulist."""
    for cpu, (package, siblings) in cores.items():
        topo = root / "cpu" / f"cpu{cpu}" / "topology"
        topo.mkdir(parents=True)
        (topo / "physical_package_id").write_text(f"{package}\n")
        (topo / "core_cpus_list").write_text(f"{siblings}\n")
    cache = root / "cpu" / "cpu0" / "cache" / "index3"
    cache.mkdir(parents=True)
    (cache / "size").write_text("30720K\n")
    for node, listed in nodes.items():
        (root / "node" / f"node{node}").mkdir(parents=True)
        (root / "node" / f"node{node}" / "cpulist").write_text(f"{listed}\n")


def test_cpu_topology_counts_cores_sockets_and_nodes(tmp_path):
    # two sockets of two cores with two hardware threads each (cpu k and k+4
    # share a core, Linux's usual numbering); one NUMA node per socket
    sib = {0: "0,4", 1: "1,5", 2: "2,6", 3: "3,7"}
    cores = {c: (c // 2 % 2, sib[c % 4]) for c in range(8)}
    _fake_sysfs(tmp_path, cores, {0: "0-1,4-5", 1: "2-3,6-7"})
    every = runtime.cpu_topology(range(8), sysfs=str(tmp_path))
    assert every == {"cpus": 8, "cores": 4, "sockets": 2, "numa_nodes": 2, "l3": "30720K"}
    assert runtime.topology_line(every) == (
        "8 CPUs on 4 cores (2 threads a core), 2 sockets, 2 NUMA nodes, L3 30720K"
    )
    # a process pinned to one socket's first threads: one of each
    pinned = runtime.cpu_topology([0, 1], sysfs=str(tmp_path))
    assert pinned == {"cpus": 2, "cores": 2, "sockets": 1, "numa_nodes": 1, "l3": "30720K"}
    assert runtime.topology_line(pinned).startswith(
        "2 CPUs on 2 cores (one thread a core), 1 socket,"
    )
    # the two threads of one core
    assert runtime.cpu_topology([1, 5], sysfs=str(tmp_path))["cores"] == 1
    assert runtime.cpu_list("0-2,5,7-8") == {0, 1, 2, 5, 7, 8}


def test_cpu_topology_says_none_where_sysfs_is_silent(tmp_path):
    topo = runtime.cpu_topology([0, 1], sysfs=str(tmp_path))
    assert topo == {"cpus": 2, "cores": None, "sockets": None, "numa_nodes": None, "l3": None}
    assert runtime.topology_line(topo) == "2 CPUs"
    here = runtime.cpu_topology()  # this machine
    if hasattr(os, "sched_getaffinity"):
        assert here["cpus"] == len(os.sched_getaffinity(0))
    assert here["cores"] is None or 1 <= here["cores"] <= here["cpus"]


def test_thread_limit_pins_and_restores_cpp_threads():
    if runtime.backend_unavailable_reason("cpp") is not None:
        pytest.skip("the cpp backend is not built")
    cpp = runtime._backend("cpp")
    before = cpp.n_threads
    with runtime.thread_limit(1) as how:
        assert cpp.n_threads == 1 and how["cpp"] == 1
        assert os.environ["OMP_NUM_THREADS"] == "1"
    assert cpp.n_threads == before
    with pytest.raises(ValueError), runtime.thread_limit(0):
        pass


# ---------------------------------------------------------------------------
# from pytest-benchmark JSON to the report and the goals


def _bench(op, family, size, impl, threads, rep, median, **extra):
    info = dict(
        op=op,
        family=family,
        size=size,
        impl=impl,
        threads=threads,
        rep=rep,
        kind="batch" if op.startswith("batch") else "real" if family == "real" else "call",
        **extra,
    )
    return {"name": f"{op}-{impl}-{rep}", "extra_info": info, "stats": {"median": median}}


def _timing_json():
    g = ("aces-c", "distinct", "200x500")
    return {
        "benchmarks": [
            # per-repetition ratios 400 and 100: their median is 250, while the ratio
            # of the medians over repetitions would be 20 ms / 0.1 ms = 200
            _bench(*g, "cpp", 1, 0, 50e-6),
            _bench(*g, "numpy-rankdata", 1, 0, 20e-3),
            _bench(*g, "cpp", 1, 1, 150e-6),
            _bench(*g, "numpy-rankdata", 1, 1, 15e-3),
            _bench(*g, "numba", 1, 0, 200e-6),
            _bench(*g, "numba", 1, 1, 300e-6),
            _bench(
                "aces-c",
                "real",
                "humaneval-gpt35",
                "cpp",
                1,
                0,
                9e-6,
                problems=164,
                problem_median_s=5e-6,
                problem_p99_s=7e-6,
            ),
            _bench("batch-aces-c", "distinct", "200x500", "cpp", 2, 0, 0.005, tasks=200),
            {"name": "unrelated", "extra_info": {}, "stats": {"median": 1.0}},
        ],
        report.HARNESS_KEY: {
            "skipped": [
                dict(
                    op="aces-c",
                    family="distinct",
                    size="200x500",
                    impl="torch",
                    threads=1,
                    kind="call",
                    reason="backend torch unavailable: x",
                )
            ]
        },
    }


def test_aggregate_takes_ratios_repetition_by_repetition():
    memory = {
        "benchmarks": [
            _bench(
                "aces-c",
                "distinct",
                "200x500",
                "cpp",
                1,
                0,
                1.0,
                peak_extra_bytes=100,
                input_bytes=100_000,
            )
        ]
    }
    rows = report.aggregate(_timing_json(), memory)
    by = {(r["op"], r["family"], r["impl"], r["threads"]): r for r in rows}
    cpp = by[("aces-c", "distinct", "cpp", 1)]
    assert cpp["reps"] == 2 and cpp["median_s"] == pytest.approx(100e-6)
    assert cpp["spread_s"] == pytest.approx([50e-6, 150e-6])
    assert cpp["ratio"] == pytest.approx(250.0)
    assert cpp["peak_extra_bytes"] == 100 and cpp["input_bytes"] == 100_000
    numba = by[("aces-c", "distinct", "numba", 1)]
    assert numba["vs_cpp"] == pytest.approx(3.0)  # median of 200/50 and 300/150
    assert by[("aces-c", "distinct", "numpy-rankdata", 1)]["baseline"]
    real = by[("aces-c", "real", "cpp", 1)]
    assert real["median_s"] == 5e-6 and real["p99_s"] == 7e-6 and real["problems"] == 164
    batch = by[("batch-aces-c", "distinct", "cpp", 2)]
    assert batch["tasks_per_s"] == pytest.approx(40_000)
    assert by[("aces-c", "distinct", "torch", 1)]["skipped"].startswith("backend torch")

    text = report.format_tables(rows)
    assert "100us (250x)" in text and "5us/7us" in text and "40,000/s" in text
    assert "skip[1]" in text and "[1] backend torch unavailable: x" in text
    assert "<4KiB" in text and "Peak working memory" in text


def test_goals_report_met_not_met_and_not_measured():
    rows = report.aggregate(_timing_json())
    goals = {
        t["target"].split(",")[0]: t
        for t in targets.evaluate(
            rows, "cpp", {"importtime_s": 0.2, "numpy_s": 0.1, "wall_s": 0.25}
        )
    }
    assert goals["ACES-C 200x500 distinct"]["status"] == "met"  # 250x >= 250x
    assert goals["rerank_batch ACES-C 200 tasks of 200x500 distinct"]["status"] == "met"
    assert goals["ACES-O K=24 T=90 200x500 distinct"]["status"] == "not measured"
    assert goals["numba within 3x of cpp on every cell (worst cell)"]["status"] == "met"
    assert (
        "aces-c distinct 200x500 1t"
        in goals["numba within 3x of cpp on every cell (worst cell)"]["shown"]
    )
    assert goals["import aces_fast (python -X importtime"]["status"] == "not met"
    assert len(goals) == len(targets.GOALS) + 2
    table = targets.format_targets(list(goals.values()))
    assert "250.0x" in table and "not measured" in table


def test_speed_ups_below_one_keep_their_digits():
    assert [report.fmt_ratio(r) for r in (0.4, 0.04, 0.96, 3.14, 9.96, 468.2)] == [
        "0.4x",
        "0.04x",
        "0.96x",
        "3.1x",
        "10x",
        "468x",
    ]
    g = ("aces-c", "distinct", "200x500")
    slow = {
        "benchmarks": [_bench(*g, "cpp", 1, 0, 10e-3), _bench(*g, "numpy-rankdata", 1, 0, 4e-3)]
    }
    rows = report.aggregate(slow)
    assert "10ms (0.4x)" in report.format_tables(rows)
    goals = {t["target"].split(",")[0]: t for t in targets.evaluate(rows, "cpp", None)}
    assert goals["ACES-C 200x500 distinct"]["shown"] == "0.4x"
    assert goals["ACES-C 200x500 distinct"]["status"] == "not met"


def test_header_names_the_cpp_simd_level_and_its_cap(monkeypatch):
    monkeypatch.setenv("ACES_FAST_SIMD", "avx2")
    line = command._cpp_build({"simd": "avx2", "openmp": True})
    assert line == "cpp kernels at SIMD level avx2 (ACES_FAST_SIMD=avx2), openmp=True"
    monkeypatch.delenv("ACES_FAST_SIMD")
    assert "(ACES_FAST_SIMD=unset)" in command._cpp_build({"simd": "avx512", "openmp": False})
    assert command._cpp_build("unavailable: not built") == "cpp unavailable: not built"


def test_help_is_plain_text_that_explains_the_command(capsys):
    with pytest.raises(SystemExit) as info:
        command.main(["-h"])
    assert info.value.code == 0
    text = capsys.readouterr().out
    description = text.split("\n\n", 1)[1].split("options:")[0]
    assert "``" not in text and ":func:" not in text and ":mod:" not in text
    assert "aces-fast bench" not in description  # it does not point at itself
    assert "pytest-benchmark" in description and "--json, --plot" in description


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (
            ["--json", "{tmp}/file/b.json"],
            ("--json {tmp}/file/b.json: {tmp}/file is not a directory"),
        ),
        (["--json", "{tmp}"], "--json {tmp}: is a directory"),
        (["--plot", "{tmp}/b.txt"], "--plot {tmp}/b.txt: '.txt' is not an image format"),
        (["--plot", "{tmp}/file/b.png"], "{tmp}/file is not a directory"),
    ],
)
def test_output_files_are_checked_before_the_runs(tmp_path, monkeypatch, argv, expected):
    if "--plot" in argv:
        pytest.importorskip("matplotlib")
    (tmp_path / "file").write_text("")  # a file where a folder would have to be made
    monkeypatch.setattr(
        command, "_suite_run", lambda *a, **k: pytest.fail("the benchmarks ran before the check")
    )
    argv = [a.format(tmp=tmp_path) for a in argv]
    with pytest.raises(ValueError) as info:
        command.main([*argv, "-q"])
    assert expected.format(tmp=tmp_path) in str(info.value)


def test_quick_runs_select_not_slow_or_target_cells(tmp_path):
    parser = command.build_parser()
    quick = command.pytest_command(
        ROOT / "benchmarks", parser.parse_args([]), tmp_path / "t.json", memory=False
    )
    assert quick[:3] == [sys.executable, "-m", "pytest"]
    assert quick[quick.index("-m", 3) + 1] == "not slow or target"
    assert "--bench-rounds=3" in quick and "--benchmark-enable" in quick
    full = command.pytest_command(
        ROOT / "benchmarks",
        parser.parse_args(["--full", "--ops", "aces-c,aces-o"]),
        tmp_path / "m.json",
        memory=True,
    )
    assert "-m" not in full[3:] and "--bench-memory" in full and "--bench-ops=aces-c,aces-o" in full


def test_import_time_is_measured_in_fresh_interpreters(tmp_path):
    t = runtime.measure_import_time(repeats=1, cwd=str(tmp_path))
    assert set(t) == {"importtime_s", "numpy_s", "wall_s"}
    assert 0 < t["numpy_s"] < t["importtime_s"] and t["wall_s"] >= 0


@pytest.mark.parametrize(
    "argv",
    [
        ["--sizes", "24by100"],
        ["--ops", "aces-x"],
        ["--threads", "0"],
        ["--full", "--quick"],
        ["--rounds", "0"],
    ],
)
def test_bad_options_exit_with_usage_error(argv, capsys):
    with pytest.raises(SystemExit) as info:
        command.main(argv)
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1  # one line, no usage block
    assert err.startswith("aces-fast: error: bench: ") and "(see 'aces-fast bench -h')" in err


# ---------------------------------------------------------------------------
# the command


def test_bench_outside_a_checkout_says_what_it_needs(tmp_path):
    proc = run_bench("--rounds", "1", cwd=tmp_path)
    assert proc.returncode == 1 and proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("aces-fast: error: ")
    assert "checkout" in lines[0] and "--benchmarks DIR" in lines[0]
    proc = run_bench("--benchmarks", str(tmp_path / "nowhere"), cwd=tmp_path)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert proc.stderr.startswith("aces-fast: error: --benchmarks ")


def test_bench_delegates_to_the_checkout_harness(tmp_path):
    fake = tmp_path / "checkout" / "benchmarks"
    (fake / "harness").mkdir(parents=True)
    (fake / "__init__.py").write_text("")
    (fake / "harness" / "__init__.py").write_text("")
    (fake / "harness" / "command.py").write_text(
        "def main(argv, suite_dir):\n    print('ARGV', list(argv), suite_dir.name)\n    return 3\n"
    )
    # found from a subdirectory of the checkout
    (tmp_path / "checkout" / "sub").mkdir()
    proc = run_bench("--x", "1", cwd=tmp_path / "checkout" / "sub")
    assert proc.returncode == 3 and "ARGV ['--x', '1'] benchmarks" in proc.stdout
    # or named explicitly, from anywhere
    proc = run_bench("--benchmarks", str(fake), cwd=tmp_path)
    assert proc.returncode == 3 and f"ARGV ['--benchmarks', '{fake}']" in proc.stdout


def test_suite_refuses_a_memory_run_without_the_fixed_mmap_threshold():
    env = {k: v for k, v in os.environ.items() if k != "MALLOC_MMAP_THRESHOLD_"}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "benchmarks",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:hypothesispytest",
            "--benchmark-enable",
            "--bench-memory",
            "--co",
            "-q",
        ],
        cwd=str(ROOT),
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 4 and "MALLOC_MMAP_THRESHOLD_=131072" in proc.stderr


def test_bench_from_the_checkout_writes_json_and_png(tmp_path):
    if runtime.backend_unavailable_reason("cpp") is not None:
        pytest.skip("the cpp backend is not built")
    pytest.importorskip("scipy")  # baseline (a)
    plot = importlib.util.find_spec("matplotlib") is not None
    out_json, out_png = tmp_path / "bench.json", tmp_path / "bench.png"
    proc = run_bench(
        "--ops",
        "aces-c,batch-aces-c",
        "--families",
        "distinct,real",
        "--sizes",
        "200x500",
        "--impls",
        "cpp,numpy-rankdata",
        "--threads",
        "1",
        "--rounds",
        "2",
        "--max-time",
        "0.01",
        "-q",
        "--no-import-time",
        "--json",
        str(out_json),
        *(["--plot", str(out_png)] if plot else []),
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Speed goals (measured, never asserted)" in proc.stdout
    assert "Peak working memory beyond the input" in proc.stdout
    from aces_fast import _core

    assert f"cpp kernels at SIMD level {_core.simd_level()} " in proc.stdout

    full = json.loads(out_json.read_text())
    for key in ("date", "machine", "versions", "settings", "import_time", "cells", "targets"):
        assert key in full
    assert full["machine"]["cpu"] and full["versions"]["aces_fast"] == aces_fast.__version__
    assert (
        full["settings"]["rounds"] == 2
        and "--bench-memory" in full["settings"]["commands"]["memory"]
    )
    cells_by = {(c["op"], c["family"], c["size"], c["impl"]): c for c in full["cells"]}
    expect = {
        ("aces-c", "distinct", "200x500", "cpp"),
        ("aces-c", "distinct", "200x500", "numpy-rankdata"),
        ("batch-aces-c", "distinct", "200x500", "cpp"),
    }
    expect |= {
        ("aces-c", "real", d, i) for d in workloads.REAL_DATASETS for i in ("cpp", "numpy-rankdata")
    }
    assert set(cells_by) == expect
    assert full["stream"] == []  # sizes and implementations chosen: matrix cells only
    for c in full["cells"]:
        assert c["skipped"] is None and c["reps"] == 2 and c["median_s"] > 0
        # real: the input of the problem with the largest peak, which may be an
        # empty (n x 0) problem when every peak is within a page of zero
        assert c["peak_extra_bytes"] >= 0 and c["input_bytes"] >= (c["family"] != "real")
    assert cells_by[("aces-c", "distinct", "200x500", "cpp")]["ratio"] > 0
    assert cells_by[("aces-c", "real", "humaneval-gpt35", "cpp")]["p99_s"] > 0
    assert cells_by[("batch-aces-c", "distinct", "200x500", "cpp")]["tasks_per_s"] > 0
    statuses = {t["target"].split(",")[0]: t["status"] for t in full["targets"]}
    assert len(statuses) == len(targets.GOALS) + 2
    assert set(statuses.values()) <= {"met", "not met", "not measured"}
    assert statuses["ACES-C 200x500 distinct"] != "not measured"
    assert statuses["ACES-O K=24 T=90 200x500 distinct"] == "not measured"
    assert (
        full["import_time"] is None
        and statuses["import aces_fast (python -X importtime"] == "not measured"
    )

    if plot:
        png = out_png.read_bytes()
        assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 5000


def _collected_stream_cells(*options: str, **env: str) -> list[str]:
    """The streaming cells ``pytest benchmarks OPTIONS`` would run (collection only)."""
    pytest_args = [
        "benchmarks/test_bench_stream.py",
        "--collect-only",
        "-q",
        "-p",
        "no:cacheprovider",
    ]
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", *pytest_args, *options],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={k: v for k, v in os.environ.items() if k != "ACES_FAST_BACKEND"} | env,
    )
    assert proc.returncode in (0, 5), proc.stdout[-2000:] + proc.stderr[-2000:]
    return sorted(line.split("::")[-1] for line in proc.stdout.splitlines() if "::" in line)


def test_stream_cells_follow_the_selection():
    """The streaming cells are the operation ``stream``: chosen by ``--bench-ops``,
    left out when families, sizes or implementations narrow the run to matrix
    cells, and in memory runs; ``--bench-threads`` picks their thread counts."""
    pytest.importorskip("pyarrow")
    every = _collected_stream_cells()
    assert every == [
        "test_ray_two_workers",
        "test_stream_throughput[local-1]",
        "test_stream_throughput[local-2]",
        "test_stream_throughput[memory-1]",
        "test_stream_throughput[memory-2]",
    ]
    assert _collected_stream_cells("--bench-ops=aces-c,batch-aces-c") == []
    assert _collected_stream_cells("--bench-sizes=200x500") == []
    assert _collected_stream_cells("--bench-impls=cpp") == []
    assert _collected_stream_cells("--bench-ops=stream,aces-c", "--bench-sizes=200x500") == every
    assert _collected_stream_cells("--bench-ops=stream", "--bench-threads=2") == [
        "test_ray_two_workers",
        "test_stream_throughput[local-2]",
        "test_stream_throughput[memory-2]",
    ]
    from benchmarks.harness.memory import MMAP_THRESHOLD_ENV

    memory_run = ("--bench-memory", "--benchmark-enable", "--bench-ops=stream")
    assert _collected_stream_cells(*memory_run, **dict([MMAP_THRESHOLD_ENV])) == []
    assert "stream" in cells.SELECTABLE_OPS and "stream" not in cells.OPS


def test_stream_rows_and_table_from_a_timing_run():
    def bench(impl, threads, median, stages=None):
        info = dict(kind="stream", impl=impl, threads=threads, tasks=1000, shape="100x50")
        if stages is not None:
            info["stages_s"] = stages
        return {"extra_info": info, "stats": {"median": median, "min": median, "max": 2 * median}}

    timing = {
        "benchmarks": [
            bench("local", 2, 0.01, {"read": 0.002, "rerank": 0.01}),
            bench("memory", 1, 0.004),
            bench("local", 1, 0.02, {"read": 0.003, "rerank": 0.016, "write": 0.001}),
            bench("memory", 2, 0.0025),
            {"extra_info": {"op": "aces-c"}, "stats": {"median": 1.0}},  # a matrix cell
        ]
    }
    rows = report.stream_rows(timing)
    assert [(r["impl"], r["threads"]) for r in rows] == [
        ("memory", 1),
        ("memory", 2),
        ("local", 1),
        ("local", 2),
    ]
    assert rows[0]["tasks_per_s"] == pytest.approx(250_000) and rows[0]["vs_1_thread"] is None
    assert rows[1]["vs_1_thread"] == pytest.approx(1.6)
    assert rows[3]["vs_1_thread"] == pytest.approx(2.0) and rows[3]["spread_s"] == [0.01, 0.02]
    text = report.format_stream_table(rows)
    header = next(line for line in text.splitlines() if line.startswith("impl"))
    assert header.split() == ["impl", "thr", "tasks/s", "vs", "1", "thr", "read", "rerank", "write"]
    local2 = next(line for line in text.splitlines() if line.startswith("local   2"))
    assert "100,000/s" in local2 and f" {report.fmt_ratio(2.0)} " in local2 and "0.002" in local2
    assert "1,000 problems of 100x50" in text
    assert report.format_stream_table([]) == ""


def test_bench_ops_stream_reports_tasks_per_second_and_stages(tmp_path):
    """``aces-fast bench --ops stream`` runs the streaming cells only and reports
    them: tasks/s per thread count, the local run's stages, in the JSON too."""
    pytest.importorskip("pyarrow")
    if runtime.backend_unavailable_reason("cpp") is not None:
        pytest.skip("the cpp backend is not built")
    out_json = tmp_path / "bench.json"
    proc = run_bench(
        *("--ops", "stream", "--rounds", "1", "--no-memory", "--no-import-time", "-q"),
        *("--json", str(out_json)),
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Streaming, ACES-C on 20,000 problems of 100x50" in proc.stdout
    full = json.loads(out_json.read_text())
    assert full["cells"] == []
    got = {(r["impl"], r["threads"]): r for r in full["stream"]}
    assert set(got) == {("memory", 1), ("memory", 2), ("local", 1), ("local", 2)}
    assert all(r["tasks"] == 20_000 and r["tasks_per_s"] > 0 for r in got.values())
    assert set(got[("local", 1)]["stages_s"]) >= {"read", "rerank", "pass@k", "encode", "write"}
    assert got[("local", 2)]["vs_1_thread"] > 0 and got[("memory", 1)]["stages_s"] is None


def test_the_scaling_table_gives_each_thread_count_its_speed_up():
    g = ("batch-aces-c", "distinct", "200x500")
    c = ("aces-c", "distinct", "2000x1000")
    timing = {
        "benchmarks": [
            # rep 0: 2 threads 2x as fast, rep 1: 3x, rep 2: 1x -> median 2x
            _bench(*g, "cpp", 1, 0, 2.0, tasks=200),
            _bench(*g, "cpp", 2, 0, 1.0, tasks=200),
            _bench(*g, "cpp", 1, 1, 3.0, tasks=200),
            _bench(*g, "cpp", 2, 1, 1.0, tasks=200),
            _bench(*g, "cpp", 1, 2, 1.0, tasks=200),
            _bench(*g, "cpp", 2, 2, 1.0, tasks=200),
            _bench(*c, "cpp", 1, 0, 4e-3),
            _bench(*c, "cpp", 4, 0, 1e-3),
            _bench(*c, "numba", 1, 0, 8e-3),  # one thread count only: no scaling line
        ]
    }
    rows = report.aggregate(timing)
    by = {(r["op"], r["impl"], r["threads"]): r for r in rows}
    assert by[("batch-aces-c", "cpp", 2)]["vs_1_thread"] == pytest.approx(2.0)
    assert by[("batch-aces-c", "cpp", 1)]["vs_1_thread"] is None
    assert by[("aces-c", "cpp", 4)]["vs_1_thread"] == pytest.approx(4.0)
    text = report.format_tables(rows)
    table = text.split("Scaling with threads")[1].split("\n\n")[1].splitlines()
    assert table[0].split() == ["op", "family", "size", "impl", "1", "thr", "2", "thr", "4", "thr"]
    lines = {tuple(line.split()[:4]): line for line in table[2:]}
    assert set(lines) == {
        ("batch-aces-c", "distinct", "200x500", "cpp"),
        ("aces-c", "distinct", "2000x1000", "cpp"),
    }
    assert "100/s" in lines[(*g, "cpp")] and "(2x)" in lines[(*g, "cpp")]
    assert "4ms" in lines[(*c, "cpp")] and "1ms (4x)" in lines[(*c, "cpp")]


# ---------------------------------------------------------------------------
# --device cuda: torch-cuda next to cpp on all cores (checked here on CPU tensors)


def test_device_cells_pair_torch_cuda_with_cpp_on_all_cores():
    cases = cells.device_cases(cores=16)
    groups = {}
    for c in cases:
        assert c.device == "cuda" and c.threads == 16 and c.family != "real"
        groups.setdefault((c.op, c.family, c.size), []).append(c.impl)
    # every operation, the batch cells included, has both implementations side by side
    assert {g[0] for g in groups} == set(cells.OPS)
    assert all(impls == ["cpp", "torch-cuda"] for impls in groups.values())
    assert ("loo-auc", "distinct", "100000x2000") in groups
    assert ("aces-o-all", "distinct", "2000x1000") in groups
    batch_c = next(c for c in cases if c.op == "batch-aces-c")
    batch_o = next(c for c in cases if c.op == "batch-aces-o")
    assert (batch_c.tasks, batch_c.size, batch_o.tasks) == (2000, "200x500", 200)
    # a CPU run's batches keep their 200 tasks
    assert cells.Case("batch-aces-c", "distinct", "200x500", "cpp", 2).tasks == 200
    assert cells.device_cases(cores=4)[0].threads == 4
    assert cells.device_cases()[0].threads == cells.host_cores()
    reps = cells.device_cases(ops=("aces-c",), families=("distinct",), sizes=("200x500",), reps=2)
    assert [(c.rep, c.impl) for c in reps] == [
        (0, "cpp"),
        (0, "torch-cuda"),
        (1, "cpp"),
        (1, "torch-cuda"),
    ]
    # the CPU matrix is untouched by the device cells
    assert not any(c.impl == "torch-cuda" or c.device != "cpu" for c in cells.all_cases())


def test_quick_device_run_keeps_the_goal_cells_and_drops_the_large_others():
    goal_cells = set(targets.device_target_cells())
    assert ("aces-o-all", "distinct", "2000x1000", "torch-cuda") in goal_cells
    assert ("aces-o-all", "distinct", "2000x1000", "cpp") not in goal_cells  # absolute goal
    assert ("loo-auc", "distinct", "100000x2000", "cpp") in goal_cells  # a speed-up goal
    quick = [c for c in cells.device_cases(cores=16) if not c.slow or c.cell[:4] in goal_cells]
    kept = {(c.op, c.family, c.size, c.impl) for c in quick}
    assert ("loo-auc", "distinct", "20000x1000", "cpp") not in kept
    assert ("aces-c", "dup-heavy", "200x500", "torch-cuda") in kept
    assert ("batch-aces-c", "distinct", "200x500", "torch-cuda") in kept
    assert ("batch-aces-o", "dup-heavy", "200x500", "cpp") in kept


def test_torch_cuda_cell_moves_inputs_once_and_synchronizes_every_call(monkeypatch):
    torch = pytest.importorskip("torch")
    monkeypatch.setitem(cells.TORCH_DEVICE, "torch-cuda", "cpu")
    moved, synced = [], []
    to_device = cells._to_device
    monkeypatch.setattr(cells, "_to_device", lambda x, d: moved.append(d) or to_device(x, d))
    monkeypatch.setattr(cells, "_synchronize", lambda d: synced.append(d))
    B, w = workloads.workload("distinct", 24, 100)
    for op in cells.CALL_OPS:
        moved.clear(), synced.clear()
        fn = cells.make_call(op, "torch-cuda", B, w, threads=2)
        assert moved == ["cpu"] * (2 if op == "loo-auc-weighted" else 1)
        out = fn()
        fn()
        assert synced == ["cpu", "cpu"] and len(moved) in (1, 2)  # no copy per call
        ref = cells.make_call(op, "cpp", B, w)()
        if op.startswith("loo-auc"):
            assert isinstance(out, torch.Tensor)
            np.testing.assert_allclose(out.numpy(), ref, rtol=0, atol=1e-12)
        else:
            assert isinstance(out.order, torch.Tensor) and out.backend == "torch"
            np.testing.assert_array_equal(out.order.numpy(), ref.order)
    tasks = workloads.batch_tasks("distinct", 3, 20, 30)
    moved.clear(), synced.clear()
    fn = cells.make_call("batch-aces-c", "torch-cuda", tasks)
    out = fn()
    assert moved == ["cpu"] * 3 and synced == ["cpu"] and len(out) == 3
    from benchmarks.harness import suite

    suite.check_output(cells.Case("batch-aces-c", "distinct", "20x30", "torch-cuda", 2), out, tasks)


def test_without_cuda_the_torch_cuda_cells_say_why(monkeypatch):
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    reason = cells.skip_reason(
        cells.Case("aces-c", "distinct", "200x500", "torch-cuda", 2, device="cuda")
    )
    assert reason is not None and reason.startswith("torch-cuda unavailable: no CUDA device")
    assert runtime.device_unavailable_reason("cpu") is None
    info = runtime.device_info("cuda")
    assert "no CUDA device" in info["unavailable"]
    # the cpp cell beside it still runs
    if runtime.backend_unavailable_reason("cpp") is None:
        assert cells.skip_reason(cells.Case("aces-c", "distinct", "200x500", "cpp", 2)) is None


def test_device_run_refuses_before_any_run_without_cuda(monkeypatch, capsys):
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(
        command, "_suite_run", lambda *a, **k: pytest.fail("the benchmarks ran before the check")
    )
    monkeypatch.setattr(sys, "argv", ["aces-fast bench", "--device", "cuda", "-q"])
    assert command.console_main() == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("aces-fast bench: error: --device cuda: ")
    assert "no CUDA device is available" in err[0]
    for argv, message in (
        (["--device", "cuda", "--threads", "1"], "--threads does not apply"),
        (["--device", "cuda", "--impls", "numba"], "not numba"),
        (["--impls", "torch-cuda"], "needs --device cuda"),
        (["--sizes", "100000x2000"], "--device cuda only"),
    ):
        with pytest.raises(ValueError, match=message):
            command.main([*argv, "-q"])


def test_aces_fast_bench_device_cuda_without_a_gpu_is_one_error_line(tmp_path):
    pytest.importorskip("torch")
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="")  # no GPU, on any machine
    env.pop("ACES_FAST_BACKEND", None)
    proc = subprocess.run(
        [sys.executable, "-m", "aces_fast", "bench", "--device", "cuda", "-q"],
        cwd=str(ROOT),
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 1 and proc.stdout == "" and "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("aces-fast: error: --device cuda: ")
    assert "no CUDA device is available" in lines[0]


def test_device_pytest_command_adds_the_device_and_cpu_stays_as_it_was(tmp_path):
    parser = command.build_parser()
    cpu = command.pytest_command(
        ROOT / "benchmarks", parser.parse_args([]), tmp_path / "t.json", memory=False
    )
    assert not any(a.startswith("--bench-device") for a in cpu)
    cuda = command.pytest_command(
        ROOT / "benchmarks", parser.parse_args(["--device", "cuda"]), tmp_path / "t.json", False
    )
    assert cuda[-1] == "--bench-device=cuda" and cuda[:-1] == cpu
    assert parser.parse_args([]).device == "cpu"


def _device_timing(cuda_batch_c=(2e-3, 1.5e-3, 1e-3)):
    """A device run's JSON: cpp on 16 cores and torch-cuda, three repetitions."""
    t = 16

    def pair(op, size, cpp, cuda, **extra):
        return [
            b
            for rep, (c, g) in enumerate(zip(cpp, cuda))
            for b in (
                _bench(op, "distinct", size, "cpp", t, rep, c, **extra),
                _bench(op, "distinct", size, "torch-cuda", t, rep, g, **extra),
            )
        ]

    return {
        "benchmarks": [
            # cpp/cuda per repetition: 10, 20, 30 -> 20x
            *pair("batch-aces-c", "200x500", (20e-3, 30e-3, 30e-3), cuda_batch_c, tasks=2000),
            *pair("batch-aces-o", "200x500", (0.1, 0.1, 0.1), (0.05, 0.04, 0.05), tasks=200),
            _bench("aces-o-all", "distinct", "2000x1000", "torch-cuda", t, 0, 0.8),
            *pair("aces-c", "200x500", (50e-6,) * 3, (0.3e-3, 0.25e-3, 0.4e-3)),
        ],
        report.HARNESS_KEY: {
            "skipped": [
                dict(
                    op="loo-auc",
                    family="distinct",
                    size="100000x2000",
                    impl="torch-cuda",
                    threads=t,
                    kind="call",
                    reason="torch-cuda unavailable: no CUDA device is available",
                )
            ]
        },
    }


def test_device_goals_and_cpp_over_cuda_ratios_from_a_result_set():
    rows = report.aggregate(_device_timing())
    by = {(r["op"], r["impl"]): r for r in rows}
    assert by[("batch-aces-c", "torch-cuda")]["speedup_vs_cpp"] == pytest.approx(20.0)
    assert "speedup_vs_cpp" not in by[("batch-aces-c", "cpp")]
    goals = {g["target"]: g for g in targets.evaluate_device(rows)}
    assert len(goals) == len(targets.DEVICE_GOALS)
    status = {
        name.split(",")[0] + ("/s" if "tasks" in g["goal"] else ""): g["status"]
        for name, g in goals.items()
    }
    assert status["rerank_batch ACES-C 2000 tasks of 200x500 distinct"] == "met"  # 20x >= 10x
    # 2000 tasks in 1.5 ms (median) = 1.33 M tasks/s >= 1 M
    assert status["rerank_batch ACES-C 2000 tasks of 200x500 distinct/s"] == "met"
    assert status["rerank_batch ACES-O K=24 200 tasks of 200x500 distinct"] == "not met"  # 2x
    assert status["ACES-O top_k=None T=90 2000x1000 distinct"] == "met"  # 0.8 s <= 1 s
    assert status["ACES-C 200x500 distinct"] == "not met"  # 0.3 ms > 0.2 ms
    loo = next(g for n, g in goals.items() if n.startswith("LOO-AUC 100000x2000"))
    assert loo["status"] == "not measured" and "no CUDA device" in loo["why"]
    text = targets.format_targets(list(goals.values()))
    assert "20x" in text and ">= 10x cpp" in text and "<= 0.2 ms" in text and "800 ms" in text
    table = report.format_device_table(rows)
    assert table.splitlines()[0].startswith("cpp on all 16 cores")
    line = next(ln for ln in table.splitlines() if ln.startswith("batch-aces-c"))
    assert "200x500 x2000" in line and line.rstrip().endswith("20x")
    assert "skipped: torch-cuda unavailable" in table
    # the torch-cuda column shows in the ordinary tables too
    assert "torch-cuda" in report.format_tables(rows)
    # slower on the GPU: a speed-up below 1 keeps its digits
    slow = report.aggregate(_device_timing(cuda_batch_c=(0.2, 0.3, 0.3)))
    g = targets.evaluate_device(slow)[0]
    assert g["shown"] == "0.1x" and g["status"] == "not met"
    assert report.format_device_table([]) == ""


def test_set_aside_moves_outputs_out_of_the_way_until_cleared(tmp_path):
    from benchmarks.harness.runtime import SetAside

    with SetAside(tmp_path) as set_aside:
        set_aside(tmp_path / "missing")  # nothing there: nothing to do
        for k in range(3):  # the same output name, run after run
            out = tmp_path / "out.parquet"
            out.mkdir()
            (out / "part-0.parquet").write_bytes(bytes([k]))
            set_aside(out)
            assert not out.exists()
        kept = sorted(p.name for p in set_aside.trash.iterdir())
        assert kept == ["0000-out.parquet", "0001-out.parquet", "0002-out.parquet"]
        assert [(set_aside.trash / n / "part-0.parquet").read_bytes() for n in kept] == [
            b"\x00",
            b"\x01",
            b"\x02",
        ]
    assert not set_aside.trash.exists()
