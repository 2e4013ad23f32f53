"""``aces-fast bench``: time aces_fast against the baselines a user would write.

The benchmark matrix is operation x size x implementation x threads:

* operations: ``loo-auc`` (uniform weights), ``loo-auc-weighted`` (float
  weights), ``aces-c``, ``aces-o`` (paper defaults: top_k=24, 90 Adam steps) and
  ``aces-o-all`` (``top_k=None``);
* sizes (candidates x tests): 24x100, 200x500, 2000x1000, 20000x1000, planted
  matrices with duplicate rows and constant columns
  (:func:`aces_fast._baselines.make_pass_matrix`);
* implementations: every aces_fast backend (cpp, numba, torch, numpy) and, in
  the same group, the baseline for the operation -- ``numpy-rankdata``
  (vectorized NumPy + ``scipy.stats.rankdata``) for LOO-AUC and ACES-C,
  ``torch-autograd`` (dense pair tensor + ``torch.optim.Adam``) for ACES-O;
* threads: 1 (every library pinned: threadpoolctl, torch, numba, the cpp
  backend's ``n_threads``) and 2.

Combinations that cannot run (a missing backend, a pair tensor that does not fit
in memory, an estimated time over the per-call budget) are skipped with the
reason, never silently. Times are medians over an adaptive number of repeats,
after an untimed warm-up call (and numba's ``warmup()``), so no JIT or lazy
import cost is inside a measurement.

The ``benchmarks/`` pytest-benchmark suite uses the same cases, workloads,
skip rules and thread pinning, defined in :mod:`aces_fast._bench_matrix` and
re-exported here.

Run ``python -m aces_fast.bench --help`` (or ``aces-fast bench``).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import importlib
import importlib.util
import json
import math
import os
import platform
import re
import subprocess
import sys
import time
from dataclasses import asdict
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

# re-exported: benchmarks/ and the tests use them as ``bench.<name>``
from ._bench_matrix import (ACES_O_STEPS, ACES_O_TOP_K, BACKENDS, BASELINES,
                            IMPLS, OPS, SIZES, SLOW_ROWS, Case, Timing, _available_memory,
                            all_cases, estimate_seconds, impls_for, load_runtimes, make_call,
                            measure, measure_group, quick_cases, skip_reason, thread_limit,
                            workload)

__all__ = [
    # the matrix (from aces_fast._bench_matrix)
    "ACES_O_STEPS", "ACES_O_TOP_K", "BACKENDS", "BASELINES", "IMPLS", "OPS", "SIZES",
    "SLOW_ROWS", "Case", "Timing", "all_cases", "estimate_seconds", "impls_for",
    "load_runtimes", "make_call", "measure", "measure_group", "quick_cases", "skip_reason",
    "thread_limit", "workload",
    # running and reporting
    "add_arguments", "evaluate_targets", "format_table", "format_targets", "machine_info",
    "main", "measure_import_time", "plot", "run", "run_cases", "select_cases", "speedups",
    "versions",
]


def measure_import_time(repeats: int = 5) -> Dict[str, float]:
    """Seconds to ``import aces_fast`` in fresh interpreters (best of ``repeats``).

    ``importtime_s``: the package's cumulative time from ``python -X importtime``;
    ``numpy_s``: the part of that run spent importing numpy; ``wall_s``: wall time
    of ``python -c "import aces_fast"`` minus ``python -c pass``.
    """
    env = dict(os.environ)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    env.pop("PYTHONPROFILEIMPORTTIME", None)

    def wall(code: str) -> float:
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], env=env, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return time.perf_counter() - t0

    runs: List[Tuple[float, float]] = []  # (aces_fast cumulative, numpy cumulative)
    walls: List[Tuple[float, float]] = []  # (import aces_fast, pass)
    for _ in range(repeats):
        proc = subprocess.run([sys.executable, "-X", "importtime", "-c", "import aces_fast"],
                              env=env, check=True, capture_output=True, text=True)
        found: Dict[str, float] = {}
        for line in proc.stderr.splitlines():
            match = re.match(r"import time:\s*\d+\s*\|\s*(\d+)\s*\|\s*(\S+)\s*$", line)
            if match and match.group(2).strip() in ("aces_fast", "numpy"):
                found[match.group(2)] = int(match.group(1)) * 1e-6
        if "aces_fast" in found:
            runs.append((found["aces_fast"], found.get("numpy", 0.0)))
        walls.append((wall("import aces_fast"), wall("pass")))
    best = min(runs) if runs else (float("nan"), float("nan"))
    wall_s = min(w[0] for w in walls) - min(w[1] for w in walls)
    return {"importtime_s": best[0], "numpy_s": best[1], "wall_s": max(0.0, wall_s)}


# ---------------------------------------------------------------------------
# machine and versions


def machine_info() -> Dict[str, Any]:
    """CPU model (from /proc/cpuinfo), cores, memory, platform."""
    cpu = platform.processor() or platform.machine()
    with contextlib.suppress(OSError):
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return {"cpu": cpu, "logical_cores": os.cpu_count(), "usable_cores": usable,
            "memory_available_gb": round(_available_memory() / 1e9, 1),
            "load_average": os.getloadavg() if hasattr(os, "getloadavg") else None,
            "platform": platform.platform()}


def versions() -> Dict[str, Any]:
    """Versions of aces_fast, Python and every library the benchmark touches."""
    import aces_fast

    out: Dict[str, Any] = {"aces_fast": aces_fast.__version__,
                           "python": sys.version.split()[0], "numpy": np.__version__}
    for mod in ("scipy", "numba", "torch", "matplotlib", "threadpoolctl"):
        try:
            out[mod] = __import__(mod).__version__
        except ImportError:
            out[mod] = None
    from .backends import BackendUnavailableError, get_backend

    try:
        out["cpp_backend"] = get_backend("cpp").info()
    except BackendUnavailableError as exc:
        out["cpp_backend"] = f"unavailable: {exc.reason}"
    return out


def _thread_libraries() -> List[Dict[str, Any]]:
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return []
    return [{k: lib.get(k) for k in ("user_api", "internal_api", "prefix", "version")}
            for lib in threadpool_info()]


# ---------------------------------------------------------------------------
# running the matrix


def run_cases(cases: Sequence[Case], min_time: float, max_call_s: float,
              log: Callable[[str], None] = lambda s: None,
              single_call: float = 20.0) -> List[Dict[str, Any]]:
    """Measure every case; skipped ones carry ``skipped`` (the reason).

    Cases run under their thread limit, one operation x size group at a time
    with interleaved samples (:func:`measure_group`).
    """
    rows: Dict[Case, Dict[str, Any]] = {}
    for threads in sorted({c.threads for c in cases}):
        with thread_limit(threads):
            groups: Dict[str, List[Case]] = {}
            for case in (c for c in cases if c.threads == threads):
                groups.setdefault(case.group, []).append(case)
            for group in groups.values():
                B, w = workload(group[0].n, group[0].m)
                runnable = []
                for case in group:
                    rows[case] = {**asdict(case), "size": case.size,
                                  "baseline": case.is_baseline, "skipped": None}
                    reason = skip_reason(case, B, max_call_s)
                    if reason is None:
                        runnable.append(case)
                    else:
                        rows[case]["skipped"] = reason
                        log(f"  skip {case.id}: {reason}")
                calls = [make_call(c.op, c.impl, B, w) for c in runnable]
                timings = measure_group(calls, min_time, single_call=single_call)
                for case, timing in zip(runnable, timings):
                    rows[case].update(asdict(timing))
                    log(f"  {case.id:42s} {_fmt_time(timing.median_s):>9s}  "
                        f"({timing.repeats}x{timing.number})")
    return [rows[c] for c in cases]


def speedups(results: Sequence[Dict[str, Any]]) -> None:
    """Add ``speedup`` = baseline median / own median to each measured backend row."""
    base = {(r["op"], r["size"], r["threads"]): r["median_s"] for r in results
            if r["baseline"] and not r["skipped"]}
    for r in results:
        if not r["baseline"] and not r["skipped"]:
            b = base.get((r["op"], r["size"], r["threads"]))
            r["speedup"] = b / r["median_s"] if b else None


def _default_backend() -> str:
    from .backends import resolve_backend

    return resolve_backend("auto").name


def _cell(results, op, size, impl, threads=1):
    for r in results:
        if (r["op"], r["size"], r["impl"], r["threads"]) == (op, size, impl, threads):
            return r
    return None


def evaluate_targets(results: Sequence[Dict[str, Any]],
                     import_time: Optional[Dict[str, float]]) -> List[Dict[str, Any]]:
    """The issue's performance targets: measured value, target, met / not met / not measured.

    Ratios are baseline time over aces_fast time (default backend, one thread);
    the numba target is the worst numba/cpp time ratio over all one-thread cells.
    """
    fast = _default_backend()
    out: List[Dict[str, Any]] = []

    def ratio_target(name, op, size, baseline, goal):
        mine, ref = _cell(results, op, size, fast), _cell(results, op, size, baseline)
        entry = {"target": name, "goal": f">= {goal}x", "backend": fast}
        if mine and ref and not mine["skipped"] and not ref["skipped"]:
            val = ref["median_s"] / mine["median_s"]
            entry.update(measured=val, shown=f"{val:.1f}x", status="met" if val >= goal
                         else "not met")
        else:
            entry.update(measured=None, shown="-", status="not measured")
        out.append(entry)

    ratio_target(f"ACES-C 200x500, 1 thread, {fast} vs baseline (a) numpy-rankdata",
                 "aces-c", "200x500", "numpy-rankdata", 150)
    ratio_target(f"ACES-O K=24 T=90 200x500, 1 thread, {fast} vs baseline (b) torch-autograd",
                 "aces-o", "200x500", "torch-autograd", 50)
    ratio_target(f"LOO-AUC 20000x1000, 1 thread, {fast} vs vectorized NumPy rankdata",
                 "loo-auc", "20000x1000", "numpy-rankdata", 100)

    pairs = []
    for r in results:
        if r["impl"] == "numba" and r["threads"] == 1 and not r["skipped"]:
            c = _cell(results, r["op"], r["size"], "cpp")
            if c and not c["skipped"]:
                pairs.append((r["median_s"] / c["median_s"], f"{r['op']} {r['size']}"))
    entry = {"target": "numba within 3x of cpp (worst 1-thread cell)", "goal": "<= 3x"}
    if pairs:
        worst, where = max(pairs)
        entry.update(measured=worst, shown=f"{worst:.2f}x ({where})",
                     status="met" if worst <= 3 else "not met")
    else:
        entry.update(measured=None, shown="-", status="not measured")
    out.append(entry)

    entry = {"target": "import aces_fast (python -X importtime, best of 5)", "goal": "<= 150 ms"}
    if import_time and not math.isnan(import_time["importtime_s"]):
        ms = import_time["importtime_s"] * 1e3
        entry.update(measured=ms, shown=f"{ms:.0f} ms (numpy {import_time['numpy_s'] * 1e3:.0f}"
                     f" ms; wall diff {import_time['wall_s'] * 1e3:.0f} ms)",
                     status="met" if ms <= 150 else "not met")
    else:
        entry.update(measured=None, shown="-", status="not measured")
    out.append(entry)
    return out


# ---------------------------------------------------------------------------
# reporting


def _fmt_time(s: Optional[float]) -> str:
    if s is None:
        return "-"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if s >= scale:
            return f"{s / scale:.3g}{unit}"
    return f"{s / 1e-9:.3g}ns"


def format_table(results: Sequence[Dict[str, Any]]) -> str:
    """One row per operation x size x threads: each implementation's median, with
    the speed-up over the group's baseline in parentheses; footnotes for skips."""
    notes: List[str] = []
    shown = [b for b in BACKENDS if any(r["impl"] == b for r in results)]
    header = ["op", "size", "thr"] + shown + ["baseline"]
    rows = [header]
    keys = []
    for r in results:
        key = (r["op"], r["size"], r["threads"])
        if key not in keys:
            keys.append(key)
    for op, size, threads in keys:
        row = [op, size, str(threads)]
        for impl in shown + ["base"]:
            cell = None
            for r in results:
                if (r["op"], r["size"], r["threads"]) == (op, size, threads) and (
                        r["impl"] == impl or (impl == "base" and r["baseline"])):
                    cell = r
            if cell is None:
                row.append("")
            elif cell["skipped"]:
                if cell["skipped"] not in notes:
                    notes.append(cell["skipped"])
                label = f"skip[{notes.index(cell['skipped']) + 1}]"
                row.append(label if impl != "base" else f"{cell['impl']} {label}")
            elif impl == "base":
                row.append(f"{cell['impl']} {_fmt_time(cell['median_s'])}")
            else:
                sp = cell.get("speedup")
                row.append(_fmt_time(cell["median_s"]) + (f" ({sp:.0f}x)" if sp else ""))
        rows.append(row)
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    lines = ["  ".join(c.ljust(wd) for c, wd in zip(r, widths)).rstrip() for r in rows]
    lines.insert(1, "  ".join("-" * wd for wd in widths))
    lines.append("(x) = speed-up over the baseline in the same group: numpy-rankdata = "
                 "baseline (a), torch-autograd = baseline (b)")
    lines += [f"[{i + 1}] {note}" for i, note in enumerate(notes)]
    return "\n".join(lines)


