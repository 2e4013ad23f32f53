"""Rerank a Parquet pass-matrix dataset batch by batch: :func:`rerank_dataset`.

Memory is bounded by the batch size, not the dataset: record batches are read
with ``pyarrow.parquet.ParquetFile.iter_batches``, unpacked
(:func:`aces_fast.parquet.decode_batch`), ranked with
:func:`aces_fast.rerank_batch` and written at once.

**Output**: a directory (conventionally named ``OUT.parquet``) of part files
``part-000000.parquet``, ``part-000001.parquet``, ... -- one per input batch,
each written to a hidden temporary name and renamed when complete. Any Parquet
reader takes the directory as one table (``pyarrow.parquet.read_table(OUT)``,
``pandas.read_parquet(OUT)``, ``ray.data.read_parquet(OUT)``; names starting
with ``.`` or ``_`` are ignored). One row per problem:

=============  ===============  ==============================================
column         type             meaning
=============  ===============  ==============================================
``task_id``    string           the input row's task id
``order``      list<int32>      candidate indices, best first
``scores``     list<float64>    candidate scores
``weights``    list<float64>    test weights; null for CodeT and B4
``fallback``   bool             ACES-C fell back to majority vote
``pass@k``     float64          k = 1, 2, 5: exact Pass@k against the labels
                                (:func:`aces_fast.pass_at_k`, ties at random);
                                only when the input has ``labels`` (null for
                                an unlabelled row)
=============  ===============  ==============================================

The schema metadata (``aces_fast`` key) records the method, its parameters and
the backend. Rows come out in input order (minus skipped rows).

**Interruptions**: a Ctrl-C or a kill loses at most the batch in flight; every
part already renamed is complete. ``resume=True`` reads the task ids already in
the output (and the rows already in the errors file) and skips them.

**Bad rows** (see :func:`aces_fast.parquet.decode_batch`) stop the run with a
``ValueError`` naming the row number and task id, unless ``skip_invalid=True``:
then each goes to the errors file (JSON lines ``{"task_id", "row", "reason"}``,
by default ``OUT.errors.jsonl`` next to the output) and the run goes on.
"""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Sequence, Set, Tuple, Union

import numpy as np

from ._registry import DEFAULT_METHOD, get as method_spec, method_params
from ._validation import check_int

__all__ = ["DEFAULT_BATCH_SIZE", "PASS_KS", "RunSummary", "default_errors_path", "pass_at_ks",
           "rerank_dataset", "rerank_table", "results_schema"]

DEFAULT_BATCH_SIZE = 2048
PASS_KS = (1, 2, 5)
RESULTS_VERSION = 1
_PART = "part-{:06d}.parquet"

PathLike = Union[str, Path]


def _arrow():
    """pyarrow, or a clear error (it is an optional extra)."""
    try:
        import pyarrow as pa
        import pyarrow.compute  # noqa: F401 - loaded up front, not inside a timed stage
        import pyarrow.parquet as pq
    except ImportError:
        raise ImportError("rerank-dataset needs pyarrow, which is not installed: "
                          "pip install 'aces_fast[arrow]'") from None
    return pa, pq


def results_schema(has_labels: bool, meta: Optional[Dict[str, Any]] = None) -> Any:
    """The Arrow schema of the output (``meta`` goes into the ``aces_fast`` key)."""
    pa, _ = _arrow()
    fields = [pa.field("task_id", pa.string()), pa.field("order", pa.list_(pa.int32())),
              pa.field("scores", pa.list_(pa.float64())),
              pa.field("weights", pa.list_(pa.float64())), pa.field("fallback", pa.bool_())]
    if has_labels:
        fields += [pa.field(f"pass@{k}", pa.float64()) for k in PASS_KS]
    info = {"format": "rerank-results", "version": RESULTS_VERSION, **(meta or {})}
    return pa.schema(fields, metadata={b"aces_fast": json.dumps(info).encode()})


# ---------------------------------------------------------------------------
# one batch (shared by the local and the Ray engine)


def _np(x: Any) -> np.ndarray:
    if hasattr(x, "detach"):  # a torch tensor from the torch backend
        x = x.detach().cpu().numpy()
    return np.asarray(x)


