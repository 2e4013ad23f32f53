"""The bytes of a dataset run's part files (docs/parquet.md, "Part files").

Two writers give the same table back to any Parquet reader:

* **compiled** (the default): ``_core.encode_part`` writes the results'
  flat arrays straight into a Parquet file (csrc/io/parquet_part.hpp), in one
  pass per column with the GIL released; encoding plus SHA-256 1.8-2.5x
  faster than pyarrow's (``benchmarks/results/2026-11-29-part-writer.txt``). It takes
  tables of the results' layout (strings, booleans, doubles, lists of int32 and
  of doubles without null elements; every field nullable, at least one row,
  at most :data:`MAX_PAGE_BYTES` of values in a column; little-endian hosts);
* **pyarrow** (``pyarrow.parquet.write_table``): any other table, and every
  table when ``ACES_FAST_PART_WRITER=pyarrow`` (read when a part is encoded),
  for a reader that would refuse the compiled writer's files.

Both write the same layout: one row group, page checksums, Snappy, float lists
byte-stream split, int32 lists delta-encoded, statistics on the scalar columns
only, pyarrow's ``ARROW:schema`` and the table's metadata.
"""

from __future__ import annotations

import functools
import os
import sys
from typing import Any

import numpy as np

from . import _env
from ._engine import require_arrow

__all__ = ["MAX_PAGE_BYTES", "WRITERS", "encode_part", "part_writer"]

#: the values of ``ACES_FAST_PART_WRITER``
WRITERS = ("compiled", "pyarrow")

#: the most bytes of values in one column the compiled writer takes: it writes
#: one page per column, which a reader holds whole (pyarrow's pages are about
#: 1 MiB); a default batch of 2 048 problems of 200 candidates has 3.2 MB of
#: scores
MAX_PAGE_BYTES = 64 << 20

#: values pyarrow's writer takes at a time: one batch of a part's columns (the
#: default, 1 024, makes the per-batch level work cost 15% of the encoding;
#: encoding plus hashing 5.7 -> 4.7 microseconds per problem)
_WRITE_BATCH = 1 << 16


def part_writer() -> str:
    """The writer ``ACES_FAST_PART_WRITER`` names (default ``"compiled"``).

    Raises
    ------
    ValueError
        Any other value, named.
    """
    name = os.environ.get(_env.PART_WRITER, "").strip().lower() or "compiled"
    if name not in WRITERS:
        raise ValueError(
            f"{_env.PART_WRITER}={os.environ[_env.PART_WRITER]!r}: "
            f"expected one of {', '.join(WRITERS)}"
        )
    return name


def encode_part(table: Any, meta: dict[str, Any] | None = None) -> Any:
    """One part file's bytes: ``table`` (a ``pyarrow.Table``) with ``meta`` as the
    JSON value of the schema's ``aces_fast`` key (``None``: the table's own
    metadata). Returns a buffer: a read-only ``numpy.uint8`` array (the compiled
    writer's, starting on a page boundary, so that :func:`aces_fast._commit.write_fully`
    may write it with ``O_DIRECT``) or a ``pyarrow.Buffer``. O(bytes)."""
    import json

    if meta is not None:
        table = table.replace_schema_metadata({b"aces_fast": json.dumps(meta).encode()})
    if part_writer() == "compiled":
        data = _encode_compiled(table)
        if data is not None:
            return data
    return _encode_pyarrow(table)


def _encode_pyarrow(table: Any) -> Any:
    """pyarrow's part file. Choices, each measured (2 048 problems of 100x50):

    * no dictionary encoding: it triples the write time of these columns (mostly
      distinct floats and short permutations) and makes the file larger;
    * statistics for the scalar columns only (``task_id``'s serve
      :func:`aces_fast.parquet` readers): a row group's min and max score or
      rank tell nobody anything, and computing them cost 8% of the encoding;
    * snappy everywhere: it saves little on ACES-C's distinct float scores, but
      much on the tied scores of majority vote or ACES-C's filter variant;
    * float lists (scores, weights) byte-stream split: their sign and exponent
      bytes, grouped, compress; the file is 6% smaller and encodes faster;
    * integer lists (``order``, short permutations) delta-encoded
      (``DELTA_BINARY_PACKED``, Parquet 2.0, which every current reader reads):
      a 100-candidate order takes about 110 bytes instead of 400, and snappy
      has less to do; encoding plus hashing 8-11% faster, the file 7-10%
      smaller (ACES-C, majority vote and ACES-C's filter variant alike).
    """
    pa, pq = require_arrow()
    scalar = [f.name for f in table.schema if not pa.types.is_list(f.type)]
    encoding = {
        f"{f.name}.list.element": (
            "BYTE_STREAM_SPLIT"
            if pa.types.is_floating(f.type.value_type)
            else "DELTA_BINARY_PACKED"
        )
        for f in table.schema
        if pa.types.is_list(f.type)
    }
    sink = pa.BufferOutputStream()
    pq.write_table(
        table,
        sink,
        use_dictionary=False,
        write_page_checksum=True,
        write_statistics=scalar,
        compression="snappy",
        column_encoding=encoding,
        write_batch_size=_WRITE_BATCH,
    )
    return sink.getvalue()


