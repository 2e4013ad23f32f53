"""Row groups read ahead on several threads (src/aces_fast/_input.py, issue 23):
``read_batches`` with ``readers > 1`` gives the batches, errors and row numbers
that one reader gives, in the same order, whatever the batch size, the rows
already done, duplicates, damaged row groups and row groups too large to read
ahead; the readers read the file the run opened; and a streaming run's output
does not change."""

from __future__ import annotations

import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from aces_fast import _input
from aces_fast._commit import Intervals
from aces_fast._input import duplicate_rows, open_inputs, read_batches
from aces_fast.datasets import Problem
from aces_fast.parquet import save_parquet
from aces_fast.stream import rerank_dataset
from helpers import labelled_problems


def _damage_page(path, group):
    """Flip bytes inside the first data page of column B of ``group``: its CRC
    no longer matches, so reading that row group fails at that page."""
    md = pq.ParquetFile(path).metadata
    names = [md.schema.column(j).name for j in range(md.num_columns)]
    col = md.row_group(group).column(names.index("B"))
    start = col.dictionary_page_offset if col.has_dictionary_page else col.data_page_offset
    data = bytearray(path.read_bytes())
    at = start + col.total_compressed_size // 2
    data[at : at + 8] = bytes(b ^ 0xFF for b in data[at : at + 8])
    path.write_bytes(bytes(data))


@pytest.fixture
def dataset(tmp_path):
    """Two files (rows 0-549 in row groups of 50, rows 550-849 in groups of 100
    and one of 20), a duplicated task id, and a damaged row group in each."""
    root = tmp_path / "in"
    root.mkdir()
    a, b = root / "a.parquet", root / "b.parquet"
    probs_a = labelled_problems(550)
    probs_a[400] = Problem("t3", probs_a[400].B, probs_a[400].labels)  # repeats row 3
    save_parquet(probs_a, a, row_group_size=50)
    save_parquet(labelled_problems(320, seed=1, start=550), b, row_group_size=100)
    _damage_page(a, 7)  # rows 350-399
    _damage_page(b, 1)  # rows 650-749
    return root


def _snapshot(files, batch_size, done, skip_invalid, readers):
    """Everything read_batches yields, as plain values; or the error it raised
    after them."""
    out = []
    timings = {}
    dups = duplicate_rows(files)
    try:
        for b in read_batches(files, batch_size, done, dups, skip_invalid, timings, readers):
            table = None if b.table is None else b.table.to_pydict()
            out.append((table, b.rows.tolist(), [vars(e) for e in b.errors], b.seen))
    except ValueError as exc:
        out.append(("raised", str(exc)))
    assert timings.get("read", 0.0) > 0
    return out


DONE = {
    "nothing": Intervals(),
    # whole row groups (skipped unread), rows inside groups, across the files
    "some": Intervals([[0, 100], [130, 170], [500, 600], [760, 790]]),
}


@pytest.mark.parametrize("done", sorted(DONE))
@pytest.mark.parametrize("batch_size", [32, 64, 1000])
@pytest.mark.parametrize("skip_invalid", [True, False])
def test_readers_give_what_one_reader_gives(dataset, done, batch_size, skip_invalid):
    files, _ = open_inputs(dataset)
    want = _snapshot(files, batch_size, DONE[done], skip_invalid, readers=1)
    # the case is a real one: errors, duplicates and (or) the damaged row group
    flat = [e for item in want if item[0] != "raised" for e in item[2]]
    if skip_invalid:
        assert any("row group" in e["reason"] for e in flat)
        assert any("duplicate" in e["reason"] for e in flat)
    else:
        assert want[-1][0] == "raised" and "row group 7" in want[-1][1]
    for readers in (2, 3, 8):
        assert _snapshot(files, batch_size, DONE[done], skip_invalid, readers) == want


