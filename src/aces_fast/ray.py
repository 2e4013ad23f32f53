"""Rerank pass-matrix datasets on a Ray cluster with Ray Data.

* :func:`rerank_dataset` maps a ``ray.data.Dataset`` of rows in the pass-matrix
  layout (:mod:`aces_fast.parquet`) to a Dataset of results (the columns of
  :mod:`aces_fast.stream`), running the very function the local engine runs
  (:func:`aces_fast.stream.rerank_table`) through ``map_batches``: results are
  bit-identical to the local engine's.
* :func:`read_pass_matrices` reads Parquet files into such a Dataset, one read
  task per row group, with a ``row`` column of input row numbers so that bad
  rows are reported by position (``ray.data.read_parquet`` works too; bad rows
  then report ``row: null``).
* ``aces_fast.stream.rerank_dataset(..., engine="ray")`` (and ``aces-fast
  rerank-dataset --engine ray``) combines both and writes the results on the
  driver, resumably, as the local engine does.

Every worker needs aces_fast (with its extension) and pyarrow installed, and
must be able to read the input path. Needs ``pip install 'aces_fast[ray]'``.
"""

from __future__ import annotations

import functools
import logging
import re
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Set, Tuple, Union

import numpy as np

try:
    import ray
    import ray.data
except ImportError as _exc:  # pragma: no cover - exercised in a subprocess test
    raise ImportError("the Ray engine needs ray with Ray Data, which is not installed: "
                      "pip install 'aces_fast[ray]'") from _exc

import pyarrow as pa

from ._registry import DEFAULT_METHOD, method_params
from ._validation import check_int
from .parquet import InvalidRowError, RowError, check_schema, input_files
from .stream import DEFAULT_BATCH_SIZE, rerank_table, results_schema

__all__ = ["init", "read_pass_matrices", "rerank_dataset"]

PathLike = Union[str, Path]

# Columns of the input as Ray blocks carry them: one type each, so blocks from
# files with different integer widths concatenate.
_CANONICAL = {"task_id": pa.string(), "n": pa.int64(), "m": pa.int64(), "B": pa.binary(),
              "labels": pa.list_(pa.int64()), "test_count": pa.list_(pa.int64())}


def init(address: Optional[str] = None, num_cpus: Optional[int] = None) -> bool:
    """Connect to the Ray cluster at ``address``, or start a local one (``num_cpus``
    workers; default all cores). Does nothing when Ray is already initialized.

    Returns True when this call started or connected (the caller then owns the
    connection and should ``ray.shutdown()`` it).
    """
    if ray.is_initialized():
        return False
    quiet: Dict[str, Any] = dict(logging_level=logging.ERROR, log_to_driver=False)
    if address:
        ray.init(address=address, **quiet)
    else:
        ray.init(num_cpus=num_cpus, include_dashboard=False, **quiet)
    ctx = ray.data.DataContext.get_current()
    ctx.enable_progress_bars = False
    logging.getLogger("ray.data").setLevel(logging.ERROR)
    return True


# ---------------------------------------------------------------------------
# reading


_SHARED: Dict[str, Any] = {}


def _shared(ref_box: Optional[List[Any]]) -> Any:
    """The object behind a boxed ObjectRef, fetched once per worker process."""
    if not ref_box:
        return None
    key = ref_box[0].hex()
    if key not in _SHARED:
        _SHARED.clear()
        _SHARED[key] = ray.get(ref_box[0])
    return _SHARED[key]


