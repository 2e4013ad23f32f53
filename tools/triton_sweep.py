"""The torch backend's Triton kernels in other tilings: each checked against the
package's own tiling, then timed on the GPU, so that one lent GPU call can
choose the defaults.

Not part of the package: a measuring script for a GPU machine. The kernels'
tile sizes and warps were set without a GPU (``pair_kernel.pair_config``,
``count_kernels.loo_config`` and ``scores_config``); every tiling below
compiles for sm_90 without spills (``tools/triton_aot.py --sweep``). For each
cell (the shapes of issue #22's goals) and each tiling it

1. runs the kernel on fresh random inputs and compares it with the package's
   tiling: the pair sums to 1e-12 relative in float64 (1e-5 in float32: the
   sums group in another order), the LOO-AUC and row-score kernels bit for
   bit (they count exactly in any order);
2. times it with ``triton.testing.do_bench`` (CUDA events, median), warm-up
   and compile excluded.

It prints a line per run as it goes, then one table per cell, fastest first,
the package's tiling marked ``*``; ``--json FILE`` keeps every number
(rewritten after each run, so a run cut short keeps what it measured).
``--device cpu`` runs only the checks, on small shapes, under Triton's CPU
interpreter (see tools/triton_check.py for the numpy it needs).

    python tools/triton_sweep.py                 # on the GPU
    PYTHONPATH=src python tools/triton_sweep.py --device cpu
"""

from __future__ import annotations

import argparse
import json
import sys
from functools import partial
from typing import Any

#: pair kernel tilings: (tests a program, passer rows, failer columns, warps)
PAIR_TILES = [
    (1, 32, 32, 4),
    (1, 32, 32, 8),
    (1, 16, 16, 2),
    (1, 32, 16, 4),
    (1, 32, 64, 8),
    (1, 64, 64, 8),
    (2, 32, 32, 4),
    (4, 32, 32, 8),
    (4, 16, 32, 4),
    (4, 16, 16, 4),
    (8, 16, 16, 4),
]
#: LOO-AUC kernel: (entries of a program's tile, warps)
LOO_TILES = [(1024, 4), (2048, 4), (2048, 8), (4096, 4), (4096, 8), (4096, 16), (8192, 16)]
#: row-score kernel: (rows, tests, warps) of a program
SCORE_TILES = [(16, 128, 4), (8, 128, 4), (32, 128, 4), (16, 64, 2), (16, 256, 8), (64, 64, 8)]

#: (label, T, U, m, dtype) of the pair kernel's cells: ACES-O batches keep the
#: top K = 24 rows, top_k=None keeps all
PAIR_CELLS = [
    ("batch ACES-O 200 x 200x500 K=24", 200, 24, 500, "float64"),
    ("one ACES-O 200x500 K=24", 1, 24, 500, "float64"),
    ("ACES-O top_k=None 2000x1000", 1, 2000, 1000, "float64"),
    ("ACES-O top_k=None 2000x1000 f32", 1, 2000, 1000, "float32"),
]
#: (label, T, n, m) of the LOO-AUC and row-score cells
COUNT_CELLS = [
    ("batch ACES-C 2000 x 200x500", 2000, 200, 500),
    ("batch ACES-C 20000 x 24x100", 20000, 24, 100),
    ("one ACES-C 200x500", 1, 200, 500),
]
#: the same, small enough for the interpreter
CPU_PAIR_CELLS = [("small", 2, 37, 9, "float64"), ("small f32", 1, 40, 5, "float32")]
CPU_COUNT_CELLS = [("small", 3, 45, 70), ("tall", 1, 300, 6)]


