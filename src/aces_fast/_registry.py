"""The ranking methods: one :class:`MethodSpec` per ``rerank`` name.

Everything that lists methods or their parameters derives from the specs
registered here: :func:`aces_fast.rerank` and :func:`aces_fast.rerank_batch`,
the defaults in the public functions' signatures, :data:`aces_fast.METHODS`,
the tables and hyperparameters of :func:`aces_fast.evaluation.evaluate`, the
CLI's ``--<family>-<parameter>`` flags, and every backend's method map (the
compiled ``cpp`` path by the spec's ``core_method``, the Python backends by
``semantics``, the batch paths by ``over_tasks``). This module is the only one that
spells a method's name.

A parameter is declared once, as a :class:`Param` (name, default, validator,
one-line help), the way scikit-learn declares ``_parameter_constraints``;
values a method name fixes (ACES-C's ``variant``) are part of its spec.

Adding a method: write its semantics in :mod:`aces_fast._semantics` (and the
kernels it needs in each backend, if any) and :func:`register` a spec below.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import (
    TYPE_CHECKING,
    Any,
    NamedTuple,
)

if TYPE_CHECKING:  # the backends import this module
    import numpy as np

    from ._ops import ArrayOps

from . import _semantics
from ._cost import CostFn, aces_o_cost
from ._validation import check_int, check_real
from .result import RerankResult

# ---------------------------------------------------------------------------
# validators: a value and the parameter's name in, the converted value out
# (TypeError / ValueError naming the parameter otherwise)


def _cli_error(message: str) -> Exception:
    """The error a CLI ``type`` raises (argparse imported only by the CLI's use)."""
    import argparse

    return argparse.ArgumentTypeError(message)


class Real:
    """A finite real number, optionally > 0 (``positive``) or >= 0 (``nonneg``),
    and <= ``maximum``."""

    def __init__(self, positive: bool = False, nonneg: bool = False, maximum: float | None = None):
        self.positive, self.nonneg, self.maximum = positive, nonneg, maximum

    def __call__(self, value: Any, name: str) -> float:
        return check_real(value, name, positive=self.positive, nonneg=self.nonneg, hi=self.maximum)

    @staticmethod
    def parse(text: str) -> float:
        """CLI text to a number (the validator runs later, with the other parameters)."""
        try:
            v = float(text)
        except ValueError:
            raise _cli_error(f"expected a number, got {text!r}") from None
        if not math.isfinite(v):
            raise _cli_error(f"expected a finite number, got {text!r}")
        return v


class Int:
    """An integer (``bool`` rejected) in ``[minimum, maximum]``."""

    def __init__(self, minimum: int, maximum: int | None = None):
        self.minimum, self.maximum = minimum, maximum

    def __call__(self, value: Any, name: str) -> int:
        return check_int(value, name, minimum=self.minimum, maximum=self.maximum)

    def parse(self, text: str) -> int:
        try:
            v = int(text)
        except ValueError:
            v = self.minimum - 1
        if v < self.minimum or (self.maximum is not None and v > self.maximum):
            what = "a positive integer" if self.minimum == 1 else f"an integer >= {self.minimum}"
            if self.maximum is not None:
                what = f"an integer in [{self.minimum}, {self.maximum}]"
            raise _cli_error(f"expected {what}, got {text!r}")
        return v


class OrNone:
    """``None`` or a value of ``inner`` (on the CLI: ``none`` or ``all`` mean ``None``)."""

    def __init__(self, inner: Any):
        self.inner = inner

    def __call__(self, value: Any, name: str) -> Any:
        return None if value is None else self.inner(value, name)

    def parse(self, text: str) -> Any:
        return None if text.lower() in ("none", "all") else self.inner.parse(text)


class Choice:
    """One of a few strings."""

    def __init__(self, *options: str):
        self.options = options

    def __call__(self, value: Any, name: str) -> str:
        if not isinstance(value, str) or value not in self.options:
            allowed = " or ".join(repr(o) for o in self.options)
            raise ValueError(f"{name} must be {allowed}; got {value!r}")
        return value

    def parse(self, text: str) -> str:
        return text


@dataclass(frozen=True)
class Param:
    """A method parameter, declared once.

    ``tunable``: a hyperparameter that :func:`aces_fast.evaluation.evaluate`'s
    ``params`` and the CLI's ``--<family>-<name>`` flags may set. ``compiled``:
    the C++ method path understands it (otherwise the ``cpp`` backend runs the
    Python semantics with its kernels whenever the value is not ``None``).
    """

    name: str
    default: Any
    check: Callable[[Any, str], Any]
    help: str
    tunable: bool = False
    compiled: bool = True
    metavar: str = "X"

    def validate(self, value: Any) -> Any:
        return self.check(value, self.name)

    def with_default(self, default: Any) -> Param:
        return Param(
            self.name, default, self.check, self.help, self.tunable, self.compiled, self.metavar
        )


from ._constants import DEFAULT_TIE_TOL  # noqa: E402

# Upper bounds. Each keeps a documented meaning and every backend's arithmetic
# finite and in agreement; beyond them a call would be meaningless (or run for
# days), so the validators refuse it with the range in the message.
#: tie_tol is relative to sum(w), and scores lie in [0, sum(w)]: 1 ties everything
MAX_TIE_TOL = 1.0
#: gamma: beyond it the sigmoid is a step at the rounding level of float64 scores
#: (surrogate values of different summation orders would differ by > 1e-12)
MAX_GAMMA = 1e4
#: lr: Adam moves a logit by about lr per step; a larger step saturates the softmax
#: in one step (exp(-745) underflows to 0)
MAX_LR = 1e3
#: steps: 10^4 times the paper's 90; the objective array holds steps + 1 values
MAX_STEPS = 10**6
#: top_k: int64's largest value (any top_k >= n keeps every candidate)
MAX_TOP_K = 2**63 - 1
#: bins: the binned surrogate's grid (and FFT buffers) of the compiled kernels
MAX_BINS = 65536
#: exponent: (set size) ** exponent stays finite for any set that fits in memory
MAX_EXPONENT = 16.0
#: B4's Beta prior parameters: log-Beta terms of size ~a log a cancel, leaving
#: rounding noise of ulp(lgamma(a)) in the scores (2e-7 at 1e8; 1 at 1e15)
MAX_PRIOR = 1e8

TIE_TOL = Param(
    "tie_tol",
    DEFAULT_TIE_TOL,
    Real(nonneg=True, maximum=MAX_TIE_TOL),
    "float scores within tie_tol * sum(w) tie (rounding never breaks a tie); in [0, 1]",
)
GAMMA = Param(
    "gamma",
    10.0,
    Real(positive=True, maximum=MAX_GAMMA),
    "sigmoid sharpness gamma, in (0, 1e4]",
    tunable=True,
    metavar="G",
)
LR = Param(
    "lr",
    0.01,
    Real(nonneg=True, maximum=MAX_LR),
    "Adam learning rate in [0, 1000] (paper: 0.05 on HumanEval+/MBPP)",
    tunable=True,
    metavar="LR",
)
STEPS = Param(
    "steps", 90, Int(0, MAX_STEPS), "Adam steps, in [0, 10**6]", tunable=True, metavar="N"
)
TOP_K = Param(
    "top_k",
    24,
    OrNone(Int(1, MAX_TOP_K)),
    "optimize on the K candidates with most passes; 'all' keeps every candidate",
    tunable=True,
    metavar="K",
)
INIT = Param(
    "init",
    "uniform",
    Choice("uniform", "aces-c"),
    "start from equal logits, or from the ACES-C weights (a warm start)",
)
BINS = Param(
    "bins",
    None,
    OrNone(Int(2, MAX_BINS)),
    "binned surrogate with this many grid nodes in [2, 65536] (cpp only, approximate)",
    compiled=False,
)
EXPONENT = Param(
    "exponent",
    0.5,
    Real(nonneg=True, maximum=MAX_EXPONENT),
    "consensus-set size exponent, in [0, 16]",
)
ALPHA = Param(
    "alpha",
    1e3,
    Real(positive=True, maximum=MAX_PRIOR),
    "prior a, in (0, 1e8]",
    tunable=True,
    metavar="A",
)
BETA0 = Param(
    "beta0",
    1e4,
    Real(positive=True, maximum=MAX_PRIOR),
    "prior b, in (0, 1e8]",
    tunable=True,
    metavar="B",
)

#: the ``init`` value that starts ACES-O from the ACES-C weights
WARM_INIT = "aces-c"

# ---------------------------------------------------------------------------
# method specs

Values = dict[str, Any]


class CoreArgs(NamedTuple):
    """A method's values for its compiled copy: the arguments of ``_core.rerank``
    and ``_core.rerank_batch_flat`` besides the matrices, ``method``, ``dedup`` and
    ``n_threads``, under the names ``_core`` takes them by, except ``exponent``:
    CodeT's, given to ``_core`` as its ``power`` table (:func:`power_table`).

    A NamedTuple rather than a frozen dataclass: it is built on every compiled
    ``rerank`` call (a few microseconds in all), and builds in about half the time.
    """

    tie_tol: float
    gamma: float
    lr: float
    steps: int
    top_k: int | None
    #: ACES-O starts from the ACES-C weights
    warm: bool
    #: CodeT's consensus-set size exponent; ``None`` for the other methods
    exponent: float | None = None


@functools.lru_cache(maxsize=64)
def power_table(exponent: float, rows: int) -> np.ndarray:
    """``k ** exponent`` for ``k = 0 .. rows``, float64 (rows + 1,), read-only: the
    sizes' powers of CodeT's compiled copy, rounded by NumPy's ``**`` as the
    semantics' ``int_power`` rounds them (NumPy's pow need not round as the C
    library's does: it has SIMD loops of its own for some CPUs, so the table is
    made here, not in C++). O(rows), cached."""
    import numpy as np

    table = np.arange(rows + 1, dtype=np.float64) ** exponent
    table.flags.writeable = False
    return table


@functools.lru_cache(maxsize=256)
def _one_pass_core_args(tie_tol: float) -> CoreArgs:
    """The compiled arguments of majority vote and ACES-C, where only ``tie_tol``
    varies. Cached: built on every call of a method that takes microseconds, and
    a NamedTuple from keywords costs half a microsecond."""
    return CoreArgs(
        tie_tol=tie_tol, gamma=GAMMA.default, lr=LR.default, steps=0, top_k=None, warm=False
    )


@dataclass(frozen=True, eq=False)
class MethodSpec:
    """Everything the library knows about one ``rerank`` method.

    Attributes
    ----------
    name : str
        The public ``rerank`` name.
    summary : str
        One line for listings.
    semantics : callable ``(nx, B, *args) -> _semantics.Outputs``
        The function of :mod:`._semantics` computing the method on a Python
        backend ``nx``; :meth:`run` calls it.
    args : callable ``values -> tuple``
        Its arguments after ``nx`` and ``B``, from the validated parameters
        (a backend that compiles the semantics, numba, calls them with the same).
    params : tuple of Param
        The user's parameters, in signature order.
    fixed : mapping
        Values the name fixes (``args`` has them built in; reported in ``info``,
        not settable).
    weights : bool
        Whether the method yields test weights (``RerankResult.weights``).
    results : tuple of str
        Which of ``"loo_auc"``, ``"fallback"``, ``"objective"``, ``"rows"`` the
        result carries (``rows`` goes to ``info["rows"]``).
    info : tuple of str
        Parameters / fixed values copied into ``RerankResult.info``;
        ``info_if_set`` those copied only when not ``None``.
    family : str
        The group sharing hyperparameter overrides (``evaluate``'s ``params``,
        the CLI flags); defaults to ``name``.
    key : str, optional
        The parameter that tells the members of a family apart: a result is
        named after the member whose value of it matches (``aces-o`` with
        ``init="aces-c"`` is ``aces-o-warm``).
    core_method : str, optional
        Key of ``_core.METHOD_CODES`` for the compiled path (``None``: Python only).
    core_args : callable ``values -> CoreArgs or None``, optional
        The compiled path's arguments (:class:`CoreArgs`), or ``None`` when
        these values have no compiled path.
    over_tasks : bool
        The semantics broadcast over a leading task axis (torch's padded
        batches) and do their work in kernels (numba's threaded batches).
    cost : callable ``(B, values, exact) -> _cost.Cost or None``, optional
        The work of a call, for methods whose cost can be far beyond one pass over
        ``B`` (ACES-O's exact fit); :func:`aces_fast._cost.warn_if_costly` warns
        before such a call. ``None``: O(n m log n) at most, never warned about.
    """

    name: str
    summary: str
    semantics: Callable[..., _semantics.Outputs]
    args: Callable[[Values], tuple[Any, ...]]
    params: tuple[Param, ...] = ()
    fixed: Mapping[str, Any] = field(default_factory=dict)
    weights: bool = True
    results: tuple[str, ...] = ()
    info: tuple[str, ...] = ()
    info_if_set: tuple[str, ...] = ()
    family: str = ""
    key: str | None = None
    core_method: str | None = None
    core_args: Callable[[Values], CoreArgs | None] | None = None
    over_tasks: bool = False
    cost: CostFn | None = None

    def __post_init__(self) -> None:
        if not self.family:
            object.__setattr__(self, "family", self.name)
        names = tuple(p.name for p in self.params)
        object.__setattr__(self, "_names", frozenset(names))
        object.__setattr__(
            self, "_checks", tuple((p.name, p.check, p.default) for p in self.params)
        )
        object.__setattr__(self, "_defaults", {p.name: p.default for p in self.params})
        # what pack() needs, decided once
        object.__setattr__(
            self, "_named_by", None if self.key is None or self.key in self.fixed else self.key
        )
        object.__setattr__(
            self, "_fixed_info", {k: self.fixed[k] for k in self.info if k in self.fixed}
        )
        object.__setattr__(self, "_param_info", tuple(k for k in self.info if k not in self.fixed))
        object.__setattr__(
            self,
            "_has",
            tuple(r in self.results for r in ("loo_auc", "fallback", "objective", "rows")),
        )

    def run(self, nx: ArrayOps, B: Any, values: Values) -> _semantics.Outputs:
        """The method on backend ``nx``: ``semantics(nx, B, *args(values))``."""
        return self.semantics(nx, B, *self.args(values))

    @property
    def code(self) -> int | None:
        """The compiled method code (``_core.METHOD_CODES[core_method]``); ``None``
        without a compiled copy or without the extension."""
        from ._compiled import core

        if core is None or self.core_method is None:
            return None
        return core.METHOD_CODES.get(self.core_method)

    def default(self, name: str) -> Any:
        """The default of parameter ``name`` (for the public functions' signatures)."""
        return self._defaults[name]  # type: ignore[attr-defined]

    def validate(self, params: Mapping[str, Any]) -> Values:
        """``params`` checked and completed with the defaults.

        Raises TypeError for an unknown parameter, else the validator's error.
        """
        values = {}
        given = 0
        for name, check, default in self._checks:  # type: ignore[attr-defined]
            if name in params:
                value = params[name]
                # The public functions pass their signature's default, this very
                # object, already valid (tested): checking it again was an eighth
                # of a small aces_c call.
                values[name] = value if value is default else check(value, name)
                given += 1
            else:
                values[name] = default
        if given != len(params):
            unknown = sorted(set(params) - self._names)  # type: ignore[attr-defined]
            allowed = ", ".join(p.name for p in self.params) or "none"
            raise TypeError(
                f"method {self.name!r} got unexpected parameter(s) "
                f"{', '.join(unknown)}; its parameters: {allowed}"
            )
        return values

    def result_name(self, values: Values) -> str:
        """The name a result with these values reports (see ``key``)."""
        key = self._named_by  # type: ignore[attr-defined]
        if key is None:
            return self.name
        return _FAMILY_NAMES.get((self.family, values[key]), self.family)

    def pack(
        self,
        out: _semantics.Outputs,
        values: Values,
        backend: str,
        convert: Callable[[Any], Any] | None = None,
    ) -> RerankResult:
        """A :class:`RerankResult` from a method's :class:`~aces_fast._semantics.Outputs`
        (its semantics', or a compiled path's); ``convert`` maps each array (e.g.
        tensors to NumPy).

        Only the fields the method declares (``weights``, ``results``) are read;
        the others may be left at their defaults.
        """
        has_loo, has_fallback, has_objective, has_rows = self._has  # type: ignore[attr-defined]
        scores, order = out.scores, out.order
        weights = out.weights if self.weights else None
        loo = out.loo_auc if has_loo else None
        objective = out.objective if has_objective else None
        rows = out.rows if has_rows else None
        info = dict(self._fixed_info)  # type: ignore[attr-defined]
        for k in self._param_info:  # type: ignore[attr-defined]
            info[k] = values[k]
        if convert is not None:
            scores, order = convert(scores), convert(order)
            weights = None if weights is None else convert(weights)
            loo = None if loo is None else convert(loo)
            objective = None if objective is None else convert(objective)
            rows = None if rows is None else convert(rows)
        if has_rows:
            info["rows"] = rows
        for k in self.info_if_set:
            if values.get(k) is not None:
                info[k] = values[k]
        return RerankResult(
            scores,
            weights,
            order,
            self.result_name(values),
            backend,
            loo,
            host_flag(out.fallback) if has_fallback else False,
            objective,
            info,
        )


def host_flag(flag: Any) -> bool:
    """A method's flag (ACES-C's ``fallback``) as the ``bool`` a :class:`RerankResult`
    holds: a Python or NumPy bool, or a one-element tensor.

    For a tensor on a device this reads the device, once, after the method has
    run: the one copy-out a torch call makes (tests/test_torch_sync.py allows
    no other host read). A torch batch keeps its flags as a bool tensor column
    and reads one only when its item is built.
    """
    return bool(flag)


_SPECS: dict[str, MethodSpec] = {}
#: (family, value of the family's key) -> the member's name
_FAMILY_NAMES: dict[tuple[str, Any], str] = {}


def register(spec: MethodSpec) -> MethodSpec:
    """Add ``spec`` (its name must be new); the table order is registration order."""
    if spec.name in _SPECS:
        raise ValueError(f"method {spec.name!r} is already registered")
    _SPECS[spec.name] = spec
    if spec.key is not None:
        value = spec.fixed[spec.key] if spec.key in spec.fixed else spec.default(spec.key)
        _FAMILY_NAMES.setdefault((spec.family, value), spec.name)
    return spec


def unregister(name: str) -> None:
    """Remove a registered method (for tests that register a temporary one)."""
    spec = _SPECS.pop(name)
    for k, v in list(_FAMILY_NAMES.items()):
        if v == spec.name:
            del _FAMILY_NAMES[k]


def get(method: Any) -> MethodSpec:
    """The spec of ``rerank`` name ``method`` (a spec is returned as is); ValueError
    listing the names otherwise. Names are case-insensitive, like backend names."""
    if type(method) is MethodSpec:
        return method
    spec = _SPECS.get(method) if isinstance(method, str) else None
    if spec is None and isinstance(method, str):
        spec = _SPECS.get(method.strip().lower())
    if spec is None:
        raise ValueError(f"unknown method {method!r}; choose one of {', '.join(_SPECS)}")
    return spec


def names() -> tuple[str, ...]:
    """Every ``rerank`` name, in table order."""
    return tuple(_SPECS)


def specs() -> tuple[MethodSpec, ...]:
    return tuple(_SPECS.values())


def method_params(
    method: str, params: Mapping[str, Any] | None = None, *, tunable: bool = False
) -> Values:
    """The parameters ``method`` runs with: ``params`` validated, defaults filled in.

    ``tunable=True`` (evaluate, the CLI): only the tunable hyperparameters, and
    an unknown name is a ValueError naming the family; otherwise every
    parameter, and an unknown name is a TypeError.
    """
    spec = get(method)
    params = dict(params or {})
    if not tunable:
        return spec.validate(params)
    allowed = [p for p in spec.params if p.tunable]
    unknown = set(params) - {p.name for p in allowed}
    if unknown:
        raise ValueError(
            f"unknown hyperparameter(s) for {spec.family}: {', '.join(sorted(unknown))}"
        )
    return {p.name: p.validate(params[p.name]) if p.name in params else p.default for p in allowed}


def tunable_families() -> dict[str, tuple[Param, ...]]:
    """Family -> its tunable parameters (the first member's declarations), in table order."""
    out: dict[str, tuple[Param, ...]] = {}
    for spec in _SPECS.values():
        tunables = tuple(p for p in spec.params if p.tunable)
        if tunables and spec.family not in out:
            out[spec.family] = tunables
    return out


class _ParamTable(Mapping[str, dict[str, tuple[Any, Callable[[Any], Any]]]]):
    """``METHOD_PARAMS``: method -> {parameter: (default, validator of one value)},
    a live view of the registry."""

    def __getitem__(self, method: str) -> dict[str, tuple[Any, Callable[[Any], Any]]]:
        spec = _SPECS[method]
        return {p.name: (p.default, p.validate) for p in spec.params}

    def __iter__(self) -> Iterator[str]:
        return iter(tuple(_SPECS))

    def __len__(self) -> int:
        return len(_SPECS)


METHOD_PARAMS = _ParamTable()

# ---------------------------------------------------------------------------
# the methods (table order)


MAJORITY = register(
    MethodSpec(
        name="majority",
        summary="majority vote: every non-constant test weighs the same",
        semantics=_semantics.majority,
        args=lambda v: (DEFAULT_TIE_TOL,),
        core_method="majority",
        core_args=lambda v: _one_pass_core_args(DEFAULT_TIE_TOL),
        over_tasks=True,
    )
)


@functools.lru_cache(maxsize=256)
def _codet_core_args(exponent: float) -> CoreArgs:
    """CodeT's compiled arguments: only the exponent varies (cached, as
    :func:`_one_pass_core_args`)."""
    return CoreArgs(
        tie_tol=0.0,
        gamma=GAMMA.default,
        lr=LR.default,
        steps=0,
        top_k=None,
        warm=False,
        exponent=exponent,
    )


CODET = register(
    MethodSpec(
        name="codet",
        summary="CodeT: consensus sets score passes x size ** exponent (0.5)",
        semantics=_semantics.codet,
        args=lambda v: (v["exponent"],),
        params=(EXPONENT,),
        weights=False,
        info=("exponent",),
        key="exponent",
        core_method="codet",
        core_args=lambda v: _codet_core_args(v["exponent"]),
    )
)
CODET_LINEAR = register(
    MethodSpec(
        name="codet-linear",
        summary="CodeT with exponent 1 (the paper's linear form)",
        semantics=CODET.semantics,
        args=CODET.args,
        params=(EXPONENT.with_default(1.0),),
        weights=False,
        info=("exponent",),
        family="codet",
        key="exponent",
        core_method="codet",
        core_args=CODET.core_args,
    )
)
B4 = register(
    MethodSpec(
        name="b4",
        summary="B4: Bayesian posterior of each consensus set",
        semantics=_semantics.b4,
        args=lambda v: (v["alpha"], v["beta0"]),
        params=(ALPHA, BETA0),
        weights=False,
        info=("alpha", "beta0"),
    )
)
ACES_C = register(
    MethodSpec(
        name="aces-c",
        summary="ACES-C: closed-form weights max(0, LOO-AUC - 1/2) p (1 - p)",
        semantics=_semantics.aces_c,
        args=lambda v: (True, v["tie_tol"]),
        params=(TIE_TOL,),
        fixed={"variant": "weighted"},
        results=("loo_auc", "fallback"),
        info=("variant",),
        key="variant",
        core_method="aces-c",
        core_args=lambda v: _one_pass_core_args(v["tie_tol"]),
        over_tasks=True,
    )
)
ACES_C_FILTER = register(
    MethodSpec(
        name="aces-c-filter",
        summary="ACES-C filter: weight 1 on tests with LOO-AUC > 1/2",
        semantics=_semantics.aces_c,
        args=lambda v: (False, v["tie_tol"]),
        params=(TIE_TOL,),
        fixed={"variant": "filter"},
        results=("loo_auc", "fallback"),
        info=("variant",),
        family="aces-c",
        key="variant",
        core_method="aces-c-filter",
        core_args=ACES_C.core_args,
        over_tasks=True,
    )
)


def _aces_o_core_args(v: Values) -> CoreArgs | None:
    if v["bins"] is not None:
        return None  # the binned fit runs through the Python semantics
    return CoreArgs(
        tie_tol=v["tie_tol"],
        gamma=v["gamma"],
        lr=v["lr"],
        steps=v["steps"],
        top_k=v["top_k"],
        warm=v["init"] == WARM_INIT,
    )


ACES_O = register(
    MethodSpec(
        name="aces-o",
        summary="ACES-O: simplex weights maximizing the surrogate LOO-AUC objective (Adam)",
        semantics=_semantics.aces_o,
        args=lambda v: (
            v["gamma"],
            v["lr"],
            v["steps"],
            v["top_k"],
            v["init"] == WARM_INIT,
            v["tie_tol"],
            v["bins"],
        ),
        params=(GAMMA, LR, STEPS, TOP_K, INIT, TIE_TOL, BINS),
        results=("objective", "rows"),
        info=("gamma", "lr", "steps", "top_k", "init"),
        info_if_set=("bins",),
        key="init",
        core_method="aces-o",
        core_args=_aces_o_core_args,
        over_tasks=True,
        cost=aces_o_cost,
    )
)
ACES_O_WARM = register(
    MethodSpec(
        name="aces-o-warm",
        summary="ACES-O started from the ACES-C weights (init='aces-c')",
        semantics=ACES_O.semantics,
        args=ACES_O.args,
        params=tuple(INIT.with_default(WARM_INIT) if p is INIT else p for p in ACES_O.params),
        results=ACES_O.results,
        info=ACES_O.info,
        info_if_set=ACES_O.info_if_set,
        family="aces-o",
        key="init",
        core_method="aces-o",
        core_args=_aces_o_core_args,
        over_tasks=True,
        cost=aces_o_cost,
    )
)

#: the method ``rerank`` / ``rerank_batch`` / the CLI use when none is named
DEFAULT_METHOD = ACES_C.name
