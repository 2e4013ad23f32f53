"""Two builds of aces_fast timed against each other in one process, call by call.

Not part of the package: a measuring script for kernel work on a shared, noisy
host. Timing the old and the new build in separate processes, even
alternated, mixes the change with the host's moods (this project's 2-core
machine ran the same loop at 15 or at 21-24 microseconds a task for tens of
seconds at a time). Here both builds are imported side by side (copied under
the names ``aces_fast_base`` and ``aces_fast_new``: the package imports itself
relatively, so each copy runs its own compiled extension), and each round
runs every cell on both, the order flipping every round; the figure reported
is the median over rounds of new / base, whose spread says how far to trust
it. Both builds must give the same outputs on every cell's tasks (checked
first; a difference is reported and the exit status is 1).

    cp -r src/aces_fast /tmp/base/      # before the change (built)
    ... change, tools/dev_build.sh ...
    python tools/ab_builds.py /tmp/base/aces_fast --rounds 200

A cell is ``method:NxM[:family[:tasks[:where]]]``: ``rerank_batch`` of
``tasks`` matrices of a synthetic family (``distinct`` or ``dup-heavy``,
benchmarks.harness.workloads) by the cpp backend on ``--threads`` threads;
``where`` is ``cache`` (eight matrices repeated, which stay in cache: the
kernels alone), ``memory`` (all different: the batch as it streams) or
``packed`` (all different, bit-packed rows as ``rerank-dataset`` reads them,
ranked by the cpp backend's ``rerank_packed``).
"""

from __future__ import annotations

import argparse
import importlib
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_CELLS = ("aces-c:200x500:distinct:1000:cache", "aces-c:24x100:distinct:20000:memory")


def parse_cell(spec: str) -> dict[str, Any]:
    """``method:NxM[:family[:tasks[:where]]]`` as a dict (ValueError names the problem)."""
    parts = spec.split(":")
    if not 2 <= len(parts) <= 5:
        raise ValueError(f"a cell is method:NxM[:family[:tasks[:where]]], got {spec!r}")
    method, size = parts[:2]
    family = parts[2] if len(parts) > 2 else "distinct"
    tasks = parts[3] if len(parts) > 3 else "1000"
    where = parts[4] if len(parts) > 4 else "cache"
    try:
        n, m = (int(x) for x in size.split("x"))
        count = int(tasks)
    except ValueError:
        raise ValueError(f"cell {spec!r}: size is NxM and tasks an integer") from None
    if n < 1 or m < 1 or count < 1:
        raise ValueError(f"cell {spec!r}: sizes and tasks must be >= 1")
    if where not in ("cache", "memory", "packed"):
        raise ValueError(f"cell {spec!r}: where is cache, memory or packed, got {where!r}")
    return {"spec": spec, "method": method, "n": n, "m": m, "family": family,
            "tasks": count, "where": where}  # fmt: skip


