"""Dataset loaders and writers: round trips, the bundled data, malformed files."""

from __future__ import annotations

import gzip
import json
import re

import numpy as np
import pytest

from aces_fast.datasets import (
    BUNDLED,
    DEFAULT_DATASET,
    DEFAULT_MAX_BYTES,
    DEFAULT_MAX_CELLS,
    Dataset,
    Problem,
    bundled_path,
    check_size,
    load_dataset,
    load_jsonl,
    load_npz,
    load_pass_matrix,
    resolve_limits,
    save_jsonl,
    save_npz,
)
from helpers import EXAMPLE, EXAMPLE_LABELS


def _toy_dataset() -> Dataset:
    rng = np.random.default_rng(7)
    B1 = (rng.random((6, 9)) < 0.4).astype(np.uint8)
    return Dataset(
        "toy",
        [
            Problem(
                "spec",
                EXAMPLE,
                EXAMPLE_LABELS,
                {
                    "t_ok": np.array([1, 1, 0, 1, 0, 0, 1, 0, 0, 0], np.uint8),
                    "test_count": np.arange(10, dtype=np.int32),
                    "cand_uid": np.array([0, 1, 2, 3, 4, 5, 6, 6], np.int32),
                },
            ),
            Problem("random/1", B1, (rng.random(6) < 0.5).astype(np.uint8)),
            Problem("no-tests", np.zeros((4, 0), np.uint8), np.array([0, 1, 0, 0])),
            Problem("unlabelled", B1[:3, :5], None),
        ],
    )


def _assert_same(a: Dataset, b: Dataset, extras: bool = True) -> None:
    assert a.task_ids == b.task_ids
    for p, q in zip(a, b):
        assert q.B.dtype == np.uint8 and q.B.shape == p.B.shape
        np.testing.assert_array_equal(p.B, q.B)
        if p.labels is None:
            assert q.labels is None
        else:
            assert q.labels.dtype == np.uint8
            np.testing.assert_array_equal(p.labels, q.labels)
        if extras:
            assert set(p.extras) == set(q.extras)
            for k in p.extras:
                np.testing.assert_array_equal(p.extras[k], q.extras[k])


# -- round trips ---------------------------------------------------------------


@pytest.mark.parametrize("compressed", [True, False])
def test_npz_round_trip(tmp_path, compressed):
    ds = _toy_dataset()
    ds.meta["config"] = '{"build": 1}'
    path = tmp_path / "toy.npz"
    save_npz(ds, path, compressed=compressed)
    back = load_npz(path)
    _assert_same(ds, back)
    assert back.name == "toy" and back.source == str(path)
    assert back.meta["config"] == '{"build": 1}'
    assert back["no-tests"].m == 0 and back["unlabelled"].labels is None


@pytest.mark.parametrize("matrix_format", ["B", "passed"])
@pytest.mark.parametrize("suffix", [".jsonl", ".jsonl.gz"])
def test_jsonl_round_trip(tmp_path, matrix_format, suffix):
    ds = _toy_dataset()
    path = tmp_path / f"toy{suffix}"
    save_jsonl(ds, path, matrix_format=matrix_format)
    back = load_jsonl(path)
    _assert_same(ds, back)
    assert back.name == "toy"
    opener = gzip.open if suffix.endswith(".gz") else open
    with opener(path, "rt") as fh:
        first = json.loads(fh.readline())
    assert ("B" in first) == (matrix_format == "B")
    assert ("passed" in first) == (matrix_format == "passed")


def test_jsonl_both_matrix_forms_agree(tmp_path):
    path = tmp_path / "forms.jsonl"
    path.write_text(
        '{"task_id": "a", "B": [[1, 0, 1], [0, 0, true]], "labels": [1, 0]}\n'
        "\n"  # blank lines are allowed
        '{"task_id": "b", "m": 3, "passed": [[0, 2], [2]], "labels": [true, false]}\n'
        '{"task_id": "c", "m": 2, "passed": [[], []]}\n'
    )
    ds = load_jsonl(path)
    np.testing.assert_array_equal(ds["a"].B, ds["b"].B)
    np.testing.assert_array_equal(ds["a"].labels, ds["b"].labels)
    assert ds["c"].B.shape == (2, 2) and not ds["c"].B.any() and ds["c"].labels is None