def test_row_groups_too_large_to_read_ahead_are_read_lazily(dataset, monkeypatch):
    """Row groups over READ_AHEAD_BYTES (here: the second file's) are read where
    the batches reach them, the others still ahead: the same batches."""
    files, _ = open_inputs(dataset)
    want = _snapshot(files, 64, Intervals(), True, readers=1)
    sizes = [
        f.pf.metadata.row_group(g).total_byte_size
        for f in files
        for g in range(f.pf.metadata.num_row_groups)
    ]
    small, large = min(sizes), max(sizes)
    assert small < large
    monkeypatch.setattr(_input, "READ_AHEAD_BYTES", small)
    ahead = _input._ReadAhead(files, 64, Intervals(), 2)
    try:
        assert 0 < len(ahead.plan) < len(sizes)
    finally:
        ahead.close()
    assert _snapshot(files, 64, Intervals(), True, readers=2) == want
    monkeypatch.setattr(_input, "READ_AHEAD_BYTES", 0)  # every group lazily
    assert _snapshot(files, 64, Intervals(), True, readers=2) == want


def test_readers_read_the_file_the_run_opened(tmp_path):
    """Replacing the input's path during a run changes nothing the run reads:
    every reader reads the open file."""
    path = tmp_path / "in.parquet"
    save_parquet(labelled_problems(300), path, row_group_size=40)
    files, _ = open_inputs(path)
    want = _snapshot(files, 64, Intervals(), False, readers=1)
    other = tmp_path / "other.parquet"
    save_parquet(labelled_problems(300, seed=5), other, row_group_size=40)
    os.replace(other, path)
    for readers in (1, 3):
        assert _snapshot(files, 64, Intervals(), False, readers) == want


def test_stopping_early_stops_the_readers(tmp_path):
    """Closing the batches part-way (an error, Ctrl-C) cancels the row groups
    not yet read and waits for those being read: no thread is left."""
    import threading

    path = tmp_path / "in.parquet"
    save_parquet(labelled_problems(2000), path, row_group_size=20)
    files, _ = open_inputs(path)
    gen = read_batches(files, 16, Intervals(), {}, False, {}, readers=4)
    next(gen)
    assert any(t.name.startswith("aces-fast-read") for t in threading.enumerate())
    gen.close()
    assert not any(t.name.startswith("aces-fast-read") for t in threading.enumerate())


def test_reader_threads_grow_with_the_workers():
    assert [_input.reader_threads(w) for w in (1, 2, 4, 7, 8, 16, 64)] == [1, 1, 1, 1, 2, 4, 16]


def test_a_run_with_readers_writes_what_one_reader_writes(tmp_path, monkeypatch):
    """The local engine with row groups read ahead (forced at two threads):
    the same results, bit for bit, and the same errors."""
    root = tmp_path / "in"
    root.mkdir()
    save_parquet(labelled_problems(700, n=10, m=20), root / "a.parquet", row_group_size=60)
    save_parquet(labelled_problems(300, start=700, seed=2), root / "b.parquet", row_group_size=45)
    _damage_page(root / "a.parquet", 4)
    runs = {}
    for readers in (1, 3):
        monkeypatch.setattr(_input, "reader_threads", lambda workers, r=readers: r)
        out = tmp_path / f"out{readers}"
        s = rerank_dataset(root, out, "aces-c", batch_size=64, n_threads=2, skip_invalid=True)
        assert (s.written, s.invalid) == (940, 60)
        table = pq.read_table(out).replace_schema_metadata(None)
        runs[readers] = (table, s.errors_path.read_text())
    assert runs[3][0].equals(runs[1][0])
    assert runs[3][1] == runs[1][1]
    assert isinstance(runs[1][0], pa.Table) and runs[1][0].num_rows == 940


def test_the_read_thread_closes_what_it_reads_when_stopped():
    """The engine's read thread (stream._prefetch) closes its generator when
    the consumer stops early, at once and on its own thread, so the reader
    threads behind it stop then, not when the generator is collected."""
    import threading

    from aces_fast.stream import _prefetch

    closed = []

    def items():
        try:
            yield from range(100)
        finally:
            closed.append(threading.current_thread().name)

    it = _prefetch(items(), depth=2)
    assert next(it) == 0
    it.close()
    assert closed == ["aces-fast-read"]