def _lists(arrays: Sequence[np.ndarray], dtype: Any, value_type: Any) -> Any:
    pa, _ = _arrow()
    offsets = np.zeros(len(arrays) + 1, dtype=np.int32)
    if arrays:
        np.cumsum([a.shape[0] for a in arrays], out=offsets[1:])
        values = np.concatenate(arrays).astype(dtype, copy=False)
    else:
        values = np.zeros(0, dtype)
    return pa.ListArray.from_arrays(pa.array(offsets), pa.array(values, value_type))


def pass_at_ks(scores: Sequence[np.ndarray], labels: Sequence[Optional[np.ndarray]],
               ks: Sequence[int] = PASS_KS) -> Dict[int, np.ndarray]:
    """:func:`aces_fast.pass_at_k` for many rankings and several ``k`` at once.

    Parameters
    ----------
    scores : sequence of float64 arrays (n_t,)
    labels : sequence of 0/1 arrays (n_t,) or None (unlabelled: the result is nan)
    ks : sequence of int >= 1

    Returns
    -------
    dict k -> float64 array (T,)
        Equal to ``pass_at_k(scores[t], labels[t], k)`` bit for bit (a test
        checks it): the same walk, vectorized over the problems of each size
        ``n``. With ``s_k`` the ``k``-th largest score, the levels above it
        fit whole (any correct one there gives 1); in the level of ``s_k``,
        ``g`` tied candidates with ``c`` correct and ``r`` places left, all
        picks miss with probability ``prod_{i<r} (g-c-i)/(g-i)``, multiplied
        in the same order as ``pass_at_k`` does. One sort per problem instead
        of one ``numpy.unique`` per problem and ``k``.
    """
    out = {k: np.full(len(scores), np.nan) for k in ks}
    by_n: Dict[int, List[Tuple[int, np.ndarray]]] = {}
    for t, y in enumerate(labels):
        if y is not None:
            by_n.setdefault(len(y), []).append((t, y))
    for n, items in by_n.items():
        members = [t for t, _ in items]
        S = np.stack([scores[t] for t in members]).astype(np.float64, copy=False)
        Y = np.stack([y for _, y in items]).astype(bool)
        desc = -np.sort(-S, axis=1)
        for k in ks:
            kk = min(k, n)
            sk = desc[:, kk - 1: kk]
            above, level = S > sk, S == sk
            good_above = (above & Y).sum(axis=1)
            room = kk - above.sum(axis=1)
            g = level.sum(axis=1)
            c = (level & Y).sum(axis=1)
            p = np.ones(len(members))
            for i in range(kk):
                active = i < room
                p *= np.where(active, (g - c - i) / np.where(active, g - i, 1), 1.0)
            miss = np.where(room > g - c, 0.0, p)
            out[k][members] = np.where(good_above > 0, 1.0, 1.0 - miss)
    return out


