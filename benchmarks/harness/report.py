"""From pytest-benchmark JSON to the tables of ``aces-fast bench``.

The suite writes one benchmark per cell and repetition; its ``extra_info``
names the cell (``op``, ``family``, ``size``, ``impl``, ``threads``, ``rep``,
``kind``) and carries what pytest-benchmark does not compute: the per-problem
latency median and p99 of a ``real`` cell, the task count of a ``batch`` cell,
and, in a memory run, the peak working memory. A streaming cell
(``kind="stream"``: ``impl``, ``threads``, ``tasks``, ``shape``, the local
run's ``stages_s``) has no ``op``; :func:`stream_rows` reads those. The harness
adds its own facts (machine, versions, skipped cells) under the key
``aces_fast_harness``.

:func:`aggregate` turns that into one row per cell: the median over the
repetitions, and ratios computed repetition by repetition (the baseline's
median over the implementation's, both measured in the same stretch of the
same run), then their median.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from typing import Any

from .cells import ALL_SIZES, BACKENDS, BASELINES, BATCH_OPS, CALL_OPS, DEVICE_IMPLS, OPS

Cell = tuple[str, str, str, str, int]
HARNESS_KEY = "aces_fast_harness"


def _cell(info: dict[str, Any]) -> Cell:
    return (info["op"], info["family"], info["size"], info["impl"], int(info["threads"]))


def _value(bench: dict[str, Any]) -> float:
    """The number a repetition contributes: per-problem median latency for a
    ``real`` cell, else pytest-benchmark's median time per call."""
    info = bench["extra_info"]
    if info.get("kind") == "real":
        return float(info["problem_median_s"])
    return float(bench["stats"]["median"])


def _baseline_of(op: str) -> str | None:
    return CALL_OPS[op][1] if op in CALL_OPS else None


def _ratios(own: dict[int, float], other: dict[int, float]) -> list[float]:
    """other / own per repetition present in both."""
    return [other[r] / own[r] for r in sorted(own) if r in other and own[r] > 0]


