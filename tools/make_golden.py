"""Pin the bundled-data results before a refactor: ``python tools/make_golden.py``.

Writes ``tests/golden/bundled.json``: for every bundled dataset, backend and
``rerank`` method, a SHA-256 digest of each result array over all problems
(scores, weights, order, loo_auc, objective) and the ``evaluate`` Pass@k
numbers. ``tests/test_golden.py`` recomputes them: the cpp backend must match
bit for bit, every backend's orders and Pass@k exactly.

Run it only on a commit whose results are known good; a refactor that is meant
to change nothing must leave the file untouched. ``--only BACKEND`` recomputes
one backend's entries and keeps the others (a change meant to move one
backend's last bits), and prints which fields changed.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

import numpy as np

import aces_fast as af
from aces_fast.datasets import BUNDLED, load_dataset
from aces_fast.evaluation import evaluate

OUT = Path(__file__).resolve().parent.parent / "tests" / "golden" / "bundled.json"
FIELDS = ("scores", "weights", "order", "loo_auc", "objective")
# numpy's ACES-O takes ~0.3-1 s per CodeGen problem: pinned on the small dataset only
SKIP = {
    ("numpy", "humaneval-codegen16b", "aces-o"),
    ("numpy", "humaneval-codegen16b", "aces-o-warm"),
}


def digests(dataset, method: str, backend: str) -> dict:
    hashes = {f: hashlib.sha256() for f in FIELDS}
    for prob in dataset:
        res = af.rerank(prob.B, method, backend=backend)
        for f in FIELDS:
            value = getattr(res, f)
            if value is None:
                hashes[f].update(b"-")
                continue
            arr = np.asarray(value.detach().cpu().numpy() if hasattr(value, "detach") else value)
            arr = np.ascontiguousarray(arr, dtype=np.int64 if f == "order" else np.float64)
            hashes[f].update(arr.tobytes())
    return {f: h.hexdigest() for f, h in hashes.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--only", metavar="BACKEND", help="recompute this backend's entries, keep the others"
    )
    args = parser.parse_args(argv)
    backends = [b for b in ("cpp", "numba", "torch", "numpy") if b in af.available_backends()]
    if args.only is not None:
        if args.only not in backends:
            parser.error(f"backend {args.only!r} is not available here")
        out = json.loads(OUT.read_text())
        backends = [args.only]
    else:
        out = {"backends": backends, "datasets": {}}
    for name in BUNDLED:
        ds = load_dataset(name)
        entry: dict = out["datasets"].setdefault(name, {"digests": {}, "evaluate": {}})
        for backend in backends:
            methods = [m for m in af.METHODS if (backend, name, m) not in SKIP]
            old = entry["digests"].get(backend, {})
            entry["digests"][backend] = {m: digests(ds, m, backend) for m in methods}
            for m in methods:
                changed = [
                    f for f in FIELDS if old.get(m, {}).get(f) != entry["digests"][backend][m][f]
                ]
                if changed:
                    print(f"{name} {backend} {m}: changed {', '.join(changed)}", file=sys.stderr)
            ev = evaluate(ds, ["random", *methods, "oracle"], backend=backend)
            d = ev.to_dict()
            new_ev = {"all": d["all"], "mixed": d["mixed"]}
            if entry["evaluate"].get(backend, new_ev) != new_ev:
                print(f"{name} {backend}: evaluate changed", file=sys.stderr)
            entry["evaluate"][backend] = new_ev
            print(f"{name} {backend}: done", file=sys.stderr)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(out, indent=1, sort_keys=True) + "\n")
    print(f"wrote {OUT}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
