"""Would fused kernels reach issue 22's ACES-O goal? A measurement, not a feature.

Not part of the package. The torch backend's ACES-O step materializes the
(tests, U, U) pair tensors sigma and sigma' and reduces them with batched
mat-vecs: about ten passes over 4e9 float64 entries a step for ``top_k=None``
at 2 000 x 1 000, 7.7 s for 91 steps on an H200 (docs/benchmarks.md). This
probe times the same three reductions of one step,

    sig_f[j, p]  = sum_f c_f [f fails j] sigma(g (s_p - s_f) - x_j)
    dsig_f[j, p] = sum_f c_f [f fails j] sigma'(...)
    dsig_p[j, f] = sum_p c_p [p passes j] sigma'(...)

eagerly (materialized, as the backend does) and through ``torch.compile``
(inductor fuses the sigmoid into the reductions: no pair tensor in memory), in
float64 and float32, checks that both agree, and prints milliseconds per step
and the projection for 91 steps. On CPU it runs small shapes to check itself.

    python tools/gpu_fusion_probe.py                 # on a GPU: U = 2000, m = 1000
    python tools/gpu_fusion_probe.py --device cpu --u 60 --m 40 --chunk 10
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any


def _reductions(s: Any, x: Any, pt: Any, ft: Any, gamma: float) -> tuple[Any, Any, Any]:
    """(sig_f, dsig_f, dsig_p) for tests ``x`` (k,), passer / failer weights
    ``pt``, ``ft`` (k, U), scores ``s`` (U,)."""
    z = gamma * (s[None, :, None] - s[None, None, :]) - x[:, None, None]  # (k, p, f)
    sig = z.sigmoid()
    dsig = sig * (1 - sig)
    sig_f = (sig * ft[:, None, :]).sum(-1)
    dsig_f = (dsig * ft[:, None, :]).sum(-1)
    dsig_p = (dsig * pt[:, :, None]).sum(-2)
    return sig_f, dsig_f, dsig_p


def _step(fn: Any, s: Any, x: Any, pt: Any, ft: Any, gamma: float, chunk: int) -> list[Any]:
    out = []
    for a in range(0, x.shape[0], chunk):
        out.append(fn(s, x[a : a + chunk], pt[a : a + chunk], ft[a : a + chunk], gamma))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--u", type=int, default=2000, help="distinct rows U")
    parser.add_argument("--m", type=int, default=1000, help="tests")
    parser.add_argument("--chunk", type=int, default=100, help="tests per chunk")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)

    import torch

    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print("gpu_fusion_probe: no CUDA device")
        return 2
    dev = torch.device(args.device)

    def sync() -> None:
        if dev.type == "cuda":
            torch.cuda.synchronize()

    gen = torch.Generator(device="cpu").manual_seed(22)
    B = (torch.rand(args.u, args.m, generator=gen) < 0.5).double()
    w = torch.rand(args.m, generator=gen, dtype=torch.float64)
    w /= w.sum()
    gamma = 10.0
    failed = False
    print(f"{'dtype':<9}{'way':<10}{'first s':>9}{'ms/step':>10}{'91 steps s':>12}  max rel diff")
    for dtype in (torch.float64, torch.float32):
        s = (B @ w).to(dev, dtype)
        x = (gamma * w).to(dev, dtype)
        pt = B.t().contiguous().to(dev, dtype)
        ft = (1 - B).t().contiguous().to(dev, dtype)
        compiled = torch.compile(_reductions, dynamic=False)
        ways = {"eager": _reductions, "compiled": compiled}
        ref = None
        for name, fn in ways.items():
            tick = time.perf_counter()
            out = _step(fn, s, x, pt, ft, gamma, args.chunk)
            sync()
            first = time.perf_counter() - tick
            best = float("inf")
            for _ in range(args.repeats):
                tick = time.perf_counter()
                out = _step(fn, s, x, pt, ft, gamma, args.chunk)
                sync()
                best = min(best, time.perf_counter() - tick)
            flat = torch.cat([torch.cat([t.reshape(-1) for t in o]) for o in out])
            diff = 0.0
            if ref is None:
                ref = flat
            else:
                diff = float(((flat - ref).abs().max() / ref.abs().max()).item())
                failed |= not diff < (1e-10 if dtype == torch.float64 else 1e-4)
            dname = str(dtype).replace("torch.", "")
            print(
                f"{dname:<9}{name:<10}{first:>9.2f}{best * 1e3:>10.2f}{best * 91:>12.2f}  {diff:.1e}"
            )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
