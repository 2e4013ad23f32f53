"""The methods' semantics compiled by numba: one jitted call per method call.

A method call on a small matrix costs microseconds in the kernels and several
times that in the Python of :mod:`aces_fast._semantics` (a NumPy operation
costs ~0.3 us whatever its size). So for the one-pass methods (majority vote,
ACES-C and its filter variant: :data:`COMPILED`) the numba backend compiles
those very functions -- the same code objects, not a copy of their logic --
with numba, against :data:`NX`: an ``nx`` whose kernels and primitives are
``overload_method`` implementations on a numba type of its own
(:class:`KernelsType`). Each call then crosses into compiled code once.

How: every function of :mod:`aces_fast._semantics` is re-created over a copy
of that module's globals in which each of them is its jitted twin
(:func:`compiled_namespace`), so the helpers the methods call are jitted too;
an entry function per method (:func:`entry`) calls it with ``NX`` as a
compile-time constant (an ``nx`` passed as an argument would cost a Python
``typeof`` per call, ~1.5 us) and copies the :class:`~aces_fast._semantics.Outputs`
fields into arrays the caller passes (boxing the named tuple would cost ~1.3 us,
each array made in compiled code ~0.25 us).

The primitives below round exactly as the numba backend's Python path does:
sums ascend (:func:`.scores.ascending_sum`), the kernels are the same
dispatchers, and the element-wise formulas are the same IEEE operations in the
same order (no fast-math flags on these functions), so a compiled call returns
the bits of the Python semantics on the numba kernels (tested). Arrays here are
one task's: ``B`` (n, m), per-candidate (n,), per-test (m,).
"""

from __future__ import annotations

import types as pytypes
from collections.abc import Callable
from typing import Any

import numpy as np
from llvmlite import ir
from numba import carray, types
from numba.core import config
from numba.core.dispatcher import Dispatcher
from numba.core.imputils import lower_constant
from numba.extending import (
    NativeValue,
    intrinsic,
    models,
    overload,
    overload_method,
    register_model,
    typeof_impl,
    unbox,
)

from ... import _semantics
from ._jit import _copy, _jit, _renamed
from .dedup import stable_order
from .loo_auc import uniform_loo_auc
from .scores import ascending_sum, column_sums, max_byte, row_scores, row_scores_rep


class Kernels:
    """The ``nx`` of the compiled semantics (a singleton, :data:`NX`): it carries no
    data, numba types it as :class:`KernelsType` and its methods exist only in
    compiled code (below)."""

    __slots__ = ()


class KernelsType(types.Dummy):
    """numba's type of :class:`Kernels`."""

    def __init__(self) -> None:
        super().__init__("aces_fast_numba_nx")


KERNELS_TYPE = KernelsType()
#: the ``nx`` the compiled semantics run against
NX = Kernels()


@typeof_impl.register(Kernels)
def _typeof_kernels(value: Any, context: Any) -> KernelsType:
    return KERNELS_TYPE


register_model(KernelsType)(models.OpaqueModel)


@unbox(KernelsType)
def _unbox_kernels(typ: Any, obj: Any, c: Any) -> NativeValue:
    return NativeValue(c.context.get_dummy_value())


@lower_constant(KernelsType)
def _constant_kernels(context: Any, builder: Any, ty: Any, value: Any) -> Any:
    return context.get_dummy_value()


