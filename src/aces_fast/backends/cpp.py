"""``cpp``: the compiled pybind11/OpenMP kernels of :mod:`aces_fast._core`.

The kernels take the validated ``uint8`` matrix without copying it, release the
GIL and run OpenMP over tests. The thread count is fixed when the backend loads:
``OMP_NUM_THREADS`` if set, else OpenMP's default (set ``n_threads`` on the
backend object to change it).

Majority vote, ACES-C and ACES-O run whole in C++ (``_core.rerank``: weights,
scores, tie snapping and order in one call, identical in meaning to the NumPy
glue of :mod:`.base`), and :meth:`CppBackend.rerank_batch` runs many tasks in
one call with OpenMP across tasks (``_core.rerank_batch``). Identical candidate
rows are merged inside the kernels when that pays (``dedup=None``).
"""

from __future__ import annotations

import os
from typing import Any, Dict, List, Optional, Sequence

import numpy as np

from .._compiled import core, import_error
from .._validation import as_pass_matrix, check_zero_one
from ..result import RerankResult
from .base import Backend, BackendUnavailableError

#: rerank names computed in C++ -> ``_core`` method code (``_core.METHOD_CODES``
#: defines them; the warm start is ACES-O with ``warm=True``)
_CODES: Dict[str, int] = {} if core is None else {
    **core.METHOD_CODES, "aces-o-warm": core.METHOD_CODES["aces-o"]}


def _pack(name: str, out: tuple, params: Dict[str, Any]) -> RerankResult:
    """A ``RerankResult`` from a ``_core.rerank`` tuple, fields as the NumPy glue sets them."""
    scores, weights, order, loo, fallback, objective, rows = out
    if name == "majority":
        return RerankResult(scores, weights, order, "majority", "cpp")
    if name in ("aces-c", "aces-c-filter"):
        variant = "weighted" if name == "aces-c" else "filter"
        return RerankResult(scores, weights, order, name, "cpp", loo_auc=loo, fallback=fallback,
                            info={"variant": variant})
    init = params["init"]
    info = {"gamma": params["gamma"], "lr": params["lr"], "steps": params["steps"],
            "top_k": params["top_k"], "init": init, "rows": rows}
    method = "aces-o-warm" if init == "aces-c" else "aces-o"
    return RerankResult(scores, weights, order, method, "cpp", objective=objective, info=info)


def _default_threads() -> int:
    """``OMP_NUM_THREADS`` (its first entry) if set and valid, else OpenMP's default."""
    env = os.environ.get("OMP_NUM_THREADS", "").split(",")[0].strip()
    if env.isdigit() and int(env) > 0:
        return int(env)
    return int(core.max_threads())