def rerank_table(table: Any, method: str, params: Dict[str, Any], *, rows: Any = 0,
                 has_labels: bool, backend: Optional[str] = None,
                 n_threads: Optional[int] = None, skip_invalid: bool = False,
                 timings: Optional[Dict[str, float]] = None) -> Tuple[Any, List[Any], str]:
    """Rank every problem of one record batch: decode, rerank, Pass@k, encode.

    Parameters
    ----------
    table : pyarrow.RecordBatch or pyarrow.Table
        Rows of the pass-matrix layout (:mod:`aces_fast.parquet`).
    method, params
        A method name and its complete parameters (``_registry.method_params``).
    rows : int, sequence of int, or None
        Input row numbers for error reports (see ``decode_batch``).
    has_labels : bool
        Whether the output has the ``pass@k`` columns (the whole run's schema).
    backend, n_threads
        Passed to :func:`aces_fast.rerank_batch`.
    skip_invalid : bool
        ``False``: a bad row raises :class:`~aces_fast.parquet.InvalidRowError`
        (a ``ValueError``; the first bad row of the batch).
        ``True``: bad rows are returned as errors and left out.
    timings : dict, optional
        Seconds spent are added under ``decode``, ``rerank``, ``pass@k``, ``encode``.

    Returns
    -------
    (pyarrow.Table, list of RowError, str)
        The results (schema :func:`results_schema`, without metadata), the bad
        rows, and the backend that ran (``""`` when nothing ran).
    """
    from .batch import rerank_batch
    from .parquet import InvalidRowError, decode_batch

    pa, _ = _arrow()
    tick = time.perf_counter()
    dec = decode_batch(table, rows)
    if dec.errors and not skip_invalid:
        raise InvalidRowError(dec.errors[0].message(), dec.errors[0])
    t_decode = time.perf_counter()
    results = rerank_batch(dec.B, method, backend=backend, n_threads=n_threads, **params)
    t_rerank = time.perf_counter()
    cols: Dict[str, Any] = {"task_id": pa.array(dec.task_ids, pa.string())}
    scores = [_np(r.scores) for r in results]
    passk: Dict[int, Any] = {}
    if has_labels:
        labels = dec.labels or [None] * len(results)
        missing = np.array([y is None for y in labels], dtype=bool)
        for k, values in pass_at_ks(scores, labels, PASS_KS).items():
            passk[k] = pa.array(values, pa.float64(), mask=missing)
    t_pass = time.perf_counter()
    cols["order"] = _lists([_np(r.order) for r in results], np.int32, pa.int32())
    cols["scores"] = _lists(scores, np.float64, pa.float64())
    if results and results[0].weights is not None:
        cols["weights"] = _lists([_np(r.weights) for r in results], np.float64, pa.float64())
    else:
        cols["weights"] = pa.nulls(len(results), pa.list_(pa.float64()))
    cols["fallback"] = pa.array([bool(r.fallback) for r in results], pa.bool_())
    for k in passk:
        cols[f"pass@{k}"] = passk[k]
    out = pa.Table.from_pydict(cols, schema=results_schema(has_labels).remove_metadata())
    t_end = time.perf_counter()
    if timings is not None:
        for key, dt in (("decode", t_decode - tick), ("rerank", t_rerank - t_decode),
                        ("pass@k", t_pass - t_rerank), ("encode", t_end - t_pass)):
            timings[key] = timings.get(key, 0.0) + dt
    return out, dec.errors, results[0].backend if results else ""


def drop_task_ids(table: Any, task_ids: Optional[Set[str]]) -> Tuple[Any, Optional[np.ndarray]]:
    """``table`` without the rows whose task id is in ``task_ids``, and the kept
    rows' positions (``None`` when nothing was dropped)."""
    if not task_ids:
        return table, None
    pa, _ = _arrow()
    import pyarrow.compute as pc

    done = pc.is_in(table.column("task_id"), value_set=pa.array(list(task_ids), pa.string()))
    keep = np.flatnonzero(~np.asarray(done.to_numpy(zero_copy_only=False), dtype=bool))
    if keep.size == table.num_rows:
        return table, None
    return table.take(pa.array(keep)), keep


# ---------------------------------------------------------------------------
# output directory, errors file, progress


def default_errors_path(path_out: PathLike) -> Path:
    """``OUT.parquet`` -> ``OUT.errors.jsonl`` (next to the output directory)."""
    p = Path(path_out)
    stem = p.name[: -len(".parquet")] if p.name.endswith(".parquet") else p.name
    return p.with_name(stem + ".errors.jsonl")


