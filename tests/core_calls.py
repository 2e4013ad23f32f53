"""Calls into the private extension ``aces_fast._core`` with the package's defaults.

Every ``_core`` function takes keyword-only arguments and has no defaults (the
package defines them once, in Python, and always passes every argument). Tests
of the kernels call them many times with mostly the same settings; these
wrappers supply those settings, so a test states only what it varies. Tests of
the binding's own argument rules call ``_core`` directly.
"""

from __future__ import annotations

from aces_fast._compiled import core as _core

TIE_TOL = 1e-9
GAMMA = 10.0
LR = 0.01
STEPS = 90
TOP_K = 24
BINS = 2048


def loo_auc(B, weights=None, counts=None, tie_tol=TIE_TOL, n_threads=0, dedup=None):
    return _core.loo_auc(
        B=B, weights=weights, counts=counts, tie_tol=tie_tol, dedup=dedup, n_threads=n_threads
    )


def surrogate_loo_auc(B, weights, gamma, counts=None, n_threads=0, dedup=None):
    return _core.surrogate_loo_auc(
        B=B, weights=weights, gamma=gamma, counts=counts, dedup=dedup, n_threads=n_threads
    )


def aces_o_fit(B, logits0, active, gamma, lr, steps, counts=None, n_threads=0, dedup=None):
    return _core.aces_o_fit(
        B=B,
        logits0=logits0,
        active=active,
        gamma=gamma,
        lr=lr,
        steps=steps,
        counts=counts,
        dedup=dedup,
        n_threads=n_threads,
    )


def rerank(
    B,
    method,
    tie_tol=TIE_TOL,
    gamma=GAMMA,
    lr=LR,
    steps=STEPS,
    top_k=TOP_K,
    warm=False,
    dedup=None,
    power=None,
    n_threads=0,
):
    return _core.rerank(
        B=B,
        method=method,
        tie_tol=tie_tol,
        gamma=gamma,
        lr=lr,
        steps=steps,
        top_k=top_k,
        warm=warm,
        dedup=dedup,
        power=power,
        n_threads=n_threads,
    )


def rerank_batch(
    tasks,
    method,
    tie_tol=TIE_TOL,
    gamma=GAMMA,
    lr=LR,
    steps=STEPS,
    top_k=TOP_K,
    warm=False,
    dedup=None,
    power=None,
    n_threads=0,
):
    return _core.rerank_batch(
        tasks=tasks,
        method=method,
        tie_tol=tie_tol,
        gamma=gamma,
        lr=lr,
        steps=steps,
        top_k=top_k,
        warm=warm,
        dedup=dedup,
        power=power,
        n_threads=n_threads,
    )


def rerank_batch_flat(
    tasks,
    method,
    tie_tol=TIE_TOL,
    gamma=GAMMA,
    lr=LR,
    steps=STEPS,
    top_k=TOP_K,
    warm=False,
    dedup=None,
    power=None,
    n_threads=0,
):
    return _core.rerank_batch_flat(
        tasks=tasks,
        method=method,
        tie_tol=tie_tol,
        gamma=gamma,
        lr=lr,
        steps=steps,
        top_k=top_k,
        warm=warm,
        dedup=dedup,
        power=power,
        n_threads=n_threads,
    )


def surrogate_loo_auc_binned(B, weights, gamma, bins=BINS, counts=None, n_threads=0, path="auto"):
    return _core.surrogate_loo_auc_binned(
        B=B, weights=weights, gamma=gamma, bins=bins, counts=counts, path=path, n_threads=n_threads
    )


def aces_o_fit_binned(
    B, logits0, active, gamma, lr, steps, bins=BINS, counts=None, n_threads=0, path="auto"
):
    return _core.aces_o_fit_binned(
        B=B,
        logits0=logits0,
        active=active,
        gamma=gamma,
        lr=lr,
        steps=steps,
        bins=bins,
        counts=counts,
        path=path,
        n_threads=n_threads,
    )


def binned_grid_spacing(B, weights, bins=BINS, counts=None):
    return _core.binned_grid_spacing(B=B, weights=weights, bins=bins, counts=counts)


def binned_error_bound(gamma, h, weight_sum=1.0):
    return _core.binned_error_bound(gamma=gamma, h=h, weight_sum=weight_sum)
