"""Rerank a Parquet pass-matrix dataset batch by batch: :func:`rerank_dataset`.

Memory is bounded by the batch size, not the dataset: record batches are read
with ``pyarrow.parquet.ParquetFile.iter_batches``, unpacked
(:func:`aces_fast.parquet.decode_batch`), ranked with
:func:`aces_fast.rerank_batch` and written at once.

**Output**: a directory (conventionally named ``OUT.parquet``) of part files
``part-000000-<run>.parquet``, ... -- one per input batch, committed under the
protocol of :mod:`aces_fast._commit` (one writer at a time, an atomic manifest
of parts with their checksums in ``_aces_fast/``). Any Parquet reader takes
the directory as one table (``pyarrow.parquet.read_table(OUT)``,
``pandas.read_parquet(OUT)``, ``ray.data.read_parquet(OUT)``; names starting
with ``.`` or ``_`` are ignored) and sees committed parts only. One row per
problem:

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

**Interruptions**: a Ctrl-C or a kill loses at most the batches in flight;
``resume=True`` verifies the committed parts and skips the input rows they and
the errors file account for (a range check per row group).

**Bad rows** (see :func:`aces_fast.parquet.decode_batch`; also duplicate task
ids and the rows of a row group that fails its page checksums) stop the run
with a ``ValueError`` naming the row number and task id, unless
``skip_invalid=True``: then each goes to the errors file (JSON lines
``{"task_id", "row", "reason"}``, by default ``OUT.errors.jsonl`` next to the
output), committed with the batch, and the run goes on.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ._engine import (
    DEFAULT_BATCH_SIZE,
    ENGINES,
    PASS_KS,
    RESULTS_VERSION,
    Commit,
    Engine,
    Job,
    auto_batch_size,
    check_batch_size,
    pass_at_ks,
    require_arrow,
    rerank_table,
    results_schema,
)
from ._parts import encode_part, part_writer
from ._registry import DEFAULT_METHOD, method_params
from ._registry import get as method_spec
from ._types import PathLike
from ._validation import check_int

if TYPE_CHECKING:
    from concurrent.futures import Future

    from ._commit import StagedPart

__all__ = [
    "DEFAULT_BATCH_SIZE",
    "ENGINES",
    "PASS_KS",
    "Engine",
    "Job",
    "LocalEngine",
    "RunSummary",
    "default_errors_path",
    "default_workers",
    "get_engine",
    "pass_at_ks",
    "rerank_dataset",
    "rerank_table",
    "results_schema",
]

# ---------------------------------------------------------------------------
# output directory, errors file, progress


def default_errors_path(path_out: PathLike) -> Path:
    """``OUT.parquet`` -> ``OUT.errors.jsonl`` (next to the output directory)."""
    p = Path(path_out)
    stem = p.name[: -len(".parquet")] if p.name.endswith(".parquet") else p.name
    return p.with_name(stem + ".errors.jsonl")


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
            self._bar = tqdm(
                total=total, unit="task", file=sys.stderr, leave=False, desc="rerank-dataset"
            )

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
            print(
                f"\rrerank-dataset: {self.count}/{self.total} tasks ({rate:,.0f}/s)",
                end="",
                file=sys.stderr,
                flush=True,
            )

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
    time; ``timings``: seconds per stage, summed over the threads that ran it
    (local engine: ``read``, ``decode``, ``rerank``, ``pass@k``, ``encode``,
    ``write``; a batch ranked straight from its packed bytes counts its
    unpacking under ``rerank``; ``write`` is the commit thread's, waiting for a
    part's staging included; Ray engine: ``startup`` (connecting or starting
    the cluster) and ``write`` on the driver, the rest runs on the workers);
    ``batch_size``: the rows per batch the run used (``"auto"`` resolved).
    """

    output: Path
    errors_path: Path | None
    rows: int
    written: int
    resumed: int
    invalid: int
    seconds: float
    engine: str
    timings: dict[str, float] = field(default_factory=dict)
    batch_size: int = 0

    @property
    def tasks_per_s(self) -> float:
        """Problems ranked (written) per second of wall time."""
        return self.written / self.seconds if self.seconds > 0 else float("nan")