class _Parts:
    """The output directory: complete part files only (write to a hidden temporary
    name, then rename), resumable."""

    def __init__(self, path: PathLike, resume: bool, meta: Dict[str, Any]):
        _, pq = _arrow()
        self.dir = Path(path)
        self.meta = meta
        if self.dir.exists() and not self.dir.is_dir():
            raise ValueError(f"{self.dir}: exists and is not a directory; rerank-dataset writes "
                             "a directory of part files there")
        self.dir.mkdir(parents=True, exist_ok=True)
        for stale in self.dir.glob(".part-*.tmp"):  # a batch in flight when a run was killed
            stale.unlink()
        parts = sorted(self.dir.glob("part-*.parquet"))
        self.done: Set[str] = set()
        if parts and not resume:
            raise ValueError(f"{self.dir}: already holds results ({len(parts)} part files); "
                             "pass --resume (resume=True) to continue that run, or remove it")
        for part in parts:
            try:
                pf = pq.ParquetFile(str(part))
            except Exception as exc:  # noqa: BLE001 - any unreadable part is fatal here
                raise ValueError(f"{part}: cannot read as Parquet ({exc}); was it written by "
                                 "another program?") from None
            self._check_meta(pf.schema_arrow, part)
            self.done.update(pf.read(columns=["task_id"]).column("task_id").to_pylist())
        self.next = 1 + max((int(p.name[5:11]) for p in parts), default=-1)
        self.written = 0

    def _check_meta(self, sch: Any, part: Path) -> None:
        try:
            old = json.loads((sch.metadata or {})[b"aces_fast"])
        except (KeyError, ValueError):
            raise ValueError(f"{part}: not written by aces-fast rerank-dataset (no 'aces_fast' "
                             "metadata); cannot resume into this directory") from None
        for key in ("method", "params"):
            if old.get(key) != self.meta[key]:
                raise ValueError(f"{self.dir}: was written with {key} {old.get(key)!r}, this run "
                                 f"has {self.meta[key]!r}; --resume needs the same method and "
                                 "parameters (or write to a new directory)")

    def write(self, table: Any, backend: str) -> None:
        """Write one complete part (skipped when ``table`` is empty, unless the
        directory would otherwise stay without any part)."""
        _, pq = _arrow()
        if table.num_rows == 0 and (self.next > 0 or self.written):
            return
        meta = dict(self.meta, backend=backend)
        table = table.replace_schema_metadata({b"aces_fast": json.dumps(meta).encode()})
        final = self.dir / _PART.format(self.next)
        tmp = self.dir / f".{final.name}.tmp"
        try:
            # Dictionary encoding triples the write time of these columns (mostly
            # distinct floats and short permutations) and makes the file larger.
            pq.write_table(table, str(tmp), use_dictionary=False)
            os.replace(tmp, final)
        finally:
            if tmp.exists():
                tmp.unlink()
        self.next += 1
        self.written += table.num_rows


class _Errors:
    """The errors file: JSON lines written (and flushed) per batch."""

    def __init__(self, path: Path, resume: bool):
        self.path = path
        self.seen: Set[Any] = set()
        self.count = 0
        self._fh: Any = None
        if resume and path.exists():
            with open(path, encoding="utf-8") as fh:
                for line in fh:
                    try:
                        obj = json.loads(line)
                    except ValueError:
                        continue  # a line cut by a kill; its row is reported again
                    self.seen.add((obj.get("row"), obj.get("task_id")))
        elif path.exists():
            path.unlink()  # belongs to an earlier run of this output

    def write(self, errors: Sequence[Any]) -> None:
        new = [e for e in errors if (e.row, e.task_id) not in self.seen]
        self.count += len(errors)
        if not new:
            return
        if self._fh is None:
            self._fh = open(self.path, "a", encoding="utf-8")
        for e in new:
            self._fh.write(json.dumps(e.to_dict()) + "\n")
            self.seen.add((e.row, e.task_id))
        self._fh.flush()

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()


