"""Reading and writing collections of pass matrices (one per problem).

Two on-disk layouts are supported, both validated on read with errors that
name the file, the problem and the field (``ValueError``):

**npz** (the layout of the bundled HumanEval data, described in
``aces_fast/data/README.md``): ``task_ids`` (str (P,)); per problem ``k`` (suffix ``%04d``)
``B_kkkk`` uint8 (n, m) pass matrix, optional ``y_kkkk`` (n,) 0/1 labels, and
optional extras ``t_ok_kkkk`` (m,) 0/1, ``test_count_kkkk`` (m,) int,
``cand_uid_kkkk`` (n,) int, or any other ``name_kkkk`` array. Keys without a
problem suffix (e.g. ``config``) are kept in :attr:`Dataset.meta`.

**JSONL** (one problem per line)::

    {"task_id": "p1", "B": [[1, 0, 1], [0, 0, 1]], "labels": [1, 0]}
    {"task_id": "p2", "m": 3, "passed": [[0, 2], []], "labels": [1, 0]}

``"B"`` gives the rows of 0/1 (ints or booleans); ``"passed"`` gives, per
candidate, the indices of the tests it passes, with ``"m"`` the number of
tests. ``"labels"`` is optional. Other keys are kept as extras (``t_ok``,
``test_count`` and ``cand_uid`` are checked and turned into arrays).
Blank lines are skipped; ``.jsonl.gz`` is read and written through gzip.

**Hostile and careless files.** Every loader raises ``ValueError`` (naming
the file, the problem and the field) for a truncated or corrupt file, a pickled
object array (never unpickled: ``allow_pickle`` is never used), JSON nested too
deeply, or a path that is not a regular file (directories, FIFOs, devices and
sockets are refused before opening). The string ``"-"`` as a path reads
standard input (the format told by its first bytes: npy, npz, gzip, ``{`` for
JSON lines, else CSV); ``"./-"`` or ``Path("-")`` names a file called ``-``.

**Limits.** Sizes a file *declares* -- the shape in an ``.npy`` header, a zip
member's uncompressed size, ``len(passed) x m`` of the JSONL ``passed`` form --
are checked before anything is allocated, against two limits:

* ``max_cells``: cells (n x m) of one pass matrix. Default 2**28 = 268,435,456
  (256 MiB as uint8): four times a 10**6 x 64 candidate pool, 10**4 times the
  largest bundled problem (100 x 257).
* ``max_bytes``: bytes of data in one file after decompression (the sum of an
  npz's member sizes, the decompressed text of a JSONL or CSV file, an npy's
  data). Default 2**30 (1 GiB): twice a 10**6 x 64 matrix stored as int64,
  a thousand times the bundled files (about 1 MB each).

Raise them with the keyword arguments ``max_cells=`` / ``max_bytes=`` of every
loader, the environment variables ``ACES_FAST_MAX_CELLS`` /
``ACES_FAST_MAX_BYTES``, or the command line options ``--max-cells`` /
``--max-bytes``; :func:`check_size` applies them (for other readers).
Memory: npz/npy/CSV data take about their size; parsing a JSON line takes
several times the line's size (Python lists).

Bundled datasets (:data:`BUNDLED`): ``"humaneval-codegen16b"`` (the default;
CodeGen-Mono-16B candidates and tests, n = 100) and ``"humaneval-gpt35"``
(gpt-3.5-turbo-1106 with AgentCoder's prompts, n = 5). Any other name passed to
:func:`load_dataset` is a path.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import re
import struct
import zlib
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from importlib import resources
from pathlib import Path
from typing import IO, Any

import numpy as np

from ._problems import Dataset, Problem
from ._problems import binary_matrix as _binary_matrix
from ._problems import binary_vector as _binary_vector
from ._problems import check_extra as _check_extra
from ._safe_read import (
    DEFAULT_MAX_BYTES,
    DEFAULT_MAX_CELLS,
    LimitedReader,
    Limits,
    NpzArchive,
    check_size,
    open_regular,
    read_npy,
    read_stdin,
    resolve_limits,
    sniff_format,
)
from ._types import PathLike

__all__ = [
    "BUNDLED",
    "DEFAULT_DATASET",
    "DEFAULT_MAX_BYTES",
    "DEFAULT_MAX_CELLS",
    "STDIN",
    "Dataset",
    "Problem",
    "bundled_path",
    "check_size",
    "load_dataset",
    "load_jsonl",
    "load_npz",
    "load_pass_matrix",
    "resolve_limits",
    "save_jsonl",
    "save_npz",
]

#: bundled dataset name -> file in ``aces_fast/data``
BUNDLED: dict[str, str] = {
    "humaneval-codegen16b": "humaneval_codet_codegen16b.npz",
    "humaneval-gpt35": "humaneval_agentcoder_gpt35turbo1106.npz",
}
DEFAULT_DATASET = "humaneval-codegen16b"
#: The path that means standard input (``./-`` names a file called ``-``).
STDIN = "-"

_SUFFIX = re.compile(r"^(?P<field>.+)_(?P<index>\d{4,})$")


# ---------------------------------------------------------------------------
# sources: a path (regular files only), '-' (standard input) or a file object


def _label(path: Any) -> str:
    if _is_stdin(path):
        return "<stdin>"
    if isinstance(path, (str, os.PathLike)):
        return str(path)
    return str(getattr(path, "name", "<stream>"))


def _is_stdin(path: Any) -> bool:
    # Only the string: Path("./-") normalises to Path("-"), and a Path names a file.
    return isinstance(path, str) and path == STDIN


@contextmanager
def _binary_source(path: Any, label: str, limits: Limits) -> Iterator[tuple[IO[bytes], int | None]]:
    """(binary file, its size or None) for a path, ``-`` or an open binary file.

    Paths must be regular files (checked before opening); standard input is read
    into memory up to ``limits.max_bytes``. OSError while reading becomes a
    ValueError naming the file.
    """
    try:
        if _is_stdin(path):
            data = read_stdin(label, limits.max_bytes)
            yield io.BytesIO(data), len(data)
        elif isinstance(path, (str, os.PathLike)):
            fh, size = open_regular(path, label)
            with fh:
                yield fh, size
        else:
            yield path, None
    except OSError as exc:
        raise ValueError(f"{label}: cannot read: {exc.strerror or exc}") from None


def _peek(fh: IO[bytes], n: int) -> bytes:
    pos = fh.tell()
    head = fh.read(n)
    fh.seek(pos)
    return head


# ---------------------------------------------------------------------------
# npz


def load_npz(
    path: Any,
    name: str | None = None,
    *,
    source: str | None = None,
    max_cells: int | None = None,
    max_bytes: int | None = None,
) -> Dataset:
    """Read the npz layout (see the module docstring).

    Parameters
    ----------
    path : str, Path, ``"-"`` (standard input) or seekable binary file object
        A path must name a regular file (FIFOs, devices and directories are
        refused before opening).
    name : str, optional
        Dataset name (default: the file name without ``.npz``).
    source : str, optional
        How to name the file in messages and in :attr:`Dataset.source`
        (default: its path).
    max_cells : int, optional
        Most cells (n x m) of one pass matrix; default ``$ACES_FAST_MAX_CELLS``,
        else 2**28 (see "Limits" in the module docstring).
    max_bytes : int, optional
        Most bytes the archive's members may declare in total (uncompressed);
        default ``$ACES_FAST_MAX_BYTES``, else 2**30.

    Raises
    ------
    ValueError
        For a corrupt or truncated archive, a member that is not a ``.npy``
        array, a pickled (object) array, sizes beyond the limits, a missing
        ``task_ids`` or ``B_kkkk``, a key that points past the last problem, a
        matrix that is not 2-D 0/1, or a vector of the wrong length; the message
        names the file, the problem and the key.

    Cost: reads every array once, O(total size); sizes are checked from the zip
    directory and the ``.npy`` headers before anything is decompressed.
    """
    limits = resolve_limits(max_cells, max_bytes)
    label = source if source is not None else _label(path)
    with _binary_source(path, label, limits) as (fh, _size):
        if sniff_format(_peek(fh, 8)) == "npy":
            raise ValueError(f"{label}: is a single .npy array, not an .npz archive")
        with NpzArchive(fh, label, limits) as z:
            problems, meta = _problems_from_npz(z, label)
    if name is None:
        name = Path(label).name
        name = name[:-4] if name.endswith(".npz") else name
    try:
        return Dataset(name, problems, source=label, meta=meta)
    except ValueError as exc:
        raise ValueError(f"{label}: {exc}") from None


def _problems_from_npz(z: NpzArchive, label: str) -> tuple[list[Problem], dict[str, Any]]:
    keys = z.files
    if "task_ids" not in z:
        shown = ", ".join(keys[:8]) + (" ..." if len(keys) > 8 else "")
        raise ValueError(
            f"{label}: missing key 'task_ids' (the list of problem ids); "
            f"keys present: {shown or '(none)'}"
        )
    ids_head = z.header("task_ids")
    if len(ids_head.shape) != 1 or ids_head.dtype.kind not in "USiu":
        raise ValueError(
            f"{label}: key 'task_ids' must be a 1-D array of strings, "
            f"got dtype {ids_head.dtype} shape {ids_head.shape}"
        )
    n_problems = ids_head.shape[0]
    # Sort the keys by problem from their names alone, before reading any data.
    per: dict[int, dict[str, str]] = {}
    meta_keys: list[str] = []
    for key in keys:
        if key == "task_ids":
            continue
        mt = _SUFFIX.match(key)
        if mt is None:
            meta_keys.append(key)
            continue
        digits = mt.group("index")
        k = int(digits) if len(digits) <= 18 else n_problems + 1  # no int() of 10^4 digits
        if k >= n_problems:
            raise ValueError(
                f"{label}: key {key!r} refers to problem {digits.lstrip('0') or 0}, "
                f"but 'task_ids' lists only {n_problems} problems"
            )
        fields = per.setdefault(k, {})
        if mt.group("field") in fields:
            raise ValueError(
                f"{label}: keys {fields[mt.group('field')]!r} and {key!r} both "
                f"give field {mt.group('field')!r} of problem {k}"
            )
        fields[mt.group("field")] = key
    ids = z.read("task_ids")
    # Every problem needs its B_kkkk, so a task_ids longer than the archive's key
    # count is refused here, before its ids become Python strings.
    missing = next((k for k in range(n_problems) if "B" not in per.get(k, {})), None)
    if missing is not None:
        raise ValueError(
            f"{label}: problem {missing} ({str(ids[missing])!r}): missing key "
            f"'B_{missing:04d}' (the pass matrix)"
        )
    task_ids = [str(t) for t in ids.tolist()]
    meta: dict[str, Any] = {}
    for key in meta_keys:
        arr = z.read(key)
        meta[key] = arr.item() if arr.ndim == 0 else arr
    problems = []
    for k, tid in enumerate(task_ids):
        where = f"{label}: problem {k} ({tid!r})"
        fields = dict(per[k])
        b_key = fields.pop("B")
        B = _binary_matrix(z.read(b_key, matrix=True), f"{where}: key {b_key!r}")
        y_key = fields.pop("y", None)
        labels = (
            None
            if y_key is None
            else _binary_vector(z.read(y_key), B.shape[0], f"{where}: key {y_key!r}")
        )
        extras = {
            f: _check_extra(f, z.read(key), B.shape[0], B.shape[1], f"{where}: key {key!r}")
            for f, key in fields.items()
        }
        problems.append(Problem(tid, B, labels, extras))
    return problems, meta


def save_npz(dataset: Dataset | Sequence[Problem], path: PathLike, compressed: bool = True) -> None:
    """Write problems in the npz layout that :func:`load_npz` reads.

    Extras that are NumPy-convertible (numbers, strings) are written as
    ``name_kkkk``; ``Dataset.meta`` entries as top-level keys. No pickles.
    """
    problems = list(dataset)
    arrays: dict[str, Any] = {"task_ids": np.array([p.task_id for p in problems], dtype=str)}
    if isinstance(dataset, Dataset):
        for key, value in dataset.meta.items():
            arrays[key] = np.asarray(value)
    for k, p in enumerate(problems):
        arrays[f"B_{k:04d}"] = p.B
        if p.labels is not None:
            arrays[f"y_{k:04d}"] = p.labels
        for fname, value in p.extras.items():
            arr = np.asarray(value)
            if arr.dtype == object:
                raise ValueError(
                    f"problem {p.task_id!r}: extra {fname!r} cannot be stored "
                    "in an npz without pickling"
                )
            arrays[f"{fname}_{k:04d}"] = arr
    (np.savez_compressed if compressed else np.savez)(path, **arrays)


# ---------------------------------------------------------------------------
# JSONL


def _open_text(path: PathLike, mode: str):
    if str(path).endswith(".gz"):
        return gzip.open(path, mode + "t", encoding="utf-8")
    return open(path, mode, encoding="utf-8")


# What a truncated or corrupt gzip stream raises (BadGzipFile is an OSError).
_DECODE_ERRORS = (UnicodeDecodeError, OSError, EOFError, zlib.error, struct.error)


def _gzipped(path: Any, fh: IO[bytes]) -> bool:
    """A path ending in ``.gz`` must hold gzip (a cut-off file must not pass as empty
    text); standard input and file objects are told by the gzip magic."""
    if isinstance(path, (str, os.PathLike)) and not _is_stdin(path):
        return os.fspath(path).lower().endswith(".gz")
    return _peek(fh, 2) == b"\x1f\x8b"


def _text_stream(fh: IO[bytes], label: str, limits: Limits, gz: bool, newline: str | None = None):
    """UTF-8 text of ``fh`` (gunzipped if ``gz``), whose decompressed size is
    refused beyond ``limits.max_bytes`` while reading."""
    raw: IO[bytes] = fh
    if gz:
        if _peek(fh, 2) != b"\x1f\x8b":
            raise ValueError(
                f"{label}: not a gzip file (it does not start with the gzip "
                "magic bytes; empty or cut short?)"
            )
        raw = gzip.GzipFile(fileobj=fh, mode="rb")  # type: ignore[assignment]
    return io.TextIOWrapper(
        io.BufferedReader(LimitedReader(raw, limits.max_bytes, label)),
        encoding="utf-8",
        newline=newline,
    )


def _is_json_bit(v: Any) -> bool:
    # JSON numbers 0/1 (or 0.0/1.0) and booleans; strings like "1" are rejected.
    return isinstance(v, bool) or (type(v) in (int, float) and v in (0, 1))


def _problem_from_json(obj: Any, where: str, limits: Limits) -> Problem:
    if not isinstance(obj, dict):
        raise ValueError(f"{where}: expected a JSON object, got {type(obj).__name__}")
    if "task_id" not in obj:
        raise ValueError(f"{where}: missing field 'task_id'")
    tid = obj["task_id"]
    if not isinstance(tid, (str, int)) or isinstance(tid, bool):
        raise ValueError(f"{where}: field 'task_id' must be a string, got {type(tid).__name__}")
    where = f"{where} ({str(tid)!r})"
    has_B, has_passed = "B" in obj, "passed" in obj
    if has_B == has_passed:
        raise ValueError(
            f"{where}: need exactly one of the fields 'B' (rows of 0/1) or "
            f"'passed' (indices of passed tests per candidate, with 'm')"
        )
    m_given = obj.get("m")
    if m_given is not None and (
        isinstance(m_given, bool) or not isinstance(m_given, int) or m_given < 0
    ):
        raise ValueError(f"{where}: field 'm' must be a non-negative integer, got {m_given!r}")
    if has_B:
        rows = obj["B"]
        if not isinstance(rows, list) or not all(isinstance(r, list) for r in rows):
            raise ValueError(f"{where}: field 'B' must be a list of rows (lists of 0/1)")
        if not rows:
            raise ValueError(f"{where}: field 'B' has no rows; need n >= 1 candidates")
        lengths = {len(r) for r in rows}
        if len(lengths) > 1:
            bad = next(i for i, r in enumerate(rows) if len(r) != len(rows[0]))
            raise ValueError(
                f"{where}: field 'B' is ragged: row 0 has {len(rows[0])} "
                f"entries, row {bad} has {len(rows[bad])}"
            )
        check_size(
            f"{where}: field 'B'", shape=(len(rows), len(rows[0])), max_cells=limits.max_cells
        )
        for i, r in enumerate(rows):
            for j, v in enumerate(r):
                if not _is_json_bit(v):
                    raise ValueError(
                        f"{where}: field 'B' row {i} entry {j} is {v!r}; only 0 and 1 are allowed"
                    )
        B = np.array(rows, dtype=np.uint8).reshape(len(rows), lengths.pop())
        if m_given is not None and m_given != B.shape[1]:
            raise ValueError(
                f"{where}: field 'm' is {m_given} but the rows of 'B' have {B.shape[1]} entries"
            )
    else:
        if m_given is None:
            raise ValueError(f"{where}: field 'passed' needs the field 'm' (number of tests)")
        passed = obj["passed"]
        if not isinstance(passed, list) or not all(isinstance(r, list) for r in passed):
            raise ValueError(
                f"{where}: field 'passed' must be a list (one per candidate) of "
                "lists of test indices"
            )
        if not passed:
            raise ValueError(f"{where}: field 'passed' is empty; need n >= 1 candidates")
        # 'm' is only declared: refuse an absurd n x m before allocating it.
        check_size(
            f"{where}: pass matrix declared by 'passed' and 'm'",
            shape=(len(passed), m_given),
            max_cells=limits.max_cells,
        )
        B = np.zeros((len(passed), m_given), dtype=np.uint8)
        for i, r in enumerate(passed):
            for j in r:
                if isinstance(j, bool) or not isinstance(j, int) or not 0 <= j < m_given:
                    raise ValueError(
                        f"{where}: field 'passed' candidate {i} lists {j!r}, "
                        f"not a test index in [0, {m_given})"
                    )
                B[i, j] = 1
    labels = obj.get("labels")
    extras = {k: v for k, v in obj.items() if k not in ("task_id", "B", "passed", "m", "labels")}
    n, m = B.shape
    if labels is not None:
        if not isinstance(labels, list):
            raise ValueError(f"{where}: field 'labels' must be a list of 0/1")
        for i, v in enumerate(labels):
            if not _is_json_bit(v):
                raise ValueError(
                    f"{where}: field 'labels' entry {i} is {v!r}; only 0 and 1 are allowed"
                )
        labels = _binary_vector(
            np.array(labels, dtype=np.uint8).reshape(len(labels)), n, f"{where}: field 'labels'"
        )
    checked = {k: _check_extra(k, v, n, m, f"{where}: field {k!r}") for k, v in extras.items()}
    return Problem(str(tid), B, labels, checked)


def _parse_json_line(line: str, where: str) -> Any:
    try:
        return json.loads(line)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{where}: invalid JSON ({exc.msg} at column {exc.colno})") from None
    except RecursionError:
        raise ValueError(f"{where}: invalid JSON (nested too deeply to parse)") from None
    except ValueError as exc:  # e.g. an integer literal beyond Python's digit limit
        raise ValueError(f"{where}: invalid JSON ({exc})") from None


def _problems_from_jsonl(fh: IO[bytes], label: str, limits: Limits, gz: bool) -> list[Problem]:
    problems: list[Problem] = []
    seen: dict[str, int] = {}
    text = _text_stream(fh, label, limits, gz)
    try:
        for lineno, line in enumerate(text, start=1):
            if not line.strip():
                continue
            where = f"{label}: line {lineno}"
            p = _problem_from_json(_parse_json_line(line, where), where, limits)
            if p.task_id in seen:
                raise ValueError(
                    f"{where}: field 'task_id' {p.task_id!r} repeats the "
                    f"problem on line {seen[p.task_id]}"
                )
            seen[p.task_id] = lineno
            problems.append(p)
    except _DECODE_ERRORS as exc:
        raise ValueError(
            f"{label}: cannot read as UTF-8 JSON lines: "
            f"{' '.join(str(exc).split()) or type(exc).__name__}"
        ) from None
    return problems


def load_jsonl(
    path: Any,
    name: str | None = None,
    *,
    max_cells: int | None = None,
    max_bytes: int | None = None,
) -> Dataset:
    """Read the JSONL layout (see the module docstring); gzip data is gunzipped.

    Parameters
    ----------
    path : str, Path, ``"-"`` (standard input) or binary file object
        A path must name a regular file; it is gunzipped if its name ends in
        ``.gz``. Standard input and file objects are gunzipped if they start
        with the gzip magic bytes.
    name : str, optional
        Dataset name (default: the file name without ``.jsonl``/``.gz``).
    max_cells : int, optional
        Most cells (n x m) of one pass matrix, checked before the ``passed`` form
        is expanded; default ``$ACES_FAST_MAX_CELLS``, else 2**28.
    max_bytes : int, optional
        Most bytes of (decompressed) text; default ``$ACES_FAST_MAX_BYTES``,
        else 2**30. Parsing a JSON line takes several times its size in memory.

    Raises ``ValueError`` naming the file, line number, task id and field for
    bad JSON (including nesting too deep to parse), a corrupt or truncated gzip
    stream, a missing ``task_id``, both or neither of ``B``/``passed``, ragged
    rows, values other than 0/1, out-of-range test indices, sizes beyond the
    limits, labels of the wrong length, or a duplicate task id. O(total size).
    """
    limits = resolve_limits(max_cells, max_bytes)
    label = _label(path)
    with _binary_source(path, label, limits) as (fh, _size):
        problems = _problems_from_jsonl(fh, label, limits, _gzipped(path, fh))
    if name is None:
        name = Path(label).name
        for suffix in (".gz", ".jsonl", ".json"):
            name = name[: -len(suffix)] if name.endswith(suffix) else name
    return Dataset(name, problems, source=label)


def _jsonable(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    return value


def save_jsonl(
    dataset: Dataset | Sequence[Problem], path: PathLike, matrix_format: str = "B"
) -> None:
    """Write problems in the JSONL layout that :func:`load_jsonl` reads.

    ``matrix_format="B"`` writes rows of 0/1; ``"passed"`` writes the passed
    test indices per candidate plus ``"m"`` (compact for sparse matrices).
    ``path`` ending in ``.gz`` is gzipped.
    """
    if matrix_format not in ("B", "passed"):
        raise ValueError(f"matrix_format must be 'B' or 'passed'; got {matrix_format!r}")
    with _open_text(path, "w") as fh:
        for p in dataset:
            obj: dict[str, Any] = {"task_id": p.task_id}
            if matrix_format == "B":
                obj["B"] = p.B.tolist()
            else:
                obj["m"] = p.m
                obj["passed"] = [np.flatnonzero(row).tolist() for row in p.B]
            if p.labels is not None:
                obj["labels"] = p.labels.tolist()
            for k, v in p.extras.items():
                obj[k] = _jsonable(v)
            fh.write(json.dumps(obj, separators=(",", ":")) + "\n")


# ---------------------------------------------------------------------------
# names and paths


def bundled_path(name: str):
    """The packaged file of bundled dataset ``name`` (an importlib.resources Traversable)."""
    if name not in BUNDLED:
        raise ValueError(f"unknown bundled dataset {name!r}; choose one of {', '.join(BUNDLED)}")
    return resources.files("aces_fast.data") / BUNDLED[name]


def load_dataset(
    name_or_path: PathLike | None = None,
    *,
    max_cells: int | None = None,
    max_bytes: int | None = None,
) -> Dataset:
    """Load a bundled dataset by name, or a dataset file by path.

    Parameters
    ----------
    name_or_path : str or Path, optional
        ``None`` -> :data:`DEFAULT_DATASET`; a key of :data:`BUNDLED`; ``"-"``
        reads standard input (npz, JSONL or gzipped JSONL, told apart by their
        first bytes); otherwise a path to a regular ``.npz``, ``.jsonl`` /
        ``.jsonl.gz`` file, or a ``.parquet`` file or directory
        (:mod:`aces_fast.parquet`, needs pyarrow).
    max_cells, max_bytes : int, optional
        Size limits, see "Limits" in the module docstring and :func:`load_npz`.

    Returns
    -------
    Dataset
    """
    limits = resolve_limits(max_cells, max_bytes)
    cells, nbytes = limits
    if name_or_path is None:
        name_or_path = DEFAULT_DATASET
    if isinstance(name_or_path, str) and name_or_path in BUNDLED:
        res = bundled_path(name_or_path)
        # Read through the resource API so a zipped install works too.
        return load_npz(
            io.BytesIO(res.read_bytes()),
            name=name_or_path,
            source=f"bundled:{BUNDLED[name_or_path]}",
            max_cells=cells,
            max_bytes=nbytes,
        )
    if _is_stdin(name_or_path):
        label = _label(name_or_path)
        with _binary_source(name_or_path, label, limits) as (fh, _size):
            kind = sniff_format(_peek(fh, 8))
            if kind == "npz":
                return load_npz(fh, name="stdin", source=label, max_cells=cells, max_bytes=nbytes)
            if kind in ("jsonl", "gzip"):
                return Dataset(
                    "stdin", _problems_from_jsonl(fh, label, limits, kind == "gzip"), source=label
                )
        found = "a single .npy array" if kind == "npy" else "text that is not JSON lines"
        raise ValueError(
            f"{label}: not a dataset: expected an .npz archive or JSON lines "
            f"on standard input, found {found}"
        )
    path = Path(name_or_path)
    if not path.exists():
        raise ValueError(
            f"no dataset {str(name_or_path)!r}: not a bundled name "
            f"({', '.join(BUNDLED)}) and no such file"
        )
    suffixes = "".join(path.suffixes[-2:]).lower()
    if path.suffix.lower() == ".npz":
        return load_npz(path, max_cells=cells, max_bytes=nbytes)
    if path.suffix.lower() == ".jsonl" or suffixes == ".jsonl.gz":
        return load_jsonl(path, max_cells=cells, max_bytes=nbytes)
    if path.suffix.lower() == ".parquet":  # file or directory; needs pyarrow
        from .parquet import load_parquet

        return load_parquet(path)
    raise ValueError(
        f"{path}: unknown dataset format; expected .npz, .jsonl, .jsonl.gz or .parquet"
    )


# ---------------------------------------------------------------------------
# a single user matrix (``aces-fast rerank``)


_SEPARATED = re.compile(r"\s*[^\s;]+(?:\s*;\s*|\s+)[^\s;].*")


def _foreign_separator(cell: str) -> str | None:
    """``"semicolons"``, ``"tabs"`` or ``"spaces"`` when a CSV cell is numbers
    joined by that separator (a file written with another delimiter), else None."""
    if not _SEPARATED.fullmatch(cell):
        return None
    tokens = re.split(r"\s*;\s*" if ";" in cell else r"\s+", cell.strip())
    try:
        for token in tokens:
            float(token)
    except ValueError:
        return None
    return "semicolons" if ";" in cell else "tabs" if "\t" in cell else "spaces"


def _read_csv_matrix(fh: IO[bytes], label: str, limits: Limits) -> np.ndarray:
    """Parse a comma-separated 0/1 matrix; blank lines are skipped, headers rejected.

    Cells are collected one byte each (not as Python ints), and their count is
    checked against ``limits.max_cells`` as rows arrive.
    """
    import csv

    cells = bytearray()
    n_rows = n_cols = 0
    first_line = None
    text = _text_stream(fh, label, limits, gz=False, newline="")
    try:
        for lineno, row_cells in enumerate(csv.reader(text), start=1):
            if not row_cells or all(not c.strip() for c in row_cells):
                continue
            row = bytearray()
            for col, cell in enumerate(row_cells, start=1):
                value_text = cell.strip()
                try:
                    value = float(value_text)
                except ValueError:
                    sep = _foreign_separator(value_text)
                    hint = (
                        f" (the columns are separated by {sep}; a CSV pass matrix takes commas)"
                        if sep
                        else " (a header row is not supported: delete it)"
                        if not n_rows
                        else ""
                    )
                    raise ValueError(
                        f"{label}: line {lineno}, column {col}: {value_text!r} "
                        f"is not a number{hint}"
                    ) from None
                if value not in (0.0, 1.0):
                    raise ValueError(
                        f"{label}: line {lineno}, column {col}: value "
                        f"{value_text!r}; only 0 and 1 are allowed"
                    )
                row.append(int(value))
            if n_rows and len(row) != n_cols:
                raise ValueError(
                    f"{label}: line {lineno} has {len(row)} columns but line "
                    f"{first_line} has {n_cols} (ragged rows)"
                )
            if not n_rows:
                first_line, n_cols = lineno, len(row)
            n_rows += 1
            check_size(
                f"{label}: rows up to line {lineno}",
                shape=(n_rows, n_cols),
                max_cells=limits.max_cells,
            )
            cells += row
    except csv.Error as exc:
        raise ValueError(f"{label}: malformed CSV: {exc}") from None
    except UnicodeDecodeError as exc:
        raise ValueError(f"{label}: not a UTF-8 text file: {exc}") from None
    except _DECODE_ERRORS as exc:
        raise ValueError(f"{label}: cannot read: {' '.join(str(exc).split())}") from None
    if not n_rows:
        raise ValueError(f"{label}: no rows; need at least one candidate")
    return np.frombuffer(cells, dtype=np.uint8).reshape(n_rows, n_cols)


_MATRIX_SUFFIXES = (".npy", ".npz", ".csv", ".jsonl", ".jsonl.gz")


def _format_from_name(name: str) -> str | None:
    name = name.lower()
    for suffix in _MATRIX_SUFFIXES:
        if name.endswith(suffix):
            return "jsonl" if suffix.startswith(".jsonl") else suffix[1:]
    return None


def load_pass_matrix(
    path: Any,
    task: str | None = None,
    *,
    max_cells: int | None = None,
    max_bytes: int | None = None,
) -> Problem:
    """Read one pass matrix from a file, as a :class:`Problem`.

    Formats, by suffix:

    * ``.npy``: a 2-D 0/1 array;
    * ``.npz``: a single array, or the key ``B`` (with optional ``labels``/``y``),
      or the dataset layout (``task_ids``, ``B_kkkk``...);
    * ``.csv``: comma-separated 0/1, one candidate per line (no header row; a
      file separated by semicolons, tabs or spaces is refused, saying so);
    * ``.jsonl`` / ``.jsonl.gz``: the dataset layout;
    * ``.parquet`` (a file or a directory): the Parquet layout of
      :mod:`aces_fast.parquet` (needs pyarrow);
    * a bundled dataset name (a key of :data:`BUNDLED`, as for :func:`load_dataset`).

    ``path`` ``"-"`` reads standard input, the format told by its first bytes
    (npy, npz, gzip, a ``{`` for JSON lines, else CSV). Other paths must name
    regular files (FIFOs, devices and directories are refused before opening).

    For the dataset layouts (JSON lines, npz, Parquet) and bundled names the first
    problem is taken, or the
    one whose ``task_id`` is ``task``. ``task`` with a single-matrix file is an error.
    ``max_cells`` and ``max_bytes`` bound the matrix and the file's data (see
    "Limits" in the module docstring); sizes declared by npy headers, zip
    members and the JSONL ``passed`` form are checked before allocating.

    Raises ``ValueError`` naming the file (and line/column for CSV) when the
    content is not a 0/1 matrix with at least one row, is corrupt or
    truncated, holds pickled objects, or exceeds the limits.
    """
    if isinstance(path, str) and path in BUNDLED:  # a name, as for load_dataset
        return _pick(load_dataset(path, max_cells=max_cells, max_bytes=max_bytes), path, task)
    if not _is_stdin(path) and os.fspath(path).lower().endswith(".parquet"):
        # the dataset layout, as load_dataset reads it (a file or a directory)
        return _pick(
            load_dataset(path, max_cells=max_cells, max_bytes=max_bytes), _label(path), task
        )
    limits = resolve_limits(max_cells, max_bytes)
    label = _label(path)
    stdin = _is_stdin(path)
    with _binary_source(path, label, limits) as (fh, size):
        head = _peek(fh, 8)
        kind: str | None
        if stdin:
            kind = "jsonl" if sniff_format(head) == "gzip" else sniff_format(head)
            stem = "stdin"
        else:
            kind = _format_from_name(os.fspath(path))
            stem = Path(path).stem
            if kind is None:
                raise ValueError(
                    f"{label}: unknown format; expected .npy, .npz, .csv, "
                    ".jsonl, .jsonl.gz or .parquet"
                )
            if kind == "npz" and sniff_format(head) == "npy":
                kind = "npy"  # a .npy payload under an .npz name
        if kind == "jsonl":
            ds = Dataset(
                stem, _problems_from_jsonl(fh, label, limits, _gzipped(path, fh)), source=label
            )
            return _pick(ds, label, task)
        if kind == "npz":
            with NpzArchive(fh, label, limits) as z:
                if "task_ids" in z:
                    problems, meta = _problems_from_npz(z, label)
                    try:
                        ds = Dataset(stem, problems, source=label, meta=meta)
                    except ValueError as exc:
                        raise ValueError(f"{label}: {exc}") from None
                    return _pick(ds, label, task)
                _no_task(label, task)
                B, labels = _matrix_from_npz(z, label)
        else:
            _no_task(label, task)
            labels = None
            B = (
                read_npy(fh, label, size, limits, matrix=True)
                if kind == "npy"
                else _read_csv_matrix(fh, label, limits)
            )
    B = _binary_matrix(B, f"{label}: pass matrix")
    if labels is not None:
        labels = _binary_vector(labels, B.shape[0], f"{label}: labels")
    return Problem(stem, B, labels)


def _no_task(label: str, task: str | None) -> None:
    if task is not None:
        raise ValueError(
            f"{label}: holds a single matrix; --task/task applies only to "
            ".jsonl files and dataset .npz files"
        )


def _pick(ds: Dataset, label: str, task: str | None) -> Problem:
    if not len(ds):
        raise ValueError(f"{label}: holds no problems")
    if task is None:
        return ds[0]
    if task not in ds.task_ids:
        shown = ", ".join(ds.task_ids[:5]) + (" ..." if len(ds) > 5 else "")
        raise ValueError(f"{label}: no problem with task_id {task!r} (have {shown})")
    return ds[task]


def _matrix_from_npz(z: NpzArchive, label: str) -> tuple[np.ndarray, np.ndarray | None]:
    keys = z.files
    if len(keys) == 1:
        return z.read(keys[0], matrix=True), None
    if "B" in z:
        lab = next((k for k in ("labels", "y") if k in z), None)
        return z.read("B", matrix=True), (None if lab is None else z.read(lab))
    raise ValueError(
        f"{label}: holds {len(keys)} arrays ({', '.join(keys[:8])}); "
        "expected a single array, a key 'B', or the dataset layout with "
        "'task_ids'"
    )
