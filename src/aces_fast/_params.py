"""Validators of the ranking methods' hyperparameters, shared by the public
functions of :mod:`aces_fast.methods` and by :func:`aces_fast.rerank_batch`.

Each validator takes a user value and returns it converted (``float``/``int``)
or raises ``TypeError``/``ValueError`` naming the parameter. :data:`METHOD_PARAMS`
lists, per ``rerank`` method name, its parameters with their defaults (those of
the public functions; a test keeps the two in sync) and validators.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, Optional, Tuple

from ._validation import check_int, check_real

DEFAULT_TIE_TOL = 1e-9


def tie_tol(v: Any) -> float:
    return check_real(v, "tie_tol", nonneg=True)


def gamma(v: Any) -> float:
    return check_real(v, "gamma", positive=True)


def lr(v: Any) -> float:
    return check_real(v, "lr", nonneg=True)


def steps(v: Any) -> int:
    return check_int(v, "steps", minimum=0)


def top_k(v: Any) -> Optional[int]:
    return None if v is None else check_int(v, "top_k", minimum=1)


def init(v: Any) -> str:
    if v not in ("uniform", "aces-c"):
        raise ValueError(f"init must be 'uniform' or 'aces-c'; got {v!r}")
    return v


def exponent(v: Any) -> float:
    return check_real(v, "exponent", nonneg=True)


def b4_alpha(v: Any) -> float:
    return check_real(v, "alpha", positive=True)


def b4_beta0(v: Any) -> float:
    return check_real(v, "beta0", positive=True)


Spec = Dict[str, Tuple[Any, Callable[[Any], Any]]]

_ACES_O: Spec = {"gamma": (10.0, gamma), "lr": (0.01, lr), "steps": (90, steps),
                 "top_k": (24, top_k), "init": ("uniform", init),
                 "tie_tol": (DEFAULT_TIE_TOL, tie_tol)}

#: method name -> {parameter: (default, validator)}
METHOD_PARAMS: Dict[str, Spec] = {
    "majority": {},
    "aces-c": {"tie_tol": (DEFAULT_TIE_TOL, tie_tol)},
    "aces-c-filter": {"tie_tol": (DEFAULT_TIE_TOL, tie_tol)},
    "aces-o": _ACES_O,
    "aces-o-warm": {**_ACES_O, "init": ("aces-c", init)},
    "codet": {"exponent": (0.5, exponent)},
    "codet-linear": {"exponent": (1.0, exponent)},
    "b4": {"alpha": (1e3, b4_alpha), "beta0": (1e4, b4_beta0)},
}


def method_params(method: str, params: Dict[str, Any]) -> Dict[str, Any]:
    """Validate ``params`` for ``method`` and fill in the defaults."""
    spec = METHOD_PARAMS[method]
    unknown = sorted(set(params) - set(spec))
    if unknown:
        allowed = ", ".join(spec) or "none"
        raise TypeError(f"method {method!r} got unexpected parameter(s) {', '.join(unknown)}; "
                        f"its parameters: {allowed}")
    return {name: check(params.get(name, default)) for name, (default, check) in spec.items()}
