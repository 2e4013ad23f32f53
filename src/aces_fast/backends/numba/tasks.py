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
from .scores import ascending_sum, column_sums, row_scores, row_scores_rep


def _tasks_loo_auc_uniform(mats, L, colsum, rep):
    """Uniform LOO-AUC of every task (:func:`.loo_auc.uniform_loo_auc`): task t's
    values into ``L[t, :m_t]`` (float64 (T, m_max)), its passers per test into
    ``colsum[t, :m_t]`` (int64) and the representative identical row of each
    row into ``rep[t, :n_t]`` (int64 (T, n_max)). O(sum_t n_t m_t)."""
    for t in prange(len(mats)):
        B = mats[np.int64(t)]  # prange's index may be unsigned: typed lists want int64
        uniform_loo_auc(B, np.ones(B.shape[0], dtype=np.int64), L[t], colsum[t], rep[t])


tasks_loo_auc_uniform, tasks_loo_auc_uniform_parallel = \
    _serial_and_parallel(_tasks_loo_auc_uniform)


def _tasks_row_scores(mats, w, rep, use_rep, s):
    """Scores ``B_t w_t`` of every task (:func:`.scores.row_scores`, or with the
    representative rows ``rep[t]`` :func:`.scores.row_scores_rep`) into ``s[t, :n_t]``
    (float64 (T, n_max)); ``w`` float64 (T, m_max). O(sum_t n_t m_t)."""
    for t in prange(len(mats)):
        B = mats[np.int64(t)]  # prange's index may be unsigned: typed lists want int64
        n = B.shape[0]
        if use_rep:
            r = row_scores_rep(B, w[t], rep[t])
        else:
            r = row_scores(B, w[t])
        out = s[t]
        for i in range(n):
            out[i] = r[i]


tasks_row_scores, tasks_row_scores_parallel = _serial_and_parallel(_tasks_row_scores)


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