# ---------------------------------------------------------------------------
# the compiled writer


def _kind(pa: Any, field: Any) -> str | None:
    """The compiled writer's kind of an Arrow field, or None (pyarrow writes it)."""
    t = field.type
    if not field.nullable:
        return None
    if t == pa.string():
        return "string"
    if t == pa.bool_():
        return "bool"
    if t == pa.float64():
        return "float64"
    if pa.types.is_list(t) and t.value_field.nullable:
        if t.value_type == pa.int32():
            return "list<int32>"
        if t.value_type == pa.float64():
            return "list<float64>"
    return None


@functools.lru_cache(maxsize=16)
def _file_metadata(schema_ipc: bytes) -> tuple[tuple[bytes, bytes], ...]:
    """The key-value metadata pyarrow writes for a schema (its ``ARROW:schema``,
    which restores the Arrow types and field names on reading, and the schema's
    own keys), taken from pyarrow's file of no rows: the same bytes a pyarrow
    part carries. Cached: a run's parts share one schema."""
    pa, pq = require_arrow()
    schema = pa.ipc.read_schema(pa.py_buffer(schema_ipc))
    sink = pa.BufferOutputStream()
    pq.write_table(schema.empty_table(), sink)
    meta = pq.read_metadata(pa.BufferReader(sink.getvalue())).metadata or {}
    return tuple(meta.items())


def _column(pa: Any, name: str, kind: str, arr: Any) -> tuple[Any, ...] | None:
    """``(name, kind, valid, offsets, values)`` of one Arrow array for
    ``_core.encode_part`` (zero copies where Arrow's layout allows), or None."""
    from .parquet import binary_parts, list_parts, validity

    valid = validity(arr)
    if kind == "string":
        offsets, data = binary_parts(arr)
        return (name, kind, valid, offsets, data)
    if kind == "bool":
        values = arr.fill_null(False).to_numpy(zero_copy_only=False)
        return (name, kind, valid, None, np.ascontiguousarray(values).view(np.uint8))
    if kind == "float64":
        values = arr.to_numpy(zero_copy_only=False)  # nulls as NaN: never read
        return (name, kind, valid, None, np.ascontiguousarray(values, dtype=np.float64))
    offsets, values, value_null = list_parts(arr, None)
    if value_null.any():
        return None  # null elements: pyarrow's levels
    return (name, kind, valid, offsets, np.ascontiguousarray(values))


def _encode_compiled(table: Any) -> np.ndarray | None:
    """The compiled writer's part file, or None when the table is not of its
    layout (pyarrow then writes it)."""
    from . import __version__
    from ._compiled import core

    pa, _ = require_arrow()
    if core is None or table.num_rows == 0 or table.num_rows >= 2**31:
        return None  # no extension (the package says why elsewhere), or no rows
    if sys.byteorder != "little":
        return None  # it copies values as they lie in memory; Parquet's are little-endian
    kinds = [_kind(pa, f) for f in table.schema]
    if None in kinds:
        return None
    columns = []
    for field, kind, col in zip(table.schema, kinds, table.columns):
        arr = col.chunk(0) if col.num_chunks == 1 else pa.concat_arrays(col.chunks)
        entry = _column(pa, field.name, kind, arr)  # type: ignore[arg-type]
        if entry is None:
            return None
        _, _, _, offsets, values = entry
        size = (offsets[-1] - offsets[0] if offsets is not None else len(values)) * values.itemsize
        if size > MAX_PAGE_BYTES:
            return None  # pyarrow splits it into pages
        columns.append(entry)
    meta = _file_metadata(table.schema.serialize().to_pybytes())
    data: np.ndarray = core.encode_part(
        rows=table.num_rows,
        columns=columns,
        metadata=list(meta),
        created_by=f"aces_fast version {__version__}",
    )
    return data
