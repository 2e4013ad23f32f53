"""Interleaved timings of the cpp kernels on distinct-row and dup-heavy pass matrices.

Not part of the package: a measuring script for the cpp kernel work (issue 10).
``python tools/measure_speed_cpp.py [cell ...] [--repeats R]``; every cell alternates
the implementations call by call in one process and prints medians, the spread
(p10-p90 over the repeat medians) and the ratio to the baseline measured in the
same loop.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np

# the benchmark harness lives in the checkout (benchmarks/harness/), not the package
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def planted_distinct(n: int, m: int, seed: int = 0) -> np.ndarray:
    """Planted model with no duplicate rows.

    30% correct candidates; each test passes correct candidates with probability
    alpha ~ U(0.5, 1) and incorrect ones with beta ~ U(0, 0.6); 20% of the tests are
    misleading (alpha ~ U(0, 0.4), beta ~ U(0.5, 1)). A row equal to an earlier one
    is redrawn until every row is distinct.
    """
    rng = np.random.default_rng(seed)
    correct = rng.random(n) < 0.3
    mis = rng.random(m) < 0.2
    alpha = np.where(mis, rng.uniform(0.0, 0.4, m), rng.uniform(0.5, 1.0, m))
    beta = np.where(mis, rng.uniform(0.5, 1.0, m), rng.uniform(0.0, 0.6, m))
    p = np.where(correct[:, None], alpha[None, :], beta[None, :])
    B = (rng.random((n, m)) < p).astype(np.uint8)
    seen: dict = {}
    for i in range(n):
        while B[i].tobytes() in seen:
            B[i] = (rng.random(m) < p[i]).astype(np.uint8)
        seen[B[i].tobytes()] = i
    return np.ascontiguousarray(B)


def dup_heavy(n: int, m: int, seed: int = 0) -> np.ndarray:
    from benchmarks.harness.workloads import make_pass_matrix

    return make_pass_matrix(n, m, seed=seed)


def baselines():
    from benchmarks.harness import baselines as b

    return b


def header():
    import platform

    import aces_fast as af
    from aces_fast import _core

    print(
        f"# aces_fast {af.__file__} simd={_core.simd_level()} python {platform.python_version()} "
        f"load {os.getloadavg()} {time.strftime('%Y-%m-%d %H:%M:%S')}",
        flush=True,
    )


def timeit(fn, number: int) -> float:
    t0 = time.perf_counter()
    for _ in range(number):
        fn()
    return (time.perf_counter() - t0) / number


def interleave(impls: dict, repeats: int, number: dict) -> dict:
    """Per implementation the list of per-repeat mean times, alternating impls."""
    for fn in impls.values():
        fn()  # warm-up (numba JIT, caches)
    times = {k: [] for k in impls}
    for _ in range(repeats):
        for k, fn in impls.items():
            times[k].append(timeit(fn, number[k]))
    return times


def fmt(t: float) -> str:
    if t < 1e-3:
        return f"{t * 1e6:.1f} us"
    if t < 1:
        return f"{t * 1e3:.2f} ms"
    return f"{t:.2f} s"


def report(name: str, times: dict, ref: str | None = None):
    med = {k: statistics.median(v) for k, v in times.items()}
    for k, v in times.items():
        q = np.percentile(v, [10, 90])
        extra = ""
        if ref and k != ref:
            extra = (
                f"  ratio {med[ref] / med[k]:.0f}x (p10-p90 of per-repeat ratios "
                f"{np.percentile(np.array(times[ref]) / np.array(v), 10):.0f}-"
                f"{np.percentile(np.array(times[ref]) / np.array(v), 90):.0f})"
            )
        print(
            f"{name:44s} {k:10s} median {fmt(med[k]):>10s}  p10-p90 {fmt(q[0])}-{fmt(q[1])}{extra}",
            flush=True,
        )


def cells(repeats: int, only):
    import aces_fast as af

    b = baselines()
    mats = {}
    for fam, gen in (("distinct", planted_distinct), ("dup-heavy", dup_heavy)):
        for n, m in ((24, 100), (200, 500)):
            mats[(fam, n, m)] = gen(n, m, seed=1)

    def want(c):
        return not only or any(o in c for o in only)

    for (fam, n, m), B in mats.items():
        c = f"aces-c {fam} {n}x{m}"
        if want(c):
            impls = {
                "cpp": lambda B=B: af.aces_c(B, backend="cpp"),
                "numpy-rank": lambda B=B: b.numpy_aces_c(B),
            }
            fast = n * m < 10000
            report(
                c,
                interleave(
                    impls, repeats, {"cpp": 2000 if fast else 300, "numpy-rank": 20 if fast else 3}
                ),
                "numpy-rank",
            )
    for (fam, n, m), B in mats.items():
        c = f"aces-o K=24 T=90 {fam} {n}x{m}"
        if want(c):
            impls = {
                "cpp": lambda B=B: af.aces_o(B, backend="cpp"),
                "torch-ag": lambda B=B: b.torch_aces_o(B),
            }
            if os.environ.get("WITH_NUMBA"):
                impls["numba"] = lambda B=B: af.aces_o(B, backend="numba")
            report(
                c,
                interleave(impls, max(3, repeats // 3), {"cpp": 10, "torch-ag": 1, "numba": 3}),
                "torch-ag",
            )
    for fam in ("distinct", "dup-heavy"):
        B = mats[(fam, 200, 500)]
        c = f"aces-o top_k=None T=90 {fam} 200x500"
        if want(c):
            impls = {
                "cpp": lambda B=B: af.aces_o(B, top_k=None, backend="cpp"),
                "torch-ag": lambda B=B: b.torch_aces_o(B, top_k=None),
            }
            # the torch baseline takes ~70 s a call here: two rounds
            report(
                c,
                interleave(
                    impls, int(os.environ.get("TOPK_NONE_REPEATS", "2")), {"cpp": 1, "torch-ag": 1}
                ),
                "torch-ag",
            )
    for fam in ("distinct", "dup-heavy"):
        B = mats[(fam, 200, 500)]
        w = np.random.default_rng(2).random(500)
        c = f"loo-auc weighted {fam} 200x500"
        if want(c):
            impls = {
                "cpp": lambda B=B, w=w: af.loo_auc(B, w, backend="cpp"),
                "numpy-rank": lambda B=B, w=w: b.numpy_loo_auc(B, w),
            }
            report(c, interleave(impls, repeats, {"cpp": 200, "numpy-rank": 3}), "numpy-rank")
    for fam, gen in (("distinct", planted_distinct), ("dup-heavy", dup_heavy)):
        c = f"batch {fam} 200x500"
        if not want(c):
            continue
        tasks = [gen(200, 500, seed=100 + k) for k in range(200)]
        for method, reps in (("aces-c", repeats), ("aces-o", 3)):
            for nt in (1, 2):
                impls = {
                    f"{method} {nt}t": lambda tasks=tasks, method=method, nt=nt: af.rerank_batch(
                        tasks, method, backend="cpp", n_threads=nt
                    )
                }
                t = interleave(impls, reps, dict.fromkeys(impls, 3 if method == "aces-c" else 1))
                for k, v in t.items():
                    rates = [len(tasks) / x for x in v]
                    print(
                        f"{c:44s} {k:10s} median {statistics.median(rates):,.0f} tasks/s  "
                        f"p10-p90 {np.percentile(rates, 10):,.0f}-{np.percentile(rates, 90):,.0f}",
                        flush=True,
                    )


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("only", nargs="*")
    ap.add_argument("--repeats", type=int, default=9)
    a = ap.parse_args()
    header()
    cells(a.repeats, a.only)
