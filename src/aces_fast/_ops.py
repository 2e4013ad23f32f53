"""The backend protocol: what the methods' semantics are written against.

:mod:`aces_fast._semantics` computes every method once against an object
``nx`` (POT's ``nx``): the NumPy, numba and torch backends all are one. This
module states what ``nx`` must provide, so a type checker checks each call of
the semantics and :func:`missing_ops` names what a new backend still lacks.

Arrays (:data:`aces_fast._types.Array`) are NumPy arrays or torch tensors:
the protocol fixes names, arguments and the meaning of each operation, not the
array type. Shapes follow ``_semantics``: an optional leading task axis,
per-candidate arrays (..., n), per-test arrays (..., m); reductions are over
the last axis.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

from ._types import Array


@runtime_checkable
class ArrayOps(Protocol):
    """Kernels and array primitives of a Python backend (see module docstring)."""

    # -- kernels -----------------------------------------------------------------

    def loo_auc_uniform(self, B: Array) -> tuple[Array, Array, Any]:
        """``(L (..., m) float64, passers per test (..., m) int64, plan)``."""
        ...

    def aces_o_fit(
        self,
        B: Array,
        logits0: Array,
        active: Array,
        gamma: float,
        lr: float,
        steps: int,
        counts: Array | None = None,
        bins: int | None = None,
    ) -> tuple[Array, Array]:
        """ACES-O's Adam ascent: ``(weights (..., m), objective (..., steps + 1))``."""
        ...

    def row_scores(self, B: Array, w: Array, plan: Any = None) -> Array:
        """``B @ w``, float64 (..., n), O(n m)."""
        ...

    def column_sums(self, B: Array) -> Array:
        """Passing candidates per test, int64 (..., m)."""
        ...

    def row_sums(self, B: Array) -> Array:
        """Passes per candidate, int64 (..., n)."""
        ...

    def row_count(self, B: Array) -> Any:
        """Candidates: an int, or (..., 1) per task."""
        ...

    def row_mask(self, B: Array) -> Array | None:
        """``None``, or bool (..., n): the real (non-padding) candidates."""
        ...

    def take_rows(self, B: Array, rows: Array) -> Array:
        """``B[rows]``, contiguous."""
        ...

    def row_groups(self, B: Array) -> tuple[Array, Array, Array]:
        """Identical rows: ``(representatives (U, m), group of each row (n,), group
        sizes (U,))``. Representatives may repeat (equal ones have equal sizes):
        the NumPy backends give the U distinct rows, torch every row itself
        (fixed shapes, U = n)."""
        ...

    # -- primitives over the last axis ---------------------------------------------

    def sum(self, x: Array) -> Array:
        """Float sum (the backend's own summation order)."""
        ...

    def none(self, x: Array) -> Any:
        """No non-zero entry (a bool per task)."""
        ...

    def count_nonzero(self, x: Array) -> Any:
        """Non-zero entries (an int per task)."""
        ...

    def maybe(self, mask: Any) -> bool:
        """Whether ``mask`` may hold a True (the only data-dependent branch)."""
        ...

    def count(self, x: Array) -> Array:
        """Exact integer sum, int64."""
        ...

    def where(self, cond: Any, a: Any, b: Any) -> Any:
        """Element-wise choice; a Python or NumPy bool picks ``a`` or ``b`` whole."""
        ...

    def fmax(self, x: Any, y: Any) -> Any:
        """Element-wise maximum ignoring NaN."""
        ...

    def log(self, x: Any) -> Any:
        """Natural logarithm."""
        ...

    def lgamma(self, x: Array) -> Array:
        """``log |Gamma(x)|``, rounded as the C library's ``lgamma``."""
        ...

    def to_float(self, x: Any) -> Array:
        """As float64."""
        ...

    def int_power(self, k: Array, exponent: float, top: int) -> Array:
        """``k ** exponent`` in float64 for integers ``0 <= k <= top``, bit for bit
        what NumPy's ``**`` on float64 gives on this host (torch's vectorized
        ``pow`` and ``sqrt`` are not correctly rounded)."""
        ...

    def zeros(self, like: Array) -> Array:
        """float64 zeros of ``like``'s shape."""
        ...

    def argsort(self, x: Array) -> Array:
        """Stable ascending order, int64."""
        ...

    def sort(self, x: Array) -> Array:
        """Ascending values."""
        ...

    def take(self, x: Array, idx: Array) -> Array:
        """``x[..., idx]`` per task."""
        ...

    def scatter(self, idx: Array, values: Array) -> Array:
        """``out`` with ``out[..., idx] = values`` (``idx`` a permutation)."""
        ...

    def flip(self, x: Array) -> Array:
        """Reversed along the last axis."""
        ...

    def concat(self, a: Array, b: Array) -> Array:
        """Joined along the last axis."""
        ...

    def cummax(self, x: Array) -> Array:
        """Running maximum along the last axis."""
        ...

    def arange(self, start: int, stop: int, like: Any) -> Array:
        """int64 ``start .. stop - 1`` (on ``like``'s device)."""
        ...

    def by_distinct_keys(self, fn: Callable[..., Array], *keys: Array) -> Array:
        """``fn(*keys)``; equal keys get bit-equal results."""
        ...


def missing_ops(backend: object) -> list[str]:
    """Names of :class:`ArrayOps` members ``backend`` lacks or cannot be called as
    the semantics call them. Empty for a conforming backend.

    A member conforms when each of the protocol's parameters is accepted at its
    position (under the same name, or positional-only, as NumPy's ufuncs take
    theirs) and any further parameter of its own has a default.

    Parameters
    ----------
    backend : object
        A backend instance, e.g. ``aces_fast.backends.get_backend("numpy")``.

    Returns
    -------
    list of str
        ``"name"`` for a missing member, ``"name(a, b)"`` (the protocol's
        parameters) for one that takes other arguments.

    Examples
    --------
    >>> from aces_fast.backends import get_backend
    >>> missing_ops(get_backend("numpy"))
    []
    >>> missing_ops(object())[:3]
    ['loo_auc_uniform', 'aces_o_fit', 'row_scores']
    """
    wrong = []
    for name, member in vars(ArrayOps).items():
        if name.startswith("_") or not callable(member):
            continue
        have = getattr(backend, name, None)
        if have is None or not callable(have):
            wrong.append(name)
            continue
        want = [p for p in inspect.signature(member).parameters.values() if p.name != "self"]
        if not _accepts(have, want):
            wrong.append(f"{name}({', '.join(p.name for p in want)})")
    return wrong


def _accepts(fn: Callable[..., Any], want: list[inspect.Parameter]) -> bool:
    try:
        got = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):  # a builtin without a signature: trust it
        return True
    if any(p.kind is p.VAR_POSITIONAL for p in want):  # by_distinct_keys(fn, *keys)
        return [p.kind for p in got] == [p.kind for p in want]
    for i, w in enumerate(want):
        if i >= len(got):
            return False
        g = got[i]
        if g.kind is g.VAR_POSITIONAL:
            return True
        if not (g.name == w.name or g.kind is g.POSITIONAL_ONLY):
            return False
    return all(
        p.default is not p.empty or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
        for p in got[len(want) :]
    )
