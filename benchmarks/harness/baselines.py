"""What a competent user would write without aces_fast: the benchmark baselines.

The benchmark suite (``benchmarks/``, also run by ``aces-fast bench``) reports
speed-ups over these, measured in the same run, and ``tests/test_baselines.py``
checks that they compute the same numbers as aces_fast, so the comparison is
honest.

* (a) :func:`numpy_loo_auc` / :func:`numpy_aces_c` -- vectorized NumPy: build the
  ``(n, m)`` matrix of leave-one-out scores, take per-column midranks with
  ``scipy.stats.rankdata``, read each AUC off the passers' rank sum
  (Mann-Whitney U), then apply the ACES-C weight formula.
* (b) :func:`torch_aces_o` -- vectorized PyTorch autograd: the ``(k, k, m)`` tensor
  of all candidate pairs per test, the masked sigmoid surrogate, ``backward()``
  and ``torch.optim.Adam`` in float64, on the same ``top_k`` rows.

Neither baseline is part of the library; torch and scipy are imported only
when a baseline runs.
"""

from __future__ import annotations

import numpy as np

# ---------------------------------------------------------------------------
# baseline (a): vectorized NumPy + scipy.stats.rankdata


def numpy_loo_auc(B: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray:
    """LOO-AUC of every test via per-column midranks of the leave-one-out scores.

    ``S = s[:, None] - w * B`` is the full ``(n, m)`` leave-one-out score matrix
    (integer for uniform weights); ``U_j = R_j - |P_j| (|P_j| + 1) / 2`` with
    ``R_j`` the passers' midrank sum is the number of (passer, failer) wins plus
    half the ties. With float weights, ties are whatever float equality says
    (no tolerance): exact only when the weighted sums are exact in float64.

    Returns float64 (m,), ``nan`` for constant columns. Time O(m n log n), memory
    a few ``(n, m)`` float64 matrices.
    """
    from scipy.stats import rankdata

    B = np.asarray(B)
    n = B.shape[0]
    if weights is None:
        S = B.sum(axis=1, dtype=np.int64)[:, None] - B
    else:
        w = np.asarray(weights, dtype=np.float64)
        Bf = B.astype(np.float64)
        S = (Bf @ w)[:, None] - Bf * w
    R = rankdata(S, axis=0)
    n_pos = B.sum(axis=0, dtype=np.int64).astype(np.float64)
    n_neg = n - n_pos
    rank_sum = np.einsum("ij,ij->j", R, B.astype(np.float64))
    with np.errstate(invalid="ignore", divide="ignore"):
        auc = (rank_sum - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg)
    auc[(n_pos == 0) | (n_neg == 0)] = np.nan
    return auc


def numpy_aces_c(B: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """ACES-C from :func:`numpy_loo_auc`: ``(weights (m,) summing to 1, scores (n,))``.

    ``w_j = max(0, LOO-AUC_j - 1/2) p_j (1 - p_j)``; majority vote over
    non-constant tests if every weight is 0 (all zeros if there is none).
    """
    B = np.asarray(B)
    L = numpy_loo_auc(B)
    p = B.mean(axis=0)
    with np.errstate(invalid="ignore"):
        w = np.where(L > 0.5, (L - 0.5) * p * (1 - p), 0.0)
    if not (w > 0).any():
        w = ((p > 0) & (p < 1)).astype(np.float64)
    total = w.sum()
    if total > 0:
        w = w / total
    return w, B @ w


# ---------------------------------------------------------------------------
# baseline (b): vectorized PyTorch autograd ACES-O


def top_k_rows(B: np.ndarray, top_k: int | None) -> np.ndarray:
    """The ``top_k`` rows with the largest row sums (ties by lower index), ascending."""
    n = B.shape[0]
    if top_k is None or top_k >= n:
        return np.arange(n)
    keep = np.argsort(-B.sum(axis=1, dtype=np.int64), kind="stable")[:top_k]
    return np.sort(keep)


def torch_aces_o_bytes(k: int, m: int) -> int:
    """Rough peak memory of :func:`torch_aces_o` on ``k`` rows: ~6 float64 (k, k, m) tensors."""
    return 6 * 8 * k * k * m


def torch_aces_o(
    B: np.ndarray, gamma: float = 10.0, lr: float = 0.01, steps: int = 90, top_k: int | None = 24
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """ACES-O with autograd on the dense pair tensor: ``(weights (m,), scores (n,), objective)``.

    Per step: ``w = softmax(logits)`` over non-constant tests (of the full
    matrix), leave-one-out scores ``S = s - w * B_k`` on the ``k`` kept rows, the
    ``(k, k, m)`` tensor ``sigmoid(gamma (S_p - S_f))`` masked to (passer, failer)
    pairs, ``J = sum_j w_j (L_j - 1/2)`` over tests with pairs, then
    ``(-J).backward()`` and an Adam step. ``objective`` has ``steps + 1`` values.

    Time O(steps k^2 m), memory O(k^2 m) (see :func:`torch_aces_o_bytes`).
    """
    import torch

    B = np.asarray(B)
    n, m = B.shape
    col = B.sum(axis=0, dtype=np.int64)
    active = torch.from_numpy((col > 0) & (col < n))
    objective = np.zeros(steps + 1)
    if not bool(active.any()):
        return np.zeros(m), np.zeros(n), objective
    Bk = torch.from_numpy(B[top_k_rows(B, top_k)].astype(np.float64))
    pair_mask = Bk[:, None, :] * (1.0 - Bk)[None, :, :]  # passer p, failer f, test j
    n_pairs = pair_mask.sum(dim=(0, 1))
    has_pairs = (n_pairs > 0).to(torch.float64)
    n_pairs = n_pairs.clamp(min=1.0)

    logits = torch.zeros(m, dtype=torch.float64, requires_grad=True)
    opt = torch.optim.Adam([logits], lr=lr)
    for t in range(steps + 1):
        w = torch.softmax(logits.masked_fill(~active, float("-inf")), dim=0)
        S = (Bk @ w)[:, None] - Bk * w
        sig = torch.sigmoid(gamma * (S[:, None, :] - S[None, :, :]))
        L = (sig * pair_mask).sum(dim=(0, 1)) / n_pairs
        J = (w * (L - 0.5) * has_pairs).sum()
        objective[t] = J.item()
        if t == steps:
            break
        opt.zero_grad()
        (-J).backward()
        opt.step()
    with torch.no_grad():
        final = torch.softmax(logits.masked_fill(~active, float("-inf")), dim=0).numpy()
    return final, B @ final, objective