def _method(name: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register the decorated typing function as ``nx.<name>`` in compiled code."""
    return overload_method(KernelsType, name)


def _absent(x: Any) -> bool:
    """Whether numba types an argument as ``None`` (given or left at its default)."""
    return x is None or isinstance(x, (types.NoneType, types.Omitted))


# -- kernels ------------------------------------------------------------------------------


@_method("loo_auc_uniform")
def _loo_auc_uniform(nx, B):
    def impl(nx, B):
        n, m = B.shape
        out = np.empty(m)
        colsum = np.zeros(m, dtype=np.int64)
        rep = np.empty(n, dtype=np.int64)
        merged = uniform_loo_auc(B, np.ones(n, dtype=np.int64), out, colsum, rep)
        # the plan: representative rows, empty when no row was merged
        return out, colsum, rep if merged else rep[:0]

    return impl


@_method("row_scores")
def _row_scores(nx, B, w, plan=None):
    if _absent(plan):
        return lambda nx, B, w, plan=None: row_scores(B, w)

    def impl(nx, B, w, plan=None):
        return row_scores(B, w) if plan.shape[0] == 0 else row_scores_rep(B, w, plan)

    return impl


@_method("column_sums")
def _column_sums(nx, B):
    return lambda nx, B: column_sums(B)


@_method("row_count")
def _row_count(nx, B):
    return lambda nx, B: B.shape[0]


@_method("row_mask")
def _row_mask(nx, B):
    return lambda nx, B: None


# -- primitives (1-D) ---------------------------------------------------------------------


@_method("sum")
def _sum(nx, x):
    return lambda nx, x: ascending_sum(x)


@_method("none")
def _none(nx, x):
    def impl(nx, x):
        for v in x:
            if v != 0:
                return False
        return True

    return impl


@_method("count_nonzero")
def _count_nonzero(nx, x):
    def impl(nx, x):
        k = 0
        for v in x:
            k += v != 0
        return k

    return impl


@_method("maybe")
def _maybe(nx, flag):
    return lambda nx, flag: flag


@_method("where")
def _where(nx, cond, a, b):
    if isinstance(cond, types.Boolean):  # a scalar condition picks a or b as they are
        return lambda nx, cond, a, b: a if cond else b
    return lambda nx, cond, a, b: np.where(cond, a, b)


@_method("fmax")
def _fmax(nx, x, floor):
    def impl(nx, x, floor):
        out = np.empty(x.shape[0])
        for k in range(x.shape[0]):
            v = x[k]
            out[k] = v if v >= floor or floor != floor else floor  # NumPy's fmax: nan loses
        return out

    return impl


@_method("to_float")
def _to_float(nx, x):
    return lambda nx, x: x.astype(np.float64)


@_method("argsort")
def _argsort(nx, x):
    return lambda nx, x: stable_order(x)


@_method("flip")
def _flip(nx, x):
    return lambda nx, x: x[::-1]


@_method("take")
def _take(nx, x, idx):
    return lambda nx, x, idx: x[idx]


@_method("scatter")
def _scatter(nx, idx, values):
    def impl(nx, idx, values):
        out = np.empty_like(values)
        out[idx] = values
        return out

    return impl


@_method("concat")
def _concat(nx, a, b):
    return lambda nx, a, b: np.concatenate((a, b))


@_method("cummax")
def _cummax(nx, x):
    def impl(nx, x):
        out = np.empty_like(x)
        if x.shape[0]:
            top = x[0]
            for k in range(x.shape[0]):
                top = x[k] if x[k] > top else top
                out[k] = top
        return out

    return impl


@_method("arange")
def _arange(nx, start, stop, like=None):
    return lambda nx, start, stop, like=None: np.arange(start, stop)


# -- the compiled semantics ----------------------------------------------------------------

#: the methods compiled whole (one pass each: their Python costs as much as their
#: kernels); ACES-O's Adam fit dwarfs its Python, CodeT and B4 group rows in NumPy
COMPILED = (_semantics.majority, _semantics.aces_c)

_namespace: dict[str, Any] = {}


def _jit_over(fn: Callable[..., Any], namespace: dict[str, Any], name: str) -> Any:
    """``fn``'s code over ``namespace`` as its globals, named ``name``, jitted (lazily)
    like every kernel. IEEE arithmetic: no fast-math flags, so the rounding is the
    Python path's."""
    return _jit()(_renamed(fn, name, namespace))


def compiled_namespace() -> dict[str, Any]:
    """:mod:`aces_fast._semantics`'s globals with every function of that module
    replaced by its jitted twin (compiled on first call)."""
    if not _namespace:
        namespace = dict(vars(_semantics))
        for name, value in vars(_semantics).items():
            if isinstance(value, pytypes.FunctionType) and value.__module__ == _semantics.__name__:
                namespace[name] = _jit_over(value, namespace, name)
        _namespace.update(namespace)
    return _namespace


def _store(out, scores, weights, order, loo):  # pragma: no cover - typed by the overload
    """Jitted code only: copy a one-pass method's array fields into the caller's arrays
    and return its ``fallback`` as 0 or 1 (0 for majority vote)."""
    raise TypeError("_store runs only inside numba-compiled code")


@overload(_store)
def _store_typed(out, scores, weights, order, loo):
    # Outputs' leading fields: scores, weights, order, then (ACES-C) loo_auc, fallback
    if len(out.types) >= 5:

        def with_loo(out, scores, weights, order, loo):
            _copy(scores, out[0])
            _copy(weights, out[1])
            _copy(order, out[2])
            _copy(loo, out[3])
            return np.int64(out[4])

        return with_loo

    def ranking_only(out, scores, weights, order, loo):
        _copy(scores, out[0])
        _copy(weights, out[1])
        _copy(order, out[2])
        return np.int64(0)

    return ranking_only


def _entry(B, scores, weights, order, loo, *args):  # pragma: no cover - runs compiled
    # B's values are checked here, in the one crossing (a kernel call of its own
    # costs more than the scan on a small matrix). Results go into arrays the
    # caller allocated: boxing an array made in compiled code costs ~0.25 us (a
    # Python callback for its dtype, a MemInfo object), more than np.empty in
    # Python; the copies are O(n + m).
    top = max_byte(B)  # max_byte, SEMANTICS, NX: globals of the clone
    if top > 1:
        return -top
    return _store(SEMANTICS(NX, B, *args), scores, weights, order, loo)


def _tasks_entry(
    addr, ns, ms, roff, coff, tasks, scores, weights, order, loo, status, *args
):  # pragma: no cover - runs compiled
    # Task t is the C-contiguous uint8 (ns[t], ms[t]) matrix at address addr[t]; its
    # outputs are the slices at roff[t] (per candidate) and coff[t] (per test) of
    # the shared arrays. A chunk of tasks is one crossing: the Python of a task
    # call (a few microseconds, holding the GIL) would otherwise be paid per task.
    for k in range(tasks.shape[0]):
        t = tasks[k]
        n = ns[t]
        m = ms[t]
        r0 = roff[t]
        c0 = coff[t]
        B = carray(_as_pointer(addr[t]), (n, m))  # globals of the clone
        top = max_byte(B)
        if top > 1:  # nothing computed: the caller names the lowest bad task
            status[t] = -top
            return k
        status[t] = _store(
            SEMANTICS(NX, B, *args),
            scores[r0 : r0 + n],
            weights[c0 : c0 + m],
            order[r0 : r0 + n],
            loo[c0 : c0 + m],
        )
    return tasks.shape[0]


@intrinsic
def _as_pointer(typingctx, addr):
    """Jitted code only: the int64 address ``addr`` as a ``uint8*`` (for ``carray``)."""
    sig = types.CPointer(types.uint8)(types.int64)

    def codegen(context, builder, signature, args):
        return builder.inttoptr(args[0], ir.IntType(8).as_pointer())

    return sig, codegen


_entries: dict[Any, Any] = {}
_tasks_entries: dict[Any, Any] = {}


def entry(fn: Callable[..., Any]) -> Callable[..., int] | None:
    """The compiled call of semantics function ``fn``, or ``None`` when ``fn`` is not
    one of :data:`COMPILED` (or numba's JIT is disabled).

    ``entry(fn)(B, scores, weights, order, loo_auc, *args)`` computes
    ``fn(nx, B, *args)`` for a C-contiguous uint8 (n, m) ``B`` of otherwise
    validated shape, writes its fields into ``scores`` (float64 (n,)), ``weights``
    (float64 (m,)), ``order`` (int64 (n,)) and, when the method yields it,
    ``loo_auc`` (float64 (m,); always pass one), and returns its ``fallback`` as 0
    or 1 -- or ``-v`` without computing anything when ``B`` holds a value ``v > 1``
    (checked first). Serial; releases the GIL; compiled on first use.
    """
    dispatcher = _entries.get(fn)
    if dispatcher is None and fn in COMPILED and not config.DISABLE_JIT:
        namespace = {
            "SEMANTICS": compiled_namespace()[fn.__name__],
            "NX": NX,
            "_store": _store,
            "max_byte": max_byte,
        }
        dispatcher = _entries[fn] = _jit_over(_entry, namespace, f"{fn.__name__}_entry")
    return dispatcher


def tasks_entry(fn: Callable[..., Any]) -> Callable[..., int] | None:
    """The compiled call running semantics function ``fn`` over chunks of a batch's
    tasks, or ``None`` when :func:`entry` has none.

    ``tasks_entry(fn)(addr, ns, ms, roff, coff, tasks, scores, weights, order,
    loo_auc, status, *args)`` runs, for each task index ``t`` of ``tasks``
    (int64, in order), what :func:`entry` does for task t's matrix -- the
    C-contiguous uint8 (``ns[t]``, ``ms[t]``) array whose data starts at address
    ``addr[t]`` (int64; the caller keeps it alive and unchanged) -- writing its
    fields into ``scores[roff[t]:roff[t] + ns[t]]``, ``order`` likewise,
    ``weights``/``loo_auc`` at ``coff[t]``, and ``status[t]`` = its ``fallback``
    or ``-v`` (then nothing computed, and it returns at once). Returns the number
    of tasks it completed. The same compiled semantics as :func:`entry`, so the
    same bits; serial; releases the GIL; compiled on first use.
    """
    if entry(fn) is None:
        return None
    dispatcher = _tasks_entries.get(fn)
    if dispatcher is None:
        namespace = {
            "SEMANTICS": compiled_namespace()[fn.__name__],
            "NX": NX,
            "_store": _store,
            "max_byte": max_byte,
            "carray": carray,
            "_as_pointer": _as_pointer,
        }
        dispatcher = _tasks_entries[fn] = _jit_over(
            _tasks_entry, namespace, f"{fn.__name__}_tasks_entry"
        )
    return dispatcher


def dispatchers() -> tuple[Any, ...]:
    """The jitted functions made here so far (the semantics' twins, the entries)."""
    made = [v for k, v in _namespace.items() if isinstance(v, Dispatcher)]
    return tuple(made) + tuple(_entries.values()) + tuple(_tasks_entries.values())
