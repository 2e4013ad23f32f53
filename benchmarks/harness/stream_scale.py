"""Synthetic Parquet pass-matrix datasets of any size, and the streaming throughput
measurement behind the README's numbers.

``write_synthetic`` writes problems chunk by chunk (memory bounded by the chunk),
from a planted model: each candidate is correct with probability 0.3; each test
is right with probability 0.7 (a correct candidate passes it with probability
0.95, a wrong one with 0.2) or wrong (everyone passes with probability 0.5).

``python -m benchmarks.harness.stream_scale --problems 1000000`` writes such a dataset
(100 x 50 by default) and times, each ``--repeat`` times: in-memory
``rerank_batch`` on chunks of the same problems (``memory``: 1 and 2 threads),
the local streaming engine (``local1``, ``local2``: threads; ``io1``, ``io2``: the
same with the ranking left out, its floor) and the Ray engine
(``ray1``, ``ray2``: a new local cluster of that many CPUs, start-up timed
apart); each streaming run is a fresh subprocess whose peak RSS is reported.
The outputs of earlier runs are moved aside, not deleted, until the last run
(``runtime.SetAside``: deleting a thousand files just before a run slows the
file creations of the run on ext4 without a journal).
``--engines resume``: the cost of ``--resume`` on a run stopped when
``--resume-done`` of its batches were committed (it checks the input's and
every part's checksum, then ranks only the rest).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np


def planted_chunk(rng: np.random.Generator, count: int, n: int, m: int):
    """``(B uint8 (count, n, m), labels uint8 (count, n))`` from the planted model."""
    y = rng.random((count, n)) < 0.3
    right = rng.random((count, 1, m)) < 0.7
    p = np.where(right, np.where(y[:, :, None], 0.95, 0.2), 0.5)
    B = (rng.random((count, n, m)) < p).astype(np.uint8)
    return B, y.astype(np.uint8)


def write_synthetic(
    path: Any,
    problems: int,
    n: int = 100,
    m: int = 50,
    *,
    seed: int = 0,
    labels: bool = True,
    row_group_size: int = 4096,
    compression: str = "zstd",
    first_id: int = 0,
) -> None:
    """Write ``problems`` planted problems of shape (n, m) in the Parquet layout,
    task ids ``task/{first_id}`` onwards (files of one dataset written apart
    take distinct ``first_id`` and ``seed``)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from aces_fast.parquet import schema

    sch = schema(labels=labels, test_count=False)
    rng = np.random.default_rng(seed)
    nb = (m + 7) // 8
    with pq.ParquetWriter(
        str(path), sch, compression=compression, write_page_checksum=True
    ) as writer:
        for start in range(0, problems, row_group_size):
            count = min(row_group_size, problems - start)
            packed, ys = [], []
            for s in range(0, count, 1024):  # bounds the float temporaries
                B, y = planted_chunk(rng, min(1024, count - s), n, m)
                packed.append(np.packbits(B, axis=2).reshape(-1))
                ys.append(y.reshape(-1))
            offsets = (np.arange(count + 1, dtype=np.int64) * n * nb).astype(np.int32)
            cols = [
                pa.array([f"task/{first_id + start + i}" for i in range(count)], pa.string()),
                pa.array(np.full(count, n, np.int32)),
                pa.array(np.full(count, m, np.int32)),
                pa.Array.from_buffers(
                    pa.binary(),
                    count,
                    [None, pa.py_buffer(offsets), pa.py_buffer(np.concatenate(packed))],
                ),
            ]
            if labels:
                loff = (np.arange(count + 1, dtype=np.int64) * n).astype(np.int32)
                cols.append(
                    pa.ListArray.from_arrays(
                        pa.array(loff), pa.array(np.concatenate(ys), pa.uint8())
                    )
                )
            writer.write_table(pa.Table.from_arrays(cols, schema=sch))


def read_matrices(path: Any, limit: int | None = None) -> list[np.ndarray]:
    """The pass matrices of a Parquet file, unpacked in memory (for comparisons)."""
    from aces_fast.parquet import decode_batch, open_file

    out: list[np.ndarray] = []
    for batch in open_file(path).iter_batches(batch_size=8192):
        out.extend(decode_batch(batch, 0).B)
        if limit is not None and len(out) >= limit:
            return out[:limit]
    return out


# ---------------------------------------------------------------------------
# the measurement