def cell_tasks(cell: dict[str, Any]) -> list[np.ndarray]:
    from benchmarks.harness.workloads import batch_tasks

    distinct = 8 if cell["where"] == "cache" else cell["tasks"]
    made = list(batch_tasks(cell["family"], min(distinct, cell["tasks"]), cell["n"], cell["m"]))
    return (made * -(-cell["tasks"] // len(made)))[: cell["tasks"]]


def packed(tasks: list[np.ndarray]) -> SimpleNamespace:
    """The tasks' rows bit-packed most significant bit first, as the dataset
    layout stores them (aces_fast.parquet.Packed's arrays)."""
    rows = [np.packbits(B, axis=1).ravel() for B in tasks]
    offsets = np.zeros(len(rows) + 1, np.int64)
    np.cumsum([len(r) for r in rows], out=offsets[1:])
    n = np.array([B.shape[0] for B in tasks], np.int64)
    m = np.array([B.shape[1] for B in tasks], np.int64)
    return SimpleNamespace(data=np.concatenate(rows), offsets=offsets, n=n, m=m)


def runner(mod: Any, cell: dict[str, Any], tasks: list[np.ndarray], threads: int) -> Any:
    """A call that ranks the cell's tasks with one build (returns its results)."""
    method = cell["method"]
    if cell["where"] != "packed":
        return lambda: mod.rerank_batch(tasks, method, backend="cpp", n_threads=threads)
    batch = packed(tasks)
    backend = importlib.import_module(f"{mod.__name__}.backends").get_backend("cpp")
    values = importlib.import_module(f"{mod.__name__}._registry").get(method).validate({})

    def run() -> Any:
        out = backend.rerank_packed(batch, method, values, threads)
        if out is None:
            raise SystemExit(f"ab_builds: {cell['spec']}: rerank_packed declined the batch")
        return out

    return run


def load_builds(base: Path, new: Path, work: Path) -> dict[str, Any]:
    """Both packages, imported under their own names from copies in ``work``."""
    mods = {}
    for name, src in (("base", base), ("new", new)):
        if not (src / "__init__.py").is_file():
            raise SystemExit(f"ab_builds: {src} is not an aces_fast package folder")
        shutil.copytree(
            src, work / f"aces_fast_{name}", ignore=shutil.ignore_patterns("__pycache__")
        )
    sys.path.insert(0, str(work))
    for name in ("base", "new"):
        mod = importlib.import_module(f"aces_fast_{name}")
        core = importlib.import_module(f"aces_fast_{name}._core")
        if not Path(core.__file__).resolve().is_relative_to(work / f"aces_fast_{name}"):
            raise SystemExit(f"ab_builds: the {name} build imported {core.__file__}")
        mods[name] = mod
    return mods


def same_outputs(mods: dict[str, Any], cell: dict[str, Any], tasks: list[np.ndarray],
                 threads: int) -> str | None:  # fmt: skip
    """``None`` when both builds return the same bits on the cell's distinct tasks."""
    sample = tasks[: min(len(tasks), 64)]
    out = {k: runner(mod, cell, sample, threads)() for k, mod in mods.items()}
    for t, (a, b) in enumerate(zip(out["base"], out["new"], strict=True)):
        for field in ("scores", "order", "weights", "loo_auc", "objective"):
            x, y = getattr(a, field, None), getattr(b, field, None)
            if (x is None) != (y is None) or (
                x is not None and np.asarray(x).tobytes() != np.asarray(y).tobytes()
            ):
                return f"task {t}: {field} differs"
    return None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("base", type=Path, help="the baseline's aces_fast package folder (built)")
    ap.add_argument("--new", type=Path, default=ROOT / "src" / "aces_fast")
    ap.add_argument("--cell", action="append", help=f"(repeatable; default {DEFAULT_CELLS})")
    ap.add_argument("--rounds", type=int, default=100)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--json", help="write every round's times to this file")
    args = ap.parse_args(argv)
    if args.rounds < 1 or args.threads < 1:
        ap.error("--rounds and --threads must be >= 1")
    try:
        cells = [parse_cell(s) for s in (args.cell or DEFAULT_CELLS)]
    except ValueError as exc:
        ap.error(str(exc))
    sys.path.insert(0, str(ROOT))  # benchmarks.harness
    with tempfile.TemporaryDirectory(prefix="ab-builds-") as tmp:
        mods = load_builds(args.base.resolve(), args.new.resolve(), Path(tmp))
        data = [cell_tasks(c) for c in cells]
        failed = False
        for c, tasks in zip(cells, data, strict=True):
            diff = same_outputs(mods, c, tasks, args.threads)
            if diff:
                print(f"ab_builds: {c['spec']}: the builds differ ({diff})")
                failed = True
        times: dict[str, dict[str, list[float]]] = {
            c["spec"]: {"base": [], "new": []} for c in cells
        }
        calls = [
            {k: runner(mods[k], c, tasks, args.threads) for k in mods}
            for c, tasks in zip(cells, data, strict=True)
        ]
        for r in range(args.rounds):
            for c, tasks, call in zip(cells, data, calls, strict=True):
                for k in ("base", "new") if r % 2 == 0 else ("new", "base"):
                    tick = time.perf_counter()
                    call[k]()
                    times[c["spec"]][k].append((time.perf_counter() - tick) / len(tasks) * 1e6)
    print(f"{args.rounds} rounds, {args.threads} thread(s), microseconds a task")
    print(f"{'cell':40s} {'base':>8s} {'new':>8s} {'new/base':>9s} {'p25-p75':>13s}")
    for spec, t in times.items():
        base, new = np.array(t["base"]), np.array(t["new"])
        q25, q50, q75 = np.percentile(new / base, [25, 50, 75])
        print(
            f"{spec:40s} {np.median(base):8.3f} {np.median(new):8.3f} {q50:9.4f}"
            f" {q25:6.3f}-{q75:.3f}"
        )
    if args.json:
        Path(args.json).write_text(json.dumps({"threads": args.threads, "times": times}))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
