"""The compiled part writer's pieces (csrc/io/): its codecs against zlib and
pyarrow's Snappy, and the binding's argument checks."""

from __future__ import annotations

import os
import subprocess
import sys
import zlib

import numpy as np
import pytest

pa = pytest.importorskip("pyarrow")

from hypothesis import given, settings
from hypothesis import strategies as st

from aces_fast import _core

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


def test_binding_checks_its_arguments():
    ok = ("a", "float64", None, None, np.zeros(2))
    enc = _core.encode_part
    with pytest.raises(ValueError, match="rows must be >= 1"):
        enc(rows=0, columns=[ok], metadata=[], created_by="x")
    with pytest.raises(ValueError, match="unknown kind 'int8'"):
        enc(rows=2, columns=[("a", "int8", None, None, np.zeros(2))], metadata=[], created_by="x")
    with pytest.raises(TypeError, match="values must be a float64 array"):
        enc(rows=2, columns=[("a", "float64", None, None, [1.0, 2.0])], metadata=[], created_by="x")
    with pytest.raises(ValueError, match="values must have at least 3"):
        enc(rows=3, columns=[ok], metadata=[], created_by="x")
    bad = ("a", "float64", np.ones(3, np.uint8), None, np.zeros(2))
    with pytest.raises(ValueError, match="valid must have 2"):
        enc(rows=2, columns=[bad], metadata=[], created_by="x")
    off = np.array([0, 2, 1], np.int32)
    with pytest.raises(ValueError, match="offsets must not decrease"):
        enc(
            rows=2,
            columns=[("a", "string", None, off, np.zeros(5, np.uint8))],
            metadata=[],
            created_by="x",
        )
    with pytest.raises(ValueError, match="offsets must have 3"):
        enc(
            rows=2,
            columns=[("a", "string", None, off[:2], np.zeros(5, np.uint8))],
            metadata=[],
            created_by="x",
        )
    off = np.array([0, 2, 9], np.int32)
    with pytest.raises(ValueError, match="values must have at least 9"):
        enc(
            rows=2,
            columns=[("a", "list<int32>", None, off, np.zeros(5, np.int32))],
            metadata=[],
            created_by="x",
        )
    with pytest.raises(TypeError, match="each column is"):
        enc(rows=2, columns=[("a", "float64")], metadata=[], created_by="x")
