"""Dataset loaders and writers: round trips, the bundled data, malformed files."""

from __future__ import annotations

import gzip
import json
import re

import numpy as np
import pytest

from aces_fast.datasets import (BUNDLED, DEFAULT_DATASET, Dataset, Problem, bundled_path,
                                load_dataset, load_jsonl, load_npz, load_pass_matrix,
                                save_jsonl, save_npz)

from conftest import SPEC_EXAMPLE, SPEC_LABELS


def _toy_dataset() -> Dataset:
    rng = np.random.default_rng(7)
    B1 = (rng.random((6, 9)) < 0.4).astype(np.uint8)
    return Dataset("toy", [
        Problem("spec", SPEC_EXAMPLE, SPEC_LABELS,
                {"t_ok": np.array([1, 1, 0, 1, 0, 0, 1, 0, 0, 0], np.uint8),
                 "test_count": np.arange(10, dtype=np.int32),
                 "cand_uid": np.array([0, 1, 2, 3, 4, 5, 6, 6], np.int32)}),
        Problem("random/1", B1, (rng.random(6) < 0.5).astype(np.uint8)),
        Problem("no-tests", np.zeros((4, 0), np.uint8), np.array([0, 1, 0, 0])),
        Problem("unlabelled", B1[:3, :5], None),
    ])


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
        '{"task_id": "c", "m": 2, "passed": [[], []]}\n')
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
                np.testing.assert_array_equal(ds[k].extras["test_count"],
                                              z[f"test_count_{k:04d}"])
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


@pytest.mark.parametrize("arrays, match", [
    (dict(B_0000=GOOD_B), r"bad\.npz: missing key 'task_ids'"),
    (dict(task_ids=np.array(["a", "b"]), B_0000=GOOD_B),
     r"bad\.npz: problem 1 \('b'\): missing key 'B_0001'"),
    (dict(task_ids=np.array(["a"]), B_0000=GOOD_B * 2),
     r"problem 0 \('a'\): key 'B_0000': must contain only 0 and 1, found 2"),
    (dict(task_ids=np.array(["a"]), B_0000=np.array([1, 0, 1])),
     r"key 'B_0000': must be a 2-D"),
    (dict(task_ids=np.array(["a"]), B_0000=GOOD_B, y_0000=np.array([1, 0])),
     r"problem 0 \('a'\): key 'y_0000': must have length 3"),
    (dict(task_ids=np.array(["a"]), B_0000=GOOD_B, y_0000=np.array([1, 0, 3])),
     r"key 'y_0000': must contain only 0 and 1"),
    (dict(task_ids=np.array(["a"]), B_0000=GOOD_B, t_ok_0000=np.array([1, 0, 1])),
     r"key 't_ok_0000': must have length 2"),
    (dict(task_ids=np.array(["a"]), B_0000=GOOD_B, cand_uid_0000=np.array([0.5, 1, 2])),
     r"key 'cand_uid_0000': must hold integers"),
    (dict(task_ids=np.array(["a"]), B_0000=GOOD_B, B_0001=GOOD_B),
     r"key 'B_0001' refers to problem 1, but 'task_ids' lists only 1"),
    (dict(task_ids=np.array(["a", "a"]), B_0000=GOOD_B, B_0001=GOOD_B),
     r"duplicate task_id 'a'"),
    (dict(task_ids=np.array(["a"]), B_0000=np.zeros((0, 3), np.uint8)),
     r"key 'B_0000': has no candidates"),
])
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


