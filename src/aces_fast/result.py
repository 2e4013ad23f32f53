"""The result type shared by every ranking method."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple

from ._types import Array


@dataclass(frozen=True, eq=False, init=False)
class RerankResult:
    """A ranking of ``n`` candidates produced by one method on one backend.

    Arrays are NumPy arrays, or torch tensors on the input's device when the
    torch backend ran.

    Attributes
    ----------
    scores : array (n,) float64
        Candidate scores; higher is better. For test-weighting methods
        ``scores = B @ weights``, with exactly-tied sums returned as equal floats.
    weights : array (m,) float64 or None
        Test weights, non-negative and summing to 1 (all zero when no column
        carries signal, e.g. every test is constant), or ``None`` for methods that
        do not weight tests (CodeT, B4, MBR-exec, combine).
    order : array (n,) int64
        Candidate indices, best first; ties broken by lower index.
    method : str
        The method's ``rerank`` name, e.g. ``"aces-c"``.
    backend : str
        The backend that computed the result (``"cpp"``, ``"numba"``, ``"torch"``,
        ``"numpy"``).
    loo_auc : array (m,) or None
        Leave-one-out AUC per test under the weights the method used to judge
        tests (uniform for ACES-C); ``nan`` for constant tests.
    fallback : bool
        True when the method gave every test weight 0 and fell back to majority
        vote (ACES-C).
    objective : array (steps + 1,) or None
        ACES-O: the objective ``J(w_t)`` at the start and after every step.
    info : dict
        Hyperparameters and other method-specific details.

    Examples
    --------
    >>> import numpy as np
    >>> import aces_fast as af
    >>> B = np.array([[1, 1, 0, 1], [1, 1, 0, 0], [0, 0, 1, 0], [1, 1, 0, 1]])
    >>> res = af.aces_c(B)
    >>> res
    RerankResult(method='aces-c', backend=..., n=4, m=4, best=0)
    >>> res.best, res.top(2).tolist(), res.order.tolist()
    (0, [0, 3], [0, 3, 1, 2])
    """

    scores: Array
    weights: Array | None
    order: Array
    method: str
    backend: str
    loo_auc: Array | None = None
    fallback: bool = False
    objective: Array | None = None
    info: dict[str, Any] = field(default_factory=dict)

    def __init__(
        self,
        scores: Array,
        weights: Array | None,
        order: Array,
        method: str,
        backend: str,
        loo_auc: Array | None = None,
        fallback: bool = False,
        objective: Array | None = None,
        info: dict[str, Any] | None = None,
    ) -> None:
        # Stores into the instance dict instead of the frozen dataclass's
        # object.__setattr__ per field: a fifth of the cost, which matters for
        # microsecond-scale calls.
        d = self.__dict__
        d["scores"] = scores
        d["weights"] = weights
        d["order"] = order
        d["method"] = method
        d["backend"] = backend
        d["loo_auc"] = loo_auc
        d["fallback"] = fallback
        d["objective"] = objective
        d["info"] = {} if info is None else info

    @property
    def best(self) -> int:
        """Index of the top-ranked candidate (``order[0]``), an ``int``."""
        return int(self.order[0])

    def top(self, k: int) -> Array:
        """Indices of the ``k`` best candidates, best first.

        Parameters
        ----------
        k : int
            How many; all ``n`` when ``k >= n``.

        Returns
        -------
        array (min(k, n),) int64
            ``order[:k]`` (a view).
        """
        return self.order[:k]

    def __repr__(self) -> str:
        n = len(self.scores)
        m = None if self.weights is None else len(self.weights)
        extra = ", fallback=True" if self.fallback else ""
        return (
            f"RerankResult(method={self.method!r}, backend={self.backend!r}, n={n}, "
            f"m={m}, best={self.best}{extra})"
        )


class SurrogateResult(NamedTuple):
    """Output of :func:`aces_fast.surrogate_loo_auc`.

    Attributes
    ----------
    values : array (m,)
        Logistic surrogate ``L_j(w)``; ``nan`` where test ``j`` has no passer or
        no failer.
    objective : float (a 0-d tensor when the torch backend got a tensor)
        ``J(w) = sum_j w_j (L_j(w) - 1/2)`` over the other tests.
    gradient : array (m,)
        ``dJ/dw`` (with respect to the weights, not logits).
    """

    values: Array
    objective: float
    gradient: Array
