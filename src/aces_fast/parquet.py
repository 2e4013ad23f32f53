"""Pass-matrix datasets as Parquet: one row per problem, the matrix bit-packed.

The layout (version :data:`LAYOUT_VERSION`; full description in
``docs/parquet.md``):

=============  ===============  ==================================================
column         type             meaning
=============  ===============  ==================================================
``task_id``    string           unique problem id
``n``, ``m``   int32            candidates (n >= 1) and tests (m >= 0)
``B``          binary           ``numpy.packbits(B, axis=1)`` flattened: each row
                                big-endian, padded with zero bits to whole bytes,
                                ``n * ceil(m / 8)`` bytes
``labels``     list<uint8>      optional, length n, 0/1 (null: unlabelled)
``test_count`` list<int32>      optional, length m
=============  ===============  ==================================================

The schema's key-value metadata holds ``aces_fast`` = ``{"format":
"pass-matrix", "version": 1}``. Files without it are read when their columns
fit (Parquet written by other tools); a newer version is refused.

:func:`decode_batch` turns a record batch into matrices and reports every bad
row (with its row number and task id) instead of stopping at the first one, so
a streaming run can skip bad rows. :func:`save_parquet` / :func:`load_parquet`
write and read whole :class:`~aces_fast.datasets.Dataset` objects.

Needs pyarrow (``pip install 'aces_fast[arrow]'``); ``import aces_fast`` does
not import this module.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

try:
    import pyarrow as pa
    import pyarrow.parquet as pq
except ImportError as _exc:  # pragma: no cover - exercised in a subprocess test
    raise ImportError(
        "reading and writing Parquet needs pyarrow, which is not installed: "
        "pip install 'aces_fast[arrow]'"
    ) from _exc

from ._problems import Dataset, Problem
from ._types import PathLike

__all__ = [
    "LAYOUT_VERSION",
    "METADATA_KEY",
    "REQUIRED_COLUMNS",
    "Decoded",
    "InputFile",
    "InvalidRowError",
    "Packed",
    "RowError",
    "check_schema",
    "damaged_row_group",
    "decode_batch",
    "input_files",
    "load_parquet",
    "open_file",
    "pack_rows",
    "row_group_task_ids",
    "save_parquet",
    "schema",
]

LAYOUT_VERSION = 1
METADATA_KEY = b"aces_fast"
REQUIRED_COLUMNS = ("task_id", "n", "m", "B")
OPTIONAL_COLUMNS = ("labels", "test_count")
#: rows per row group written by :func:`save_parquet` (about 11 MB at 100 x 50)
DEFAULT_ROW_GROUP_SIZE = 16384


def schema(labels: bool = True, test_count: bool = True) -> pa.Schema:
    """The Arrow schema of the layout, with the version in its metadata."""
    fields = [
        pa.field("task_id", pa.string(), nullable=False),
        pa.field("n", pa.int32(), nullable=False),
        pa.field("m", pa.int32(), nullable=False),
        pa.field("B", pa.binary(), nullable=False),
    ]
    if labels:
        fields.append(pa.field("labels", pa.list_(pa.uint8())))
    if test_count:
        fields.append(pa.field("test_count", pa.list_(pa.int32())))
    meta = {"format": "pass-matrix", "version": LAYOUT_VERSION}
    return pa.schema(fields, metadata={METADATA_KEY: json.dumps(meta).encode()})


# ---------------------------------------------------------------------------
# schema checks (whole file)


def _is_int(t: pa.DataType) -> bool:
    return pa.types.is_integer(t)


def _is_list_of(t: pa.DataType, ok) -> bool:
    return (pa.types.is_list(t) or pa.types.is_large_list(t)) and ok(t.value_type)


_COLUMN_TYPES = {
    "task_id": (lambda t: pa.types.is_string(t) or pa.types.is_large_string(t), "string"),
    "n": (_is_int, "an integer type (int32)"),
    "m": (_is_int, "an integer type (int32)"),
    "B": (lambda t: pa.types.is_binary(t) or pa.types.is_large_binary(t), "binary"),
    "labels": (
        lambda t: _is_list_of(t, lambda v: _is_int(v) or pa.types.is_boolean(v)),
        "list<uint8>",
    ),
    "test_count": (lambda t: _is_list_of(t, _is_int), "list<int32>"),
}


def check_schema(sch: pa.Schema, where: str) -> tuple[bool, bool]:
    """Check a file's schema against the layout; whole-file problems raise ``ValueError``.

    Returns ``(has_labels, has_test_count)``. Other columns are allowed (ignored).
    """
    raw = (sch.metadata or {}).get(METADATA_KEY)
    if raw is not None:
        try:
            meta = json.loads(raw)
        except ValueError:
            raise ValueError(f"{where}: metadata key 'aces_fast' is not JSON") from None
        if not isinstance(meta, dict) or meta.get("format") != "pass-matrix":
            kind = meta.get("format") if isinstance(meta, dict) else meta
            raise ValueError(
                f"{where}: holds {kind!r} data, not a pass-matrix dataset "
                "(is it the output of rerank-dataset?)"
            )
        version = meta.get("version")
        if not isinstance(version, int) or version > LAYOUT_VERSION:
            raise ValueError(
                f"{where}: pass-matrix layout version {version!r}; this aces_fast "
                f"reads versions up to {LAYOUT_VERSION} (upgrade aces_fast)"
            )
    names = set(sch.names)
    missing = [c for c in REQUIRED_COLUMNS if c not in names]
    if missing:
        raise ValueError(
            f"{where}: missing column(s) {', '.join(missing)}; a pass-matrix "
            f"Parquet file needs {', '.join(REQUIRED_COLUMNS)} (see docs/parquet.md)"
        )
    for name, (ok, want) in _COLUMN_TYPES.items():
        if name in names and not ok(sch.field(name).type):
            raise ValueError(
                f"{where}: column {name!r} has type {sch.field(name).type}; expected {want}"
            )
    return "labels" in names, "test_count" in names


def input_files(path: PathLike) -> list[Path]:
    """The Parquet files of a dataset: ``path`` itself, or the ``*.parquet`` files of a
    directory in name order (names starting with ``.`` or ``_`` are skipped, as
    pyarrow and Spark do)."""
    p = Path(path)
    if p.is_dir():
        files = sorted(
            f
            for f in p.iterdir()
            if f.suffix == ".parquet" and f.is_file() and not f.name.startswith((".", "_"))
        )
        if not files:
            raise ValueError(f"{p}: directory holds no .parquet files")
        return files
    if not p.exists():
        raise ValueError(f"{p}: no such file or directory")
    return [p]


# ---------------------------------------------------------------------------
# packing


def pack_rows(B: np.ndarray) -> bytes:
    """The ``B`` cell of one problem: ``numpy.packbits`` of each row, big-endian,
    rows padded to whole bytes, concatenated (``n * ceil(m / 8)`` bytes)."""
    return np.packbits(np.asarray(B, dtype=np.uint8), axis=1, bitorder="big").tobytes()


def _column(table: Any, name: str) -> pa.Array:
    """One column of a RecordBatch or Table as a single Array."""
    col = table.column(name)
    if isinstance(col, pa.ChunkedArray):
        if col.num_chunks == 1:
            return col.chunk(0)
        return pa.concat_arrays(col.chunks) if col.num_chunks else pa.array([], col.type)
    return col


def binary_parts(arr: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """``(offsets int64 (len+1,), data uint8)`` of a (large) binary or string
    array; row ``i`` is ``data[offsets[i]:offsets[i + 1]]`` (empty for nulls)."""
    bufs = arr.buffers()
    large = pa.types.is_large_binary(arr.type) or pa.types.is_large_string(arr.type)
    odt = np.int64 if large else np.int32
    offsets = np.frombuffer(bufs[1], odt)[arr.offset : arr.offset + len(arr) + 1].astype(np.int64)
    data = np.frombuffer(bufs[2], np.uint8) if bufs[2] is not None else np.zeros(0, np.uint8)
    return offsets, data


def validity(arr: pa.Array) -> np.ndarray | None:
    """uint8 (len,): 1 where ``arr`` holds a value, 0 where null; ``None`` when
    nothing is null."""
    if arr.null_count == 0:
        return None
    return np.ascontiguousarray(arr.is_valid().to_numpy(zero_copy_only=False)).view(np.uint8)


def list_parts(arr: pa.Array, dtype: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(offsets int64 (len+1,), values, value is null)`` of a (large) list array;
    the offsets start at 0 and index ``values`` directly; ``values`` of ``dtype``,
    or of the column's own integer type when ``dtype`` is None (booleans as
    uint8; without nulls a read-only view of the Arrow buffer). O(len + entries
    of these rows): a slice's ``values`` is its parent's whole child array (a
    batch cut from a large row group would otherwise convert the whole group's
    entries, once per batch), so only the slice's own range is converted."""
    offsets = np.asarray(arr.offsets, dtype=np.int64)
    start = int(offsets[0]) if offsets.size else 0
    values = arr.values.slice(start, int(offsets[-1]) - start if offsets.size else 0)
    offsets = offsets - start  # (a view of an Arrow buffer is read-only)
    if pa.types.is_boolean(values.type):
        values = values.cast(pa.uint8())
    if values.null_count:
        null = np.asarray(values.is_null().to_numpy(zero_copy_only=False), dtype=bool)
        values = values.fill_null(0)
    else:  # the usual labels: no mask to build, no copy to fill
        null = np.zeros(len(values), dtype=bool)
    vals = values.to_numpy(zero_copy_only=False)
    return offsets, vals if dtype is None else vals.astype(dtype, copy=False), null


