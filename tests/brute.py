"""Brute-force definitions of docs/contract.rst §2, §3 and §5, written as plainly as possible.

Nothing here is clever: every quantity is computed from its definition with
explicit loops over candidate pairs (or triples), in exact rational arithmetic
(:class:`fractions.Fraction`) wherever the definition allows. These are slow
(O(n^2 m) and worse) and meant only for small matrices; the library is tested
against them.

Matrices are taken as anything ``np.asarray`` accepts and read through
``tolist()`` so that every entry is a plain Python ``int``.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from fractions import Fraction

import numpy as np

HALF = Fraction(1, 2)


def _rows(B) -> list[list[int]]:
    B = np.asarray(B)
    assert B.ndim == 2
    return [[int(v) for v in row] for row in B.tolist()]


def _shape(B) -> tuple:
    return np.asarray(B).shape


def is_constant(B, j: int) -> bool:
    """True when every candidate passes test ``j`` or every candidate fails it."""
    col = [row[j] for row in _rows(B)]
    return all(v == 1 for v in col) or all(v == 0 for v in col)


def nonconstant_mask(B) -> np.ndarray:
    """bool (m,): True for the tests some candidate passes and some fails."""
    return np.array([not is_constant(B, j) for j in range(_shape(B)[1])], dtype=bool)


def exact_weights(weights, m: int) -> list[Fraction]:
    """Weights as Fractions; ``None`` means all ones. Floats are taken at their exact value."""
    if weights is None:
        return [Fraction(1)] * m
    return [w if isinstance(w, Fraction) else Fraction(w) for w in weights]


# ---------------------------------------------------------------------------
# AUC and leave-one-out AUC


def auc(scores: Sequence, labels: Sequence[int]) -> Fraction | None:
    """AUC by pairs: P(score_p > score_f) + 1/2 P(score_p = score_f); None if a class is empty.

    Scores are compared exactly (pass ints or Fractions for exact ties).
    """
    pos = [s for s, y in zip(scores, labels) if y == 1]
    neg = [s for s, y in zip(scores, labels) if y == 0]
    if not pos or not neg:
        return None
    total = Fraction(0)
    for p in pos:
        for f in neg:
            if p > f:
                total += 1
            elif p == f:
                total += HALF
    return total / (len(pos) * len(neg))


def loo_scores(B, weights=None) -> list[list[Fraction]]:
    """The explicit n x m matrix ``S[i][j] = sum_{k != j} w_k B[i][k]`` (exact)."""
    rows = _rows(B)
    n, m = _shape(B)
    w = exact_weights(weights, m)
    S = []
    for i in range(n):
        S.append(
            [sum((w[k] * rows[i][k] for k in range(m) if k != j), Fraction(0)) for j in range(m)]
        )
    return S


def loo_auc(B, weights=None) -> list[Fraction | None]:
    """LOO-AUC of every test from the explicit leave-one-out scores; None for constant tests."""
    rows = _rows(B)
    n, m = _shape(B)
    S = loo_scores(B, weights)
    out = []
    for j in range(m):
        out.append(auc([S[i][j] for i in range(n)], [rows[i][j] for i in range(n)]))
    return out


def to_float_array(values: Sequence[Fraction | None]) -> np.ndarray:
    """Fractions (or None) to float64 with ``nan`` for None."""
    return np.array([math.nan if v is None else float(v) for v in values], dtype=np.float64)


# ---------------------------------------------------------------------------
# ACES-O surrogate


def _sigmoid(z: float) -> float:
    if z >= 0:
        return 1.0 / (1.0 + math.exp(-z))
    e = math.exp(z)
    return e / (1.0 + e)


def surrogate(B, weights, gamma: float):
    """``(L (list, None for empty P_j/F_j), J)`` by pairs of explicit leave-one-out scores."""
    rows = _rows(B)
    n, m = _shape(B)
    w = [float(x) for x in weights]
    L: list[float | None] = []
    J = 0.0
    for j in range(m):
        S = [sum(w[k] * rows[i][k] for k in range(m) if k != j) for i in range(n)]
        P = [i for i in range(n) if rows[i][j] == 1]
        F = [i for i in range(n) if rows[i][j] == 0]
        if not P or not F:
            L.append(None)
            continue
        total = 0.0
        for p in P:
            for f in F:
                total += _sigmoid(gamma * (S[p] - S[f]))
        L.append(total / (len(P) * len(F)))
        J += w[j] * (L[-1] - 0.5)
    return L, J


# ---------------------------------------------------------------------------
# test-weighting methods (weights normalized to sum 1, exact)


def _normalize(w: list[Fraction]) -> list[Fraction]:
    total = sum(w, Fraction(0))
    return [x / total for x in w] if total > 0 else [Fraction(0)] * len(w)


def majority_weights(B) -> list[Fraction]:
    """1 on every non-constant test, normalized."""
    m = _shape(B)[1]
    return _normalize([Fraction(0 if is_constant(B, j) else 1) for j in range(m)])


def aces_c_weights(B, variant: str = "weighted"):
    """``(normalized weights, fallback)`` from the ACES-C formula on the exact uniform LOO-AUC."""
    rows = _rows(B)
    n, m = _shape(B)
    L = loo_auc(B)
    w = []
    for j in range(m):
        if L[j] is None or L[j] <= HALF:
            w.append(Fraction(0))
        elif variant == "weighted":
            p = Fraction(sum(rows[i][j] for i in range(n)), n)
            w.append((L[j] - HALF) * p * (1 - p))
        else:
            w.append(Fraction(1))
    if all(x == 0 for x in w):
        return majority_weights(B), True
    return _normalize(w), False


def weighted_scores(B, w: Sequence[Fraction]) -> list[Fraction]:
    """Exact ``B @ w``."""
    return [sum((wj * bij for wj, bij in zip(w, row)), Fraction(0)) for row in _rows(B)]


def stable_descending(scores: Sequence) -> list[int]:
    """Indices by descending score, ties by lower index, via a plain comparison sort."""
    return sorted(range(len(scores)), key=lambda i: (-scores[i], i))


# ---------------------------------------------------------------------------
# consensus methods (constant tests dropped first, as for every method: docs/contract.rst §1)


def _drop_constant(B) -> list[list[int]]:
    rows = _rows(B)
    m = _shape(B)[1]
    keep = [j for j in range(m) if not is_constant(B, j)]
    return [[row[j] for j in keep] for row in rows]


def codet(B, exponent: float = 0.5) -> list[float]:
    """Group identical rows; a group scores (#tests passed) * (group size) ** exponent."""
    rows = _drop_constant(B)
    groups = {}
    for i, row in enumerate(rows):
        groups.setdefault(tuple(row), []).append(i)
    out = [0.0] * len(rows)
    for pattern, members in groups.items():
        score = sum(pattern) * len(members) ** exponent
        for i in members:
            out[i] = score
    return out


def _ln_beta(a: float, b: float) -> float:
    return math.lgamma(a) + math.lgamma(b) - math.lgamma(a + b)


def b4(B, a: float = 1e3, b: float = 1e4) -> list[float]:
    """B4 by counting the cells of blocks E1 and E0 one by one, per candidate."""
    rows = _drop_constant(B)
    N = len(rows)
    M = len(rows[0]) if rows else 0
    out = []
    for i in range(N):
        x = [r for r in range(N) if rows[r] == rows[i]]
        y = [j for j in range(M) if rows[i][j] == 1]
        not_y = [j for j in range(M) if rows[i][j] == 0]
        outside = [r for r in range(N) if r not in x]
        k1 = sum(rows[r][j] for r in outside for j in y)
        n1 = len(outside) * len(y)
        k0 = sum(rows[r][j] for r in outside for j in not_y)
        n0 = len(outside) * len(not_y)
        out.append(
            _ln_beta(len(y) + a, M - len(y) + 1)
            + _ln_beta(len(x) + a, N - len(x) + 1)
            + _ln_beta(k1 + 1, n1 - k1 + 1)
            + _ln_beta(k0 + 1, n0 - k0 + b)
        )
    return out


def mbr_exec(outputs) -> list[int]:
    """``score_i = #{i' : outputs[i'] == outputs[i]}`` by comparing every pair of rows."""
    rows = np.asarray(outputs).tolist()
    return [sum(1 for other in rows if other == row) for row in rows]


# ---------------------------------------------------------------------------
# evaluation (docs/contract.rst §5)


def pass_at_k(scores: Sequence, labels: Sequence[int], k: int) -> Fraction:
    """Pass@k of a ranking by enumerating every tie-breaking order.

    The candidates are split into groups of equal score (best group first); each
    combination of one permutation per group is an equally likely ranking. Counts
    the rankings with a correct candidate in the first ``k`` places. Only for small
    tie groups (the number of orders is the product of the group sizes' factorials).
    """
    levels = sorted(set(scores), reverse=True)
    groups = [[i for i in range(len(scores)) if scores[i] == lv] for lv in levels]
    hits = 0
    total = 0
    for perms in itertools.product(*(itertools.permutations(g) for g in groups)):
        ranking = [i for perm in perms for i in perm]
        total += 1
        if any(labels[i] == 1 for i in ranking[:k]):
            hits += 1
    return Fraction(hits, total)


def pass_at_k_unbiased(n: int, c: int, k: int) -> Fraction:
    """``1 - C(n - c, k) / C(n, k)`` with exact integers."""
    return 1 - Fraction(math.comb(n - c, k), math.comb(n, k))


def vote_shares(B, labels):
    """Shares of (correct, incorrect, test) triples where the test votes right / not / wrong."""
    rows = _rows(B)
    n, m = _shape(B)
    good = [i for i in range(n) if labels[i] == 1]
    bad = [i for i in range(n) if labels[i] == 0]
    counts = {"informative": 0, "uninformative": 0, "misleading": 0}
    for p in good:
        for f in bad:
            for j in range(m):
                diff = rows[p][j] - rows[f][j]
                key = "informative" if diff > 0 else "misleading" if diff < 0 else "uninformative"
                counts[key] += 1
    total = len(good) * len(bad) * m
    return {key: Fraction(v, total) for key, v in counts.items()}


def alpha_beta_delta(B, labels):
    """Per test: (P(pass | correct), P(pass | incorrect), difference) as Fractions."""
    rows = _rows(B)
    n, m = _shape(B)
    good = [i for i in range(n) if labels[i] == 1]
    bad = [i for i in range(n) if labels[i] == 0]
    out = []
    for j in range(m):
        a = Fraction(sum(rows[i][j] for i in good), len(good))
        b = Fraction(sum(rows[i][j] for i in bad), len(bad))
        out.append((a, b, a - b))
    return out
