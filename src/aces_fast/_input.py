"""The input of a dataset run, read the way the commit protocol needs it.

* :func:`open_inputs` -- the files of a dataset, schema-checked, opened with
  Parquet page-checksum verification (pages written with CRCs -- ``convert``
  and :func:`aces_fast.parquet.save_parquet` write them -- are checked as they
  are read; a flipped byte is an error, never a changed result).
* :func:`duplicate_rows` -- every row whose task id already occurred earlier
  in the input: a duplicate would make two results with one key.
* :func:`read_batches` -- batches of at most ``batch_size`` rows still to do,
  with their input row numbers; rows already committed (an :class:`Intervals`)
  are left out with a range check, whole row groups without reading them; a
  row group that fails to decode becomes one error per remaining row (with
  ``skip_invalid``) or an error naming the file, row group, rows and task ids.
  With ``readers > 1`` (:func:`reader_threads`) row groups are read ahead on
  that many threads, each through its own reader of the file the run opened
  (:meth:`aces_fast.parquet.InputFile.reader`); what comes out is the same.

Row numbers count from 0 over all files in name order; with the input's
identity checked on resume they name the same rows in every run.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ._commit import Intervals
from .parquet import (
    OPTIONAL_COLUMNS,
    REQUIRED_COLUMNS,
    InputFile,
    RowError,
    binary_parts,
    check_schema,
    damaged_row_group,
    input_files,
    row_group_task_ids,
    validity,
)

__all__ = ["Batch", "duplicate_rows", "open_inputs", "read_batches", "task_ids_at"]


@dataclass
class Batch:
    """Rows to rank (``table``, input row numbers ``rows``) and rows that failed
    before ranking (``errors``: duplicates, damaged row groups); ``seen`` input
    rows in all, for progress."""

    table: Any
    rows: np.ndarray
    errors: list[Any] = field(default_factory=list)
    seen: int = 0


def open_inputs(path_in: Any) -> tuple[list[InputFile], bool]:
    """The input files (name order) and whether any has a ``labels`` column."""
    files: list[InputFile] = []
    has_labels = False
    row = 0
    for f in input_files(path_in):
        inp = InputFile.open(f, row)
        has_labels = check_schema(inp.pf.schema_arrow, str(f))[0] or has_labels
        files.append(inp)
        row += inp.num_rows
    return files, has_labels


def task_ids_at(files: Sequence[InputFile], rows: Any) -> dict[int, str | None]:
    """The task ids of some input rows (reads the ``task_id`` column of their
    files; for error messages, not a hot path)."""
    out: dict[int, str | None] = {}
    for f in files:
        mine = [int(r) for r in rows if f.first_row <= r < f.first_row + f.num_rows]
        if mine:
            col = f.pf.read(columns=["task_id"]).column(0)
            out.update((r, col[r - f.first_row].as_py()) for r in mine)
    return out


def duplicate_rows(files: list[InputFile]) -> dict[int, str]:
    """``{row: reason}`` for every row whose task id occurred at an earlier row.

    Reads only the ``task_id`` column (a row group whose column cannot be read
    is left to :func:`read_batches`, which reports it). The ids are compared in
    one compiled pass (``_core.repeated_ids``: a hash table, ids compared byte
    for byte where hashes agree), else by pyarrow's ``value_counts``. O(rows)
    time; memory for the ids, freed on return.
    """
    import pyarrow as pa

    chunks: list[Any] = []
    for f in files:
        for g in range(f.pf.metadata.num_row_groups):
            col = row_group_task_ids(f.pf, g)
            n_g = f.pf.metadata.row_group(g).num_rows
            if col is None:
                col = pa.chunked_array([pa.nulls(n_g, pa.string())])
            chunks.extend(c.cast(pa.string()) for c in col.chunks)
    if not chunks:
        return {}
    ids = pa.chunked_array(chunks, pa.string())
    found = _repeated_compiled(ids)
    if found is None:
        found = _repeated_arrow(ids)
    out: dict[int, str] = {}
    for r, first in zip(*found):
        out[r] = f"duplicate task_id: it already names row {first}"
    return out


def _repeated_compiled(ids: Any, hash_bits: int = 64) -> tuple[list[int], list[int]] | None:
    """(rows, their ids' first rows) by ``_core.repeated_ids``; None without the
    extension."""
    import pyarrow as pa

    from ._compiled import core

    if core is None:
        return None
    arr = ids.cast(pa.large_string()).combine_chunks()  # int64 offsets: any size
    offsets, data = binary_parts(arr)
    dup, first = core.repeated_ids(
        offsets=offsets, data=data, valid=validity(arr), hash_bits=hash_bits
    )
    return dup.tolist(), first.tolist()


def _repeated_arrow(ids: Any) -> tuple[list[int], list[int]]:
    """:func:`_repeated_compiled` by pyarrow's hash aggregation."""
    import pyarrow as pa
    import pyarrow.compute as pc

    counts = pc.value_counts(ids.drop_null())
    repeated = counts.field("values").filter(pc.greater(counts.field("counts"), 1))
    if len(repeated) == 0:
        return [], []
    rows = np.flatnonzero(pc.is_in(ids, value_set=repeated).to_numpy(zero_copy_only=False))
    first: dict[str, int] = {}
    dup_rows: list[int] = []
    firsts: list[int] = []
    for r, tid in zip(rows.tolist(), ids.take(pa.array(rows)).to_pylist()):
        if tid in first:
            dup_rows.append(r)
            firsts.append(first[tid])
        else:
            first[tid] = r
    return dup_rows, firsts


#: Row groups of at most this many bytes (uncompressed, from the footer) are
#: read ahead whole on the reader threads; a larger one is read batch by batch
#: where the batches reach it, so memory stays bounded by the batch size and
#: about ``2 * readers`` such row groups, whatever the file's layout.
READ_AHEAD_BYTES = 16 << 20


def reader_threads(workers: int) -> int:
    """Threads that read row groups ahead for ``workers`` ranking threads.

    One per four (one up to seven): reading and decoding a 100x50 problem
    takes 3-4 us of CPU (pyarrow, checksums verified; 0.8-1.2 s for 300 000 on
    this project's machine), against about 20 us for the rest of the run, so
    one reader keeps four or five workers busy; beyond that the one reading
    thread caps the run (at 280 000-400 000 problems a second there).
    """
    return max(1, workers // 4)


# One row group as the loop of read_batches sees it: its batches in order, the
# error that ended it (``None`` when it was read to its end), and the seconds
# spent reading.
_Group = tuple[list[Any], BaseException | None, float]


def _read_group(pf: Any, g: int, batch_size: int, cols: list[str]) -> Iterator[_Group]:
    """Row group ``g`` of ``pf`` read lazily: one ``_Group`` per batch (and a
    last one holding the error, if reading fails), as ``iter_batches`` gives
    them."""
    import time

    import pyarrow as pa

    it = pf.iter_batches(batch_size=batch_size, row_groups=[g], columns=cols)
    while True:
        tick = time.perf_counter()
        try:
            batch = next(it, None)
        except (OSError, pa.ArrowException) as exc:
            yield [], exc, time.perf_counter() - tick
            return
        if batch is None:
            return
        yield [batch], None, time.perf_counter() - tick


def _read_whole_group(f: InputFile, g: int, batch_size: int, cols: list[str]) -> _Group:
    """Row group ``g`` of ``f`` read to its end (or its first error) on a reader
    thread, through a reader of its own."""
    batches: list[Any] = []
    seconds = 0.0
    for got, exc, dt in _read_group(f.reader(), g, batch_size, cols):
        batches += got
        seconds += dt
        if exc is not None:
            return batches, exc, seconds
    return batches, None, seconds


def _groups_to_do(f: InputFile, done: Intervals) -> Iterator[tuple[int, int, int]]:
    """``(g, lo, hi)`` for each row group of ``f`` in order, input rows
    ``[lo, hi)``, except those whose rows are all done (never read)."""
    md = f.pf.metadata
    lo = f.first_row
    for g in range(md.num_row_groups):
        hi = lo + int(md.row_group(g).num_rows)
        if not done.covers(lo, hi):
            yield g, lo, hi
        lo = hi


def _columns(f: InputFile) -> list[str]:
    names = f.pf.schema_arrow.names
    return [c for c in REQUIRED_COLUMNS + OPTIONAL_COLUMNS if c in names]


class _ReadAhead:
    """Row groups read ahead, in the order read_batches visits them, on
    ``readers`` threads, at most ``2 * readers`` at a time; :meth:`group` hands
    each over exactly as the lazy read would have given it. Row groups the run
    has done, larger than :data:`READ_AHEAD_BYTES`, or of a file without a
    shared ``source`` are left to the lazy read."""

    def __init__(
        self, files: list[InputFile], batch_size: int, done: Intervals, readers: int
    ) -> None:
        from concurrent.futures import ThreadPoolExecutor

        self.batch_size = batch_size
        self.window = 2 * readers
        self.plan = [
            (fi, g)
            for fi, f in enumerate(files)
            if f.source is not None
            for g, _, _ in _groups_to_do(f, done)
            if f.pf.metadata.row_group(g).total_byte_size <= READ_AHEAD_BYTES
        ]
        self.files = files
        self.next = 0  # plan entries submitted so far
        self.pending: dict[tuple[int, int], Any] = {}
        self.pool = ThreadPoolExecutor(readers, thread_name_prefix="aces-fast-read")
        self._top_up()

    def _top_up(self) -> None:
        while self.next < len(self.plan) and len(self.pending) < self.window:
            fi, g = self.plan[self.next]
            f = self.files[fi]
            self.pending[(fi, g)] = self.pool.submit(
                _read_whole_group, f, g, self.batch_size, _columns(f)
            )
            self.next += 1

    def group(self, fi: int, g: int) -> Iterator[_Group]:
        """Row group ``g`` of file ``fi``, as :func:`_read_group` gives it."""
        fut = self.pending.pop((fi, g), None)
        if fut is None:
            f = self.files[fi]
            yield from _read_group(f.pf, g, self.batch_size, _columns(f))
            return
        self._top_up()
        yield fut.result()

    def close(self) -> None:
        self.pool.shutdown(wait=True, cancel_futures=True)


def read_batches(
    files: list[InputFile],
    batch_size: int,
    done: Intervals,
    duplicates: dict[int, str],
    skip_invalid: bool,
    timings: dict[str, float],
    readers: int = 1,
) -> Iterator[Batch]:
    """Batches of the rows still to do (see the module docstring).

    A batch never spans two files (their schemas may differ) and holds at most
    ``batch_size`` rows to rank; errors ride with the next batch yielded.
    Raises ``ValueError`` for a damaged row group unless ``skip_invalid``.

    ``readers`` > 1: row groups are read ahead on that many threads
    (:func:`reader_threads`), each through its own reader of the file; the
    batches, errors and their order are the same as with one.
    """
    import pyarrow as pa

    ahead = _ReadAhead(files, batch_size, done, readers) if readers > 1 else None
    try:
        dup_rows = np.array(sorted(duplicates), dtype=np.int64)
        for fi, f in enumerate(files):
            cols = _columns(f)
            pending: list[Any] = []
            pending_rows: list[np.ndarray] = []
            errors: list[Any] = []
            size = seen = 0

            def cut(limit: int) -> Batch:
                nonlocal pending, pending_rows, errors, size, seen
                table = pa.Table.from_batches(pending) if pending else None
                rows = np.concatenate(pending_rows) if pending_rows else np.zeros(0, np.int64)
                take = min(limit, size)
                head = table.slice(0, take) if table is not None else None
                out = Batch(head, rows[:take], errors, seen)
                rest = table.slice(take) if table is not None and take < size else None
                pending = rest.to_batches() if rest is not None else []
                pending_rows = [rows[take:]] if take < size else []
                errors, size, seen = [], size - take, 0
                return out

            for g, lo, hi in _groups_to_do(f, done):
                r = lo
                parts = (
                    ahead.group(fi, g)
                    if ahead is not None
                    else _read_group(f.pf, g, batch_size, cols)
                )
                for got, exc, dt in parts:
                    timings["read"] = timings.get("read", 0.0) + dt
                    for batch in got:
                        rows = np.arange(r, r + batch.num_rows, dtype=np.int64)
                        r += batch.num_rows
                        keep = (
                            ~done.contains(rows) if len(done.starts) else np.ones(rows.size, bool)
                        )
                        seen += int(keep.sum())
                        if dup_rows.size:
                            dup = keep & np.isin(rows, dup_rows)
                            if dup.any():
                                tids = batch.column("task_id").to_pylist()
                                errors.extend(
                                    RowError(int(rows[i]), tids[i], duplicates[int(rows[i])])
                                    for i in np.flatnonzero(dup).tolist()
                                )
                                keep &= ~dup
                        if not keep.all():
                            batch = batch.filter(pa.array(keep))
                            rows = rows[keep]
                        if batch.num_rows:
                            pending.append(batch)
                            pending_rows.append(rows)
                            size += batch.num_rows
                        while size >= batch_size:
                            yield cut(batch_size)
                    if exc is not None:
                        message, ids = damaged_row_group(f, g, lo, hi, r, exc)
                        if not skip_invalid:
                            raise ValueError(
                                message + " (--skip-invalid reports its rows in the "
                                "errors file and goes on)"
                            ) from None
                        todo = np.arange(r, hi, dtype=np.int64)
                        keep = ~done.contains(todo)
                        errors.extend(
                            RowError(int(row), ids[int(row) - r], message) for row in todo[keep]
                        )
                        seen += int(keep.sum())
                        break
            if size or errors or seen:
                yield cut(size)
    finally:
        if ahead is not None:
            ahead.close()
