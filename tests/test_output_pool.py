"""The memory of the batch calls' flat outputs is reused (csrc/bindings/output_pool.hpp).

A freed batch result's large arrays wait, mapped, for the next batch call's
arrays of about their size, so a call does not page-fault its outputs in
again; results still alive are never written to, and what waits is bounded.
"""

from __future__ import annotations

import gc

import numpy as np
import pytest

import aces_fast as af

_core = pytest.importorskip("aces_fast._core", reason="the C++ extension is not built")

#: the most bytes the pool keeps waiting (output_pool.hpp's kMaxBytes)
MAX_WAITING = 128 << 20


def _tasks(seed: int, count: int, n: int = 24, m: int = 100) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [(rng.random((n, m)) < 0.5).astype(np.uint8) for _ in range(count)]


def _flat(result) -> list[np.ndarray]:
    return [np.concatenate([r.scores for r in result]), np.concatenate([r.weights for r in result])]


@pytest.fixture(autouse=True)
def empty_pool():
    gc.collect()
    _core.output_pool_clear()
    yield
    gc.collect()
    _core.output_pool_clear()


def test_freed_outputs_serve_the_next_batch():
    tasks = _tasks(0, 300)
    first = af.rerank_batch(tasks, "aces-c", backend="cpp", n_threads=1)
    assert _core.output_pool_bytes() == 0
    want = _flat(first)
    del first
    gc.collect()
    kept = _core.output_pool_bytes()
    # weights and loo_auc (300 x 100 float64 each) at least; scores and order
    # (300 x 24) are below the pool's smallest block
    assert kept >= 2 * 300 * 100 * 8
    second = af.rerank_batch(tasks, "aces-c", backend="cpp", n_threads=1)
    assert _core.output_pool_bytes() == 0  # every waiting block was taken again
    for a, b in zip(want, _flat(second)):
        np.testing.assert_array_equal(a, b)


def test_live_results_are_never_written_to():
    """Results kept, dropped and recomputed in turn (the same sizes, so blocks
    are reused) each still equal their single calls."""
    sets = [_tasks(s, 200) for s in range(4)]
    kept = []
    for round_ in range(3):
        for s, tasks in enumerate(sets):
            res = af.rerank_batch(tasks, "aces-c", backend="cpp")
            if (s + round_) % 2 == 0:
                kept.append((s, res))
            del res
            gc.collect()
    for s, res in kept:
        for B, r in zip(sets[s], res):
            one = af.rerank(B, "aces-c", backend="cpp")
            np.testing.assert_array_equal(r.scores, one.scores)
            np.testing.assert_array_equal(r.order, one.order)
            np.testing.assert_array_equal(r.weights, one.weights)


def test_what_waits_is_bounded():
    # outputs of 1 to 40 MB each, freed at once: the pool keeps some, never
    # more than its bound
    for count in (500, 5000, 20_000, 3000, 25_000):
        res = af.rerank_batch(_tasks(count, count, n=8, m=100), "aces-c", backend="cpp")
        del res
        gc.collect()
        assert 0 < _core.output_pool_bytes() <= MAX_WAITING
    _core.output_pool_clear()
    assert _core.output_pool_bytes() == 0


def test_small_outputs_do_not_enter_the_pool():
    res = af.rerank_batch(_tasks(1, 10), "aces-c", backend="cpp")
    del res
    gc.collect()
    assert _core.output_pool_bytes() == 0


def test_threads_calling_at_once_get_their_own_outputs():
    """Four threads each rank their own batches over and over (the GIL is
    released while a batch runs, so their calls overlap and their freed blocks
    cycle through the one pool): every result equals its single calls."""
    from concurrent.futures import ThreadPoolExecutor

    sets = [_tasks(100 + s, 150) for s in range(4)]
    want = [[af.rerank(B, "aces-c", backend="cpp") for B in tasks] for tasks in sets]

    def work(s: int) -> list:
        bad = []
        for _ in range(8):
            res = af.rerank_batch(sets[s], "aces-c", backend="cpp", n_threads=1)
            for k, (r, w) in enumerate(zip(res, want[s])):
                if not (
                    np.array_equal(r.scores, w.scores) and np.array_equal(r.loo_auc, w.loo_auc)
                ):
                    bad.append((s, k))
            del res
        return bad

    with ThreadPoolExecutor(4) as ex:
        assert [b for bad in ex.map(work, range(4)) for b in bad] == []