class _Progress:
    """tqdm when installed, else a counter on stderr; nothing when disabled."""

    def __init__(self, total: int, enabled: bool):
        self.total, self.enabled, self.count = total, enabled, 0
        self._bar: Any = None
        self._last = 0.0
        self._start = time.monotonic()
        if enabled:
            try:
                from tqdm.auto import tqdm
            except ImportError:
                return
            self._bar = tqdm(total=total, unit="task", file=sys.stderr, leave=False,
                             desc="rerank-dataset")

    def update(self, k: int) -> None:
        self.count += k
        if not self.enabled:
            return
        if self._bar is not None:
            self._bar.update(k)
            return
        now = time.monotonic()
        if now - self._last >= 0.5 or self.count >= self.total:
            self._last = now
            rate = self.count / max(now - self._start, 1e-9)
            print(f"\rrerank-dataset: {self.count}/{self.total} tasks ({rate:,.0f}/s)",
                  end="", file=sys.stderr, flush=True)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
        elif self.enabled and self.count:
            print(file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------
# the run


@dataclass
class RunSummary:
    """What :func:`rerank_dataset` did.

    ``rows``: input rows; ``written``: result rows written by this run;
    ``resumed``: rows skipped because an earlier run had done them (results or
    errors); ``invalid``: bad rows sent to the errors file; ``seconds``: wall
    time; ``timings``: seconds per stage (local engine: ``read``, ``decode``,
    ``rerank``, ``pass@k``, ``encode``, ``write``; Ray engine: ``startup``
    (connecting or starting the cluster) and ``write`` on the driver, the rest
    runs on the workers).
    """

    output: Path
    errors_path: Optional[Path]
    rows: int
    written: int
    resumed: int
    invalid: int
    seconds: float
    engine: str
    timings: Dict[str, float] = field(default_factory=dict)

    @property
    def tasks_per_s(self) -> float:
        """Problems ranked (written) per second of wall time."""
        return self.written / self.seconds if self.seconds > 0 else float("nan")


def _open_inputs(path_in: PathLike) -> Tuple[List[Tuple[Path, Any]], bool, bool]:
    from .parquet import _open, check_schema, input_files

    opened = []
    has_labels = has_tc = False
    for f in input_files(path_in):
        pf = _open(f)
        lab, tc = check_schema(pf.schema_arrow, str(f))
        has_labels, has_tc = has_labels or lab, has_tc or tc
        opened.append((f, pf))
    return opened, has_labels, has_tc


def _local_batches(inputs: List[Tuple[Path, Any]], batch_size: int, done: Set[str],
                   timings: Dict[str, float]) -> Iterator[Tuple[Any, Any, int]]:
    """``(table, row numbers, rows consumed)`` per input batch, done task ids removed."""
    from .parquet import OPTIONAL_COLUMNS, REQUIRED_COLUMNS

    row = 0
    for _, pf in inputs:
        cols = [c for c in REQUIRED_COLUMNS + OPTIONAL_COLUMNS if c in pf.schema_arrow.names]
        it = pf.iter_batches(batch_size=batch_size, columns=cols)
        while True:
            tick = time.perf_counter()
            batch = next(it, None)
            timings["read"] = timings.get("read", 0.0) + time.perf_counter() - tick
            if batch is None:
                break
            first, size = row, batch.num_rows
            row += size
            table, keep = drop_task_ids(batch, done)
            rows = first if keep is None else first + keep
            yield table, rows, size


def rerank_dataset(path_in: PathLike, path_out: PathLike, method: str = DEFAULT_METHOD, *,
                   engine: str = "local", batch_size: int = DEFAULT_BATCH_SIZE,
                   backend: Optional[str] = None, n_threads: Optional[int] = None,
                   skip_invalid: bool = False, errors_path: Optional[PathLike] = None,
                   resume: bool = False, progress: Optional[bool] = None,
                   address: Optional[str] = None, **params: Any) -> RunSummary:
    """Rerank every problem of a Parquet pass-matrix dataset into a results directory.

    Parameters
    ----------
    path_in : str or Path
        A Parquet file of the pass-matrix layout (:mod:`aces_fast.parquet`), or a
        directory of such files (read in name order).
    path_out : str or Path
        The output directory of part files (see the module docstring).
    method : str
        A name of :data:`aces_fast.METHODS`; ``**params`` are its parameters
        (e.g. ``lr=0.05`` for ACES-O), as for :func:`aces_fast.rerank_batch`.
    engine : {"local", "ray"}
        ``"local"``: this process. ``"ray"``: Ray Data tasks on the cluster at
        ``address`` (or the one already initialized, or a new local one); the
        input must be readable from the workers; results are written here.
    batch_size : int >= 1
        Problems per batch: bounds memory (about ``batch_size`` unpacked
        matrices and their results) and is the unit lost on an interruption.
    backend, n_threads
        As for :func:`aces_fast.rerank_batch` (``n_threads`` per Ray task with
        ``engine="ray"``, default 1 there).
    skip_invalid : bool
        Send bad rows to the errors file and go on, instead of raising.
    errors_path : str or Path, optional
        Default: :func:`default_errors_path` of ``path_out``. Created only when
        a bad row occurs.
    resume : bool
        Continue an earlier run into ``path_out`` (same method and parameters):
        skip the task ids already written and the rows already reported.
        Without it an output directory holding results is an error.
    progress : bool, optional
        Progress on stderr; default: when stderr is a terminal.

    Returns
    -------
    RunSummary

    Raises
    ------
    ValueError
        Unknown method or parameter, unreadable input, a schema that is not the
        layout, a bad row (unless ``skip_invalid``), an output directory holding
        results of another run or (without ``resume``) any results.
    ImportError
        pyarrow (or, for ``engine="ray"``, ray) is not installed.

    Notes
    -----
    Time and memory: O(dataset) time, O(batch_size) memory (plus the set of
    done task ids when resuming). Results equal :func:`aces_fast.rerank_batch`
    on the same matrices bit for bit, whatever the engine and batch size.
    """
    _arrow()
    from .parquet import InvalidRowError

    p = method_params(method, params)  # ValueError for an unknown method, listing the names
    method = method_spec(method).name  # the canonical spelling (names are case-insensitive)
    batch_size = check_int(batch_size, "batch_size", minimum=1)
    if n_threads is not None:
        n_threads = check_int(n_threads, "n_threads", minimum=1)
    if engine not in ("local", "ray"):
        raise ValueError(f"engine must be 'local' or 'ray'; got {engine!r}")
    if address is not None and engine != "ray":
        raise ValueError("address applies only to engine='ray'")
    from .backends import check_backend_choice

    check_backend_choice(backend)  # a typo fails now, not after the output exists
    start = time.perf_counter()
    inputs, has_labels, _ = _open_inputs(path_in)
    total = sum(pf.metadata.num_rows for _, pf in inputs)
    from . import __version__

    meta = json.loads(json.dumps({"format": "rerank-results", "version": RESULTS_VERSION,
                                  "method": method, "params": p, "aces_fast": __version__}))
    parts = _Parts(path_out, resume, meta)
    errors = _Errors(Path(errors_path) if errors_path is not None
                     else default_errors_path(path_out), resume)
    show = sys.stderr.isatty() if progress is None else bool(progress)
    bar = _Progress(total, show)
    timings: Dict[str, float] = {}
    resumed = 0

    def emit(table: Any, errs: Sequence[Any], backend_used: str) -> None:
        if errs:
            errors.write(errs)
        tick = time.perf_counter()
        parts.write(table, backend_used)
        timings["write"] = timings.get("write", 0.0) + time.perf_counter() - tick

    try:
        if engine == "local":
            for table, rows, size in _local_batches(inputs, batch_size, parts.done, timings):
                table, rows = _drop_reported(table, rows, errors.seen)
                resumed += size - table.num_rows
                if table.num_rows:
                    out, errs, used = rerank_table(
                        table, method, p, rows=rows, has_labels=has_labels, backend=backend,
                        n_threads=n_threads, skip_invalid=skip_invalid, timings=timings)
                    emit(out, errs, used)
                bar.update(size)
        else:
            from . import ray as ray_engine

            resumed = ray_engine._run(path_in, inputs, has_labels, method, p, emit, bar, parts.done,
                                      errors.seen, batch_size=batch_size, backend=backend,
                                      n_threads=n_threads, skip_invalid=skip_invalid,
                                      address=address, timings=timings)
        if parts.next == 0:  # nothing to rank: still leave a readable (empty) table
            parts.write(results_schema(has_labels).empty_table(), "")
    except InvalidRowError as exc:
        raise InvalidRowError(f"{path_in}: {exc}", exc.error) from None
    finally:
        bar.close()
        errors.close()
    return RunSummary(Path(path_out), errors.path if errors.count or errors.path.exists()
                      else None, total, parts.written, resumed, errors.count,
                      time.perf_counter() - start, engine, timings)


def _drop_reported(table: Any, rows: Any, seen: Set[Any]) -> Tuple[Any, Any]:
    """Leave out rows already in the errors file (a resumed run)."""
    if not seen:
        return table, rows
    pa, _ = _arrow()
    nums = (np.arange(rows, rows + table.num_rows) if isinstance(rows, (int, np.integer))
            else np.asarray(rows))
    tids = table.column("task_id").to_pylist()
    keep = [i for i in range(table.num_rows) if (int(nums[i]), tids[i]) not in seen]
    if len(keep) == table.num_rows:
        return table, rows
    return table.take(pa.array(keep, pa.int64())), nums[keep]
