"""``aces-fast bench`` (aces_fast.bench): the matrix, skip rules, timing and the
end-to-end quick run writing JSON and a PNG.

Nothing here asserts a speed: timings are reported by the command, not tested.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import sys

import numpy as np
import pytest

from aces_fast import bench

import aces_fast

#: the directory holding the aces_fast under test (source tree or site-packages)
PACKAGE_PARENT = os.path.dirname(os.path.dirname(os.path.abspath(aces_fast.__file__)))


def test_quick_matrix_covers_targets_and_stays_small():
    cases = bench.quick_cases()
    ids = {c.id for c in cases}
    assert "aces-c-200x500-numpy-rankdata-1t" in ids
    assert "aces-o-200x500-torch-autograd-1t" in ids
    assert "loo-auc-20000x1000-numpy-rankdata-1t" in ids
    assert {c.threads for c in cases} == {1, 2}
    # the only large size is the LOO-AUC target
    assert {c.op for c in cases if c.n >= bench.SLOW_ROWS} == {"loo-auc"}
    # the NumPy reference (seconds per call at large sizes) only where it is cheap
    assert {(c.n, c.threads) for c in cases if c.impl == "numpy"} == {(24, 1), (200, 1)}


def test_full_matrix_is_every_combination():
    cases = bench.all_cases()
    assert len(cases) == len(bench.OPS) * len(bench.SIZES) * 2 * (len(bench.BACKENDS) + 1)
    for c in cases:
        assert c.impl in bench.impls_for(c.op)
        assert c.slow == (c.n >= bench.SLOW_ROWS or
                          bench.estimate_seconds(c.op, c.impl, c.n, c.m) > 2.0)


def test_infeasible_cases_are_skipped_with_a_reason():
    pytest.importorskip("torch")
    B, _ = bench.workload(2000, 1000)
    reason = bench.skip_reason(bench.Case("aces-o-all", 2000, 1000, "torch-autograd", 1), B)
    assert reason is not None and "GB" in reason and "O(k^2 m)" in reason
    reason = bench.skip_reason(bench.Case("aces-o-all", 2000, 1000, "numpy", 1), B)
    assert reason is not None and "estimated" in reason and "budget" in reason
    # the paper's top_k=24 keeps the autograd baseline feasible at any size
    assert bench.skip_reason(bench.Case("aces-o", 2000, 1000, "torch-autograd", 1), B) is None


def test_unavailable_backend_is_skipped_with_the_registry_reason(monkeypatch):
    from aces_fast.backends import BackendUnavailableError

    def refuse(name):
        raise BackendUnavailableError(name, "not built here")

    monkeypatch.setattr("aces_fast.backends.get_backend", refuse)
    reason = bench.skip_reason(bench.Case("loo-auc", 24, 100, "cpp", 1))
    assert reason == "backend cpp unavailable: not built here"


def test_make_call_computes_the_operation():
    B, w = bench.workload(24, 100)
    L = bench.make_call("loo-auc", "numpy-rankdata", B, w)()
    assert L.shape == (100,) and np.isnan(L).sum() == (
        (B.sum(0) == 0) | (B.sum(0) == 24)).sum()
    weights, scores = bench.make_call("aces-c", "numpy-rankdata", B, w)()
    assert weights.sum() == pytest.approx(1.0) and scores.shape == (24,)
    with pytest.raises(ValueError, match="does not compute"):
        bench.make_call("aces-o", "numpy-rankdata", B, w)
    with pytest.raises(ValueError, match="unknown operation"):
        bench.make_call("nope", "numpy", B, w)


def test_measure_batches_fast_calls_and_reports_the_median():
    calls = []
    timing = bench.measure(lambda: calls.append(1), min_time=0.01)
    assert timing.number > 1 and timing.repeats >= 3
    assert len(calls) == 1 + timing.number * timing.repeats  # warm-up is not timed
    assert 0 < timing.min_s <= timing.median_s < 1e-3


def test_measure_group_interleaves_samples():
    log = []
    ta, tb = bench.measure_group([lambda: log.append("a"), lambda: log.append("b")],
                                 min_time=0.005)
    assert log[:2] == ["a", "b"]  # the two warm-ups
    k = ta.number
    assert log[2:2 + k] == ["a"] * k and log[2 + k:2 + k + tb.number] == ["b"] * tb.number
    assert log.count("a") == 1 + ta.number * ta.repeats


def test_long_calls_are_not_repeated():
    calls = []
    timing = bench.measure(lambda: calls.append(time.sleep(0.01)), long_call=0.0005,
                           single_call=0.001)
    assert len(calls) == 1 and timing.repeats == 1 and timing.median_s >= 0.01
    calls.clear()
    timing = bench.measure(lambda: calls.append(time.sleep(0.01)), long_call=0.005,
                           single_call=1.0)
    assert len(calls) == 2 and timing.repeats == 1  # warm-up, then one timed call


def test_thread_limit_pins_and_restores_cpp_threads():
    from aces_fast.backends import BackendUnavailableError, get_backend

    try:
        cpp = get_backend("cpp")
    except BackendUnavailableError as exc:
        pytest.skip(exc.reason)
    before = cpp.n_threads
    with bench.thread_limit(1) as how:
        assert cpp.n_threads == 1 and how["cpp"] == 1
        assert os.environ["OMP_NUM_THREADS"] == "1"
    assert cpp.n_threads == before
    with pytest.raises(ValueError):
        with bench.thread_limit(0):
            pass


def test_table_and_targets_report_skips_and_status():
    rows = [
        dict(op="aces-c", size="200x500", n=200, m=500, impl="cpp", threads=1, baseline=False,
             skipped=None, median_s=1e-4),
        dict(op="aces-c", size="200x500", n=200, m=500, impl="numpy-rankdata", threads=1,
             baseline=True, skipped=None, median_s=2e-2),
        dict(op="aces-c", size="200x500", n=200, m=500, impl="numba", threads=1, baseline=False,
             skipped="backend numba unavailable: x"),
    ]
    bench.speedups(rows)
    assert rows[0]["speedup"] == pytest.approx(200)
    table = bench.format_table(rows)
    assert "(200x)" in table and "skip[1]" in table and "[1] backend numba unavailable" in table
    targets = bench.evaluate_targets(rows, {"importtime_s": 0.2, "numpy_s": 0.1, "wall_s": 0.25})
    by_name = {t["target"].split(",")[0]: t for t in targets}
    if bench._default_backend() == "cpp":
        assert by_name["ACES-C 200x500"]["status"] == "met"
    assert by_name["LOO-AUC 20000x1000"]["status"] == "not measured"
    assert by_name["import aces_fast (python -X importtime"]["status"] == "not met"


@pytest.mark.parametrize("argv", [["--sizes", "24by100"], ["--ops", "aces-x"],
                                  ["--threads", "0"], ["--full", "--quick"]])
def test_bad_options_exit_with_usage_error(argv):
    with pytest.raises(SystemExit) as info:
        bench.main(argv)
    assert info.value.code == 2


def test_quick_run_end_to_end_writes_json_and_png(tmp_path):
    out_json, out_png = tmp_path / "bench.json", tmp_path / "bench.png"
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (PACKAGE_PARENT, env.get("PYTHONPATH")) if p)
    # numba and torch-backend JIT/start-up would dominate a tiny run; they are
    # covered by the benchmarks/ smoke run
    impls = "cpp,numpy,numpy-rankdata,torch-autograd"
    proc = subprocess.run(
        [sys.executable, "-m", "aces_fast.bench", "--quick", "--sizes", "24x100",
         "--threads", "1", "--impls", impls, "--min-time", "0",
         "--json", str(out_json), "--plot", str(out_png)],
        env=env, cwd=str(tmp_path), capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert "Targets" in proc.stdout and "import aces_fast" in proc.stdout

    report = json.loads(out_json.read_text())
    for key in ("date", "machine", "versions", "threads", "results", "targets", "import_time"):
        assert key in report
    assert report["machine"]["cpu"] and report["machine"]["logical_cores"] >= 1
    assert report["versions"]["numpy"] == np.__version__
    assert report["threads"]["groups"] == [1]
    cells = {(r["op"], r["impl"]) for r in report["results"]}
    assert len(cells) == len(report["results"]) == 5 * 2 + 3 + 2  # backends + baselines
    for r in report["results"]:
        assert r["skipped"] or r["median_s"] > 0
    assert all(t["status"] in ("met", "not met", "not measured") for t in report["targets"])
    assert len(report["targets"]) == 5

    png = out_png.read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 5000
