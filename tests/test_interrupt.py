"""Ctrl-C during long compiled calls.

A long ``_core`` call on the Python main thread looks at Python's signals every
50 ms (taking the GIL briefly) and, when a handler raises, stops its kernels at
the next safe point and re-raises: SIGINT gives ``KeyboardInterrupt`` within
about a second instead of after the whole call. These tests run each long call
in a child process, send SIGINT from outside after it has started, and expect
a ``KeyboardInterrupt`` long before the call could have finished, no thread
still computing afterwards, and a working extension. They check behaviour, not
speed: the timeouts are generous.
"""

from __future__ import annotations

import signal
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


# The binned fit costs ~50 ms per step for a million steps.
CHILD = (
    INTERRUPT_CHILD_HEAD
    + r"""
calls = {
    "rerank": lambda: af.aces_o(B, top_k=None, steps=100_000, backend="cpp"),
    "rerank_batch": lambda: af.rerank_batch([B, B[:10], B[:2000], B[:20]], "aces-o",
                                            top_k=None, steps=100_000, backend="cpp"),
    "binned": lambda: af.aces_o(B, top_k=None, steps=1_000_000, bins=2048, backend="cpp"),
}
before = af.aces_o(small, steps=5, backend="cpp")


def same_results():  # the extension still gives the same results
    after = af.aces_o(small, steps=5, backend="cpp")
    return all(np.array_equal(getattr(before, k), getattr(after, k))
               for k in ("weights", "scores", "order", "objective"))
"""
    + INTERRUPT_CHILD_TAIL
)


@pytest.mark.parametrize("case", ["rerank", "rerank_batch", "binned"])
def test_sigint_interrupts_a_long_call(case):
    require_backend("cpp")
    assert_sigint_interrupts(CHILD, case, wait=1.0, timeout=120, max_took=60)


def _record_handler_runs():
    """SIGALRM every 10 ms; returns the list its handler appends to and a stop()."""
    runs = []
    old = signal.signal(signal.SIGALRM, lambda *_: runs.append(time.monotonic()))
    signal.setitimer(signal.ITIMER_REAL, 0.01, 0.01)

    def stop():
        signal.setitimer(signal.ITIMER_REAL, 0, 0)
        signal.signal(signal.SIGALRM, old)

    return runs, stop


def _in_thread(fn):
    out = []
    t = threading.Thread(target=lambda: out.append(fn()))
    t.start()
    t.join()
    return out[0]


@pytest.mark.parametrize("case", ["rerank", "rerank_batch", "binned"])
def test_results_unchanged_when_signal_handlers_run_during_the_call(case):
    """Signal handlers that do not raise run during a long call (proof that it
    polls) and change nothing; a call from another thread, which never polls,
    gives the same bits."""
    require_backend("cpp")
    rng = np.random.default_rng(1)
    B = (rng.random((700, 200)) < 0.5).astype(np.uint8)
    call = {
        "rerank": lambda: [af.aces_o(B, top_k=None, steps=25, backend="cpp")],
        "rerank_batch": lambda: af.rerank_batch(
            [B, B[:300], B[:500]], "aces-o", top_k=None, steps=25, backend="cpp"
        ),
        "binned": lambda: [
            af.aces_o(np.tile(B, (4, 1)), top_k=None, steps=12, bins=2048, backend="cpp")
        ],
    }[case]
    reference = _in_thread(call)
    runs, stop = _record_handler_runs()
    try:
        start = time.monotonic()
        got = call()
        end = time.monotonic()
    finally:
        stop()
    during = [t for t in runs if start <= t <= end]
    # ITIMER_REAL fires every 10 ms; checked every 50 ms the handler runs many
    # times during the call, not just once after it (pending signals coalesce)
    assert end - start < 0.2 or len(during) >= 3, (end - start, len(during))
    for a, b in zip(got, reference):
        for key in ("weights", "scores", "order", "objective"):
            np.testing.assert_array_equal(getattr(a, key), getattr(b, key))


class _Stop(Exception):
    pass


# the call is meant to run for hours, so the library rightly warns before it starts
@pytest.mark.filterwarnings("ignore::aces_fast.CostWarning")
def test_any_exception_a_handler_raises_stops_the_call():
    """Not only KeyboardInterrupt: what the handler raises comes out of the call,
    the same object, with the handler's frame in its traceback."""
    require_backend("cpp")
    rng = np.random.default_rng(2)
    B = (rng.random((3000, 200)) < 0.5).astype(np.uint8)
    raised = []

    def handler(*_):
        raised.append(_Stop("from the handler"))
        raise raised[-1]

    old = signal.signal(signal.SIGALRM, handler)
    signal.setitimer(signal.ITIMER_REAL, 0.3)
    try:
        start = time.monotonic()
        with pytest.raises(_Stop) as info:
            af.aces_o(B, top_k=None, steps=100_000, backend="cpp")  # hours
        took = time.monotonic() - start
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0, 0)
        signal.signal(signal.SIGALRM, old)
    assert info.value is raised[0]
    assert any(tb.name == "handler" for tb in info.traceback)
    assert took < 60
    small = np.ascontiguousarray(B[:40])
    np.testing.assert_array_equal(
        _in_thread(lambda: af.aces_c(small, backend="cpp")).scores,
        af.aces_c(small, backend="cpp").scores,
    )
