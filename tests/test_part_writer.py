"""The compiled part writer (aces_fast._parts, csrc/io/): its codecs against zlib
and pyarrow's Snappy, and its files against pyarrow's writer: the same table, the
same statistics, checksummed pages, for every results layout and for hostile
tables; the fallback to pyarrow and the ACES_FAST_PART_WRITER switch."""

from __future__ import annotations

import os
import subprocess
import sys
import zlib

import numpy as np
import pytest

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

from benchmarks.harness.stream_scale import write_synthetic
from hypothesis import given, settings
from hypothesis import strategies as st

from aces_fast import _core, _parts
from aces_fast._engine import rerank_table
from aces_fast._registry import method_params
from aces_fast.cli import main
from aces_fast.parquet import open_file
from aces_fast.stream import rerank_dataset

# ---------------------------------------------------------------------------
# codecs


def _snappy_round_trip(data: bytes) -> bytes:
    packed = _core.snappy_compress(data=data)
    return pa.decompress(packed, decompressed_size=len(data), codec="snappy", asbytes=True)


@pytest.mark.parametrize("seed", range(3))
def test_crc32_is_zlibs(seed):
    rng = np.random.default_rng(seed)
    for n in [0, 1, 7, 8, 15, 16, 17, 31, 33, 63, 64, 65, 79, 100, 127, 128, 1000, 4097, 70001]:
        data = rng.bytes(n)
        assert _core.crc32(data=data, crc=0) == zlib.crc32(data), n
        # continued from an earlier value, as zlib.crc32(data, crc)
        assert _core.crc32(data=data, crc=12345) == zlib.crc32(data, 12345), n


def test_crc32_without_carry_less_multiplication_is_zlibs_too():
    """ACES_FAST_SIMD=none runs the table-driven CRC (the fold needs AVX2's level)."""
    code = (
        "import zlib, numpy as np; from aces_fast import _core; "
        "r = np.random.default_rng(5); "
        "d = [r.bytes(n) for n in (0, 1, 15, 16, 63, 64, 65, 1000, 70000)]; "
        "assert all(_core.crc32(data=x, crc=7) == zlib.crc32(x, 7) for x in d); print('ok')"
    )
    env = dict(os.environ, ACES_FAST_SIMD="none")
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert proc.stdout.strip() == "ok", proc.stderr


def test_snappy_round_trips_through_pyarrow():
    rng = np.random.default_rng(0)
    pattern = bytes(range(251)) * 600  # repeats at an odd distance
    cases = [
        b"",
        b"a",
        b"abc",
        b"abcd" * 3,
        b"\0" * 14,  # below the matcher's margin: one literal
        b"\0" * 15,
        b"\0" * 100_000,  # long copies, split in pieces of 64
        rng.bytes(100),
        rng.bytes(70_000),  # incompressible, across a 64 KiB fragment
        pattern,
        rng.bytes(3000) + rng.bytes(3000),
        bytes(rng.integers(0, 4, 200_000, dtype=np.uint8)),  # short matches everywhere
        b"x" * 65_535,
        b"x" * 65_536,
        b"x" * 65_537,
        rng.bytes(65_536 * 2 + 5),
    ]
    # matches of every length around the copy elements' limits (4..11 with a
    # short offset, 64, 68), at offsets below and above 2 048
    for length in [4, 5, 11, 12, 60, 63, 64, 65, 67, 68, 69, 131]:
        for gap in [1, 100, 2047, 2048, 5000]:
            head = rng.bytes(max(gap, length))  # the copy's offset: len(head)
            cases.append(head + head[:length] + rng.bytes(20))
    for data in cases:
        assert _snappy_round_trip(data) == data, len(data)


def test_snappy_compresses_what_repeats():
    assert len(_core.snappy_compress(data=b"\0" * 100_000)) < 6_000
    noise = np.random.default_rng(1).bytes(10_000)
    assert len(_core.snappy_compress(data=noise)) <= 10_000 + 10_000 // 6 + 32


@settings(max_examples=60, deadline=None)
@given(st.binary(max_size=3000), st.integers(1, 50))
def test_snappy_round_trips_any_bytes(data, repeat):
    data = data * (repeat if len(data) < 60 else 1)
    assert _snappy_round_trip(data) == data


