"""Shared test data and assertions, imported by the test modules (``from helpers import ...``).

Fixtures stay in ``conftest.py``; plain values and functions live here, so a test
module says where its names come from.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from aces_fast.backends import BackendUnavailableError, get_backend

#: The worked example of docs/contract.rst §6 (first three candidates correct).
EXAMPLE = np.array(
    [
        [1, 1, 1, 1, 1, 0, 1, 0, 0, 0],
        [1, 1, 0, 1, 0, 1, 0, 1, 0, 0],
        [1, 0, 1, 0, 1, 1, 0, 0, 0, 0],
        [0, 1, 1, 0, 0, 0, 0, 0, 1, 1],
        [0, 0, 0, 1, 1, 0, 0, 0, 1, 1],
        [0, 0, 0, 0, 0, 1, 1, 0, 1, 1],
        [0, 0, 0, 0, 0, 0, 0, 1, 1, 1],
        [0, 0, 0, 0, 0, 0, 0, 0, 1, 1],
    ],
    dtype=np.uint8,
)
EXAMPLE_LABELS = np.array([1, 1, 1, 0, 0, 0, 0, 0], dtype=np.uint8)


def load_tool(name: str) -> ModuleType:
    """The checkout's ``tools/<name>.py`` as a module (the tools are scripts, not
    part of the installed package)."""
    path = Path(__file__).resolve().parents[1] / "tools" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def random_matrix(
    rng: np.random.Generator, n: int, m: int, density: float = 0.4, dup_rows: int = 0
) -> np.ndarray:
    """A random 0/1 matrix, optionally with ``dup_rows`` rows copied from others."""
    B = (rng.random((n, m)) < density).astype(np.uint8)
    if dup_rows and n > 1:
        src = rng.integers(0, n, size=dup_rows)
        dst = rng.integers(0, n, size=dup_rows)
        B[dst] = B[src]
    return B


def labelled_problems(count, n=8, m=12, seed=0, prefix="t", start=0):
    """``count`` random ``Problem`` s with labels, ids ``prefix + str(start + i)``:
    0/1 ``(n, m)`` matrices at pass rate 0.5, labels at 0.4 (seeded)."""
    from aces_fast.datasets import Problem

    rng = np.random.default_rng(seed)
    return [
        Problem(
            f"{prefix}{start + i}",
            (rng.random((n, m)) < 0.5).astype(np.uint8),
            (rng.random(n) < 0.4).astype(np.uint8),
        )
        for i in range(count)
    ]


def b4_tolerance(n: int, m: int, alpha: float | None = None, beta0: float | None = None) -> float:
    """docs/contract.rst §4's bound on B4's scores, ``1e-14 L`` with
    ``L = lnΓ(N M + a + b + 2)``; the priors default to the registry's."""
    from aces_fast import _registry

    spec = _registry.get("b4")
    a = spec.default("alpha") if alpha is None else alpha
    b = spec.default("beta0") if beta0 is None else beta0
    return 1e-14 * math.lgamma(n * m + a + b + 2)


def npy(x):
    """An array result as NumPy (the torch backend hands back tensors); None stays None."""
    if x is None:
        return None
    return x.detach().cpu().numpy() if hasattr(x, "detach") else np.asarray(x)


def assert_same_result(got, want):
    """Bit-identical results: same method, backend, fallback, array types (and
    devices), dtypes, shapes, values and info."""
    assert (got.method, got.backend, got.fallback) == (want.method, want.backend, want.fallback)
    for name in ("scores", "weights", "order", "loo_auc", "objective"):
        a, b = getattr(got, name), getattr(want, name)
        assert (a is None) == (b is None), name
        if a is None:
            continue
        assert type(a) is type(b), name
        if hasattr(b, "device"):
            assert a.device == b.device, name
        a, b = npy(a), npy(b)
        assert a.dtype == b.dtype and a.shape == b.shape, name
        np.testing.assert_array_equal(a, b, err_msg=name)
    assert got.info.keys() == want.info.keys()
    for key, value in want.info.items():
        if isinstance(value, np.ndarray) or hasattr(value, "detach"):
            np.testing.assert_array_equal(npy(got.info[key]), npy(value))
        else:
            assert got.info[key] == value, key


def require_backend(name: str):
    """The backend ``name`` (:func:`aces_fast.backends.get_backend`); skips the
    calling test, with the backend's own reason, when it is not available."""
    try:
        return get_backend(name)
    except BackendUnavailableError as exc:
        pytest.skip(exc.reason)


def strict_adam_loop(monkeypatch) -> None:
    """Run the torch backend's ACES-O Adam loop (``_GroupFit.run``, steps 2..)
    under ``torch.cuda.set_sync_debug_mode("error")``: any host synchronization
    there raises (the steps before it, which read the device on purpose, do not)."""
    import torch

    from aces_fast.backends.torch import aces_o

    run = aces_o._GroupFit.run

    def strict(self, *args):
        torch.cuda.synchronize()
        torch.cuda.set_sync_debug_mode("error")
        try:
            return run(self, *args)
        finally:
            torch.cuda.set_sync_debug_mode("default")

    monkeypatch.setattr(aces_o._GroupFit, "run", strict)


# ---------------------------------------------------------------------------
# Ctrl-C tests (test_interrupt.py for cpp, test_interrupt_numba.py for numba)

