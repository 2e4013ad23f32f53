"""What a call will cost, and the warning before one far beyond the rest.

Every method costs about one pass over ``B`` (O(n m), O(n log n + n m) with a
sort) except ACES-O's exact fit, which evaluates the surrogate ``steps + 1``
times, each over every (passer, failer) pair of every test of the ``k`` optimized
candidates: ``sum_j |P_j||F_j| <= m * floor(k/2) * ceil(k/2)`` sigmoid pair
terms, quadratic in ``k``. With ``top_k=None`` on a pool of thousands that is
10^9 terms per step -- minutes to hours, where the default ``top_k=24`` takes
milliseconds. Such a call warns (:class:`CostWarning`, once, before it starts)
with the estimate and the cheaper alternatives.

The estimate comes from the method's spec (``MethodSpec.cost``), so it applies on
every backend and in batches. A shape bound decides first (a few integer
operations: small calls pay nothing more); only above the threshold are the
column counts of ``B`` read, for the tighter ``sum_j |P_j||F_j|``.

Rates and threshold
-------------------
A call warns when its estimate exceeds :data:`WARN_SECONDS` seconds at the
backend's nominal rate (:data:`RATES`: pair terms per second of the exact
surrogate, measured on a 2-core AVX-512 machine; a rough guide, not a promise).
For example ``aces_o(B, top_k=None, steps=400)`` on a random 4000 x 300 matrix
is about 4.8e11 pair terms: about 2 minutes on ``cpp``, 20 on ``numba``, four
hours on ``numpy``. The thresholds: 1.8e11 pair terms on ``cpp``, 2.4e10 on
``numba``, 1.8e9 on ``numpy`` and ``torch``. On a GPU the torch rate is unknown
and the threshold is ``cpp``'s.

Silence it with ``warnings.filterwarnings("ignore", category=aces_fast.CostWarning)``.
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np

from ._validation import tensor_device


class CostWarning(UserWarning):
    """A call's estimated work is far beyond the usual (it may run for minutes or hours)."""


class Cost(NamedTuple):
    """A call's estimated work: ``work`` units, how they arise, what is cheaper."""

    work: float
    #: what is counted, e.g. "sigmoid pair terms"
    unit: str
    #: how the count arises, e.g. "1.2e+09 per surrogate evaluation ... x 401 evaluations"
    detail: str
    #: the cheaper alternatives, a sentence
    advice: str


#: pair terms per second of the exact ACES-O surrogate, measured on 2 cores
RATES: dict[str, float] = {"cpp": 3e9, "numba": 4e8, "torch": 3e7, "numpy": 3e7}
#: the rate assumed for a backend missing from RATES (and for GPU devices)
DEFAULT_RATE = 3e9
#: warn when the estimate exceeds this many seconds at the backend's rate
WARN_SECONDS = 60.0

#: ``(B, values, exact) -> Cost or None``: a spec's cost function on a prepared
#: matrix (NumPy array or tensor) and complete parameters; ``exact`` False asks for
#: the shape bound (a few integer operations), True for the tighter estimate
CostFn = Callable[[Any, dict[str, Any], bool], Cost | None]


def _pairs_bound(k: int, m: int) -> int:
    """The most (passer, failer) pairs over ``m`` tests of ``k`` rows."""
    return m * (k // 2) * (k - k // 2)


def _column_sums(B: Any) -> Any:
    """Passers per test (int64) of a prepared NumPy array or tensor."""
    if tensor_device(B) is not None:
        return B.sum(dim=-2, dtype=sys.modules["torch"].int64).cpu().numpy()
    return np.asarray(B).sum(axis=-2, dtype=np.int64)


def aces_o_cost(B: Any, values: dict[str, Any], exact: bool) -> Cost | None:
    """ACES-O's exact fit: ``(steps + 1) * sum_j |P_j||F_j|`` sigmoid pair terms on the
    ``k = min(top_k, n)`` optimized rows (``exact=False``: the bound
    ``m floor(k/2) ceil(k/2)`` per evaluation; ``exact=True`` with every row kept:
    the column counts of ``B``). ``None`` for the binned fit (O(k m + m bins log bins)
    per step: never far beyond)."""
    if values["bins"] is not None:
        return None
    n, m = B.shape[-2], B.shape[-1]
    top_k = values["top_k"]
    k = n if top_k is None else min(n, top_k)
    evaluations = values["steps"] + 1
    per = _pairs_bound(k, m)
    if exact and k == n and per:
        colsum = _column_sums(B)
        per = int((colsum * (n - colsum)).sum())
    detail = (
        f"{per:.2g} per surrogate evaluation on {k} x {m} candidates x tests, "
        f"{evaluations} evaluations (steps + 1)"
    )
    advice = (
        "The exact surrogate is quadratic in the optimized candidates: pass bins=2048 "
        "(cpp backend; approximate, O(n m + m bins log bins) per step), a top_k of a "
        "few dozen candidates, or fewer steps."
    )
    return Cost(float(per) * evaluations, "sigmoid pair terms", detail, advice)


def _rate(backend: Any, B: Any) -> float | None:
    """The backend's nominal rate, ``None`` on a GPU (not measured)."""
    device = tensor_device(B)
    if device is not None and device != "cpu":
        return None
    return RATES.get(backend.name, DEFAULT_RATE)


def _duration(seconds: float) -> str:
    for unit, size in (("days", 86400.0), ("hours", 3600.0), ("minutes", 60.0)):
        if seconds >= 2 * size:
            return f"{seconds / size:.0f} {unit}"
    return f"{seconds:.0f} seconds"


def warn_if_costly(
    cost: CostFn | None,
    name: str,
    backend: Any,
    Bs: Sequence[Any],
    values: dict[str, Any],
    stacklevel: int = 3,
) -> None:
    """Issue one :class:`CostWarning` when ranking the prepared matrices ``Bs`` with
    method ``name`` (cost function ``cost``) is estimated to take longer than
    :data:`WARN_SECONDS` on ``backend``. O(1) per matrix below the threshold."""
    if cost is None or not Bs:
        return
    rate = _rate(backend, Bs[0])
    limit = WARN_SECONDS * (DEFAULT_RATE if rate is None else rate)
    total = 0.0
    for B in Bs:
        c = cost(B, values, False)
        if c is not None:
            total += c.work
    if total <= limit:
        return
    costs = [c for c in (cost(B, values, True) for B in Bs) if c is not None]
    total = sum(c.work for c in costs)
    if total <= limit:
        return
    first = costs[0]
    when = (
        ""
        if rate is None
        else f"; roughly {_duration(total / rate)} on the {backend.name!r} backend"
    )
    what = (
        first.detail if len(Bs) == 1 else f"summed over {len(Bs)} tasks; the first: {first.detail}"
    )
    warnings.warn(
        f"{name}: this call evaluates about {total:.2g} {first.unit} ({what}){when}. "
        f"{first.advice}",
        CostWarning,
        stacklevel=stacklevel,
    )
