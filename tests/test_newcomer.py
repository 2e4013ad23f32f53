"""What a new user met first (issue "ready for its first release", first use):
each surprise fixed here has a test that failed before the fix."""

from __future__ import annotations

import importlib.util

import pytest

import aces_fast as af
from aces_fast.cli import main
from aces_fast.datasets import load_dataset


def test_evaluate_refuses_an_empty_dataset(tmp_path, capsys):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    assert main(["evaluate", str(empty)]) == 1
    err = capsys.readouterr().err.strip()
    assert err == f"aces-fast: error: {empty}: holds no problems; there is nothing to evaluate"


def test_rerank_reads_parquet_as_evaluate_does(tmp_path, capsys):
    pytest.importorskip("pyarrow")
    from aces_fast.parquet import save_parquet

    ds = load_dataset("humaneval-gpt35")
    path = tmp_path / "gpt.parquet"
    save_parquet(ds, path)
    tid = ds.task_ids[7]
    assert main(["rerank", str(path), "--task", tid, "--json"]) == 0
    out = capsys.readouterr().out
    want = af.rerank(ds[tid].B, "aces-c")
    import json

    got = json.loads(out)
    assert got["task_id"] == tid and got["order"] == want.order.tolist()


def test_a_dataset_index_out_of_range_names_the_size():
    ds = load_dataset("humaneval-gpt35")
    with pytest.raises(
        IndexError,
        match=r"problem 999 is out of range: dataset "
        r"'humaneval-gpt35' holds 164 problems \(0 to 163",
    ):
        ds[999]
    assert ds[-1].task_id == ds.task_ids[-1]


def test_no_stray_public_names():
    assert "annotations" not in dir(af)
    public = {n for n in dir(af) if not n.startswith("_")}
    modules = {n for n in public if type(getattr(af, n)).__name__ == "module"}
    assert public - modules == set(af.__all__) - {"__version__"}


def test_command_line_messages_name_flags_not_keywords(tmp_path, capsys):
    pytest.importorskip("pyarrow")
    from aces_fast.parquet import save_parquet

    path = tmp_path / "in.parquet"
    save_parquet(load_dataset("humaneval-gpt35").problems[:10], path)
    out = tmp_path / "o.parquet"
    assert main(["rerank-dataset", str(path), "-o", str(out), "-q"]) == 0
    assert main(["rerank-dataset", str(path), "-o", str(out), "-q"]) == 1
    err = capsys.readouterr().err.strip()
    assert "pass --resume to continue that run, --restart to discard it" in err
    assert "=True" not in err


def test_every_output_option_creates_missing_folders(tmp_path, capsys):
    """One policy: outputs go into folders made as needed, never a refusal."""
    pytest.importorskip("pyarrow")
    pq_out = tmp_path / "a" / "b" / "gpt.parquet"
    assert main(["convert", "humaneval-gpt35", str(pq_out), "-q"]) == 0
    assert pq_out.is_file()
    res = tmp_path / "c" / "d" / "o.parquet"
    errs = tmp_path / "e" / "f" / "errors.jsonl"
    assert main(["rerank-dataset", str(pq_out), "-o", str(res), "--errors", str(errs), "-q"]) == 0
    assert res.is_dir()
    if importlib.util.find_spec("matplotlib") is not None:
        plot = tmp_path / "g" / "h" / "p.png"
        assert (
            main(
                ["evaluate", "humaneval-gpt35", "--methods", "majority", "--plot", str(plot), "-q"]
            )
            == 0
        )
        assert plot.is_file()


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (
            ["rerank", "humaneval-gpt35", "--method", "acesc"],
            (
                "aces-fast: error: rerank: argument --method: invalid choice: 'acesc'; did you mean "
                "'aces-c'"
            ),
        ),
        (
            ["rerun", "x"],
            ("aces-fast: error: argument COMMAND: invalid choice: 'rerun'; did you mean 'rerank'?"),
        ),
        (
            ["rerank", "humaneval-gpt35", "--top", "0"],
            "aces-fast: error: rerank: argument --top: expected a positive integer, got '0'",
        ),
    ],
)
def test_usage_errors_are_one_line_with_a_suggestion(argv, expected, capsys):
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and err.startswith(expected), err
