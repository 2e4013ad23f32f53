"""Interleaved timings of ``rerank_batch``: columnar results against the per-task list.

Not part of the package: a measuring script for issue #23 item 1 (columnar batch
results). ``python tools/measure_batch_columnar.py [--repeats R]``. Each cell
alternates, call by call in one process, the old path (``_core.rerank_batch``
returning one tuple per task, then one ``RerankResult`` per task through
``MethodSpec.pack``, as ``rerank_batch`` did before) and the new one
(``aces_fast.rerank_batch``: ``_core.rerank_batch_flat`` into a ``BatchResult``),
and prints medians in tasks per second and the ratio new / old measured in the
same loop (the machine is shared and noisy). ``new+items`` also builds every
item (``list(result)``), the cost a caller pays who iterates all results.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import aces_fast as af
from aces_fast import _registry, _semantics
from aces_fast._compiled import core
from aces_fast.backends import get_backend, resolve_backend
from aces_fast.backends.cpp import _method_kwargs
from aces_fast.batch import _task_list


def tasks(count: int, n: int, m: int, seed: int = 0) -> list:
    """``count`` random pass matrices (n x m, pass rate 0.5; distinct rows for n <= 2^m)."""
    rng = np.random.default_rng(seed)
    return list((rng.random((count, n, m)) < 0.5).astype(np.uint8))


def old_rerank_batch(Bs, method: str, n_threads: int):
    """``rerank_batch`` as it was before the columnar results (cpp, compiled methods)."""
    spec = _registry.get(method)
    values = spec.validate({})
    items = _task_list(Bs)
    be = resolve_backend("cpp", items[0])
    prepared = [be.prepare(B) for B in items]
    # the method's keywords as the backend's batch calls build them
    kwargs = _method_kwargs(spec, values, n_threads, lambda: max(len(B) for B in prepared))
    assert kwargs is not None, f"{method} has no compiled copy"
    outs = core.rerank_batch(tasks=prepared, **kwargs)
    return [spec.pack(_semantics.Outputs._make(out), values, "cpp") for out in outs]


def cell(label: str, Bs, method: str, n_threads: int, repeats: int) -> None:
    runs = {
        "old": lambda: old_rerank_batch(Bs, method, n_threads),
        "new": lambda: af.rerank_batch(Bs, method, backend="cpp", n_threads=n_threads),
        "new+items": lambda: list(af.rerank_batch(Bs, method, backend="cpp", n_threads=n_threads)),
    }
    times = {k: [] for k in runs}
    for fn in runs.values():
        fn()  # warm-up
    for _ in range(repeats):
        for k, fn in runs.items():
            t0 = time.perf_counter()
            fn()
            times[k].append(time.perf_counter() - t0)
    old = statistics.median(times["old"])
    print(f"{label} ({len(Bs)} tasks, {n_threads} thread(s), median of {repeats})")
    for k, ts in times.items():
        med = statistics.median(ts)
        print(
            f"  {k:10s} {med * 1e3:8.1f} ms  {len(Bs) / med:>10,.0f} tasks/s  "
            f"x{old / med:5.2f} vs old"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=7)
    args = ap.parse_args()
    get_backend("cpp")
    cell("ACES-C 24x100", tasks(20_000, 24, 100), "aces-c", 1, args.repeats)
    cell("ACES-C 200x500 distinct", tasks(2_000, 200, 500, seed=1), "aces-c", 2, args.repeats)


if __name__ == "__main__":
    main()