def _read_group(path: str, group: int, first_row: int, *, batch_size: int,
                columns: Sequence[str], has_labels: bool, skip: Optional[List[Any]]):
    """Read task: the rows of one row group in batches, with a ``row`` column, minus
    the rows to skip (done by an earlier run, or duplicates the driver reports),
    in the canonical column types."""
    from .parquet import _open

    skip_set = _shared(skip)
    pf = _open(path)
    present = [c for c in columns if c in pf.schema_arrow.names]
    row = first_row
    for batch in pf.iter_batches(batch_size=batch_size, row_groups=[group], columns=present):
        rows = np.arange(row, row + batch.num_rows, dtype=np.int64)
        row += batch.num_rows
        table = pa.Table.from_batches([batch])
        if skip_set is not None:
            keep = ~skip_set.contains(rows)
            if not keep.all():
                table, rows = table.filter(pa.array(keep)), rows[keep]
        if table.num_rows == 0:
            continue
        cols = {c: table.column(c).cast(_CANONICAL[c]) for c in present}
        if has_labels and "labels" not in cols:
            cols["labels"] = pa.nulls(table.num_rows, _CANONICAL["labels"])
        cols["row"] = pa.array(rows, pa.int64())
        yield pa.table(cols)


def _read_groups(units: Sequence[Tuple[str, int, int]], **kwargs: Any):
    for path, group, first_row in units:
        yield from _read_group(path, group, first_row, **kwargs)


def _block_metadata(rows: Optional[int], size: int, files: Tuple[str, ...]) -> Any:
    from ray.data.block import BlockMetadata

    return BlockMetadata(num_rows=rows, size_bytes=size, input_files=files, exec_stats=None)


class _PassMatrixSource(ray.data.Datasource):
    """One read task per row group (fewer when Ray asks for less parallelism)."""

    def __init__(self, units: List[Tuple[str, int, int, int, int]], read_args: Dict[str, Any],
                 exact_rows: bool):
        self.units, self.read_args, self.exact_rows = units, read_args, exact_rows

    def get_name(self) -> str:
        return "ReadPassMatrices"

    def estimate_inmemory_data_size(self) -> Optional[int]:
        return sum(u[4] for u in self.units)

    def get_read_tasks(self, parallelism: int, *args: Any, **kwargs: Any) -> List[Any]:
        from ray.data import ReadTask

        k = len(self.units) if parallelism is None or parallelism < 1 \
            else max(1, min(parallelism, len(self.units)))
        tasks = []
        for chunk in np.array_split(np.arange(len(self.units)), k):
            units = [self.units[i] for i in chunk.tolist()]
            if not units:
                continue
            rows = sum(u[3] for u in units) if self.exact_rows else None
            meta = _block_metadata(rows, sum(u[4] for u in units),
                                   tuple(sorted({u[0] for u in units})))
            fn = functools.partial(_read_groups, [u[:3] for u in units], **self.read_args)
            tasks.append(ReadTask(fn, meta))
        return tasks


def read_pass_matrices(path: PathLike, *, batch_size: int = DEFAULT_BATCH_SIZE,
                       skip_rows: Optional[Any] = None) -> "ray.data.Dataset":
    """A Ray Dataset of the rows of a Parquet pass-matrix file (or directory).

    Parameters
    ----------
    path : str or Path
        Readable from every worker (a shared file system).
    batch_size : int
        Rows per block yielded by a read task.
    skip_rows : aces_fast._commit.Intervals, optional
        Input row numbers to leave out (rows a resumed run has done); row
        groups wholly inside are not read at all.

    Returns
    -------
    ray.data.Dataset
        The layout's columns (integers widened to int64, lists of int64) plus
        ``row`` (int64, the input row number). One read task per row group.
    """
    from .parquet import OPTIONAL_COLUMNS, REQUIRED_COLUMNS, _open

    batch_size = check_int(batch_size, "batch_size", minimum=1)
    units = []
    has_labels = False
    row = 0
    for f in input_files(path):
        pf = _open(f)
        has_labels = check_schema(pf.schema_arrow, str(f))[0] or has_labels
        for g in range(pf.num_row_groups):
            meta = pf.metadata.row_group(g)
            if skip_rows is None or not skip_rows.covers(row, row + meta.num_rows):
                units.append((str(f.resolve()), g, row, meta.num_rows, meta.total_byte_size))
            row += meta.num_rows
    skip = [ray.put(skip_rows)] if skip_rows is not None and len(skip_rows.starts) else None
    read_args = dict(batch_size=batch_size, columns=REQUIRED_COLUMNS + OPTIONAL_COLUMNS,
                     has_labels=has_labels, skip=skip)
    return ray.data.read_datasource(_PassMatrixSource(units, read_args, skip is None))


