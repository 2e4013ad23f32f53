"""``aces-fast bench`` (or ``python -m benchmarks``): run the pytest-benchmark suite
of a checkout and print medians, speed-ups, memory and the speed goals.

The suite in ``benchmarks/`` is the one timing mechanism; this command only
runs it and reads its JSON:

1. a timing run -- ``python -m pytest benchmarks --benchmark-enable
   --bench-rounds N --benchmark-json ...``: every cell ``N`` times, the
   repetitions of a group one after another, each running every implementation
   of the group (interleaved, so load changes hit all of them alike);
2. a memory run (unless ``--no-memory``) -- the same cells once more in a
   separate process with ``MALLOC_MMAP_THRESHOLD_=131072`` and
   ``--bench-memory``: the peak resident memory of one call above the resident
   memory before it;
3. the import time of ``aces_fast`` in fresh interpreters.

``--device cuda`` runs the device cells instead (:func:`.cells.device_cases`):
the torch backend on CUDA tensors (``torch-cuda``, synchronized after every
call) next to cpp on all of the host's cores, no memory run (resident memory
does not see the GPU's), then the cpp / cuda table and the GPU goals. Without
a CUDA device it stops before any run with one error line.

The tables show per cell the median over repetitions and the speed-up over the
group's baseline, computed repetition by repetition (both measured side by side)
and then the median. Speed goals are printed as measured / goal / status; they
are never asserted.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from . import cells, report, targets, workloads
from .memory import MMAP_THRESHOLD_ENV
from .runtime import measure_import_time

PROG = "aces-fast bench"
#: the suite directory this harness belongs to
SUITE_DIR = Path(__file__).resolve().parents[1]


def _choices(allowed: Sequence[Any], what: str, cast: Callable[[str], Any] = str):
    def parse(text: str) -> list[Any]:
        try:
            items = [cast(s.strip()) for s in text.split(",") if s.strip()]
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{what} must be a comma-separated list; got {text!r}"
            ) from None
        bad = [str(s) for s in items if s not in allowed]
        if bad or not items:
            raise argparse.ArgumentTypeError(
                f"unknown {what} {', '.join(bad) or '(none)'}; choose from "
                f"{', '.join(map(str, allowed))}"
            )
        return items

    return parse


def _positive(cast: Callable[[str], Any], what: str):
    def parse(text: str) -> Any:
        try:
            value = cast(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{what} must be a number; got {text!r}") from None
        if not value > 0:
            raise argparse.ArgumentTypeError(f"{what} must be > 0; got {text!r}")
        return value

    return parse


def check_output(path: str, flag: str, plot: bool = False) -> None:
    """ValueError now, before the runs, for an output file that could not be written
    at the end; the same rules as the other commands' outputs (missing folders
    are created when the file is written)."""
    from aces_fast.cli import _check_output

    _check_output(path, flag, plot=plot)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The ``bench`` options."""
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument(
        "--quick",
        action="store_true",
        help="the default: every cell not marked slow, plus the cells the speed "
        "goals read (LOO-AUC at 20000x1000)",
    )
    mode.add_argument(
        "--full",
        action="store_true",
        help="every cell, up to 20000x1000 (an hour or more on 2 cores)",
    )
    parser.add_argument(
        "--device",
        choices=cells.DEVICES,
        default="cpu",
        help="cpu: the CPU matrix (default); cuda: the torch backend on CUDA tensors "
        "next to cpp on all of the host's cores, and the GPU goals",
    )
    parser.add_argument(
        "--rounds",
        type=_positive(int, "--rounds"),
        default=3,
        metavar="N",
        help="repetitions of every cell, interleaved group by group (default 3)",
    )
    parser.add_argument(
        "--max-time",
        type=_positive(float, "--max-time"),
        metavar="SECONDS",
        help="pytest-benchmark time budget per measurement (default 0.1 quick, 0.5 full)",
    )
    parser.add_argument(
        "--ops",
        type=_choices(cells.SELECTABLE_OPS, "operation"),
        metavar="OP,...",
        help=f"operations ({', '.join(cells.SELECTABLE_OPS)}; {cells.STREAM_OP}: rerank-dataset "
        "on a synthetic Parquet file, tasks/s per thread count with its stages); default all",
    )
    parser.add_argument(
        "--families",
        type=_choices(workloads.FAMILIES, "family"),
        metavar="FAMILY,...",
        help=f"workload families ({', '.join(workloads.FAMILIES)}); default all",
    )
    parser.add_argument(
        "--sizes",
        type=_choices(cells.ALL_SIZES, "size"),
        metavar="NxM,...",
        help=f"synthetic sizes ({', '.join(cells.SIZES)}; {cells.ALL_SIZES[-1]} with "
        "--device cuda); given sizes run even when marked slow",
    )
    parser.add_argument(
        "--impls",
        type=_choices(cells.IMPLS + cells.DEVICE_IMPLS, "implementation"),
        metavar="NAME,...",
        help=f"implementations ({', '.join(cells.IMPLS)}; with --device cuda: "
        f"{', '.join(cells.CUDA_IMPLS)}); default all (a speed-up needs the operation's baseline)",
    )
    parser.add_argument(
        "--threads",
        type=_choices(cells.THREADS, "thread count", int),
        metavar="T,...",
        help="thread counts (1, 2); default both (--device cuda: cpp on all cores)",
    )
    parser.add_argument(
        "--no-memory",
        action="store_true",
        help="skip the memory run (peak working memory per cell)",
    )
    parser.add_argument(
        "--no-import-time", action="store_true", help="do not measure the import time of aces_fast"
    )
    parser.add_argument("--json", metavar="FILE", help="write the report as JSON")
    parser.add_argument("--plot", metavar="FILE.png", help="write a log-scale plot (matplotlib)")
    parser.add_argument(
        "--keep", metavar="DIR", help="keep the raw pytest-benchmark JSON and pytest logs in DIR"
    )
    parser.add_argument(
        "--benchmarks",
        metavar="DIR",
        type=Path,
        help="the benchmarks/ directory of a checkout (default: found from the current directory)",
    )
    parser.add_argument("-q", "--quiet", action="store_true", help="no pytest progress output")


