"""The compiled ranking order (csrc/methods/methods.cpp, snap_and_order). From the
AVX2 level on, up to 128 distinct rows (256 in a batch of several tasks) are
placed by counting, in lanes, the scores whose high 32 bits are below each
score's, those sharing them ordered by insertion after, or past a budget by
radix passes over every byte; equal ones keep the row order (rank_by_counts);
below it, fewer than 32 by the same count in generic code (rank_sort). More
are sorted by radix passes on their highest differing bits plus insertion, or,
when many scores agree on those bits (a narrow band of scores next to an
outlier), by radix passes over every byte. The order is then the sorted list
reversed when no two scores tie (and no row repeats), else a counting sort of
the tie groups. Every path must give the stable descending order of the
scores, equal to the NumPy reference's; the paths of the levels below this
CPU's run in subprocesses (``ACES_FAST_SIMD``).
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import aces_fast as af
from helpers import run_at_level, simd_levels_here

METHODS = ("aces-c", "aces-c-filter", "majority")


def narrow_band(rng, n, m_common, m_rare):
    """One all-fail row; every other row passes m_common columns and all but a
    few of m_rare near-constant ones: the scores crowd into a band far from 0."""
    B = np.ones((n, m_common + m_rare), np.uint8)
    B[0] = 0
    for j in range(m_common, m_common + m_rare):
        B[rng.integers(1, n, int(rng.integers(1, 4))), j] = 0
    return B


def stable_descending(scores):
    """The stable descending order of ``scores`` (ties by lower row)."""
    scores = np.asarray(scores)
    return np.lexsort((np.arange(len(scores)), -scores))


def order_keys(scores):
    """The sort's unsigned keys of float64 scores (ascending with the scores)."""
    u = np.asarray(scores, dtype=np.float64).view(np.uint64)
    return np.where(u >> np.uint64(63) == 1, ~u, u | np.uint64(1 << 63))


def span_moves(scores):
    """``(keys in shared spans, insertion moves)``: distinct keys beyond the
    first of each high half (32 bits), and the moves an insertion makes to order
    the keys of each high half from the row order, as rank_by_counts does."""
    keys = order_keys(scores)
    high = keys >> np.uint64(32)
    extra = len(np.unique(keys)) - len(np.unique(high))
    moves = 0
    for h in np.unique(high):
        sub = keys[high == h]
        moves += sum(int((sub[:i] > sub[i]).sum()) for i in range(len(sub)))
    return extra, moves


def symmetric(g1, g2, sizes):
    """Every row that passes k1 of the first g1 tests and k2 of the next g2, for
    each (k1, k2) in sizes: tests of a group are alike, so their weights are
    equal, and rows passing as many of each group have equal scores in exact
    arithmetic that differ in their last bits as the sums round."""
    rows = []
    for k1, k2 in sizes:
        for s1 in itertools.combinations(range(g1), k1):
            for s2 in itertools.combinations(range(g1, g1 + g2), k2):
                row = np.zeros(g1 + g2, np.uint8)
                row[list(s1 + s2)] = 1
                rows.append(row)
    return np.array(rows)


#: symmetric() inputs whose distinct ACES-C scores (tie_tol = 0) share their
#: high 32 bits in scrambled row order: 70 and 119 rows (a single call's
#: counts, whose insertion stays in budget), 136 and 252 (a batch's counts;
#: 252 moves 17 keys per row, past the 4 per row at which the insertion gives
#: way to the radix passes over every byte)
SHARED_HIGH = (
    (7, 5, ((1, 1), (4, 5))),
    (7, 8, ((3, 0), (6, 7), (7, 6))),
    (8, 5, ((1, 2), (5, 5))),
    (7, 8, ((1, 2), (4, 8), (5, 8))),
)


def check(B):
    for method in METHODS:
        got = af.rerank(B, method, backend="cpp")
        ref = af.rerank(B, method, backend="numpy")
        scores, order = np.asarray(got.scores), np.asarray(got.order)
        # the stable descending order of the returned (snapped) scores
        np.testing.assert_array_equal(order, stable_descending(scores))
        np.testing.assert_array_equal(order, np.asarray(ref.order))


def crowded(seed):
    """A narrow band of 60-300 rows (seeded)."""
    rng = np.random.default_rng(seed)
    return narrow_band(
        rng, int(rng.integers(60, 300)), int(rng.integers(20, 200)), int(rng.integers(20, 300))
    )


