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
* :func:`init` starts a private local cluster (never joining ``RAY_ADDRESS`` or
  another cluster on the machine) or connects to ``address``; :func:`shutdown`
  stops it, and a guard process removes a local cluster's processes and files
  should the driver die without doing so. Ray's own failures (no cluster at the
  address, a token authentication mismatch, lost workers) raise
  :class:`RayEngineError` with one line naming the likely cause.

Every worker needs aces_fast (with its extension) and pyarrow installed, and
must be able to read the input path. Needs ``pip install 'aces_fast[ray]'``.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

try:
    import ray
    import ray.data
except ImportError as _exc:  # pragma: no cover - exercised in a subprocess test
    raise ImportError(
        "the Ray engine needs ray with Ray Data, which is not installed: "
        "pip install 'aces_fast[ray]'"
    ) from _exc

import pyarrow as pa

from ._engine import Commit, Job, rerank_table, results_schema
from ._registry import DEFAULT_METHOD, method_params
from ._types import PathLike
from ._validation import check_int
from .parquet import (
    OPTIONAL_COLUMNS,
    REQUIRED_COLUMNS,
    InputFile,
    InvalidRowError,
    RowError,
    check_schema,
    damaged_row_group,
    input_files,
    open_file,
)

__all__ = [
    "BLOCK_ROWS",
    "RayEngine",
    "RayEngineError",
    "init",
    "read_pass_matrices",
    "rerank_dataset",
    "shutdown",
]

#: ``batch_size`` of :func:`read_pass_matrices` and :func:`rerank_dataset` unless
#: given (a dataset run through :func:`aces_fast.stream.rerank_dataset` passes
#: its own, sized from the input by default)
BLOCK_ROWS = 2048

# Columns of the input as Ray blocks carry them: one type each, so blocks from
# files with different integer widths concatenate.
_CANONICAL = {
    "task_id": pa.string(),
    "n": pa.int64(),
    "m": pa.int64(),
    "B": pa.binary(),
    "labels": pa.list_(pa.int64()),
    "test_count": pa.list_(pa.int64()),
}

# A worker's exception as Ray's text shows it ("ValueError: ..."), and colour codes.
_EXC_LINE = re.compile(r"^(?:[A-Za-z_][\w.]*\.)?([A-Za-z_]\w*(?:Error|Exception)): (.+)$")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


class RayEngineError(RuntimeError):
    """Ray itself failed: the cluster could not be started or reached, or a worker,
    node or object was lost for good. The message is one line starting with
    ``Ray``, naming the likely cause where one is known (a wrong address, token
    authentication)."""


def _first_line(exc: BaseException) -> str:
    text = _ANSI.sub("", str(exc)).strip()
    line = next((x.strip() for x in text.splitlines() if x.strip()), type(exc).__name__)
    return line if len(line) <= 300 else line[:297] + "..."


def _chain(exc: BaseException) -> str:
    """The text of an exception and of everything it was raised from (Ray nests
    the real cause, e.g. an AuthenticationError, two levels down)."""
    parts, seen = [], set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        parts.append(f"{type(cur).__name__}: {cur}")
        cur = cur.__cause__ or cur.__context__
    return "\n".join(parts)


def _auth_hint(address: str) -> str:
    mode = os.environ.get("RAY_AUTH_MODE", "").lower()
    if mode == "token":
        why = (
            "refused this process's token (RAY_AUTH_TOKEN, RAY_AUTH_TOKEN_PATH or "
            "~/.ray/auth_token): use the head's token here and on every node"
        )
    else:
        why = (
            "uses token authentication and this process sent no token "
            f"(RAY_AUTH_MODE is {mode or 'unset'} here): set RAY_AUTH_MODE=token here and "
            "on every node, each with the head's token (~/.ray/auth_token or RAY_AUTH_TOKEN)"
        )
    return f"Ray: the cluster at {address} {why}; see 'Ray on several machines' in docs/parquet.md"