#: ``-h`` text: plain words (the module docstring is reST for Sphinx readers)
DESCRIPTION = """\
Time aces_fast's backends against two baselines with the pytest-benchmark suite
of this checkout (benchmarks/), then print median times, speed-ups, peak memory
and the speed goals (measured, never asserted).

Three runs, one after another:
  1. timing: every selected cell --rounds times; each repetition runs all the
     implementations of a group back to back, so load changes hit them alike;
     a speed-up is taken per repetition, then the median;
  2. memory (unless --no-memory): the same cells once more in a separate
     process, peak resident memory of one call above the memory before it;
  3. the import time of aces_fast in fresh interpreters.

Quick mode (the default) took about 16 minutes on 2 shared cores; --full an
hour or more.
--device cuda times the torch backend on CUDA tensors next to cpp on all of
the host's cores (no memory run) and prints the cpp/cuda ratios and the GPU
goals; it stops with an error when no CUDA device is available.
Output files (--json, --plot) are checked before the runs start.
Details: benchmarks/README.md."""


def build_parser() -> argparse.ArgumentParser:
    from aces_fast.cli import Parser

    parser = Parser(
        prog=PROG, description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add_arguments(parser)
    return parser


def pytest_command(
    suite_dir: Path, args: argparse.Namespace, json_path: Path, memory: bool
) -> list[str]:
    """The pytest command line of the timing (``memory=False``) or memory run."""
    max_time = args.max_time if args.max_time is not None else (0.5 if args.full else 0.1)
    # hypothesis's plugin only slows the start-up: the suite has no property tests
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        str(suite_dir),
        "-p",
        "no:cacheprovider",
        "-p",
        "no:hypothesispytest",
        "-q",
        "--benchmark-enable",
        f"--benchmark-json={json_path}",
        f"--benchmark-max-time={max_time}",
    ]
    cmd.append("--bench-memory" if memory else f"--bench-rounds={args.rounds}")
    for option, values in (
        ("ops", args.ops),
        ("families", args.families),
        ("sizes", args.sizes),
        ("impls", args.impls),
        ("threads", args.threads),
    ):
        if values:
            cmd.append(f"--bench-{option}={','.join(map(str, values))}")
    if not args.full and not args.sizes:
        cmd += ["-m", "not slow or target"]
    if getattr(args, "device", "cpu") != "cpu":
        cmd.append(f"--bench-device={args.device}")
    return cmd