@dataclass(frozen=True)
class EncodedPart:
    """A batch's results already encoded, their staging under way
    (:meth:`_Committer.encode`): what an engine may hand to ``commit`` instead of
    the table, so that encoding runs on the engine's threads and the part file's
    write and fsync on the committer's staging threads, several at once, rather
    than on the one thread that commits."""

    staged: Future[StagedPart]  # the part file, being written to staging/ and fsynced
    num_rows: int
    task_ids: tuple[str | None, str | None]  # the first and the last
    sha256: str  # of data (hashlib releases the GIL: hashed on the engine's thread)


#: part files written to staging/ at once (:class:`_Committer`): each write and
#: fsync mostly waits on the disk, so neither the ranking threads nor the one
#: commit thread should wait for them, and several proceed together
_STAGING_THREADS = 4


class _Committer:
    """Turns ranked batches into commits of the results directory. Part files are
    staged (:meth:`ResultsDir.stage`) by a few threads of its own, in parallel and
    ahead of the commits, which then only rename them and write the commit
    record; :meth:`close` waits for them."""

    def __init__(self, out: Any, meta: dict[str, Any], timings: dict[str, float]):
        from concurrent.futures import ThreadPoolExecutor

        self.out, self.meta, self.timings = out, meta, timings
        self._staging = ThreadPoolExecutor(_STAGING_THREADS, thread_name_prefix="aces-fast-stage")

    def encode(self, table: Any, backend: str) -> EncodedPart:
        """``table``'s part file, with this run's metadata, handed to the staging
        threads (thread-safe)."""
        col = table.column("task_id")
        ids = (col[0].as_py(), col[-1].as_py()) if len(col) else (None, None)
        data = encode_part(table, dict(self.meta, backend=backend))
        digest = hashlib.sha256(data).hexdigest()
        return EncodedPart(self._staging.submit(self.out.stage, data), table.num_rows, ids, digest)

    def close(self) -> None:
        """Wait for the staging threads (a part they write after a failed run is
        deleted by the next run that opens the directory)."""
        self._staging.shutdown(wait=True)

    def __call__(
        self,
        table: Any,
        rows: np.ndarray,
        errors: Sequence[Any],
        backend: str,
        *,
        empty: bool = False,
    ) -> None:
        """Commit ``table`` (results of the input rows ``rows``; a pyarrow Table or
        its :class:`EncodedPart`) and ``errors``; nothing when both are empty,
        unless ``empty`` (an empty part)."""
        tick = time.perf_counter()
        rows = np.asarray(rows, dtype=np.int64)
        part = None
        if table is not None and (table.num_rows or empty):
            part = table if isinstance(table, EncodedPart) else self.encode(table, backend)
        lines = [json.dumps(e.to_dict()) for e in errors]
        err_rows = np.array([e.row for e in errors if e.row is not None], dtype=np.int64)
        if part is not None:
            self.out.commit(
                part.staged.result(),
                part.num_rows,
                part.task_ids,
                rows,
                lines,
                err_rows,
                part.sha256,
            )
        elif lines:
            self.out.commit(None, 0, (None, None), rows, lines, err_rows)
        self.timings["write"] = self.timings.get("write", 0.0) + time.perf_counter() - tick


def _prefetch(items: Any, depth: int = 2) -> Any:
    """Iterate ``items`` on a thread of its own, up to ``depth`` items ahead: the
    next batch is read (pyarrow, GIL released) while this one is ranked. Items
    and the producer's exception arrive in order; closing the generator (an
    error or Ctrl-C in the consumer) stops the producer at its next item."""
    import queue
    import threading

    q: Any = queue.Queue(maxsize=depth)
    stop = threading.Event()
    end = object()

    def produce() -> None:
        try:
            for item in items:
                while not stop.is_set():
                    try:
                        q.put((item, None), timeout=0.1)
                        break
                    except queue.Full:
                        continue
                if stop.is_set():
                    return
            q.put((end, None))
        except BaseException as exc:  # re-raised in the consumer
            q.put((end, exc))
        finally:
            # a generator stopped early is closed here, on its own thread, not
            # whenever it is collected: its reader threads stop now
            close = getattr(items, "close", None)
            if close is not None:
                close()

    thread = threading.Thread(target=produce, name="aces-fast-read", daemon=True)
    thread.start()
    try:
        while True:
            item, exc = q.get()
            if item is end:
                if exc is not None:
                    raise exc
                return
            yield item
    finally:
        stop.set()
        while thread.is_alive():  # let a producer blocked on a full queue see the flag
            try:
                q.get(timeout=0.1)
            except queue.Empty:
                pass
        thread.join()


