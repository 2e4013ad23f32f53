"""The torch backend's Triton kernels (aces_fast.backends.torch.pair_kernel and
count_kernels) against the torch paths they replace and the cpp backend.

Not part of the package: a checking script for the kernel's arithmetic. On a
machine without a GPU it runs the kernel under Triton's CPU interpreter
(``TRITON_INTERPRET=1``, CPU tensors; needs ``pip install triton``, minutes
for the larger cases); with ``--device cuda``, compiled on the GPU. It checks:

1. the kernel's three outputs against :func:`.fused.pair_terms` (eager) on
   fresh random inputs of many shapes, both branches, every output written,
   one test or ``TESTS`` tests per program, to 1e-12 relative;
2. ACES-O through the kernel (the route forced) against the cpp backend, one
   call and a batch: orders equal, weights within 1e-9;
3. the uniform LOO-AUC and row-score kernels against the torch paths on random
   padded batches (duplicate rows, constant tests, one row, one test): the
   same bits;
4. ACES-C through them (a stacked batch and one call) against cpp: orders
   equal, scores and weights within 1e-12.

    python tools/triton_check.py                  # CPU interpreter
    python tools/triton_check.py --device cuda    # the GPU
"""

from __future__ import annotations

import argparse
import itertools
import os
import sys
from typing import Any


def pair_inputs(
    T: int, U: int, m: int, exp_trick: bool, gen: Any, *, dtype: Any = None, device: Any = "cpu"
) -> list[Any]:
    """The seven arguments of :func:`.fused.pair_terms` as a
    :class:`.surrogate.Surrogate` makes them, for random scores of ``T`` tasks of
    ``U`` rows and ``m`` tests: multiplicities 0..2 (0: padding), some tests
    without pairs; float64 unless ``dtype``. Also used, with :func:`pair_outputs`
    and :func:`interpreter_ready`, by tools/triton_sweep.py and the cuda tests."""
    import torch

    s = 2 * torch.randn(T, U, 1, generator=gen, dtype=torch.float64)
    w = torch.rand(m, T, generator=gen, dtype=torch.float64)
    P, x = (torch.exp(s.transpose(1, 2) - s), torch.exp(w)) if exp_trick else (s - s.mT, w)
    B = (torch.rand(m, T, U, generator=gen) < 0.5).double()
    c = torch.randint(0, 3, (1, T, U), generator=gen).double()
    pt, ft = B * c, (1 - B) * c
    pairs = pt.sum(-1) * ft.sum(-1)
    safe = torch.where(pairs > 0, pairs, 1.0)
    raw = (P, x, ft, pt, pt / safe[:, :, None], -0.5 * (pairs > 0).double(), w / safe)
    return [t.to(device=device, dtype=dtype or torch.float64).contiguous() for t in raw]


def pair_outputs(T: int, U: int, m: int, *, dtype: Any = None, device: Any = "cpu") -> tuple:
    """``excess`` (m, T), ``grad`` (m, T, strided: a transposed (T, m)) and ``cv``
    (T, U) for :meth:`.pair_kernel.PairSums.run`, poisoned with nan so that an
    entry left unwritten shows; float64 unless ``dtype``."""
    import torch

    dtype = dtype or torch.float64
    nan = float("nan")
    return (
        torch.full((m, T), nan, dtype=dtype, device=device),
        torch.full((T, m), nan, dtype=dtype, device=device).t(),
        torch.full((T, U), nan, dtype=dtype, device=device),
    )


def interpreter_ready(tool: str, device: str) -> bool:
    """Set up ``tool`` (its name, for messages) to run the kernels on ``device``:
    on ``"cpu"``, Triton's interpreter (``TRITON_INTERPRET=1``, read when a kernel
    is defined, so before the first one is). ``False``, after one line on stderr
    saying why, when Triton does not import or its interpreter cannot run with
    this numpy."""
    if device == "cpu":
        os.environ["TRITON_INTERPRET"] = "1"
    from aces_fast.backends.torch import pair_kernel

    if not pair_kernel.triton_available():
        print(f"{tool}: Triton does not import here (pip install triton)", file=sys.stderr)
        return False
    if device == "cpu" and _interpreter_rejects_numpy():
        print(
            f"{tool}: the interpreter of Triton {_version('triton')} fails on numpy "
            f"{_version('numpy')} before it runs a kernel (a 1-element array where it "
            "wants a scalar); put numpy < 2.4 first on the path (pip install --target "
            "DIR numpy==2.2.6; PYTHONPATH=DIR) or use Triton 3.9",
            file=sys.stderr,
        )
        return False
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    args = parser.parse_args(argv)
    if not interpreter_ready("triton_check", args.device):
        return 2
    import numpy as np
    import torch

    import aces_fast as af
    from aces_fast.backends.torch import pair_kernel, surrogate
    from aces_fast.backends.torch.fused import pair_terms

    dev = torch.device(args.device)
    gen = torch.Generator().manual_seed(0)
    worst = 0.0
    cases = 0
    for T, U, m, exp_trick, tests in itertools.product(
        (1, 3), (1, 5, 33, 70), (1, 3, 9), (True, False), (1, pair_kernel.TESTS)
    ):
        inputs = pair_inputs(T, U, m, exp_trick, gen, device=dev)
        want = pair_terms(*inputs, exp_trick=exp_trick)
        sums = pair_kernel.PairSums(T, U, m, torch.float64, dev, tests=tests)
        outs = pair_outputs(T, U, m, device=dev)
        sums.run(inputs, *outs, exp_trick)
        for got, ref in zip(outs, want):
            if not torch.isfinite(got).all():
                print(f"FAIL: an output left unwritten at T={T} U={U} m={m}")
                return 1
            err = ((got - ref).abs().max() / ref.abs().max().clamp_min(1e-300)).item()
            worst = max(worst, err)
            if err > 1e-12:
                print(f"FAIL: T={T} U={U} m={m} exp_trick={exp_trick}: rel {err:.2e}")
                return 1
        cases += 1
    print(f"pair sums: {cases} cases, worst relative difference {worst:.1e}")

    surrogate.runs_kernel = lambda U, m, device: True  # type: ignore[assignment]
    rng = np.random.default_rng(1)
    mats = [(rng.random((n, m)) < 0.5).astype(np.uint8) for n, m in [(9, 7), (14, 10), (6, 5)]]
    worst = 0.0
    for top_k in (None, 4):
        ref = af.rerank_batch(mats, "aces-o", backend="cpp", steps=12, top_k=top_k)
        tasks = [torch.from_numpy(B).to(dev) for B in mats]
        batch = af.rerank_batch(tasks, "aces-o", backend="torch", steps=12, top_k=top_k)
        for k, B in enumerate(tasks):
            one = af.rerank(B, "aces-o", backend="torch", steps=12, top_k=top_k)
            for got in (one, batch[k]):
                if not np.array_equal(got.order.cpu().numpy(), ref[k].order):
                    print(f"FAIL: ACES-O order differs from cpp (task {k}, top_k={top_k})")
                    return 1
                worst = max(worst, float(np.abs(got.weights.cpu().numpy() - ref[k].weights).max()))
    if worst > 1e-9:
        print(f"FAIL: ACES-O weights differ from cpp by {worst:.1e}")
        return 1
    print(f"ACES-O through the kernel: orders as cpp's, weights within {worst:.1e}")
    return _check_count_kernels(dev)