def check_device(args: argparse.Namespace) -> None:
    """ValueError now, before any run, for a device run that cannot happen here
    (no CUDA device) or options that do not apply to the device chosen."""
    from .runtime import device_unavailable_reason

    if args.device == "cpu":
        chosen = [i for i in args.impls or () if i in cells.DEVICE_IMPLS]
        if chosen:
            raise ValueError(f"--impls {','.join(chosen)} needs --device cuda")
        wrong = [s for s in args.sizes or () if s not in cells.SIZES]
        if wrong:
            raise ValueError(f"--sizes {','.join(wrong)} is a size of --device cuda only")
        return
    if args.threads:
        raise ValueError(
            f"--threads does not apply to --device {args.device}: cpp runs on all "
            f"{cells.host_cores()} of the host's cores"
        )
    wrong = [i for i in args.impls or () if i not in cells.CUDA_IMPLS]
    if wrong:
        raise ValueError(
            f"--device {args.device} compares {', '.join(cells.CUDA_IMPLS)}; not {', '.join(wrong)}"
        )
    if args.families and set(args.families) <= {"real"}:
        raise ValueError(f"--device {args.device} has no cells for the real family")
    reason = device_unavailable_reason(args.device)
    if reason is not None:
        raise ValueError(f"--device {args.device}: {reason}")


def _run_pytest(cmd: list[str], env: dict[str, str], cwd: Path, log: Path, echo: bool) -> int:
    """Run pytest, saving its output to ``log``; echo the progress lines (not
    pytest-benchmark's own table: the report below replaces it)."""
    with open(log, "w") as fh:
        proc = subprocess.Popen(
            cmd, env=env, cwd=str(cwd), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        assert proc.stdout is not None
        echoing = echo
        for line in proc.stdout:
            fh.write(line)
            if echoing and line.startswith("-----") and "benchmark" in line:
                echoing = False
            if echoing:
                print(line, end="", flush=True)
        return proc.wait()


def _suite_run(
    kind: str, cmd: list[str], env: dict[str, str], workdir: Path, suite_dir: Path, echo: bool
) -> dict[str, Any]:
    """Run the suite (``kind``: ``timing`` or ``memory``); its JSON report."""
    log = workdir / f"{kind}.log"
    if echo:
        print(f"{PROG}: {kind} run: {' '.join(cmd[1:])}", flush=True)
    rc = _run_pytest(cmd, env, suite_dir.parent, log, echo)
    if rc == 5:
        raise ValueError("no benchmark cell matches the selection (pytest collected nothing)")
    if rc != 0:
        tail = log.read_text().splitlines()[-25:]
        print("\n".join(tail), file=sys.stderr)
        raise ValueError(
            f"the benchmark suite's {kind} run failed (pytest exit status {rc}); "
            f"its output is in {log}"
        )
    return json.loads((workdir / f"{kind}.json").read_text())


def run(args: argparse.Namespace, suite_dir: Path | None = None) -> int:
    """Run the benchmark described by parsed ``args``; print the report; 0 on success.

    Raises ValueError for what the user must fix (missing pytest-benchmark or
    matplotlib, a selection matching nothing, a failing suite).
    """
    suite_dir = Path(args.benchmarks or suite_dir or SUITE_DIR).resolve()
    for module, why in (("pytest", "pytest"), ("pytest_benchmark", "pytest-benchmark")):
        if importlib.util.find_spec(module) is None:
            raise ValueError(
                f"the benchmark suite needs {why} (pip install pytest "
                "pytest-benchmark, or the project's test extra)"
            )
    check_device(args)
    device_run = args.device != "cpu"
    if args.plot and importlib.util.find_spec("matplotlib") is None:
        raise ValueError("--plot needs matplotlib (pip install matplotlib)")
    # the report is written after minutes of measuring: refuse a bad path now
    if args.json:
        check_output(args.json, "--json")
    if args.plot:
        check_output(args.plot, "--plot", plot=True)
    started = time.perf_counter()
    date = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    workdir = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="aces-bench-"))
    workdir.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    # numba's warm-up compiles every kernel (tens of seconds); the disk cache makes
    # the next run start at once. A user's explicit choice wins.
    env.setdefault("ACES_FAST_NUMBA_CACHE", "1")
    echo = not args.quiet
    commands = {"timing": pytest_command(suite_dir, args, workdir / "timing.json", False)}
    # resident memory does not see a GPU's: a device run has no memory run
    memory_run = not args.no_memory and not device_run
    if memory_run:
        commands["memory"] = pytest_command(suite_dir, args, workdir / "memory.json", True)
    timing = _suite_run("timing", commands["timing"], env, workdir, suite_dir, echo)
    memory = None
    if memory_run:
        name, value = MMAP_THRESHOLD_ENV
        memory = _suite_run(
            "memory", commands["memory"], dict(env, **{name: value}), workdir, suite_dir, echo
        )
    import_time = None if args.no_import_time else measure_import_time(cwd=str(workdir))
    facts = timing.get(report.HARNESS_KEY, {})
    rows = report.aggregate(timing, memory)
    stream = report.stream_rows(timing)
    versions = facts.get("versions", {})
    if device_run:
        goals = targets.evaluate_device(rows)
    else:
        goals = targets.evaluate(rows, versions.get("default_backend", "cpp"), import_time)
    full = {
        "date": date,
        "machine": facts.get("machine", {}),
        **({"device": facts.get("device", {})} if device_run else {}),
        "versions": versions,
        "settings": {
            "mode": "full" if args.full else "quick",
            **({"device": args.device} if device_run else {}),
            "rounds": args.rounds,
            "max_time_s": facts.get("max_time_s"),
            "runtimes": facts.get("runtimes"),
            "thread_pinning": facts.get("thread_pinning"),
            "thread_libraries": facts.get("thread_libraries"),
            "numba_cache": env.get("ACES_FAST_NUMBA_CACHE"),
            "commands": {k: " ".join(v[1:]) for k, v in commands.items()},
        },
        "import_time": import_time,
        "cells": rows,
        "stream": stream,
        "targets": goals,
        "elapsed_s": round(time.perf_counter() - started, 1),
    }
    print(_header(full))
    print(report.format_tables(rows))
    if stream:
        print("\n" + report.format_stream_table(stream))
    if device_run:
        print()
        print(report.format_device_table(rows))
        print("\nGPU goals of issue 22 (measured, never asserted):")
    else:
        print("\nSpeed goals (measured, never asserted):")
    print(targets.format_targets(goals))
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        with open(args.json, "w") as fh:
            json.dump(full, fh, indent=1)
        print(f"\nwrote {args.json}")
    if args.plot:
        Path(args.plot).parent.mkdir(parents=True, exist_ok=True)
        report.plot(full, args.plot)
        print(f"wrote {args.plot}")
    if args.keep:
        print(f"raw pytest-benchmark JSON and logs in {workdir}")
    else:
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