def test_npz_round_trip_of_bundled_problem(tmp_path):
    ds = load_dataset("humaneval-gpt35")
    sub = Dataset("sub", ds.problems[:5])
    save_npz(sub, tmp_path / "sub.npz")
    _assert_same(sub, load_npz(tmp_path / "sub.npz"))
    save_jsonl(sub, tmp_path / "sub.jsonl")
    _assert_same(sub, load_jsonl(tmp_path / "sub.jsonl"))


# -- bundled data ------------------------------------------------------------------


def test_bundled_datasets_match_their_files():
    assert DEFAULT_DATASET == "humaneval-codegen16b"
    for name in BUNDLED:
        ds = load_dataset(name)
        assert ds.name == name and len(ds) == 164
        with bundled_path(name).open("rb") as fh, np.load(fh) as z:
            assert ds.task_ids == [str(t) for t in z["task_ids"]]
            for k in (0, 81, 163):
                np.testing.assert_array_equal(ds[k].B, z[f"B_{k:04d}"])
                np.testing.assert_array_equal(ds[k].labels, z[f"y_{k:04d}"])
                np.testing.assert_array_equal(ds[k].extras["test_count"], z[f"test_count_{k:04d}"])
        assert "config" in ds.meta


def test_bundled_statistics_match_the_data_readme():
    cg = load_dataset()  # the default
    assert cg.name == "humaneval-codegen16b"
    assert {p.n for p in cg} == {100}
    assert sum(p.m == 0 for p in cg) == 9
    assert sum(p.is_mixed for p in cg) == 121
    gpt = load_dataset("humaneval-gpt35")
    assert {p.n for p in gpt} == {5}
    assert sum(p.is_mixed for p in gpt) == 119
    assert sum(p.n_correct for p in gpt) == 346


def test_dataset_indexing():
    ds = _toy_dataset()
    assert ds[1].task_id == "random/1" and ds["random/1"] is ds[1]
    assert [p.task_id for p in ds] == ds.task_ids and len(ds) == 4
    with pytest.raises(KeyError, match="nope"):
        ds["nope"]
    assert ds["spec"].n_correct == 3 and ds["spec"].is_mixed
    assert not ds["unlabelled"].is_mixed and ds["unlabelled"].n_correct is None


# -- load_dataset names and paths ----------------------------------------------------


def test_load_dataset_errors(tmp_path):
    with pytest.raises(ValueError, match="not a bundled name"):
        load_dataset("humaneval-nonexistent")
    weird = tmp_path / "data.txt"
    weird.write_text("1,0\n")
    with pytest.raises(ValueError, match="unknown dataset format"):
        load_dataset(str(weird))


def test_load_dataset_by_path(tmp_path):
    ds = _toy_dataset()
    save_npz(ds, tmp_path / "a.npz")
    save_jsonl(ds, tmp_path / "b.jsonl.gz", matrix_format="passed")
    _assert_same(ds, load_dataset(str(tmp_path / "a.npz")))
    _assert_same(ds, load_dataset(tmp_path / "b.jsonl.gz"))


# -- malformed npz -------------------------------------------------------------------


def _npz(tmp_path, **arrays):
    path = tmp_path / "bad.npz"
    np.savez(path, **arrays)
    return path


GOOD_B = np.array([[1, 0], [0, 1], [1, 1]], np.uint8)


