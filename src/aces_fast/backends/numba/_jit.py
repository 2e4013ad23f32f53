"""What every numba kernel module shares: the jit options, serial/parallel builds, a copy
loop, a vectorized exp.

Every kernel gets the per-user disk cache of :mod:`._cache` (on unless
``ACES_FAST_NUMBA_CACHE=0``; decided when the kernels are first imported).
"""

from __future__ import annotations

import types

import numpy as np
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


def _renamed(fn, qualname, namespace=None):
    """A copy of ``fn`` (same code) named ``qualname``, resolving globals in
    ``namespace`` (default: ``fn``'s own). The on-disk cache keys by qualified
    name and bytecode, so a copy compiled differently needs a name of its own."""
    clone = types.FunctionType(
        fn.__code__,
        fn.__globals__ if namespace is None else namespace,
        qualname.rpartition(".")[2],
        fn.__defaults__,
        fn.__closure__,
    )
    clone.__qualname__ = qualname
    clone.__doc__ = fn.__doc__
    clone.__module__ = fn.__module__
    return clone


def _serial_and_parallel(fn, **options):
    """Compile ``fn`` twice: serially (``prange`` acts as ``range``) and with ``parallel=True``
    (both with the jit ``options``); the parallel build is a renamed copy."""
    return (
        _jit(**options)(fn),
        _jit(parallel=True, **options)(_renamed(fn, fn.__qualname__ + "_parallel")),
    )


@_jit()
def _copy(dst, src):
    """``dst[k] = src[k]`` for k < len(src) (1-D; ``dst`` at least as long).

    A loop rather than ``dst[:] = src``: numba's array-to-array slice assignment
    checks shapes with an error message whose formatting code alone costs
    seconds of JIT in :func:`warmup`.
    """
    for k in range(src.shape[0]):
        dst[k] = src[k]


#: Cody-Waite split of ln 2 (fdlibm): _LN2_HI has trailing zero bits, so k * _LN2_HI
#: is exact for every |k| < 2**11
_LN2_HI = 6.93147180369123816490e-01
_LN2_LO = 1.90821492927058770002e-10
_LOG2E = 1.4426950408889634
_EXP_INF_BITS = 0x7FF0000000000000


@_jit()
def _exp_inplace(a):
    """``a[k] = exp(a[k])`` for every k, in loops LLVM vectorizes (libm's ``exp``,
    one call per element, does not). O(len(a)).

    exp(x) = 2**k * exp(r), k = round(x / ln 2), |r| <= ln(2) / 2, exp(r) by its
    Taylor polynomial of degree 13 (Horner), 2**k built from its exponent bits:
    within 1 ulp of libm's exp (measured on 1.2e6 points over [-708, 709]).
    x < -708 gives 0.0 (libm's result there is at most 3.3e-308), x > 709 inf
    (libm: from 709.78; the kernels' arguments stay below 601), NaN NaN.
    Plain IEEE operations (no fast-math flags): the vector and the scalar
    remainder iterations round alike, so equal inputs give equal outputs
    wherever they sit (symmetric columns stay equal).
    """
    n = a.shape[0]
    bits = np.empty(n, dtype=np.int64)
    for j in range(n):
        x = a[j]
        v = -708.0 if x < -708.0 else x  # NaN stays NaN
        v = 709.0 if v > 709.0 else v
        k = np.floor(v * _LOG2E + 0.5)
        r = (v - k * _LN2_HI) - k * _LN2_LO
        k = k if k == k else 0.0  # NaN: p is NaN already; keep the conversion defined
        p = 1.0 / 6227020800.0
        p = p * r + 1.0 / 479001600.0
        p = p * r + 1.0 / 39916800.0
        p = p * r + 1.0 / 3628800.0
        p = p * r + 1.0 / 362880.0
        p = p * r + 1.0 / 40320.0
        p = p * r + 1.0 / 5040.0
        p = p * r + 1.0 / 720.0
        p = p * r + 1.0 / 120.0
        p = p * r + 1.0 / 24.0
        p = p * r + 1.0 / 6.0
        p = p * r + 0.5
        p = p * r + 1.0
        p = p * r + 1.0
        a[j] = p
        # the scale 2**k as bits; 0.0 below the range, inf above (NaN: p is NaN)
        kb = (np.int64(k) + 1023) << 52
        kb = 0 if x < -708.0 else kb
        bits[j] = _EXP_INF_BITS if x > 709.0 else kb
    scale = bits.view(np.float64)
    for j in range(n):
        a[j] = a[j] * scale[j]