def _cpp_build(info: Any) -> str:
    """The cpp backend's SIMD level and OpenMP, or why it is absent (``ACES_FAST_SIMD``
    caps the level, so a run can stand in for a CPU without AVX-512 or AVX2)."""
    if not isinstance(info, dict):
        return f"cpp {info}"
    return (
        f"cpp kernels at SIMD level {info.get('simd')} "
        f"(ACES_FAST_SIMD={os.environ.get('ACES_FAST_SIMD', 'unset')}), "
        f"openmp={info.get('openmp')}"
    )


def _device_line(info: dict[str, Any]) -> str:
    """The GPU of a device run, or why there is none."""
    if info.get("unavailable") or not info.get("name"):
        return f"  device {info.get('device')}: {info.get('unavailable', 'unknown')}"
    return (
        f"  device {info['device']}: {info['name']} ({info.get('memory_gb')} GB, "
        f"compute capability {info.get('capability')}, CUDA {info.get('cuda')}, "
        f"torch {info.get('torch')}); no memory run"
    )


def _header(full: dict[str, Any]) -> str:
    m, v, s = full["machine"], full["versions"], full["settings"]
    libs = "  ".join(
        f"{k} {v[k]}"
        for k in ("python", "numpy", "scipy", "numba", "torch", "pytest_benchmark")
        if v.get(k)
    )
    return "\n".join(
        [
            "",
            (
                f"aces_fast {v.get('aces_fast')}  {full['date']}  {m.get('cpu')} "
                f"({m.get('usable_cores')} cores, load average "
                f"{' '.join(f'{x:.1f}' for x in m.get('load_average') or [])})"
            ),
            f"  {libs}",
            f"  default backend {v.get('default_backend')}; {_cpp_build(v.get('cpp_backend'))}",
            *([_device_line(full["device"])] if "device" in full else []),
            f"  threads pinned per cell via {s.get('thread_pinning')}",
            (
                f"  timing: pytest-benchmark, {s['rounds']} repetition(s) per cell interleaved group by "
                f"group, <= {s.get('max_time_s')} s each; median over repetitions"
            ),
            "  quick mode: cells marked slow are left out (--full runs them)"
            if s["mode"] == "quick"
            else "  full mode: every cell",
            "",
        ]
    )


def main(argv: Sequence[str] | None = None, suite_dir: Path | None = None) -> int:
    """Parse ``argv`` and :func:`run`; usage errors exit 2 through argparse."""
    return run(build_parser().parse_args(argv), suite_dir)


def console_main() -> int:
    """``python -m benchmarks``: :func:`main` with one error line instead of a traceback."""
    try:
        return main()
    except ValueError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