@pytest.mark.parametrize(
    ("arrays", "match"),
    [
        (dict(B_0000=GOOD_B), r"bad\.npz: missing key 'task_ids'"),
        (
            dict(task_ids=np.array(["a", "b"]), B_0000=GOOD_B),
            r"bad\.npz: problem 1 \('b'\): missing key 'B_0001'",
        ),
        (
            dict(task_ids=np.array(["a"]), B_0000=GOOD_B * 2),
            r"problem 0 \('a'\): key 'B_0000': must contain only 0 and 1, found 2",
        ),
        (
            dict(task_ids=np.array(["a"]), B_0000=np.array([1, 0, 1])),
            r"key 'B_0000': must be a 2-D",
        ),
        (
            dict(task_ids=np.array(["a"]), B_0000=GOOD_B, y_0000=np.array([1, 0])),
            r"problem 0 \('a'\): key 'y_0000': must have length 3",
        ),
        (
            dict(task_ids=np.array(["a"]), B_0000=GOOD_B, y_0000=np.array([1, 0, 3])),
            r"key 'y_0000': must contain only 0 and 1",
        ),
        (
            dict(task_ids=np.array(["a"]), B_0000=GOOD_B, t_ok_0000=np.array([1, 0, 1])),
            r"key 't_ok_0000': must have length 2",
        ),
        (
            dict(task_ids=np.array(["a"]), B_0000=GOOD_B, cand_uid_0000=np.array([0.5, 1, 2])),
            r"key 'cand_uid_0000': must hold integers",
        ),
        (
            dict(task_ids=np.array(["a"]), B_0000=GOOD_B, B_0001=GOOD_B),
            r"key 'B_0001' refers to problem 1, but 'task_ids' lists only 1",
        ),
        (
            dict(task_ids=np.array(["a", "a"]), B_0000=GOOD_B, B_0001=GOOD_B),
            r"duplicate task_id 'a'",
        ),
        (
            dict(task_ids=np.array(["a"]), B_0000=np.zeros((0, 3), np.uint8)),
            r"key 'B_0000': has no candidates",
        ),
    ],
)
def test_malformed_npz(tmp_path, arrays, match):
    path = _npz(tmp_path, **arrays)
    with pytest.raises(ValueError, match=match):
        load_npz(path)


def test_not_an_npz(tmp_path):
    path = tmp_path / "garbage.npz"
    path.write_bytes(b"this is not a zip archive")
    with pytest.raises(ValueError, match=r"garbage\.npz: cannot read as \.npz"):
        load_npz(path)


# -- malformed jsonl -----------------------------------------------------------------


GOOD_LINE = '{"task_id": "ok", "B": [[1, 0], [0, 1]], "labels": [1, 0]}'


@pytest.mark.parametrize(
    ("line", "match"),
    [
        ('{"task_id": "x", "B": [[1, 0], [0, 1]', r"line 2: invalid JSON"),
        ("[1, 2, 3]", r"expected a JSON object"),
        ('{"B": [[1, 0]]}', r"missing field 'task_id'"),
        (
            '{"task_id": "x", "B": [[1, 0], [0]]}',
            r"field 'B' is ragged: row 0 has 2 entries, row 1 has 1",
        ),
        ('{"task_id": "x", "B": [[1, 0], [2, 1]]}', r"field 'B' row 1 entry 0 is 2; only 0 and 1"),
        ('{"task_id": "x", "B": [[1, "1"]]}', r"field 'B' row 0 entry 1 is '1'"),
        ('{"task_id": "x", "B": []}', r"field 'B' has no rows"),
        ('{"task_id": "x", "B": [[1, 0]], "m": 3}', r"field 'm' is 3 but the rows of 'B' have 2"),
        (
            '{"task_id": "x", "B": [[1, 0], [0, 1]], "labels": [1]}',
            r"field 'labels': must have length 2",
        ),
        (
            '{"task_id": "x", "B": [[1, 0], [0, 1]], "labels": [1, 5]}',
            r"field 'labels' entry 1 is 5",
        ),
        ('{"task_id": "x", "passed": [[0]]}', r"field 'passed' needs the field 'm'"),
        (
            '{"task_id": "x", "m": 2, "passed": [[0, 2]]}',
            r"field 'passed' candidate 0 lists 2, not a test index in \[0, 2\)",
        ),
        ('{"task_id": "x", "m": 2, "passed": [[0]], "B": [[1, 0]]}', r"exactly one of"),
        ('{"task_id": "x"}', r"exactly one of"),
        ('{"task_id": "x", "m": -1, "passed": [[]]}', r"field 'm' must be a non-negative"),
        ('{"task_id": "x", "B": [[1, 0]], "t_ok": [1, 0, 1]}', r"field 't_ok': must have length 2"),
        ('{"task_id": "ok", "B": [[1]]}', r"field 'task_id' 'ok' repeats the problem on line 1"),
    ],
)
def test_malformed_jsonl(tmp_path, line, match):
    path = tmp_path / "bad.jsonl"
    path.write_text(GOOD_LINE + "\n" + line + "\n")
    with pytest.raises(ValueError, match=match) as err:
        load_jsonl(path)
    # every message starts with the file, the line and (once known) the task id
    assert re.match(rf"{re.escape(str(path))}: line 2( \('(x|ok)'\))?: ", str(err.value))