_CHILD = """
import json, sys, time
from benchmarks.harness.memory import peak_bytes
from aces_fast.stream import rerank_dataset
kw = json.loads(sys.argv[1])
startup = 0.0
cpus = kw.pop("ray_cpus", None)
if cpus:  # start the local cluster first: its start-up is reported apart
    import aces_fast.ray
    tick = time.perf_counter()
    aces_fast.ray.init(num_cpus=cpus)
    startup = time.perf_counter() - tick
if kw.pop("no_kernel", False):  # the I/O floor: each batch size ranked once, then reused
    import threading
    from aces_fast.backends.cpp import CppBackend
    real_rank, ranked, lock = CppBackend.rerank_packed, {}, threading.Lock()
    def rerank_packed(self, packed, *a, **k):
        key = len(packed.task_id)
        with lock:  # the ranking threads' first batches: one ranks, the others reuse
            if key not in ranked:
                ranked[key] = real_rank(self, packed, *a, **k)
            return ranked[key]
    CppBackend.rerank_packed = rerank_packed
stop = kw.pop("stop_after", None)
if stop is not None:  # stop (as on Ctrl-C) after that many commits: a partial output
    from aces_fast._commit import ResultsDir
    real, count = ResultsDir.commit, [0]
    def commit(self, *a, **k):
        if count[0] == stop:
            raise KeyboardInterrupt
        count[0] += 1
        return real(self, *a, **k)
    ResultsDir.commit = commit
    try:
        rerank_dataset(**kw)
    except KeyboardInterrupt:
        pass
    print(json.dumps({"stopped_after": count[0]}))
    sys.exit(0)
s = rerank_dataset(**kw)
if cpus:
    s.timings["startup"] = startup
print(json.dumps({"seconds": s.seconds, "written": s.written, "timings": s.timings,
                  "batch_size": s.batch_size, "peak_rss": peak_bytes(False)}))
"""