# ---------------------------------------------------------------------------
# the files: against pyarrow's writer


def _both(table):
    """(compiled bytes, pyarrow bytes) of one table; the compiled writer must take it."""
    fast = _parts._encode_compiled(table)
    assert fast is not None, "the compiled writer declined the table"
    # the encoder's own buffer, handed over without a copy: read-only, as bytes are
    assert fast.dtype == np.uint8 and fast.ndim == 1 and not fast.flags.writeable
    return bytes(fast), _parts._encode_pyarrow(table).to_pybytes()


def _read(data, **kw):
    return pq.ParquetFile(pa.BufferReader(data), page_checksum_verification=True, **kw)


def _assert_same_file_contents(fast, slow):
    """Same table (schema and metadata included) and same statistics."""
    a, b = _read(fast), _read(slow)
    ta, tb = a.read(), b.read()
    assert ta.schema.equals(tb.schema, check_metadata=True), (ta.schema, tb.schema)
    # the same values, NaN and signed zeros included (equals() is False for NaN)
    assert ta.num_rows == tb.num_rows
    for name in ta.column_names:
        for x, y in zip(ta.column(name).to_pylist(), tb.column(name).to_pylist()):
            assert repr(x) == repr(y), name
    ma, mb = a.metadata, b.metadata
    assert ma.num_rows == mb.num_rows and ma.num_row_groups == mb.num_row_groups == 1
    assert ma.metadata == mb.metadata  # ARROW:schema and the aces_fast key
    ga, gb = ma.row_group(0), mb.row_group(0)
    for i in range(ga.num_columns):
        ca, cb = ga.column(i), gb.column(i)
        assert ca.path_in_schema == cb.path_in_schema
        assert ca.physical_type == cb.physical_type
        assert ca.compression == cb.compression == "SNAPPY"
        assert ca.is_stats_set == cb.is_stats_set, ca.path_in_schema
        if ca.is_stats_set:
            sa, sb = ca.statistics, cb.statistics
            assert sa.null_count == sb.null_count, ca.path_in_schema
            assert sa.has_min_max == sb.has_min_max, ca.path_in_schema
            if sa.has_min_max:
                assert repr((sa.min, sa.max)) == repr((sb.min, sb.max)), ca.path_in_schema
    assert ma.created_by.startswith("aces_fast version ")


@pytest.fixture(scope="module")
def batch(tmp_path_factory):
    path = tmp_path_factory.mktemp("pw") / "in.parquet"
    write_synthetic(path, 300, 30, 17, row_group_size=300)
    return next(open_file(path).iter_batches(batch_size=300))


@pytest.mark.parametrize("method", ["aces-c", "aces-c-filter", "majority", "codet", "b4", "aces-o"])
@pytest.mark.parametrize("labels", [True, False])
def test_results_of_every_method_read_back_as_pyarrows(batch, method, labels):
    params = {"steps": 5} if method == "aces-o" else {}
    table, _, _ = rerank_table(batch, method, method_params(method, params), has_labels=labels)
    table = table.replace_schema_metadata({b"aces_fast": b'{"method": "%s"}' % method.encode()})
    fast, slow = _both(table)
    _assert_same_file_contents(fast, slow)
    assert bytes(_parts._encode_compiled(table)) == fast  # deterministic
    enc = {
        c.path_in_schema: c.encodings
        for c in (_read(fast).metadata.row_group(0).column(i) for i in range(table.num_columns))
    }
    assert "DELTA_BINARY_PACKED" in enc["order.list.element"]
    assert "BYTE_STREAM_SPLIT" in enc["scores.list.element"]
    assert "BYTE_STREAM_SPLIT" in enc["weights.list.element"]


def _list(values, lengths, nulls, dtype):
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
    mask = pa.array(nulls) if any(nulls) else None
    return pa.ListArray.from_arrays(pa.array(offsets), pa.array(values, dtype), mask=mask)