def test_problem_validates_direct_construction():
    with pytest.raises(ValueError, match=r"problem 'p': field 'B': must contain only 0 and 1"):
        Problem("p", [[0, 2]])
    with pytest.raises(ValueError, match=r"field 'B': rows have different lengths"):
        Problem("p", [[0, 1], [1]])
    with pytest.raises(ValueError, match=r"field 'labels': must have length 2"):
        Problem("p", [[0, 1], [1, 1]], labels=[1, 0, 0])
    with pytest.raises(TypeError, match="not a Problem"):
        Dataset("d", [np.zeros((2, 2))])


def test_save_jsonl_rejects_unknown_format(tmp_path):
    with pytest.raises(ValueError, match="matrix_format"):
        save_jsonl(_toy_dataset(), tmp_path / "x.jsonl", matrix_format="dense")


# -- single matrices (aces-fast rerank) ---------------------------------------------------


def test_load_pass_matrix_formats(tmp_path):
    np.save(tmp_path / "m.npy", EXAMPLE.astype(bool))
    np.savez(tmp_path / "single.npz", anything=EXAMPLE.astype(np.int64))
    np.savez(tmp_path / "keyed.npz", B=EXAMPLE, labels=EXAMPLE_LABELS, other=np.arange(3))
    (tmp_path / "m.csv").write_text(
        "\n".join(",".join(str(v) for v in row) for row in EXAMPLE[:4])
        + "\n\n"
        + "\n".join(", ".join(f"{v}.0" for v in row) for row in EXAMPLE[4:])
        + "\n"
    )
    for name in ("m.npy", "single.npz", "keyed.npz", "m.csv"):
        prob = load_pass_matrix(tmp_path / name)
        assert prob.B.dtype == np.uint8
        np.testing.assert_array_equal(prob.B, EXAMPLE, err_msg=name)
    np.testing.assert_array_equal(load_pass_matrix(tmp_path / "keyed.npz").labels, EXAMPLE_LABELS)
    ds = _toy_dataset()
    save_jsonl(ds, tmp_path / "d.jsonl")
    save_npz(ds, tmp_path / "d.npz")
    for name in ("d.jsonl", "d.npz"):
        assert load_pass_matrix(tmp_path / name).task_id == "spec"
        np.testing.assert_array_equal(
            load_pass_matrix(tmp_path / name, task="random/1").B, ds["random/1"].B
        )


