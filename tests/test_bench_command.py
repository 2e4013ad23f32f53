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