class CppBackend(Backend):
    """Backend calling the C++ extension."""

    name = "cpp"

    def __init__(self, n_threads: int = 0):
        # Resolve "OpenMP default" once, now: numba's OpenMP layer later calls
        # omp_set_num_threads in this process, which would silently change it.
        self.n_threads = n_threads or _default_threads()

    # -- conversions -----------------------------------------------------------

    def prepare(self, B):
        # no 0/1 scan of a uint8/bool matrix here: every _core call checks the
        # values itself, within the call; paths that compute on B in NumPy
        # first (codet, b4, binned ACES-O) call check_zero_one
        return as_pass_matrix(B, check_values=False)

    # -- kernels ---------------------------------------------------------------

    def loo_auc(self, B, weights, tie_tol, counts=None):
        return core.loo_auc(B=B, weights=weights, counts=counts, tie_tol=tie_tol, dedup=None,
                            n_threads=self.n_threads)

    def surrogate(self, B, weights, gamma, counts=None):
        return core.surrogate_loo_auc(B=B, weights=weights, gamma=gamma, counts=counts,
                                      dedup=None, n_threads=self.n_threads)

    def aces_o_fit(self, B, logits0, active, gamma, lr, steps, counts=None):
        return core.aces_o_fit(B=B, logits0=logits0, active=active, gamma=gamma, lr=lr,
                               steps=steps, counts=counts, dedup=None, n_threads=self.n_threads)

    # -- whole methods in C++ --------------------------------------------------

    def majority_vote(self, B, tie_tol=1e-9):
        # _core.rerank takes every argument; majority and ACES-C ignore ACES-O's
        out = core.rerank(B=B, method=_CODES["majority"], tie_tol=tie_tol, gamma=10.0, lr=0.01,
                          steps=0, top_k=None, warm=False, dedup=None, n_threads=self.n_threads)
        return RerankResult(out[0], out[1], out[2], "majority", "cpp")

    def aces_c(self, B, variant="weighted", tie_tol=1e-9):
        name = "aces-c" if variant == "weighted" else "aces-c-filter"
        out = core.rerank(B=B, method=_CODES[name], tie_tol=tie_tol, gamma=10.0, lr=0.01,
                          steps=0, top_k=None, warm=False, dedup=None, n_threads=self.n_threads)
        return RerankResult(out[0], out[1], out[2], name, "cpp", loo_auc=out[3],
                            fallback=out[4], info={"variant": variant})

    def codet(self, B, exponent):
        check_zero_one(B)
        return super().codet(B, exponent)

    def b4(self, B, alpha, beta0):
        check_zero_one(B)
        return super().b4(B, alpha, beta0)

    def aces_o(self, B, gamma, lr, steps, top_k, init, tie_tol=1e-9, bins=None):
        if bins is not None:
            check_zero_one(B)
            # opt-in binned surrogate: same glue, approximate pair sums
            def fit(Bk, logits0, active, gamma, lr, steps):
                return core.aces_o_fit_binned(B=Bk, logits0=logits0, active=active, gamma=gamma,
                                              lr=lr, steps=steps, bins=bins, counts=None,
                                              path="auto", n_threads=self.n_threads)

            return self._aces_o_glue(B, gamma, lr, steps, top_k, init, tie_tol, fit, bins=bins)
        out = core.rerank(B=B, method=_CODES["aces-o"], tie_tol=tie_tol, gamma=gamma, lr=lr,
                          steps=steps, top_k=top_k, warm=init == "aces-c", dedup=None,
                          n_threads=self.n_threads)
        params = {"gamma": gamma, "lr": lr, "steps": steps, "top_k": top_k, "init": init}
        return _pack("aces-o", out, params)

    def rerank_batch(self, Bs: Sequence[np.ndarray], method: str, params: Dict[str, Any],
                     n_threads: Optional[int]) -> Optional[List[RerankResult]]:
        """All tasks in one ``_core.rerank_batch`` call (OpenMP across tasks, GIL released).

        ``Bs``: validated ``uint8`` matrices; ``params``: the method's complete,
        validated keyword arguments. Returns ``None`` for methods without a C++
        implementation (CodeT, B4), which the caller then runs task by task.
        """
        code = _CODES.get(method)
        if code is None:
            for t, B in enumerate(Bs):  # run in NumPy: check here, naming the task
                try:
                    check_zero_one(B)
                except ValueError as exc:
                    raise ValueError(f"task {t}: {exc}") from None
            return None
        threads = self.n_threads if n_threads is None else n_threads
        tie_tol = params.get("tie_tol", 1e-9)
        if code == _CODES["aces-o"]:
            outs = core.rerank_batch(tasks=Bs, method=code, tie_tol=tie_tol,
                                     gamma=params["gamma"], lr=params["lr"],
                                     steps=params["steps"], top_k=params["top_k"],
                                     warm=params["init"] == "aces-c", dedup=None,
                                     n_threads=threads)
        else:  # ACES-O's arguments are ignored
            outs = core.rerank_batch(tasks=Bs, method=code, tie_tol=tie_tol, gamma=10.0, lr=0.01,
                                     steps=0, top_k=None, warm=False, dedup=None,
                                     n_threads=threads)
        return [_pack(method, out, params) for out in outs]

    def info(self) -> dict:
        return {"version": core.__version__, "openmp": core.has_openmp(),
                "simd": core.simd_level(),
                "max_threads": core.max_threads()}


def load() -> Backend:
    if core is None:
        raise BackendUnavailableError("cpp", import_error or "aces_fast._core is missing")
    if not hasattr(core, "rerank_batch"):
        raise BackendUnavailableError(
            "cpp", "aces_fast._core is outdated (no rerank_batch): rebuild it with "
                   "tools/dev_build.sh or `pip install .`")
    return CppBackend()
