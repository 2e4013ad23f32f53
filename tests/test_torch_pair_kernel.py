"""The surrogate's pair sums as one Triton kernel (:mod:`aces_fast.backends.torch.pair_kernel`),
the torch backend's opt-in route for CUDA tensors (``ACES_FAST_TORCH_TRITON=1``).

Without a GPU: when the kernel is chosen (CUDA, Triton importable, switched
on) and when not, and how a Triton failure reads. On a GPU (``cuda`` marker): the kernel against the eager
pair sums on fresh random inputs of many shapes, both branches and both
dtypes, every output written, the same bits on a second run; and ACES-O
through it against the eager route and the cpp backend, its Adam loop without
a host synchronization.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import aces_fast as af
from aces_fast.backends.torch import pair_kernel, surrogate
from aces_fast.backends.torch.fused import pair_terms
from helpers import load_tool, npy, random_matrix, require_backend, strict_adam_loop

CUDA = torch.device("cuda")  # a device object needs no GPU
CPU = torch.device("cpu")


@pytest.fixture
def with_triton(monkeypatch):
    """Triton taken as importable, the switch on."""
    monkeypatch.setitem(pair_kernel._kernels, "ok", True)
    monkeypatch.setenv(pair_kernel.TRITON_ENV_VAR, "1")


def test_the_kernel_runs_on_cuda_only(with_triton):
    assert pair_kernel.runs_kernel(5, 7, CUDA)
    assert surrogate.pair_route(False, 5, 7, CUDA) == "kernel"
    assert surrogate.pair_route(True, 500, 7, CUDA) == "kernel"  # over the fused mode
    assert not pair_kernel.runs_kernel(5, 7, CPU)
    assert surrogate.pair_route(False, 5, 7, CPU) == "chunks"


@pytest.mark.parametrize(("U", "m"), [(0, 4), (4, 0)])
def test_no_kernel_without_rows_or_tests(with_triton, U, m):
    assert not pair_kernel.runs_kernel(U, m, CUDA)


@pytest.mark.parametrize(
    ("value", "on"),
    [("0", False), ("", False), ("off", False), ("1", True), (" On ", True), ("yes", True)],
)
def test_the_switch_is_read_at_each_call(with_triton, monkeypatch, value, on):
    monkeypatch.setenv(pair_kernel.TRITON_ENV_VAR, value)
    assert pair_kernel.runs_kernel(5, 7, CUDA) is on
    assert surrogate.pair_route(False, 5, 7, CUDA) == ("kernel" if on else "chunks")


def test_a_misspelt_switch_is_an_error(with_triton, monkeypatch):
    monkeypatch.setenv(pair_kernel.TRITON_ENV_VAR, "2")
    with pytest.raises(ValueError, match="ACES_FAST_TORCH_TRITON='2' is not a switch"):
        surrogate.pair_route(False, 5, 7, CUDA)
    assert surrogate.pair_route(False, 5, 7, CPU) == "chunks"  # not read for the CPU


def test_no_kernel_without_triton(monkeypatch):
    import sys

    monkeypatch.delitem(pair_kernel._kernels, "ok", raising=False)
    monkeypatch.setitem(sys.modules, "triton", None)  # import triton -> ImportError
    monkeypatch.setenv(pair_kernel.TRITON_ENV_VAR, "1")
    assert not pair_kernel.triton_available()
    assert surrogate.pair_route(False, 5, 7, CUDA) == "chunks"


@pytest.mark.parametrize(
    ("T", "m", "tests"),
    [(1, 1, 1), (1, 2000, 1), (1, 8192, pair_kernel.TESTS), (200, 500, pair_kernel.TESTS)],
)
def test_tests_per_program(T, m, tests):
    assert pair_kernel.tests_per_program(T, m) == tests


class _TritonError(Exception):
    pass


_TritonError.__module__ = "triton.compiler.errors"


@pytest.mark.parametrize(
    ("error", "want"),
    [
        (
            _TritonError("no ptxas\nmore"),
            "Triton pair kernel failed \\(_TritonError: no ptxas\\); unset",
        ),
        (torch.OutOfMemoryError("out of memory"), "^out of memory$"),  # not Triton's: as it is
    ],
)
def test_a_kernel_failure_names_the_switch(monkeypatch, error, want):
    class Launcher:
        def __getitem__(self, grid):
            def launch(*args, **kwargs):
                raise error

            return launch

    monkeypatch.setitem(pair_kernel._kernels, "pair_sums", Launcher())
    T, U, m = 2, 3, 4
    sums = pair_kernel.PairSums(T, U, m, torch.float64, CPU)
    args = [torch.zeros(s, dtype=torch.float64) for s in [(T, U, U), (m, T), *[(m, T, U)] * 3]]
    args += [torch.zeros((m, T), dtype=torch.float64) for _ in range(3)]
    args += [torch.zeros((T, m), dtype=torch.float64).t(), torch.zeros((T, U), dtype=torch.float64)]
    with pytest.raises(type(error) if want.startswith("^") else RuntimeError, match=want):
        sums.run(args[:7], *args[7:], True)


# ---------------------------------------------------------------------------
# CUDA

cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


@pytest.mark.cuda
@cuda
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("exp_trick", [True, False])
def test_cuda_kernel_matches_the_eager_pair_sums(dtype, exp_trick):
    gen = torch.Generator().manual_seed(int(exp_trick) + 2 * (dtype == torch.float64))
    rtol = 1e-12 if dtype == torch.float64 else 1e-5
    shapes = [*itertools.product((1, 3), (1, 2, 31, 33, 70), (1, 2, 9)), (1, 300, 40)]
    shapes += [(64, 8, 200), (200, 24, 41)]  # TESTS tests per program
    tool = load_tool("triton_check")
    for T, U, m in shapes:
        args = tool.pair_inputs(T, U, m, exp_trick, gen, dtype=dtype, device=CUDA)
        want = pair_terms(*args, exp_trick=exp_trick)
        kernel = pair_kernel.PairSums(T, U, m, dtype, CUDA)
        runs = []
        for _ in range(2):
            excess, grad, cv = tool.pair_outputs(T, U, m, dtype=dtype, device=CUDA)
            kernel.run(args, excess, grad, cv, exp_trick)
            runs.append((excess, grad, cv))
            for got, ref in zip((excess, grad, cv), want):
                assert torch.isfinite(got).all(), (T, U, m)
                scale = ref.abs().max().clamp_min(torch.finfo(dtype).tiny)
                err = ((got - ref).abs().max() / scale).item()
                assert err <= rtol, (T, U, m, err)
        for a, b in zip(*runs):  # no atomics: the same bits again
            assert torch.equal(a, b), (T, U, m)


@pytest.mark.cuda
@cuda
@pytest.mark.parametrize(
    ("method", "top_k"), [("aces-o", None), ("aces-o", 24), ("aces-o-warm", None)]
)
def test_cuda_aces_o_through_the_kernel(monkeypatch, method, top_k):
    require_backend("cpp")
    strict_adam_loop(monkeypatch)
    rng = np.random.default_rng(7)
    mats = [random_matrix(rng, n, m) for n, m in [(40, 30), (90, 17), (7, 50), (120, 64)]]
    tasks = [torch.from_numpy(B).cuda() for B in mats]
    monkeypatch.setenv(pair_kernel.TRITON_ENV_VAR, "1")
    got = [af.rerank(B, method, backend="torch", top_k=top_k) for B in tasks]
    batch = af.rerank_batch(tasks, method, backend="torch", top_k=top_k)
    monkeypatch.delenv(pair_kernel.TRITON_ENV_VAR)
    eager = [af.rerank(B, method, backend="torch", top_k=top_k) for B in tasks]
    for k, B in enumerate(mats):
        want = af.rerank(B, method, backend="cpp", top_k=top_k)
        for res in (got[k], batch[k]):
            assert res.weights.device.type == "cuda"
            np.testing.assert_allclose(npy(res.weights), want.weights, rtol=0, atol=1e-9)
            np.testing.assert_allclose(npy(res.weights), npy(eager[k].weights), rtol=0, atol=1e-10)
            np.testing.assert_array_equal(npy(res.order), want.order)


@pytest.mark.parametrize("tests", [1, pair_kernel.TESTS])
def test_pair_config_is_what_the_kernel_takes(tests):
    """Every compile-time argument of the kernel, and the warps: wider programs
    (more tests) get more warps for their larger tiles."""
    config = pair_kernel.pair_config(tests, exp_trick=True)
    arg_names = ("EXP_TRICK", "TESTS", "ROWS", "COLS")
    assert set(config) == {*arg_names, "num_warps"}
    assert config["TESTS"] == tests and config["EXP_TRICK"] is True
    assert config["num_warps"] == (8 if tests > 1 else 4)
    assert not pair_kernel.pair_config(tests, exp_trick=False)["EXP_TRICK"]