@pytest.mark.parametrize("line, match", [
    ('{"task_id": "x", "B": [[1, 0], [0, 1]', r"line 2: invalid JSON"),
    ('[1, 2, 3]', r"expected a JSON object"),
    ('{"B": [[1, 0]]}', r"missing field 'task_id'"),
    ('{"task_id": "x", "B": [[1, 0], [0]]}',
     r"field 'B' is ragged: row 0 has 2 entries, row 1 has 1"),
    ('{"task_id": "x", "B": [[1, 0], [2, 1]]}',
     r"field 'B' row 1 entry 0 is 2; only 0 and 1"),
    ('{"task_id": "x", "B": [[1, "1"]]}', r"field 'B' row 0 entry 1 is '1'"),
    ('{"task_id": "x", "B": []}', r"field 'B' has no rows"),
    ('{"task_id": "x", "B": [[1, 0]], "m": 3}', r"field 'm' is 3 but the rows of 'B' have 2"),
    ('{"task_id": "x", "B": [[1, 0], [0, 1]], "labels": [1]}',
     r"field 'labels': must have length 2"),
    ('{"task_id": "x", "B": [[1, 0], [0, 1]], "labels": [1, 5]}',
     r"field 'labels' entry 1 is 5"),
    ('{"task_id": "x", "passed": [[0]]}', r"field 'passed' needs the field 'm'"),
    ('{"task_id": "x", "m": 2, "passed": [[0, 2]]}',
     r"field 'passed' candidate 0 lists 2, not a test index in \[0, 2\)"),
    ('{"task_id": "x", "m": 2, "passed": [[0]], "B": [[1, 0]]}', r"exactly one of"),
    ('{"task_id": "x"}', r"exactly one of"),
    ('{"task_id": "x", "m": -1, "passed": [[]]}', r"field 'm' must be a non-negative"),
    ('{"task_id": "x", "B": [[1, 0]], "t_ok": [1, 0, 1]}',
     r"field 't_ok': must have length 2"),
    ('{"task_id": "ok", "B": [[1]]}', r"field 'task_id' 'ok' repeats the problem on line 1"),
])
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
    np.save(tmp_path / "m.npy", SPEC_EXAMPLE.astype(bool))
    np.savez(tmp_path / "single.npz", anything=SPEC_EXAMPLE.astype(np.int64))
    np.savez(tmp_path / "keyed.npz", B=SPEC_EXAMPLE, labels=SPEC_LABELS, other=np.arange(3))
    (tmp_path / "m.csv").write_text(
        "\n".join(",".join(str(v) for v in row) for row in SPEC_EXAMPLE[:4]) + "\n\n"
        + "\n".join(", ".join(f"{v}.0" for v in row) for row in SPEC_EXAMPLE[4:]) + "\n")
    for name in ("m.npy", "single.npz", "keyed.npz", "m.csv"):
        prob = load_pass_matrix(tmp_path / name)
        assert prob.B.dtype == np.uint8
        np.testing.assert_array_equal(prob.B, SPEC_EXAMPLE, err_msg=name)
    np.testing.assert_array_equal(load_pass_matrix(tmp_path / "keyed.npz").labels, SPEC_LABELS)
    ds = _toy_dataset()
    save_jsonl(ds, tmp_path / "d.jsonl")
    save_npz(ds, tmp_path / "d.npz")
    for name in ("d.jsonl", "d.npz"):
        assert load_pass_matrix(tmp_path / name).task_id == "spec"
        np.testing.assert_array_equal(load_pass_matrix(tmp_path / name, task="random/1").B,
                                      ds["random/1"].B)


@pytest.mark.parametrize("content, match", [
    ("cand,t1,t2\n1,0,1\n", r"line 1, column 1: 'cand' is not a number \(a header row"),
    ("1,0,1\n0,1\n", r"line 2 has 2 columns but line 1 has 3"),
    ("1,0,1\n0,2,1\n", r"line 2, column 2: value '2'; only 0 and 1"),
    ("1,0,1\n0,x,1\n", r"line 2, column 2: 'x' is not a number$"),
    ("\n\n", r"no rows"),
])
def test_load_pass_matrix_bad_csv(tmp_path, content, match):
    path = tmp_path / "bad.csv"
    path.write_text(content)
    with pytest.raises(ValueError, match=r"bad\.csv: " + match):
        load_pass_matrix(path)


def test_load_pass_matrix_errors(tmp_path):
    np.save(tmp_path / "m.npy", np.array([[0, 3]]))
    with pytest.raises(ValueError, match=r"m\.npy: pass matrix: must contain only 0 and 1"):
        load_pass_matrix(tmp_path / "m.npy")
    np.save(tmp_path / "ok.npy", SPEC_EXAMPLE)
    with pytest.raises(ValueError, match="single matrix"):
        load_pass_matrix(tmp_path / "ok.npy", task="x")
    np.savez(tmp_path / "two.npz", a=SPEC_EXAMPLE, b=SPEC_EXAMPLE)
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
