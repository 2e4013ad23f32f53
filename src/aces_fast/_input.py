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
    check_schema,
    damaged_row_group,
    input_files,
    open_file,
    row_group_task_ids,
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
        pf = open_file(f)
        has_labels = check_schema(pf.schema_arrow, str(f))[0] or has_labels
        files.append(InputFile(f, pf, row))
        row += int(pf.metadata.num_rows)
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
    is left to :func:`read_batches`, which reports it). O(rows) time; memory
    for the ids, freed on return.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

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
    counts = pc.value_counts(ids.drop_null())
    repeated = counts.field("values").filter(pc.greater(counts.field("counts"), 1))
    if len(repeated) == 0:
        return {}
    rows = np.flatnonzero(pc.is_in(ids, value_set=repeated).to_numpy(zero_copy_only=False))
    first: dict[str, int] = {}
    out: dict[int, str] = {}
    for r, tid in zip(rows.tolist(), ids.take(pa.array(rows)).to_pylist()):
        if tid in first:
            out[r] = f"duplicate task_id: it already names row {first[tid]}"
        else:
            first[tid] = r
    return out


def read_batches(
    files: list[InputFile],
    batch_size: int,
    done: Intervals,
    duplicates: dict[int, str],
    skip_invalid: bool,
    timings: dict[str, float],
) -> Iterator[Batch]:
    """Batches of the rows still to do (see the module docstring).

    A batch never spans two files (their schemas may differ) and holds at most
    ``batch_size`` rows to rank; errors ride with the next batch yielded.
    Raises ``ValueError`` for a damaged row group unless ``skip_invalid``.
    """
    import time

    import pyarrow as pa

    dup_rows = np.array(sorted(duplicates), dtype=np.int64)
    for f in files:
        cols = [c for c in REQUIRED_COLUMNS + OPTIONAL_COLUMNS if c in f.pf.schema_arrow.names]
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

        lo = f.first_row
        for g in range(f.pf.metadata.num_row_groups):
            n_g = int(f.pf.metadata.row_group(g).num_rows)
            hi = lo + n_g
            if done.covers(lo, hi):
                lo = hi
                continue
            r = lo
            it = f.pf.iter_batches(batch_size=batch_size, row_groups=[g], columns=cols)
            while True:
                tick = time.perf_counter()
                try:
                    batch = next(it, None)
                except (OSError, pa.ArrowException) as exc:
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
                finally:
                    timings["read"] = timings.get("read", 0.0) + time.perf_counter() - tick
                if batch is None:
                    break
                rows = np.arange(r, r + batch.num_rows, dtype=np.int64)
                r += batch.num_rows
                keep = ~done.contains(rows) if len(done.starts) else np.ones(rows.size, bool)
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
            lo = hi
        if size or errors or seen:
            yield cut(size)
