"""Streaming rerank of Parquet datasets (aces_fast.stream, local engine): results equal
rerank_batch bit for bit, bad rows, resume, interruptions, the CLI commands."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

from benchmarks.harness.stream_scale import write_synthetic
from hypothesis import given, settings
from hypothesis import strategies as st

import aces_fast as af
from aces_fast._registry import method_params
from aces_fast.cli import main
from aces_fast.datasets import Problem, load_dataset
from aces_fast.parquet import InvalidRowError, pack_rows, save_parquet, schema
from aces_fast.stream import PASS_KS, default_errors_path, pass_at_ks, rerank_dataset
from helpers import stop_after

#: few ACES-O steps: the tests check plumbing, not the optimizer
FAST_O = dict(steps=5)


@pytest.fixture(scope="module")
def bundled(tmp_path_factory):
    """The bundled CodeGen data as Parquet (row groups of 40) and as loaded problems."""
    ds = load_dataset("humaneval-codegen16b")
    path = tmp_path_factory.mktemp("bundled") / "codegen.parquet"
    save_parquet(ds, path, row_group_size=40)
    return path, ds


def _bits(x) -> np.ndarray:
    return np.ascontiguousarray(np.asarray(x, dtype=np.float64)).view(np.int64)


def assert_results_equal(table, problems, results, with_labels=True):
    """Every output row equals the in-memory result bit for bit."""
    d = table.to_pydict()
    assert d["task_id"] == [p.task_id for p in problems]
    for i, (p, r) in enumerate(zip(problems, results)):
        assert d["order"][i] == np.asarray(r.order).tolist()
        np.testing.assert_array_equal(_bits(d["scores"][i]), _bits(r.scores))
        if r.weights is None:
            assert d["weights"][i] is None
        else:
            np.testing.assert_array_equal(_bits(d["weights"][i]), _bits(r.weights))
        assert d["fallback"][i] == bool(r.fallback)
        for k in PASS_KS:
            if with_labels and p.labels is not None:
                assert d[f"pass@{k}"][i] == af.pass_at_k(r.scores, p.labels, k)
            elif with_labels:
                assert d[f"pass@{k}"][i] is None
    if not with_labels:
        assert not any(c.startswith("pass@") for c in table.column_names)


@pytest.mark.parametrize(
    ("method", "params"),
    [
        ("aces-c", {}),
        ("majority", {}),
        ("codet", {}),
        ("b4", {}),
        ("aces-o", FAST_O),
        ("aces-c-filter", {}),
    ],
)
def test_bundled_equals_rerank_batch_bit_for_bit(tmp_path, bundled, method, params):
    path, ds = bundled
    out = tmp_path / "out.parquet"
    summary = rerank_dataset(path, out, method, batch_size=64, **params)
    assert (summary.rows, summary.written, summary.invalid, summary.resumed) == (164, 164, 0, 0)
    assert summary.errors_path is None and not default_errors_path(out).exists()
    ref = af.rerank_batch([p.B for p in ds], method, **params)
    table = pq.read_table(out)
    assert_results_equal(table, ds.problems, ref)
    names = sorted(os.listdir(out))
    assert names[0] == "_aces_fast" and len(names) == 4
    assert [n[:12] for n in names[1:]] == [f"part-{i:06d}-" for i in range(3)]
    assert len({n[12:] for n in names[1:]}) == 1  # one run, one name suffix
    meta = json.loads(table.schema.metadata[b"aces_fast"])
    assert meta["format"] == "rerank-results" and meta["method"] == method
    assert meta["params"] == json.loads(json.dumps(method_params(method, params)))
    assert meta["backend"] == ref[0].backend


def test_batch_size_does_not_change_results(tmp_path, bundled):
    path, _ = bundled
    tables = []
    for bs in (1, 7, 1000, "auto"):
        rerank_dataset(path, tmp_path / f"o{bs}", "aces-c", batch_size=bs, n_threads=1)
        tables.append(pq.read_table(tmp_path / f"o{bs}").replace_schema_metadata(None))
    assert all(tables[0].equals(t) for t in tables[1:])


def _opened(path):
    from aces_fast._input import open_inputs

    return open_inputs(path)[0]


def test_auto_batch_size_holds_a_few_mebibytes_of_input(tmp_path):
    """Small problems get the row cap, large ones fewer rows, the largest row
    group of a mixed input sets the size, many threads shrink it."""
    from aces_fast._engine import AUTO_BATCH_BYTES, AUTO_BATCH_ROWS, auto_batch_size

    lo, hi = AUTO_BATCH_ROWS
    d = tmp_path / "mixed"
    d.mkdir()
    write_synthetic(d / "a.parquet", 300, 100, 50, row_group_size=100)
    write_synthetic(d / "b.parquet", 60, 200, 500, row_group_size=20, first_id=300, seed=1)
    small, large = _opened(d / "a.parquet"), _opened(d / "b.parquet")
    assert auto_batch_size(small) == hi  # 100x50: about 740 bytes a row
    rows = auto_batch_size(large)
    packed = 200 * 500 // 8  # a row's bytes, the matrix alone
    assert lo < rows < hi and rows * packed <= AUTO_BATCH_BYTES < (rows + 40) * packed
    assert auto_batch_size(_opened(d)) == rows  # the files of a directory: the larger rows
    assert auto_batch_size(large, in_flight=6) == rows  # two local threads
    assert rows // 4 < auto_batch_size(large, in_flight=34) < rows // 3  # sixteen
    write_synthetic(tmp_path / "huge.parquet", 2, 2000, 4000, row_group_size=1)
    assert auto_batch_size(_opened(tmp_path / "huge.parquet")) == lo  # 1 MB rows: the floor
    write_synthetic(tmp_path / "empty.parquet", 0, 100, 50)
    assert auto_batch_size(_opened(tmp_path / "empty.parquet")) == hi


def test_auto_batch_size_in_a_run(tmp_path, capsys, monkeypatch):
    from aces_fast import _engine

    # batches of a few rows, so that a small input makes several
    monkeypatch.setattr(_engine, "AUTO_BATCH_BYTES", 320 << 10)
    path = tmp_path / "in.parquet"
    write_synthetic(path, 90, 200, 500, row_group_size=30)
    want = _engine.auto_batch_size(_opened(path))
    assert 16 < want < 30
    ref = rerank_dataset(path, tmp_path / "fixed", "aces-c", batch_size=7)
    assert ref.batch_size == 7
    for i, spelling in enumerate(["auto", "AUTO", " Auto "]):
        s = rerank_dataset(path, tmp_path / f"o{i}", "aces-c", batch_size=spelling, n_threads=2)
        assert s.batch_size == want and s.written == 90
        assert (
            pq.read_table(tmp_path / f"o{i}")
            .replace_schema_metadata(None)
            .equals(pq.read_table(tmp_path / "fixed").replace_schema_metadata(None))
        )
    assert rerank_dataset(path, tmp_path / "d", "majority").batch_size == want  # the default
    # eight local threads hold 18 batches: the run's budget shrinks each of them
    monkeypatch.setattr(_engine, "AUTO_RUN_BYTES", 18 * (260 << 10))
    eight = _engine.auto_batch_size(_opened(path), in_flight=18)
    assert 16 < eight < want  # above the floor, below two threads' size
    s = rerank_dataset(path, tmp_path / "t8", "aces-c", n_threads=8)
    assert s.batch_size == eight and s.written == 90
    out = tmp_path / "cli"
    assert (
        main(["rerank-dataset", str(path), "-o", str(out), "--batch-size", "auto", "--json"]) == 0
    )
    assert json.loads(capsys.readouterr().out)["batch_size"] == want
    assert main(["rerank-dataset", str(path), "-o", str(tmp_path / "c2"), "--batch-size", "5"]) == 0
    assert "batches of 5)" in capsys.readouterr().out
    for bad in ["0", "-3", "big", "2.5"]:
        with pytest.raises(SystemExit) as exc:
            main(["rerank-dataset", str(path), "-o", str(tmp_path / "x"), "--batch-size", bad])
        assert exc.value.code == 2
        assert f"expected a positive integer or 'auto', got {bad!r}" in capsys.readouterr().err


@pytest.mark.parametrize("labels", [True, False])
def test_part_files_checksum_pages_and_keep_task_id_statistics(tmp_path, labels):
    """The part layout (stream._encode_part): page checksums on every column,
    min/max statistics on the scalar columns (readers prune by task id) and on no
    list column, snappy compression, float lists byte-stream split, the order
    delta-encoded."""
    path = tmp_path / "in.parquet"
    write_synthetic(path, 40, 6, 9, row_group_size=40, labels=labels)
    rerank_dataset(path, tmp_path / "o", "aces-c", n_threads=1)
    (part,) = sorted((tmp_path / "o").glob("part-*.parquet"))
    meta = pq.ParquetFile(part).metadata
    group = meta.row_group(0)
    cols = {group.column(i).path_in_schema: group.column(i) for i in range(group.num_columns)}
    scalar = {"task_id", "fallback"} | ({f"pass@{k}" for k in PASS_KS} if labels else set())
    lists = {f"{c}.list.element" for c in ("order", "scores", "weights")}
    assert set(cols) == scalar | lists
    for name, col in cols.items():
        assert col.is_stats_set == (name in scalar), name
        assert col.compression == "SNAPPY", name
        floats = name in ("scores.list.element", "weights.list.element")
        assert ("BYTE_STREAM_SPLIT" in col.encodings) == floats, (name, col.encodings)
        delta = name == "order.list.element"
        assert ("DELTA_BINARY_PACKED" in col.encodings) == delta, (name, col.encodings)
    st = cols["task_id"].statistics
    assert (st.min, st.max) == ("task/0", "task/9")  # string order
    # every page carries a checksum: a flipped byte in the scores is caught
    data = bytearray(part.read_bytes())
    start = cols["scores.list.element"].data_page_offset
    data[start + cols["scores.list.element"].total_compressed_size // 2] ^= 0xFF
    (tmp_path / "bad.parquet").write_bytes(bytes(data))
    with pytest.raises(OSError, match="(?i)crc|checksum"):
        pq.ParquetFile(tmp_path / "bad.parquet", page_checksum_verification=True).read()


@pytest.mark.parametrize("method", ["aces-c", "aces-o", "codet"])
def test_threads_do_not_change_a_byte_of_the_parts(tmp_path, method):
    """Several batches ranked at once (the local engine's threads), in every
    path (packed: ACES-C; unpacked: ACES-O, CodeT), give the same part files,
    byte for byte, committed in input order; so do other batch sizes' rows."""
    path = tmp_path / "in.parquet"
    write_synthetic(path, 700, 12, 20, row_group_size=128)
    parts = {}
    for threads, bs in ((1, 50), (2, 50), (3, 50), (3, 17)):
        out = tmp_path / f"o{threads}-{bs}"
        params = {"steps": 5} if method == "aces-o" else {}
        s = rerank_dataset(path, out, method, batch_size=bs, n_threads=threads, **params)
        assert s.written == 700
        files = sorted(out.glob("part-*.parquet"))
        assert len(files) == -(-700 // bs)
        parts[threads, bs] = [f.read_bytes() for f in files]
        ids = pq.read_table(out).column("task_id").to_pylist()
        assert ids == [f"task/{i}" for i in range(700)]
    assert parts[1, 50] == parts[2, 50] == parts[3, 50]
    one = pq.read_table(tmp_path / "o1-50").replace_schema_metadata(None)
    other = pq.read_table(tmp_path / "o3-17").replace_schema_metadata(None)
    assert one.equals(other)


def test_a_failing_batch_commits_the_ones_before_it_only(tmp_path, monkeypatch):
    """With several batches in flight, a batch that fails (here: the ranking
    raises) stops the run; the batches before it are committed, none after."""
    from aces_fast import stream

    path = tmp_path / "in.parquet"
    write_synthetic(path, 400, 8, 10, row_group_size=50)
    real = stream.rerank_table
    calls = []

    def flaky(table, *a, **k):
        first = table.column("task_id")[0].as_py()
        calls.append(first)
        if first == "task/200":
            raise RuntimeError("boom")
        return real(table, *a, **k)

    monkeypatch.setattr(stream, "rerank_table", flaky)
    with pytest.raises(RuntimeError, match="boom"):
        rerank_dataset(path, tmp_path / "o", "aces-c", batch_size=50, n_threads=3)
    ids = pq.read_table(tmp_path / "o").column("task_id").to_pylist()
    assert ids == [f"task/{i}" for i in range(200)]


def test_backend_and_threads_pass_through(tmp_path, bundled):
    path, ds = bundled
    rerank_dataset(path, tmp_path / "np", "aces-c", backend="numpy", n_threads=2)
    table = pq.read_table(tmp_path / "np")
    assert json.loads(table.schema.metadata[b"aces_fast"])["backend"] == "numpy"
    ref = af.rerank_batch([p.B for p in ds], "aces-c", backend="numpy")
    assert_results_equal(table, ds.problems, ref)


def test_labels_absent_or_partial(tmp_path):
    rng = np.random.default_rng(5)
    mats = [(rng.random((6, 9)) < 0.5).astype(np.uint8) for _ in range(5)]
    plain = [Problem(f"p{i}", B) for i, B in enumerate(mats)]
    save_parquet(plain, tmp_path / "plain.parquet")
    rerank_dataset(tmp_path / "plain.parquet", tmp_path / "o1", "aces-c")
    ref = af.rerank_batch(mats, "aces-c")
    assert_results_equal(pq.read_table(tmp_path / "o1"), plain, ref, with_labels=False)
    mixed = [
        Problem(f"p{i}", B, (rng.random(6) < 0.5).astype(np.uint8) if i % 2 else None)
        for i, B in enumerate(mats)
    ]
    save_parquet(mixed, tmp_path / "mixed.parquet")
    rerank_dataset(tmp_path / "mixed.parquet", tmp_path / "o2", "aces-c")
    assert_results_equal(pq.read_table(tmp_path / "o2"), mixed, ref)


def test_directory_input_and_empty_input(tmp_path, bundled):
    _, ds = bundled
    d = tmp_path / "in"
    d.mkdir()
    save_parquet(ds.problems[:50], d / "000.parquet")
    save_parquet(ds.problems[50:60], d / "001.parquet")
    rerank_dataset(d, tmp_path / "o", "majority", batch_size=32)
    assert_results_equal(
        pq.read_table(tmp_path / "o"),
        ds.problems[:60],
        af.rerank_batch([p.B for p in ds.problems[:60]], "majority"),
    )
    save_parquet([], tmp_path / "empty.parquet")
    s = rerank_dataset(tmp_path / "empty.parquet", tmp_path / "oe")
    assert s.written == 0 and pq.read_table(tmp_path / "oe").num_rows == 0


def test_argument_errors(tmp_path, bundled):
    path, _ = bundled
    with pytest.raises(ValueError, match="unknown method 'nope'"):
        rerank_dataset(path, tmp_path / "o", "nope")
    with pytest.raises(TypeError, match="unexpected parameter"):
        rerank_dataset(path, tmp_path / "o", "aces-c", lr=0.1)
    with pytest.raises(ValueError, match="batch_size"):
        rerank_dataset(path, tmp_path / "o", batch_size=0)
    with pytest.raises(ValueError, match="batch_size must be an integer >= 1 or 'auto', got 'big'"):
        rerank_dataset(path, tmp_path / "o", batch_size="big")
    with pytest.raises(TypeError, match="batch_size"):
        rerank_dataset(path, tmp_path / "o", batch_size=2.5)
    with pytest.raises(ValueError, match="engine must be"):
        rerank_dataset(path, tmp_path / "o", engine="spark")
    (tmp_path / "file").write_text("x")
    with pytest.raises(ValueError, match="exists and is not a directory"):
        rerank_dataset(path, tmp_path / "file")
    with pytest.raises(ValueError, match="no such file"):
        rerank_dataset(tmp_path / "missing.parquet", tmp_path / "o")


# -- the batched Pass@k ----------------------------------------------------------


@st.composite
def _rankings(draw):
    """Score vectors with many ties (few levels) and labels, of a few sizes."""
    T = draw(st.integers(1, 12))
    out = []
    for _ in range(T):
        n = draw(st.sampled_from([1, 2, 3, 5, 6, 9]))
        levels = draw(st.integers(1, 4))
        s = draw(st.lists(st.integers(0, levels - 1), min_size=n, max_size=n))
        y = draw(st.lists(st.integers(0, 1), min_size=n, max_size=n))
        out.append(
            (
                np.array(s, np.float64) / 3.0,
                np.array(y, np.uint8) if draw(st.booleans()) or T == 1 else None,
            )
        )
    return out


@settings(max_examples=300, deadline=None)
@given(_rankings(), st.lists(st.integers(1, 11), min_size=1, max_size=4, unique=True))
def test_pass_at_ks_equals_pass_at_k_bit_for_bit(rankings, ks):
    scores = [s for s, _ in rankings]
    labels = [y for _, y in rankings]
    got = pass_at_ks(scores, labels, ks)
    for k in ks:
        for t, (s, y) in enumerate(rankings):
            if y is None:
                assert np.isnan(got[k][t])
            else:
                assert _bits([got[k][t]])[0] == _bits([af.pass_at_k(s, y, k)])[0], (s, y, k)


def test_pass_at_ks_on_the_bundled_rankings(bundled):
    _, ds = bundled
    for method in ("aces-c", "majority", "codet"):
        res = af.rerank_batch([p.B for p in ds], method)
        got = pass_at_ks([r.scores for r in res], [p.labels for p in ds], (1, 2, 5, 10))
        for k in (1, 2, 5, 10):
            want = [af.pass_at_k(r.scores, p.labels, k) for r, p in zip(res, ds)]
            np.testing.assert_array_equal(_bits(got[k]), _bits(want))


@pytest.mark.parametrize("threads", [1, 3])
def test_arrow_memory_stays_at_one_batch(tmp_path, monkeypatch, threads):
    """Arrow memory held while streaming a 6 MB file stays near one row group per
    thread (a reader with pre-buffering holds every column chunk it reads: all
    6 MB here)."""
    from aces_fast._commit import ResultsDir

    path = tmp_path / "in.parquet"
    write_synthetic(path, 40000, 30, 40, row_group_size=1000)
    assert path.stat().st_size > 5e6
    held = []
    write = ResultsDir.commit

    def spy(self, *args):
        held.append(pa.total_allocated_bytes())
        write(self, *args)

    monkeypatch.setattr(ResultsDir, "commit", spy)
    base = pa.total_allocated_bytes()
    rerank_dataset(path, tmp_path / "o", "majority", batch_size=500, n_threads=threads)
    assert len(held) == 80
    assert max(held) - base < 2 * threads * 2**20, (base, held)


@pytest.mark.slow
def test_a_million_problems_in_a_gibibyte(tmp_path):
    """1,000,000 problems of 100 x 50 (625 MB of Parquet): peak RSS of the whole
    streaming process <= 1 GiB (408-482 MiB measured at two threads)."""
    import shutil

    from benchmarks.harness.stream_scale import run_stream_child

    path = tmp_path / "million.parquet"
    write_synthetic(path, 1_000_000, 100, 50, seed=3)
    try:
        res = run_stream_child(
            path_in=path, path_out=tmp_path / "out.parquet", method="aces-c", progress=False
        )
        assert res["written"] == 1_000_000
        assert res["peak_rss"] <= 2**30, res
        print(
            f"\n1e6 x (100 x 50): {res['written'] / res['seconds']:,.0f} tasks/s, peak RSS "
            f"{res['peak_rss'] / 2**20:.0f} MiB, stages {res['timings']}"
        )
    finally:
        shutil.rmtree(tmp_path)


def test_io_floor_child_ranks_each_batch_size_once(tmp_path):
    """The bench's ``ioK`` engine (the pipeline without its ranking) writes every
    row, each batch carrying the ranking of the first batch of its size to be
    ranked (with two threads, either of the first two)."""
    import pyarrow.parquet as pq
    from benchmarks.harness.stream_scale import run_stream_child

    path = tmp_path / "in.parquet"
    write_synthetic(path, 250, 12, 9, seed=5)
    res = run_stream_child(
        path_in=path,
        path_out=tmp_path / "out",
        method="aces-c",
        batch_size=100,
        n_threads=2,
        no_kernel=True,
        progress=False,
    )
    assert res["written"] == 250
    out = pq.read_table(tmp_path / "out").to_pydict()
    assert out["task_id"] == [f"task/{i}" for i in range(250)]
    reused = out["scores"][:100]
    assert out["scores"][100:200] == reused  # both full batches carry one ranking
    real = rerank_dataset(path, tmp_path / "real", "aces-c", batch_size=100, progress=False)
    assert real.written == 250
    ref = pq.read_table(tmp_path / "real").to_pydict()
    assert ref["scores"][:100] != ref["scores"][100:200]
    # that of the batch whose thread ranked first
    assert reused in (ref["scores"][:100], ref["scores"][100:200])
    assert ref["scores"][200:] == out["scores"][200:]  # the last, shorter batch: its own


# -- bad rows -------------------------------------------------------------------


def _with_bad_rows(tmp_path):
    """12 good problems with bad rows at positions 3 (labels), 7 (B length), 10 (n)."""
    rng = np.random.default_rng(9)
    sch = schema(test_count=False)
    sch = pa.schema([f.with_nullable(True) for f in sch], metadata=sch.metadata)
    rows, good = [], []
    for i in range(15):
        B = (rng.random((5, 11)) < 0.5).astype(np.uint8)
        y = (rng.random(5) < 0.5).astype(np.uint8)
        row = {"task_id": f"t{i}", "n": 5, "m": 11, "B": pack_rows(B), "labels": y.tolist()}
        if i == 3:
            row["labels"] = [0, 1, 7, 0, 0]
        elif i == 7:
            row["B"] = row["B"][:-1]
        elif i == 10:
            row["n"] = -5
        else:
            good.append(Problem(f"t{i}", B, y))
        rows.append(row)
    path = tmp_path / "bad.parquet"
    pq.write_table(
        pa.table({c: [r.get(c) for r in rows] for c in sch.names}, schema=sch),
        path,
        row_group_size=4,
    )
    return path, good


def test_bad_row_stops_the_run_by_default(tmp_path):
    path, _good = _with_bad_rows(tmp_path)
    out = tmp_path / "o.parquet"
    with pytest.raises(
        InvalidRowError,
        match=r"bad.parquet: row 3 \(task_id 't3'\): labels "
        r"entry 2 is 7; only 0 and 1",
    ):
        rerank_dataset(path, out, batch_size=2)
    # the batch before it was written and is readable
    assert pq.read_table(out).column("task_id").to_pylist() == ["t0", "t1"]
    assert not default_errors_path(out).exists()


def test_skip_invalid_writes_the_errors_file(tmp_path):
    path, good = _with_bad_rows(tmp_path)
    out = tmp_path / "o.parquet"
    s = rerank_dataset(path, out, "aces-c", batch_size=4, skip_invalid=True)
    assert (s.written, s.invalid, s.errors_path) == (12, 3, tmp_path / "o.errors.jsonl")
    lines = [json.loads(x) for x in s.errors_path.read_text().splitlines()]
    assert [(e["task_id"], e["row"]) for e in lines] == [("t3", 3), ("t7", 7), ("t10", 10)]
    assert lines[0]["reason"] == "labels entry 2 is 7; only 0 and 1 are allowed"
    assert lines[1]["reason"].startswith("B has 9 bytes, but n x m = 5 x 11")
    assert lines[2]["reason"] == "n is -5; need n >= 1 candidates"
    assert_results_equal(pq.read_table(out), good, af.rerank_batch([p.B for p in good], "aces-c"))
    # a resumed run does not report them again, a fresh one starts a new file
    s2 = rerank_dataset(path, out, "aces-c", skip_invalid=True, resume=True)
    assert (s2.written, s2.invalid, s2.resumed) == (0, 0, 15)
    assert len(s.errors_path.read_text().splitlines()) == 3
    custom = tmp_path / "errs.jsonl"
    s3 = rerank_dataset(path, tmp_path / "o2", skip_invalid=True, errors_path=custom)
    assert s3.errors_path == custom and len(custom.read_text().splitlines()) == 3


# -- resume ---------------------------------------------------------------------


def test_resume_finishes_a_partial_output(tmp_path, bundled, monkeypatch):
    path, _ds = bundled
    full = tmp_path / "full"
    rerank_dataset(path, full, "aces-o", batch_size=30, **FAST_O)
    part = tmp_path / "part"
    undo = stop_after(monkeypatch, 2)
    with pytest.raises(KeyboardInterrupt):
        rerank_dataset(path, part, "aces-o", batch_size=30, **FAST_O)
    undo()
    assert pq.read_table(part).num_rows == 60
    with pytest.raises(ValueError, match="already holds results .* pass --resume"):
        rerank_dataset(path, part, "aces-o", **FAST_O)
    with pytest.raises(ValueError, match="written with params .* --resume needs the same"):
        rerank_dataset(path, part, "aces-o", resume=True, steps=6)
    with pytest.raises(ValueError, match="written with method 'aces-o'"):
        rerank_dataset(path, part, "aces-c", resume=True)
    s = rerank_dataset(path, part, "aces-o", batch_size=50, resume=True, **FAST_O)
    assert (s.resumed, s.written) == (60, 104)
    assert not list((part / "_aces_fast" / "staging").iterdir())
    a = pq.read_table(full).replace_schema_metadata(None)
    b = pq.read_table(part).replace_schema_metadata(None)
    assert a.equals(b)  # the same rows in the same order: parts are named in commit order


# -- interruptions --------------------------------------------------------------

_RUN = """
import sys
from aces_fast.cli import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.fixture(scope="module")
def slowish(tmp_path_factory):
    """3000 problems that take a few seconds with ACES-O (so a run can be interrupted)."""
    path = tmp_path_factory.mktemp("slowish") / "in.parquet"
    write_synthetic(path, 3000, 30, 40, seed=1, row_group_size=500)
    return path


def _start(args):
    return subprocess.Popen(
        [sys.executable, "-c", _RUN, *map(str, args)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _wait_for_parts(out, proc, count=2, timeout=120):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if out.is_dir() and len(list(out.glob("part-*.parquet"))) >= count:
            return
        if proc.poll() is not None:
            pytest.fail(f"run ended before it could be interrupted: {proc.communicate()}")
        time.sleep(0.02)
    pytest.fail("no part file appeared")


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL], ids=["SIGINT", "SIGKILL"])
def test_interrupted_run_keeps_its_batches_and_resumes(tmp_path, slowish, sig):
    out = tmp_path / "o.parquet"
    args = [
        "rerank-dataset",
        slowish,
        "-o",
        out,
        "--method",
        "aces-o",
        "--batch-size",
        "100",
        "--threads",
        "1",
    ]
    proc = _start(args)
    _wait_for_parts(out, proc)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=120)
    if sig == signal.SIGINT:
        assert proc.returncode == 130
        assert err.strip().splitlines()[-1].startswith("aces-fast: interrupted; the results in")
    else:
        assert proc.returncode == -signal.SIGKILL
    kept = pq.read_table(out)  # what was written stays a readable dataset
    assert 200 <= kept.num_rows < 3000 and kept.num_rows % 100 == 0
    proc = _start([*args, "--resume", "-q"])
    _, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err
    done = pq.read_table(out)
    assert done.num_rows == 3000 and len(set(done.column("task_id").to_pylist())) == 3000
    assert not list(out.glob(".*"))
    # the first batches are those of an uninterrupted run
    ref = af.rerank_batch(list(_matrices(slowish, 200)), "aces-o")
    head = done.sort_by([("task_id", "ascending")])
    first = {t: i for i, t in enumerate(head.column("task_id").to_pylist())}
    for j, r in enumerate(ref):
        i = first[f"task/{j}"]
        np.testing.assert_array_equal(_bits(head.column("scores")[i].as_py()), _bits(r.scores))


def _matrices(path, limit):
    from benchmarks.harness.stream_scale import read_matrices

    return read_matrices(path, limit)


# -- command line ---------------------------------------------------------------


def test_cli_convert_and_rerank_dataset(tmp_path, capsys, bundled):
    _, ds = bundled
    pq_path = tmp_path / "gpt.parquet"
    assert main(["convert", "humaneval-codegen16b", str(pq_path), "--row-group-size", "100"]) == 0
    cap = capsys.readouterr()
    assert cap.out.strip() == f"wrote 164 problems to {pq_path}"
    assert "cand_uid, t_ok are not columns of the Parquet layout" in cap.err
    assert pq.ParquetFile(pq_path).num_row_groups == 2
    out = tmp_path / "res.parquet"
    assert (
        main(
            [
                "rerank-dataset",
                str(pq_path),
                "-o",
                str(out),
                "--method",
                "aces-o",
                "--aces-o-steps",
                "5",
                "--aces-o-lr",
                "0.05",
                "--json",
            ]
        )
        == 0
    )
    summary = json.loads(capsys.readouterr().out)
    assert summary["written"] == 164 and summary["invalid"] == 0
    assert set(summary["timings"]) == {"read", "decode", "rerank", "pass@k", "encode", "write"}
    ref = af.rerank_batch([p.B for p in ds], "aces-o", steps=5, lr=0.05)
    assert_results_equal(pq.read_table(out), ds.problems, ref)
    # a jsonl input converts too
    from aces_fast.datasets import save_jsonl

    save_jsonl(ds.problems[:3], tmp_path / "x.jsonl")
    assert main(["convert", str(tmp_path / "x.jsonl"), str(tmp_path / "x.parquet"), "-q"]) == 0
    assert capsys.readouterr().out == ""
    assert load_dataset(str(tmp_path / "x.parquet")).task_ids == ds.task_ids[:3]


def test_cli_errors_are_one_line(tmp_path, capsys):
    path, _ = _with_bad_rows(tmp_path)
    out = tmp_path / "o.parquet"
    assert main(["rerank-dataset", str(path), "-o", str(out)]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert err == (
        f"aces-fast: error: {path}: row 3 (task_id 't3'): labels entry 2 is 7; only 0 "
        f"and 1 are allowed (--skip-invalid writes bad rows to "
        f"{tmp_path / 'o.errors.jsonl'} and goes on)"
    )
    assert main(["rerank-dataset", str(path), "-o", str(out), "--skip-invalid", "--resume"]) == 0
    assert "3 invalid rows in" in capsys.readouterr().out
    for argv, msg in [
        (["rerank-dataset", str(path), "-o", str(out)], "already holds results"),
        (
            ["rerank-dataset", str(path), "-o", str(tmp_path / "x"), "--address", "a:1"],
            "--address needs --engine ray",
        ),
        (["convert", "nope.npz", str(tmp_path / "y.parquet")], "no dataset 'nope.npz'"),
        (["rerank-dataset", "humaneval-gpt35", "-o", str(tmp_path / "z")], "no such file"),
    ]:
        assert main(argv) == 1
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and err.startswith("aces-fast: error: ") and msg in err


def test_progress_counter_without_tqdm(tmp_path, bundled, monkeypatch, capsys):
    path, _ = bundled
    monkeypatch.setitem(sys.modules, "tqdm", None)
    monkeypatch.setitem(sys.modules, "tqdm.auto", None)
    rerank_dataset(path, tmp_path / "o", "majority", batch_size=100, progress=True)
    err = capsys.readouterr().err
    assert "rerank-dataset: 164/164 tasks" in err
    rerank_dataset(path, tmp_path / "o2", "majority", batch_size=100)  # not a terminal: silent
    assert capsys.readouterr().err == ""


def test_missing_pyarrow_in_the_cli(tmp_path):
    code = (
        "import sys; sys.modules['pyarrow'] = None\n"
        "from aces_fast.cli import main\n"
        "sys.exit(main(sys.argv[1:]))"
    )
    for argv in (
        ["convert", "humaneval-gpt35", str(tmp_path / "x.parquet")],
        ["rerank-dataset", str(tmp_path / "x.parquet"), "-o", str(tmp_path / "o")],
    ):
        proc = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True)
        assert proc.returncode == 1
        assert proc.stderr.strip().startswith("aces-fast: error: ")
        assert "pip install 'aces_fast[arrow]'" in proc.stderr
