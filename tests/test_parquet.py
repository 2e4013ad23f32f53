"""The Parquet layout of pass-matrix datasets (aces_fast.parquet): round trips on the
bundled data, the bit packing, and every kind of malformed row."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

import aces_fast
from aces_fast.datasets import BUNDLED, Dataset, Problem, load_dataset
from aces_fast.parquet import (
    LAYOUT_VERSION,
    InvalidRowError,
    check_schema,
    decode_batch,
    load_parquet,
    pack_rows,
    packed_batch,
    save_parquet,
    schema,
)
from helpers import EXAMPLE, EXAMPLE_LABELS


def _same(a, b) -> None:
    assert a.task_ids == b.task_ids
    for p, q in zip(a, b):
        assert q.B.dtype == np.uint8 and q.B.shape == p.B.shape and q.B.flags.c_contiguous
        np.testing.assert_array_equal(p.B, q.B)
        if p.labels is None:
            assert q.labels is None
        else:
            assert q.labels.dtype == np.uint8
            np.testing.assert_array_equal(p.labels, q.labels)
        if "test_count" in p.extras:
            assert q.extras["test_count"].dtype == np.int32
            np.testing.assert_array_equal(p.extras["test_count"], q.extras["test_count"])
        else:
            assert "test_count" not in q.extras


@pytest.mark.parametrize("name", list(BUNDLED))
def test_bundled_round_trip_is_exact(tmp_path, name):
    ds = load_dataset(name)
    path = tmp_path / f"{name}.parquet"
    dropped = save_parquet(ds, path, row_group_size=50)
    assert dropped == ["cand_uid", "t_ok"]  # extras outside the layout are reported
    back = load_dataset(str(path))
    _same(ds, back)
    assert back.name == name and pq.ParquetFile(path).num_row_groups == 4


def test_schema_and_metadata(tmp_path):
    path = tmp_path / "x.parquet"
    save_parquet(load_dataset("humaneval-gpt35"), path)
    sch = pq.ParquetFile(path).schema_arrow
    assert sch.names == ["task_id", "n", "m", "B", "labels", "test_count"]
    assert [str(sch.field(c).type) for c in sch.names] == [
        "string",
        "int32",
        "int32",
        "binary",
        "list<element: uint8>",
        "list<element: int32>",
    ]
    meta = json.loads(sch.metadata[b"aces_fast"])
    assert meta == {"format": "pass-matrix", "version": LAYOUT_VERSION}


def test_bits_are_packed_big_endian_row_by_row(tmp_path):
    # 2 x 9: each row takes two bytes, the second padded with seven zero bits
    B = np.array([[1, 0, 0, 0, 0, 0, 0, 1, 1], [0, 1, 0, 0, 0, 0, 0, 0, 0]], np.uint8)
    assert pack_rows(B) == bytes([0b10000001, 0b10000000, 0b01000000, 0])
    path = tmp_path / "bits.parquet"
    save_parquet([Problem("t", B)], path)
    row = pq.read_table(path).to_pylist()[0]
    assert row["B"] == bytes([0x81, 0x80, 0x40, 0x00]) and (row["n"], row["m"]) == (2, 9)
    assert "labels" not in row and "test_count" not in row  # no problem had them


def test_odd_shapes_and_optional_columns_round_trip(tmp_path):
    rng = np.random.default_rng(3)
    problems = [
        Problem("spec", EXAMPLE, EXAMPLE_LABELS, {"test_count": np.arange(10, dtype=np.int32)})
    ]
    for k, (n, m) in enumerate([(1, 1), (3, 0), (5, 8), (7, 16), (2, 17), (40, 63), (1, 200)]):
        labels = (rng.random(n) < 0.5).astype(np.uint8) if k % 2 else None
        extras = {"test_count": rng.integers(1, 9, m).astype(np.int32)} if k % 3 == 0 else {}
        problems.append(
            Problem(f"p{k}", (rng.random((n, m)) < 0.5).astype(np.uint8), labels, extras)
        )
    ds = Dataset("odd", problems)
    for rg in (1, 3, 100):
        path = tmp_path / f"odd{rg}.parquet"
        save_parquet(ds, path, row_group_size=rg)
        _same(ds, load_parquet(path))


def test_directory_of_files_reads_in_name_order(tmp_path):
    ds = load_dataset("humaneval-gpt35")
    d = tmp_path / "parts.parquet"
    d.mkdir()
    save_parquet(ds.problems[100:], d / "b.parquet")
    save_parquet(ds.problems[:100], d / "a.parquet")
    (d / "_SUCCESS").write_text("")
    back = load_dataset(str(d))
    _same(ds, back)


def test_empty_dataset_round_trip(tmp_path):
    path = tmp_path / "empty.parquet"
    save_parquet([], path)
    assert len(load_parquet(path)) == 0


def test_duplicate_task_id_is_rejected(tmp_path):
    path = tmp_path / "dup.parquet"
    save_parquet([Problem("a", EXAMPLE), Problem("a", EXAMPLE)], path)
    with pytest.raises(ValueError, match="duplicate task_id 'a'"):
        load_parquet(path)


def test_row_group_size_is_checked(tmp_path):
    with pytest.raises(ValueError, match="row_group_size"):
        save_parquet([Problem("a", EXAMPLE)], tmp_path / "x.parquet", row_group_size=0)


# -- malformed rows ------------------------------------------------------------


def _table(rows, with_labels=True, with_tc=True):
    """A layout table from dicts (missing keys -> null)."""
    sch = schema(labels=with_labels, test_count=with_tc)
    sch = pa.schema([f.with_nullable(True) for f in sch], metadata=sch.metadata)
    cols = {name: [r.get(name) for r in rows] for name in sch.names}
    return pa.table(cols, schema=sch)


def _good(tid="ok", n=3, m=10):
    B = np.random.default_rng(len(tid)).integers(0, 2, (n, m)).astype(np.uint8)
    return {
        "task_id": tid,
        "n": n,
        "m": m,
        "B": pack_rows(B),
        "labels": [1] + [0] * (n - 1),
        "test_count": [1] * m,
    }


BAD_ROWS = [
    (
        dict(B=b"\x00" * 5),
        ("B has 5 bytes, but n x m = 3 x 10 packed by row needs n * ceil(m / 8) = 6"),
    ),
    (dict(n=-2), "n is -2; need n >= 1 candidates"),
    (dict(n=0, B=b""), "n is 0; need n >= 1 candidates"),
    (dict(m=-1, B=b""), "m is -1; need m >= 0 tests"),
    (dict(labels=[1, 2, 0]), "labels entry 1 is 2; only 0 and 1 are allowed"),
    (dict(labels=[1, 0]), "labels has 2 entries; need n = 3"),
    (dict(labels=[1, None, 0]), "labels entry 1 is null; only 0 and 1 are allowed"),
    (dict(test_count=[1, 2]), "test_count has 2 entries; need m = 10"),
    (dict(task_id=None), "missing task_id"),
    (dict(B=None), "missing B"),
    (dict(n=None), "missing n"),
    (dict(m=None), "missing m"),
    (dict(B=bytes([0, 0b00100000, 0, 0, 0, 0])), "B has padding bits set after column m = 10"),
]


@pytest.mark.parametrize(("change", "reason"), BAD_ROWS, ids=[r for _, r in BAD_ROWS])
def test_bad_row_is_reported_with_row_and_task_id(change, reason):
    bad = {**_good("bad"), **change}
    table = _table([_good("a"), _good("b"), bad, _good("c")])
    dec = decode_batch(table, 40)
    assert dec.task_ids == ["a", "b", "c"] and dec.index.tolist() == [0, 1, 3]
    assert len(dec.errors) == 1
    err = dec.errors[0]
    assert err.row == 42 and err.task_id == bad["task_id"]
    assert err.reason.startswith(reason), err.reason
    tid = "missing" if bad["task_id"] is None else "'bad'"
    assert err.message().startswith(f"row 42 (task_id {tid}): ")
    # the good rows decode to their matrices all the same
    for k, tid in enumerate(["a", "b", "c"]):
        want = np.unpackbits(
            np.frombuffer(_good(tid)["B"], np.uint8).reshape(3, 2), axis=1, count=10
        )
        np.testing.assert_array_equal(dec.B[k], want)


def test_row_numbers_from_a_list_or_a_row_column():
    table = _table([_good("a"), {**_good("b"), "n": -1}])
    assert decode_batch(table, [7, 9]).errors[0].row == 9
    with_rows = table.append_column("row", pa.array([100, 200], pa.int64()))
    assert decode_batch(with_rows, None).errors[0].row == 200
    assert decode_batch(table, None).errors[0].row is None


def test_every_bad_row_of_a_batch_is_listed():
    rows = [
        _good("a"),
        {**_good("b"), "n": -1},
        {**_good("c"), "labels": [3, 3, 3]},
        _good("d"),
        {**_good("e"), "B": b""},
    ]
    dec = decode_batch(_table(rows), 0)
    assert [(e.row, e.task_id) for e in dec.errors] == [(1, "b"), (2, "c"), (4, "e")]
    assert dec.errors[1].reason == "labels entry 0 is 3; only 0 and 1 are allowed"
    assert dec.task_ids == ["a", "d"]


def test_mixed_shapes_interleaved_decode_to_the_right_matrices():
    rng = np.random.default_rng(11)
    shapes = [(3, 10), (5, 4), (3, 10), (5, 4), (2, 0), (3, 10)]
    mats = [(rng.random(s) < 0.5).astype(np.uint8) for s in shapes]
    rows = [
        {"task_id": f"t{i}", "n": B.shape[0], "m": B.shape[1], "B": pack_rows(B)}
        for i, B in enumerate(mats)
    ]
    dec = decode_batch(_table(rows, with_labels=False, with_tc=False), 0)
    assert dec.labels is None and not dec.errors
    for got, want in zip(dec.B, mats):
        assert got.shape == want.shape and got.flags.c_contiguous
        np.testing.assert_array_equal(got, want)


def test_load_parquet_stops_at_a_bad_row(tmp_path):
    path = tmp_path / "bad.parquet"
    pq.write_table(_table([_good("a"), {**_good("b"), "labels": [0, 1]}]), path)
    with pytest.raises(InvalidRowError, match=r"bad.parquet: row 1 \(task_id 'b'\): labels has 2"):
        load_parquet(path)


def test_whole_file_problems(tmp_path):
    ok = _table([_good("a")])
    with pytest.raises(ValueError, match=r"missing column\(s\) B"):
        check_schema(ok.drop_columns(["B"]).schema, "f")
    with pytest.raises(ValueError, match="column 'n' has type string; expected an integer"):
        check_schema(ok.set_column(1, "n", pa.array(["3"])).schema, "f")
    newer = ok.schema.with_metadata(
        {
            b"aces_fast": json.dumps(
                {"format": "pass-matrix", "version": LAYOUT_VERSION + 1}
            ).encode()
        }
    )
    with pytest.raises(ValueError, match="layout version 2; this aces_fast reads versions up"):
        check_schema(newer, "f")
    results = ok.schema.with_metadata({b"aces_fast": b'{"format": "rerank-results"}'})
    with pytest.raises(ValueError, match="not a pass-matrix dataset"):
        check_schema(results, "f")
    # no metadata at all (another tool wrote it): read by its columns
    assert check_schema(ok.schema.remove_metadata(), "f") == (True, True)
    path = tmp_path / "junk.parquet"
    path.write_bytes(b"not parquet at all")
    with pytest.raises(ValueError, match="cannot read as Parquet"):
        load_parquet(path)
    with pytest.raises(ValueError, match="no such file"):
        load_parquet(tmp_path / "missing.parquet")


def test_wider_integer_and_large_types_are_read(tmp_path):
    B = EXAMPLE
    table = pa.table(
        {
            "task_id": pa.array(["x"], pa.large_string()),
            "n": pa.array([8], pa.int64()),
            "m": pa.array([10], pa.uint16()),
            "B": pa.array([pack_rows(B)], pa.large_binary()),
            "labels": pa.array([EXAMPLE_LABELS.astype(bool).tolist()], pa.list_(pa.bool_())),
        }
    )
    path = tmp_path / "wide.parquet"
    pq.write_table(table, path)
    p = load_parquet(path)[0]
    np.testing.assert_array_equal(p.B, B)
    np.testing.assert_array_equal(p.labels, EXAMPLE_LABELS)


# -- optional dependency ---------------------------------------------------------


def _child(code: str) -> subprocess.CompletedProcess:
    root = os.path.dirname(os.path.dirname(os.path.abspath(aces_fast.__file__)))
    env = {**os.environ, "PYTHONPATH": root + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300
    )


def test_import_aces_fast_imports_neither_pyarrow_nor_ray():
    proc = _child(
        "import sys, aces_fast, aces_fast.cli, aces_fast.datasets\n"
        "aces_fast.cli.build_parser()\n"
        "bad = [m for m in ('pyarrow', 'ray') if m in sys.modules]\n"
        "assert not bad, bad\n"
    )
    assert proc.returncode == 0, proc.stderr


def test_missing_pyarrow_is_a_clear_error():
    proc = _child(
        "import sys; sys.modules['pyarrow'] = None\n"
        "from aces_fast.datasets import load_dataset\n"
        "try:\n    import aces_fast.parquet\n"
        "except ImportError as e:\n    print(e)\n"
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == (
        "reading and writing Parquet needs pyarrow, which is not "
        "installed: pip install 'aces_fast[arrow]'"
    )


@pytest.mark.parametrize(
    ("value_type", "bad", "shown"),
    [
        (pa.int64(), -1, "-1"),
        (pa.int8(), -128, "-128"),
        (pa.uint64(), 2**64 - 1, str(2**64 - 1)),
        (pa.uint16(), 257, "257"),  # 1 modulo 256: not taken for a 1
    ],
)
def test_labels_of_any_integer_type_are_checked_as_written(value_type, bad, shown):
    table = _table([_good("a"), _good("b"), _good("c")])
    labels = pa.array([[1, 0, 0], [0, bad, 1], [1, 0, 0]], pa.list_(value_type))
    table = table.set_column(table.schema.get_field_index("labels"), "labels", labels)
    dec = decode_batch(table, 0)
    assert [e.task_id for e in dec.errors] == ["b"]
    assert dec.errors[0].reason == f"labels entry 1 is {shown}; only 0 and 1 are allowed"
    assert [y.tolist() for y in dec.labels] == [[1, 0, 0], [1, 0, 0]]
    assert packed_batch(table) is None  # a bad row: the general path reports it
    good = table.filter(pa.array([True, False, True]))
    np.testing.assert_array_equal(packed_batch(good).labels, [1, 0, 0, 1, 0, 0])