# ---------------------------------------------------------------------------
# ranking


def _rerank_block(table: pa.Table, *, method: str, params: Dict[str, Any],
                  backend: Optional[str], n_threads: Optional[int],
                  skip_invalid: bool) -> pa.Table:
    out, errors, _ = rerank_table(table, method, params, rows=None,
                                  has_labels="labels" in table.column_names, backend=backend,
                                  n_threads=n_threads, skip_invalid=skip_invalid)
    if not skip_invalid:
        return out
    # Bad rows travel in the same table: task_id, row and error set, the rest null;
    # ranked rows keep their row number (the driver commits the rows it covered).
    if "row" in table.column_names:
        bad_rows = {e.row for e in errors}
        ranked = [r for r in table.column("row").to_pylist() if r not in bad_rows]
        row_col = pa.array(ranked, pa.int64())
    else:
        row_col = pa.nulls(out.num_rows, pa.int64())
    good = out.append_column("row", row_col) \
              .append_column("error", pa.nulls(out.num_rows, pa.string()))
    if not errors:
        return good
    bad = {name: pa.nulls(len(errors), good.schema.field(name).type) for name in good.column_names}
    bad["task_id"] = pa.array([e.task_id for e in errors], pa.string())
    bad["row"] = pa.array([e.row for e in errors], pa.int64())
    bad["error"] = pa.array([e.reason for e in errors], pa.string())
    return pa.concat_tables([good, pa.table(bad, schema=good.schema)])


def rerank_dataset(ds: "ray.data.Dataset", method: str = DEFAULT_METHOD, *,
                   batch_size: int = DEFAULT_BATCH_SIZE, backend: Optional[str] = None,
                   n_threads: int = 1, skip_invalid: bool = False,
                   **params: Any) -> "ray.data.Dataset":
    """Rank every problem of a Ray Dataset of pass-matrix rows.

    Parameters
    ----------
    ds : ray.data.Dataset
        Rows of the pass-matrix layout (e.g. ``ray.data.read_parquet(path)`` or
        :func:`read_pass_matrices`); a ``row`` column, when present, numbers
        the rows in error reports.
    method, **params
        As for :func:`aces_fast.rerank_batch`.
    batch_size : int
        Problems per ``map_batches`` call.
    backend : str, optional
        As for :func:`aces_fast.rerank_batch`, resolved on each worker.
    n_threads : int
        Threads per task (each task reserves that many CPUs of the cluster).
    skip_invalid : bool
        ``False``: a bad row fails the run with a ``ValueError`` naming it (Ray
        wraps it in its task error). ``True``: the output gains the columns
        ``row`` (int64) and ``error`` (string), the input row number on ranked rows too when ``ds`` has a ``row``
        column, null on ranked rows otherwise; a bad row
        has only ``task_id``, ``row`` and ``error`` set.

    Returns
    -------
    ray.data.Dataset
        One row per problem with the columns of :mod:`aces_fast.stream` (lazy:
        nothing runs until it is consumed, e.g. ``.write_parquet(dir)``).
    """
    p = method_params(method, params)  # ValueError for an unknown method, listing the names
    batch_size = check_int(batch_size, "batch_size", minimum=1)
    n_threads = check_int(n_threads, "n_threads", minimum=1)
    return ds.map_batches(_rerank_block,  # type: ignore[arg-type]
                          batch_size=batch_size, batch_format="pyarrow", num_cpus=n_threads,
                          fn_kwargs=dict(method=method, params=p, backend=backend,
                                         n_threads=n_threads, skip_invalid=skip_invalid))


# ---------------------------------------------------------------------------
# the driver side of aces_fast.stream.rerank_dataset(engine="ray")


