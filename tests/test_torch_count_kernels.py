"""ACES-C's passes as Triton kernels (:mod:`aces_fast.backends.torch.count_kernels`),
opt-in for CUDA tensors with ``ACES_FAST_TORCH_TRITON=1``.

Without a GPU: when each kernel is chosen, and how a failure reads. On a GPU
(``cuda`` marker): tools/triton_check.py (both kernels give the same bits as
the torch paths they replace on fresh random padded batches, the pair kernel
matches the eager sums), and ACES-C through them equals cpp.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import aces_fast as af
from aces_fast.backends.torch import count_kernels, loo_auc, pair_kernel, scores
from helpers import load_tool, npy, require_backend

CUDA = torch.device("cuda")  # a device object needs no GPU


def _B(*shape, device=CUDA):
    return SimpleNamespace(shape=shape, device=device, dim=lambda: len(shape))


@pytest.fixture
def switched_on(monkeypatch):
    monkeypatch.setitem(pair_kernel._kernels, "ok", True)  # Triton taken as importable
    monkeypatch.setenv(pair_kernel.TRITON_ENV_VAR, "1")


def test_loo_kernel_is_chosen_on_cuda_with_the_switch(switched_on, monkeypatch):
    assert count_kernels.runs_loo(_B(3, 200, 500), None)
    assert count_kernels.runs_loo(_B(1, count_kernels.MAX_ROWS, 1), None)
    assert not count_kernels.runs_loo(_B(1, count_kernels.MAX_ROWS + 1, 5), None)
    assert not count_kernels.runs_loo(_B(3, 20, 5), torch.ones(3, 20))  # multiplicities
    assert not count_kernels.runs_loo(_B(3, 20, 0), None)
    assert not count_kernels.runs_loo(_B(3, 20, 5, device=torch.device("cpu")), None)
    monkeypatch.setenv(pair_kernel.TRITON_ENV_VAR, "0")
    assert not count_kernels.runs_loo(_B(3, 200, 500), None)


def test_scores_kernel_is_chosen_on_cuda_with_the_switch(switched_on, monkeypatch):
    w, w3 = torch.zeros(500), torch.zeros((3, 500))
    assert count_kernels.runs_scores(_B(200, 500), w)
    assert count_kernels.runs_scores(_B(3, 200, 500), w3)
    assert count_kernels.runs_scores(_B(3, 200, 500), w)  # one vector for every task
    assert not count_kernels.runs_scores(_B(200, 500), w3)  # B broadcast over w's tasks
    assert not count_kernels.runs_scores(_B(2, 3, 200, 500), w3)  # one leading dimension
    assert not count_kernels.runs_scores(_B(3, 200, 500, device=torch.device("cpu")), w3)
    monkeypatch.delenv(pair_kernel.TRITON_ENV_VAR)
    assert not count_kernels.runs_scores(_B(3, 200, 500), w3)


def test_cpu_tensors_never_reach_a_kernel(switched_on, monkeypatch):
    def fail(*args, **kwargs):
        raise AssertionError("a CPU tensor reached a Triton kernel")

    monkeypatch.setattr(count_kernels, "kernels", fail)
    B = torch.from_numpy((np.random.default_rng(0).random((2, 6, 5)) < 0.5).astype(np.uint8))
    loo_auc.loo_auc_uniform(B)
    scores.row_scores(B, torch.rand(2, 5, dtype=torch.float64))


def test_a_kernel_failure_names_the_kernel_and_the_switch(monkeypatch):
    class CompileError(Exception):
        pass

    CompileError.__module__ = "triton.compiler.errors"

    class Launcher:
        def __getitem__(self, grid):
            def fail(*args, **kwargs):
                raise CompileError("no ptxas")

            return fail

    monkeypatch.setattr(count_kernels, "kernels", lambda: {"slice_sums": Launcher()})
    B = torch.zeros((2, 3, 4), dtype=torch.uint8)
    slices, scale = scores.weight_slices(torch.rand(2, 4, dtype=torch.float64))
    with pytest.raises(
        RuntimeError, match=r"Triton row-score kernel failed .*unset ACES_FAST_TORCH_TRITON"
    ):
        count_kernels.row_scores(B, slices, scale)


# ---------------------------------------------------------------------------
# CUDA

cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


@pytest.mark.cuda
@cuda
def test_cuda_kernels_give_the_torch_paths_bits():
    """tools/triton_check.py on the GPU: the pair sums against the eager ones, ACES-O
    and ACES-C through the kernels against cpp, and the LOO-AUC and row-score
    kernels bit for bit with the torch paths on fresh padded batches (up to
    MAX_ROWS rows, strided tasks, one weight vector for a batch)."""
    require_backend("cpp")
    assert load_tool("triton_check").main(["--device", "cuda"]) == 0


@pytest.mark.cuda
@cuda
def test_cuda_aces_c_through_the_kernels(monkeypatch):
    require_backend("cpp")
    monkeypatch.setenv(pair_kernel.TRITON_ENV_VAR, "1")
    rng = np.random.default_rng(5)
    stack = (rng.random((50, 200, 60)) < 0.5).astype(np.uint8)
    stack[:, 7] = stack[:, 3]
    want = af.rerank_batch(stack, "aces-c", backend="cpp")
    got = af.rerank_batch(torch.from_numpy(stack).cuda(), "aces-c", backend="torch")
    for k in range(len(stack)):
        np.testing.assert_array_equal(npy(got[k].order), want[k].order)
        np.testing.assert_allclose(npy(got[k].scores), want[k].scores, rtol=0, atol=1e-12)


@pytest.mark.parametrize("n", [1, 2, 3, 24, 100, 200, 257, count_kernels.MAX_ROWS])
@pytest.mark.parametrize("m", [1, 5, 100, 500, 2000, 100_000])
def test_loo_tile_holds_the_task(n, m):
    """The LOO-AUC tile holds every row of a task (the prefix sums run down one
    tile), is a power of two each way (tl.arange), and stays within the tile
    size whose compiled code keeps its counts in registers (tools/triton_aot.py)."""
    config = count_kernels.loo_config(n, m)
    rows, tests = config["ROWS"], config["TESTS"]
    assert n <= rows < 2 * n
    assert rows & (rows - 1) == 0 and tests & (tests - 1) == 0
    assert rows * tests <= count_kernels._TILE
    assert tests <= max(1, 2 * m - 1)  # never twice wider than the tests
    assert rows * tests == count_kernels._TILE or tests >= m
