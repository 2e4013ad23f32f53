"""``_commit.Intervals``: the row ranges a results directory's commits cover."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from aces_fast._commit import Intervals


def _ranges(rows):
    """The maximal runs of consecutive values of a set, by brute force."""
    out = []
    for r in sorted(set(rows)):
        if out and out[-1][1] == r:
            out[-1][1] = r + 1
        else:
            out.append([r, r + 1])
    return out


@given(st.lists(st.integers(0, 300), max_size=200))
def test_of_rows_gives_the_maximal_runs_of_any_rows(rows):
    got = Intervals.of_rows(np.array(rows, dtype=np.int64))
    assert got == _ranges(rows)
    assert all(type(v) is int for pair in got for v in pair)  # JSON-ready


def test_of_rows_of_a_batch_is_one_range():
    rows = np.arange(4096, 6144, dtype=np.int64)
    assert Intervals.of_rows(rows) == [[4096, 6144]]
    assert Intervals.of_rows(rows[::-1]) == [[4096, 6144]]
    assert Intervals.of_rows(np.zeros(0, np.int64)) == []


@given(st.lists(st.integers(0, 300), max_size=100), st.lists(st.integers(-5, 320), max_size=50))
def test_contains_agrees_with_the_set(rows, probe):
    iv = Intervals(Intervals.of_rows(np.array(rows, dtype=np.int64)))
    got = iv.contains(np.array(probe, dtype=np.int64))
    assert got.tolist() == [p in set(rows) for p in probe]