@pytest.mark.parametrize(
    ("content", "match"),
    [
        ("cand,t1,t2\n1,0,1\n", r"line 1, column 1: 'cand' is not a number \(a header row"),
        ("1,0,1\n0,1\n", r"line 2 has 2 columns but line 1 has 3"),
        ("1,0,1\n0,2,1\n", r"line 2, column 2: value '2'; only 0 and 1"),
        ("1,0,1\n0,x,1\n", r"line 2, column 2: 'x' is not a number$"),
        ("\n\n", r"no rows"),
    ],
)
def test_load_pass_matrix_bad_csv(tmp_path, content, match):
    path = tmp_path / "bad.csv"
    path.write_text(content)
    with pytest.raises(ValueError, match=r"bad\.csv: " + match):
        load_pass_matrix(path)


def test_load_pass_matrix_errors(tmp_path):
    np.save(tmp_path / "m.npy", np.array([[0, 3]]))
    with pytest.raises(ValueError, match=r"m\.npy: pass matrix: must contain only 0 and 1"):
        load_pass_matrix(tmp_path / "m.npy")
    np.save(tmp_path / "ok.npy", EXAMPLE)
    with pytest.raises(ValueError, match="single matrix"):
        load_pass_matrix(tmp_path / "ok.npy", task="x")
    np.savez(tmp_path / "two.npz", a=EXAMPLE, b=EXAMPLE)
    with pytest.raises(ValueError, match=r"two\.npz: holds 2 arrays \(a, b\)"):
        load_pass_matrix(tmp_path / "two.npz")
    save_jsonl(_toy_dataset(), tmp_path / "d.jsonl")
    with pytest.raises(ValueError, match=r"no problem with task_id 'zzz' \(have spec, "):
        load_pass_matrix(tmp_path / "d.jsonl", task="zzz")
    with pytest.raises(ValueError, match="no such file"):
        load_pass_matrix(tmp_path / "missing.csv")
    (tmp_path / "m.txt").write_text("1 0\n")
    with pytest.raises(ValueError, match="unknown format"):
        load_pass_matrix(tmp_path / "m.txt")


# -- size limits, standard input, special files ----------------------------------------------


def test_limits_resolve_from_keyword_environment_default(monkeypatch):
    monkeypatch.delenv("ACES_FAST_MAX_CELLS", raising=False)
    monkeypatch.delenv("ACES_FAST_MAX_BYTES", raising=False)
    assert resolve_limits() == (DEFAULT_MAX_CELLS, DEFAULT_MAX_BYTES) == (2**28, 2**30)
    monkeypatch.setenv("ACES_FAST_MAX_CELLS", "1e6")
    monkeypatch.setenv("ACES_FAST_MAX_BYTES", " 4_000 ")
    assert resolve_limits() == (10**6, 4000)
    assert resolve_limits(max_cells=7, max_bytes=8) == (7, 8)  # the keyword wins
    monkeypatch.setenv("ACES_FAST_MAX_CELLS", "lots")
    with pytest.raises(ValueError, match="ACES_FAST_MAX_CELLS must be a positive integer"):
        resolve_limits()
    monkeypatch.setenv("ACES_FAST_MAX_CELLS", "0")
    with pytest.raises(ValueError, match="ACES_FAST_MAX_CELLS"):
        load_dataset("humaneval-gpt35")
    with pytest.raises(ValueError, match="max_bytes must be a positive integer"):
        resolve_limits(max_cells=1, max_bytes=-1)
    with pytest.raises(TypeError, match="max_cells must be a positive integer or None"):
        resolve_limits(max_cells="10")


def test_check_size_names_the_limit_and_how_to_raise_it():
    check_size("x", shape=(4, 5), nbytes=100, max_cells=20, max_bytes=100)  # at the limit
    with pytest.raises(ValueError) as err:
        check_size("data.npz: key 'B_0003'", shape=(4, 5), max_cells=19)
    msg = str(err.value)
    assert msg.startswith(
        "data.npz: key 'B_0003': 4 x 5 = 20 cells is more than the limit of 19 cells"
    )
    assert "max_cells=" in msg and "ACES_FAST_MAX_CELLS" in msg and "--max-cells" in msg
    with pytest.raises(
        ValueError,
        match=r"x: 101 bytes is more than the limit of 100 bytes "
        r"per file; .*ACES_FAST_MAX_BYTES",
    ):
        check_size("x", nbytes=101, max_bytes=100)
    # declared shapes are Python integers: no overflow however large
    with pytest.raises(ValueError, match="cells"):
        check_size("x", shape=(2**62, 2**62, 2**62))