@settings(max_examples=80, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.one_of(st.none(), st.text(max_size=6)),
            st.one_of(st.none(), st.lists(st.integers(-(2**31), 2**31 - 1), max_size=140)),
            st.one_of(
                st.none(),
                st.lists(st.floats(allow_nan=True, allow_infinity=True), max_size=40),
            ),
            st.one_of(st.none(), st.booleans()),
            st.one_of(st.none(), st.floats(allow_nan=True)),
        ),
        min_size=1,
        max_size=40,
    ),
    st.integers(0, 3),
)
def test_any_table_of_the_layout_reads_back_as_pyarrows(rows, cut):
    """Nulls anywhere (rows, lists), empty lists and strings, NaN, signed zeros
    and infinities, int32 extremes (the delta encoding wraps around), lists
    across the 128-value blocks; the table sliced and in several chunks."""
    ids, ints, floats, flags, xs = zip(*rows)
    table = pa.table(
        {
            "task_id": pa.array(ids, pa.string()),
            "order": pa.array(ints, pa.list_(pa.int32())),
            "scores": pa.array(floats, pa.list_(pa.float64())),
            "fallback": pa.array(flags, pa.bool_()),
            "pass@1": pa.array(xs, pa.float64()),
        }
    )
    if cut and len(table) > cut:
        table = pa.concat_tables([table.slice(cut), table.slice(0, cut)])  # two chunks, offsets
    _assert_same_file_contents(*_both(table))


def test_long_lists_and_a_sliced_all_null_column():
    rng = np.random.default_rng(3)
    lengths = [0, 1, 127, 128, 129, 300, 5, 0]
    total = sum(lengths)
    order = _list(rng.integers(0, 300, total), lengths, [False] * 8, pa.int32())
    scores = _list(rng.normal(size=total), lengths, [False, True] + [False] * 6, pa.float64())
    table = pa.table(
        {
            "task_id": [f"t{i}" for i in range(8)],
            "order": order,
            "scores": scores,
            "weights": pa.nulls(8, pa.list_(pa.float64())),
            "pass@1": pa.nulls(8, pa.float64()),
        }
    ).slice(1, 6)
    fast, slow = _both(table)
    _assert_same_file_contents(fast, slow)
    st_ = _read(fast).metadata.row_group(0).column(4).statistics
    assert st_.null_count == 6 and not st_.has_min_max


def test_a_flipped_byte_in_any_column_fails_its_page_checksum(batch):
    table, _, _ = rerank_table(batch, "aces-c", method_params("aces-c", {}), has_labels=True)
    fast = _parts._encode_compiled(table)
    meta = _read(fast).metadata.row_group(0)
    for i in range(meta.num_columns):
        col = meta.column(i)
        data = bytearray(fast)
        data[col.data_page_offset + col.total_compressed_size - 3] ^= 0x40  # in the page
        with pytest.raises(OSError, match="(?i)crc|checksum"):
            _read(bytes(data)).read()


# ---------------------------------------------------------------------------
# what the compiled writer declines, and the switch


@pytest.mark.parametrize(
    "table",
    [
        pa.table({"a": pa.array([1, 2], pa.int64())}),
        pa.table({"a": pa.array(["x", "y"], pa.large_string())}),
        pa.table({"a": pa.array([[1.0, None]], pa.list_(pa.float64()))}),  # a null element
        pa.table({"a": pa.array([], pa.string())}),  # no rows
        pa.Table.from_arrays(
            [pa.array(["x"])], schema=pa.schema([pa.field("a", pa.string(), nullable=False)])
        ),
    ],
    ids=["int64", "large_string", "null-element", "empty", "not-nullable"],
)
def test_other_tables_are_written_by_pyarrow(table):
    assert _parts._encode_compiled(table) is None
    data = _parts.encode_part(table)
    assert pq.read_table(pa.BufferReader(data)).equals(table)
    assert _read(data).metadata.created_by.startswith("parquet-cpp")


def test_a_column_beyond_one_pages_limit_goes_to_pyarrow(monkeypatch):
    table = pa.table({"scores": pa.array([[0.5] * 100, [1.0] * 28], pa.list_(pa.float64()))})
    assert _parts._encode_compiled(table) is not None
    monkeypatch.setattr(_parts, "MAX_PAGE_BYTES", 128 * 8 - 1)
    assert _parts._encode_compiled(table) is None
    data = _parts.encode_part(table)
    assert pq.read_table(pa.BufferReader(data)).equals(table)


