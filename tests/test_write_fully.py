"""``_commit.write_fully``: large page-aligned buffers (the compiled part
writer's) go to the disk with O_DIRECT where the file system takes it, and the
file's bytes are the same whichever way they went."""

from __future__ import annotations

import errno
import mmap
import os

import numpy as np
import pyarrow as pa
import pytest

from aces_fast import _commit, _parts

pytestmark = pytest.mark.skipif(not hasattr(os, "O_DIRECT"), reason="no O_DIRECT here")

ALIGN = 4096


def _aligned(nbytes, seed=0):
    """A page-aligned buffer (an anonymous mapping) of random bytes."""
    buf = mmap.mmap(-1, max(nbytes, 1))
    buf.write(np.random.default_rng(seed).integers(0, 256, nbytes, dtype=np.uint8).tobytes())
    return memoryview(buf)[:nbytes]


class _Calls:
    """Records os.open's O_DIRECT flag and os.write's lengths, and can make
    them fail the way a file system without O_DIRECT does."""

    def __init__(self, monkeypatch, *, refuse_open=False, short=None):
        self.direct_opens, self.writes = [], []
        real_open, real_write = os.open, os.write

        def fake_open(path, flags, mode=0o777):
            if flags & os.O_DIRECT:
                self.direct_opens.append(path)
                if refuse_open:
                    raise OSError(errno.EINVAL, "Invalid argument")
            return real_open(path, flags, mode)

        def fake_write(fd, data):
            import fcntl

            direct = bool(fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_DIRECT)
            self.writes.append((direct, len(data)))
            if direct and short is not None and len(self.writes) == 1:
                return real_write(fd, memoryview(data)[:short])
            return real_write(fd, data)

        monkeypatch.setattr(os, "open", fake_open)
        monkeypatch.setattr(os, "write", fake_write)


@pytest.mark.parametrize("extra", [0, 1, ALIGN - 1])
def test_a_large_aligned_buffer_goes_direct_then_its_tail_buffered(tmp_path, monkeypatch, extra):
    data = _aligned(_commit.DIRECT_MIN_BYTES + 3 * ALIGN + extra)
    calls = _Calls(monkeypatch)
    _commit.write_fully(tmp_path / "f", data)
    assert (tmp_path / "f").read_bytes() == bytes(data)
    assert calls.direct_opens == [str(tmp_path / "f")]
    direct = sum(n for d, n in calls.writes if d)
    assert direct == len(data) // ALIGN * ALIGN
    assert [d for d, _ in calls.writes] == [True] + [False] * (len(calls.writes) - 1)


@pytest.mark.parametrize(
    "data",
    [
        b"x" * (_commit.DIRECT_MIN_BYTES + ALIGN),  # not page-aligned
        "small",  # below the size
        "unaligned",  # a large buffer one byte off a page
    ],
)
def test_other_buffers_are_written_through_the_cache(tmp_path, monkeypatch, data):
    if data == "small":
        data = _aligned(_commit.DIRECT_MIN_BYTES - 1)
    elif data == "unaligned":
        data = _aligned(_commit.DIRECT_MIN_BYTES + 2 * ALIGN)[1:]
    elif np.frombuffer(data, np.uint8).ctypes.data % ALIGN == 0:
        pytest.skip("this bytes object happens to start on a page")
    calls = _Calls(monkeypatch)
    _commit.write_fully(tmp_path / "f", data)
    assert (tmp_path / "f").read_bytes() == bytes(data)
    assert calls.direct_opens == [] and not any(d for d, _ in calls.writes)


def test_a_file_system_refusing_o_direct_at_the_open_gets_it_buffered(tmp_path, monkeypatch):
    data = _aligned(_commit.DIRECT_MIN_BYTES + 5 * ALIGN + 7)
    calls = _Calls(monkeypatch, refuse_open=True)
    _commit.write_fully(tmp_path / "f", data)
    assert (tmp_path / "f").read_bytes() == bytes(data)
    assert len(calls.direct_opens) == 1 and not any(d for d, _ in calls.writes)