def test_limits_are_exact_in_every_format(tmp_path):
    B = (np.arange(20).reshape(4, 5) % 3 == 0).astype(np.uint8)
    np.save(tmp_path / "m.npy", B)
    np.savez_compressed(tmp_path / "m.npz", B=B)
    (tmp_path / "m.csv").write_text("\n".join(",".join(map(str, r)) for r in B) + "\n")
    save_jsonl([Problem("p", B)], tmp_path / "b.jsonl")
    save_jsonl([Problem("p", B)], tmp_path / "p.jsonl.gz", matrix_format="passed")
    save_npz([Problem("p", B)], tmp_path / "d.npz")
    for name in ("m.npy", "m.npz", "m.csv", "b.jsonl", "p.jsonl.gz", "d.npz"):
        np.testing.assert_array_equal(load_pass_matrix(tmp_path / name, max_cells=20).B, B)
        with pytest.raises(ValueError, match=r"4 x 5 = 20 cells is more than the limit of 19"):
            load_pass_matrix(tmp_path / name, max_cells=19)
    # bytes: an npz's members' declared sizes; a text file's decompressed size
    import zipfile

    with zipfile.ZipFile(tmp_path / "d.npz") as zf:
        declared = sum(i.file_size for i in zf.infolist())
    load_npz(tmp_path / "d.npz", max_bytes=declared)
    with pytest.raises(ValueError, match=f"uncompressed size of its members: {declared:,} bytes"):
        load_npz(tmp_path / "d.npz", max_bytes=declared - 1)
    import gzip as gz

    size = len(gz.decompress((tmp_path / "p.jsonl.gz").read_bytes()))
    load_jsonl(tmp_path / "p.jsonl.gz", max_bytes=size)
    with pytest.raises(ValueError, match=f"holds more than {size - 1:,} bytes of data"):
        load_jsonl(tmp_path / "p.jsonl.gz", max_bytes=size - 1)


def test_passed_form_is_refused_before_it_is_expanded(tmp_path):
    # the 100-byte problem that once made evaluate allocate 23 GB
    path = tmp_path / "big.jsonl"
    path.write_text('{"task_id":"a","passed":[[0],[1]],"m":200000000,"labels":[1,0]}\n')
    with pytest.raises(
        ValueError,
        match=r"line 1 \('a'\): pass matrix declared by 'passed' and "
        r"'m': 2 x 200,000,000 = 400,000,000 cells",
    ):
        load_jsonl(path)
    assert load_jsonl(path, max_cells=4 * 10**8)["a"].B.shape == (2, 200_000_000)


class _FakeStdin:
    def __init__(self, data: bytes, tty: bool = False):
        import io

        self.buffer = io.BytesIO(data)
        self.buffer.isatty = lambda: tty


