"""A corpus of corrupt, hostile and careless files, generated here, run through
the loaders and the command line.

Every file must be refused with a ``ValueError``/``TypeError`` naming it (or,
for the few marked ``may_load`` such as a JSONL cut at a line boundary, load
as the valid prefix it is) -- never another exception, a hang, a pickle being
run, or memory a file merely declares. Through ``aces-fast rerank FILE`` and
``aces-fast evaluate FILE`` in a child process limited to 2 GiB of address
space: exit status 1, exactly one stderr line ``aces-fast: error: ...`` naming
the file, no traceback, and not "out of memory" (the file must be refused by a
check, not by the allocator).

The default run takes a representative sample; the tests marked ``slow`` sweep
every truncation offset and seeded random byte mutations.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import os
import pickle
import random
import resource
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import zipfile
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest

from aces_fast.datasets import (
    Dataset,
    Problem,
    load_dataset,
    load_jsonl,
    load_npz,
    load_pass_matrix,
    save_jsonl,
    save_npz,
)

ROOT = Path(__file__).resolve().parents[1]
CHILD_ADDRESS_SPACE = 2 << 30  # RLIMIT_AS of every CLI child, above its start-up size
DATASET_SUFFIXES = (".npz", ".jsonl", ".jsonl.gz")


@dataclass
class Entry:
    """One corpus file. ``kwargs`` go to the loaders, ``env`` to the CLI child."""

    path: Path
    may_load: bool = False  # a valid file (or valid prefix): loading may succeed
    match: str | None = None  # a phrase the error must contain
    kwargs: dict[str, int] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def is_dataset(self) -> bool:
        return self.name.endswith(DATASET_SUFFIXES)


# ---------------------------------------------------------------------------
# building blocks: npy headers, raw zip archives, a pickle that leaves a marker


def npy_bytes(arr: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, arr, allow_pickle=False)
    return buf.getvalue()


def npy_with_header(header: str, payload: bytes = b"", version=(1, 0)) -> bytes:
    """An .npy file with an arbitrary header text (padded as numpy pads it)."""
    raw = header.encode("latin1")
    size_fmt = "<H" if version == (1, 0) else "<I"
    pad = 64 - (10 + len(raw) + 1) % 64
    raw += b" " * (pad % 64) + b"\n"
    return b"\x93NUMPY" + bytes(version) + struct.pack(size_fmt, len(raw)) + raw + payload


def raw_zip(members: list[dict]) -> bytes:
    """A zip archive written by hand, so sizes, flags and methods can lie.

    Each member: ``name``, ``data`` (the bytes as stored), and optionally
    ``method`` (0 stored, 8 deflate, ...), ``size`` (declared uncompressed
    size, default len(data) for stored), ``crc`` (default that of ``data``),
    ``flags``.
    """
    out, central = bytearray(), bytearray()
    for m in members:
        name = m["name"].encode()
        data = m["data"]
        method = m.get("method", 0)
        size = m.get("size", len(data))
        crc = m.get("crc", zlib.crc32(data))
        flags = m.get("flags", 0)
        offset = len(out)
        out += (
            struct.pack(
                "<IHHHHHIIIHH",
                0x04034B50,
                20,
                flags,
                method,
                0,
                0x21,
                crc,
                len(data),
                size,
                len(name),
                0,
            )
            + name
            + data
        )
        central += (
            struct.pack(
                "<IHHHHHHIIIHHHHHII",
                0x02014B50,
                20,
                20,
                flags,
                method,
                0,
                0x21,
                crc,
                len(data),
                size,
                len(name),
                0,
                0,
                0,
                0,
                0,
                offset,
            )
            + name
        )
    eocd = struct.pack(
        "<IHHHHIIH", 0x06054B50, 0, 0, len(members), len(members), len(central), len(out), 0
    )
    return bytes(out + central + eocd)


def deflate_zeros_member(name: str, header: bytes, n_mib: int) -> dict:
    """A deflate member of ``header`` + ``n_mib`` MiB of zeros, built in O(1 MiB) work:
    after a full flush a deflate block does not refer back, so the block of one
    MiB of zeros can be repeated. About 1 KB per MiB: a real decompression bomb."""
    co = zlib.compressobj(9, zlib.DEFLATED, -15)
    zero = bytes(1 << 20)
    block = co.compress(zero) + co.flush(zlib.Z_FULL_FLUSH)
    head = co.compress(header) + co.flush(zlib.Z_FULL_FLUSH)
    data = head + block * n_mib + co.flush()
    crc = zlib.crc32(header)
    for _ in range(n_mib):
        crc = zlib.crc32(zero, crc)
    return dict(name=name, data=data, method=8, size=len(header) + n_mib * (1 << 20), crc=crc)


class Marker:
    """Unpickling this creates the file ``path`` (proof that a pickle was run)."""

    def __init__(self, path: Path):
        self.path = str(path)

    def __reduce__(self):
        return (open, (self.path, "w"))


# ---------------------------------------------------------------------------
# the corpus


def toy_dataset() -> Dataset:
    B = np.array([[1, 0, 1, 1], [0, 0, 1, 0], [1, 1, 1, 0]], np.uint8)
    return Dataset(
        "toy",
        [
            Problem("p0", B, np.array([1, 0, 1], np.uint8), {"t_ok": np.array([1, 0, 1, 1])}),
            Problem("p1", B[:2, :3], np.array([0, 1], np.uint8)),
        ],
    )


MATRIX = np.array([[1, 0, 1], [0, 1, 1]], np.uint8)


def seed_files(root: Path) -> dict[str, Path]:
    """Valid files of every format (the controls, and what truncations start from)."""
    ds = toy_dataset()
    paths = {}
    for name, write in [
        ("ds.npz", lambda p: save_npz(ds, p)),
        ("ds_stored.npz", lambda p: save_npz(ds, p, compressed=False)),
        ("ds.jsonl", lambda p: save_jsonl(ds, p)),
        ("ds_passed.jsonl", lambda p: save_jsonl(ds, p, matrix_format="passed")),
        ("ds.jsonl.gz", lambda p: save_jsonl(ds, p)),
        ("m.npy", lambda p: np.save(p, MATRIX)),
        ("m_keyed.npz", lambda p: np.savez_compressed(p, B=MATRIX, labels=np.array([1, 0]))),
        ("m.csv", lambda p: p.write_text("1,0,1\n0,1,1\n")),
    ]:
        paths[name] = root / name
        write(paths[name])
    return paths


def _text_may_load(name: str) -> bool:
    # A text file cut short can be a valid smaller file (a JSONL cut at a line
    # break, a CSV cut after a row); binary formats cut short never are.
    return name.endswith((".jsonl", ".csv"))


def truncations(root: Path, seeds: dict[str, Path], every: bool) -> Iterator[Entry]:
    """Every seed cut at chosen offsets (``every``: at every offset)."""
    for name, path in seeds.items():
        data = path.read_bytes()
        n = len(data)
        offsets = range(n) if every else sorted({0, 1, 5, 9, 12, n // 3, n // 2, n - 22, n - 1})
        stem, suffix = name.split(".", 1)
        for off in offsets:
            if 0 <= off < n:
                p = root / f"trunc_{stem}_{off}.{suffix}"
                p.write_bytes(data[:off])
                yield Entry(p, may_load=_text_may_load(name))


def mutations(
    root: Path, seeds: dict[str, Path], count: int, rng: random.Random
) -> Iterator[Entry]:
    """Seeded random byte edits of the seeds (fuzzing the formats)."""
    for name, path in seeds.items():
        base = path.read_bytes()
        stem, suffix = name.split(".", 1)
        for i in range(count):
            data = bytearray(base)
            op = rng.randrange(4)
            if op == 0:  # overwrite bytes
                for _ in range(rng.randint(1, 8)):
                    data[rng.randrange(len(data))] = rng.randrange(256)
            elif op == 1:  # flip bits
                for _ in range(rng.randint(1, 4)):
                    data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
            elif op == 2:  # insert junk
                at = rng.randrange(len(data))
                data[at:at] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 16)))
            else:  # plant a boundary integer
                at = rng.randrange(max(len(data) - 4, 1))
                data[at : at + 4] = rng.choice(
                    [
                        b"\xff\xff\xff\xff",
                        b"\x00\x00\x00\x80",
                        b"\xff\xff\xff\x7f",
                        b"\x00\x00\x00\x00",
                    ]
                )
            p = root / f"mut_{stem}_{i}.{suffix}"
            p.write_bytes(bytes(data))
            # a text edit may leave a valid file; binary edits are mostly refused,
            # but a flipped bit in a 0/1 payload can stay valid too
            yield Entry(p, may_load=True)


def crafted(root: Path, marker: Path) -> Iterator[Entry]:
    """Hand-made hostile files: bombs, pickles, lying headers, deep JSON, special files."""

    def put(name: str, data, **kw) -> Entry:
        p = root / name
        p.write_bytes(data if isinstance(data, bytes) else data.encode())
        return Entry(p, **kw)

    good_npy = npy_bytes(MATRIX)
    ids = npy_bytes(np.array(["p0"]))

    # --- npy: headers that declare too much or lie, pickles, wrong values ---
    u1 = "{'descr': '|u1', 'fortran_order': False, 'shape': %s, }"
    yield put("tb_shape.npy", npy_with_header(u1 % "(100000000, 1000000)"), match="cells")
    yield put("huge_shape.npy", npy_with_header(u1 % f"({2**62}, {2**62})"), match="cells")
    yield put(
        "lying_shape.npy", npy_with_header(u1 % "(10000, 10000)", bytes(100)), match="truncated"
    )
    yield put("negative_dim.npy", npy_with_header(u1 % "(-1, 3)", bytes(6)), match="negative")
    yield put(
        "long_header.npy",
        npy_with_header(u1 % "(2, 3)" + " " * 20000, bytes(6), version=(2, 0)),
        match="header",
    )
    yield put("version3.npy", npy_with_header(u1 % "(2, 3)", bytes(6), version=(3, 0)))
    yield put("version9.npy", npy_with_header(u1 % "(2, 3)", bytes(6), version=(9, 9)))
    yield put(
        "bogus_descr.npy",
        npy_with_header("{'descr': 'bogus', 'fortran_order': False, 'shape': (2, 3), }", bytes(6)),
    )
    yield put("not_a_dict.npy", npy_with_header("[1, 2, 3]", bytes(6)))
    yield put(
        "deep_header.npy",
        npy_with_header(
            "{'descr': '|u1', 'fortran_order': False, 'shape': " + "(" * 3000 + ")" * 3000 + "}"
        ),
    )
    yield put("header_trunc.npy", good_npy[:30])
    yield put(
        "huge_itemsize.npy",
        npy_with_header("{'descr': '<U1000000000000', 'fortran_order': False, 'shape': (2, 3), }"),
    )
    yield put("python2_header.npy", npy_with_header(u1 % "(2L, 3L)", bytes(MATRIX)), may_load=True)
    yield put("fortran.npy", npy_bytes(np.asfortranarray(MATRIX)), may_load=True)
    yield put("big_endian.npy", npy_bytes(MATRIX.astype(">i4")), may_load=True)
    obj = np.empty((2, 2), dtype=object)
    obj[:] = [[Marker(marker), 1], [0, 1]]
    buf = io.BytesIO()
    np.save(buf, obj, allow_pickle=True)
    pickled_npy = buf.getvalue()
    yield put("pickle.npy", pickled_npy, match="pickle")
    yield put("raw_pickle.npy", pickle.dumps(obj), match="pickle")
    yield put("nan.npy", npy_bytes(np.array([[1.0, np.nan], [0.0, 1.0]])), match="0 and 1")
    yield put("two.npy", npy_bytes(np.array([[1, 2], [0, 1]])), match="0 and 1")
    yield put("complex.npy", npy_bytes(MATRIX.astype(complex)), match="dtype")
    yield put("strings.npy", npy_bytes(np.array([["1", "0"]])), match="dtype")
    yield put("structured.npy", npy_bytes(np.zeros(3, dtype=[("a", "<i4"), ("b", "<f8")])))
    yield put("one_d.npy", npy_bytes(np.array([1, 0, 1])), match="2-D")
    yield put("no_rows.npy", npy_bytes(np.zeros((0, 5), np.uint8)), match="no candidates")
    yield put("scalar.npy", npy_bytes(np.array(1)))
    yield put("zip_as.npy", (root / "ds.npz").read_bytes())

    # --- npz: corrupt members, bombs, pickles, lying zip directories ---
    yield put(
        "corrupt_member.npz",
        raw_zip(
            [dict(name="task_ids.npy", data=b"garbage"), dict(name="B_0000.npy", data=good_npy)]
        ),
        match="not a .npy",
    )
    yield put(
        "bad_crc.npz",
        raw_zip(
            [dict(name="task_ids.npy", data=ids), dict(name="B_0000.npy", data=good_npy, crc=12345)]
        ),
        match="CRC",
    )
    co = zlib.compressobj(9, zlib.DEFLATED, -15)
    deflated = bytearray(co.compress(good_npy) + co.flush())
    deflated[len(deflated) // 2] ^= 0xFF
    yield put(
        "bad_deflate.npz",
        raw_zip(
            [
                dict(name="task_ids.npy", data=ids),
                dict(
                    name="B_0000.npy",
                    data=bytes(deflated),
                    method=8,
                    size=len(good_npy),
                    crc=zlib.crc32(good_npy),
                ),
            ]
        ),
    )
    yield put(
        "encrypted.npz", raw_zip([dict(name="B.npy", data=good_npy, flags=1)]), match="encrypted"
    )
    yield put(
        "method99.npz",
        raw_zip([dict(name="B.npy", data=good_npy, method=99)]),
        match="compression method",
    )
    for method, label in ((zipfile.ZIP_BZIP2, "bzip2"), (zipfile.ZIP_LZMA, "lzma")):
        p = root / f"{label}.npz"
        with zipfile.ZipFile(p, "w", compression=method) as zf:
            zf.writestr("B.npy", good_npy)
        yield Entry(p, match="compression method")
    yield put(
        "duplicate.npz",
        raw_zip([dict(name="B.npy", data=good_npy), dict(name="B.npy", data=good_npy)]),
        match="twice",
    )
    yield put(
        "member_pickle.npz",
        raw_zip([dict(name="task_ids.npy", data=ids), dict(name="B_0000.npy", data=pickled_npy)]),
        match="pickle",
    )
    obj_ids = np.array(["p0", Marker(marker)], dtype=object)
    buf = io.BytesIO()
    np.save(buf, obj_ids, allow_pickle=True)
    yield put(
        "ids_pickle.npz",
        raw_zip(
            [dict(name="task_ids.npy", data=buf.getvalue()), dict(name="B_0000.npy", data=good_npy)]
        ),
        match="pickle",
    )
    yield put(
        "raw_pickle_member.npz",
        raw_zip([dict(name="B.npy", data=pickle.dumps(obj))]),
        match="pickle",
    )
    # A real bomb: 1.2 GB of zeros in a 1.2 MB file (the size np.load would allocate).
    bomb_header = npy_bytes(np.zeros((0,), np.uint8)).replace(b"(0,)", b"(1200, 1048576)")
    bomb = deflate_zeros_member("B_0000.npy", bomb_header, 1200)
    yield put("bomb.npz", raw_zip([dict(name="task_ids.npy", data=ids), bomb]), match="limit")
    # ... with the byte limit raised, the pass-matrix cell limit still refuses it
    yield put(
        "bomb_raised.npz",
        raw_zip([dict(name="task_ids.npy", data=ids), bomb]),
        match="cells",
        kwargs=dict(max_bytes=4 << 30),
        env=dict(ACES_FAST_MAX_BYTES=str(4 << 30)),
    )
    # ... and one (200 MiB, within the cell limit) whose directory understates its
    # size: zipfile stops at the declared size, short of what the header declares
    lying_header = bomb_header.replace(b"(1200, ", b"(200, ")
    lying = dict(deflate_zeros_member("B_0000.npy", lying_header, 200), size=4096)
    yield put(
        "bomb_lying.npz", raw_zip([dict(name="task_ids.npy", data=ids), lying]), match="truncated"
    )
    yield put(
        "declared_4gb.npz",
        raw_zip(
            [
                dict(name="task_ids.npy", data=ids),
                dict(name="B_0000.npy", data=good_npy, size=0xFFFFFFFE),
            ]
        ),
        match="limit",
    )
    yield put(
        "tb_member.npz",
        raw_zip([dict(name="B.npy", data=npy_with_header(u1 % "(100000000, 1000000)"))]),
        match="cells",
    )
    many_ids = npy_bytes(np.zeros((0,), "<U1")).replace(b"(0,)", b"(100000000,)")
    yield put(
        "ids_declared_huge.npz",
        raw_zip([dict(name="task_ids.npy", data=many_ids), dict(name="B_0000.npy", data=good_npy)]),
        match="truncated",
    )
    yield put(
        "ids_2d.npz",
        raw_zip(
            [
                dict(name="task_ids.npy", data=npy_bytes(np.array([["a"]]))),
                dict(name="B_0000.npy", data=good_npy),
            ]
        ),
        match="task_ids",
    )
    yield put(
        "long_index.npz",
        raw_zip(
            [
                dict(name="task_ids.npy", data=ids),
                dict(name="B_0000.npy", data=good_npy),
                dict(name="y_" + "9" * 5000 + ".npy", data=good_npy),
            ]
        ),
        match="refers to problem",
    )
    yield put(
        "index_clash.npz",
        raw_zip(
            [
                dict(name="task_ids.npy", data=ids),
                dict(name="B_0000.npy", data=good_npy),
                dict(name="B_00000.npy", data=good_npy),
            ]
        ),
        match="both give",
    )
    yield put("empty_zip.npz", raw_zip([]), match="task_ids")
    yield put("garbage.npz", b"PK\x03\x04" + bytes(200))
    yield put("npy_as.npz", good_npy, may_load=True)  # load_pass_matrix accepts it
    yield put(
        "nan_member.npz",
        raw_zip(
            [
                dict(name="task_ids.npy", data=ids),
                dict(name="B_0000.npy", data=npy_bytes(np.array([[np.nan, 1.0]]))),
            ]
        ),
        match="0 and 1",
    )
    yield put(
        "float_extra.npz",
        raw_zip(
            [
                dict(name="task_ids.npy", data=ids),
                dict(name="B_0000.npy", data=good_npy),
                dict(name="cand_uid_0000.npy", data=npy_bytes(np.array([1e300, 2.0]))),
            ]
        ),
        match="integers",
    )

    # --- JSONL: declared sizes, deep nesting, wrong types, broken text ---
    def line(**obj) -> str:
        return json.dumps({"task_id": "a", **obj}) + "\n"

    yield put(
        "big_m.jsonl",
        '{"task_id":"a","passed":[[0],[1]],"m":200000000,"labels":[1,0]}\n',
        match="ACES_FAST_MAX_CELLS",
    )
    yield put("huge_m.jsonl", line(passed=[[0]], m=10**30), match="cells")
    yield put(
        "deep_B.jsonl",
        '{"task_id":"a","B":' + "[" * 100000 + "]" * 100000 + "}\n",
        match="nested too deeply",
    )
    yield put(
        "deep_extra.jsonl",
        '{"task_id":"a","B":[[1]],"zz":' + "[" * 50000 + "]" * 50000 + "}\n",
        match="nested too deeply",
    )
    yield put("deep_t_ok.jsonl", line(B=[[1]], t_ok=json.loads("[" * 500 + "1" + "]" * 500)))
    yield put(
        "deep_obj.jsonl",
        '{"task_id":"a","B":[[1]],"zz":' + '{"a":' * 50000 + "1" + "}" * 50000 + "}\n",
        match="nested too deeply",
    )
    yield put("big_int.jsonl", '{"task_id":"a","B":[[' + "1" * 5000 + "]]}\n")
    yield put("nan.jsonl", '{"task_id":"a","B":[[NaN, 1]]}\n', match="row 0 entry 0 is nan")
    yield put("two.jsonl", line(B=[[2, 1]]), match="only 0 and 1")
    yield put("string.jsonl", line(B=[["1", 0]]), match="only 0 and 1")
    yield put("ragged.jsonl", line(B=[[1, 0], [1]]), match="ragged")
    yield put("index_range.jsonl", line(passed=[[5]], m=2), match="test index")
    yield put("labels_len.jsonl", line(B=[[1, 0]], labels=[1, 0, 1]), match="length")
    yield put("ragged_t_ok.jsonl", line(B=[[1, 0]], t_ok=[[1], [1, 0]]), match="t_ok")
    yield put("huge_uid.jsonl", line(B=[[1], [0]], cand_uid=[1e300, 2]), match="integers")
    yield put("huge_count.jsonl", line(B=[[1, 0]], test_count=[1e19, 2]), match="integers")
    yield put("no_task.jsonl", '{"B": [[1]]}\n', match="task_id")
    yield put("not_object.jsonl", "[1, 2]\n", match="JSON object")
    yield put("bad_utf8.jsonl", b'{"task_id": "\xff\xfe", "B": [[1]]}\n', match="UTF-8")
    yield put("nul.jsonl", b"\x00" * 100, match="JSON")
    yield put(
        "crlf.jsonl",
        line(B=[[1, 0]]).replace("\n", "\r\n")
        + line(B=[[1]]).replace('"a"', '"b"').replace("\n", "\r\n"),
        may_load=True,
    )
    yield put("binary.jsonl", bytes(range(256)) * 4)
    gz = gzip.compress(
        b"".join(line(B=[[1, 0], [0, 1]]).replace('"a"', f'"t{i}"').encode() for i in range(50))
    )
    bad = bytearray(gz)
    bad[len(bad) // 2] ^= 0xFF
    yield put("flipped.jsonl.gz", bytes(bad))
    yield put("bad_magic.jsonl.gz", b"\x1f\x8b\x08\x00" + bytes(50))
    yield put("trailing_garbage.jsonl.gz", gz + b"\x1f\x8bgarbage")
    yield put("gz_binary.jsonl.gz", gzip.compress(bytes(range(256)) * 8))
    # gzip bombs refused under a lowered byte limit (keyword / environment variable):
    # blank lines (skipped one by one) and one endless line
    yield put(
        "blank_bomb.jsonl.gz",
        gzip.compress(b"\n" * (8 << 20), 9),
        match="ACES_FAST_MAX_BYTES",
        kwargs=dict(max_bytes=1 << 20),
        env=dict(ACES_FAST_MAX_BYTES=str(1 << 20)),
    )
    yield put(
        "line_bomb.jsonl.gz",
        gzip.compress(b"[" * (64 << 20), 9),
        match="ACES_FAST_MAX_BYTES",
        kwargs=dict(max_bytes=16 << 20),
        env=dict(ACES_FAST_MAX_BYTES=str(16 << 20)),
    )

    # --- CSV ---
    yield put("header.csv", "a,b\n1,0\n", match="header")
    yield put("nan.csv", "1,nan\n0,1\n", match="only 0 and 1")
    yield put("two.csv", "1,2\n", match="only 0 and 1")
    yield put("ragged.csv", "1,0,1\n0,1\n", match="ragged")
    yield put("empty.csv", "\n\n", match="no rows")
    yield put("bad_utf8.csv", b"1,\xff\n", match="UTF-8")
    yield put("nul.csv", b"1,0\x00\n")
    yield put("huge_field.csv", "1" * 200000 + "\n", match="CSV")
    yield put(
        "cells_limit.csv",
        ("0," * 999 + "0\n") * 3,
        match="ACES_FAST_MAX_CELLS",
        kwargs=dict(max_cells=2000),
        env=dict(ACES_FAST_MAX_CELLS="2000"),
    )
    yield put("quote.csv", '"1,0\n0,1\n')

    # --- not regular files: would block (FIFO), never end (device), or be a folder ---
    for name in ("fifo.npy", "fifo.npz", "fifo.jsonl", "fifo.jsonl.gz", "fifo.csv"):
        os.mkfifo(root / name)
        yield Entry(root / name, match="FIFO")
    (root / "folder.npz").mkdir()
    yield Entry(root / "folder.npz", match="directory")
    (root / "null.jsonl").symlink_to(os.devnull)
    yield Entry(root / "null.jsonl", match="character device")
    (root / "missing.npy").symlink_to(root / "nowhere.npy")
    yield Entry(root / "missing.npy", match="no such file")


@dataclass
class Corpus:
    root: Path
    marker: Path
    entries: dict[str, Entry]
    sock_dir: Path


def build_corpus(root: Path) -> Corpus:
    marker = root / "PICKLE_WAS_RUN"
    seeds = seed_files(root)
    entries = {name: Entry(path, may_load=True) for name, path in seeds.items()}
    for e in list(crafted(root, marker)) + list(truncations(root, seeds, False)):
        assert e.name not in entries, e.name
        entries[e.name] = e
    # a socket needs a short path (108 bytes on Linux)
    sock_dir = Path(tempfile.mkdtemp(prefix="af"))
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(sock_dir / "s.csv"))
    sock.close()
    entries["socket.csv"] = Entry(sock_dir / "s.csv", match="socket")
    return Corpus(root, marker, entries, sock_dir)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Iterator[Corpus]:
    c = build_corpus(tmp_path_factory.mktemp("corpus"))
    yield c
    assert not c.marker.exists(), "a pickle from the corpus was unpickled"
    (c.sock_dir / "s.csv").unlink()
    c.sock_dir.rmdir()


# ---------------------------------------------------------------------------
# running the loaders


def loaders_for(entry: Entry) -> list[Callable[[], object]]:
    p, kw = entry.path, entry.kwargs
    out = [lambda: load_pass_matrix(p, **kw), lambda: load_dataset(p, **kw)]
    if entry.name.endswith(".npz"):
        out.append(lambda: load_npz(p, **kw))
    if entry.name.endswith((".jsonl", ".jsonl.gz")):
        out.append(lambda: load_jsonl(p, **kw))
    return out


class _AddressSpaceCap:
    """Cap this process's address space at its current size + ``extra`` (Linux), so
    a loader that allocates what a file declares fails here instead of swapping."""

    def __init__(self, extra: int):
        self.extra = extra
        self.saved = None

    def __enter__(self):
        try:
            with open("/proc/self/statm") as fh:
                vm = int(fh.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
        except OSError:
            return self
        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        cap = vm + self.extra
        if hard == resource.RLIM_INFINITY or cap <= hard:
            self.saved = (soft, hard)
            resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
        return self

    def __exit__(self, *exc):
        if self.saved is not None:
            resource.setrlimit(resource.RLIMIT_AS, self.saved)


class Hang(Exception):
    """A loader did not return within the alarm (e.g. blocked opening a FIFO)."""


@contextlib.contextmanager
def _alarm(seconds: int) -> Iterator[None]:
    """Raise Hang in this (main) thread after ``seconds``: a blocking open() or
    read() is interrupted by the signal, so a hang fails the test instead."""

    def on_alarm(signum, frame):
        raise Hang(f"no answer within {seconds} s")

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def check_loaders(entry: Entry) -> list[str]:
    """Problems found running every applicable loader on ``entry`` (empty: fine).

    Each loader must raise ValueError/TypeError naming the file in one line, or
    succeed if ``entry.may_load``. ``entry.match`` must appear in at least one
    message (a dataset loader given a single-matrix file rightly complains
    about the layout instead).
    """
    problems, messages = [], []
    for load in loaders_for(entry):
        with _AddressSpaceCap(2 << 30):
            try:
                with _alarm(60):
                    load()
            except (ValueError, TypeError) as exc:
                msg = str(exc)
                messages.append(msg)
                if str(entry.path) not in msg:
                    problems.append(f"{entry.name}: message does not name the file: {msg}")
                if "\n" in msg:
                    problems.append(f"{entry.name}: multi-line message: {msg!r}")
                continue
            except BaseException as exc:  # that is what is tested
                problems.append(f"{entry.name}: {type(exc).__name__}: {exc}"[:500])
                continue
        if not entry.may_load:
            problems.append(f"{entry.name}: loaded without an error")
    if entry.match and messages and not any(entry.match in m for m in messages):
        problems.append(f"{entry.name}: no message contains {entry.match!r}: {messages}")
    return problems


QUICK_LOADER_CASES = [
    "ds.npz",
    "m.csv",
    "tb_shape.npy",
    "huge_shape.npy",
    "lying_shape.npy",
    "negative_dim.npy",
    "long_header.npy",
    "version3.npy",
    "bogus_descr.npy",
    "deep_header.npy",
    "pickle.npy",
    "raw_pickle.npy",
    "nan.npy",
    "structured.npy",
    "huge_itemsize.npy",
    "python2_header.npy",
    "corrupt_member.npz",
    "bad_crc.npz",
    "bad_deflate.npz",
    "encrypted.npz",
    "bzip2.npz",
    "duplicate.npz",
    "member_pickle.npz",
    "ids_pickle.npz",
    "bomb.npz",
    "bomb_raised.npz",
    "bomb_lying.npz",
    "declared_4gb.npz",
    "tb_member.npz",
    "ids_declared_huge.npz",
    "long_index.npz",
    "index_clash.npz",
    "garbage.npz",
    "float_extra.npz",
    "big_m.jsonl",
    "huge_m.jsonl",
    "deep_B.jsonl",
    "deep_extra.jsonl",
    "deep_t_ok.jsonl",
    "deep_obj.jsonl",
    "big_int.jsonl",
    "nan.jsonl",
    "ragged_t_ok.jsonl",
    "huge_uid.jsonl",
    "huge_count.jsonl",
    "bad_utf8.jsonl",
    "crlf.jsonl",
    "flipped.jsonl.gz",
    "bad_magic.jsonl.gz",
    "trailing_garbage.jsonl.gz",
    "gz_binary.jsonl.gz",
    "blank_bomb.jsonl.gz",
    "line_bomb.jsonl.gz",
    "header.csv",
    "nul.csv",
    "huge_field.csv",
    "cells_limit.csv",
    "fifo.npy",
    "fifo.jsonl.gz",
    "folder.npz",
    "null.jsonl",
    "socket.csv",
    "trunc_ds_9.npz",
    "trunc_ds_1.jsonl.gz",
    "trunc_m_12.npy",
]


def test_corpus_names_are_current(corpus):
    missing = [n for n in QUICK_LOADER_CASES + QUICK_CLI_CASES if n not in corpus.entries]
    assert not missing


@pytest.mark.parametrize("name", QUICK_LOADER_CASES)
def test_loaders_refuse_cleanly(corpus, name):
    assert check_loaders(corpus.entries[name]) == []


def test_rest_of_the_corpus_through_the_loaders(corpus):
    problems = [
        p
        for name, e in corpus.entries.items()
        if name not in QUICK_LOADER_CASES
        for p in check_loaders(e)
    ]
    assert problems == []
    assert not corpus.marker.exists()


def test_valid_seeds_load_as_written(corpus):
    ds = toy_dataset()
    for name in ("ds.npz", "ds_stored.npz", "ds.jsonl", "ds_passed.jsonl", "ds.jsonl.gz"):
        back = load_dataset(corpus.entries[name].path)
        assert back.task_ids == ds.task_ids
        for p, q in zip(ds, back):
            np.testing.assert_array_equal(p.B, q.B)
            np.testing.assert_array_equal(p.labels, q.labels)
    for name in (
        "m.npy",
        "m_keyed.npz",
        "m.csv",
        "npy_as.npz",
        "fortran.npy",
        "big_endian.npy",
        "python2_header.npy",
    ):
        np.testing.assert_array_equal(
            load_pass_matrix(corpus.entries[name].path).B, MATRIX, err_msg=name
        )


# ---------------------------------------------------------------------------
# the command line, in a child process with a capped address space

# setrlimit runs inside the child before aces_fast is imported (a preexec_fn
# would run between fork and exec, which is unsafe while this process has threads).
# The cap is on top of the address space the interpreter already holds: under
# AddressSanitizer (tools/sanitize.sh) that includes terabytes of reserved shadow.
_CHILD = (
    "import os, resource, runpy, sys; "
    "vm = int(open('/proc/self/statm').read().split()[0]) * os.sysconf('SC_PAGE_SIZE'); "
    "resource.setrlimit(resource.RLIMIT_AS, (vm + {cap}, vm + {cap})); "
    "sys.argv = ['aces-fast'] + sys.argv[1:]; "
    "runpy.run_module('aces_fast', run_name='__main__', alter_sys=True)"
)


def run_cli(
    args: list[str], env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess:
    full = dict(os.environ)
    for key in ("ACES_FAST_MAX_CELLS", "ACES_FAST_MAX_BYTES", "ACES_FAST_TRACEBACK"):
        full.pop(key, None)
    full.update(env or {})
    full["OMP_NUM_THREADS"] = "1"
    code = _CHILD.format(cap=CHILD_ADDRESS_SPACE)
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        cwd=ROOT,
        env=full,
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


def check_cli(entry: Entry, command: str) -> list[str]:
    try:
        proc = run_cli([command, str(entry.path)], entry.env)
    except subprocess.TimeoutExpired:
        return [f"{command} {entry.name}: no answer within the timeout (a hang?)"]
    tag = f"{command} {entry.name}"
    lines = proc.stderr.splitlines()
    if entry.may_load and proc.returncode == 0:
        return []
    problems = []
    if proc.returncode != 1:
        problems.append(f"{tag}: exit status {proc.returncode}")
    if "Traceback" in proc.stderr:
        problems.append(f"{tag}: traceback: {proc.stderr[-1500:]}")
    if len(lines) != 1 or not lines[0].startswith("aces-fast: error: "):
        problems.append(f"{tag}: stderr is not one error line: {proc.stderr[-1500:]!r}")
    elif str(entry.path) not in lines[0]:
        problems.append(f"{tag}: the error does not name the file: {lines[0]}")
    if "out of memory" in proc.stderr:
        problems.append(f"{tag}: refused by the allocator, not by a check: {lines[0]}")
    if proc.stdout:
        problems.append(f"{tag}: printed to stdout: {proc.stdout[:300]!r}")
    return problems


QUICK_CLI_RUNS = [
    "rerank tb_shape.npy",
    "rerank lying_shape.npy",
    "rerank pickle.npy",
    "rerank raw_pickle.npy",
    "rerank deep_header.npy",
    "evaluate corrupt_member.npz",
    "evaluate bad_deflate.npz",
    "evaluate ids_pickle.npz",
    "evaluate bomb.npz",
    "rerank bomb_raised.npz",
    "rerank bomb_lying.npz",
    "rerank tb_member.npz",
    "evaluate big_m.jsonl",
    "rerank big_m.jsonl",
    "evaluate deep_B.jsonl",
    "rerank flipped.jsonl.gz",
    "evaluate trunc_ds_1.jsonl.gz",
    "evaluate line_bomb.jsonl.gz",
    "rerank trunc_ds_9.npz",
    "rerank huge_field.csv",
    "rerank fifo.npy",
    "evaluate fifo.jsonl",
]
QUICK_CLI_CASES = [run.split()[1] for run in QUICK_CLI_RUNS]


@pytest.mark.parametrize("run", QUICK_CLI_RUNS)
def test_cli_refuses_cleanly(corpus, run):
    command, name = run.split()
    assert check_cli(corpus.entries[name], command) == []
    assert not corpus.marker.exists()


def test_cli_valid_file_under_the_address_space_cap(corpus):
    """The cap leaves room for real work: a valid file still ranks in the child."""
    proc = run_cli(["rerank", str(corpus.entries["m.npy"].path), "--json"])
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["n"] == 2
    proc = run_cli(["evaluate", str(corpus.entries["ds.jsonl.gz"].path)])
    assert proc.returncode == 0, proc.stderr


# ---------------------------------------------------------------------------
# the exhaustive sweep


@pytest.mark.slow
def test_every_truncation_and_mutation_through_the_loaders(tmp_path):
    seeds = seed_files(tmp_path)
    rng = random.Random(12)
    problems = []
    for entry in list(truncations(tmp_path, seeds, every=True)) + list(
        mutations(tmp_path, seeds, 400, rng)
    ):
        problems += check_loaders(entry)
        entry.path.unlink()
    assert problems == []


@pytest.mark.slow
def test_whole_corpus_through_the_cli(corpus, tmp_path):
    """Every crafted file through both commands, and truncations at a stride."""
    entries = [e for n, e in corpus.entries.items() if not n.startswith("trunc_")]
    seeds = seed_files(tmp_path)
    for entry in truncations(tmp_path, seeds, every=True):
        off = int(entry.name.split("_")[-1].split(".")[0])
        if off % 7 == 0:
            entries.append(entry)
    problems = []
    for entry in entries:
        for command in ("rerank", "evaluate"):
            problems += check_cli(entry, command)
    assert problems == []
    assert not corpus.marker.exists()
