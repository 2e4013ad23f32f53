"""The ``aces-fast`` command line: evaluate, rerank, bench, config.

End-to-end runs go through ``python -m aces_fast`` in a subprocess on the
bundled data; the rest call :func:`aces_fast.cli.main` in process. Numbers are
checked against the Python API (``aces_fast.rerank`` + ``pass_at_k``).
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import aces_fast as af
from aces_fast import cli
from aces_fast.backends import BackendUnavailableError, get_backend
from aces_fast.datasets import BUNDLED, Dataset, Problem, load_dataset, save_jsonl
from aces_fast.evaluation import ALL_METHODS, evaluate
from helpers import EXAMPLE, EXAMPLE_LABELS

ROOT = Path(__file__).resolve().parents[1]
_NEEDS_MATPLOTLIB = pytest.mark.skipif(
    importlib.util.find_spec("matplotlib") is None,
    reason="matplotlib (the plot extra) is not installed",
)


def _fastest_backend() -> str:
    # numba's first-call JIT takes tens of seconds and the numpy reference is slow
    # for ACES-O, so end-to-end runs use the compiled backend when it is built.
    try:
        get_backend("cpp")
        return "cpp"
    except BackendUnavailableError:
        return "numpy"


FAST = _fastest_backend()


def run_cli(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    # One OpenMP thread: these matrices are tiny and the test machine is shared.
    env["OMP_NUM_THREADS"] = "1"
    env.pop("ACES_FAST_BACKEND", None)
    proc = subprocess.run(
        [sys.executable, "-m", "aces_fast", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    if check:
        assert proc.returncode == 0, proc.stderr
    return proc


def api_pass_at(ds: Dataset, method: str, ks=(1, 2, 5), backend=FAST):
    """Mean Pass@k over all and over mixed problems, computed with the public API."""
    rows, mixed = [], []
    for p in ds:
        scores = af.rerank(p.B, method, backend=backend).scores
        rows.append([af.pass_at_k(scores, p.labels, k) for k in ks])
        mixed.append(p.is_mixed)
    rows, mixed = np.array(rows), np.array(mixed)
    return rows.mean(axis=0), rows[mixed].mean(axis=0)


# -- evaluate, end to end ------------------------------------------------------------


@pytest.fixture(scope="module")
def gpt35_json():
    proc = run_cli("evaluate", "humaneval-gpt35", "--json", "--backend", FAST)
    datasets = json.loads(proc.stdout)["datasets"]
    assert len(datasets) == 1
    return datasets[0]


def test_evaluate_json_schema(gpt35_json):
    out = gpt35_json
    assert out["dataset"] == "humaneval-gpt35"
    assert (out["n_problems"], out["n_labelled"], out["n_mixed"]) == (164, 164, 119)
    assert set(out["all"]) == set(out["mixed"]) == set(af.METHODS) | {"random", "oracle"}
    for subset in ("all", "mixed"):
        for method, vals in out[subset].items():
            assert set(vals) == {"pass@1", "pass@2", "pass@5"}
            assert 0.0 <= vals["pass@1"] <= vals["pass@2"] <= vals["pass@5"] <= 1.0, method
    assert {out["backends"][m] for m in af.METHODS} == {FAST}
    assert out["params"]["aces-o"] == {"gamma": 10.0, "lr": 0.01, "steps": 90, "top_k": 24}
    assert 0 < out["diagnostics"]["problems"] <= 119
    d = out["diagnostics"]
    assert d["mixed"] == 119 and d["problems"] + d["no_tests"] + d["constant_tests"] == 119


def test_evaluate_json_matches_python_api(gpt35_json):
    ds = load_dataset("humaneval-gpt35")
    for method in af.METHODS:  # all deterministic for a fixed backend
        all_, mixed = api_pass_at(ds, method)
        got_all = [gpt35_json["all"][method][f"pass@{k}"] for k in (1, 2, 5)]
        got_mixed = [gpt35_json["mixed"][method][f"pass@{k}"] for k in (1, 2, 5)]
        np.testing.assert_allclose(got_all, all_, rtol=0, atol=1e-12, err_msg=method)
        np.testing.assert_allclose(got_mixed, mixed, rtol=0, atol=1e-12, err_msg=method)


def test_evaluate_reference_rows(gpt35_json):
    ds = load_dataset("humaneval-gpt35")
    n = np.array([p.n for p in ds])
    c = np.array([p.n_correct for p in ds])
    for k in (1, 2, 5):
        # a random ranking's expected Pass@k is the unbiased pass@k of the sampler
        expected = np.mean(af.pass_at_k_unbiased(n, c, k))
        assert gpt35_json["all"]["random"][f"pass@{k}"] == pytest.approx(expected, abs=1e-12)
        assert gpt35_json["all"]["oracle"][f"pass@{k}"] == pytest.approx(np.mean(c > 0))
        assert gpt35_json["mixed"]["oracle"][f"pass@{k}"] == 1.0


def test_evaluate_codegen_subset_matches_python_api():
    methods = ["majority", "codet", "b4", "aces-c"]
    proc = run_cli(
        "evaluate",
        "humaneval-codegen16b",
        "--json",
        "--quiet",
        "--backend",
        FAST,
        "--methods",
        ",".join(methods),
    )
    out = json.loads(proc.stdout)["datasets"][0]
    assert list(out["all"]) == methods and out["n_without_tests"] == 9
    assert proc.stderr == ""  # --quiet and not a TTY: no progress output
    ds = load_dataset("humaneval-codegen16b")
    for method in methods:
        all_, mixed = api_pass_at(ds, method)
        np.testing.assert_allclose(
            [out["all"][method][f"pass@{k}"] for k in (1, 2, 5)],
            all_,
            rtol=0,
            atol=1e-12,
            err_msg=method,
        )
        np.testing.assert_allclose(
            [out["mixed"][method][f"pass@{k}"] for k in (1, 2, 5)],
            mixed,
            rtol=0,
            atol=1e-12,
            err_msg=method,
        )


def test_evaluate_table_and_several_datasets(capsys):
    assert cli.main(["evaluate", "all", "--methods", "random,oracle", "-q"]) == 0
    text = capsys.readouterr().out
    for name in BUNDLED:
        assert f"{name}: 164 problems" in text
    ev = evaluate(load_dataset("humaneval-gpt35"), ["random", "oracle"])
    p1 = ev.summary("all")["random"]["pass@1"]
    p5m = ev.summary("mixed")["random"]["pass@5"]
    row = next(
        line for line in text.split("humaneval-gpt35")[1].splitlines() if line.startswith("random")
    )
    # percent with one decimal: all then mixed columns
    assert [row.split()[1], row.split()[6]] == [f"{100 * p1:.1f}", f"{100 * p5m:.1f}"]
    assert cli.main(["evaluate", "all", "--methods", "random", "--json", "-q"]) == 0
    out = json.loads(capsys.readouterr().out)
    # one shape for one dataset or several: {"datasets": [...]}, in the order given
    assert list(out) == ["datasets"]
    assert [d["dataset"] for d in out["datasets"]] == list(BUNDLED)
    assert out["datasets"][1]["all"]["random"]["pass@1"] == pytest.approx(p1)


def test_evaluate_hyperparameters_reach_the_methods(capsys):
    # ACES-O with zero Adam steps keeps uniform weights on non-constant tests, which
    # is majority vote: equal Pass@k proves --aces-o-steps was applied.
    argv = [
        "evaluate",
        "humaneval-gpt35",
        "--json",
        "-q",
        "--backend",
        FAST,
        "--methods",
        "majority,aces-o,b4",
        "--aces-o-steps",
        "0",
        "--aces-o-top-k",
        "all",
        "--b4-alpha",
        "2.5",
    ]
    assert cli.main(argv) == 0
    out = json.loads(capsys.readouterr().out)["datasets"][0]
    assert out["all"]["aces-o"] == out["all"]["majority"]
    assert out["params"]["aces-o"]["steps"] == 0 and out["params"]["aces-o"]["top_k"] is None
    assert out["params"]["b4"] == {"alpha": 2.5, "beta0": 1e4}
    ds = load_dataset("humaneval-gpt35")
    expected = np.mean([af.pass_at_k(af.b4(p.B, alpha=2.5).scores, p.labels, 1) for p in ds])
    assert out["all"]["b4"]["pass@1"] == pytest.approx(expected, abs=1e-12)


def test_evaluate_user_dataset_with_edge_cases(tmp_path, capsys):
    ds = Dataset(
        "edge",
        [
            Problem("spec", EXAMPLE, EXAMPLE_LABELS),
            Problem("no-tests", np.zeros((4, 0), np.uint8), [0, 1, 0, 0]),
            Problem("single", [[1, 0]], [1]),  # n = 1 < k
            Problem("unlabelled", EXAMPLE[:3], None),
        ],
    )
    save_jsonl(ds, tmp_path / "edge.jsonl")
    assert (
        cli.main(["evaluate", str(tmp_path / "edge.jsonl"), "--json", "-q", "--backend", "numpy"])
        == 0
    )
    out = json.loads(capsys.readouterr().out)["datasets"][0]
    assert (out["n_problems"], out["n_labelled"], out["n_mixed"], out["n_without_tests"]) == (
        4,
        3,
        2,
        1,
    )
    ev = evaluate(ds, backend="numpy")
    for method in ALL_METHODS:
        table = ev.pass_at[method]
        assert np.isnan(table[3]).all()  # unlabelled: run, not scored
        assert (table[2] == 1.0).all()  # the only candidate is correct
        if method != "oracle":  # the oracle reads labels, not tests
            # no tests: every score ties, so every method is a random pick
            np.testing.assert_allclose(table[1], ev.pass_at["random"][1], err_msg=method)
    assert ev.pass_at["random"][1, 0] == 0.25 and ev.pass_at["oracle"][1, 0] == 1.0
    # the worked example of docs/contract.rst §6: majority vote puts candidate 0 (correct) first
    assert ev.pass_at["majority"][0, 0] == 1.0
    assert out["all"]["majority"]["pass@1"] == pytest.approx(np.mean(ev.pass_at["majority"][:3, 0]))


def test_evaluate_plot(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    png = tmp_path / "chart.png"
    assert (
        cli.main(
            [
                "evaluate",
                "humaneval-gpt35",
                "--methods",
                "random,majority,oracle",
                "-q",
                "--plot",
                str(png),
            ]
        )
        == 0
    )
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_evaluate_plot_without_matplotlib(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    rc = cli.main(["evaluate", "humaneval-gpt35", "--plot", str(tmp_path / "x.png")])
    assert rc == 1
    assert "--plot needs matplotlib" in capsys.readouterr().err
    assert not (tmp_path / "x.png").exists()


def test_evaluate_errors(capsys):
    assert cli.main(["evaluate", "no-such-dataset"]) == 1
    assert "not a bundled name" in capsys.readouterr().err
    assert cli.main(["evaluate", "humaneval-gpt35", "--backend", "fortran", "-q"]) == 1
    assert "unknown backend 'fortran'" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        cli.main(["evaluate", "--methods", "majority,magic"])
    assert exc.value.code == 2
    assert "unknown method(s) magic" in capsys.readouterr().err
    with pytest.raises(ValueError, match="unknown method"):
        evaluate(load_dataset("humaneval-gpt35"), ["aces-x"])


def test_progress_counter_without_tqdm(capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "tqdm", None)
    monkeypatch.setitem(sys.modules, "tqdm.auto", None)
    bar = cli._Progress(3, "toy", enabled=True)
    for _ in range(3):
        bar("majority")
    bar.close()
    assert "toy: 3/3 (majority)" in capsys.readouterr().err
    silent = cli._Progress(3, "toy", enabled=False)
    silent("majority")
    silent.close()
    assert capsys.readouterr().err == "" and silent.count == 1


# -- rerank ---------------------------------------------------------------------------------


def _ranked_candidates(text: str):
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.split()[:2] == ["rank", "candidate"])
    out = []
    for line in lines[start + 1 :]:
        parts = line.split()
        if not parts or not parts[0].isdigit():
            break
        out.append(int(parts[1]))
    return out


def test_rerank_npy_and_csv_end_to_end(tmp_path):
    np.save(tmp_path / "m.npy", EXAMPLE)
    (tmp_path / "m.csv").write_text("\n".join(",".join(map(str, row)) for row in EXAMPLE) + "\n")
    expected = af.aces_c(EXAMPLE, backend="numpy")
    npy = run_cli("rerank", str(tmp_path / "m.npy"), "--backend", FAST)
    assert _ranked_candidates(npy.stdout) == expected.order.tolist()
    assert "4 of 10 tests non-zero" in npy.stdout  # docs/contract.rst §6: tests 1, 2, 4, 7
    csv = run_cli(
        "rerank",
        str(tmp_path / "m.csv"),
        "--json",
        "--method",
        "majority",
        "--top",
        "3",
        "--backend",
        FAST,
    )
    out = json.loads(csv.stdout)
    maj = af.majority_vote(EXAMPLE, backend="numpy")
    assert out["method"] == "majority" and out["backend"] == FAST
    assert [r["candidate"] for r in out["ranking"]] == maj.order[:3].tolist()
    assert out["order"] == maj.order.tolist()
    np.testing.assert_allclose(out["scores"], maj.scores, atol=1e-12)
    np.testing.assert_allclose(out["weights"], maj.weights, atol=1e-12)


def test_rerank_jsonl_task_and_weights(tmp_path, capsys):
    ds = Dataset(
        "d", [Problem("first", [[1, 0], [0, 1]], [1, 0]), Problem("spec", EXAMPLE, EXAMPLE_LABELS)]
    )
    save_jsonl(ds, tmp_path / "d.jsonl", matrix_format="passed")
    assert (
        cli.main(
            ["rerank", str(tmp_path / "d.jsonl"), "--task", "spec", "--json", "--backend", "numpy"]
        )
        == 0
    )
    out = json.loads(capsys.readouterr().out)
    assert out["task_id"] == "spec" and (out["n"], out["m"]) == (8, 10)
    # docs/contract.rst §6: ACES-C weights 5/17 on tests 1, 2, 4 and 2/17 on test 7
    np.testing.assert_allclose(
        out["weights"], np.array([5, 5, 0, 5, 0, 0, 2, 0, 0, 0]) / 17, atol=1e-12
    )
    np.testing.assert_allclose(
        out["loo_auc"], [2 / 3, 2 / 3, 1 / 2, 2 / 3, 1 / 2, 2 / 5, 7 / 12, 7 / 24, 0, 0]
    )
    assert [r["correct"] for r in out["ranking"][:3]] == [1, 1, 1]
    assert cli.main(["rerank", str(tmp_path / "d.jsonl"), "--backend", "numpy"]) == 0
    text = capsys.readouterr().out
    assert "[first]" in text and "correct" in text


def test_rerank_json_constant_test_is_null(tmp_path, capsys):
    B = np.hstack([EXAMPLE, np.ones((8, 1), np.uint8)])
    np.save(tmp_path / "c.npy", B)
    assert cli.main(["rerank", str(tmp_path / "c.npy"), "--json", "--backend", "numpy"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["loo_auc"][-1] is None and out["weights"][-1] == 0.0  # LOO-AUC nan -> null


def test_rerank_aces_o_hyperparameters(tmp_path, capsys):
    np.save(tmp_path / "m.npy", EXAMPLE)
    assert (
        cli.main(
            [
                "rerank",
                str(tmp_path / "m.npy"),
                "--method",
                "aces-o",
                "--json",
                "--aces-o-steps",
                "5",
                "--aces-o-lr",
                "0.05",
                "--backend",
                "numpy",
            ]
        )
        == 0
    )
    out = json.loads(capsys.readouterr().out)
    ref = af.aces_o(EXAMPLE, steps=5, lr=0.05, backend="numpy")
    assert len(out["objective"]) == 6
    np.testing.assert_allclose(out["weights"], ref.weights, atol=1e-12)
    assert out["params"]["steps"] == 5


def test_rerank_errors(tmp_path, capsys):
    (tmp_path / "h.csv").write_text("a,b\n1,0\n")
    proc = run_cli("rerank", str(tmp_path / "h.csv"), check=False)
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr.startswith("aces-fast: error: ")
    assert "h.csv: line 1, column 1" in proc.stderr and "header" in proc.stderr
    assert cli.main(["rerank", str(tmp_path / "missing.npy")]) == 1
    assert "no such file" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cli.main(["rerank", str(tmp_path / "h.csv"), "--method", "nonsense"])


# -- top level, bench and config ------------------------------------------------------------


def test_no_subcommand_prints_help_and_fails(capsys):
    assert cli.main([]) == 2  # a usage error, after the help
    captured = capsys.readouterr()
    text = captured.err
    assert captured.out == ""
    for command in ("evaluate", "rerank", "bench", "config"):
        assert command in text
    proc = run_cli(check=False)
    assert proc.returncode == 2 and proc.stderr == text and proc.stdout == ""


def test_config(capsys):
    assert cli.main(["config"]) == 0
    assert "numpy" in capsys.readouterr().out
    assert cli.main(["config", "--json"]) == 0
    cfg = json.loads(capsys.readouterr().out)
    assert cfg["backends"]["numpy"]["available"] is True


# -- hostile files, limits, standard input, unexpected failures -------------------------------
# (the corrupt-file corpus itself is in test_corrupt_files.py)


def _one_error_line(err: str) -> str:
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("aces-fast: error: "), err
    assert "Traceback" not in err
    return lines[0]


def test_size_limit_options_and_environment(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("ACES_FAST_MAX_CELLS", raising=False)
    np.save(tmp_path / "m.npy", EXAMPLE)  # 8 x 10 = 80 cells
    path = str(tmp_path / "m.npy")
    assert cli.main(["rerank", path, "--max-cells", "80", "--backend", "numpy"]) == 0
    capsys.readouterr()
    assert cli.main(["rerank", path, "--max-cells", "79"]) == 1
    line = _one_error_line(capsys.readouterr().err)
    assert "8 x 10 = 80 cells is more than the limit of 79" in line and "--max-cells" in line
    monkeypatch.setenv("ACES_FAST_MAX_CELLS", "79")
    assert cli.main(["rerank", path]) == 1
    assert "limit of 79 cells" in capsys.readouterr().err
    # the option wins over the environment variable
    assert cli.main(["rerank", path, "--max-cells", "1e3", "--backend", "numpy"]) == 0
    capsys.readouterr()
    save_jsonl([Problem("p", EXAMPLE, EXAMPLE_LABELS)], tmp_path / "d.jsonl")
    assert cli.main(["evaluate", str(tmp_path / "d.jsonl"), "--max-bytes", "100", "-q"]) == 1
    assert "holds more than 100 bytes" in _one_error_line(capsys.readouterr().err)
    with pytest.raises(SystemExit) as exc:
        cli.main(["rerank", path, "--max-bytes", "none"])
    assert exc.value.code == 2
    assert "must be a positive integer" in capsys.readouterr().err


def test_standard_input_end_to_end(tmp_path):
    csv = "\n".join(",".join(map(str, row)) for row in EXAMPLE) + "\n"
    env = dict(os.environ, OMP_NUM_THREADS="1")
    proc = subprocess.run(
        [sys.executable, "-m", "aces_fast", "rerank", "-", "--json", "--backend", FAST],
        input=csv,
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["order"] == af.aces_c(EXAMPLE, backend="numpy").order.tolist()
    save_jsonl([Problem("spec", EXAMPLE, EXAMPLE_LABELS)], tmp_path / "d.jsonl.gz")
    with open(tmp_path / "d.jsonl.gz", "rb") as fh:
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "aces_fast",
                "evaluate",
                "-",
                "--json",
                "--methods",
                "majority",
                "--backend",
                FAST,
            ],
            stdin=fh,
            capture_output=True,
            env=env,
            cwd=ROOT,
            timeout=300,
        )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["datasets"][0]["all"]["majority"]["pass@1"] == pytest.approx(1.0)


def test_unexpected_loader_failure_is_one_line_naming_it(tmp_path, capsys, monkeypatch):
    import aces_fast.datasets as datasets

    np.save(tmp_path / "m.npy", EXAMPLE)

    def broken(*args, **kwargs):
        return {}["no such key"]  # a bug in a loader

    monkeypatch.setattr(datasets, "load_pass_matrix", broken)
    monkeypatch.delenv("ACES_FAST_TRACEBACK", raising=False)
    assert cli.main(["rerank", str(tmp_path / "m.npy")]) == 1
    line = _one_error_line(capsys.readouterr().err)
    assert f"{tmp_path / 'm.npy'}: loading failed unexpectedly: KeyError: 'no such key'" in line
    assert "(in broken, " in line and "test_cli.py:" in line and "bug in aces_fast" in line
    monkeypatch.setenv("ACES_FAST_TRACEBACK", "1")
    with pytest.raises(KeyError, match="no such key"):
        cli.main(["rerank", str(tmp_path / "m.npy")])
    monkeypatch.setenv("ACES_FAST_TRACEBACK", "0")  # a switch: off is off
    assert cli.main(["rerank", str(tmp_path / "m.npy")]) == 1
    assert "loading failed unexpectedly" in _one_error_line(capsys.readouterr().err)
    monkeypatch.setenv("ACES_FAST_TRACEBACK", "please")  # set to see it: on
    with pytest.raises(KeyError, match="no such key"):
        cli.main(["rerank", str(tmp_path / "m.npy")])

    def exhausted(*args, **kwargs):
        raise MemoryError

    monkeypatch.delenv("ACES_FAST_TRACEBACK")
    monkeypatch.setattr(datasets, "load_dataset", exhausted)
    assert cli.main(["evaluate", "humaneval-gpt35", "-q"]) == 1
    assert _one_error_line(capsys.readouterr().err) == (
        "aces-fast: error: humaneval-gpt35: out of memory while loading it (--max-cells / "
        "--max-bytes refuse files beyond a size before allocating)"
    )


def test_unexpected_failure_elsewhere_is_one_line(tmp_path, capsys, monkeypatch):
    import aces_fast.methods as methods

    np.save(tmp_path / "m.npy", EXAMPLE)

    def broken(*args, **kwargs):
        raise RuntimeError("kernel exploded\nsecond line")

    monkeypatch.setattr(methods, "rerank", broken)
    monkeypatch.delenv("ACES_FAST_TRACEBACK", raising=False)
    assert cli.main(["rerank", str(tmp_path / "m.npy")]) == 1
    line = _one_error_line(capsys.readouterr().err)
    assert line.startswith(
        "aces-fast: error: internal error: RuntimeError: kernel exploded second line (in broken, "
    )

    def out_of_memory(*args, **kwargs):
        raise MemoryError("big")

    monkeypatch.setattr(methods, "rerank", out_of_memory)
    assert cli.main(["rerank", str(tmp_path / "m.npy")]) == 1
    assert _one_error_line(capsys.readouterr().err).startswith(
        "aces-fast: error: out of memory (in out_of_memory, "
    )


def test_multi_line_messages_become_one_line(tmp_path, capsys):
    weird = tmp_path / "two\nlines.csv"
    weird.write_text("1,x\n")
    assert cli.main(["rerank", str(weird)]) == 1
    line = _one_error_line(capsys.readouterr().err)
    assert "two lines.csv: line 1, column 2: 'x' is not a number" in line


# -- the newcomer's path: no work thrown away, no success that isn't, no surprises ----------


def _no_work(monkeypatch):
    """Make loading or running anything fail loudly: checks must come first."""
    import aces_fast.datasets as datasets
    import aces_fast.evaluation as evaluation

    def started(*args, **kwargs):
        raise AssertionError("the work started before the output was checked")

    monkeypatch.setattr(datasets, "load_dataset", started)
    monkeypatch.setattr(evaluation, "evaluate", started)


@pytest.mark.parametrize(
    ("plot", "expected"),
    [
        ("file/out.png", "{tmp}/file is not a directory"),
        ("out.txt", "'.txt' is not an image format; matplotlib writes"),
        ("chart", "has no file extension"),
        (".", "is a directory"),
    ],
)
def test_evaluate_checks_the_plot_path_before_any_work(
    tmp_path, capsys, monkeypatch, plot, expected
):
    pytest.importorskip("matplotlib")
    _no_work(monkeypatch)
    path = str(tmp_path / plot) if plot != "." else str(tmp_path / "d.png")
    if plot == ".":
        (tmp_path / "d.png").mkdir()
    (tmp_path / "file").write_text("")
    assert cli.main(["evaluate", "humaneval-gpt35", "--plot", path, "-q"]) == 1
    line = _one_error_line(capsys.readouterr().err)
    assert line.startswith(f"aces-fast: error: --plot {path}: ")
    assert expected.format(tmp=tmp_path) in line


def test_convert_and_rerank_dataset_check_outputs_before_any_work(tmp_path, capsys, monkeypatch):
    pytest.importorskip("pyarrow")  # without it, the one error line names the extra instead
    import aces_fast.stream as stream

    _no_work(monkeypatch)
    monkeypatch.setattr(stream, "rerank_dataset", lambda *a, **k: pytest.fail("ran"))
    (tmp_path / "file").write_text("")
    assert cli.main(["convert", "humaneval-gpt35", str(tmp_path / "file" / "x.parquet")]) == 1
    assert "file is not a directory" in _one_error_line(capsys.readouterr().err)
    assert cli.main(["convert", "humaneval-gpt35", str(tmp_path / "x.txt")]) == 1
    assert "name the file *.parquet" in _one_error_line(capsys.readouterr().err)
    for argv, expected in (
        (["-o", str(tmp_path / "file")], "exists and is not a directory"),
        (["-o", str(tmp_path / "file" / "out")], "is not a directory"),
        (["-o", str(tmp_path / "o"), "--errors", str(tmp_path / "file" / "e.jsonl")], "--errors "),
    ):
        assert cli.main(["rerank-dataset", str(tmp_path / "in.parquet"), *argv]) == 1
        assert expected in _one_error_line(capsys.readouterr().err), argv


def test_evaluate_without_labels_says_pass_at_k_needs_them(tmp_path, capsys):
    save_jsonl([Problem("a", EXAMPLE), Problem("b", EXAMPLE[:3])], tmp_path / "nolabels.jsonl")
    path = str(tmp_path / "nolabels.jsonl")
    proc = run_cli("evaluate", path, check=False)
    assert proc.returncode == 1 and proc.stdout == ""
    line = _one_error_line(proc.stderr)
    assert "none of its 2 problems has labels" in line and "Pass@k needs them" in line
    assert f"aces-fast rerank {path} --task ID" in line and "rerank-dataset" in line
    # with another, labelled dataset first: refused before anything runs
    assert cli.main(["evaluate", "humaneval-gpt35", path, "--json", "-q"]) == 1
    assert capsys.readouterr().out == ""


def test_rerank_takes_a_bundled_name_and_a_task(capsys):
    ds = load_dataset("humaneval-gpt35")
    assert cli.main(["rerank", "humaneval-gpt35", "--json", "--backend", "numpy"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["task_id"] == ds[0].task_id
    assert out["order"] == af.aces_c(ds[0].B, backend="numpy").order.tolist()
    assert (
        cli.main(
            ["rerank", "humaneval-gpt35", "--task", "HumanEval/5", "--json", "--backend", "numpy"]
        )
        == 0
    )
    out = json.loads(capsys.readouterr().out)
    assert out["task_id"] == "HumanEval/5" and (out["n"], out["m"]) == ds["HumanEval/5"].B.shape
    labels = ds["HumanEval/5"].labels
    assert [r["correct"] for r in out["ranking"]] == [
        int(labels[r["candidate"]]) for r in out["ranking"]
    ]
    assert cli.main(["rerank", "humaneval-gpt35", "--task", "nope"]) == 1
    assert "no problem with task_id 'nope'" in capsys.readouterr().err


def test_top_trims_the_lists_in_text_and_json_alike(tmp_path, capsys):
    np.save(tmp_path / "m.npy", EXAMPLE)
    assert (
        cli.main(["rerank", str(tmp_path / "m.npy"), "--json", "--top", "2", "--backend", "numpy"])
        == 0
    )
    out = json.loads(capsys.readouterr().out)
    ref = af.aces_c(EXAMPLE, backend="numpy")
    assert [r["candidate"] for r in out["ranking"]] == ref.order[:2].tolist()
    # docs/contract.rst §6: the largest weights are 5/17 on tests 0, 1, 3 (ties by index)
    assert [t["test"] for t in out["tests"]] == [0, 1]
    assert out["tests"][0]["weight"] == pytest.approx(5 / 17)
    assert out["tests"][0]["loo_auc"] == pytest.approx(2 / 3)
    # the arrays indexed by candidate or test stay complete
    assert len(out["order"]) == len(out["scores"]) == 8
    assert len(out["weights"]) == len(out["loo_auc"]) == 10
    assert cli.main(["rerank", str(tmp_path / "m.npy"), "--json", "--backend", "numpy"]) == 0
    full = json.loads(capsys.readouterr().out)
    assert len(full["ranking"]) == 8 and [t["test"] for t in full["tests"]] == [0, 1, 3, 6]
    assert cli.main(["rerank", str(tmp_path / "m.npy"), "--top", "2", "--backend", "numpy"]) == 0
    text = capsys.readouterr().out
    assert _ranked_candidates(text) == ref.order[:2].tolist()
    assert "... 6 more (use --top)" in text and "... 2 more (use --top)" in text
    assert (
        cli.main(
            ["rerank", str(tmp_path / "m.npy"), "--json", "--method", "b4", "--backend", "numpy"]
        )
        == 0
    )
    assert json.loads(capsys.readouterr().out)["tests"] is None  # B4 weights no tests


def test_hyperparameter_errors_name_the_flag(tmp_path, capsys):
    np.save(tmp_path / "m.npy", EXAMPLE)
    for argv, flag in (
        (["--method", "aces-o", "--aces-o-lr", "-1"], "--aces-o-lr"),
        (["--method", "b4", "--b4-alpha", "0"], "--b4-alpha"),
    ):
        assert cli.main(["rerank", str(tmp_path / "m.npy"), *argv]) == 1
        line = _one_error_line(capsys.readouterr().err)
        assert line.startswith(f"aces-fast: error: {flag} must be "), line
    assert cli.main(["evaluate", "humaneval-gpt35", "--aces-o-lr", "-0.5", "-q"]) == 1
    assert _one_error_line(capsys.readouterr().err).startswith(
        "aces-fast: error: --aces-o-lr must be >= 0"
    )


def test_hyperparameters_of_methods_not_run_are_named_in_a_warning(tmp_path, capsys):
    argv = [
        "evaluate",
        "humaneval-gpt35",
        "--methods",
        "majority,b4",
        "--json",
        "-q",
        "--aces-o-lr",
        "0.5",
        "--aces-o-steps",
        "3",
        "--b4-alpha",
        "10",
    ]
    assert cli.main(argv) == 0
    captured = capsys.readouterr()
    warnings = captured.err.splitlines()
    assert warnings == [
        (
            "aces-fast: warning: --aces-o-lr, --aces-o-steps ignored: --methods has "
            "no aces-o method (these flags apply to aces-o, aces-o-warm)"
        )
    ]
    assert json.loads(captured.out)["datasets"][0]["params"]["b4"]["alpha"] == 10.0
    assert cli.main([*argv[:3], "aces-o-warm", "-q", "--aces-o-lr", "0.5"]) == 0
    assert capsys.readouterr().err == ""  # the family's other member uses it
    np.save(tmp_path / "m.npy", EXAMPLE)
    assert (
        cli.main(["rerank", str(tmp_path / "m.npy"), "--aces-o-lr", "0.5", "--backend", "numpy"])
        == 0
    )
    assert "--aces-o-lr ignored: --method is aces-c" in capsys.readouterr().err


def test_backend_from_the_environment_is_named_in_the_error(tmp_path, capsys, monkeypatch):
    np.save(tmp_path / "m.npy", EXAMPLE)
    monkeypatch.setenv("ACES_FAST_BACKEND", "gpu")
    _no_work(monkeypatch)  # evaluate fails on the backend before loading anything
    for argv in (["rerank", str(tmp_path / "m.npy")], ["evaluate", "-q"]):
        assert cli.main(argv) == 1
        line = _one_error_line(capsys.readouterr().err)
        assert "unknown backend 'gpu'" in line
        assert "comes from the environment variable ACES_FAST_BACKEND" in line
    # an explicit --backend wins over the environment
    monkeypatch.setenv("ACES_FAST_BACKEND", "gpu")
    assert cli.main(["rerank", str(tmp_path / "m.npy"), "--backend", "numpy"]) == 0
    assert cli.main(["rerank", str(tmp_path / "m.npy"), "--backend", "gpu"]) == 1
    assert "environment" not in capsys.readouterr().err


def test_method_names_are_case_insensitive_like_backend_names(tmp_path, capsys):
    np.save(tmp_path / "m.npy", EXAMPLE)
    ref = af.aces_c(EXAMPLE, backend="numpy")
    res = af.rerank(EXAMPLE, " ACES-C", backend="NumPy")
    assert res.method == "aces-c" and res.backend == "numpy"
    np.testing.assert_array_equal(res.scores, ref.scores)
    assert af.rerank_batch([EXAMPLE], "Aces-O-Warm", backend="numpy")[0].method == "aces-o-warm"
    assert (
        cli.main(
            [
                "rerank",
                str(tmp_path / "m.npy"),
                "--method",
                "ACES-C",
                "--json",
                "--backend",
                "NUMPY",
            ]
        )
        == 0
    )
    out = json.loads(capsys.readouterr().out)
    assert out["method"] == "aces-c" and out["order"] == ref.order.tolist()
    assert (
        cli.main(["evaluate", "humaneval-gpt35", "--methods", "Random,MAJORITY", "--json", "-q"])
        == 0
    )
    assert list(json.loads(capsys.readouterr().out)["datasets"][0]["all"]) == ["random", "majority"]
    ev = evaluate(load_dataset("humaneval-gpt35"), ["ORACLE"])
    assert ev.methods == ["oracle"]
    with pytest.raises(TypeError, match="sequence of names"):
        evaluate(load_dataset("humaneval-gpt35"), "oracle")


@pytest.mark.parametrize(
    ("text", "separator"),
    [
        ("1 0 1\n0 1 1\n", "spaces"),
        ("1;0;1\n0;1;1\n", "semicolons"),
        ("1\t0\t1\n0\t1\t1\n", "tabs"),
        ("1 ; 0\n", "semicolons"),
    ],
)
def test_csv_with_another_separator_says_so(tmp_path, capsys, text, separator):
    (tmp_path / "m.csv").write_text(text)
    assert cli.main(["rerank", str(tmp_path / "m.csv")]) == 1
    line = _one_error_line(capsys.readouterr().err)
    assert line.endswith(
        f"(the columns are separated by {separator}; a CSV pass matrix takes commas)"
    )


def test_csv_header_hint_only_for_a_header(tmp_path, capsys):
    (tmp_path / "h.csv").write_text("test 1,test 2\n1,0\n")
    assert cli.main(["rerank", str(tmp_path / "h.csv")]) == 1
    assert "a header row is not supported" in capsys.readouterr().err
    (tmp_path / "x.csv").write_text("1,0\n1,x\n")
    assert cli.main(["rerank", str(tmp_path / "x.csv")]) == 1
    err = capsys.readouterr().err
    assert err.rstrip().endswith("'x' is not a number")  # no hint: neither header nor separator


def test_diagnostics_line_accounts_for_every_mixed_problem():
    ev = evaluate(load_dataset("humaneval-codegen16b"), ["random"])
    d = ev.diagnostics
    # 121 mixed problems: 6 without tests, 6 whose tests are all constant
    assert (d["mixed"], d["problems"], d["no_tests"], d["constant_tests"]) == (121, 109, 6, 6)
    assert (
        "diagnostics over 109 of 121 mixed problems (the other 12: 6 without tests, "
        "6 with constant tests only)"
    ) in ev.table()
    assert "121 mixed" in ev.table().splitlines()[0]


def _cli_in(cwd: Path, *args: str, env_extra=None) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env.pop("ACES_FAST_BACKEND", None)
    env["OMP_NUM_THREADS"] = "1"
    env.update(env_extra or {})
    return subprocess.run(
        [sys.executable, "-m", "aces_fast", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


# The same behaviours as above, once each through a real process: exit status,
# stdout/stderr split, one error line, no traceback.
@pytest.mark.parametrize(
    ("args", "env", "rc", "out", "err"),
    [
        # (without matplotlib the one error line says so instead: tested elsewhere)
        pytest.param(
            ["evaluate", "humaneval-gpt35", "--plot", "semi.csv/out.png", "-q"],
            None,
            1,
            "",
            "aces-fast: error: --plot semi.csv/out.png: semi.csv is not a directory",
            marks=_NEEDS_MATPLOTLIB,
        ),
        pytest.param(
            ["evaluate", "humaneval-gpt35", "--plot", "out.txt", "-q"],
            None,
            1,
            "",
            "aces-fast: error: --plot out.txt: '.txt' is not an image format",
            marks=_NEEDS_MATPLOTLIB,
        ),
        (
            ["rerank", "humaneval-gpt35"],
            {"ACES_FAST_BACKEND": "gpu"},
            1,
            "",
            "(the value 'gpu' comes from the environment variable ACES_FAST_BACKEND",
        ),
        (
            ["rerank", "m.csv", "--method", "aces-o", "--aces-o-lr", "-1"],
            None,
            1,
            "",
            "aces-fast: error: --aces-o-lr must be >= 0",
        ),
        (
            ["rerank", "semi.csv"],
            None,
            1,
            "",
            "(the columns are separated by semicolons; a CSV pass matrix takes commas)",
        ),
        (
            ["rerank", "m.csv", "--aces-o-lr", "0.5", "--backend", "numpy"],
            None,
            0,
            "method aces-c (backend numpy)",
            "aces-fast: warning: --aces-o-lr ignored: --method is aces-c",
        ),
        (
            ["rerank", "humaneval-gpt35", "--method", "ACES-C", "--top", "1", "--backend", "numpy"],
            None,
            0,
            "... 4 more (use --top)",
            "",
        ),
        (["bench", "-h"], None, 0, "usage: aces-fast bench", ""),
        (
            ["bench", "--json", "x.json"],
            None,
            1,
            "",
            "aces-fast: error: 'bench' runs the benchmark suite of a checkout",
        ),
    ],
)
def test_newcomer_path_through_a_process(tmp_path, args, env, rc, out, err):
    (tmp_path / "m.csv").write_text("1,0,1\n0,1,1\n1,1,0\n")
    (tmp_path / "semi.csv").write_text("1;0;1\n0;1;1\n")
    proc = _cli_in(tmp_path, *args, env_extra=env)  # tmp_path: outside any checkout
    assert proc.returncode == rc, proc.stderr
    assert out in proc.stdout and (out or proc.stdout == "")
    lines = proc.stderr.splitlines()
    assert len(lines) == (1 if err else 0), proc.stderr
    assert err in proc.stderr and "Traceback" not in proc.stderr


def test_bench_checks_its_output_before_running_in_a_checkout(tmp_path):
    (tmp_path / "file").write_text("")
    proc = _cli_in(ROOT, "bench", "--json", str(tmp_path / "file" / "b.json"))
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr.splitlines() == [
        (
            f"aces-fast: error: --json {tmp_path / 'file' / 'b.json'}: {tmp_path / 'file'} is "
            "not a directory"
        )
    ]


@pytest.mark.parametrize("chosen", [None, "jemalloc"])
def test_rerank_dataset_takes_the_system_allocator_unless_one_is_chosen(
    tmp_path, capsys, monkeypatch, chosen
):
    """The local engine's Arrow buffers come from the C library's allocator (the
    command owns its process); ARROW_DEFAULT_MEMORY_POOL, when set, wins."""
    pa = pytest.importorskip("pyarrow")
    import aces_fast.stream as stream

    if chosen is None:
        monkeypatch.delenv("ARROW_DEFAULT_MEMORY_POOL", raising=False)
    else:
        monkeypatch.setenv("ARROW_DEFAULT_MEMORY_POOL", chosen)
    pools = []
    monkeypatch.setattr(pa, "set_memory_pool", lambda pool: pools.append(pool.backend_name))
    monkeypatch.setattr(
        stream, "rerank_dataset", lambda *a, **k: (_ for _ in ()).throw(ImportError("stop here"))
    )
    save_jsonl([Problem("a", EXAMPLE)], tmp_path / "in.jsonl")
    assert (
        cli.main(["rerank-dataset", str(tmp_path / "in.parquet"), "-o", str(tmp_path / "o")]) == 1
    )
    assert "stop here" in _one_error_line(capsys.readouterr().err)
    assert pools == ([] if chosen else ["system"])