def _connect_error(exc: BaseException, address: str) -> RayEngineError:
    """One line for a failed ``ray.init(address=...)``, naming the likely cause."""
    text = _chain(exc)
    if re.search(r"InvalidAuthToken|AuthenticationError|Unauthenticated", text):
        return RayEngineError(_auth_hint(address))
    if "Could not find any running Ray instance" in text:
        return RayEngineError(
            "Ray: --address auto found no running cluster (neither RAY_ADDRESS "
            "nor a cluster started with 'ray start' on this machine)"
        )
    return RayEngineError(f"Ray: cannot connect to the cluster at {address}: {_first_line(exc)}")


def _split_address(address: str) -> tuple[str, int] | None:
    """``(host, port)`` of a ``HOST:PORT`` address; ``None`` for anything else
    (``ray://`` client addresses, names Ray resolves itself)."""
    match = re.fullmatch(r"\[?([^\[\]/]+?)\]?:(\d{1,5})", address.strip())
    return (match.group(1), int(match.group(2))) if match else None


def _preflight(address: str) -> None:
    """Fail within seconds, in one line, where ``ray.init`` would retry for minutes.

    ``ray.init`` retries a closed port 20 times with a 40 s timeout each (over ten
    minutes, silently), and a token mismatch 20 times a second apart with a
    warning per try. One TCP connect, then one GCS call, tell both apart at once.
    """
    hp = _split_address(address)
    if hp is None:
        return
    host, port = hp
    try:
        socket.create_connection((host, port), timeout=5).close()
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise RayEngineError(
            f"Ray: nothing answers at {address} ({reason}): start the head there with "
            f"'ray start --head --port {port}', or check the address and that the port is "
            "reachable from here"
        ) from None
    try:
        from ray._raylet import GcsClient  # type: ignore[attr-defined]  # private: a probe only
    except ImportError:
        return
    try:
        with _quiet_stderr():  # Ray's C++ client logs each refused try there itself
            GcsClient(address=f"{host}:{port}")
    except ray.exceptions.RayError as exc:
        raise _connect_error(exc, address) from None
    except Exception:  # the probe's API changed: ray.init still decides
        return


