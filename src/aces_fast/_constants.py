"""The contract's numeric constants, defined once for every backend.

The Python backends import them from here. The C++ core states them as
``constexpr`` values (``csrc/kernels/adam.hpp``, ``csrc/simd/simd.cpp``);
``tests/test_constants.py`` reads those out of the sources and checks them
against this module, so a copy cannot drift. (Generating a header at build
time would put a Python step in every compiler's build for a handful of
numbers that change once in a project's life.)
"""

from __future__ import annotations

__all__ = [
    "ADAM_BETA1",
    "ADAM_BETA2",
    "ADAM_EPS",
    "DEFAULT_TIE_TOL",
    "NARROW_MAX_TOTAL",
    "SNAP_RTOL",
    "SNAP_RTOL_FLOAT32",
    "WARM_EPS",
]

#: Score ties within ``tie_tol * sum(w)`` are one tie (docs/contract.rst §2.3, §7.1).
DEFAULT_TIE_TOL = 1e-9

#: ACES-O's Adam: PyTorch's defaults (docs/contract.rst §3).
ADAM_BETA1 = 0.9
ADAM_BETA2 = 0.999
ADAM_EPS = 1e-8

#: Relative tolerance of ACES-O's symmetry snapping (docs/contract.rst §7.5) in
#: float64: far above the ~1e-15 relative rounding noise of any backend's sums,
#: far below gradient differences that change the optimum.
SNAP_RTOL = 1e-10
#: ... in torch's float32 mode, whose sums carry ~1e-7 relative noise.
SNAP_RTOL_FLOAT32 = 1e-5

#: ACES-O's warm start: logits ``log(w_C + WARM_EPS)`` from the ACES-C weights.
WARM_EPS = 1e-3

#: Uniform LOO-AUC counts in 16-bit lanes while the total row multiplicity is at
#: most this: then 2 wins + ties <= 361^2 / 2 < 2^16, exact modulo 2^16.
NARROW_MAX_TOTAL = 361