_EXC_LINE = re.compile(r"^(?:[A-Za-z_][\w.]*\.)?([A-Za-z_]\w*(?:Error|Exception)): (.+)$")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _task_error(exc: BaseException) -> Optional[str]:
    """One line for the exception a Ray task raised, or ``None``.

    Ray keeps the worker's exception only as text (its traceback inside the
    RayTaskError's message); the first ``Type: message`` line that is not Ray's
    own wrapper is the original. ValueError-like errors give their message
    alone, others ``"a Ray task failed: Type: message"``.
    """
    for line in _ANSI.sub("", str(exc)).splitlines():
        match = _EXC_LINE.match(line.strip())
        if match and not line.strip().startswith("ray."):
            kind, message = match.groups()
            if kind in ("ValueError", "TypeError", "InvalidRowError",
                        "BackendUnavailableError"):
                return message
            return f"a Ray task failed: {kind}: {message}"
    return None


def _run(path_in: PathLike, files: Sequence[Any], has_labels: bool, method: str,
         params: Dict[str, Any], commit: Callable[..., None], bar: Any, done: Any,
         duplicates: Dict[int, str], *, batch_size: int, backend: Optional[str],
         n_threads: Optional[int], skip_invalid: bool, address: Optional[str],
         timings: Dict[str, float]) -> None:
    """Run on the cluster and commit each block here, through ``commit(table, rows,
    errors, backend)`` (see :mod:`aces_fast.stream`). ``done``: the input rows an
    earlier run committed (an ``Intervals``); ``duplicates``: ``{row: reason}``,
    committed here as errors before anything runs (``skip_invalid`` only)."""
    from ._commit import Intervals
    from .backends import resolve_backend

    tick = time.perf_counter()
    owner = init(address)
    timings["startup"] = time.perf_counter() - tick
    try:
        used = resolve_backend(backend).name
        todo_dups = sorted(r for r in duplicates if not done.contains(np.array([r]))[0])
        if todo_dups:
            ids = _task_ids_at(files, todo_dups)
            commit(None, np.zeros(0, np.int64),
                   [RowError(r, ids[r], duplicates[r]) for r in todo_dups], used)
            bar.update(len(todo_dups))
        skip = Intervals([(a, b) for a, b in zip(done.starts.tolist(), done.ends.tolist())]
                         + [(r, r + 1) for r in duplicates])
        ds = read_pass_matrices(path_in, batch_size=batch_size, skip_rows=skip)
        out = rerank_dataset(ds, method, batch_size=batch_size, backend=backend,
                             n_threads=n_threads or 1, skip_invalid=True, **params)
        target = results_schema(has_labels).remove_metadata()
        try:
            block: Any
            for block in out.iter_batches(batch_format="pyarrow", batch_size=None):
                if isinstance(block, pa.RecordBatch):
                    block = pa.Table.from_batches([block])
                bad = block.column("error").is_valid().to_numpy(zero_copy_only=False).astype(bool)
                errors = [RowError(r, t, e) for r, t, e in zip(
                    *(block.column(c).filter(pa.array(bad)).to_pylist()
                      for c in ("row", "task_id", "error")))]
                errors.sort(key=lambda e: (e.row is None, e.row))
                if errors and not skip_invalid:
                    raise InvalidRowError(errors[0].message(), errors[0])
                kept = block.filter(pa.array(~bad))
                rows = kept.column("row").to_numpy().astype(np.int64)
                commit(kept.select(target.names).cast(target), rows, errors, used)
                bar.update(block.num_rows)
        except InvalidRowError:
            raise
        except Exception as exc:  # noqa: BLE001 - a task's error arrives wrapped by Ray
            if not isinstance(exc, ray.exceptions.RayError):
                raise
            msg = _task_error(exc)
            if msg is None:
                raise
            raise ValueError(msg) from None
    finally:
        if owner:
            ray.shutdown()


def _task_ids_at(files: Sequence[Any], rows: Sequence[int]) -> Dict[int, Optional[str]]:
    """The task ids of some input rows (reads the ``task_id`` column of their files)."""
    out: Dict[int, Optional[str]] = {}
    for f in files:
        mine = [r for r in rows if f.first_row <= r < f.first_row + f.num_rows]
        if mine:
            col = f.pf.read(columns=["task_id"]).column(0)
            out.update((r, col[r - f.first_row].as_py()) for r in mine)
    return out
