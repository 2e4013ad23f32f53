"""Ctrl-C while the command line compiles the numba kernels.

numba compiles through llvmlite, which calls back into Python; a
``KeyboardInterrupt`` raised inside such a callback used to be printed as
"Exception ignored ..." and dropped (the command ran on and exited 0), or left
the compiler half built ("internal error: RuntimeError: no compiled object
yet"). ``aces_fast._startup.CompileInterrupts`` makes a Ctrl-C during
compilation end the command at once with one line and exit status 130.

Each test starts ``aces-fast warmup --backend numba`` on an empty disk cache
(a cold compile, about a minute and a half on 2 cores), waits until the kernels'
cache directory exists (the imports are done and compilation begins), sends
SIGINT at a random moment and checks the exit. The stop-within bound is
generous; the guard itself exits within milliseconds.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers import require_backend

pytestmark = [
    pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals"),
]

SRC = str(Path(__file__).resolve().parents[1] / "src")
#: seconds from SIGINT to the process's end that the test accepts (the guard
#: exits within milliseconds; the machine may be busy)
STOP_WITHIN = 5.0


def _interrupt_cold_compile(tmp_path: Path, delay: float) -> None:
    cache = tmp_path / f"cache-{delay:.3f}"
    cache.mkdir()
    env = dict(os.environ, ACES_FAST_NUMBA_CACHE_DIR=str(cache), PYTHONUNBUFFERED="1")
    env.pop("ACES_FAST_NUMBA_CACHE", None)
    if os.path.isdir(os.path.join(SRC, "aces_fast")):  # a checkout's tests: its sources
        env["PYTHONPATH"] = SRC + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.Popen(
        [sys.executable, "-m", "aces_fast", "warmup", "--backend", "numba"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        deadline = time.monotonic() + 120
        while not any(cache.iterdir()):  # the keyed directory: kernels imported
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the kernels were never imported"
            time.sleep(0.01)
        time.sleep(delay)
        assert proc.poll() is None, "warm-up finished before the signal: " + str(proc.communicate())
        sent = time.monotonic()
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
        took = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    context = f"SIGINT {delay:.2f} s into compilation: exit {proc.returncode}\n{out}{err}"
    assert proc.returncode == 130, context
    assert err.splitlines() == ["aces-fast: interrupted"], context
    assert "Exception ignored" not in err and "internal error" not in err, context
    assert "ready" not in out, context  # never ran on to the end
    assert took < STOP_WITHIN, context


def test_ctrl_c_during_the_first_compile_exits_130(tmp_path):
    require_backend("numba")
    _interrupt_cold_compile(tmp_path, random.uniform(0.0, 3.0))


@pytest.mark.slow
def test_ctrl_c_at_many_moments_of_the_first_compile(tmp_path):
    """Moments spread over the whole cold compile (the audit lost 3 of 9)."""
    require_backend("numba")
    rng = random.Random()
    for delay in sorted(rng.uniform(0.0, 40.0) for _ in range(6)):
        _interrupt_cold_compile(tmp_path, delay)