@contextlib.contextmanager
def _quiet_stderr() -> Iterator[None]:
    """File descriptor 2 to /dev/null for a moment (C++ code writes there directly)."""
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError):  # no usable stderr: nothing to quieten
        yield
        return
    try:
        with open(os.devnull, "wb") as null:
            os.dup2(null.fileno(), 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


# The local cluster init() starts: its temporary root, and the guard that removes
# the cluster's processes and files once this process is gone (see _GUARD).
_OWNED: dict[str, Any] = {}

# Run by the guard (python -c) in its own session, so that Ctrl-C at the terminal
# does not reach it. It waits for EOF on stdin, which comes when the driver closes
# the pipe or dies in any way (SIGKILL included), then kills every process that
# names the cluster's private temporary root in its command line or holds a file
# open under it, until two scans in a row find none, and removes the root.
# Ray's own fate sharing stops the GCS and the raylet with the driver, but the
# raylet's agents (dashboard agent, runtime-env agent) outlive it and ignore
# SIGTERM; a worker forked just before the raylet died may hold no file there yet,
# hence the repeated scans.
_GUARD = r"""
import os, shutil, signal, sys, time
root, driver = sys.argv[1], int(sys.argv[2])
sys.path.insert(0, sys.argv[3])  # Ray's vendored psutil
try:
    while sys.stdin.buffer.read(65536):
        pass
except BaseException:
    pass
import psutil
me = os.getpid()
def ours():
    found = []
    for p in psutil.process_iter(["cmdline"]):
        if p.pid in (me, driver):  # the driver holds Ray Data's log open until it exits
            continue
        try:
            if (any(root in a for a in p.info["cmdline"] or ())
                    or any(f.path.startswith(root) for f in p.open_files())):
                found.append(p)
        except psutil.Error:
            continue
    return found
quiet, deadline = 0, time.monotonic() + 60
while quiet < 2 and time.monotonic() < deadline:
    found = ours()
    for p in found:
        try:
            p.send_signal(signal.SIGKILL)
        except psutil.Error:
            pass
    psutil.wait_procs(found, timeout=5)
    quiet = 0 if found else quiet + 1
    time.sleep(0.2)
shutil.rmtree(root, ignore_errors=True)
"""


def _temp_base() -> str:
    """Where Ray puts its temporary root by default (``RAY_TMPDIR``, then ``TMPDIR`` on
    Linux, then /tmp), so that an operator's setting still applies."""
    if os.environ.get("RAY_TMPDIR"):
        return os.environ["RAY_TMPDIR"]
    if sys.platform.startswith("linux") and os.environ.get("TMPDIR"):
        return os.environ["TMPDIR"]
    return "/tmp" if sys.platform.startswith(("linux", "darwin")) else tempfile.gettempdir()


def _start_local(num_cpus: int | None, quiet: dict[str, Any]) -> None:
    """Start a private local cluster: ``address="local"`` so that neither RAY_ADDRESS
    nor a cluster already running here is joined, under a temporary root of its
    own so that its processes can be found and removed (by :func:`shutdown`, or by
    the guard when this process dies without calling it)."""
    root = tempfile.mkdtemp(prefix="aces-fast-ray-", dir=_temp_base())
    vendored = os.path.join(os.path.dirname(ray.__file__), "thirdparty_files")
    guard = subprocess.Popen(
        [sys.executable, "-c", _GUARD, root, str(os.getpid()), vendored],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    _OWNED.update(root=root, guard=guard)
    try:
        ray.init(
            address="local", num_cpus=num_cpus, include_dashboard=False, _temp_dir=root, **quiet
        )
    except BaseException as exc:  # a Ctrl-C mid-start too: leave no half-started cluster
        shutdown()
        if not isinstance(exc, Exception):
            raise
        raise RayEngineError(f"Ray: could not start a local cluster: {_first_line(exc)}") from None


def shutdown() -> None:
    """Stop what :func:`init` started or connected to.

    ``ray.shutdown()``; for a local cluster :func:`init` started, also wait until
    every process of that cluster is gone and its temporary files are removed.
    Safe to call when nothing is running.
    """
    try:
        ray.shutdown()
    except Exception:  # the guard below still removes what is left
        pass
    guard = _OWNED.pop("guard", None)
    _OWNED.pop("root", None)
    if guard is not None:
        guard.stdin.close()  # EOF: the guard removes what ray.shutdown() left behind
        try:
            guard.wait(timeout=90)
        except subprocess.TimeoutExpired:
            pass


def init(address: str | None = None, num_cpus: int | None = None) -> bool:
    """Start a private local Ray cluster, or connect to the one at ``address``.

    Parameters
    ----------
    address : str, optional
        ``None`` (default) or ``"local"``: start a new local cluster of
        ``num_cpus`` CPUs (default: all cores), whatever else runs on this
        machine and whatever ``RAY_ADDRESS`` says. Its processes and temporary
        files are removed by :func:`shutdown` and, should this process die
        without calling it (even by SIGKILL), by a small guard process.
        ``"HOST:PORT"``: the head of a running cluster (``ray start --head``).
        ``"auto"``: ``RAY_ADDRESS``, else the cluster ``ray start`` last started
        on this machine. ``"ray://..."``: a Ray Client server.
    num_cpus : int, optional
        CPUs of a new local cluster (not allowed with an address).

    Returns
    -------
    bool
        True when this call started or connected (the caller owns the
        connection and should call :func:`shutdown`); False when Ray was
        already initialized in this process (nothing is done then).

    Raises
    ------
    RayEngineError
        The cluster could not be started or reached, as one line naming the
        likely cause (nothing listening at the address, token authentication
        on the cluster but not here, or a wrong token).
    ValueError
        ``num_cpus`` together with an address.
    """
    if ray.is_initialized():
        return False
    if num_cpus is not None:
        num_cpus = check_int(num_cpus, "num_cpus", minimum=1)
    quiet: dict[str, Any] = dict(logging_level=logging.ERROR, log_to_driver=False)
    if address in (None, "local"):
        _start_local(num_cpus, quiet)
    else:
        if not isinstance(address, str) or not address.strip():
            raise ValueError(f"address must be 'HOST:PORT', 'auto' or 'ray://...'; got {address!r}")
        if num_cpus is not None:
            raise ValueError("num_cpus applies only to a new local cluster (address=None)")
        target = address
        if address == "auto" and os.environ.get("RAY_ADDRESS"):
            target = os.environ["RAY_ADDRESS"]
        _preflight(target)
        try:
            ray.init(address=address, **quiet)
        except Exception as exc:  # whatever Ray raised, it is Ray's failure
            raise _connect_error(exc, target) from None
    ctx = ray.data.DataContext.get_current()
    ctx.enable_progress_bars = False
    logging.getLogger("ray.data").setLevel(logging.ERROR)
    return True


# ---------------------------------------------------------------------------
# reading


_SHARED: dict[str, Any] = {}


def _shared(ref_box: list[Any] | None) -> Any:
    """The object behind a boxed ObjectRef, fetched once per worker process."""
    if not ref_box:
        return None
    key = ref_box[0].hex()
    if key not in _SHARED:
        _SHARED.clear()
        _SHARED[key] = ray.get(ref_box[0])
    return _SHARED[key]


def _read_group(
    path: str,
    group: int,
    first_row: int,
    *,
    batch_size: int,
    columns: Sequence[str],
    has_labels: bool,
    skip: list[Any] | None,
):
    """Read task: the rows of one row group in batches, with a ``row`` column, minus
    the rows to skip (done by an earlier run, or duplicates the driver reports),
    in the canonical column types."""
    skip_set = _shared(skip)
    pf = open_file(path)
    present = [c for c in columns if c in pf.schema_arrow.names]

    def block(table: Any, rows: np.ndarray, damaged: str | None) -> Any:
        if skip_set is not None:
            keep = ~skip_set.contains(rows)
            if not keep.all():
                table, rows = table.filter(pa.array(keep)), rows[keep]
        if table.num_rows == 0:
            return None
        cols = {c: table.column(c).cast(_CANONICAL[c]) for c in present}
        if has_labels and "labels" not in cols:
            cols["labels"] = pa.nulls(table.num_rows, _CANONICAL["labels"])
        cols["row"] = pa.array(rows, pa.int64())
        cols["damaged"] = pa.array([damaged] * table.num_rows, pa.string())
        return pa.table(cols)

    row = first_row
    end = first_row + pf.metadata.row_group(group).num_rows
    it = pf.iter_batches(batch_size=batch_size, row_groups=[group], columns=present)
    while True:
        try:
            batch = next(it, None)
        except (OSError, pa.ArrowException) as exc:
            # The rest of the row group cannot be read: its rows travel as rows
            # with only task_id, row and why, for the driver to report.
            why, ids = damaged_row_group(
                InputFile(Path(path), pf, 0), group, first_row, end, row, exc
            )
            rest = pa.table(
                {c: pa.nulls(end - row, pf.schema_arrow.field(c).type) for c in present}
            )
            rest = rest.set_column(
                present.index("task_id"),
                "task_id",
                pa.array(ids, pf.schema_arrow.field("task_id").type),
            )
            out = block(rest, np.arange(row, end, dtype=np.int64), why)
            if out is not None:
                yield out
            return
        if batch is None:
            return
        rows = np.arange(row, row + batch.num_rows, dtype=np.int64)
        row += batch.num_rows
        out = block(pa.Table.from_batches([batch]), rows, None)
        if out is not None:
            yield out


def _read_groups(units: Sequence[tuple[str, int, int]], **kwargs: Any):
    for path, group, first_row in units:
        yield from _read_group(path, group, first_row, **kwargs)


def _block_metadata(rows: int | None, size: int, files: tuple[str, ...]) -> Any:
    from ray.data.block import BlockMetadata

    return BlockMetadata(num_rows=rows, size_bytes=size, input_files=files, exec_stats=None)


class _PassMatrixSource(ray.data.Datasource):
    """One read task per row group (fewer when Ray asks for less parallelism)."""

    def __init__(
        self,
        units: list[tuple[str, int, int, int, int]],
        read_args: dict[str, Any],
        exact_rows: bool,
    ):
        self.units, self.read_args, self.exact_rows = units, read_args, exact_rows

    def get_name(self) -> str:
        return "ReadPassMatrices"

    def estimate_inmemory_data_size(self) -> int | None:
        return sum(u[4] for u in self.units)

    def get_read_tasks(self, parallelism: int, *args: Any, **kwargs: Any) -> list[Any]:
        from ray.data import ReadTask

        k = (
            len(self.units)
            if parallelism is None or parallelism < 1
            else max(1, min(parallelism, len(self.units)))
        )
        tasks = []
        for chunk in np.array_split(np.arange(len(self.units)), k):
            units = [self.units[i] for i in chunk.tolist()]
            if not units:
                continue
            rows = sum(u[3] for u in units) if self.exact_rows else None
            meta = _block_metadata(
                rows, sum(u[4] for u in units), tuple(sorted({u[0] for u in units}))
            )
            fn = functools.partial(_read_groups, [u[:3] for u in units], **self.read_args)
            tasks.append(ReadTask(fn, meta))
        return tasks


def read_pass_matrices(
    path: PathLike, *, batch_size: int = BLOCK_ROWS, skip_rows: Any | None = None
) -> ray.data.Dataset:
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
        ``row`` (int64, the input row number) and ``damaged`` (string: null, or
        why the row's row group could not be read -- a page failing its
        checksum or not decoding; such rows carry only ``task_id`` and ``row``,
        and :func:`rerank_dataset` reports them as bad rows). One read task per
        row group.
    """
    batch_size = check_int(batch_size, "batch_size", minimum=1)
    units = []
    has_labels = False
    row = 0
    for f in input_files(path):
        pf = open_file(f)
        has_labels = check_schema(pf.schema_arrow, str(f))[0] or has_labels
        for g in range(pf.num_row_groups):
            meta = pf.metadata.row_group(g)
            if skip_rows is None or not skip_rows.covers(row, row + meta.num_rows):
                units.append((str(f.resolve()), g, row, meta.num_rows, meta.total_byte_size))
            row += meta.num_rows
    skip = [ray.put(skip_rows)] if skip_rows is not None and len(skip_rows.starts) else None
    read_args = dict(
        batch_size=batch_size,
        columns=REQUIRED_COLUMNS + OPTIONAL_COLUMNS,
        has_labels=has_labels,
        skip=skip,
    )
    return ray.data.read_datasource(_PassMatrixSource(units, read_args, skip is None))


# ---------------------------------------------------------------------------
# ranking


def _rerank_block(
    table: pa.Table,
    *,
    method: str,
    params: dict[str, Any],
    backend: str | None,
    n_threads: int | None,
    skip_invalid: bool,
) -> pa.Table:
    damaged: list[RowError] = []
    if "damaged" in table.column_names:  # rows of a row group that could not be read
        hit = table.column("damaged").is_valid().to_numpy(zero_copy_only=False).astype(bool)
        if hit.any():
            lost = table.filter(pa.array(hit))
            damaged = [
                RowError(r, t, why)
                for r, t, why in zip(
                    *(lost.column(c).to_pylist() for c in ("row", "task_id", "damaged"))
                )
            ]
            if not skip_invalid:
                raise ValueError(damaged[0].reason)
            table = table.filter(pa.array(~hit))
        table = table.drop_columns(["damaged"])
    out, errors, _ = rerank_table(
        table,
        method,
        params,
        rows=None,
        has_labels="labels" in table.column_names,
        backend=backend,
        n_threads=n_threads,
        skip_invalid=skip_invalid,
    )
    if not skip_invalid:
        return out
    errors = damaged + errors
    # Bad rows travel in the same table: task_id, row and error set, the rest null;
    # ranked rows keep their row number (the driver commits the rows it covered).
    if "row" in table.column_names:
        bad_rows = {e.row for e in errors}
        ranked = [r for r in table.column("row").to_pylist() if r not in bad_rows]
        row_col = pa.array(ranked, pa.int64())
    else:
        row_col = pa.nulls(out.num_rows, pa.int64())
    good = out.append_column("row", row_col).append_column(
        "error", pa.nulls(out.num_rows, pa.string())
    )
    if not errors:
        return good
    bad = {name: pa.nulls(len(errors), good.schema.field(name).type) for name in good.column_names}
    bad["task_id"] = pa.array([e.task_id for e in errors], pa.string())
    bad["row"] = pa.array([e.row for e in errors], pa.int64())
    bad["error"] = pa.array([e.reason for e in errors], pa.string())
    return pa.concat_tables([good, pa.table(bad, schema=good.schema)])


def rerank_dataset(
    ds: ray.data.Dataset,
    method: str = DEFAULT_METHOD,
    *,
    batch_size: int = BLOCK_ROWS,
    backend: str | None = None,
    n_threads: int = 1,
    skip_invalid: bool = False,
    **params: Any,
) -> ray.data.Dataset:
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
        ``row`` (int64: the input row number, on ranked rows too when ``ds``
        has a ``row`` column) and ``error`` (string, null on ranked rows); a
        bad row has only ``task_id``, ``row`` and ``error`` set. Rows marked
        ``damaged`` by :func:`read_pass_matrices` are bad rows.

    Returns
    -------
    ray.data.Dataset
        One row per problem with the columns of :mod:`aces_fast.stream` (lazy:
        nothing runs until it is consumed, e.g. ``.write_parquet(dir)``).
    """
    p = method_params(method, params)  # ValueError for an unknown method, listing the names
    batch_size = check_int(batch_size, "batch_size", minimum=1)
    n_threads = check_int(n_threads, "n_threads", minimum=1)
    return ds.map_batches(
        _rerank_block,  # type: ignore[arg-type]
        batch_size=batch_size,
        batch_format="pyarrow",
        num_cpus=n_threads,
        fn_kwargs=dict(
            method=method, params=p, backend=backend, n_threads=n_threads, skip_invalid=skip_invalid
        ),
    )


# ---------------------------------------------------------------------------
# the driver side of aces_fast.stream.rerank_dataset(engine="ray")


_INPUT_ERRORS = ("ValueError", "TypeError", "InvalidRowError", "BackendUnavailableError")


def _task_exception(exc: BaseException) -> tuple[str, str] | None:
    """``(type name, message)`` of the exception a Ray task raised, or ``None``.

    Ray keeps the worker's exception only as text (its traceback inside the
    RayTaskError's message); the first ``Type: message`` line that is not Ray's
    own wrapper is the original.
    """
    for line in _ANSI.sub("", str(exc)).splitlines():
        match = _EXC_LINE.match(line.strip())
        if match and not line.strip().startswith("ray."):
            kind, message = match.groups()
            return kind, message
    return None


def _task_error(exc: BaseException) -> str | None:
    """One line for the exception a Ray task raised, or ``None``: ValueError-like
    errors give their message alone, others ``"a Ray task failed: Type: message"``."""
    found = _task_exception(exc)
    if found is None:
        return None
    kind, message = found
    return message if kind in _INPUT_ERRORS else f"a Ray task failed: {kind}: {message}"


def _run_error(exc: BaseException) -> Exception:
    """What a failure met while Ray runs the job is raised as: the ValueError of a
    bad row or argument that a task raised, else a :class:`RayEngineError`."""
    found = _task_exception(exc) if isinstance(exc, ray.exceptions.RayError) else None
    if found is not None and found[0] in _INPUT_ERRORS:
        return ValueError(found[1])
    if found is not None:
        return RayEngineError(f"Ray: a task failed: {found[0]}: {found[1]}")
    return RayEngineError(f"Ray: the run failed: {type(exc).__name__}: {_first_line(exc)}")


class RayEngine:
    """The ``"ray"`` engine of :func:`aces_fast.stream.rerank_dataset`: ranks on a Ray
    cluster (:func:`read_pass_matrices`, :func:`rerank_dataset`) and commits the
    results on the driver, a part per ``batch_size`` rows of each block."""

    name = "ray"

    def batches_in_flight(self, n_threads: int | None) -> int:
        """1: the driver takes Ray's ranked blocks one at a time and commits
        each a batch at a time; the workers' batches are in their own memory."""
        return 1

    @staticmethod
    def _commit_piece(
        piece: Any, target: Any, skip_invalid: bool, commit: Commit, used: str
    ) -> None:
        """Commit the ranked rows of ``piece`` and its bad rows (raised unless
        ``skip_invalid``)."""
        bad = piece.column("error").is_valid().to_numpy(zero_copy_only=False).astype(bool)
        errors = [
            RowError(r, t, e)
            for r, t, e in zip(
                *(
                    piece.column(c).filter(pa.array(bad)).to_pylist()
                    for c in ("row", "task_id", "error")
                )
            )
        ]
        errors.sort(key=lambda e: (e.row is None, e.row))
        if errors and not skip_invalid:
            raise InvalidRowError(errors[0].message(), errors[0])
        kept = piece.filter(pa.array(~bad))
        rows = kept.column("row").to_numpy().astype(np.int64)
        commit(kept.select(target.names).cast(target), rows, errors, used)

    def run(self, job: Job, commit: Commit, progress: Callable[[int], None]) -> None:
        """Run on the cluster at ``job.address`` (or a private local one) and commit
        the results here, a part per ``job.batch_size`` rows of each block Ray
        returns, through ``commit`` (see :class:`aces_fast._engine.Engine`).
        Duplicate rows (``job.duplicates``) are committed as errors before
        anything runs (``skip_invalid`` only).

        A local cluster started here is stopped on every way out (an error, Ctrl-C)
        and, should this process be killed, removed by :func:`init`'s guard.
        """
        from ._commit import Intervals
        from ._input import task_ids_at

        done, duplicates, timings = job.done, job.duplicates, job.timings
        tick = time.perf_counter()
        owner = init(job.address)
        timings["startup"] = time.perf_counter() - tick
        try:
            used = job.backend_name
            dup_rows = np.array(sorted(duplicates), dtype=np.int64)
            todo_dups = dup_rows[~done.contains(dup_rows)].tolist()
            if todo_dups:
                ids = task_ids_at(job.files, todo_dups)
                commit(
                    None,
                    np.zeros(0, np.int64),
                    [RowError(r, ids[r], duplicates[r]) for r in todo_dups],
                    used,
                )
                progress(len(todo_dups))
            skip = Intervals(
                [(a, b) for a, b in zip(done.starts.tolist(), done.ends.tolist())]
                + [(r, r + 1) for r in duplicates]
            )
            ds = read_pass_matrices(job.path_in, batch_size=job.batch_size, skip_rows=skip)
            out = rerank_dataset(
                ds,
                job.method,
                batch_size=job.batch_size,
                backend=job.backend,
                n_threads=job.n_threads or 1,
                skip_invalid=True,
                **job.params,
            )
            target = results_schema(job.has_labels).remove_metadata()
            blocks = iter(out.iter_batches(batch_format="pyarrow", batch_size=None))
            while True:
                # Only what Ray raises here is Ray's (or a task's); commit's own errors
                # (e.g. a full disk) pass through as they are.
                try:
                    block: Any = next(blocks)
                except StopIteration:
                    break
                except Exception as exc:  # a task's error arrives wrapped by Ray
                    raise _run_error(exc) from None
                if isinstance(block, pa.RecordBatch):
                    block = pa.Table.from_batches([block])
                # Ray Data may merge the map's outputs into blocks of thousands of
                # rows (2.60 did: two blocks for 6 000 problems at --batch-size
                # 100); a part per batch keeps commits and a resume's unit at
                # --batch-size whatever Ray's block sizes.
                for start in range(0, block.num_rows, job.batch_size):
                    piece = block.slice(start, job.batch_size)
                    self._commit_piece(piece, target, job.skip_invalid, commit, used)
                    progress(piece.num_rows)
        except ray.exceptions.RayError as exc:  # e.g. ray.put of the rows to skip failing
            raise _run_error(exc) from None
        finally:
            if owner:
                shutdown()