def run_stream_child(**kwargs: Any) -> dict[str, Any]:
    """One streaming run in a fresh interpreter: its summary and peak RSS (bytes)."""
    kwargs = {k: str(v) if isinstance(v, Path) else v for k, v in kwargs.items()}
    # the child imports the harness, which is importable from the checkout's root
    root = str(Path(__file__).resolve().parents[2])
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)
    )
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD, json.dumps(kwargs)],
        capture_output=True,
        text=True,
        check=False,
        env=env,
    )
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _in_memory(path: Path, method: str, threads: int, chunk: int) -> float:
    """Tasks/s of rerank_batch alone on the file's problems (unpacked beforehand,
    ``chunk`` problems at a time so memory stays bounded; unpacking not timed)."""
    from aces_fast.batch import rerank_batch
    from aces_fast.parquet import decode_batch, open_file

    total = 0.0
    count = 0
    for batch in open_file(path).iter_batches(batch_size=chunk):
        Bs = decode_batch(batch, 0).B
        tick = time.perf_counter()
        rerank_batch(Bs, method, n_threads=threads)
        total += time.perf_counter() - tick
        count += len(Bs)
    return count / total


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--problems", type=int, default=100_000)
    ap.add_argument("--n", type=int, default=100)
    ap.add_argument("--m", type=int, default=50)
    ap.add_argument("--method", default="aces-c")
    ap.add_argument(
        "--batch-size",
        type=int,
        default=None,
        help="rows per batch (default: the library's 'auto')",
    )
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--no-labels", action="store_true")
    ap.add_argument(
        "--engines",
        default="memory,local1,local2,ray1,ray2",
        help="any of memory, local1, local2, ray1, ray2, io1, io2 (the local engine "
        "with the ranking left out: each batch size ranked once and its results "
        "reused, so read, Pass@k, encode and commit alone), resume (a run stopped "
        "at --resume-done, then the --resume alone timed)",
    )
    ap.add_argument(
        "--resume-done",
        type=float,
        default=0.99,
        help="fraction of the batches done before the timed --resume",
    )
    ap.add_argument("--dir", default="/tmp/aces_fast_stream_bench")
    ap.add_argument("--json", help="write all measurements to this file")
    args = ap.parse_args(argv)

    from aces_fast.stream import DEFAULT_BATCH_SIZE

    batch: int | str = args.batch_size or DEFAULT_BATCH_SIZE
    work = Path(args.dir)
    work.mkdir(parents=True, exist_ok=True)
    src = work / f"in_{args.problems}_{args.n}x{args.m}{'_nolab' if args.no_labels else ''}.parquet"
    if not src.exists():
        tick = time.perf_counter()
        write_synthetic(src, args.problems, args.n, args.m, labels=not args.no_labels)
        print(
            f"wrote {src} ({src.stat().st_size / 1e6:.0f} MB) in "
            f"{time.perf_counter() - tick:.1f} s",
            flush=True,
        )
    from aces_fast._engine import auto_batch_size
    from aces_fast._input import open_inputs
    from aces_fast.stream import LocalEngine
    from benchmarks.harness.runtime import SetAside, host_line

    # the in-memory and resume cells count rows: "auto" as a two-thread run sizes it
    rows_per_batch = (
        batch
        if isinstance(batch, int)
        else auto_batch_size(open_inputs(src)[0], LocalEngine().batches_in_flight(2))
    )

    host = host_line()
    print(host, flush=True)
    rows: dict[str, Any] = {"host": host}
    with SetAside(work) as set_aside:  # not deleted between runs (see SetAside)
        for rep in range(args.repeat):
            for engine in args.engines.split(","):
                out = work / f"out_{engine}.parquet"
                set_aside(out)
                if engine == "memory":
                    for t in (1, 2):
                        tps = _in_memory(src, args.method, t, rows_per_batch)
                        rows.setdefault(f"memory{t}", []).append(
                            {"tasks_per_s": tps, "load": os.getloadavg()[0]}
                        )
                        print(
                            f"[{rep}] rerank_batch in memory, {t} thread(s): {tps:,.0f} tasks/s "
                            f"(load {os.getloadavg()[0]:.1f})",
                            flush=True,
                        )
                    continue
                kw: dict[str, Any] = dict(
                    path_in=src, path_out=out, method=args.method, batch_size=batch, progress=False
                )
                if engine == "resume":  # a run stopped at --resume-done, then --resume timed
                    commits = -(-args.problems // rows_per_batch)
                    run_stream_child(
                        path_in=src,
                        path_out=out,
                        method=args.method,
                        batch_size=rows_per_batch,
                        progress=False,
                        stop_after=int(commits * args.resume_done),
                    )
                    res = run_stream_child(
                        path_in=src,
                        path_out=out,
                        method=args.method,
                        batch_size=rows_per_batch,
                        progress=False,
                        resume=True,
                    )
                    res["load"] = os.getloadavg()[0]
                    rows.setdefault(engine, []).append(
                        dict(res, tasks_per_s=res["written"] / res["seconds"])
                    )
                    print(
                        f"[{rep}] resume at {args.resume_done:.0%} done: {res['seconds']:.2f} s "
                        f"({res['written']:,} ranked), peak RSS {res['peak_rss'] / 2**20:.0f} MiB, "
                        f"load {res['load']:.1f}",
                        flush=True,
                    )
                    continue
                if engine.startswith("local"):
                    kw["n_threads"] = int(engine[5:])
                elif engine.startswith("io"):  # the pipeline with the ranking itself left out
                    kw.update(n_threads=int(engine[2:]), no_kernel=True)
                else:  # "rayK": a new local cluster of K CPUs, one single-threaded task each
                    kw.update(engine="ray", n_threads=1, ray_cpus=int(engine[3:]))
                res = run_stream_child(**kw)
                res["tasks_per_s"] = res["written"] / res["seconds"]
                rows.setdefault(engine, []).append(res)
                stages = ", ".join(f"{k} {v:.1f}" for k, v in res["timings"].items())
                res["load"] = os.getloadavg()[0]
                print(
                    f"[{rep}] {engine}: {res['tasks_per_s']:,.0f} tasks/s, {res['seconds']:.1f} s, "
                    f"peak RSS {res['peak_rss'] / 2**20:.0f} MiB, load {res['load']:.1f}, "
                    f"batches of {res['batch_size']:,}; stages (s): {stages}",
                    flush=True,
                )
    print("\nsummary (tasks/s: median, min-max over repeats)")
    for name, rs in rows.items():
        if name == "host":
            continue
        v = sorted(r["tasks_per_s"] for r in rs)
        print(f"  {name:10s} {v[len(v) // 2]:>10,.0f}   {v[0]:,.0f}-{v[-1]:,.0f}")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
