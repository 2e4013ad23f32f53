"""Where the torch backend's time goes on a GPU, cell by cell (issue 22's goals).

Not part of the package: a measuring script for the GPU machine, lent for
minutes. For each goal cell of issue 22 (and the single ACES-O calls beside
them) it times ``cpp`` on all of the host's cores and the torch backend on the
device, in the same process, each the median of repeated calls after one
warm-up call (``torch.cuda.synchronize`` after each device call), and prints
the cpp / device ratio next to the goal. Then one device call of the cell runs
under ``torch.profiler`` and under ``torch.cuda.set_sync_debug_mode("warn")``:
kernels launched, host synchronizations (runtime calls and device-to-host
copies), aten ops dispatched, the device's busy time (the sum of kernel
durations) against the call's wall time, and the top ops by device time; and, for the small
cells, the host route (``auto`` on a device tensor, or its emulation). That
says whether a cell is bound by launches and syncs (busy far under wall) or by
the kernels themselves, which no CPU run can tell.

Inputs are the bench's (``benchmarks.harness.workloads``: distinct rows, the
hard case). Cells that would run past ``--cell-budget`` seconds take fewer
samples (at least one after the warm-up); ``cpp`` is not timed on ACES-O
2000x1000 ``top_k=None`` (seconds per call, and its goal is absolute).

    python tools/gpu_profile.py --json F --tables T      # on the GPU machine
    python tools/gpu_profile.py --device cpu --quick     # the logic on CPU tensors

Exit status: 0 when every cell ran, 1 when one failed, 2 without the device.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import traceback
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# the checkout's root, for benchmarks.harness when run as `python tools/gpu_profile.py`
sys.path.insert(1, str(Path(__file__).resolve().parents[1]))
from benchmarks.harness import cells, workloads


@dataclass(frozen=True)
class Cell:
    """One goal cell: bench operation, size, tasks (batch cells), the goal's text,
    and whether cpp is timed too."""

    op: str
    size: str
    tasks: int = 0
    goal: str = ""
    time_cpp: bool = True
    #: a batch given as one (T, n, m) tensor rather than a list of tasks
    stack: bool = False

    @property
    def name(self) -> str:
        if self.tasks:
            return f"{self.op} {self.tasks} x {self.size}" + (" stack" if self.stack else "")
        return f"{self.op} {self.size}"


#: issue 22's goals, and the per-call ACES-O cells of its table
CELLS = (
    Cell("aces-c", "200x500", goal="cuda <= 0.2 ms"),
    Cell("batch-aces-c", "200x500", 2000, goal="cpp/cuda >= 10, >= 1e6 tasks/s"),
    Cell("batch-aces-c", "200x500", 2000, goal="cpp/cuda >= 10, >= 1e6 tasks/s", stack=True),
    Cell("batch-aces-o", "200x500", 200, goal="cpp/cuda >= 5"),
    Cell("loo-auc", "100000x2000", goal="cpp/cuda >= 5"),
    Cell("aces-o-all", "2000x1000", goal="cuda <= 1 s", time_cpp=False),
    Cell("aces-o", "200x500"),
    Cell("aces-o-all", "200x500"),
    Cell("aces-c", "2000x1000"),
)
#: the same cells, small, for trying the script on CPU tensors
QUICK_CELLS = (
    Cell("aces-c", "24x100", goal="cuda <= 0.2 ms"),
    Cell("batch-aces-c", "24x100", 20),
    Cell("batch-aces-c", "24x100", 20, stack=True),
    Cell("batch-aces-o", "24x60", 4),
    Cell("loo-auc", "2000x200"),
    Cell("aces-o-all", "60x40", time_cpp=False),
)

#: calls longer than this (seconds) are timed but not profiled
PROFILE_MAX_S = 10.0
#: nor rerun under the sync debug mode
SYNC_CHECK_MAX_S = 3.0
#: runtime calls that wait for the device
_SYNC_CALLS = ("cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize")


def _timed(fn: Callable[[], Any], budget: float, max_reps: int) -> dict[str, Any]:
    """One warm-up call, then up to ``max_reps`` timed calls within ``budget`` s, at
    least one: the warm-up may hold compiling (the fused mode, Triton), and
    reporting it as the cell's time read 6.9 s for a 1.6 s call
    (benchmarks/results/2026-11-30-h200.txt)."""
    tick = time.perf_counter()
    fn()
    warm = time.perf_counter() - tick
    reps = int(max(1, min(max_reps, budget // max(warm, 1e-6))))
    times = []
    for _ in range(reps):
        tick = time.perf_counter()
        fn()
        times.append(time.perf_counter() - tick)
    return {"warmup_s": warm, "median_s": statistics.median(times), "samples": len(times)}


def _event_us(event: Any) -> float:
    return float(event.time_range.elapsed_us())


def _profile(fn: Callable[[], Any], device: str, sync_check: bool) -> tuple[dict[str, Any], str]:
    """One call of ``fn`` under the profiler: counts, busy time and the op table."""
    import torch
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    on_gpu = torch.device(device).type == "cuda"
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if on_gpu else [])
    with profile(activities=activities) as prof:
        tick = time.perf_counter()
        fn()
        wall = time.perf_counter() - tick
    events = prof.events()
    on_device = [e for e in events if e.device_type != DeviceType.CPU]
    kernels = [e for e in on_device if not e.name.startswith("Memcpy") and "Memset" not in e.name]
    d2h = [e for e in on_device if "DtoH" in e.name or "Device -> Pageable" in e.name]
    host = [e for e in events if e.device_type == DeviceType.CPU]
    stats = {
        "wall_ms": wall * 1e3,
        "kernels": len(kernels),
        "device_busy_ms": sum(_event_us(e) for e in kernels) / 1e3,
        "copies_d2h": len(d2h),
        "sync_calls": sum(e.name in _SYNC_CALLS for e in host),
        "launch_calls": sum("LaunchKernel" in e.name or e.name == "cudaGraphLaunch" for e in host),
        "aten_ops": sum(e.name.startswith("aten::") for e in host),
        "local_scalar_dense": sum(e.name == "aten::_local_scalar_dense" for e in host),
    }
    sort_by = "self_device_time_total" if on_gpu else "self_cpu_time_total"
    try:
        table = prof.key_averages().table(sort_by=sort_by, row_limit=15)
    except (AttributeError, KeyError):  # older torch names the device time "cuda"
        table = prof.key_averages().table(sort_by="self_cuda_time_total", row_limit=15)
    if on_gpu and sync_check:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            torch.cuda.set_sync_debug_mode("warn")
            try:
                fn()
            finally:
                torch.cuda.set_sync_debug_mode("default")
        stats["sync_warnings"] = sum("synchroniz" in str(w.message) for w in caught)
    return stats, table


def _inputs(cell: Cell) -> tuple[Any, Any]:
    n, m = cells.parse_size(cell.size)
    if cell.tasks:
        return workloads.batch_tasks("distinct", cell.tasks, n, m), None
    return workloads.workload("distinct", n, m)


#: operations whose host route (issue 22, item 3) is timed: the per-call ones
#: through the library's ``auto`` (which takes it up to
#: ``host_route.HOST_ROUTE_MAX_CELLS``), the others emulated: copy out, cpp,
#: copy back, what ``auto`` would have to do
HOST_ROUTE_OPS = ("aces-c", "aces-o", "batch-aces-c", "loo-auc")


def _host_route(cell: Cell, B: Any, device: str, threads: int) -> Callable[[], Any]:
    """The cell's call on the device tensor by way of the host (see HOST_ROUTE_OPS)."""
    import numpy as np
    import torch

    import aces_fast as af

    Bd = torch.from_numpy(np.ascontiguousarray(np.stack(B) if cell.tasks else B)).to(device)
    names = ("scores", "order", "weights", "loo_auc")

    def back(x: Any) -> Any:
        return torch.from_numpy(np.asarray(x)).to(device)

    def call() -> Any:
        if cell.op == "aces-c":
            out: Any = af.aces_c(Bd)  # auto
        elif cell.op == "aces-o":
            out = af.aces_o(Bd, steps=cells.ACES_O_STEPS, top_k=cells.ACES_O_TOP_K)  # auto
        elif cell.op == "loo-auc":
            out = [back(af.loo_auc(Bd.cpu().numpy(), backend="cpp"))]
        else:
            r = af.rerank_batch(Bd.cpu().numpy(), "aces-c", backend="cpp", n_threads=threads)
            out = [back(getattr(r, k)) for k in names if getattr(r, k) is not None]
        if Bd.device.type == "cuda":
            torch.cuda.synchronize()
        return out

    return call