#: Start of a child script for the Ctrl-C tests: SIGINT raises KeyboardInterrupt
#: (a parent started in the background, SIGINT ignored, would pass that on), no
#: CostWarning, ``B`` a 4000 x 300 matrix over which ACES-O with ``top_k=None``
#: costs ~1e9 pair terms per Adam step (the long calls would run for hours or
#: days), ``small`` its first 60 rows. The module's part that follows defines
#: ``calls`` (case name -> the long call), warms up, and defines
#: ``same_results()`` (the backend still gives the results it gave before).
INTERRUPT_CHILD_HEAD = r"""
import signal, sys, time, warnings
import numpy as np
import pytest

from aces_fast.backends import BackendUnavailableError, get_backend
import aces_fast as af

signal.signal(signal.SIGINT, signal.default_int_handler)
warnings.simplefilter("ignore", af.CostWarning)
rng = np.random.default_rng(0)
B = (rng.random((4000, 300)) < 0.5).astype(np.uint8)
small = np.ascontiguousarray(B[:60])
"""

#: End of the child script: runs ``calls[argv[1]]`` and prints, one per line,
#: whether and when it was interrupted, the CPU the idle process then uses (no
#: thread of the call may still be computing), and ``same_results()``.
INTERRUPT_CHILD_TAIL = r"""
print("started", flush=True)
t = time.monotonic()
try:
    calls[sys.argv[1]]()
except KeyboardInterrupt:
    print(f"interrupted after {time.monotonic() - t:.3f} s", flush=True)
else:
    print("finished", flush=True)
    sys.exit(1)
time.sleep(0.3)
cpu = time.process_time()
time.sleep(1.0)
print(f"idle cpu {time.process_time() - cpu:.3f} s", flush=True)
print(f"same results {same_results()}", flush=True)
"""


def assert_sigint_interrupts(
    child: str, case: str, wait: float, timeout: float, max_took: float
) -> None:
    """Run ``child`` (INTERRUPT_CHILD_HEAD + a module's part + INTERRUPT_CHILD_TAIL) on
    ``case``, send SIGINT ``wait`` s after it says it started, and assert: it was
    interrupted, its idle process then uses < 0.25 s of CPU per second, results
    are unchanged, and it exited within ``max_took`` s of the signal (the child
    idles ~1.3 s by design; the call itself would take hours)."""
    import os
    import signal
    import subprocess
    import sys
    import time

    env = dict(os.environ, PYTHONUNBUFFERED="1")
    proc = subprocess.Popen(
        [sys.executable, "-c", child, case],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        line = proc.stdout.readline()  # after any warm-up
        assert line.strip() == "started", line + proc.stderr.read()
        time.sleep(wait)  # inside the long call by now
        sent = time.monotonic()
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=timeout)
        took = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, out + err
    lines = out.splitlines()
    assert lines[0].startswith("interrupted after"), out + err
    assert float(lines[1].split()[2]) < 0.25, out  # no worker thread still running
    assert lines[2] == "same results True", out
    assert took < max_took, (took, out)


#: the kernels' instruction-set levels (csrc/simd/dispatch.hpp), lowest first
SIMD_LEVELS = ("none", "avx2", "avx512")


def simd_levels_here() -> tuple[str, ...]:
    """The SIMD levels this CPU runs: its own and every one below."""
    from aces_fast import _core

    return SIMD_LEVELS[: SIMD_LEVELS.index(_core.simd_level()) + 1]


def run_at_level(level: str, script: str, *args: str, unset: tuple[str, ...] = ()) -> dict:
    """``python -c script *args`` with every kernel capped at SIMD ``level``
    (``ACES_FAST_SIMD``), one thread and the variables ``unset`` removed; the
    JSON the script prints. Fails the test when the script fails."""
    env = dict(os.environ, ACES_FAST_SIMD=level, OMP_NUM_THREADS="1")
    for name in unset:
        env.pop(name, None)
    proc = subprocess.run(
        [sys.executable, "-c", script, *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


# Sizes on both sides of the uniform LOO-AUC kernels' switch from 16-bit to wider
# lanes (a total multiplicity of at most 361: 2 wins + ties <= 361^2 / 2 < 2^16).
NARROW_SIZES = [2, 255, 360, 361, 362, 700]


def narrow_lane_inputs(n, with_counts):
    """Half-passing columns (the largest pair counts) and single-row and multi-row
    score levels; with counts, a total multiplicity of n + 1 (3 up to 701)."""
    rng = np.random.default_rng(n)
    m = 130
    B = (rng.random((n, m)) < 0.5).astype(np.uint8)
    B[:, 0] = np.arange(n) % 2  # P = F = n / 2: the largest 2 wins + ties
    B[: n // 3, 1:9] = 1  # many rows on few score levels
    counts = None
    if with_counts:
        counts = np.ones(n, dtype=np.int64)
        counts[0] = 2
    return B, counts


def stop_after(monkeypatch, commits):
    """Make the next dataset run stop, as on Ctrl-C, after ``commits`` commits of
    its output directory; returns a function that undoes it."""
    from aces_fast._commit import ResultsDir

    real = ResultsDir.commit
    count = [0]

    def commit(self, *args, **kwargs):
        if count[0] == commits:
            raise KeyboardInterrupt
        count[0] += 1
        return real(self, *args, **kwargs)

    monkeypatch.setattr(ResultsDir, "commit", commit)
    return lambda: monkeypatch.setattr(ResultsDir, "commit", real)