class _Writer:
    """Commits on a thread of its own, in order: encoding a part, its checksum and
    the fsyncs of a commit (milliseconds each, GIL released) overlap the ranking
    of the next batch. At most ``depth`` ranked batches wait, so memory stays
    at a few batches. A commit's error (a full disk) is raised in the caller at
    its next call or at :meth:`close`; after an error nothing more is committed.
    A run that stops (an error, Ctrl-C) still commits what it has ranked.
    """

    def __init__(self, commit: Any, depth: int = 1):
        import queue
        import threading

        self._commit = commit
        self._queue: Any = queue.Queue(maxsize=depth)
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._loop, name="aces-fast-commit", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            if self._error is not None:
                continue
            try:
                self._commit(*item[0], **item[1])
            except BaseException as exc:  # handed to the caller's thread
                self._error = exc

    def _raise(self) -> None:
        if self._error is not None:
            raise self._error

    def encode(self, table: Any, backend: str) -> Any:
        """The committer's :meth:`_Committer.encode`, for engines that encode on
        their own threads (thread-safe)."""
        return self._commit.encode(table, backend)

    def __call__(self, *args: Any, **kwargs: Any) -> None:
        self._raise()
        self._queue.put((args, kwargs))

    def close(self, quiet: bool = False) -> None:
        """Wait for the queued commits (a batch already ranked is worth keeping, and
        one commit takes milliseconds); raise a commit's error unless ``quiet``
        (another error is on its way out)."""
        if self._thread.is_alive():
            self._queue.put(None)
            self._thread.join()
        if not quiet:
            self._raise()


def default_workers() -> int:
    """Batches a local run ranks at once by default: the cores this process may
    run on (``os.sched_getaffinity`` where there is one, else ``os.cpu_count``)."""
    import os

    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # macOS, Windows
        return max(1, os.cpu_count() or 1)


