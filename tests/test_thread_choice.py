"""Threads chosen by the work (issue #23, item 3).

``_core.threads_for_work(work, n_threads)`` is the one rule every compiled
kernel and the batch use: one thread below 2^18 cells whatever was asked,
exactly ``n_threads`` when positive, else one thread per 2^17 cells between 2
and the ceiling (``-n_threads``, or OpenMP's default for 0). The cpp backend
passes ``OMP_NUM_THREADS`` as an exact count and otherwise lets the work choose.
Results never depend on the count (tests/test_batch.py, test_core_kernels.py);
here: the rule, the backend's default, and equal bits under the auto choice.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import aces_fast as af
from aces_fast._compiled import core

pytestmark = pytest.mark.skipif(core is None, reason="needs the compiled extension")

MIN, PER = 1 << 18, 1 << 17


def test_small_work_stays_on_one_thread_whatever_is_asked():
    for n_threads in (0, -16, 1, 2, 64):
        assert core.threads_for_work(0, n_threads) == 1
        assert core.threads_for_work(MIN - 1, n_threads) == 1


@pytest.mark.skipif(core is not None and not core.has_openmp(), reason="needs OpenMP")
def test_an_exact_count_wins_and_the_work_chooses_otherwise():
    for work in (MIN, 10 * MIN, 1 << 40):
        assert core.threads_for_work(work, 3) == 3
        assert core.threads_for_work(work, 1) == 1
    ceiling = 16
    got = [core.threads_for_work(w, -ceiling) for w in range(MIN, 40 * PER, PER // 3)]
    assert got == sorted(got)  # more work, never fewer threads
    assert got[0] == 2 and max(got) == ceiling
    for w in (MIN, 3 * PER, 5 * PER + 1, 15 * PER, 16 * PER, 1 << 40):
        assert core.threads_for_work(w, -ceiling) == min(ceiling, max(2, w // PER))
    assert core.threads_for_work(1 << 40, 0) == core.max_threads()


def test_out_of_range_counts_are_refused():
    for bad in (4097, -4097):
        with pytest.raises(ValueError, match="n_threads"):
            core.threads_for_work(MIN, bad)
    with pytest.raises(TypeError, match="n_threads"):
        core.threads_for_work(MIN, 1.5)


def _backend_threads(env_threads):
    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    if env_threads is not None:
        env["OMP_NUM_THREADS"] = env_threads
    code = (
        "import json, aces_fast.backends as b; from aces_fast._compiled import core; "
        "print(json.dumps([b.get_backend('cpp').n_threads, core.max_threads()]))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    return json.loads(out)


def test_the_backend_default_is_chosen_by_the_work_unless_omp_num_threads_says():
    n, ceiling = _backend_threads(None)
    assert n == -ceiling
    assert _backend_threads("3")[0] == 3
    assert _backend_threads("2,1")[0] == 2  # nested setting: its first level
    assert _backend_threads("0")[0] < 0  # not a count: the work chooses


def test_the_auto_choice_gives_the_bits_of_one_thread():
    from aces_fast.backends import get_backend

    rng = np.random.default_rng(5)
    B = (rng.random((1200, 400)) < rng.random(400)).astype(np.uint8)  # 480,000 cells
    tasks = [B, B[:300], B[:, :200]]
    cpp = get_backend("cpp")
    before = cpp.n_threads
    got = {}
    try:
        for nt in (-2, 1, 2):
            cpp.n_threads = nt
            got[nt] = (
                af.aces_c(B, backend="cpp"),
                af.aces_o(B[:200], steps=5, backend="cpp"),
                af.rerank_batch(tasks, "aces-c", backend="cpp"),
            )
    finally:
        cpp.n_threads = before
    for nt in (1, 2):
        c, o, batch = got[nt]
        c0, o0, batch0 = got[-2]
        assert np.array_equal(c.scores, c0.scores) and np.array_equal(c.order, c0.order)
        assert np.array_equal(o.weights, o0.weights) and np.array_equal(o.order, o0.order)
        for r, r0 in zip(batch, batch0):
            assert np.array_equal(r.scores, r0.scores) and np.array_equal(r.order, r0.order)
