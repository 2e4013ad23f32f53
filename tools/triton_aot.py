"""The torch backend's Triton kernels compiled ahead of time for a GPU target,
without a GPU: does every launch configuration compile, and does any spill?

Not part of the package: a checking script for a machine with Triton installed
(``pip install triton``; the GPU machine's image has Triton 3.6). It compiles
the kernels of :mod:`aces_fast.backends.torch.pair_kernel` and
:mod:`~aces_fast.backends.torch.count_kernels` with ``triton.compile`` for
``--arch`` (default ``90``: Hopper, H100 / H200), in the configurations the
package launches (their ``*_config`` functions), and reads each binary's
resources with the ``cuobjdump`` that Triton's wheel carries:

* ``regs``: registers a thread (65 536 per multiprocessor bound how many
  programs run at once);
* ``stack``: bytes a thread keeps in local memory -- registers spilled, or
  arrays the compiler could not keep in registers; each access is a trip to
  the cache hierarchy, so a configuration with a stack fails the check;
* ``shared``: shared memory a program.

It proves that the kernels compile for the target and how much they hold, not
that they are fast or right: ``tools/triton_check.py`` checks the arithmetic,
``tools/gpu_check.sh`` times them on a GPU. Integer arguments are compiled as
``i32`` without Triton's divisibility specializations, the general variant
(a launch may specialize further). Minutes of CPU for ``--all``.

    PYTHONPATH=src python tools/triton_aot.py            # the launch extremes
    PYTHONPATH=src python tools/triton_aot.py --all      # every LOO-AUC tile
    PYTHONPATH=src python tools/triton_aot.py --sweep    # tools/triton_sweep.py's
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any


def _cuobjdump() -> Path:
    import triton

    path = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
    if not path.exists():
        raise SystemExit(f"triton_aot: no cuobjdump in Triton's package ({path})")
    return path


def _resources(cubin: bytes, tool: Path) -> dict[str, int]:
    with tempfile.NamedTemporaryFile(suffix=".cubin") as fh:
        fh.write(cubin)
        fh.flush()
        out = subprocess.run(
            [str(tool), "--dump-resource-usage", fh.name], capture_output=True, text=True
        )
    found = re.search(r"REG:(\d+) STACK:(\d+) SHARED:(\d+) LOCAL:(\d+)", out.stdout)
    if found is None:
        raise SystemExit(f"triton_aot: cuobjdump printed no resources:\n{out.stdout}{out.stderr}")
    regs, stack, shared, local = map(int, found.groups())
    return {"regs": regs, "stack": stack + local, "shared": shared}


def _compile(fn: Any, signature: dict[str, str], config: dict[str, Any], arch: int) -> bytes:
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    consts = {k: v for k, v in config.items() if k != "num_warps"}
    sig = dict(signature, **dict.fromkeys(consts, "constexpr"))
    src = ASTSource(
        fn=fn,
        signature=sig,
        constexprs={(fn.arg_names.index(k),): v for k, v in consts.items()},
    )
    options = {"num_warps": config["num_warps"]}
    compiled = triton.compile(src, target=GPUTarget("cuda", arch, 32), options=options)
    return bytes(compiled.asm["cubin"])


def _cases(every_tile: bool) -> list[tuple[str, Any, dict[str, str], dict[str, Any]]]:
    """(label, kernel, argument types, launch configuration) of each compile."""
    from aces_fast.backends.torch import count_kernels as ck
    from aces_fast.backends.torch import pair_kernel as pk

    cases: list[tuple[str, Any, dict[str, str], dict[str, Any]]] = []
    pair = pk.kernel()
    floats = ("P_ptr", "x_ptr", "ft_ptr", "pt_ptr", "ptl_ptr", "nh_ptr", "wip_ptr")
    floats += ("excess_ptr", "grad_ptr", "uw_ptr", "col_ptr")
    for dtype in ("fp64", "fp32"):
        sig = dict.fromkeys(floats, f"*{dtype}")
        sig.update(grad_s0="i32", grad_s1="i32", T="i32", U="i32", m="i32")
        for tests in sorted({1, pk.TESTS}):
            for exp_trick in (True, False):
                label = f"pair {dtype} tests={tests} exp_trick={int(exp_trick)}"
                cases.append((label, pair, sig, pk.pair_config(tests, exp_trick)))
    kernels = ck.kernels()
    loo_sig = dict(B_ptr="*u8", sB0="i32", sB1="i32", sB2="i32", perm_ptr="*i64")
    loo_sig.update(real_ptr="*i8", shift_ptr="*i32", adj_ptr="*i32", end_ptr="*i8")
    loo_sig.update(start_ptr="*i32", prev_ptr="*i32", total_ptr="*fp64", L_ptr="*fp64")
    loo_sig.update(P_ptr="*i64", n="i32", m="i32")
    n = 1
    while n <= ck.MAX_ROWS:
        # m = 1 gives the narrowest tile of these rows, a large m the widest
        ms = [1 << k for k in range(14)] if every_tile else [1, 1 << 13]
        seen = set()
        for m in ms:
            config = ck.loo_config(n, m)
            key = (config["ROWS"], config["TESTS"])
            if key not in seen:
                seen.add(key)
                label = f"loo rows={config['ROWS']} tests={config['TESTS']}"
                cases.append((label, kernels["loo_uniform"], loo_sig, config))
        n *= 2
    score_sig = dict(B_ptr="*u8", sB0="i32", sB1="i32", sB2="i32", S_ptr="*fp64")
    score_sig.update(scale_ptr="*fp64", out_ptr="*fp64", n="i32", m="i32")
    cases.append(("row scores", kernels["slice_sums"], score_sig, ck.scores_config()))
    return cases


def _sweep_cases() -> list[tuple[str, Any, dict[str, str], dict[str, Any]]]:
    """The tilings tools/triton_sweep.py times, as compile cases (``--sweep``): the
    pair tilings in both precisions, the LOO-AUC tiles at the sweep's row
    counts and the tallest, the row-score tiles."""
    import importlib.util

    from aces_fast.backends.torch import count_kernels as ck

    path = Path(__file__).resolve().parent / "triton_sweep.py"
    spec = importlib.util.spec_from_file_location("triton_sweep", path)
    sweep = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(sweep)  # type: ignore[union-attr]
    base = {label: (fn, sig) for label, fn, sig, _ in _cases(False)}
    cases = []
    for dtype in ("fp64", "fp32"):
        fn, sig = base[f"pair {dtype} tests=1 exp_trick=1"]
        for tests, rows, cols, warps in sweep.PAIR_TILES:
            config = {"EXP_TRICK": True, "TESTS": tests, "ROWS": rows, "COLS": cols}
            label = f"pair {dtype} tests={tests} {rows}x{cols}"
            cases.append((label, fn, sig, dict(config, num_warps=warps)))
    fn, sig = base["loo rows=1 tests=1"]
    saved = ck._TILE, ck._LOO_WARPS
    try:
        for tile, warps in sweep.LOO_TILES:
            ck._TILE, ck._LOO_WARPS = tile, warps
            for n, m in {(n, m) for _, _, n, m in sweep.COUNT_CELLS} | {(ck.MAX_ROWS, 1)}:
                config = ck.loo_config(n, m)
                label = f"loo tile={tile} rows={config['ROWS']} tests={config['TESTS']}"
                cases.append((label, fn, sig, config))
    finally:
        ck._TILE, ck._LOO_WARPS = saved
    fn, sig = base["row scores"]
    for rows, tests, warps in sweep.SCORE_TILES:
        config = {"ROWS": rows, "TESTS": tests, "num_warps": warps}
        cases.append((f"row scores {rows}x{tests}", fn, sig, config))
    return cases


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--arch", type=int, default=90, help="compute capability x 10")
    parser.add_argument("--all", action="store_true", help="every LOO-AUC tile width")
    parser.add_argument(
        "--sweep", action="store_true", help="the tilings tools/triton_sweep.py times, instead"
    )
    args = parser.parse_args(argv)
    try:
        import triton
    except ImportError:
        print("triton_aot: Triton does not import here (pip install triton)", file=sys.stderr)
        return 2
    tool = _cuobjdump()
    print(f"triton_aot: Triton {triton.__version__}, sm_{args.arch}")
    print(f"{'kernel':40} {'warps':>5} {'regs':>5} {'stack':>6} {'shared':>7}")
    bad = []
    for label, fn, sig, config in _sweep_cases() if args.sweep else _cases(args.all):
        try:
            res = _resources(_compile(fn, sig, config, args.arch), tool)
        except Exception as exc:  # a compiler error: report it, go on
            first = str(exc).strip().splitlines()
            bad.append(f"{label}: {type(exc).__name__}: {first[0] if first else ''}")
            print(f"{label:40} {config['num_warps']:>5}  FAILED to compile", flush=True)
            continue
        if res["stack"]:
            bad.append(f"{label}: {res['stack']} bytes of stack a thread")
        print(
            f"{label:40} {config['num_warps']:>5} {res['regs']:>5} {res['stack']:>6}"
            f" {res['shared']:>7}",
            flush=True,
        )
    for line in bad:
        print(f"triton_aot: {line}", file=sys.stderr)
    print(f"triton_aot: {'FAIL' if bad else 'ok'}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