class LocalEngine:
    """The ``"local"`` engine: this process reads the input batch by batch (on a
    thread of its own, ahead of the ranking; from eight threads on, row groups
    are also read ahead on ``threads // 4`` reader threads,
    :func:`aces_fast._input.reader_threads`) and ranks ``job.n_threads`` batches
    at once (default :func:`default_workers`), each on one thread: decoding,
    ranking and Pass@k in compiled code with the GIL released, then encoding its
    part file (:mod:`aces_fast._parts`, GIL released). Batches are committed in input order, so
    the output does not depend on the number of threads. With one thread, each
    batch is ranked with the kernels' own threads instead (``n_threads=1``:
    one). Memory: about ``2 * threads + 2`` batches, plus up to
    ``2 * readers`` row groups read ahead (each at most
    :data:`aces_fast._input.READ_AHEAD_BYTES`).
    """

    name = "local"

    @staticmethod
    def _workers(n_threads: int | None) -> int:
        return default_workers() if n_threads is None else n_threads

    def batches_in_flight(self, n_threads: int | None) -> int:
        """``2 * threads + 2`` (see the class docstring)."""
        return 2 * self._workers(n_threads) + 2

    def run(self, job: Job, commit: Commit, progress: Callable[[int], None]) -> None:
        """See :meth:`aces_fast._engine.Engine.run`."""
        import collections
        from concurrent.futures import ThreadPoolExecutor

        from ._input import read_batches, reader_threads

        workers = self._workers(job.n_threads)
        kernel_threads = job.n_threads if workers == 1 else 1
        encode = getattr(commit, "encode", None)  # a _Writer of this module encodes
        batches = _prefetch(
            read_batches(
                job.files,
                job.batch_size,
                job.done,
                job.duplicates,
                job.skip_invalid,
                job.timings,
                readers=reader_threads(workers),
            ),
            depth=workers + 1,
        )

        def rank(batch: Any) -> tuple[Any, np.ndarray, list[Any], str, dict[str, float]]:
            # on a worker: its own timings, merged by the caller (dict updates
            # from several threads could lose one)
            timings: dict[str, float] = {}
            res, errs, ran, rows = None, list(batch.errors), job.backend_name, batch.rows
            if batch.table is not None and batch.table.num_rows:
                res, bad, ran = rerank_table(
                    batch.table,
                    job.method,
                    job.params,
                    rows=batch.rows,
                    has_labels=job.has_labels,
                    backend=job.backend,
                    n_threads=kernel_threads,
                    skip_invalid=job.skip_invalid,
                    timings=timings,
                )
                ran = ran or job.backend_name
                if bad:
                    bad_rows = np.array([e.row for e in bad], dtype=np.int64)
                    rows = rows[~np.isin(rows, bad_rows)]
                    errs = sorted(errs + bad, key=lambda e: e.row)
                if encode is not None and res.num_rows:
                    tick = time.perf_counter()
                    res = encode(res, ran)
                    timings["encode"] = timings.get("encode", 0.0) + time.perf_counter() - tick
            return res, rows, errs, ran, timings

        def finish(batch: Any, out: tuple[Any, np.ndarray, list[Any], str, dict[str, float]]):
            res, rows, errs, ran, timings = out
            for key, dt in timings.items():
                job.timings[key] = job.timings.get(key, 0.0) + dt
            commit(res, rows, errs, ran)
            progress(batch.seen)

        with contextlib.closing(batches):  # stops the reading thread on any way out
            if workers == 1:
                for batch in batches:
                    finish(batch, rank(batch))
                return
            pool = ThreadPoolExecutor(workers, thread_name_prefix="aces-fast-rank")
            pending: collections.deque[tuple[Any, Any]] = collections.deque()

            def commit_oldest() -> None:
                b, fut = pending.popleft()
                finish(b, fut.result())  # a failed batch raises here

            try:
                while True:
                    try:
                        batch = next(batches, None)
                    except BaseException:
                        # the input failed (or Ctrl-C while reading): the batches
                        # read before are ranked in milliseconds and still
                        # committed, in order, up to one that failed itself
                        while pending and pending[0][1].exception() is None:
                            commit_oldest()
                        raise
                    if batch is None:
                        break
                    pending.append((batch, pool.submit(rank, batch)))
                    if len(pending) > workers:  # keep every worker busy, no more
                        commit_oldest()
                while pending:
                    commit_oldest()
            finally:
                # an error: batches not yet committed are dropped (the running
                # ones finish in milliseconds; the waiting ones never start)
                pool.shutdown(wait=True, cancel_futures=True)


def get_engine(name: str) -> Engine:
    """The engine called ``name``: ``"local"`` (:class:`LocalEngine`) or ``"ray"``
    (:class:`aces_fast.ray.RayEngine`).

    Raises
    ------
    ValueError
        An unknown name.
    ImportError
        ``"ray"`` without ray installed.
    """
    if name == "local":
        return LocalEngine()
    if name == "ray":
        from .ray import RayEngine  # imports ray: only when asked for

        return RayEngine()
    raise ValueError(f"engine must be one of {', '.join(map(repr, ENGINES))}; got {name!r}")


def _header(
    identity: Any, method: str, params: dict[str, Any], backend: str, has_labels: bool
) -> dict[str, Any]:
    from . import __version__

    return json.loads(
        json.dumps(
            {
                "method": method,
                "params": params,
                "backend": backend,
                "aces_fast": __version__,
                "has_labels": has_labels,
                "input": identity,
            }
        )
    )