def _check_count_kernels(dev: Any) -> int:
    """Sections 3 and 4 of the module docstring."""
    import numpy as np
    import torch

    import aces_fast as af
    from aces_fast.backends.torch import count_kernels, loo_auc, scores

    gen = torch.Generator().manual_seed(3)
    shapes = [(1, 1, 1), (1, 5, 3), (3, 9, 7), (4, 40, 33), (2, 200, 70), (5, 17, 130), (2, 64, 1)]
    if dev.type == "cuda":  # sizes the interpreter would take minutes over
        shapes += [(2, count_kernels.MAX_ROWS, 3), (300, 24, 100), (2, 200, 500)]
    cases = 0
    for (T, n, m), dup, density in itertools.product(shapes, (False, True), (0.0, 0.4, 1.0)):
        B = (torch.rand(T, n, m, generator=gen) < density).to(torch.uint8)
        if dup:
            B[:, 1::3] = B[:, :1]
        valid = torch.rand(T, n, generator=gen) < 0.8
        valid[:, 0] = True
        B, valid = B.to(dev), valid.to(dev)
        w = torch.rand(T, m, generator=gen, dtype=torch.float64).to(dev)
        for on in (False, True):
            count_kernels.runs_kernel = lambda U, m, device, on=on: on  # type: ignore[misc]
            got = (
                *loo_auc.loo_auc_uniform(B, None, chunk_elements=None),
                *loo_auc.loo_auc_uniform(B, valid, chunk_elements=None),
                scores.row_scores(B, w),
                scores.row_scores(B, w[0]),  # one weight vector for every task
                scores.row_scores(B[0].t().contiguous().t(), w[0]),  # a strided task
            )
            if not on:
                want = got
        for a, b in zip(got, want):
            if not torch.equal(torch.nan_to_num(a, nan=-7.0), torch.nan_to_num(b, nan=-7.0)):
                print(f"FAIL: a count kernel differs from the torch path at {T}x{n}x{m}")
                return 1
        cases += 1
    print(f"count kernels: {cases} batches, the same bits as the torch paths")

    count_kernels.runs_kernel = lambda U, m, device: True  # type: ignore[misc]
    rng = np.random.default_rng(2)
    stack = (rng.random((6, 30, 20)) < 0.5).astype(np.uint8)
    stack[:, 5] = stack[:, 4]
    ref = af.rerank_batch(stack, "aces-c", backend="cpp")
    got = af.rerank_batch(torch.from_numpy(stack).to(dev), "aces-c", backend="torch")
    one = af.rerank(torch.from_numpy(stack[0]).to(dev), "aces-c", backend="torch")
    worst = 0.0
    for k, res in [*enumerate(got), (0, one)]:
        if not np.array_equal(res.order.cpu().numpy(), ref[k].order):
            print(f"FAIL: ACES-C order differs from cpp (task {k})")
            return 1
        for a, b in ((res.scores, ref[k].scores), (res.weights, ref[k].weights)):
            worst = max(worst, float(np.abs(a.cpu().numpy() - b).max()))
    if worst > 1e-12:
        print(f"FAIL: ACES-C differs from cpp by {worst:.1e}")
        return 1
    print(f"ACES-C through the count kernels: orders as cpp's, values within {worst:.1e}")
    return 0


def _version(name: str) -> str:
    from importlib.metadata import version

    return version(name)


def _interpreter_rejects_numpy() -> bool:
    """Triton 3.6's interpreter (the GPU machine's version) with numpy 2.4: it takes
    ``int()`` of 1-element arrays, which numpy 2.4 refuses (2.3 warns). Seen with
    these two; Triton 3.9 with numpy 2.4 and Triton 3.6 with numpy 2.2 run."""
    major_minor = lambda v: tuple(int(x) for x in v.split(".")[:2])  # noqa: E731
    return major_minor(_version("triton")) <= (3, 6) and major_minor(_version("numpy")) >= (2, 4)


if __name__ == "__main__":
    sys.exit(main())
