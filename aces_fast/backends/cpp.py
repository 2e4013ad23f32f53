"""``cpp``: the compiled pybind11/OpenMP kernels of :mod:`aces_fast._core`.

The kernels take the validated ``uint8`` matrix without copying it, release the
GIL and run OpenMP over tests. ``n_threads=0`` lets OpenMP decide (honouring
``OMP_NUM_THREADS``).
"""

from __future__ import annotations

from .._compiled import core, import_error
from .base import Backend, BackendUnavailableError


class CppBackend(Backend):
    """Backend calling the C++ extension."""

    name = "cpp"

    def __init__(self, n_threads: int = 0):
        self.n_threads = n_threads

    def loo_auc(self, B, weights, tie_tol, counts=None):
        return core.loo_auc(B, weights, counts, tie_tol, self.n_threads)

    def surrogate(self, B, weights, gamma, counts=None):
        return core.surrogate_loo_auc(B, weights, gamma, counts, self.n_threads)

    def aces_o_fit(self, B, logits0, active, gamma, lr, steps, counts=None):
        return core.aces_o_fit(B, logits0, active, gamma, lr, steps, counts, self.n_threads)

    def info(self) -> dict:
        return {"version": core.__version__, "openmp": core.has_openmp(),
                "max_threads": core.max_threads()}


def load() -> Backend:
    if core is None:
        raise BackendUnavailableError("cpp", import_error or "aces_fast._core is missing")
    return CppBackend()