def test_a_refused_direct_write_goes_on_buffered_from_where_it_stopped(tmp_path, monkeypatch):
    data = _aligned(_commit.DIRECT_MIN_BYTES + 5 * ALIGN + 7, seed=1)
    real_write = os.write
    state = {"n": 0}

    def stepwise(fd, chunk):  # one page per direct write, so that a later one can fail
        import fcntl

        if fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_DIRECT:
            state["n"] += 1
            if state["n"] == 3:
                raise OSError(errno.EINVAL, "Invalid argument")
            return real_write(fd, memoryview(chunk)[:ALIGN])
        return real_write(fd, chunk)

    monkeypatch.setattr(os, "write", stepwise)
    _commit.write_fully(tmp_path / "f", data)
    assert state["n"] == 3
    assert (tmp_path / "f").read_bytes() == bytes(data)


def test_a_short_direct_write_off_a_page_goes_on_buffered(tmp_path, monkeypatch):
    data = _aligned(_commit.DIRECT_MIN_BYTES + 2 * ALIGN, seed=2)
    calls = _Calls(monkeypatch, short=ALIGN + 100)
    _commit.write_fully(tmp_path / "f", data)
    assert (tmp_path / "f").read_bytes() == bytes(data)
    assert calls.writes[0] == (True, len(data))
    assert all(not d for d, _ in calls.writes[1:])


def test_a_full_disk_during_a_direct_write_is_raised(tmp_path, monkeypatch):
    data = _aligned(_commit.DIRECT_MIN_BYTES + ALIGN)

    def full(fd, chunk):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "write", full)
    with pytest.raises(OSError) as info:
        _commit.write_fully(tmp_path / "f", data)
    assert info.value.errno == errno.ENOSPC


def test_the_compiled_writers_parts_are_page_aligned_and_go_direct(tmp_path, monkeypatch):
    rows = _commit.DIRECT_MIN_BYTES // 600
    values = np.random.default_rng(3).random((rows, 100))  # distinct floats: little to compress
    table = pa.table({"scores": pa.array(list(values), pa.list_(pa.float64()))})
    data = _parts._encode_compiled(table)
    assert data is not None and data.nbytes >= _commit.DIRECT_MIN_BYTES
    assert data.ctypes.data % ALIGN == 0 and not data.flags.writeable
    calls = _Calls(monkeypatch)
    _commit.write_fully(tmp_path / "part.parquet", data)
    assert calls.direct_opens and calls.writes[0][0]
    import pyarrow.parquet as pq

    assert pq.read_table(tmp_path / "part.parquet").equals(table)


def test_a_freed_parts_buffer_serves_the_next_part_and_no_live_one(tmp_path):
    """The compiled writer's buffers are pooled: once a part's array (and every
    view of it) is freed, the next part may take its buffer; a part still alive
    keeps its own, whatever is encoded after it."""
    import gc

    import pyarrow.parquet as pq

    def table(seed, rows=3000):
        values = np.random.default_rng(seed).random((rows, 50))
        return pa.table({"scores": pa.array(list(values), pa.list_(pa.float64()))})

    a = _parts._encode_compiled(table(0))
    address = a.ctypes.data
    view = a[10:]  # a view keeps the buffer too
    del a
    gc.collect()
    b = _parts._encode_compiled(table(1))
    assert b.ctypes.data != address  # the view still holds it
    del view
    gc.collect()
    c = _parts._encode_compiled(table(2))
    assert c.ctypes.data == address and c.ctypes.data % ALIGN == 0  # taken again
    kept = bytes(b)
    for seed in range(3, 8):  # parts encoded while b and c live never share them
        d = _parts._encode_compiled(table(seed, rows=3000 + 500 * seed))
        assert d.ctypes.data not in (b.ctypes.data, c.ctypes.data)
        del d
    assert bytes(b) == kept
    for got, seed in ((b, 1), (c, 2)):
        (tmp_path / "p.parquet").write_bytes(bytes(got))
        assert pq.read_table(tmp_path / "p.parquet").equals(table(seed))
