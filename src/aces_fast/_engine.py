"""The engine interface of dataset runs, and the one batch every engine ranks.

:func:`aces_fast.stream.rerank_dataset` reads and checks the input, opens the
results directory and then hands the ranking to an :class:`Engine`, found by
name with :func:`aces_fast.stream.get_engine`: ``"local"`` (this process,
:mod:`aces_fast.stream`) or ``"ray"`` (a Ray cluster, :mod:`aces_fast.ray`).
Each engine ranks the rows still to do with :func:`rerank_table`, the same
function for both, so their results are bit-identical, and passes each ranked
batch to the run's ``commit``.

This module imports neither engine: both depend on it, and on nothing of each
other. It imports pyarrow only when called (``import aces_fast.stream`` must
work without it).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from ._validation import check_int

__all__ = [
    "AUTO_BATCH_BYTES",
    "AUTO_BATCH_ROWS",
    "AUTO_RUN_BYTES",
    "DEFAULT_BATCH_SIZE",
    "ENGINES",
    "PASS_KS",
    "RESULTS_VERSION",
    "Commit",
    "Engine",
    "Job",
    "auto_batch_size",
    "check_batch_size",
    "pass_at_ks",
    "require_arrow",
    "rerank_table",
    "results_schema",
]

#: ``batch_size`` of a dataset run unless given: sized by :func:`auto_batch_size`
DEFAULT_BATCH_SIZE = "auto"
#: the input bytes (uncompressed, as the Parquet footer counts them) an automatic
#: batch holds at most: 8 192 rows of 100x50, about 500 of 200x500. A batch has a
#: fixed cost of about 5 ms (its part file created, written and fsynced, its
#: commit record, the Python around its ranking) next to 7-10 us a 100x50
#: problem on two threads, so batches of 2 048 such rows lost a fifth of a run
#: to it; rows of 200x500 are 17 times larger, and 2 048 of them held 600 MiB at
#: two threads (measured on the 2-core EPYC host: docs/benchmarks.md,
#: "Automatic batch size").
AUTO_BATCH_BYTES = 6 << 20
#: the input bytes of all the batches a run holds at once
#: (:meth:`Engine.batches_in_flight`; the local engine's ``2 * threads + 2``
#: shrinks automatic batches from 5 threads on): a
#: batch in flight takes about 9 times its input's bytes (results, encoded
#: part), so 16 threads hold about 600 MiB of 100x50 batches of 2 670 rows
AUTO_RUN_BYTES = 64 << 20
#: the fewest and the most rows of an automatic batch: a part file of a few
#: rows is mostly overhead, and the results of a batch grow with its rows
#: whatever their input's size
AUTO_BATCH_ROWS = (16, 8192)
#: the engine names :func:`aces_fast.stream.get_engine` knows
ENGINES = ("local", "ray")
PASS_KS = (1, 2, 5)
RESULTS_VERSION = 1


def check_batch_size(batch_size: Any) -> int | str:
    """``batch_size`` as given to a dataset run: ``"auto"`` (any case) or an int
    >= 1; ``TypeError``/``ValueError`` naming it otherwise."""
    if isinstance(batch_size, str):
        if batch_size.strip().lower() == "auto":
            return "auto"
        raise ValueError(f"batch_size must be an integer >= 1 or 'auto', got {batch_size!r}")
    return check_int(batch_size, "batch_size", minimum=1)


def auto_batch_size(files: Sequence[Any], in_flight: int = 1) -> int:
    """Rows per batch for the input ``files`` (:class:`aces_fast.parquet.InputFile`)
    of a run holding ``in_flight`` batches at once: the rows of
    ``min(AUTO_BATCH_BYTES, AUTO_RUN_BYTES / in_flight)`` bytes at the largest
    bytes per row of any row group, within :data:`AUTO_BATCH_ROWS`.

    Read from the files' footers (no data is read): a row group's
    ``total_byte_size`` is its uncompressed size, the pass matrices' packed
    bytes nearly all of it. The row group of the largest rows sets the size, so
    that memory stays bounded for the largest problems of a mixed input. The
    results never depend on it (batches only group the rows). O(row groups).
    """
    lo, hi = AUTO_BATCH_ROWS
    budget = min(AUTO_BATCH_BYTES, AUTO_RUN_BYTES // max(int(in_flight), 1))
    per_row = 1.0
    for f in files:
        md = f.pf.metadata
        for g in range(md.num_row_groups):
            rg = md.row_group(g)
            if rg.num_rows > 0:
                per_row = max(per_row, rg.total_byte_size / rg.num_rows)
    return int(min(max(budget // per_row, lo), hi))


def require_arrow() -> tuple[Any, Any]:
    """``(pyarrow, pyarrow.parquet)``, or a clear ``ImportError`` (pyarrow is an
    optional extra)."""
    try:
        import pyarrow as pa
        import pyarrow.compute  # loaded up front, not inside a timed stage
        import pyarrow.parquet as pq
    except ImportError:
        raise ImportError(
            "rerank-dataset needs pyarrow, which is not installed: pip install 'aces_fast[arrow]'"
        ) from None
    return pa, pq


def results_schema(has_labels: bool, meta: dict[str, Any] | None = None) -> Any:
    """The Arrow schema of the output (``meta`` goes into the ``aces_fast`` key)."""
    pa, _ = require_arrow()
    fields = [
        pa.field("task_id", pa.string()),
        pa.field("order", pa.list_(pa.int32())),
        pa.field("scores", pa.list_(pa.float64())),
        pa.field("weights", pa.list_(pa.float64())),
        pa.field("fallback", pa.bool_()),
    ]
    if has_labels:
        fields += [pa.field(f"pass@{k}", pa.float64()) for k in PASS_KS]
    info = {"format": "rerank-results", "version": RESULTS_VERSION, **(meta or {})}
    return pa.schema(fields, metadata={b"aces_fast": json.dumps(info).encode()})


# ---------------------------------------------------------------------------
# one batch (shared by the local and the Ray engine)


def pass_at_ks(
    scores: Sequence[np.ndarray], labels: Sequence[np.ndarray | None], ks: Sequence[int] = PASS_KS
) -> dict[int, np.ndarray]:
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
    by_n: dict[int, list[tuple[int, np.ndarray]]] = {}
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
            sk = desc[:, kk - 1 : kk]
            above, level = sk < S, sk == S
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


def rerank_table(
    table: Any,
    method: str,
    params: dict[str, Any],
    *,
    rows: Any = 0,
    has_labels: bool,
    backend: str | None = None,
    n_threads: int | None = None,
    skip_invalid: bool = False,
    timings: dict[str, float] | None = None,
) -> tuple[Any, list[Any], str]:
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
    from .batch_result import host_array, list_array

    pa, _ = require_arrow()
    tick = time.perf_counter()
    fast = _rank_packed(table, method, params, backend, n_threads)
    if fast is not None:  # valid rows, a compiled method: one call, nothing decoded
        (results, task_ids, packed), errors = fast, []
        t_decode = tick
    else:
        dec = _decode(table, rows, skip_invalid)
        errors, task_ids, packed = dec.errors, pa.array(dec.task_ids, pa.string()), None
        t_decode = time.perf_counter()
        results = rerank_batch(dec.B, method, backend=backend, n_threads=n_threads, **params)
    t_rerank = time.perf_counter()
    T = len(results)
    n_off = results.n_offsets
    scores = host_array(results.scores)
    cols: dict[str, Any] = {"task_id": task_ids}
    passk: dict[int, Any] = {}
    if has_labels:
        if packed is None:  # the general path: the decoded labels, task by task
            labels = dec.labels or [None] * T
            views = [scores[n_off[t] : n_off[t + 1]] for t in range(T)]
            values = pass_at_ks(views, labels, PASS_KS)
            missing = np.array([y is None for y in labels], dtype=bool)
        elif packed.labels is not None:
            values = dict(
                zip(PASS_KS, _pass_at_ks_flat(scores, host_array(results.order), n_off, packed))
            )
            missing = ~packed.has_labels
        else:  # this batch's file has no labels column: every pass@k is null
            values = {k: np.full(T, np.nan) for k in PASS_KS}
            missing = np.ones(T, dtype=bool)
        for k in PASS_KS:
            passk[k] = pa.array(values[k], pa.float64(), mask=missing)
    t_pass = time.perf_counter()
    cols["order"] = list_array(results.order, n_off, pa.int32())
    cols["scores"] = list_array(scores, n_off, pa.float64())
    if results.weights is not None and results.m_offsets is not None:
        cols["weights"] = list_array(results.weights, results.m_offsets, pa.float64())
    else:
        cols["weights"] = pa.nulls(T, pa.list_(pa.float64()))
    cols["fallback"] = pa.array(host_array(results.fallback).astype(bool, copy=False), pa.bool_())
    for k in passk:
        cols[f"pass@{k}"] = passk[k]
    out = pa.Table.from_pydict(cols, schema=results_schema(has_labels).remove_metadata())
    t_end = time.perf_counter()
    if timings is not None:
        for key, dt in (
            ("decode", t_decode - tick),
            ("rerank", t_rerank - t_decode),
            ("pass@k", t_pass - t_rerank),
            ("encode", t_end - t_pass),
        ):
            timings[key] = timings.get(key, 0.0) + dt
    return out, errors, results.backend if T else ""


def _rank_packed(
    table: Any, method: str, params: dict[str, Any], backend: str | None, n_threads: int | None
) -> tuple[Any, Any, Any] | None:
    """The fast path of :func:`rerank_table`: a batch of valid rows ranked straight
    from its bit-packed bytes by a backend that can (``cpp``, one call, GIL
    released, no Python object per task). Returns ``(BatchResult, task ids
    (Arrow), Packed)``, or ``None`` when the batch takes the general path: another
    backend or method, a bad row (reported there), or a method whose cost
    warning reads the matrices (ACES-O).
    """
    from . import _registry
    from .backends import resolve_backend
    from .parquet import packed_batch

    spec = _registry.get(method)
    if spec.cost is not None:
        return None
    rank = getattr(resolve_backend(backend), "rerank_packed", None)
    if rank is None:
        return None
    packed = packed_batch(table)
    if packed is None:
        return None
    results = rank(packed, spec.name, spec.validate(params), n_threads)
    return None if results is None else (results, packed.task_id, packed)


def _pass_at_ks_flat(
    scores: np.ndarray, order: np.ndarray, n_off: np.ndarray, packed: Any
) -> np.ndarray:
    """:func:`pass_at_ks` (bit for bit) of a packed batch's labels, in one compiled
    call that reads each task's ranking ``order`` (descending scores, ties
    adjacent) up to the k-th place: float64 (len(PASS_KS), T), nan where
    unlabelled."""
    from ._compiled import core

    assert core is not None  # the packed path runs only on the cpp backend
    return core.pass_at_ks(
        scores=np.ascontiguousarray(scores, dtype=np.float64),
        offsets=n_off,
        labels=packed.labels,
        has_labels=packed.has_labels,
        ks=np.asarray(PASS_KS, dtype=np.int64),
        order=np.ascontiguousarray(order, dtype=np.int64),
    )


def _decode(table: Any, rows: Any, skip_invalid: bool) -> Any:
    """``decode_batch``, raising the first bad row unless ``skip_invalid``."""
    from .parquet import InvalidRowError, decode_batch

    dec = decode_batch(table, rows)
    if dec.errors and not skip_invalid:
        raise InvalidRowError(dec.errors[0].message(), dec.errors[0])
    return dec


# ---------------------------------------------------------------------------
# the interface


#: ``commit(table, rows, errors, backend)``: commit the results ``table`` (or
#: ``None``) of the input rows ``rows`` (int64), the bad rows ``errors`` (a list
#: of :class:`~aces_fast.parquet.RowError`) and the backend that ranked them;
#: called in input order, from the engine's thread
Commit = Callable[[Any, np.ndarray, Sequence[Any], str], None]


@dataclass(frozen=True)
class Job:
    """What an engine is asked to rank: a dataset run, its input already checked.

    Attributes
    ----------
    path_in : str or Path
        The input as the caller named it (a Parquet file or directory).
    files : list of aces_fast.parquet.InputFile
        Its files in name order, opened, with their first row numbers.
    has_labels : bool
        Whether the output has the ``pass@k`` columns.
    method : str
        The canonical method name.
    params : dict
        Its complete, validated parameters.
    done : aces_fast._commit.Intervals
        Input rows an earlier run committed (results or errors): left out.
    duplicates : dict of int to str
        ``{row: reason}`` for rows repeating an earlier task id; reported as
        errors (``skip_invalid``) and not ranked.
    batch_size : int
        Problems per batch.
    backend : str, optional
        The backend as the caller named it (resolved where the batch runs).
    backend_name : str
        The backend it resolves to here, reported for batches that ran nothing.
    n_threads : int, optional
        Threads per batch (per Ray task).
    skip_invalid : bool
        Report bad rows through ``commit`` instead of raising.
    address : str, optional
        The Ray cluster to use (the Ray engine only).
    timings : dict
        Seconds per stage, added to by the engine (see ``RunSummary.timings``).
    """

    path_in: str | Path
    files: list[Any]
    has_labels: bool
    method: str
    params: dict[str, Any]
    done: Any
    duplicates: dict[int, str]
    batch_size: int
    backend: str | None
    backend_name: str
    n_threads: int | None
    skip_invalid: bool
    address: str | None = None
    timings: dict[str, float] = field(default_factory=dict)


class Engine(Protocol):
    """Ranks the rows of a :class:`Job` and commits them (``local``, ``ray``)."""

    #: the name :func:`aces_fast.stream.get_engine` knows it by
    name: str

    def run(self, job: Job, commit: Commit, progress: Callable[[int], None]) -> None:
        """Rank every row of ``job.files`` not in ``job.done`` and hand each batch to
        ``commit``, in input order; ``progress(k)`` after each batch (``k`` input rows
        accounted for). A bad row raises :class:`~aces_fast.parquet.InvalidRowError`
        unless ``job.skip_invalid``."""
        ...

    def batches_in_flight(self, n_threads: int | None) -> int:
        """About how many batches a run with ``n_threads`` holds in memory at
        once (:func:`auto_batch_size` shares its budget among them)."""
        ...