def test_a_big_endian_host_leaves_the_parts_to_pyarrow(monkeypatch, batch):
    table, _, _ = rerank_table(batch, "codet", method_params("codet", {}), has_labels=True)
    monkeypatch.setattr(_parts.sys, "byteorder", "big")
    assert _parts._encode_compiled(table) is None


def test_the_switch_selects_pyarrow_and_rejects_other_names(monkeypatch, batch, tmp_path):
    table, _, _ = rerank_table(batch, "aces-c", method_params("aces-c", {}), has_labels=True)
    assert _parts.part_writer() == "compiled"
    monkeypatch.setenv("ACES_FAST_PART_WRITER", "PyArrow")
    assert _parts.part_writer() == "pyarrow"
    assert bytes(_parts.encode_part(table)) == _parts._encode_pyarrow(table).to_pybytes()
    monkeypatch.setenv("ACES_FAST_PART_WRITER", "fast")
    with pytest.raises(ValueError, match="ACES_FAST_PART_WRITER='fast'.*compiled, pyarrow"):
        _parts.part_writer()
    # a run checks it before it writes anything
    path = tmp_path / "in.parquet"
    write_synthetic(path, 5, 4, 3)
    with pytest.raises(ValueError, match="ACES_FAST_PART_WRITER"):
        rerank_dataset(path, tmp_path / "o", n_threads=1)
    assert not (tmp_path / "o").exists()


def test_the_cli_reports_a_bad_switch_in_one_line(monkeypatch, tmp_path, capsys):
    path = tmp_path / "in.parquet"
    write_synthetic(path, 5, 4, 3)
    monkeypatch.setenv("ACES_FAST_PART_WRITER", "nope")
    assert main(["rerank-dataset", str(path), "-o", str(tmp_path / "o")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("aces-fast: error:") and "nope" in err[0]


def test_runs_with_either_writer_give_the_same_table(monkeypatch, tmp_path):
    """A results directory reads as one table whichever writer wrote its parts,
    and a run resumed under the other writer keeps its committed parts."""
    path = tmp_path / "in.parquet"
    write_synthetic(path, 200, 12, 9, row_group_size=50)
    rerank_dataset(path, tmp_path / "fast", batch_size=50, n_threads=2)
    monkeypatch.setenv("ACES_FAST_PART_WRITER", "pyarrow")
    rerank_dataset(path, tmp_path / "slow", batch_size=50, n_threads=2)
    fast = pq.read_table(tmp_path / "fast")
    slow = pq.read_table(tmp_path / "slow")
    assert fast.equals(slow) and fast.schema.equals(slow.schema, check_metadata=True)
    # mixed parts in one directory: one table
    parts = sorted((tmp_path / "slow").glob("part-*.parquet"))
    parts[0].write_bytes(sorted((tmp_path / "fast").glob("part-*.parquet"))[0].read_bytes())
    assert pq.read_table(tmp_path / "slow").equals(slow)


_OFF = np.array([0, 2, 1], np.int64)
_BAD_COLUMNS = [
    (ValueError, "rows must be >= 1", 0, ("a", "float64", None, None, np.zeros(2))),
    (ValueError, "unknown kind 'int8'", 2, ("a", "int8", None, None, np.zeros(2))),
    (TypeError, "values must be a float64 array", 2, ("a", "float64", None, None, [1.0, 2.0])),
    (ValueError, "values must have at least 3", 3, ("a", "float64", None, None, np.zeros(2))),
    (ValueError, "valid must have 2", 2, ("a", "float64", np.ones(3, np.uint8), None, np.zeros(2))),
    (
        ValueError,
        "offsets must not decrease",
        2,
        ("a", "string", None, _OFF, np.zeros(5, np.uint8)),
    ),
    (ValueError, "offsets must have 3", 2, ("a", "string", None, _OFF[:2], np.zeros(5, np.uint8))),
    (
        ValueError,
        "values must have at least 9",
        2,
        ("a", "list<int32>", None, np.array([0, 2, 9], np.int64), np.zeros(5, np.int32)),
    ),
    (TypeError, "each column is", 2, ("a", "float64")),
]


@pytest.mark.parametrize(("exc", "match", "rows", "column"), _BAD_COLUMNS)
def test_binding_checks_its_arguments(exc, match, rows, column):
    with pytest.raises(exc, match=match):
        _core.encode_part(rows=rows, columns=[column], metadata=[], created_by="x")