def format_targets(targets: Sequence[Dict[str, Any]]) -> str:
    width = max(len(t["target"]) for t in targets)
    mw = max([len("measured")] + [len(t["shown"]) for t in targets])
    lines = [f"{'target'.ljust(width)}  {'measured'.ljust(mw)}  {'goal':9s}  status"]
    for t in targets:
        lines.append(f"{t['target'].ljust(width)}  {t['shown'].ljust(mw)}  "
                     f"{t['goal']:9s}  {t['status']}")
    return "\n".join(lines)


def plot(report: Dict[str, Any], path: str) -> None:
    """Median time per implementation and size, one log-scale panel per operation
    (solid: 1 thread, dashed with open markers: 2 threads), plus the targets."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    results = [r for r in report["results"] if not r["skipped"]]
    ops = [op for op in OPS if any(r["op"] == op for r in results)]
    known = [f"{n}x{m}" for n, m in SIZES]
    ncols = 3
    nrows = max(1, math.ceil((len(ops) + 1) / ncols))
    fig, axes = plt.subplots(nrows, ncols, figsize=(5.0 * ncols, 3.9 * nrows), squeeze=False)
    flat = list(axes.ravel())
    colors = dict(zip(IMPLS, plt.rcParams["axes.prop_cycle"].by_key()["color"]))
    for ax, op in zip(flat, ops):
        here = {r["size"] for r in results if r["op"] == op}
        sizes = [s for s in known if s in here] + sorted(here - set(known))
        for impl in impls_for(op):
            for threads, style, face in ((1, "-", None), (2, "--", "none")):
                pts = sorted((sizes.index(r["size"]), r["median_s"]) for r in results
                             if r["op"] == op and r["impl"] == impl and r["threads"] == threads)
                if pts:
                    ax.plot([p[0] for p in pts], [p[1] for p in pts], style, marker="o",
                            color=colors[impl], markerfacecolor=face,
                            label=f"{impl} {threads}t")
        ax.set_yscale("log")
        ax.set_xticks(range(len(sizes)))
        ax.set_xticklabels(sizes)
        ax.set_xlim(-0.3, len(sizes) - 0.7)
        ax.set_title(OPS[op][0], fontsize=10)
        ax.set_ylabel("median s per call")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=6, ncol=2)
    text_ax = flat[len(ops)]
    text_ax.axis("off")
    lines = ["Targets (measured):"] + [
        f"{t['target']}\n    {t['shown']}  (goal {t['goal']}): {t['status']}"
        for t in report.get("targets", [])]
    text_ax.text(0.0, 1.0, "\n".join(lines), va="top", ha="left", fontsize=7,
                 family="monospace", transform=text_ax.transAxes)
    for ax in flat[len(ops) + 1:]:
        ax.axis("off")
    m = report["machine"]
    fig.suptitle(f"aces_fast {report['versions']['aces_fast']} -- {m['cpu']}, "
                 f"{m['usable_cores']} cores -- {report['date']}", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


# ---------------------------------------------------------------------------
# command line


def _parse_sizes(text: str) -> List[Tuple[int, int]]:
    sizes = []
    for part in text.split(","):
        match = re.fullmatch(r"\s*(\d+)\s*[xX]\s*(\d+)\s*", part)
        if not match or int(match.group(1)) < 1 or int(match.group(2)) < 1:
            raise argparse.ArgumentTypeError(
                f"sizes must look like 24x100,200x500 (candidates x tests); got {part!r}")
        sizes.append((int(match.group(1)), int(match.group(2))))
    return sizes


def _parse_list(allowed: Sequence[str], what: str) -> Callable[[str], List[str]]:
    def parse(text: str) -> List[str]:
        items = [s.strip() for s in text.split(",") if s.strip()]
        bad = [s for s in items if s not in allowed]
        if bad or not items:
            raise argparse.ArgumentTypeError(
                f"unknown {what} {', '.join(bad) or '(none)'}; choose from {', '.join(allowed)}")
        return items
    return parse


def _parse_threads(text: str) -> List[int]:
    try:
        threads = sorted({int(s) for s in text.split(",")})
    except ValueError:
        raise argparse.ArgumentTypeError(f"threads must be integers like 1,2; got {text!r}")
    if not threads or threads[0] < 1:
        raise argparse.ArgumentTypeError(f"threads must be >= 1; got {text!r}")
    return threads


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the ``bench`` options to ``parser``."""
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--quick", action="store_true",
                      help="the default: 24x100 and 200x500 for every operation, LOO-AUC at "
                           "20000x1000, 2 threads at 200x500; calls over 2 s are timed once "
                           "(~1-2 minutes on 2 idle cores)")
    mode.add_argument("--full", action="store_true",
                      help="every operation x size (up to 20000x1000) x 1 and 2 threads")
    parser.add_argument("--sizes", type=_parse_sizes, metavar="NxM,...",
                        help="run exactly these sizes, e.g. 24x100,2000x1000")
    parser.add_argument("--ops", type=_parse_list(tuple(OPS), "operation"), metavar="OP,...",
                        help=f"operations ({', '.join(OPS)}); default all")
    parser.add_argument("--impls", type=_parse_list(IMPLS, "implementation"),
                        metavar="NAME,...", help=f"implementations ({', '.join(IMPLS)}); "
                        "default all (a speed-up needs the operation's baseline)")
    parser.add_argument("--threads", type=_parse_threads, metavar="T,...",
                        help="thread counts, e.g. 1 or 1,2 (default: the mode's)")
    parser.add_argument("--min-time", type=float, default=None, metavar="SECONDS",
                        help="time to fill with repeats per cell (default 0.3 quick, 1 full)")
    parser.add_argument("--max-call", type=float, default=None, metavar="SECONDS",
                        help="skip cells estimated to take longer per call "
                             "(default 5 quick, 120 full)")
    parser.add_argument("--no-import-time", action="store_true",
                        help="do not measure the import time of aces_fast")
    parser.add_argument("--json", metavar="FILE", help="write the results as JSON")
    parser.add_argument("--plot", metavar="FILE.png", help="write a log-scale plot (matplotlib)")
    parser.add_argument("-q", "--quiet", action="store_true", help="no per-cell progress lines")