def _stack_call(cell: Cell, B: Any, device: str) -> Callable[[], Any]:
    """The batch cell's tasks as one (T, n, m) tensor on the device (the torch
    backend's ``rerank_stack``), synchronized after each call."""
    import numpy as np
    import torch

    import aces_fast as af

    stack = torch.from_numpy(np.stack(B)).to(device)
    method = cells.BATCH_OPS[cell.op][1]

    def call() -> Any:
        out = af.rerank_batch(stack, method, backend="torch")
        if stack.device.type == "cuda":
            torch.cuda.synchronize()
        return out

    return call


def run_cell(cell: Cell, impl: str, threads: int, budget: float) -> dict[str, Any]:
    B, w = _inputs(cell)
    out: dict[str, Any] = {"cell": cell.name, "goal": cell.goal}
    torch_fn = (
        _stack_call(cell, B, cells.TORCH_DEVICE[impl])
        if cell.stack
        else cells.make_call(cell.op, impl, B, w, threads=threads)
    )
    out["device"] = _timed(torch_fn, budget, 50)
    if cell.op in HOST_ROUTE_OPS:
        route = _host_route(cell, B, cells.TORCH_DEVICE[impl], threads)
        out["host_route"] = _timed(route, budget, 50)
    if cell.time_cpp:
        cpp_fn = cells.make_call(cell.op, "cpp", B, w, threads=threads)
        out["cpp"] = _timed(cpp_fn, budget, 50)
        out["cpp_over_device"] = out["cpp"]["median_s"] / out["device"]["median_s"]
    if cell.tasks:
        out["device_tasks_per_s"] = cell.tasks / out["device"]["median_s"]
        if cell.time_cpp:
            out["cpp_tasks_per_s"] = cell.tasks / out["cpp"]["median_s"]
    # a call's length: the warm-up's may include compiling (the fused mode's)
    warm = min(out["device"]["warmup_s"], out["device"]["median_s"])
    if warm < PROFILE_MAX_S:  # the profiler's events of a long call
        device = cells.TORCH_DEVICE[impl]
        out["profile"], out["table"] = _profile(torch_fn, device, warm < SYNC_CHECK_MAX_S)
    return out