def _check_tool() -> Any:
    """tools/triton_check.py, whose random pair-sum inputs, poisoned outputs and
    interpreter set-up this sweep shares."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parent / "triton_check.py"
    spec = importlib.util.spec_from_file_location("triton_check", path)
    check = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(check)  # type: ignore[union-attr]
    return check


def _time(fn: Any, dev: Any) -> float:
    """Median milliseconds of ``fn()`` (CUDA events), or ``nan`` off the GPU."""
    if dev.type != "cuda":
        fn()
        return float("nan")
    import triton.testing

    return float(triton.testing.do_bench(fn, warmup=25, rep=200, return_mode="median"))


def _sweep_pair(cells: list[Any], dev: Any, gen: Any, record: Any) -> None:
    import torch

    check = _check_tool()
    from aces_fast.backends.torch import pair_kernel

    for label, T, U, m, dtype_name in cells:
        dtype = getattr(torch, dtype_name)
        # the exp trick's form, ACES-O's usual one
        inputs = check.pair_inputs(T, U, m, True, gen, dtype=dtype, device=dev)
        tol = 1e-12 if dtype == torch.float64 else 1e-5
        outputs = partial(check.pair_outputs, T, U, m, dtype=dtype, device=dev)
        ref = outputs()
        pair_kernel.PairSums(T, U, m, dtype, dev).run(inputs, *ref, True)
        default = pair_kernel.pair_config(pair_kernel.tests_per_program(T, m), True)
        for tests, r, c, warps in PAIR_TILES:
            tile = {"ROWS": r, "COLS": c, "num_warps": warps}
            sums = pair_kernel.PairSums(T, U, m, dtype, dev, tests=tests, tile=tile)
            out = outputs()
            sums.run(inputs, *out, True)
            err = max(
                float(((a - b).abs().max() / b.abs().max().clamp_min(1e-300)).item())
                for a, b in zip(out, ref)
            )
            if not all(bool(torch.isfinite(a).all()) for a in out):
                err = float("inf")  # an output left unwritten
            ms = _time(partial(sums.run, inputs, *out, True), dev)
            mine = (tests, r, c, warps) == (
                default["TESTS"],
                default["ROWS"],
                default["COLS"],
                default["num_warps"],
            )
            record(
                {"kernel": "pair", "cell": label, "tile": f"tests={tests} {r}x{c} w{warps}",
                 "ms": ms, "error": err, "ok": err <= tol, "default": mine}
            )  # fmt: skip


def _sweep_counts(cells: list[Any], dev: Any, gen: Any, record: Any) -> None:
    import torch

    from aces_fast.backends.torch import count_kernels, loo_auc, scores

    count_kernels.runs_kernel = lambda U, m, device: True  # type: ignore[assignment]
    same = lambda a, b: torch.equal(torch.nan_to_num(a, nan=-7.0), torch.nan_to_num(b, nan=-7.0))  # noqa: E731
    saved = (count_kernels._TILE, count_kernels._LOO_WARPS)
    saved_scores = (
        count_kernels._SCORE_ROWS,
        count_kernels._SCORE_TESTS,
        count_kernels._SCORE_WARPS,
    )
    try:
        for label, T, n, m in cells:
            B = (torch.rand(T, n, m, generator=gen) < 0.5).to(torch.uint8).to(dev)
            w = torch.rand(T, m, generator=gen, dtype=torch.float64).to(dev)
            count_kernels._TILE, count_kernels._LOO_WARPS = saved
            ref = loo_auc.loo_auc_uniform(B, None, chunk_elements=None)
            for tile, warps in LOO_TILES:
                count_kernels._TILE, count_kernels._LOO_WARPS = tile, warps
                got = loo_auc.loo_auc_uniform(B, None, chunk_elements=None)
                ok = all(same(a, b) for a, b in zip(got, ref))
                ms = _time(partial(loo_auc.loo_auc_uniform, B, None, chunk_elements=None), dev)
                record(
                    {"kernel": "loo", "cell": label, "tile": f"{tile} w{warps}", "ms": ms,
                     "error": 0.0 if ok else float("inf"), "ok": ok,
                     "default": (tile, warps) == saved}
                )  # fmt: skip
            count_kernels._TILE, count_kernels._LOO_WARPS = saved
            (
                count_kernels._SCORE_ROWS,
                count_kernels._SCORE_TESTS,
                count_kernels._SCORE_WARPS,
            ) = saved_scores
            ref_s = scores.row_scores(B, w)
            for r, t, warps in SCORE_TILES:
                count_kernels._SCORE_ROWS = r
                count_kernels._SCORE_TESTS = t
                count_kernels._SCORE_WARPS = warps
                ok = same(scores.row_scores(B, w), ref_s)
                ms = _time(partial(scores.row_scores, B, w), dev)
                record(
                    {"kernel": "scores", "cell": label, "tile": f"{r}x{t} w{warps}", "ms": ms,
                     "error": 0.0 if ok else float("inf"), "ok": ok,
                     "default": (r, t, warps) == saved_scores}
                )  # fmt: skip
    finally:
        count_kernels._TILE, count_kernels._LOO_WARPS = saved
        (
            count_kernels._SCORE_ROWS,
            count_kernels._SCORE_TESTS,
            count_kernels._SCORE_WARPS,
        ) = saved_scores


def _print(rows: list[dict[str, Any]]) -> None:
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault((row["kernel"], row["cell"]), []).append(row)
    for (kernel, cell), group in groups.items():
        base = next((r["ms"] for r in group if r["default"]), float("nan"))
        print(f"\n{kernel}: {cell}")
        print(f"  {'tiling':24} {'ms':>9} {'vs *':>6}  check")
        for r in sorted(group, key=lambda r: (not r["ok"], r["ms"] if r["ms"] == r["ms"] else 0)):
            mark = "*" if r["default"] else " "
            check = f"ok ({r['error']:.1e})" if r["ok"] else f"FAIL ({r['error']:.1e})"
            if r["ms"] == r["ms"]:  # timed (on a GPU)
                timing = f"{r['ms']:9.3f} {base / r['ms']:6.2f}"
            else:
                timing = f"{'-':>9} {'-':>6}"
            print(f"{mark} {r['tile']:24} {timing}  {check}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda", choices=["cpu", "cuda"])
    parser.add_argument("--json", help="write every row here")
    args = parser.parse_args(argv)
    if not _check_tool().interpreter_ready("triton_sweep", args.device):
        return 2
    import torch

    if args.device == "cuda" and not torch.cuda.is_available():
        print("triton_sweep: no CUDA device (--device cpu checks the tilings)", file=sys.stderr)
        return 2
    dev = torch.device(args.device)
    gen = torch.Generator().manual_seed(11)
    cpu = dev.type == "cpu"
    rows: list[dict[str, Any]] = []

    def record(row: dict[str, Any]) -> None:
        """Keep a run: one line now and the JSON rewritten, so that a step cut
        short by its time limit still leaves what it measured."""
        rows.append(row)
        ms = f"{row['ms']:9.3f} ms" if row["ms"] == row["ms"] else "        -   "
        verdict = "ok" if row["ok"] else "FAIL"
        print(f"{row['kernel']:6} {row['cell']:34} {row['tile']:22} {ms}  {verdict}", flush=True)
        if args.json:
            with open(args.json, "w") as fh:
                json.dump(rows, fh, indent=1)

    _sweep_pair(CPU_PAIR_CELLS if cpu else PAIR_CELLS, dev, gen, record)
    _sweep_counts(CPU_COUNT_CELLS if cpu else COUNT_CELLS, dev, gen, record)
    _print(rows)
    bad = [r for r in rows if not r["ok"]]
    for r in bad:
        print(f"triton_sweep: FAIL {r['kernel']} {r['cell']} {r['tile']}", file=sys.stderr)
    print(f"\ntriton_sweep: {len(rows)} runs, {len(bad)} failed checks")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