def select_cases(args: argparse.Namespace) -> List[Case]:
    """The cases the options ask for."""
    ops = args.ops or list(OPS)
    if args.full or args.sizes or args.threads:
        sizes = args.sizes or list(SIZES)
        threads = args.threads or ([1, 2] if args.full else [1])
        if not args.full and not args.sizes:
            sizes = list(SIZES[:2])
        return all_cases(ops, sizes, threads, args.impls)
    return [c for c in quick_cases(args.impls) if c.op in ops]


def run(args: argparse.Namespace) -> int:
    """Run the benchmark described by parsed ``args``; print the table; 0 on success."""
    quick = not args.full
    min_time = args.min_time if args.min_time is not None else (0.3 if quick else 1.0)
    max_call = args.max_call if args.max_call is not None else (5.0 if quick else 120.0)
    # a quick run takes the warm-up of a call >= 2 s as its only sample (imports
    # and JIT were paid in load_runtimes); a full run times such calls again
    single_call = 2.0 if quick else 20.0
    if min_time < 0 or max_call <= 0:
        print("aces-fast bench: --min-time must be >= 0 and --max-call > 0", file=sys.stderr)
        return 2
    if args.plot:
        if importlib.util.find_spec("matplotlib") is None:
            print("aces-fast bench: --plot needs matplotlib (pip install matplotlib)",
                  file=sys.stderr)
            return 2
    cases = select_cases(args)
    # numba's warm-up compiles every kernel (tens of seconds); caching the machine
    # code on disk makes the next run start at once. A user's explicit choice wins.
    os.environ.setdefault("ACES_FAST_NUMBA_CACHE", "1")
    log = (lambda s: None) if args.quiet else (lambda s: print(s, flush=True))
    started = time.perf_counter()
    date = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    machine = machine_info()
    log(f"aces-fast bench: {len(cases)} cells, {machine['cpu']}, "
        f"{machine['usable_cores']} cores")
    warm = load_runtimes(sorted({c.impl for c in cases}))
    results = run_cases(cases, min_time, max_call, log, single_call)
    speedups(results)
    import_time = None if args.no_import_time else measure_import_time()
    targets = evaluate_targets(results, import_time)
    report = {
        "date": date,
        "machine": machine,
        "versions": versions(),
        "threads": {"groups": sorted({c.threads for c in cases}),
                    "pinning": "threadpoolctl (BLAS/OpenMP) + torch.set_num_threads + "
                               "numba.set_num_threads + cpp backend n_threads",
                    "threadpoolctl": "threadpoolctl" in sys.modules,
                    "libraries": _thread_libraries()},
        "settings": {"mode": "full" if args.full else "quick", "min_time_s": min_time,
                     "max_call_s": max_call, "single_sample_from_s": single_call,
                     "aces_o_steps": ACES_O_STEPS,
                     "aces_o_top_k": ACES_O_TOP_K, "default_backend": _default_backend(),
                     "numba_cache": os.environ.get("ACES_FAST_NUMBA_CACHE"),
                     **warm},
        "import_time": import_time,
        "results": results,
        "targets": targets,
        "elapsed_s": time.perf_counter() - started,
    }
    v = report["versions"]
    print(f"\naces_fast {v['aces_fast']}  {date}  {machine['cpu']} "
          f"({machine['usable_cores']} cores)")
    print("  " + "  ".join(f"{k} {v[k]}" for k in ("python", "numpy", "scipy", "numba", "torch")
                           if v.get(k)))
    print(f"  threads pinned per group via {report['threads']['pinning']}"
          + ("" if report["threads"]["threadpoolctl"] else " (threadpoolctl missing: BLAS "
             "threads not pinned)"))
    print(f"  times: median per call, adaptive repeats (>= {min_time:g} s per cell)\n")
    print(format_table(results))
    print("\nTargets (measured, not asserted):")
    print(format_targets(targets))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(report, fh, indent=1, default=_json_default)
        print(f"\nwrote {args.json}")
    if args.plot:
        plot(report, args.plot)
        print(f"wrote {args.plot}")
    return 0


def _json_default(obj: Any) -> Any:
    if isinstance(obj, (np.integer, np.floating)):
        return obj.item()
    raise TypeError(f"cannot serialise {type(obj).__name__}")


def main(argv: Optional[Sequence[str]] = None) -> int:
    """``python -m aces_fast.bench [options]``."""
    parser = argparse.ArgumentParser(prog="aces-fast bench", description=__doc__.split("\n")[0])
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