def rerank_dataset(
    path_in: PathLike,
    path_out: PathLike,
    method: str = DEFAULT_METHOD,
    *,
    engine: str = "local",
    batch_size: int | str = DEFAULT_BATCH_SIZE,
    backend: str | None = None,
    n_threads: int | None = None,
    skip_invalid: bool = False,
    errors_path: PathLike | None = None,
    resume: bool = False,
    restart: bool = False,
    progress: bool | None = None,
    address: str | None = None,
    **params: Any,
) -> RunSummary:
    """Rerank every problem of a Parquet pass-matrix dataset into a results directory.

    Parameters
    ----------
    path_in : str or Path
        A Parquet file of the pass-matrix layout (:mod:`aces_fast.parquet`), or a
        directory of such files (read in name order).
    path_out : str or Path
        The output directory of part files, under the commit protocol of
        ``docs/parquet.md`` (one writer at a time, a manifest of committed parts).
    method : str
        A name of :data:`aces_fast.METHODS`; ``**params`` are its parameters
        (e.g. ``lr=0.05`` for ACES-O), as for :func:`aces_fast.rerank_batch`.
    engine : {"local", "ray"}
        ``"local"``: this process. ``"ray"``: Ray Data tasks on the cluster at
        ``address`` (or a new local one); the input must be readable from the
        workers; results are committed here.
    batch_size : int >= 1 or "auto"
        Problems per batch: bounds memory (a few batches per thread, each about
        ``batch_size`` matrices and their results) and is the unit lost on an
        interruption. ``"auto"`` (default): about
        :data:`aces_fast._engine.AUTO_BATCH_BYTES` of input per batch (less from
        5 local threads on), from the input's Parquet footers
        (:func:`aces_fast._engine.auto_batch_size`: 8 192 problems of 100x50,
        about 500 of 200x500); ``RunSummary.batch_size`` says what was used.
    backend : str, optional
        As for :func:`aces_fast.rerank_batch`.
    n_threads : int >= 1, optional
        ``engine="local"``: batches ranked at once, each on one thread (default:
        every core this process may use, :func:`default_workers`; with 1, the
        batch's tasks are spread over the kernels' threads instead).
        ``engine="ray"``: threads per Ray task (default 1). The results never
        depend on it.
    skip_invalid : bool
        Send bad rows (malformed, duplicate task ids, rows of a damaged row
        group) to the errors file and go on, instead of raising.
    errors_path : str or Path, optional
        Default: :func:`default_errors_path` of ``path_out``. Created only when
        a bad row occurs.
    resume : bool
        Continue the run recorded in ``path_out``: its committed parts are
        verified and kept, the rows they (and the errors file) account for are
        skipped. Refused when the input, method, parameters, backend or
        aces_fast version differ.
    restart : bool
        Discard the results recorded in ``path_out`` (foreign files are moved
        aside into ``_aces_fast/unknown/``) and start over.
    progress : bool, optional
        Progress on stderr; default: when stderr is a terminal.
    address : str, optional
        ``engine="ray"`` only: a Ray cluster to connect to (``"auto"``: the one
        ``RAY_ADDRESS`` or a running local cluster names).

    Returns
    -------
    RunSummary

    Raises
    ------
    ValueError
        Unknown method or parameter, unreadable input, a schema that is not the
        layout, a bad row, a duplicate task id or a damaged row group (unless
        ``skip_invalid``), an output directory holding results without
        ``resume``/``restart``, or one that cannot be resumed (changed input,
        method, parameters; see the message), or an unknown
        ``ACES_FAST_PART_WRITER`` (:mod:`aces_fast._parts`).
    OSError
        The output directory is locked by another run (``OutputBusyError``,
        naming its pid), or the disk is full (the message says so and how to go
        on).
    ImportError
        pyarrow (or, for ``engine="ray"``, ray) is not installed.
    aces_fast.ray.RayEngineError
        ``engine="ray"``: the cluster cannot be reached or Ray failed (one line
        starting ``Ray:``, naming the likely cause).

    Notes
    -----
    Time: O(dataset) for a new run; a resumed run reads only the row groups
    that hold rows still to do, plus one pass over the input (its checksum,
    the task ids) and over the committed parts (their checksums). Memory:
    O(batch_size * threads) plus the input's task ids during the duplicate check.
    Results equal :func:`aces_fast.rerank_batch` on the same matrices bit for
    bit, whatever the engine and batch size.
    """
    require_arrow()
    from concurrent.futures import ThreadPoolExecutor

    from ._commit import ResultsDir, file_identity
    from ._input import duplicate_rows, open_inputs, task_ids_at
    from .backends import check_backend_choice, resolve_backend
    from .parquet import InvalidRowError, RowError

    p = method_params(method, params)  # ValueError for an unknown method, listing the names
    method = method_spec(method).name  # the canonical spelling (names are case-insensitive)
    batch_size = check_batch_size(batch_size)
    if n_threads is not None:
        n_threads = check_int(n_threads, "n_threads", minimum=1)
    runner = get_engine(engine)  # ValueError for an unknown name; ImportError without ray
    if address is not None and engine != "ray":
        raise ValueError("address applies only to engine='ray'")
    if resume and restart:
        raise ValueError(
            "resume and restart exclude each other: continue the run, or start it over"
        )
    check_backend_choice(backend)  # a typo fails now, not after the output exists
    part_writer()  # so does one in ACES_FAST_PART_WRITER
    start = time.perf_counter()
    files, has_labels = open_inputs(path_in)
    total = sum(f.num_rows for f in files)
    if batch_size == "auto":
        rows_per_batch = auto_batch_size(files, in_flight=runner.batches_in_flight(n_threads))
    else:
        rows_per_batch = int(batch_size)
    # The input's checksum (for --resume) is hashed while the task ids are
    # checked for duplicates and, in a fresh run, while the first batches are
    # ranked (ResultsDir.begin): hashlib releases the GIL.
    hashing = ThreadPoolExecutor(1, thread_name_prefix="aces-fast-hash")
    identity = hashing.submit(file_identity, [f.path for f in files])
    hashing.shutdown(wait=False)  # an error below leaves it to finish on its own
    dups = duplicate_rows(files)
    if dups and not skip_invalid:
        row = min(dups)
        err = RowError(row, task_ids_at(files, [row])[row], dups[row])
        raise InvalidRowError(f"{path_in}: {err.message()}", err)
    errors_file = Path(errors_path) if errors_path is not None else default_errors_path(path_out)
    used = resolve_backend(backend).name
    out = ResultsDir(Path(path_out), errors_file)  # the lock: a second run stops here
    complete = False
    bar: _Progress | None = None
    writer: _Writer | None = None
    committer: _Committer | None = None
    try:
        header = _header(None, method, p, used, has_labels)
        out.begin(header, resume=resume, restart=restart, identity=identity)
        out.report()
        meta = {
            "format": "rerank-results",
            "version": RESULTS_VERSION,
            "method": method,
            "params": out.header["params"],
            "aces_fast": out.header["aces_fast"],
        }
        timings: dict[str, float] = {}
        committer = _Committer(out, meta, timings)
        commit = writer = _Writer(committer)  # commits on its own thread, in order
        done = out.done
        resumed = done.count(0, total)
        bar = _Progress(total, sys.stderr.isatty() if progress is None else bool(progress))
        bar.update(resumed)
        runner.run(
            Job(
                path_in=path_in,
                files=files,
                has_labels=has_labels,
                method=method,
                params=p,
                done=done,
                duplicates=dups,
                batch_size=rows_per_batch,
                backend=backend,
                backend_name=used,
                n_threads=n_threads,
                skip_invalid=skip_invalid,
                address=address,
                timings=timings,
            ),
            commit,
            bar.update,
        )
        writer.close()
        if not out.has_part:  # nothing ranked: still leave a readable (empty) table
            committer(
                results_schema(has_labels).empty_table(),
                np.zeros(0, np.int64),
                [],
                used,
                empty=True,
            )
        complete = True
    except InvalidRowError as exc:
        raise InvalidRowError(f"{path_in}: {exc}", exc.error) from None
    finally:
        if writer is not None:
            writer.close(quiet=not complete)
        if committer is not None:
            committer.close()
        if bar is not None:
            bar.close()
        out.close(complete)
    invalid_file = out.errors_path if out.errors_path.exists() else None
    return RunSummary(
        Path(path_out),
        invalid_file,
        total,
        out.written,
        resumed,
        out.invalid,
        time.perf_counter() - start,
        engine,
        timings,
        rows_per_batch,
    )
