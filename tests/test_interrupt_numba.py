"""Ctrl-C during long numba calls.

Jitted code never sees Python's signals, so a long numba fit runs as a Python
loop over kernel calls of bounded cost (whole Adam steps, see
``aces_fast.backends.numba.aces_o.CHUNK_PAIRS``) and a batch's helper threads stop
at their next such boundary once the batch fails or is interrupted. These tests
run each long call in a child process, send SIGINT after it has started, and
expect ``KeyboardInterrupt`` long before the call could have finished, no thread
still computing afterwards, and unchanged results. They check behaviour, not
speed: the timeouts are generous. The chunked fit must give the bits of the
single-call fit.
"""

from __future__ import annotations

import sys
import threading
import time

import numpy as np
import pytest

import aces_fast as af
from helpers import (
    INTERRUPT_CHILD_HEAD,
    INTERRUPT_CHILD_TAIL,
    assert_sigint_interrupts,
    require_backend,
)

pytestmark = [
    pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals"),
]


# Each long call would run for days: ACES-O over all 4000 rows costs ~1e9 pair
# terms per Adam step. The warm-up compiles both the one-call fit and the chunked
# one (CHUNK_PAIRS forced down) on small inputs first, so the signal arrives
# inside the long call, not inside the JIT compiler.
CHILD = (
    INTERRUPT_CHILD_HEAD
    + r"""
from aces_fast.backends.numba import aces_o as nb_aces_o

calls = {
    "rerank": lambda: af.aces_o(B, top_k=None, steps=100_000, backend="numba"),
    "rerank_batch": lambda: af.rerank_batch([B, B[:10], B[:2000], B[:20]], "aces-o",
                                            top_k=None, steps=100_000, backend="numba",
                                            n_threads=2),
    "many_tasks": lambda: af.rerank_batch([B[i % 3000:i % 3000 + 300] for i in range(20000)],
                                          "aces-o", top_k=64, steps=200, backend="numba",
                                          n_threads=2),
    # ACES-C compiled whole: chunks of tasks per compiled call
    "compiled_batch": lambda: af.rerank_batch([B] * 200_000, "aces-c", backend="numba",
                                              n_threads=2),
}
chunk = nb_aces_o.CHUNK_PAIRS
nb_aces_o.CHUNK_PAIRS = 1
chunked = af.aces_o(small, top_k=None, steps=5, backend="numba")
af.rerank_batch([small, small[:20]], "aces-o", top_k=None, steps=5, backend="numba",
                n_threads=2)
nb_aces_o.CHUNK_PAIRS = chunk
af.rerank_batch([small, small[:20]], "aces-c", backend="numba", n_threads=2)
before = af.aces_o(small, top_k=None, steps=5, backend="numba")
af.rerank_batch([small, small[:20]], "aces-o", top_k=None, steps=5, backend="numba",
                n_threads=2)


def same_results():  # and the chunked fit gave the bits of the one-call fit
    after = af.aces_o(small, top_k=None, steps=5, backend="numba")
    return all(np.array_equal(getattr(before, k), getattr(after, k))
               and np.array_equal(getattr(chunked, k), getattr(after, k))
               for k in ("weights", "scores", "order", "objective"))
"""
    + INTERRUPT_CHILD_TAIL
)


@pytest.mark.parametrize("case", ["rerank", "rerank_batch", "many_tasks", "compiled_batch"])
def test_sigint_interrupts_a_long_numba_call(case):
    require_backend("numba")
    # the first line comes after the JIT warm-up (can take a minute)
    assert_sigint_interrupts(CHILD, case, wait=2.0, timeout=180, max_took=90)


