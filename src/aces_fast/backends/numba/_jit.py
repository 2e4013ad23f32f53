"""What every numba kernel module shares: the jit options, serial/parallel builds, a copy loop.

Every kernel gets the per-user disk cache of :mod:`._cache` (on unless
``ACES_FAST_NUMBA_CACHE=0``; decided when the kernels are first imported).
"""

from __future__ import annotations

import types

from numba import njit

from . import _cache

_cache.configure()

# The pair loops are reductions: letting LLVM reassociate them (and fuse
# multiply-adds) is what vectorizes them. These flags change rounding only (the
# order of a sum, a fused multiply-add); nnan/ninf/arcp/afn stay off, so inf,
# nan and divisions keep IEEE semantics. Results stay deterministic (the same
# helper code runs in the serial and the parallel build) and within ~1e-15 of
# the reference, far inside the 1e-12 the tests demand.
_VEC_MATH = {"reassoc", "contract", "nsz"}


def _jit(**options):
    # error_model="numpy": a float division never raises, so the division in the
    # pair loops carries no zero check and the loops vectorize; every division
    # here has a nonzero divisor by construction anyway.
    jit = njit(nogil=True, error_model="numpy", **options)

    def decorate(fn):
        dispatcher = jit(fn)
        _cache.attach(dispatcher)
        return dispatcher
    return decorate


def _serial_and_parallel(fn):
    """Compile ``fn`` twice: serially (``prange`` acts as ``range``) and with ``parallel=True``.

    The parallel build is a renamed copy of the function: the on-disk cache
    keys by qualified name and bytecode, not by compile flags.
    """
    clone = types.FunctionType(fn.__code__, fn.__globals__, fn.__name__ + "_parallel",
                               fn.__defaults__, fn.__closure__)
    clone.__qualname__ = fn.__qualname__ + "_parallel"
    clone.__doc__ = fn.__doc__
    return _jit()(fn), _jit(parallel=True)(clone)


@_jit()
def _copy(dst, src):
    """``dst[k] = src[k]`` for k < len(src) (1-D; ``dst`` at least as long).

    A loop rather than ``dst[:] = src``: numba's array-to-array slice assignment
    checks shapes with an error message whose formatting code alone costs
    seconds of JIT in :func:`warmup`.
    """
    for k in range(src.shape[0]):
        dst[k] = src[k]
