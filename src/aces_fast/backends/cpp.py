"""``cpp``: the compiled pybind11/OpenMP kernels of :mod:`aces_fast._core`.

The kernels take the validated ``uint8`` matrix without copying it, release the
GIL and run OpenMP over tests. Threads: ``OMP_NUM_THREADS`` if set (exactly
that many), else each call takes as many as its work pays for, one per
``2^17`` cells, at most OpenMP's default (fixed when the backend loads); work
under ``2^18`` cells runs on one thread. ``n_threads`` on the backend object, or
``rerank_batch(n_threads=)``, sets an exact count (``_core.threads_for_work``).

Methods with a compiled copy (a spec's ``core_method``: majority vote, ACES-C,
ACES-O, CodeT) run whole in C++ -- ``_core.rerank``: weights, scores, tie snapping and
order in one call, the same semantics as :mod:`aces_fast._semantics` -- and
:meth:`CppBackend.rerank_batch` runs many tasks in one call with OpenMP across
tasks (``_core.rerank_batch_flat``, into the columns of a
:class:`~aces_fast.batch_result.BatchResult`). The other methods, and ACES-O with ``bins``,
run the Python semantics on these kernels. Identical candidate rows are merged
inside the kernels when that pays (``dedup=None``). Every ``_core`` function is
called with keyword arguments.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .. import _env, _registry, _semantics
from .._compiled import core as _maybe_core
from .._compiled import import_error
from .._validation import as_pass_matrix, check_zero_one
from ..batch_result import BatchResult
from .base import ArrayBackend, Backend, BackendUnavailableError

#: the extension module; None only when it failed to import, and then load() refuses
#: the backend before anything here runs
core: Any = _maybe_core


#: the compiled layer's limit on n_threads
_MAX_THREADS = 4096


def _default_threads() -> int:
    """``OMP_NUM_THREADS`` (its first entry) if set and valid: exactly that many;
    else ``-ceiling``: the compiled layer chooses by each call's work, up to
    OpenMP's default (``_core.threads_for_work``). At most the compiled layer's
    limit (a larger setting would fail every call)."""
    env = os.environ.get(_env.OMP_THREADS, "").split(",")[0].strip()
    if env.isdigit() and int(env) > 0:
        return min(int(env), _MAX_THREADS)
    return -min(int(core.max_threads()), _MAX_THREADS)


#: ``_core.METHOD_CODES``: a spec's ``core_method`` -> the code ``_core.rerank`` takes
_CODES: dict[str, int] = dict(core.METHOD_CODES) if core is not None else {}


class CppBackend(ArrayBackend):
    """Backend calling the C++ extension."""

    name = "cpp"

    def __init__(self, n_threads: int = 0):
        # Resolve "OpenMP default" once, now: numba's OpenMP layer later calls
        # omp_set_num_threads in this process, which would silently change it.
        # > 0: exactly that many threads; < 0: chosen by the work, at most -n.
        self.n_threads = n_threads or _default_threads()

    # -- conversions -----------------------------------------------------------

    def prepare(self, B):
        # No 0/1 scan of a uint8/bool matrix here: every _core call checks the
        # values itself, within its one call. The methods that compute on B in
        # NumPy first (the Python semantics: B4, binned ACES-O) check it
        # before they start.
        return as_pass_matrix(B, check_values=False)

    def prepare_batch(self, items: list[Any], start: int = 0) -> list[Any]:
        # The leading tasks that prepare() would return unchanged are found in one
        # compiled pass (a Python check per task cost about as much as ranking a
        # 24 x 100 task); the others go through prepare() one by one.
        k = core.prepared_prefix(tasks=items)
        if k == len(items):
            return items
        return items[:k] + super().prepare_batch(items[k:], start + k)

    # -- kernels ---------------------------------------------------------------

    def loo_auc(self, B, weights, tie_tol, counts=None):
        return core.loo_auc(
            B=B,
            weights=weights,
            counts=counts,
            tie_tol=tie_tol,
            n_threads=self.n_threads,
            dedup=None,
        )

    def surrogate(self, B, weights, gamma, counts=None):
        return core.surrogate_loo_auc(
            B=B, weights=weights, gamma=gamma, counts=counts, n_threads=self.n_threads, dedup=None
        )

    def aces_o_fit(self, B, logits0, active, gamma, lr, steps, counts=None, bins=None):
        if bins is None:
            return core.aces_o_fit(
                B=B,
                logits0=logits0,
                active=active,
                gamma=gamma,
                lr=lr,
                steps=steps,
                counts=counts,
                n_threads=self.n_threads,
                dedup=None,
            )
        # opt-in binned surrogate: approximate pair sums on a grid of `bins` nodes
        return core.aces_o_fit_binned(
            B=B,
            logits0=logits0,
            active=active,
            gamma=gamma,
            lr=lr,
            steps=steps,
            bins=bins,
            counts=counts,
            n_threads=self.n_threads,
            path="auto",
        )

    # -- whole methods in C++ --------------------------------------------------

    def rerank(self, B, method, values):
        spec = _registry.get(method)
        code = _CODES.get(spec.core_method)  # type: ignore[arg-type]
        args = None if code is None or spec.core_args is None else spec.core_args(values)
        if args is None:  # no compiled copy: the Python semantics on these kernels
            check_zero_one(B)
            return super().rerank(B, spec, values)
        # every keyword spelt out: building a dict of them cost about 1 us a call
        out = core.rerank(
            B=B,
            method=code,
            tie_tol=args.tie_tol,
            gamma=args.gamma,
            lr=args.lr,
            steps=args.steps,
            top_k=args.top_k,
            warm=args.warm,
            dedup=None,
            # (CodeT's table; len(B): its rows, _core validates B itself)
            power=None if args.exponent is None else _registry.power_table(args.exponent, len(B)),
            n_threads=self.n_threads,
        )
        # _core returns Outputs' fields in their order (_core.pyi: _RerankTuple); _make
        # checks the length and costs less than Outputs(*out)
        return spec.pack(_semantics.Outputs._make(out), values, "cpp")

    def rerank_batch(
        self, Bs: Sequence[np.ndarray], method: str, values: dict[str, Any], n_threads: int | None
    ) -> BatchResult | None:
        """All tasks in one ``_core.rerank_batch_flat`` call (OpenMP across tasks, GIL
        released), written into the flat columns of a :class:`BatchResult`.

        ``Bs``: validated ``uint8`` matrices; ``values``: the method's complete,
        validated parameters. Returns ``None`` for methods without a compiled
        copy (B4, binned ACES-O), which the caller then runs task by task.
        """
        spec = _registry.get(method)
        kwargs = _method_kwargs(
            spec,
            values,
            self.n_threads if n_threads is None else n_threads,
            lambda: max((len(B) for B in Bs), default=0),
        )
        if kwargs is None:
            for t, B in enumerate(Bs):  # the tasks run in Python: check here, naming the task
                try:
                    check_zero_one(B)
                except ValueError as exc:
                    raise ValueError(f"task {t}: {exc}") from None
            return None
        out = core.rerank_batch_flat(
            tasks=Bs if isinstance(Bs, (list, tuple)) else list(Bs), **kwargs
        )
        return _flat_result(spec, values, out)

    def rerank_stack(
        self, stack: np.ndarray, method: str, values: dict[str, Any], n_threads: int | None
    ) -> BatchResult | None:
        """:meth:`rerank_batch` of the tasks ``stack[0], stack[1], ...`` of a 3-D
        C-contiguous ``uint8`` array (``n >= 1``), ranked where they lie: one
        ``_core.rerank_batch_flat`` call given the whole array, no Python view
        per task. Results equal :meth:`rerank_batch` on the slices bit for bit;
        ``None`` for a method without a compiled copy.
        """
        spec = _registry.get(method)
        kwargs = _method_kwargs(
            spec, values, self.n_threads if n_threads is None else n_threads, lambda: stack.shape[1]
        )
        if kwargs is None:
            return None
        return _flat_result(spec, values, core.rerank_batch_flat(tasks=stack, **kwargs))

    def rerank_packed(
        self, packed: Any, method: str, values: dict[str, Any], n_threads: int | None
    ) -> BatchResult | None:
        """Rank a bit-packed batch (:class:`aces_fast.parquet.Packed`) in one
        ``_core.rerank_packed`` call: each task is unpacked by the thread that ranks
        it (ACES-C, at the AVX2 level, reads its packed words and is never
        unpacked), so the batch never exists unpacked and no Python object is made
        per task.

        Returns ``None`` -- rank the unpacked matrices instead -- for a method
        without a compiled copy, or when a row has padding bits set (an invalid
        row, which ``decode_batch`` reports). Results equal :meth:`rerank_batch`
        on the unpacked matrices bit for bit.
        """
        spec = _registry.get(method)
        kwargs = _method_kwargs(
            spec,
            values,
            self.n_threads if n_threads is None else n_threads,
            lambda: int(packed.n.max()) if len(packed.n) else 0,
        )
        if kwargs is None:
            return None
        *out, padding = core.rerank_packed(
            data=packed.data, offsets=packed.offsets, n=packed.n, m=packed.m, **kwargs
        )
        if padding.any():
            return None
        return _flat_result(spec, values, out)

    def info(self) -> dict:
        return {
            "version": core.__version__,
            "openmp": core.has_openmp(),
            "simd": core.simd_level(),
            "max_threads": core.max_threads(),
        }


def _method_kwargs(
    spec: Any, values: dict[str, Any], n_threads: int, rows: Callable[[], int]
) -> dict[str, Any] | None:
    """The method arguments of the compiled batch calls, or ``None`` for a method
    without a compiled copy (B4, binned ACES-O). ``rows()``: the most candidates
    of a task, asked only by CodeT (the length of its power table)."""
    code = _CODES.get(spec.core_method)
    args = None if code is None or spec.core_args is None else spec.core_args(values)
    if args is None:
        return None
    return {
        "method": code,
        "tie_tol": args.tie_tol,
        "gamma": args.gamma,
        "lr": args.lr,
        "steps": args.steps,
        "top_k": args.top_k,
        "warm": args.warm,
        "dedup": None,
        # a batch's largest task costs a pass over its tasks: only CodeT asks
        "power": None if args.exponent is None else _registry.power_table(args.exponent, rows()),
        "n_threads": n_threads,
    }


def _flat_result(spec: Any, values: dict[str, Any], out: Sequence[Any]) -> BatchResult:
    """A :class:`BatchResult` over the columns of ``_core.rerank_batch_flat``'s tuple."""
    n_off, m_off, scores, weights, order, loo, fallback, objective, obj_off, rows, rows_off = out
    return BatchResult(
        spec,
        values,
        "cpp",
        n_offsets=n_off,
        scores=scores,
        order=order,
        # no per-test column at all (CodeT): no test offsets either, as from_results
        m_offsets=m_off if weights is not None or loo is not None else None,
        weights=weights,
        loo_auc=loo,
        fallback=fallback,
        objective=objective,
        objective_offsets=obj_off,
        rows=rows,
        rows_offsets=rows_off,
    )


def load() -> Backend:
    if core is None:
        raise BackendUnavailableError("cpp", import_error or "aces_fast._core is missing")
    if not hasattr(core, "rerank_batch_flat"):
        raise BackendUnavailableError(
            "cpp",
            "aces_fast._core is outdated (no rerank_batch_flat): rebuild it with "
            "tools/dev_build.sh or `pip install .`",
        )
    return CppBackend()
