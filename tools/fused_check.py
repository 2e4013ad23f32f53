"""The torch backend's fused mode against its default, whole ACES-O calls.

Not part of the package: a measuring script. For each shape (distinct-row
matrices of ``benchmarks.harness.workloads``, the hard case) it runs ACES-O
with ``TorchBackend()`` and ``TorchBackend(fused=True)`` alternately, each the
best of ``--repeats`` calls after one untimed call, and prints seconds per call,
the ratio and the largest weight difference; the fused backend's warm-up
(compiling) is timed first, apart. On CPU tensors the fused mode computes only
from ``fused.CPU_MIN_ROWS`` distinct rows and on one intra-op thread;
``--all-sizes`` lifts both rules, to measure where they apply.

    python tools/fused_check.py                               # CPU, default shapes
    python tools/fused_check.py --device cuda --shapes 2000x1000:all --steps 90
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

# the checkout's root, for benchmarks.harness when run as `python tools/fused_check.py`
sys.path.insert(1, str(Path(__file__).resolve().parents[1]))

DEFAULT_SHAPES = "200x500:24,48x500:all,96x500:all,300x200:all"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument(
        "--shapes", default=DEFAULT_SHAPES, help="NxM:TOPK list (TOPK a number or 'all')"
    )
    parser.add_argument("--steps", type=int, default=30, help="Adam steps per call")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    parser.add_argument("--dtype", default="float64")
    parser.add_argument(
        "--all-sizes", action="store_true", help="fused from 2 rows and any threads on CPU"
    )
    args = parser.parse_args(argv)

    import numpy as np
    import torch
    from benchmarks.harness.workloads import workload

    from aces_fast import _registry
    from aces_fast.backends.torch import TorchBackend
    from aces_fast.backends.torch import fused as torch_fused

    torch.set_num_threads(args.threads)
    dev = torch.device(args.device)
    if args.all_sizes:
        torch_fused.CPU_MIN_ROWS = 2
        torch_fused.CPU_MAX_THREADS = args.threads
    eager = TorchBackend(dtype=args.dtype)
    fused = TorchBackend(dtype=args.dtype, fused=True)
    tick = time.perf_counter()
    facts = fused.warmup()
    print(
        f"fused_check: torch {torch.__version__} on {dev}, {args.threads} thread(s), "
        f"{args.dtype}, {args.steps} steps; warm-up {time.perf_counter() - tick:.1f} s "
        f"({facts['compiled']} variants)"
    )

    def sync() -> None:
        if dev.type == "cuda":
            torch.cuda.synchronize()

    print(f"{'shape':<16}{'top_k':>6}{'eager s':>10}{'fused s':>10}{'eager/fused':>13}  max |dw|")
    for item in args.shapes.split(","):
        size, top = item.split(":")
        n, m = (int(v) for v in size.split("x"))
        top_k = None if top == "all" else int(top)
        B = torch.from_numpy(workload("distinct", n, m)[0]).to(dev)
        params = _registry.method_params("aces-o", {"steps": args.steps, "top_k": top_k})
        best = {}
        out = {}
        for be in (eager, fused):  # untimed first calls (the fused one may compile)
            out[be.fused] = be.rerank(be.prepare(B), "aces-o", params)
            sync()
        for _ in range(args.repeats):
            for be in (eager, fused):
                t0 = time.perf_counter()
                be.rerank(be.prepare(B), "aces-o", params)
                sync()
                best[be.fused] = min(best.get(be.fused, 1e30), time.perf_counter() - t0)
        dw = float(
            np.max(
                np.abs(
                    out[True].weights.detach().cpu().numpy()
                    - out[False].weights.detach().cpu().numpy()
                )
            )
        )
        print(
            f"{size:<16}{top:>6}{best[False]:>10.3f}{best[True]:>10.3f}"
            f"{best[False] / best[True]:>12.2f}x  {dw:.1e}",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
