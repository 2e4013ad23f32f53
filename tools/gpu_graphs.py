"""Does capturing ACES-O's Adam steps in a CUDA graph pay? (issue 22, item 2)

Times ACES-O with the torch backend on a CUDA device, the Adam steps repeated
eagerly and replayed from a captured graph (``ACES_FAST_TORCH_CUDA_GRAPHS``,
read at every call), in the same process, each cell best of ``--repeats``
after a warm-up, with ``torch.cuda.synchronize`` around each timing. Cells:
one call on a 200x500 distinct-row matrix (the registry's default parameters) and
``rerank_batch`` of ``--tasks`` such matrices. It checks that both ways give
the same weights and objective, bit for bit, and prints one table (eager ms,
graph ms, eager / graph). Part of ``tools/gpu_check.sh``.

    python tools/gpu_graphs.py            # on a GPU machine
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from typing import Any


def _best(fn: Callable[[], Any], repeats: int) -> tuple[float, Any]:
    import torch

    out = fn()  # warm-up (allocator, cuBLAS handles)
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(repeats):
        tick = time.perf_counter()
        out = fn()
        torch.cuda.synchronize()
        best = min(best, time.perf_counter() - tick)
    return best, out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=200, help="tasks of the batch cell")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)

    import numpy as np
    import torch

    import aces_fast as af
    from aces_fast.backends.torch.aces_o import CUDA_GRAPHS_ENV_VAR

    if not torch.cuda.is_available():
        print(f"gpu_graphs: no CUDA device is available (torch {torch.__version__})")
        return 2
    rng = np.random.default_rng(22)

    def distinct(n: int, m: int) -> Any:
        B = (rng.random((n, m)) < 0.5).astype(np.uint8)
        return torch.from_numpy(B).cuda()

    one = distinct(200, 500)
    tasks = [distinct(200, 500) for _ in range(args.tasks)]
    cells = {
        "one call 200x500": lambda: [af.rerank(one, "aces-o", backend="torch")],
        f"batch {args.tasks} x 200x500": lambda: list(
            af.rerank_batch(tasks, "aces-o", backend="torch")
        ),
    }
    failed = False
    print(f"{'cell':<24}{'eager ms':>10}{'graph ms':>10}{'eager/graph':>13}  same bits")
    for name, fn in cells.items():
        times, outs = {}, {}
        for mode in ("0", "1"):
            os.environ[CUDA_GRAPHS_ENV_VAR] = mode
            times[mode], outs[mode] = _best(fn, args.repeats)
        os.environ.pop(CUDA_GRAPHS_ENV_VAR, None)
        same = all(
            torch.equal(a.weights, b.weights) and torch.equal(a.objective, b.objective)
            for a, b in zip(outs["0"], outs["1"])
        )
        failed |= not same
        ratio = times["0"] / times["1"]
        print(
            f"{name:<24}{times['0'] * 1e3:>10.1f}{times['1'] * 1e3:>10.1f}{ratio:>12.2f}x  {same}"
        )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