def aggregate(timing: dict[str, Any], memory: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """One row per cell of a timing run (plus its skipped cells), with the
    memory run's peaks attached.

    Row keys: ``op family size impl threads kind baseline reps median_s spread_s``
    (min and max over repetitions), ``ratio`` (speed-up over the group's
    baseline, median of per-repetition ratios; ``None`` without a baseline),
    ``vs_cpp`` (time over cpp's, likewise), ``p99_s`` and ``problems`` (real),
    ``tasks`` and ``tasks_per_s`` (batch), ``vs_1_thread`` (the cell's speed-up
    over its own one-thread cell, likewise; ``None`` at one thread or without
    it), ``peak_extra_bytes`` and
    ``input_bytes`` (memory run), ``skipped`` (the reason, or ``None``);
    a device implementation's row (``torch-cuda``) also has ``speedup_vs_cpp``:
    cpp's time over its own, per repetition, then the median.
    """
    per_rep: dict[Cell, dict[int, dict[str, Any]]] = {}
    for bench in timing.get("benchmarks", []):
        info = bench.get("extra_info", {})
        if "op" not in info:
            continue
        per_rep.setdefault(_cell(info), {})[int(info.get("rep", 0))] = bench
    values = {c: {r: _value(b) for r, b in reps.items()} for c, reps in per_rep.items()}

    rows: list[dict[str, Any]] = []
    for cell, reps in per_rep.items():
        op, family, size, impl, threads = cell
        vals = list(values[cell].values())
        first = reps[min(reps)]["extra_info"]
        row: dict[str, Any] = {
            "op": op,
            "family": family,
            "size": size,
            "impl": impl,
            "threads": threads,
            "kind": first.get("kind", "call"),
            "baseline": impl in BASELINES,
            "reps": len(vals),
            "median_s": statistics.median(vals),
            "spread_s": [min(vals), max(vals)],
            "ratio": None,
            "vs_cpp": None,
            "skipped": None,
        }
        base = _baseline_of(op)
        if base and impl != base and (op, family, size, base, threads) in values:
            ratios = _ratios(values[cell], values[(op, family, size, base, threads)])
            row["ratio"] = statistics.median(ratios) if ratios else None
        one = (op, family, size, impl, 1)
        row["vs_1_thread"] = None
        if threads != 1 and one in values:
            speedups = _ratios(values[cell], values[one])
            row["vs_1_thread"] = statistics.median(speedups) if speedups else None
        if impl != "cpp" and (op, family, size, "cpp", threads) in values:
            inverse = _ratios(values[(op, family, size, "cpp", threads)], values[cell])
            row["vs_cpp"] = statistics.median(inverse) if inverse else None
        if impl in DEVICE_IMPLS:
            over = values.get((op, family, size, "cpp", threads), {})
            speedups = _ratios(values[cell], over)
            row["speedup_vs_cpp"] = statistics.median(speedups) if speedups else None
        if row["kind"] == "real":
            row["p99_s"] = statistics.median(
                float(b["extra_info"]["problem_p99_s"]) for b in reps.values()
            )
            row["problems"] = first.get("problems")
        if row["kind"] == "batch":
            row["tasks"] = first.get("tasks")
            row["tasks_per_s"] = row["tasks"] / row["median_s"] if row["tasks"] else None
        rows.append(row)

    seen = {(r["op"], r["family"], r["size"], r["impl"], r["threads"]) for r in rows}
    for skip in timing.get(HARNESS_KEY, {}).get("skipped", []):
        cell = _cell(skip)
        if cell not in seen:
            seen.add(cell)
            rows.append(
                {
                    "op": cell[0],
                    "family": cell[1],
                    "size": cell[2],
                    "impl": cell[3],
                    "threads": cell[4],
                    "kind": skip.get("kind", "call"),
                    "baseline": cell[3] in BASELINES,
                    "skipped": skip["reason"],
                }
            )
    if memory is not None:
        peaks: dict[Cell, dict[str, Any]] = {}
        for bench in memory.get("benchmarks", []):
            info = bench.get("extra_info", {})
            if "peak_extra_bytes" in info:
                peaks[_cell(info)] = info
        for row in rows:
            info = peaks.get((row["op"], row["family"], row["size"], row["impl"], row["threads"]))
            if info is not None:
                row["peak_extra_bytes"] = info["peak_extra_bytes"]
                row["input_bytes"] = info.get("input_bytes")
    rows.sort(key=_order)
    return rows


#: the streaming cells' implementations, in report order
STREAM_IMPLS = ("memory", "local", "ray")


def stream_rows(timing: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per streaming cell (``benchmarks/test_bench_stream.py``) of a
    timing run: ``impl`` (``memory``: ``rerank_batch`` on matrices already in
    memory; ``local``: the whole ``rerank-dataset`` run; ``ray``), ``threads``,
    ``tasks``, ``shape`` (the problems', ``NxM``), ``median_s`` and ``spread_s`` (per run), ``tasks_per_s`` (tasks
    over the median), ``vs_1_thread`` (the same implementation's one-thread
    median over this one's) and ``stages_s`` (seconds per stage of the last run,
    summed over the threads that ran it; local only). Sorted by implementation,
    then threads."""
    rows: list[dict[str, Any]] = []
    for bench in timing.get("benchmarks", []):
        info = bench.get("extra_info", {})
        if info.get("kind") != "stream" or not info.get("tasks"):
            continue
        stats = bench["stats"]
        rows.append(
            {
                "impl": info["impl"],
                "threads": int(info["threads"]),
                "tasks": int(info["tasks"]),
                "shape": info["shape"],
                "median_s": float(stats["median"]),
                "spread_s": [float(stats["min"]), float(stats["max"])],
                "tasks_per_s": int(info["tasks"]) / float(stats["median"]),
                "vs_1_thread": None,
                "stages_s": info.get("stages_s"),
            }
        )
    one = {r["impl"]: r["median_s"] for r in rows if r["threads"] == 1}
    for r in rows:
        if r["threads"] != 1 and r["impl"] in one:
            r["vs_1_thread"] = one[r["impl"]] / r["median_s"]
    order = {impl: k for k, impl in enumerate(STREAM_IMPLS)}
    rows.sort(key=lambda r: (order.get(r["impl"], len(order)), r["threads"]))
    return rows


def format_stream_table(rows: Sequence[dict[str, Any]]) -> str:
    """The streaming table (:func:`stream_rows`), ``""`` without rows."""
    if not rows:
        return ""
    stages = [s for r in rows for s in r.get("stages_s") or {}]
    names = list(dict.fromkeys(stages))
    body = []
    for r in rows:
        line = [r["impl"], str(r["threads"]), f"{r['tasks_per_s']:,.0f}/s"]
        line.append(fmt_ratio(r["vs_1_thread"]) if r.get("vs_1_thread") else "")
        got = r.get("stages_s") or {}
        line += [f"{got[s]:.3g}" if s in got else "" for s in names]
        body.append(line)
    tasks, shape = rows[0]["tasks"], rows[0]["shape"]
    return "\n".join(
        [
            (
                f"Streaming, ACES-C on {tasks:,} problems of {shape} with labels: tasks per "
                "second (median run); memory = rerank_batch on the matrices in memory, local = "
                "the whole rerank-dataset run; stages: seconds of the last local run, summed "
                "over the threads that ran them"
            ),
            "",
            *_grid(["impl", "thr", "tasks/s", "vs 1 thr", *names], body),
        ]
    )


def _order(row: dict[str, Any]) -> tuple[Any, ...]:
    impls = BACKENDS + DEVICE_IMPLS + BASELINES
    size = ALL_SIZES.index(row["size"]) if row["size"] in ALL_SIZES else len(ALL_SIZES)
    return (
        OPS.index(row["op"]) if row["op"] in OPS else len(OPS),
        row["family"],
        size,
        row["size"],
        row["threads"],
        impls.index(row["impl"]) if row["impl"] in impls else 99,
    )


# ---------------------------------------------------------------------------
# text tables


def fmt_time(s: float | None) -> str:
    """``1.23ms``-style text for seconds (``-`` for ``None``)."""
    if s is None or (isinstance(s, float) and math.isnan(s)):
        return "-"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if s >= scale:
            return f"{s / scale:.3g}{unit}"
    return f"{s / 1e-9:.3g}ns"


def fmt_bytes(b: float | None) -> str:
    """``12.3MiB``-style text (``-`` for ``None``; ``<4KiB`` below one page, the
    resolution of a resident-memory measurement)."""
    if b is None:
        return "-"
    if b < 4096:
        return "<4KiB"
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if b >= scale:
            return f"{b / scale:.3g}{unit}"
    return f"{int(b)}B"


def _grid(header: list[str], rows: list[list[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    lines = [
        "  ".join(c.ljust(w) for c, w in zip(header, widths)).rstrip(),
        "  ".join("-" * w for w in widths),
    ]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
    return lines


def _groups(rows: Iterable[dict[str, Any]]) -> list[tuple[str, str, str, int]]:
    keys: list[tuple[str, str, str, int]] = []
    for r in rows:
        key = (r["op"], r["family"], r["size"], r["threads"])
        if key not in keys:
            keys.append(key)
    return keys


def _table(rows: Sequence[dict[str, Any]], kind: str, text, notes: list[str]) -> list[str]:
    """One line per group of ``kind``; ``text(row)`` renders a measured cell."""
    mine = [r for r in rows if r["kind"] == kind]
    if not mine:
        return []
    impls = [i for i in BACKENDS + DEVICE_IMPLS if any(r["impl"] == i for r in mine)]
    has_base = any(r["baseline"] for r in mine)
    header = ["op", "family", "size", "thr"] + impls + (["baseline"] if has_base else [])
    body = []
    for op, family, size, threads in _groups(mine):
        line = [op, family, size, str(threads)]
        group = [
            r
            for r in mine
            if (r["op"], r["family"], r["size"], r["threads"]) == (op, family, size, threads)
        ]
        for impl in impls + (["*base"] if has_base else []):
            cell = next(
                (r for r in group if r["impl"] == impl or (impl == "*base" and r["baseline"])), None
            )
            if cell is None:
                line.append("")
                continue
            prefix = f"{cell['impl']} " if impl == "*base" else ""
            if cell.get("skipped"):
                if cell["skipped"] not in notes:
                    notes.append(cell["skipped"])
                line.append(f"{prefix}skip[{notes.index(cell['skipped']) + 1}]")
            else:
                line.append(prefix + text(cell))
        body.append(line)
    return _grid(header, body)


def fmt_ratio(r: float) -> str:
    """``468x``, ``3.1x``, ``0.27x`` (two significant digits below 10)."""
    return f"{r:.0f}x" if r >= 10 else f"{r:.2g}x"


def _with_ratio(text: str, row: dict[str, Any]) -> str:
    return text + (f" ({fmt_ratio(row['ratio'])})" if row.get("ratio") else "")


def _rate(r: dict[str, Any]) -> str:
    """A batch cell's tasks per second, else the median time per call."""
    return f"{r['tasks_per_s']:,.0f}/s" if r.get("tasks_per_s") else fmt_time(r["median_s"])


def _scaling(rows: Sequence[dict[str, Any]]) -> list[str]:
    """Per implementation and cell measured at several thread counts: the rate
    (tasks/s for a batch, time per call otherwise) and the speed-up over one
    thread at each count."""
    by: dict[tuple[str, str, str, str], dict[int, dict[str, Any]]] = {}
    for r in rows:
        if r["kind"] in ("call", "batch") and not r.get("skipped"):
            by.setdefault((r["op"], r["family"], r["size"], r["impl"]), {})[r["threads"]] = r
    counts = sorted({t for d in by.values() if len(d) > 1 for t in d})
    body = []
    for key, d in by.items():
        if len(d) < 2 or 1 not in d:
            continue
        line = list(key)
        for t in counts:
            r = d.get(t)
            if r is None:
                line.append("")
                continue
            rate = _rate(r)
            line.append(
                rate + (f" ({fmt_ratio(r['vs_1_thread'])})" if r.get("vs_1_thread") else "")
            )
        body.append(line)
    if not body:
        return []
    return _grid(["op", "family", "size", "impl"] + [f"{t} thr" for t in counts], body)


def format_device_table(rows: Sequence[dict[str, Any]]) -> str:
    """A device run's comparison: per cell, cpp on all cores, each device
    implementation, and cpp / device (the device's speed-up, measured side by
    side); ``""`` when no row is a device implementation's."""
    body = []
    for op, family, size, threads in _groups(rows):
        group = {
            r["impl"]: r
            for r in rows
            if (r["op"], r["family"], r["size"], r["threads"]) == (op, family, size, threads)
        }
        for impl in DEVICE_IMPLS:
            dev = group.get(impl)
            if dev is None:
                continue
            cpp = group.get("cpp")
            what = f"{size} x{dev['tasks']}" if dev.get("tasks") else size
            line = [op, family, what]
            for r in (cpp, dev):
                if r is None:
                    line.append("")
                elif r.get("skipped"):
                    line.append("skipped")
                else:
                    line.append(
                        _rate(r) + (f" {fmt_time(r['median_s'])}" if r.get("tasks") else "")
                    )
            ratio = dev.get("speedup_vs_cpp")
            line.append(fmt_ratio(ratio) if ratio else "-")
            body.append(line)
    if not body:
        return ""
    threads = next((r["threads"] for r in rows if r["impl"] in DEVICE_IMPLS), "?")
    reasons = sorted({r["skipped"] for r in rows if r["impl"] in DEVICE_IMPLS and r.get("skipped")})
    lines = [
        (
            f"cpp on all {threads} cores vs the torch backend on CUDA tensors (synchronized "
            "after every call): median per call, or tasks/s and time per batch; cpp/cuda = "
            "speed-up of cuda, per repetition, then the median"
        ),
        "",
        *_grid(["op", "family", "size", f"cpp {threads}t", "torch-cuda", "cpp/cuda"], body),
    ]
    lines += [f"skipped: {why}" for why in reasons]
    return "\n".join(lines)


def format_tables(rows: Sequence[dict[str, Any]]) -> str:
    """The per-call, real-problem, batch and memory tables, with footnotes for skips."""
    notes: list[str] = []
    out: list[str] = []
    call = _table(rows, "call", lambda r: _with_ratio(fmt_time(r["median_s"]), r), notes)
    if call:
        out += [
            (
                "Per call: median time; (Nx) = speed-up over the group's baseline, "
                "measured in the same run"
            ),
            "",
            *call,
            "",
        ]
    real = _table(
        rows,
        "real",
        lambda r: _with_ratio(f"{fmt_time(r['median_s'])}/{fmt_time(r.get('p99_s'))}", r),
        notes,
    )
    if real:
        out += [
            (
                "Real problems (bundled HumanEval), latency per problem: median/p99 over "
                "problems; (Nx) = speed-up of the median"
            ),
            "",
            *real,
            "",
        ]
    batch = _table(
        rows,
        "batch",
        _rate,
        notes,
    )
    if batch:
        tasks = next(
            (r.get("tasks") for r in rows if r["kind"] == "batch" and r.get("tasks")), None
        )
        out += [f"rerank_batch on {tasks} tasks: tasks per second", "", *batch, ""]
    scaling = _scaling(rows)
    if scaling:
        out += [
            (
                "Scaling with threads: tasks per second (batch) or time per call; (Nx) = "
                "speed-up over the same cell on one thread, per repetition, then the median"
            ),
            "",
            *scaling,
            "",
        ]
    if any("peak_extra_bytes" in r for r in rows):
        mem_rows = [dict(r, kind="memory") for r in rows if "peak_extra_bytes" in r]
        mem = _table(mem_rows, "memory", lambda r: fmt_bytes(r["peak_extra_bytes"]), notes)
        out += [
            (
                "Peak working memory beyond the input: peak RSS during one call above the "
                "RSS before it (outputs included; memory the process already held and reuses "
                "is not seen); real: the largest over problems; batch: the whole call"
            ),
            "",
        ]
        out += [*mem, ""]
    ratios_of = ", ".join(f"{op} vs {base}" for op, (_, base) in CALL_OPS.items())
    out.append(
        f"baselines: {ratios_of}; numpy-rankdata = baseline (a), torch-autograd = baseline (b)"
    )
    out += [f"[{i + 1}] {note}" for i, note in enumerate(notes)]
    return "\n".join(out)


# ---------------------------------------------------------------------------
# plot


def plot(report: dict[str, Any], path: str) -> None:
    """Median time per implementation, one log-scale panel per operation (x: family
    and size; solid: 1 thread, dashed: 2 threads; real cells at their median)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in report["cells"] if not r.get("skipped")]
    ops = [op for op in OPS if any(r["op"] == op for r in rows)]
    ncols = 3
    nrows = max(1, math.ceil((len(ops) + 1) / ncols))
    fig, axes = plt.subplots(nrows, ncols, figsize=(5.2 * ncols, 4.0 * nrows), squeeze=False)
    flat = list(axes.ravel())
    colors = dict(zip(BACKENDS + BASELINES, plt.rcParams["axes.prop_cycle"].by_key()["color"]))
    for ax, op in zip(flat, ops):
        here = [r for r in rows if r["op"] == op]
        xs: list[str] = []
        for r in sorted(here, key=_order):
            label = f"{r['family']}\n{r['size']}"
            if label not in xs:
                xs.append(label)
        for impl in BACKENDS + BASELINES:
            for threads, style, face in ((1, "-", None), (2, "--", "none")):
                pts = sorted(
                    (xs.index(f"{r['family']}\n{r['size']}"), r["median_s"])
                    for r in here
                    if r["impl"] == impl and r["threads"] == threads
                )
                if pts:
                    ax.plot(
                        [p[0] for p in pts],
                        [p[1] for p in pts],
                        style,
                        marker="o",
                        color=colors[impl],
                        markerfacecolor=face,
                        label=f"{impl} {threads}t",
                    )
        ax.set_yscale("log")
        ax.set_xticks(range(len(xs)))
        ax.set_xticklabels(xs, fontsize=6)
        title = CALL_OPS[op][0] if op in CALL_OPS else BATCH_OPS[op][0]
        ax.set_title(title, fontsize=10)
        ax.set_ylabel("median s per batch" if op in BATCH_OPS else "median s per call")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=6, ncol=2)
    text_ax = flat[len(ops)]
    text_ax.axis("off")
    lines = ["Targets (measured):"] + [
        f"{t['target']}\n    {t['shown']}  (goal {t['goal']}): {t['status']}"
        for t in report.get("targets", [])
    ]
    text_ax.text(
        0.0,
        1.0,
        "\n".join(lines),
        va="top",
        ha="left",
        fontsize=6,
        family="monospace",
        transform=text_ax.transAxes,
    )
    for ax in flat[len(ops) + 1 :]:
        ax.axis("off")
    m = report["machine"]
    fig.suptitle(
        f"aces_fast {report['versions']['aces_fast']} -- {m['cpu']}, "
        f"{m['usable_cores']} cores -- {report['date']}",
        fontsize=10,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
