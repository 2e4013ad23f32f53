"""The environment variables that steer aces_fast, declared once, and how an on/off
switch among them is read (docs/backends.rst, "Environment variables").

:data:`VARIABLES` is what ``aces-fast config`` lists; :func:`flag` reads every
on/off switch the same way, so that ``1``/``true``/``yes``/``on`` and
``0``/``false``/``no``/``off`` mean the same for each, and a misspelling is an
error naming the variable instead of silently meaning on for one switch and
off for another.
"""

from __future__ import annotations

import os

#: words that turn a switch on / off (any case, surrounding spaces ignored)
ON = ("1", "true", "yes", "on")
OFF = ("0", "false", "no", "off")

#: the names, each written here only; the modules that read them take them from here
BACKEND = "ACES_FAST_BACKEND"
OMP_THREADS = "OMP_NUM_THREADS"
SIMD = "ACES_FAST_SIMD"  # read by the C++ dispatch (csrc/simd/dispatch.cpp)
NUMBA_CACHE = "ACES_FAST_NUMBA_CACHE"
NUMBA_CACHE_DIR = "ACES_FAST_NUMBA_CACHE_DIR"
TORCH_DTYPE = "ACES_FAST_TORCH_DTYPE"
TORCH_FUSED = "ACES_FAST_TORCH_FUSED"
TORCH_TRITON = "ACES_FAST_TORCH_TRITON"
TORCH_CUDA_GRAPHS = "ACES_FAST_TORCH_CUDA_GRAPHS"
PART_WRITER = "ACES_FAST_PART_WRITER"
MAX_CELLS = "ACES_FAST_MAX_CELLS"
MAX_BYTES = "ACES_FAST_MAX_BYTES"
TRACEBACK = "ACES_FAST_TRACEBACK"

#: every variable aces_fast reads, in the order ``aces-fast config`` shows them
VARIABLES = (
    BACKEND,
    OMP_THREADS,
    SIMD,
    NUMBA_CACHE,
    NUMBA_CACHE_DIR,
    TORCH_DTYPE,
    TORCH_FUSED,
    TORCH_TRITON,
    TORCH_CUDA_GRAPHS,
    PART_WRITER,
    MAX_CELLS,
    MAX_BYTES,
    TRACEBACK,
)


def flag(name: str, default: bool) -> bool:
    """The on/off switch ``name``, read now: ``default`` when unset or blank.

    Raises
    ------
    ValueError
        When the value is none of :data:`ON` or :data:`OFF`, naming the
        variable, its value and the accepted words.
    """
    raw = os.environ.get(name)
    if raw is None or not raw.strip():
        return default
    value = raw.strip().lower()
    if value in ON:
        return True
    if value in OFF:
        return False
    raise ValueError(
        f"{name}={raw!r} is not a switch: use one of {', '.join(ON)} (on) or {', '.join(OFF)} (off)"
    )