def spread(n):
    """n rows of 300 tests at pass rates 0.2-0.8, a quarter of them repeated (tied
    scores)."""
    rng = np.random.default_rng(n)
    B = (rng.random((n, 300)) < rng.uniform(0.2, 0.8, n)[:, None]).astype(np.uint8)
    B[rng.integers(0, n, n // 4)] = B[rng.integers(0, n, n // 4)]
    return B


@pytest.mark.parametrize("seed", range(8))
def test_order_of_crowded_scores(seed):
    check(crowded(seed))


@pytest.mark.parametrize("n", [5, 31, 32, 33, 200, 700])
def test_order_of_spread_scores(n):
    check(spread(n))


@pytest.mark.parametrize("n", [1, 2, 3, 8, 17, 31])
@pytest.mark.parametrize("m", [1, 3, 40])
def test_order_of_few_rows_with_ties(n, m):
    # few tests: most scores tie (rank_sort's equal keys keep the row order)
    rng = np.random.default_rng(100 * n + m)
    for _ in range(5):
        check((rng.random((n, m)) < 0.5).astype(np.uint8))


def test_a_batch_orders_as_single_calls_do():
    """A batch of several tasks ranks up to 256 distinct rows by the counts (its
    tasks differ, so the radix path's branches cannot be learnt), single calls
    up to 128: the two give the same order, ties included, at the sizes around
    both limits and on crowded scores."""
    tasks = [spread(n) for n in (127, 128, 129, 200, 255, 256, 257)]
    tasks += [crowded(seed) for seed in range(4)]
    rng = np.random.default_rng(7)
    tasks += [(rng.random((n, 3)) < 0.5).astype(np.uint8) for n in (129, 256)]  # all ties
    for method in METHODS:
        for threads in (1, 2):
            batch = af.rerank_batch(tasks, method, backend="cpp", n_threads=threads)
            for B, res in zip(tasks, batch):
                one = af.rerank(B, method, backend="cpp")
                np.testing.assert_array_equal(np.asarray(res.order), np.asarray(one.order))
                np.testing.assert_array_equal(np.asarray(res.scores), np.asarray(one.scores))
                np.testing.assert_array_equal(np.asarray(res.order), stable_descending(res.scores))


def test_scores_sharing_their_high_bits_keep_their_order():
    """The counts rank by the keys' high 32 bits, insertion orders each span
    of keys that share them, and past a budget the radix passes take over:
    with tie_tol = 0 (distinct scores stay distinct) every path gives the
    stable descending order, in a call and in a batch."""
    tasks = [symmetric(*case) for case in SHARED_HIGH]
    for method in ("aces-c", "aces-c-filter"):
        batch = af.rerank_batch(tasks, method, backend="cpp", tie_tol=0.0)
        for B, res in zip(tasks, batch):
            one = af.rerank(B, method, backend="cpp", tie_tol=0.0)
            for r in (one, res):
                np.testing.assert_array_equal(np.asarray(r.order), stable_descending(r.scores))
            np.testing.assert_array_equal(np.asarray(res.order), np.asarray(one.order))
            np.testing.assert_array_equal(np.asarray(res.scores), np.asarray(one.scores))
    # the cases are real ones: shared spans, and insertion moves up to 17 per row
    extra, moves = zip(*(span_moves(af.rerank(B, "aces-c", tie_tol=0.0).scores) for B in tasks))
    assert min(extra) >= 1
    assert moves[0] > 2 * len(tasks[0]) and moves[-1] > 4 * len(tasks[-1])


def inputs():
    """The inputs of the tests above (and sizes around 128 and 256 keys), for a
    run at another SIMD level."""
    for seed in range(8):
        yield crowded(seed)
    for n in (5, 31, 32, 33, 128, 129, 200, 255, 256, 257, 700):
        yield spread(n)
    for n in (1, 8, 17, 31, 100, 128, 256):
        rng = np.random.default_rng(n)
        yield (rng.random((n, 3)) < 0.5).astype(np.uint8)
    for case in SHARED_HIGH:
        yield symmetric(*case)


# argv: the .npz of the inputs; prints, per input and method, the order and
# whether it is the stable descending order of the scores
_WORKER = r"""
import json, sys
import numpy as np
import aces_fast as af
from aces_fast import _core
mats = np.load(sys.argv[1])
out = {"level": _core.simd_level()}
for k in sorted(mats.files, key=int):
    B = mats[k]
    for method in sys.argv[2:]:
        # tie_tol = 0 too, where a method takes it: distinct scores stay distinct
        for tol in (None, 0.0) if method.startswith("aces-c") else (None,):
            r = af.rerank(B, method, backend="cpp", **({} if tol is None else {"tie_tol": tol}))
            s, o = np.asarray(r.scores), np.asarray(r.order)
            stable = bool((o == np.lexsort((np.arange(len(s)), -s))).all())
            out[f"{k} {method} {tol}"] = [o.tolist(), stable, s.tolist()]
print(json.dumps(out))
"""


@pytest.mark.parametrize("level", ["none", "avx2"])
def test_every_level_gives_the_same_order(level, tmp_path):
    # each level has its own sort for some sizes: all give the same order
    if level not in simd_levels_here():
        pytest.skip(f"this CPU does not run the {level} variants")
    mats = list(inputs())
    path = tmp_path / "mats.npz"
    np.savez(path, **{str(k): B for k, B in enumerate(mats)})
    got = run_at_level(level, _WORKER, str(path), *METHODS)
    assert got.pop("level") == level
    for key, (order, stable, scores) in got.items():
        k, method, tol = key.split(" ")
        assert stable, key
        kw = {} if tol == "None" else {"tie_tol": float(tol)}
        here = af.rerank(mats[int(k)], method, backend="cpp", **kw)
        np.testing.assert_array_equal(np.asarray(scores), np.asarray(here.scores), err_msg=key)
        np.testing.assert_array_equal(np.asarray(order), np.asarray(here.order), err_msg=key)