def _row(r: dict[str, Any]) -> str:
    if "error" in r:
        return f"{r['cell']:<28} FAILED: {r['error']}"
    dev = r["device"]["median_s"] * 1e3
    cpp = f"{r['cpp']['median_s'] * 1e3:10.3f}" if "cpp" in r else f"{'-':>10}"
    ratio = f"{r['cpp_over_device']:8.2f}" if "cpp_over_device" in r else f"{'-':>8}"
    route = f"{r['host_route']['median_s'] * 1e3:10.3f}" if "host_route" in r else f"{'-':>10}"
    p = r.get("profile")
    counts = (
        f"{p['kernels']:>8}{p['sync_calls']:>6}{p['copies_d2h']:>5}"
        f"{p['device_busy_ms']:>9.2f}{p['wall_ms']:>9.2f}"
        if p
        else f"{'(call too long to profile)':>37}"
    )
    return f"{r['cell']:<28}{cpp}{dev:10.3f}{ratio}{route}{counts}  {r['goal']}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda", help="torch device (default cuda)")
    parser.add_argument("--quick", action="store_true", help="small cells (CPU tensors)")
    parser.add_argument("--cell-budget", type=float, default=8.0, help="seconds per timing")
    parser.add_argument("--threads", type=int, default=cells.host_cores(), help="cpp threads")
    parser.add_argument("--only", help="comma-separated cell names' operations to run")
    parser.add_argument("--json", help="write every number to this file")
    parser.add_argument("--tables", help="write the profiler tables to this file")
    args = parser.parse_args(argv)

    import torch

    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print(f"gpu_profile: no CUDA device is available (torch {torch.__version__})")
        return 2
    # the bench's device implementation, pointed at --device
    cells.TORCH_DEVICE["torch-cuda"] = args.device
    if torch.device(args.device).type == "cuda":
        p = torch.cuda.get_device_properties(0)
        print(f"gpu_profile: {p.name}, torch {torch.__version__}, cpp on {args.threads} threads")
    import aces_fast as af

    if af.backends.get_backend("torch").fused:  # ACES_FAST_TORCH_FUSED=1
        # compiled before the cells, so that no cell's warm-up call (its only
        # sample when it is longer than --cell-budget) is the compiling
        facts = af.warmup("torch", progress=False)
        print(f"gpu_profile: fused mode, compiled {facts['compiled']} variants: {facts['steps']} s")
    chosen = QUICK_CELLS if args.quick else CELLS
    if args.only:
        ops = set(args.only.split(","))
        chosen = tuple(c for c in chosen if c.op in ops)
    results, failed = [], False
    header = (
        f"{'cell':<28}{'cpp ms':>10}{'dev ms':>10}{'cpp/dev':>8}{'host ms':>10}{'kern':>8}{'sync':>6}"
        f"{'d2h':>5}{'busy ms':>9}{'wall ms':>9}  goal"
    )
    print(header, flush=True)
    for cell in chosen:
        try:
            r = run_cell(cell, "torch-cuda", args.threads, args.cell_budget)
        except Exception as exc:  # one failing cell must not cost the others
            failed = True
            r = {"cell": cell.name, "error": f"{type(exc).__name__}: {exc}"}
            traceback.print_exc()
        results.append(r)
        print(_row(r), flush=True)
        if args.json:  # after every cell: a run cut short keeps what it measured
            kept = [{k: v for k, v in x.items() if k != "table"} for x in results]
            Path(args.json).write_text(json.dumps(kept, indent=1))
        if args.tables and "table" in r:
            with open(args.tables, "a") as f:
                f.write(f"\n== {r['cell']}\n{json.dumps(r['profile'])}\n{r['table']}\n")
    print("\n" + header)
    for r in results:
        print(_row(r))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
