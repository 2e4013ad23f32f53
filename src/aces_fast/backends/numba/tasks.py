"""Kernels over a list of tasks: one call runs a per-task kernel on every task.

A batch of T pass matrices of any shapes is a ``numba.typed.List`` of uint8
(n_t, m_t) arrays (no copy, no padding of the matrices); results are padded
(T, n_max) per candidate or (T, m_max) per test arrays that the caller fills
with the padding values first (entries beyond a task's own shape are not
written). Each task runs the very per-task kernel a single call runs -- same
code, same summation order -- so every task's values are its per-task values
bit for bit. The loop over tasks exists as a serial build and a ``parallel=True``
(prange) build; both give identical results.
"""

from __future__ import annotations

import numpy as np
from numba import prange

from ._jit import _jit, _serial_and_parallel
from .loo_auc import uniform_loo_auc
from .scores import add_group, ascending_sum, column_sums, pack_group, row_scores


def _tasks_loo_auc_uniform(mats, L, colsum, rep, words):
    """Uniform LOO-AUC of every task (:func:`.loo_auc.uniform_loo_auc`): task t's
    values into ``L[t, :m_t]`` (float64 (T, m_max)), its passers per test into
    ``colsum[t, :m_t]`` (int64) and the representative identical row of each
    row into ``rep[t, :n_t]`` (int64 (T, n_max)). While the task's matrix is in
    cache, its rows are also packed for :func:`tasks_packed_row_scores`:
    ``words[t, q, :m_t]`` (uint64 (T, ceil(n_max / 64), m_max)) gets the
    :func:`.scores.pack_group` words of rows 64q.. (the scores pass then reads an
    eighth of the bytes: a batch of matrices does not stay in cache between the
    passes). O(sum_t n_t m_t)."""
    for t in prange(len(mats)):
        B = mats[np.int64(t)]  # prange's index may be unsigned: typed lists want int64
        n = B.shape[0]
        uniform_loo_auc(B, np.ones(n, dtype=np.int64), L[t], colsum[t], rep[t])
        rows = np.arange(n)
        for g in range(0, n, 64):
            pack_group(B, rows, g, min(64, n - g), words[t, g // 64])


tasks_loo_auc_uniform, tasks_loo_auc_uniform_parallel = \
    _serial_and_parallel(_tasks_loo_auc_uniform)


def _tasks_row_scores(mats, w, s):
    """Scores ``B_t w_t`` of every task (:func:`.scores.row_scores`) into
    ``s[t, :n_t]`` (float64 (T, n_max)); ``w`` float64 (T, m_max). O(sum_t n_t m_t)."""
    for t in prange(len(mats)):
        B = mats[np.int64(t)]  # prange's index may be unsigned: typed lists want int64
        r = row_scores(B, w[t])
        out = s[t]
        for i in range(B.shape[0]):
            out[i] = r[i]


tasks_row_scores, tasks_row_scores_parallel = _serial_and_parallel(_tasks_row_scores)


def _tasks_packed_row_scores(n, m, words, w, s):
    """:func:`_tasks_row_scores` from the packed rows of :func:`tasks_loo_auc_uniform`
    (``n``/``m`` int64 (T,): the tasks' shapes): the same per-lane sums
    (:func:`.scores.add_group`), so the same bits. O(sum_t n_t m_t)."""
    for t in prange(n.shape[0]):
        acc = np.empty(64)
        out = s[t]
        for g in range(0, n[t], 64):
            add_group(words[t, g // 64], w[t], m[t], acc)
            for l in range(min(64, n[t] - g)):
                out[g + l] = acc[l]


tasks_packed_row_scores, tasks_packed_row_scores_parallel = \
    _serial_and_parallel(_tasks_packed_row_scores)


def _tasks_column_sums(mats, out):
    """Passers per test of every task (:func:`.scores.column_sums`) into
    ``out[t, :m_t]`` (int64 (T, m_max)). O(sum_t n_t m_t)."""
    for t in prange(len(mats)):
        c = column_sums(mats[np.int64(t)])
        row = out[t]
        for j in range(c.shape[0]):
            row[j] = c[j]


tasks_column_sums, tasks_column_sums_parallel = _serial_and_parallel(_tasks_column_sums)


@_jit()
def ascending_row_sums(x):
    """:func:`.scores.ascending_sum` of every row of C-contiguous float64 (T, k)
    ``x``, as (T, 1). O(T k)."""
    out = np.empty((x.shape[0], 1))
    for t in range(x.shape[0]):
        out[t, 0] = ascending_sum(x[t])
    return out


@_jit()
def order_ties_by_index(x, order):
    """Make ``order`` (int64 (T, n), each row a permutation sorting row t of float64
    (T, n) ``x`` ascending, equal keys in any order) stable, in place: within each
    run of equal keys (``==``, so ``-0.0`` equals ``0.0``; ``nan`` equals ``nan``)
    the indices ascend. Then ``order`` is ``np.argsort(x, kind="stable")``, the one
    permutation sorting by key, then index. O(T n) plus the sorting of tie runs."""
    T, n = order.shape
    for t in range(T):
        keys = x[t]
        o = order[t]
        i = 0
        while i < n:
            v = keys[o[i]]
            j = i + 1
            while j < n and (keys[o[j]] == v or (v != v and keys[o[j]] != keys[o[j]])):
                j += 1
            if j - i > 16:
                o[i:j].sort()
            else:
                for a in range(i + 1, j):  # insertion sort of a short run
                    cur = o[a]
                    b = a - 1
                    while b >= i and o[b] > cur:
                        o[b + 1] = o[b]
                        b -= 1
                    o[b + 1] = cur
            i = j