def _list_column(
    table: Any, name: str, dtype: Any = np.int64
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """A list column as ``(row is null, offsets, values, value is null, lengths)``
    (see :func:`list_parts`)."""
    arr = _column(table, name)
    null = np.asarray(arr.is_null().to_numpy(zero_copy_only=False), dtype=bool)
    off, val, vnull = list_parts(arr, dtype)
    return null, off, val, vnull, off[1:] - off[:-1]


def _ints(arr: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """An integer column as ``(int64 values with nulls as 0, null mask)``."""
    if arr.null_count == 0 and not (
        pa.types.is_unsigned_integer(arr.type) and arr.type.bit_width == 64
    ):
        return arr.to_numpy().astype(np.int64), np.zeros(len(arr), dtype=bool)
    null = np.asarray(arr.is_null().to_numpy(zero_copy_only=False), dtype=bool)
    if pa.types.is_unsigned_integer(arr.type) and arr.type.bit_width == 64:
        # Values past int64 are nonsense sizes; clip so the checks below reject them.
        vals = np.minimum(arr.fill_null(0).to_numpy(zero_copy_only=False), 2**62)
        return vals.astype(np.int64), null
    return arr.fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64), null


# ---------------------------------------------------------------------------
# decoding a batch


@dataclass
class RowError:
    """A malformed row: its position in the input (0-based, over all files in order),
    its ``task_id`` (``None`` when missing) and the reason."""

    row: int | None
    task_id: str | None
    reason: str

    def message(self) -> str:
        where = "row ?" if self.row is None else f"row {self.row}"
        tid = "missing" if self.task_id is None else repr(self.task_id)
        return f"{where} (task_id {tid}): {self.reason}"

    def to_dict(self) -> dict[str, Any]:
        return {"task_id": self.task_id, "row": self.row, "reason": self.reason}


class InvalidRowError(ValueError):
    """A malformed row stopped a run; ``error`` is its :class:`RowError`."""

    def __init__(self, message: str, error: RowError):
        super().__init__(message)
        self.error = error


@dataclass
class Decoded:
    """The valid rows of a batch, in batch order, and the invalid ones.

    ``index[k]`` is the batch position of valid row ``k``; ``B[k]`` its uint8
    (n, m) matrix (views into one array per distinct shape); ``labels[k]`` its
    uint8 (n,) labels or ``None`` (``labels`` itself is ``None`` when the column is
    absent); likewise ``test_count`` (int32 (m,)) when asked for.
    """

    index: np.ndarray
    task_ids: list[str]
    B: list[np.ndarray]
    labels: list[np.ndarray | None] | None
    test_count: list[np.ndarray | None] | None
    errors: list[RowError]


def _row_numbers(table: Any, rows: Any) -> list[int | None]:
    if rows is None:
        if "row" in table.column_names:  # a Ray dataset carries them in a column
            return _column(table, "row").to_pylist()
        return [None] * table.num_rows
    if isinstance(rows, (int, np.integer)):
        return list(range(int(rows), int(rows) + table.num_rows))
    return [int(r) for r in rows]


@dataclass
class _Rows:
    """The columns of a batch as arrays, and the row checks of the layout: each
    ``(mask, why)`` flags the rows ``mask`` selects, ``why(i)`` the reason for row
    ``i``; a row's first flag (in list order) is its reason. Padding bits are
    checked where the bytes are unpacked."""

    tid: pa.Array
    n: np.ndarray
    m: np.ndarray
    offsets: np.ndarray
    data: np.ndarray
    labels: tuple[np.ndarray, np.ndarray, np.ndarray] | None  # offsets, values, null rows
    test_count: tuple[np.ndarray, np.ndarray, np.ndarray] | None
    checks: list[tuple[np.ndarray, Any]]


def _row_checks(table: Any) -> _Rows:
    """Every vectorized row check of ``decode_batch`` (O(T + label entries))."""
    T = table.num_rows
    names = table.column_names
    checks: list[tuple[np.ndarray, Any]] = []
    tid_arr = _column(table, "task_id")
    tid_null = (
        np.zeros(T, dtype=bool)
        if tid_arr.null_count == 0
        else np.asarray(tid_arr.is_null().to_numpy(zero_copy_only=False), dtype=bool)
    )
    checks.append((tid_null, lambda i: "missing task_id"))
    n, n_null = _ints(_column(table, "n"))
    m, m_null = _ints(_column(table, "m"))
    b_arr = _column(table, "B")
    offsets, data = binary_parts(b_arr)
    b_null = np.asarray(b_arr.is_null().to_numpy(zero_copy_only=False), dtype=bool)
    checks.append((n_null, lambda i: "missing n"))
    checks.append((m_null, lambda i: "missing m"))
    checks.append((b_null, lambda i: "missing B"))
    checks.append((n < 1, lambda i: f"n is {n[i]}; need n >= 1 candidates"))
    checks.append((m < 0, lambda i: f"m is {m[i]}; need m >= 0 tests"))
    nbytes = (np.maximum(m, 0) + 7) // 8
    expected = np.maximum(n, 0) * nbytes
    length = offsets[1:] - offsets[:-1]
    checks.append(
        (
            length != expected,
            lambda i: (
                f"B has {length[i]} bytes, but n x m = {n[i]} x {m[i]} packed by row needs "
                f"n * ceil(m / 8) = {expected[i]}"
            ),
        )
    )
    labels = None
    if "labels" in names:
        # in the column's own type: the 0/1 check holds for any integer type,
        # and a bad value is reported as written
        l_null, l_off, l_val, l_vnull, l_len = _list_column(table, "labels", None)
        checks.append(
            (~l_null & (l_len != n), lambda i: f"labels has {l_len[i]} entries; need n = {n[i]}")
        )
        bad = ((l_val != 0) & (l_val != 1)) | l_vnull
        bad_pos = np.flatnonzero(bad)
        bad_row = np.zeros(T, dtype=bool)
        if bad_pos.size:
            # the rows owning an offending entry (positions past the last row's end,
            # or in a null row, belong to no row)
            owner = np.searchsorted(l_off, bad_pos, side="right") - 1
            keep = (owner >= 0) & (owner < T)
            owner, pos = owner[keep], bad_pos[keep]
            inside = pos < l_off[owner + 1]
            bad_row[owner[inside]] = True
            bad_row &= ~l_null

        def why_label(i: int) -> str:
            pos = l_off[i] + int(np.argmax(bad[l_off[i] : l_off[i + 1]]))
            what = "null" if l_vnull[pos] else str(l_val[pos])
            return f"labels entry {pos - l_off[i]} is {what}; only 0 and 1 are allowed"

        checks.append((bad_row, why_label))
        labels = (l_off, l_val, l_null)
    test_count = None
    if "test_count" in names:
        t_null, t_off, t_val, _, t_len = _list_column(table, "test_count")
        checks.append(
            (
                ~t_null & (t_len != m),
                lambda i: f"test_count has {t_len[i]} entries; need m = {m[i]}",
            )
        )
        test_count = (t_off, t_val, t_null)
    return _Rows(tid_arr, n, m, offsets, data, labels, test_count, checks)


@dataclass
class Packed:
    """A batch every row of which passed the layout's row checks, still bit-packed:
    what :func:`aces_fast._core.rerank_packed` ranks without unpacking in Python.

    ``task_id``: the string column; ``n``, ``m``: int64 (T,); row ``t``'s bytes are
    ``data[offsets[t]:offsets[t + 1]]``; ``labels``: ``None`` (no column) or uint8
    (sum n,) aligned with the candidates (task ``t``'s at the cumulative sum of
    ``n``; zeros where unlabelled) with ``has_labels`` bool (T,).
    Padding bits are checked where the rows are unpacked.
    """

    task_id: pa.Array
    n: np.ndarray
    m: np.ndarray
    offsets: np.ndarray
    data: np.ndarray
    labels: np.ndarray | None
    has_labels: np.ndarray | None


def packed_batch(table: Any) -> Packed | None:
    """``table`` as a :class:`Packed` batch, or ``None`` when some row fails a row
    check (then :func:`decode_batch` names it). O(T + label entries), no unpacking.
    """
    r = _row_checks(table)
    if any(mask.any() for mask, _ in r.checks):
        return None
    labels = has = None
    if r.labels is not None:
        l_off, l_val, l_null = r.labels
        has = ~l_null
        if has.all():  # every length is n (checked): the values are in place
            labels = l_val[l_off[0] : l_off[-1]].astype(np.uint8, copy=False)
        else:  # move each labelled row's entries to its candidates' place
            n_off = np.zeros(len(r.n) + 1, np.int64)
            np.cumsum(r.n, out=n_off[1:])
            labels = np.zeros(int(n_off[-1]), np.uint8)
            cand = np.repeat(has, r.n)
            dst = np.flatnonzero(cand)
            src = dst + np.repeat(l_off[:-1] - n_off[:-1], r.n)[cand]
            labels[dst] = l_val[src]
    tid = r.tid if r.tid.type == pa.string() else r.tid.cast(pa.string())
    return Packed(tid, r.n, r.m, r.offsets, r.data, labels, has)


def decode_batch(table: Any, rows: Any = 0, *, test_count: bool = False) -> Decoded:
    """Validate and unpack one record batch (or table) of the layout.

    Parameters
    ----------
    table : pyarrow.RecordBatch or pyarrow.Table
        Rows of the layout (schema already passed :func:`check_schema`).
    rows : int, sequence of int, or None
        Input row numbers for error reports: the first row's (the rest follow),
        one per row, or ``None`` to take them from a ``row`` column when there
        is one.
    test_count : bool
        Also return the ``test_count`` arrays.

    Returns
    -------
    Decoded
        Bad rows -- a null in a required column, ``n < 1``, ``m < 0``, a ``B`` of
        the wrong byte length or with padding bits set, labels of the wrong
        length or not 0/1, a ``test_count`` of the wrong length -- are listed in
        ``errors`` (first reason per row) and left out of the rest.

    Notes
    -----
    Vectorized per distinct (n, m) shape: the packed bytes of all rows of one
    shape are unpacked in one ``numpy.unpackbits`` call. O(total bits).
    """
    T = table.num_rows
    names = table.column_names
    rc = _row_checks(table)
    reason: list[str | None] = [None] * T
    for mask, why in rc.checks:
        for i in np.flatnonzero(mask).tolist():
            if reason[i] is None:
                reason[i] = why(i)
    tids = rc.tid.to_pylist()
    n, m, offsets, data = rc.n, rc.m, rc.offsets, rc.data
    if rc.labels is not None:
        l_off, l_val, l_null = rc.labels
    if rc.test_count is not None:
        t_off, t_val, t_null = rc.test_count
    labels_out: list[np.ndarray | None] | None = None
    tc_out: list[np.ndarray | None] | None = None

    # Unpack per distinct shape; padding bits are checked on the packed bytes.
    ok = np.array([r is None for r in reason], dtype=bool)
    mats: dict[int, np.ndarray] = {}
    valid = np.flatnonzero(ok)
    if valid.size:
        nv, mv = n[valid], m[valid]
        if (nv == nv[0]).all() and (mv == mv[0]).all():  # the common case: one shape
            groups = [((int(nv[0]), int(mv[0])), valid)]
        else:
            uniq, inverse = np.unique(np.stack([nv, mv], axis=1), axis=0, return_inverse=True)
            inverse = inverse.reshape(-1)
            groups = [(tuple(u), valid[inverse == g]) for g, u in enumerate(uniq.tolist())]
        for (n0, m0), members in groups:
            nb = (m0 + 7) // 8
            size = n0 * nb
            if m0 == 0:
                block = np.zeros((members.size, n0, 0), dtype=np.uint8)
            else:
                starts = offsets[members]
                if np.array_equal(starts, starts[0] + size * np.arange(members.size)):
                    packed = data[starts[0] : starts[0] + size * members.size]
                else:
                    packed = data[(starts[:, None] + np.arange(size)).reshape(-1)]
                packed = packed.reshape(members.size * n0, nb)
                if m0 % 8:
                    pad = (packed[:, -1] & np.uint8((1 << (8 - m0 % 8)) - 1)) != 0
                    if pad.any():
                        for r in np.unique(members[np.flatnonzero(pad) // n0]).tolist():
                            reason[r] = (
                                f"B has padding bits set after column m = {m0} in a "
                                "row (each row must be packed big-endian and padded "
                                "with zero bits; is m or the bit order wrong?)"
                            )
                block = np.unpackbits(packed, axis=1, count=m0).reshape(members.size, n0, m0)
            for k, r in enumerate(members.tolist()):
                mats[r] = block[k]

    row_no = _row_numbers(table, rows)
    errors = [RowError(row_no[i], tids[i], why) for i, why in enumerate(reason) if why is not None]
    index = np.array([i for i in range(T) if reason[i] is None], dtype=np.int64)
    good = index.tolist()
    if "labels" in names:
        l_u8 = l_val.astype(np.uint8)  # all 0/1 on the good rows, checked above
        labels_out = [None if l_null[i] else l_u8[l_off[i] : l_off[i + 1]] for i in good]
    if test_count and "test_count" in names:
        tc_out = [
            None if t_null[i] else t_val[t_off[i] : t_off[i + 1]].astype(np.int32) for i in good
        ]
    return Decoded(
        index, [tids[i] for i in good], [mats[i] for i in good], labels_out, tc_out, errors
    )


# ---------------------------------------------------------------------------
# whole datasets


def _list_array(arrays: Sequence[np.ndarray | None], value_type: pa.DataType) -> pa.Array:
    lengths = np.array([0 if a is None else len(a) for a in arrays], dtype=np.int64)
    offsets = np.zeros(len(arrays) + 1, dtype=np.int32)
    np.cumsum(lengths, out=offsets[1:])
    present = [a for a in arrays if a is not None]
    values = (np.concatenate(present) if present else np.zeros(0)).astype(
        value_type.to_pandas_dtype()
    )
    mask = np.array([a is None for a in arrays], dtype=bool)
    return pa.ListArray.from_arrays(
        pa.array(offsets), pa.array(values, value_type), mask=pa.array(mask) if mask.any() else None
    )


def _problems_table(problems: Sequence[Problem], sch: pa.Schema) -> pa.Table:
    packed = [pack_rows(p.B) for p in problems]
    offsets = np.zeros(len(packed) + 1, dtype=np.int64)
    np.cumsum([len(b) for b in packed], out=offsets[1:])
    if offsets[-1] >= 2**31:
        raise ValueError("row group too large for a binary column: lower row_group_size")
    B = pa.Array.from_buffers(
        pa.binary(),
        len(packed),
        [None, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(b"".join(packed))],
    )
    cols = {
        "task_id": pa.array([p.task_id for p in problems], pa.string()),
        "n": pa.array(np.array([p.n for p in problems], dtype=np.int32)),
        "m": pa.array(np.array([p.m for p in problems], dtype=np.int32)),
        "B": B,
    }
    if "labels" in sch.names:
        cols["labels"] = _list_array([p.labels for p in problems], pa.uint8())
    if "test_count" in sch.names:
        cols["test_count"] = _list_array([p.extras.get("test_count") for p in problems], pa.int32())
    return pa.Table.from_arrays(list(cols.values()), schema=sch)


def save_parquet(
    dataset: Dataset | Sequence[Problem],
    path: PathLike,
    *,
    row_group_size: int = DEFAULT_ROW_GROUP_SIZE,
    compression: str = "zstd",
) -> list[str]:
    """Write problems in the Parquet layout (see the module docstring).

    The ``labels`` column is written when some problem has labels (null for the
    others), ``test_count`` likewise from ``Problem.extras``. Other extras
    (``t_ok``, ``cand_uid``, ...) are not part of the layout.

    Parameters
    ----------
    dataset : Dataset or sequence of Problem
    path : str or Path
        The ``.parquet`` file to write (replaced if it exists).
    row_group_size : int
        Problems per row group (the unit a Ray read task handles).
    compression : str
        A Parquet codec (``"zstd"``, ``"snappy"``, ``"none"``, ...).

    Returns
    -------
    list of str
        The names of extras that were not written (empty when nothing was lost).
    """
    problems = list(dataset)
    if (
        isinstance(row_group_size, bool)
        or not isinstance(row_group_size, int)
        or row_group_size < 1
    ):
        raise ValueError(f"row_group_size must be a positive integer; got {row_group_size!r}")
    sch = schema(
        labels=any(p.labels is not None for p in problems),
        test_count=any("test_count" in p.extras for p in problems),
    )
    dropped = sorted({k for p in problems for k in p.extras if k != "test_count"})
    # Page checksums: a reader (and rerank-dataset) then detects a flipped byte
    # instead of decoding a changed matrix.
    with pq.ParquetWriter(
        str(path), sch, compression=compression, write_page_checksum=True
    ) as writer:
        for start in range(0, len(problems), row_group_size):
            chunk = problems[start : start + row_group_size]
            writer.write_table(_problems_table(chunk, sch), row_group_size=row_group_size)
    return dropped


def load_parquet(path: PathLike, name: str | None = None) -> Dataset:
    """Read a Parquet pass-matrix dataset (a file, or a directory of files) into memory.

    Raises ``ValueError`` naming the file, the row number and the task id for a
    malformed row (see :func:`decode_batch`), a missing column or wrong column
    type, a duplicate task id, or a newer layout version. O(total size).
    """
    files = input_files(path)
    problems: list[Problem] = []
    row = 0
    for f in files:
        pf = open_file(f)
        check_schema(pf.schema_arrow, str(f))
        for batch in _verified_batches(InputFile(f, pf, row)):
            dec = decode_batch(batch, row, test_count=True)
            if dec.errors:
                raise InvalidRowError(f"{f}: {dec.errors[0].message()}", dec.errors[0])
            for k, tid in enumerate(dec.task_ids):
                extras = {}
                if dec.test_count is not None and dec.test_count[k] is not None:
                    extras["test_count"] = dec.test_count[k]
                lab = None if dec.labels is None else dec.labels[k]
                problems.append(Problem(tid, np.ascontiguousarray(dec.B[k]), lab, extras))
            row += batch.num_rows
    if name is None:
        p = Path(path)
        name = p.name[: -len(".parquet")] if p.name.endswith(".parquet") else p.name
    return Dataset(name, problems, source=str(path))


def _verified_batches(f: InputFile) -> Any:
    """The record batches of one file, row group by row group, so that a page that
    fails its checksum or does not decode is a ``ValueError`` naming the file,
    the row group, its rows and task ids."""
    lo = f.first_row
    for g in range(f.pf.num_row_groups):
        hi = lo + f.pf.metadata.row_group(g).num_rows
        r = lo
        it = f.pf.iter_batches(batch_size=DEFAULT_ROW_GROUP_SIZE, row_groups=[g])
        while True:
            try:
                batch = next(it, None)
            except (OSError, pa.ArrowException) as exc:
                raise ValueError(damaged_row_group(f, g, lo, hi, r, exc)[0]) from None
            if batch is None:
                break
            r += batch.num_rows
            yield batch
        lo = hi


# ---------------------------------------------------------------------------
# reading files (shared by load_parquet and the streaming and Ray engines)


def _unreadable(path: Any, exc: BaseException) -> ValueError:
    return ValueError(f"{path}: cannot read as Parquet: {exc}")


def open_file(path: Any, source: Any = None, metadata: Any = None) -> pq.ParquetFile:
    """A reader for streaming: ``pre_buffer=False``, because with pre-buffering the
    reader keeps every column chunk it has read until it is closed, so memory
    grows with the file (about 390 MiB after 600 000 rows of 100 x 50) instead of
    staying at one batch. Pages that carry a CRC (``save_parquet`` writes them)
    are verified as they are read: a damaged page raises ``OSError``.

    ``source``: an open ``pyarrow.NativeFile`` of ``path`` to read from (see
    :class:`InputFile`); by default the path is opened. ``metadata``: the
    file's footer, already parsed (it is then not read again)."""
    try:
        return pq.ParquetFile(
            str(path) if source is None else source,
            metadata=metadata,
            pre_buffer=False,
            page_checksum_verification=True,
        )
    except (OSError, pa.ArrowException) as exc:
        raise _unreadable(path, exc) from None


@dataclass
class InputFile:
    """One Parquet file of the input and the row number of its first row.

    ``source``, when set, is the open file ``pf`` reads (``pyarrow.OSFile``):
    :meth:`reader` gives more readers of that same open file, for threads that
    read row groups at once (its positional reads are thread-safe), so all of
    them read the file that was opened, even if its path is replaced
    meanwhile."""

    path: Path
    pf: Any  # pyarrow.parquet.ParquetFile
    first_row: int
    source: Any = None  # pyarrow.NativeFile

    @property
    def num_rows(self) -> int:
        return int(self.pf.metadata.num_rows)

    def reader(self) -> Any:
        """Another ``ParquetFile`` of this file (the same open file and parsed
        footer when ``source`` is set; else ``pf`` itself), for one thread."""
        if self.source is None:
            return self.pf
        return open_file(self.path, self.source, self.pf.metadata)

    @classmethod
    def open(cls, path: Any, first_row: int = 0) -> InputFile:
        """Open ``path`` once (``pyarrow.OSFile``) and read it through that file;
        ``ValueError`` when it cannot be read as Parquet."""
        try:
            source = pa.OSFile(str(path))
        except (OSError, pa.ArrowException) as exc:
            raise _unreadable(path, exc) from None
        try:
            pf = open_file(path, source)
        except ValueError:
            source.close()
            raise
        return cls(Path(path), pf, first_row, source)


def row_group_task_ids(pf: Any, g: int) -> Any | None:
    """The ``task_id`` column of one row group, or ``None`` when it cannot be read."""
    try:
        return pf.read_row_group(g, columns=["task_id"]).column(0)
    except (OSError, pa.ArrowException):
        return None


def damaged_row_group(
    f: InputFile, g: int, lo: int, hi: int, start: int, exc: BaseException
) -> tuple[str, list[str | None]]:
    """The message for a row group that failed to decode at row ``start`` (its rows
    are ``[lo, hi)``), and the task ids of rows ``start..hi-1`` where readable."""
    col = row_group_task_ids(f.pf, g)
    ids: list[str | None] = [None] * (hi - start)
    span = ""
    if col is not None:
        ids = col.slice(start - lo).to_pylist()
        span = f", task_ids {ids[0]!r} to {ids[-1]!r}" if ids else ""
    else:
        stats = _task_id_stats(f.pf, g)
        span = f", task_ids between {stats[0]!r} and {stats[1]!r}" if stats else ""
    first_line = " ".join(str(exc).split())
    return (
        f"{f.path}: row group {g} (rows {start} to {hi - 1}{span}) is damaged: {first_line}"
    ), ids


def _task_id_stats(pf: Any, g: int) -> tuple[Any, Any] | None:
    try:
        names = pf.schema_arrow.names
        st = pf.metadata.row_group(g).column(names.index("task_id")).statistics
        if st is not None and st.has_min_max:
            return st.min, st.max
    except (ValueError, IndexError, AttributeError):
        pass
    return None
