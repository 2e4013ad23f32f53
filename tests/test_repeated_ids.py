"""Repeated task ids of a dataset run's input (aces_fast._input.duplicate_rows):
the compiled pass (_core.repeated_ids) against pyarrow's hash aggregation, with
collisions forced, nulls, empty and non-ASCII ids, across chunks and files."""

from __future__ import annotations

import numpy as np
import pytest

pa = pytest.importorskip("pyarrow")

from hypothesis import given, settings
from hypothesis import strategies as st

from aces_fast import _core
from aces_fast._input import _repeated_arrow, _repeated_compiled, duplicate_rows, open_inputs
from aces_fast.datasets import Problem
from aces_fast.parquet import save_parquet

IDS = st.one_of(st.none(), st.sampled_from(["", "a", "b", "task/1", "task/10", "é", "x" * 17]))


@settings(max_examples=150, deadline=None)
@given(st.lists(st.one_of(IDS, st.text(max_size=12)), max_size=60), st.integers(1, 64))
def test_the_compiled_pass_finds_what_pyarrow_finds(ids, hash_bits):
    """Any hash width, down to one bit (every id then collides with half the
    others): the byte comparison keeps the answer exact."""
    chunked = pa.chunked_array([pa.array(ids, pa.string())])
    got = _repeated_compiled(chunked, hash_bits=hash_bits)
    assert got == _repeated_arrow(chunked)
    dups, firsts = got
    for r, f in zip(dups, firsts):  # the first row of the id, before r
        assert f < r and ids[f] == ids[r] is not None
        assert ids.index(ids[r]) == f


def test_many_rows_and_chunks():
    rng = np.random.default_rng(0)
    ids = [f"task/{i}" for i in rng.integers(0, 40_000, 50_000)]
    ids[7] = None
    chunked = pa.chunked_array([pa.array(ids[:20_000]), pa.array(ids[20_000:])]).slice(3)
    assert _repeated_compiled(chunked) == _repeated_arrow(chunked)
    assert _repeated_compiled(chunked, hash_bits=12) == _repeated_arrow(chunked)
    assert len(_repeated_compiled(chunked)[0]) > 5_000


def test_duplicate_rows_across_files(tmp_path):
    B = np.ones((2, 3), np.uint8)
    root = tmp_path / "in"
    root.mkdir()
    save_parquet([Problem(f"t{i}", B) for i in range(5)], root / "a.parquet", row_group_size=2)
    save_parquet([Problem(t, B) for t in ("t9", "t3", "t9")], root / "b.parquet")
    files, _ = open_inputs(root)
    assert duplicate_rows(files) == {
        6: "duplicate task_id: it already names row 3",
        7: "duplicate task_id: it already names row 5",
    }


def test_the_binding_checks_its_arguments():
    off = np.array([0, 1, 2], np.int64)
    data = np.frombuffer(b"ab", np.uint8)
    run = _core.repeated_ids
    with pytest.raises(TypeError, match="offsets must be a int64 array"):
        run(offsets=off.astype(np.int32), data=data, valid=None, hash_bits=64)
    with pytest.raises(ValueError, match="offsets must lie within data"):
        run(offsets=np.array([0, 1, 3], np.int64), data=data, valid=None, hash_bits=64)
    with pytest.raises(ValueError, match="offsets must not decrease"):
        run(offsets=np.array([0, 2, 1], np.int64), data=data, valid=None, hash_bits=64)
    with pytest.raises(ValueError, match="valid must have one entry per row"):
        run(offsets=off, data=data, valid=np.ones(3, np.uint8), hash_bits=64)
    with pytest.raises(ValueError, match="hash_bits must be in"):
        run(offsets=off, data=data, valid=None, hash_bits=0)
    dup, first = run(offsets=off, data=np.frombuffer(b"aa", np.uint8), valid=None, hash_bits=64)
    assert dup.tolist() == [1] and first.tolist() == [0]