def test_standard_input(tmp_path, monkeypatch):
    ds = _toy_dataset()
    save_npz(ds, tmp_path / "d.npz")
    save_jsonl(ds, tmp_path / "d.jsonl.gz")
    save_jsonl(ds, tmp_path / "d.jsonl")
    np.save(tmp_path / "m.npy", EXAMPLE)
    (tmp_path / "m.csv").write_text("\n".join(",".join(map(str, r)) for r in EXAMPLE))
    for name in ("d.npz", "d.jsonl.gz", "d.jsonl"):
        monkeypatch.setattr("sys.stdin", _FakeStdin((tmp_path / name).read_bytes()))
        back = load_dataset("-")
        assert back.source == "<stdin>"
        _assert_same(ds, back)
        monkeypatch.setattr("sys.stdin", _FakeStdin((tmp_path / name).read_bytes()))
        np.testing.assert_array_equal(load_pass_matrix("-", task="random/1").B, ds["random/1"].B)
    for name in ("m.npy", "m.csv"):
        monkeypatch.setattr("sys.stdin", _FakeStdin((tmp_path / name).read_bytes()))
        np.testing.assert_array_equal(load_pass_matrix("-").B, EXAMPLE)
    monkeypatch.setattr("sys.stdin", _FakeStdin((tmp_path / "m.npy").read_bytes()))
    with pytest.raises(ValueError, match=r"<stdin>: not a dataset: .* found a single \.npy"):
        load_dataset("-")
    monkeypatch.setattr("sys.stdin", _FakeStdin(b"1,0\n" * 100))
    with pytest.raises(ValueError, match=r"<stdin>: standard input holds more than 10 bytes"):
        load_pass_matrix("-", max_bytes=10)
    monkeypatch.setattr("sys.stdin", _FakeStdin(b"", tty=True))
    with pytest.raises(ValueError, match="standard input is a terminal"):
        load_pass_matrix("-")
    # './-' is a file called '-', not standard input
    monkeypatch.chdir(tmp_path)
    (tmp_path / "-").write_text("1,0\n")
    with pytest.raises(ValueError, match="unknown format"):
        load_pass_matrix("./-")


def test_special_files_are_refused_before_opening(tmp_path):
    import os

    os.mkfifo(tmp_path / "pipe.jsonl")  # opening it for reading would block
    for load in (load_pass_matrix, load_jsonl, load_dataset):
        with pytest.raises(
            ValueError,
            match=r"pipe\.jsonl: is a FIFO \(named pipe\), not a "
            r"regular file",
        ):
            load(tmp_path / "pipe.jsonl")
    (tmp_path / "dir.npz").mkdir()
    with pytest.raises(ValueError, match=r"dir\.npz: is a directory"):
        load_npz(tmp_path / "dir.npz")
    (tmp_path / "dev.csv").symlink_to(os.devnull)
    with pytest.raises(ValueError, match=r"dev\.csv: is a character device"):
        load_pass_matrix(tmp_path / "dev.csv")


def test_npz_keys_as_np_load_names_them(tmp_path):
    """Members without '.npy' keep their name, as with np.load; member order is kept."""
    import zipfile

    ds = _toy_dataset()
    ds.meta["config"] = "c"
    save_npz(ds, tmp_path / "d.npz", compressed=False)
    with (
        zipfile.ZipFile(tmp_path / "d.npz") as src,
        zipfile.ZipFile(tmp_path / "renamed.npz", "w") as dst,
    ):
        for info in src.infolist():
            name = info.filename[:-4] if info.filename == "config.npy" else info.filename
            dst.writestr(name, src.read(info))
    back = load_npz(tmp_path / "renamed.npz")
    _assert_same(ds, back)
    assert back.meta == {"config": "c"}


def test_public_names_are_listed_in_all():
    """``from aces_fast.datasets import *`` gives every public loader and constant,
    and ``__all__`` names only what exists."""
    import inspect

    import aces_fast.datasets as datasets

    assert len(set(datasets.__all__)) == len(datasets.__all__)
    for name in datasets.__all__:
        assert hasattr(datasets, name), name
    defined_here = {
        name
        for name, obj in vars(datasets).items()
        if not name.startswith("_")
        and (inspect.isfunction(obj) or inspect.isclass(obj))
        and obj.__module__ == datasets.__name__
    }
    assert defined_here <= set(datasets.__all__), defined_here - set(datasets.__all__)
    namespace: dict = {}
    exec("from aces_fast.datasets import *", namespace)
    assert {"load_dataset", "load_pass_matrix", "Dataset", "Problem", "BUNDLED"} <= set(namespace)
