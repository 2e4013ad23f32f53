"""The part writers side by side: microseconds per problem to turn one batch's
results into a part file's bytes and hash them (what a dataset run's ranking
threads do after ranking), the compiled writer against pyarrow's, alternated in
one process.

``python -m benchmarks.harness.part_writer`` ranks ``--problems`` planted
problems of ``--shape`` once per method, then times each writer ``--rounds``
times (medians; the ratio is pyarrow's time over the compiled writer's) and the
bytes each writes.
"""

from __future__ import annotations

import argparse
import hashlib
import statistics
import sys
import time

import numpy as np


def _tables(problems: int, n: int, m: int, methods: list[str]) -> dict[str, object]:
    import pyarrow as pa

    from aces_fast._engine import rerank_table
    from aces_fast._registry import method_params
    from aces_fast.parquet import pack_rows, schema
    from benchmarks.harness.stream_scale import planted_chunk

    rng = np.random.default_rng(0)
    B, y = planted_chunk(rng, problems, n, m)
    batch = pa.RecordBatch.from_pydict(
        {
            "task_id": [f"task/{i}" for i in range(problems)],
            "n": pa.array(np.full(problems, n, np.int32)),
            "m": pa.array(np.full(problems, m, np.int32)),
            "B": [pack_rows(b) for b in B],
            "labels": pa.array([row.tolist() for row in y], pa.list_(pa.uint8())),
        },
        schema=schema(labels=True, test_count=False),
    )
    out = {}
    for method in methods:
        params = method_params(method, {"steps": 10} if method.startswith("aces-o") else {})
        table, _, _ = rerank_table(batch, method, params, has_labels=True)
        out[method] = table.replace_schema_metadata({b"aces_fast": b'{"bench": 1}'})
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--problems", type=int, default=2048)
    ap.add_argument("--shape", default="100x50", help="n x m of every problem")
    ap.add_argument("--methods", default="aces-c,majority,codet,aces-c-filter")
    ap.add_argument("--rounds", type=int, default=30)
    args = ap.parse_args(argv)
    from aces_fast import _parts

    n, m = (int(x) for x in args.shape.lower().split("x"))
    tables = _tables(args.problems, n, m, args.methods.split(","))
    writers = {
        "compiled": _parts._encode_compiled,
        "pyarrow": _parts._encode_pyarrow,
    }
    print(
        f"part writers, {args.problems} problems of {n}x{m} a part, {args.rounds} rounds "
        "alternated: encode + SHA-256, microseconds per problem (median)"
    )
    print(f"{'method':16s} {'compiled':>9s} {'pyarrow':>9s} {'ratio':>6s}  bytes/problem")
    for method, table in tables.items():
        times: dict[str, list[float]] = {w: [] for w in writers}
        sizes = {}
        for _ in range(args.rounds):
            for name, encode in writers.items():
                tick = time.perf_counter()
                data = encode(table)
                hashlib.sha256(data).hexdigest()
                times[name].append(time.perf_counter() - tick)
                sizes[name] = len(memoryview(data))
        us = {w: statistics.median(t) / args.problems * 1e6 for w, t in times.items()}
        print(
            f"{method:16s} {us['compiled']:9.2f} {us['pyarrow']:9.2f} "
            f"{us['pyarrow'] / us['compiled']:5.2f}x  "
            f"{sizes['compiled'] / args.problems:.0f} / {sizes['pyarrow'] / args.problems:.0f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