def test_chunked_fit_gives_the_bits_of_one_call(monkeypatch):
    """Any chunk size: the Adam state carried between kernel calls gives the bits of
    the whole fit in one kernel call (the property the interruption relies on)."""
    require_backend("numba")
    from aces_fast.backends.numba import aces_o as nb_aces_o

    rng = np.random.default_rng(5)
    B = (rng.random((90, 17)) < 0.4).astype(np.uint8)
    B[30:45] = B[:15]  # repeated rows: multiplicities > 1
    B[:, 3] = 1  # a constant (inactive) test
    monkeypatch.setattr(nb_aces_o, "CHUNK_PAIRS", 10**15)
    whole = [
        af.aces_o(B, top_k=None, steps=23, backend="numba", init=init)
        for init in ("uniform", "aces-c")
    ]
    for chunk in (1, 2 * 17 * 45 * 45 * 3, 2 * 17 * 45 * 45 * 7):
        monkeypatch.setattr(nb_aces_o, "CHUNK_PAIRS", chunk)
        for init, ref in zip(("uniform", "aces-c"), whole):
            got = af.aces_o(B, top_k=None, steps=23, backend="numba", init=init)
            for key in ("weights", "scores", "order", "objective"):
                np.testing.assert_array_equal(getattr(got, key), getattr(ref, key))
    np.testing.assert_allclose(
        whole[0].weights,
        af.aces_o(B, top_k=None, steps=23, backend="numpy").weights,
        rtol=0,
        atol=1e-10,
    )


def test_a_failing_task_stops_the_other_threads(monkeypatch):
    """The first failure of a threaded batch stops the other threads at their next
    boundary: the batch raises it without running the remaining tasks."""
    require_backend("numba")
    from aces_fast.backends.numba import _in_threads

    started = []
    lock = threading.Lock()

    def fn(item):
        with lock:
            started.append(item)
        if item == 0:
            raise KeyboardInterrupt
        time.sleep(0.01)

    with pytest.raises(KeyboardInterrupt):
        _in_threads(fn, np.arange(500), 2)
    assert 0 in started and len(started) < 50  # the rest of the queue never started
    assert threading.active_count() == 1 or all(
        not t.name.startswith("Thread-") or not t.is_alive()
        for t in threading.enumerate()
        if t is not threading.current_thread()
    )


def _boxing_interrupted(*args):
    """What numba raises when Ctrl-C lands while compiled code boxes a result: a
    SystemError caused by the KeyboardInterrupt raised in its Python callback."""
    try:
        raise KeyboardInterrupt
    except KeyboardInterrupt as exc:
        raise SystemError(
            "<function _numba_unpickle> returned a result with an exception set"
        ) from exc


@pytest.mark.parametrize("call", ["aces-c", "aces-o", "batch", "loo_auc", "surrogate"])
def test_ctrl_c_while_boxing_a_result_is_a_keyboard_interrupt(monkeypatch, call):
    """Every entry point of the numba backend raises such an interrupt as the
    KeyboardInterrupt it is (seen in the many-tasks case above, rarely)."""
    require_backend("numba")
    from aces_fast.backends import numba as nb

    kernels = nb._load_kernels()
    B = (np.random.default_rng(1).random((12, 9)) < 0.5).astype(np.uint8)
    for name in ("row_scores", "row_scores_rep", "aces_o_fit", "surrogate", "uniform_loo_auc"):
        monkeypatch.setattr(kernels, name, _boxing_interrupted)
    monkeypatch.setattr(kernels, "entry", lambda fn: None)  # the Python semantics' kernels
    calls = {
        "aces-c": lambda: af.aces_c(B, backend="numba"),
        "aces-o": lambda: af.aces_o(B, steps=2, backend="numba"),
        "batch": lambda: af.rerank_batch([B, B[:5]], "aces-o", steps=2, backend="numba"),
        "loo_auc": lambda: af.loo_auc(B, backend="numba"),
        "surrogate": lambda: af.surrogate_loo_auc(B, np.full(9, 1 / 9), backend="numba"),
    }
    with pytest.raises(KeyboardInterrupt) as info:
        calls[call]()
    assert isinstance(info.value.__cause__, SystemError)


def test_other_system_errors_pass_unchanged():
    require_backend("numba")
    from aces_fast.backends.numba import _cancel

    @_cancel.ctrl_c_stays_keyboard_interrupt
    def broken():
        raise SystemError("something else")

    with pytest.raises(SystemError, match="something else"):
        broken()
